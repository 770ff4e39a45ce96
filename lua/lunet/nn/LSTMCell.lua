-- nn.LSTMCell(input_size, hidden_size[, {bias = true, dtype, device}]) (or
-- PyTorch's positional bias): gates i, f, g, o in torch's order,
-- c' = f c + i g, h' = o tanh(c'). cell(x[, {h, c}]): x (N, in) or (in), h
-- and c (N, H) or (H), zeros when not given; returns {h', c'} (a list where
-- torch returns a tuple).
local RNNCellBase = require 'lunet.nn.RNNCellBase'
local options = require 'lunet.options'
local steps = require 'lunet.nn.rnn_steps'
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)

local LSTMCell = RNNCellBase:extend('nn.LSTMCell')

local OPTS, POSITIONAL = { bias = 'boolean', dtype = true, device = true }, { 'bias' }

function LSTMCell:__init(input_size, hidden_size, ...)
  local fn = 'nn.LSTMCell'
  local o = options.check(fn, options.positional(fn, POSITIONAL, ...), OPTS) or {}
  self:_setup(fn, 'LSTM', input_size, hidden_size, o)
end

function LSTMCell:forward(x0, hx)
  local x, unbatched = self:_input(x0)
  local h, c
  if hx ~= nil then
    if not is_table(hx) or #hx ~= 2 then
      options.fail(self.__name, 'hx must be {h, c}, a list of two tensors, got ' .. (is_table(hx) and
        ('a list of %d'):format(#hx) or type(hx) == 'table' and 'a tensor' or type(hx)))
    end
    h, c = hx[1], hx[2]
  end
  h = self:_state('h', h, x, x0, unbatched)
  c = self:_state('c', c, x, x0, unbatched)
  local h2, c2 = steps.LSTM(self:_gi(x), h, self.weight_hh, self.bias_hh, c)
  if unbatched then return { h2:squeeze(1), c2:squeeze(1) } end
  return { h2, c2 }
end

return LSTMCell
