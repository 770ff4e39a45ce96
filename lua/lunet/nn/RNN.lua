-- nn.RNN(input_size, hidden_size[, {num_layers = 1, nonlinearity = 'tanh', bias = true,
-- batch_first = false, dropout = 0, bidirectional = false, dtype, device}]), or PyTorch's
-- positional (num_layers, nonlinearity, bias, batch_first, dropout, bidirectional):
-- h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) per layer, act tanh or relu.
-- out, h_n = rnn(x[, h0]) (shapes: lunet.nn.RNNBase).
local RNNBase = require 'lunet.nn.RNNBase'
local options = require 'lunet.options'

local RNN = RNNBase:extend('nn.RNN')

local OPTS = { nonlinearity = 'string' }
for k, v in pairs(RNNBase.OPTS) do OPTS[k] = v end
local POSITIONAL = { 'num_layers', 'nonlinearity', 'bias', 'batch_first', 'dropout', 'bidirectional' }

function RNN:__init(input_size, hidden_size, ...)
  local fn = 'nn.RNN'
  local o = options.check(fn, options.positional(fn, POSITIONAL, ...), OPTS) or {}
  options.one_of(fn, 'nonlinearity', o.nonlinearity, { 'tanh', 'relu' })
  self.nonlinearity = o.nonlinearity or 'tanh'
  self:_setup(fn, self.nonlinearity == 'relu' and 'RNN_RELU' or 'RNN_TANH', input_size, hidden_size, o)
end

function RNN:forward(x0, h0)
  local out, hn = self:_forward(x0, h0)
  return out, hn
end

return RNN
