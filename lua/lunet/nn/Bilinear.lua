-- nn.Bilinear(in1_features, in2_features, out_features[, {bias = true, dtype, device}]):
-- y[k] = x1^T W[k] x2 + b[k], weight {out, in1, in2}, bias {out}; x1 (*, in1) and
-- x2 (*, in2) with the same leading dims give (*, out). PyTorch's positional
-- bias too: nn.Bilinear(3, 4, 2, false). Weight and bias uniform in
-- +-1/sqrt(in1_features), as torch's reset_parameters.
local lunet = require 'lunet'
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Bilinear = Module:extend('nn.Bilinear')

local OPTS = { bias = 'boolean', dtype = true, device = true }
local POSITIONAL = { 'bias' }
local NAMES = { 'in1_features', 'in2_features', 'out_features' }

function Bilinear:__init(in1, in2, out, ...)
  local fn = 'nn.Bilinear'
  local sizes = { in1, in2, out }
  for i = 1, 3 do
    local v = sizes[i]
    if type(v) ~= 'number' then options.fail(fn, 'expected (in1_features, in2_features, out_features[, bias][, opts])') end
    -- (in1_features 0: torch's init bound 1/sqrt(0) is a ZeroDivisionError)
    local least = i == 1 and 1 or 0
    if not (v % 1 == 0 and v >= least and v < 2 ^ 53) then
      options.fail(fn, ('%s must be an integer >= %d, got %s'):format(NAMES[i], least, tostring(v)))
    end
  end
  local opts = options.check(fn, options.positional(fn, POSITIONAL, ...), OPTS) or {}
  self.in1_features, self.in2_features, self.out_features = in1, in2, out
  local o = { dtype = opts.dtype, device = opts.device }
  self:register_parameter('weight', lunet.empty({ out, in1, in2 }, o))
  if opts.bias ~= false then self:register_parameter('bias', lunet.empty({ out }, o)) end
  self:reset_parameters()
end

function Bilinear:reset_parameters()
  local bound = 1 / math.sqrt(self.in1_features)
  lunet.no_grad(function()
    self.weight:uniform_(-bound, bound)
    if self.bias then self.bias:uniform_(-bound, bound) end
  end)
end

function Bilinear:forward(x1, x2) return F.bilinear(x1, x2, self.weight, self.bias) end

function Bilinear:extra_repr()
  return ('%d, %d -> %d%s'):format(self.in1_features, self.in2_features, self.out_features,
    self.bias and '' or ', no bias')
end

return Bilinear
