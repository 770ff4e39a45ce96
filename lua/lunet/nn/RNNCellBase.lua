-- nn.RNNCellBase: what nn.RNNCell, nn.LSTMCell and nn.GRUCell share, as
-- PyTorch 1.13's: parameters weight_ih {G*H, in}, weight_hh {G*H, H},
-- bias_ih and bias_hh {G*H} (G gates), all uniform in +-1/sqrt(H); input
-- (N, in) or unbatched (in); the state (N, H) or (H), zeros when not given.
local lunet = require 'lunet'
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local steps = require 'lunet.nn.rnn_steps'
local is_tensor = lunet.is_tensor
local shape = steps.shape

local RNNCellBase = Module:extend('nn.RNNCellBase')

-- (called by the subclasses' __init: mode 'RNN_TANH', 'RNN_RELU', 'LSTM' or 'GRU')
function RNNCellBase:_setup(fn, mode, input_size, hidden_size, opts)
  for _, c in ipairs({ { 'input_size', input_size, 0 }, { 'hidden_size', hidden_size, 1 } }) do
    local v = c[2]
    if not (type(v) == 'number' and v % 1 == 0 and v >= c[3] and v < 2 ^ 31) then
      options.fail(fn, ('%s must be an integer >= %d, got %s'):format(c[1], c[3], tostring(v)))
    end
  end
  self.input_size, self.hidden_size, self.mode = input_size, hidden_size, mode
  self.bias = opts.bias ~= false
  local G, o = steps.GATES[mode], { dtype = opts.dtype, device = opts.device }
  self:register_parameter('weight_ih', lunet.empty({ G * hidden_size, input_size }, o))
  self:register_parameter('weight_hh', lunet.empty({ G * hidden_size, hidden_size }, o))
  if self.bias then
    self:register_parameter('bias_ih', lunet.empty({ G * hidden_size }, o))
    self:register_parameter('bias_hh', lunet.empty({ G * hidden_size }, o))
  end
  self:reset_parameters()
end

function RNNCellBase:reset_parameters()
  local bound = 1 / math.sqrt(self.hidden_size)
  lunet.no_grad(function()
    for _, p in ipairs(self:parameters()) do p:uniform_(-bound, bound) end
  end)
end

-- x as (N, in) and whether it was unbatched; checks x
function RNNCellBase:_input(x)
  local fn = self.__name
  if not is_tensor(x) then options.fail(fn, 'input must be a tensor, got ' .. type(x)) end
  if x.ndim ~= 1 and x.ndim ~= 2 then
    options.fail(fn, ('expected input to be 1-D or 2-D but received %d-D tensor'):format(x.ndim))
  end
  if x.dtype ~= self.weight_ih.dtype then
    options.fail(fn, ('input is %s but the weights are %s; cast one first'):format(x.dtype, self.weight_ih.dtype))
  end
  if x:size(-1) ~= self.input_size then
    options.fail(fn, ('input has %d features, expected input_size %d'):format(x:size(-1), self.input_size))
  end
  if x.ndim == 1 then return x:unsqueeze(1), true end
  return x, false
end

-- the state h (or c) for x (N, in) (x0 the input as given): checked and made 2-D, or zeros
function RNNCellBase:_state(what, h, x, x0, unbatched)
  local fn = self.__name
  if h == nil then return x:new_zeros(x:size(1), self.hidden_size) end
  if not is_tensor(h) then options.fail(fn, what .. ' must be a tensor, got ' .. type(h)) end
  if h.dtype ~= x.dtype then options.fail(fn, ('%s is %s but the input is %s'):format(what, h.dtype, x.dtype)) end
  local want = unbatched and { self.hidden_size } or { x:size(1), self.hidden_size }
  if h.ndim ~= #want or h:size(1) ~= want[1] or h:size(-1) ~= self.hidden_size then
    options.fail(fn, ('%s must have shape {%s} for input of shape %s, got %s')
      :format(what, table.concat(want, ', '), shape(x0), shape(h)))
  end
  return unbatched and h:unsqueeze(1) or h
end

-- the input's projection x W_ih^T + b_ih
function RNNCellBase:_gi(x) return F.linear(x, self.weight_ih, self.bias_ih) end

function RNNCellBase:extra_repr()
  local s = ('%d, %d'):format(self.input_size, self.hidden_size)
  if not self.bias then s = s .. ', bias=False' end
  if self.mode == 'RNN_RELU' then s = s .. ', nonlinearity=relu' end
  return s
end

return RNNCellBase
