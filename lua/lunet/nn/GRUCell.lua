-- nn.GRUCell(input_size, hidden_size[, {bias = true, dtype, device}]) (or
-- PyTorch's positional bias): gates r, z, n in torch's order and formula,
-- n = tanh(W_in x + b_in + r (W_hn h + b_hn)), h' = (1 - z) n + z h.
-- cell(x[, h]): x (N, in) or (in), h (N, H) or (H), zeros when not given; returns h'.
local RNNCellBase = require 'lunet.nn.RNNCellBase'
local options = require 'lunet.options'
local steps = require 'lunet.nn.rnn_steps'

local GRUCell = RNNCellBase:extend('nn.GRUCell')

local OPTS, POSITIONAL = { bias = 'boolean', dtype = true, device = true }, { 'bias' }

function GRUCell:__init(input_size, hidden_size, ...)
  local fn = 'nn.GRUCell'
  local o = options.check(fn, options.positional(fn, POSITIONAL, ...), OPTS) or {}
  self:_setup(fn, 'GRU', input_size, hidden_size, o)
end

function GRUCell:forward(x0, h)
  local x, unbatched = self:_input(x0)
  h = self:_state('hx', h, x, x0, unbatched)
  local h2 = steps.GRU(self:_gi(x), h, self.weight_hh, self.bias_hh)
  if unbatched then return h2:squeeze(1) end
  return h2
end

return GRUCell
