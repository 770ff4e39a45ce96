-- nn.LayerNorm(normalized_shape[, {eps = 1e-5, elementwise_affine = true, dtype, device}]):
-- normalises over the trailing dims normalized_shape (a number or a list of
-- the trailing sizes) with their mean and biased variance, as PyTorch; weight
-- (ones) and bias (zeros) of normalized_shape when elementwise_affine.
-- PyTorch's positional form (normalized_shape, eps, elementwise_affine) too.
local lunet = require 'lunet'
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local LayerNorm = Module:extend('nn.LayerNorm')

local OPTS = { eps = 'number', elementwise_affine = 'boolean', dtype = true, device = true }
local POSITIONAL = { 'eps', 'elementwise_affine' }

function LayerNorm:__init(normalized_shape, ...)
  local ns = F._internal.norm_shape('nn.LayerNorm', normalized_shape)
  local opts = options.check('nn.LayerNorm', options.positional('nn.LayerNorm', POSITIONAL, ...), OPTS) or {}
  self.normalized_shape = { unpack(ns) }
  self.eps = F._internal.need_eps('nn.LayerNorm', opts.eps)
  self.elementwise_affine = opts.elementwise_affine ~= false
  if self.elementwise_affine then
    local o = { dtype = opts.dtype, device = opts.device }
    self:register_parameter('weight', lunet.ones(self.normalized_shape, o))
    self:register_parameter('bias', lunet.zeros(self.normalized_shape, o))
  end
end

function LayerNorm:reset_parameters()
  if self.weight then lunet.no_grad(function() self.weight:fill_(1); self.bias:fill_(0) end) end
end

function LayerNorm:forward(x) return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps) end

function LayerNorm:extra_repr()
  local r = '{' .. table.concat(self.normalized_shape, ',') .. '}'
  if self.eps ~= 1e-5 then r = r .. ', eps ' .. self.eps end
  if not self.elementwise_affine then r = r .. ', elementwise_affine false' end
  return r
end

return LayerNorm
