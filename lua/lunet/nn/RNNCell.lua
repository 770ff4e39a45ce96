-- nn.RNNCell(input_size, hidden_size[, {bias = true, nonlinearity = 'tanh', dtype, device}])
-- (or PyTorch's positional bias, nonlinearity): h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh),
-- act tanh or relu. cell(x[, h]): x (N, in) or (in), h (N, H) or (H), zeros
-- when not given; returns h'.
local RNNCellBase = require 'lunet.nn.RNNCellBase'
local options = require 'lunet.options'
local steps = require 'lunet.nn.rnn_steps'

local RNNCell = RNNCellBase:extend('nn.RNNCell')

local OPTS = { bias = 'boolean', nonlinearity = 'string', dtype = true, device = true }
local POSITIONAL = { 'bias', 'nonlinearity' }

function RNNCell:__init(input_size, hidden_size, ...)
  local fn = 'nn.RNNCell'
  local o = options.check(fn, options.positional(fn, POSITIONAL, ...), OPTS) or {}
  options.one_of(fn, 'nonlinearity', o.nonlinearity, { 'tanh', 'relu' })
  self.nonlinearity = o.nonlinearity or 'tanh'
  self:_setup(fn, self.nonlinearity == 'relu' and 'RNN_RELU' or 'RNN_TANH', input_size, hidden_size, o)
end

function RNNCell:forward(x0, h)
  local x, unbatched = self:_input(x0)
  h = self:_state('hx', h, x, x0, unbatched)
  local h2 = steps[self.mode](self:_gi(x), h, self.weight_hh, self.bias_hh)
  if unbatched then return h2:squeeze(1) end
  return h2
end

return RNNCell
