-- nn.GroupNorm(num_groups, num_channels[, {eps = 1e-5, affine = true, dtype, device}]):
-- input (N, C, ...) with any number of trailing dims; each sample's channels
-- are split into num_groups groups normalised with their own mean and biased
-- variance, then scaled and shifted per channel by weight (ones) and bias
-- (zeros) when affine, as PyTorch. Positional (num_groups, num_channels, eps, affine) too.
local lunet = require 'lunet'
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local raise = options.raise

local GroupNorm = Module:extend('nn.GroupNorm')

local OPTS = { eps = 'number', affine = 'boolean', dtype = true, device = true }
local POSITIONAL = { 'eps', 'affine' }

local function count(what, v)
  if type(v) ~= 'number' or v % 1 ~= 0 or v < 1 or v >= 2 ^ 53 then
    options.fail('nn.GroupNorm', ('%s must be an integer >= 1, got %s'):format(what, tostring(v)))
  end
end

function GroupNorm:__init(num_groups, num_channels, ...)
  count('num_groups', num_groups)
  count('num_channels', num_channels)
  if num_channels % num_groups ~= 0 then
    options.fail('nn.GroupNorm', ('num_channels %d must be divisible by num_groups %d'):format(num_channels, num_groups))
  end
  local opts = options.check('nn.GroupNorm', options.positional('nn.GroupNorm', POSITIONAL, ...), OPTS) or {}
  self.num_groups, self.num_channels = num_groups, num_channels
  self.eps = F._internal.need_eps('nn.GroupNorm', opts.eps)
  self.affine = opts.affine ~= false
  if self.affine then
    local o = { dtype = opts.dtype, device = opts.device }
    self:register_parameter('weight', lunet.ones({ num_channels }, o))
    self:register_parameter('bias', lunet.zeros({ num_channels }, o))
  end
end

function GroupNorm:reset_parameters()
  if self.weight then lunet.no_grad(function() self.weight:fill_(1); self.bias:fill_(0) end) end
end

function GroupNorm:forward(x)
  if require('lunet.tensor').is_tensor(x) and x:dim() >= 2 and x:size(2) ~= self.num_channels then
    raise(('nn.GroupNorm: input has %d channels, expected %d'):format(x:size(2), self.num_channels))
  end
  return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)
end

function GroupNorm:extra_repr()
  local r = self.num_groups .. ' groups, ' .. self.num_channels .. ' channels'
  if self.eps ~= 1e-5 then r = r .. ', eps ' .. self.eps end
  if not self.affine then r = r .. ', affine false' end
  return r
end

return GroupNorm
