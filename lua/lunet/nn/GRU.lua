-- nn.GRU(input_size, hidden_size[, {num_layers = 1, bias = true, batch_first = false,
-- dropout = 0, bidirectional = false, dtype, device}]), or PyTorch's positional
-- (num_layers, bias, batch_first, dropout, bidirectional): per layer and step
-- torch's GRU cell (lunet.nn.GRUCell). out, h_n = gru(x[, h0]) (shapes: lunet.nn.RNNBase).
local RNNBase = require 'lunet.nn.RNNBase'
local options = require 'lunet.options'

local GRU = RNNBase:extend('nn.GRU')

function GRU:__init(input_size, hidden_size, ...)
  local fn = 'nn.GRU'
  local o = options.check(fn, options.positional(fn, RNNBase.POSITIONAL, ...), RNNBase.OPTS) or {}
  self:_setup(fn, 'GRU', input_size, hidden_size, o)
end

function GRU:forward(x0, h0)
  local out, hn = self:_forward(x0, h0)
  return out, hn
end

return GRU
