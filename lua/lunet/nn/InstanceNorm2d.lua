-- nn.InstanceNorm2d(num_features[, {eps = 1e-5, momentum = 0.1, affine = false,
-- track_running_stats = false, dtype, device}]), or PyTorch's positional
-- (num_features, eps, momentum, affine, track_running_stats): input (N, C, H, W)
-- or (C, H, W), each sample's channel normalised over H, W (F.instance_norm).
-- Tracking: buffers running_mean, running_var, num_batches_tracked (as
-- torch's, which never counts it), used in eval mode.
local lunet = require 'lunet'
local typename = require('lunet.core').typename   -- (type, or 'tensor')
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local raise = options.raise

local InstanceNorm2d = Module:extend('nn.InstanceNorm2d')

local OPTS = { eps = 'number', momentum = 'number', affine = 'boolean', track_running_stats = 'boolean',
  dtype = true, device = true }
local POSITIONAL = { 'eps', 'momentum', 'affine', 'track_running_stats' }

function InstanceNorm2d:__init(num_features, ...)
  local name = 'nn.InstanceNorm2d'
  if type(num_features) ~= 'number' or num_features % 1 ~= 0 or num_features < 1 then
    options.fail(name, 'num_features must be an integer >= 1, got ' .. tostring(num_features))
  end
  local opts = options.check(name, options.positional(name, POSITIONAL, ...), OPTS) or {}
  self.num_features = num_features
  self.eps = F._internal.need_eps(name, opts.eps)
  self.momentum = opts.momentum or 0.1
  if not (self.momentum >= 0 and self.momentum <= 1) then
    options.fail(name, 'momentum must be in [0, 1], got ' .. tostring(self.momentum))
  end
  self.affine = opts.affine == true
  self.track_running_stats = opts.track_running_stats == true
  local o = { dtype = opts.dtype, device = opts.device }
  if self.affine then
    self:register_parameter('weight', lunet.ones({ num_features }, o))
    self:register_parameter('bias', lunet.zeros({ num_features }, o))
  end
  if self.track_running_stats then
    self:register_buffer('running_mean', lunet.zeros({ num_features }, o))
    self:register_buffer('running_var', lunet.ones({ num_features }, o))
    self:register_buffer('num_batches_tracked', lunet.zeros({}, { dtype = 'int64', device = opts.device }))
  end
end

function InstanceNorm2d:forward(x)
  if not require('lunet.tensor').is_tensor(x) then raise('nn.InstanceNorm2d: input must be a tensor, got ' .. typename(x)) end
  local nd = x:dim()
  if nd ~= 3 and nd ~= 4 then
    raise(('nn.InstanceNorm2d: expected a 3-d (C, H, W) or 4-d (N, C, H, W) input, got %d-d'):format(nd))
  end
  if x:size(-3) ~= self.num_features then
    raise(('nn.InstanceNorm2d: input has %d channels, expected %d'):format(x:size(-3), self.num_features))
  end
  local x4 = nd == 3 and x:unsqueeze(1) or x
  local y = F.instance_norm(x4, self.running_mean, self.running_var, self.weight, self.bias,
    self.training or not self.track_running_stats, self.momentum, self.eps)
  return nd == 3 and y:select(1, 1) or y
end

function InstanceNorm2d:extra_repr()
  local r = tostring(self.num_features)
  if self.eps ~= 1e-5 then r = r .. ', eps ' .. self.eps end
  if self.momentum ~= 0.1 then r = r .. ', momentum ' .. self.momentum end
  if self.affine then r = r .. ', affine' end
  if self.track_running_stats then r = r .. ', running stats' end
  return r
end

return InstanceNorm2d
