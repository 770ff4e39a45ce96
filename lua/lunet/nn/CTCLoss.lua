-- nn.CTCLoss([{blank = 1, reduction = 'mean', zero_infinity = false}]): the
-- connectionist temporal classification loss of log_probs (T, N, C) or (T, C)
-- against unaligned targets, (N, S) padded or 1-d concatenated, with their
-- input_lengths and target_lengths (integer tensors or tables). Labels and
-- blank are 1-based (torch's blank 0 is lunet's 1). 'mean' divides each
-- sample's loss by its target length (at least 1), then averages;
-- zero_infinity: an impossible alignment's inf loss (and its gradient) is 0.
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local CTCLoss = Module:extend('nn.CTCLoss')
local NAME, L = 'nn.CTCLoss', F._internal.ctc

function CTCLoss:__init(opts) self.opts = L.ctc_opts(NAME, opts) end

function CTCLoss:forward(log_probs, targets, input_lengths, target_lengths)
  return L.ctc_loss(NAME, log_probs, targets, input_lengths, target_lengths, self.opts)
end

function CTCLoss:extra_repr()
  local o = self.opts
  local s = 'blank ' .. o.blank
  if o.reduction ~= 'mean' then s = s .. ", reduction '" .. o.reduction .. "'" end
  if o.zero_infinity then s = s .. ', zero_infinity' end
  return s
end

return CTCLoss
