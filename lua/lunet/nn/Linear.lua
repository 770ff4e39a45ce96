-- nn.Linear(in_features, out_features[, {bias = true, dtype, device}]): y = x W^T + b
local lunet = require 'lunet'
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local init = require 'lunet.nn.initializers'

local Linear = Module:extend('nn.Linear')

function Linear:__init(in_features, out_features, opts)
  if type(in_features) ~= 'number' or type(out_features) ~= 'number' then
    error('nn.Linear: expected (in_features, out_features[, opts])', 3)
  end
  opts = opts or {}
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
