-- nn.init: parameter initialisers through lunet's seeded RNG, as torch.nn.init.
local options = require 'lunet.options'
local init = {}

-- fan_in, fan_out of a weight (out, in, k...) as PyTorch computes them
function init.fans(w)
  local s = w:size()
  if #s < 2 then error('init: fan in/out need a weight of at least 2 dims', 3) end
  local rf = 1
  for i = 3, #s do rf = rf * s[i] end
  return s[2] * rf, s[1] * rf
end

-- torch.nn.init.calculate_gain's table; another name is an error (it was
-- taken as gain 1, and selu's 3/4 too)
local GAINS = { linear = 1, conv1d = 1, conv2d = 1, conv3d = 1, conv_transpose1d = 1, conv_transpose2d = 1,
  conv_transpose3d = 1, sigmoid = 1, tanh = 5 / 3, relu = math.sqrt(2), selu = 3 / 4 }
local GAIN_NAMES = 'linear, conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d, sigmoid, tanh, relu, leaky_relu, selu'
function init.calculate_gain(nonlinearity, a)
  if nonlinearity == 'leaky_relu' then
    if a ~= nil and (type(a) ~= 'number' or a ~= a) then
      options.fail('init.calculate_gain', 'negative_slope must be a number, got ' .. tostring(a))
    end
    a = a or 0.01
    return math.sqrt(2 / (1 + a * a))
  end
  local g = GAINS[nonlinearity]
  if not g then
    options.fail('init.calculate_gain', ('unsupported nonlinearity %s (one of %s)'):format(tostring(nonlinearity), GAIN_NAMES))
  end
  return g
end

function init.uniform_(t, lo, hi) return t:uniform_(lo or 0, hi or 1) end
function init.normal_(t, mean, std) return t:normal_(mean or 0, std or 1) end
function init.zeros_(t) return t:fill_(0) end
function init.ones_(t) return t:fill_(1) end
function init.constant_(t, v) return t:fill_(v) end

local KAIMING_OPTS = { a = 'number', mode = 'string', nonlinearity = 'string' }
local KAIMING_POSITIONAL = { 'a', 'mode', 'nonlinearity' }
local function kaiming_opts(fn, ...)
  local opts = options.check(fn, options.positional(fn, KAIMING_POSITIONAL, ...), KAIMING_OPTS) or {}
  options.one_of(fn, 'mode', opts.mode, { 'fan_in', 'fan_out' })
  return opts
end

-- kaiming_uniform_(w, {a = 0, mode = 'fan_in', nonlinearity = 'leaky_relu'}),
-- or PyTorch's positional kaiming_uniform_(w, a, mode, nonlinearity)
function init.kaiming_uniform_(w, ...)
  local opts = kaiming_opts('init.kaiming_uniform_', ...)
  local fan_in, fan_out = init.fans(w)
  local fan = opts.mode == 'fan_out' and fan_out or fan_in
  local gain = init.calculate_gain(opts.nonlinearity or 'leaky_relu', opts.a or 0)
  local bound = math.sqrt(3) * gain / math.sqrt(fan)
  return w:uniform_(-bound, bound)
end

function init.kaiming_normal_(w, ...)
  local opts = kaiming_opts('init.kaiming_normal_', ...)
  local fan_in, fan_out = init.fans(w)
  local fan = opts.mode == 'fan_out' and fan_out or fan_in
  local gain = init.calculate_gain(opts.nonlinearity or 'leaky_relu', opts.a or 0)
  return w:normal_(0, gain / math.sqrt(fan))
end

function init.xavier_uniform_(w, gain)
  local fan_in, fan_out = init.fans(w)
  local bound = (gain or 1) * math.sqrt(6 / (fan_in + fan_out))
  return w:uniform_(-bound, bound)
end

-- PyTorch's default for Linear and Conv: kaiming_uniform(a = sqrt(5)) for the
-- weight, uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias
function init.default_(w, b)
  init.kaiming_uniform_(w, { a = math.sqrt(5) })
  if b then
    local fan_in = init.fans(w)
    local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
    b:uniform_(-bound, bound)
  end
end

-- xavier_normal_, trunc_normal_, orthogonal_, eye_, dirac_; all of them under no_grad
require('lunet.nn.initializers_more')(init)

return init
