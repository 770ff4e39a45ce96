-- nn.LSTM(input_size, hidden_size[, {num_layers = 1, bias = true, batch_first = false,
-- dropout = 0, bidirectional = false, proj_size = 0, dtype, device}]), or PyTorch's
-- positional (num_layers, bias, batch_first, dropout, bidirectional, proj_size): per
-- layer and step torch's LSTM cell (lunet.nn.LSTMCell), h projected by weight_hr
-- when proj_size > 0. out, {h_n, c_n} = lstm(x[, {h0, c0}]) (a list where torch
-- has a tuple; shapes: lunet.nn.RNNBase; x may be a PackedSequence).
local RNNBase = require 'lunet.nn.RNNBase'
local options = require 'lunet.options'
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)

local LSTM = RNNBase:extend('nn.LSTM')

function LSTM:__init(input_size, hidden_size, ...)
  local fn = 'nn.LSTM'
  local o = options.check(fn, options.positional(fn, RNNBase.POSITIONAL, ...), RNNBase.OPTS) or {}
  self:_setup(fn, 'LSTM', input_size, hidden_size, o)
end

function LSTM:forward(x0, hx)
  local h0, c0
  if hx ~= nil then
    if not is_table(hx) or #hx ~= 2 then
      options.fail(self.__name, 'hx must be {h0, c0}, a list of two tensors, got ' .. (is_table(hx) and
        ('a list of %d'):format(#hx) or type(hx) == 'table' and 'a tensor' or type(hx)))
    end
    h0, c0 = hx[1], hx[2]
  end
  local out, hn, cn = self:_forward(x0, h0, c0)
  return out, { hn, cn }
end

return LSTM
