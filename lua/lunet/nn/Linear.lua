-- nn.Linear(in_features, out_features[, {bias = true, dtype, device}]): y = x W^T + b
-- (PyTorch's positional bias too: nn.Linear(in, out, false))
local lunet = require 'lunet'
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local init = require 'lunet.nn.initializers'

local Linear = Module:extend('nn.Linear')

local OPTS = { bias = 'boolean', dtype = true, device = true }
local POSITIONAL = { 'bias' }

function Linear:__init(in_features, out_features, ...)
  if type(in_features) ~= 'number' or type(out_features) ~= 'number' then
    options.fail('nn.Linear', 'expected (in_features, out_features[, bias][, opts])')
  end
  -- (said as the weight's shape before: "empty: size 2 must be an integer, got 2.5")
  for _, c in ipairs({ { 'in_features', in_features }, { 'out_features', out_features } }) do
    if not (c[2] % 1 == 0 and c[2] >= 0) then options.fail('nn.Linear', ('%s must be an integer >= 0, got %s'):format(c[1], tostring(c[2]))) end
  end
  local opts = options.check('nn.Linear', options.positional('nn.Linear', POSITIONAL, ...), OPTS) or {}
  self.in_features, self.out_features = in_features, out_features
  local o = { dtype = opts.dtype, device = opts.device }
  self:register_parameter('weight', lunet.empty({ out_features, in_features }, o))
  if opts.bias ~= false then self:register_parameter('bias', lunet.empty({ out_features }, o)) end
  self:reset_parameters()
end

function Linear:reset_parameters()
  lunet.no_grad(init.default_, self.weight, self.bias)
end

function Linear:forward(x) return F.linear(x, self.weight, self.bias) end

function Linear:extra_repr()
  return ('%d -> %d%s'):format(self.in_features, self.out_features, self.bias and '' or ', no bias')
end

return Linear
