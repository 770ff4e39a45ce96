-- lunet.nn.instancenorm_class(k): the class of nn.InstanceNorm<k>d(num_features[,
-- {eps = 1e-5, momentum = 0.1, affine = false, track_running_stats = false,
-- dtype, device}]), or PyTorch's positional (num_features, eps, momentum,
-- affine, track_running_stats): input (N, C, <k spatial dims>) or unbatched
-- (C, <k spatial dims>), each sample's channel normalised over its spatial
-- dims (F.instance_norm). Tracking: buffers running_mean, running_var,
-- num_batches_tracked (as torch's, which never counts it), used in eval mode.
-- What InstanceNorm1d/2d/3d share; each file keeps its doc.
local lunet = require 'lunet'
local typename = require('lunet.core').typename   -- (type, or 'tensor')
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local raise = options.raise

local OPTS = { eps = 'number', momentum = 'number', affine = 'boolean', track_running_stats = 'boolean',
  dtype = true, device = true }
local POSITIONAL = { 'eps', 'momentum', 'affine', 'track_running_stats' }
local SPATIAL = { 'L', 'H, W', 'D, H, W' }

return function(k)
  local name = ('nn.InstanceNorm%dd'):format(k)
  local class = Module:extend(name)
  local expected = ('expected a %d-d (C, %s) or %d-d (N, C, %s) input'):format(k + 1, SPATIAL[k], k + 2, SPATIAL[k])

  function class:__init(num_features, ...)
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

  function class:forward(x)
    if not require('lunet.tensor').is_tensor(x) then raise(name .. ': input must be a tensor, got ' .. typename(x)) end
    local nd = x:dim()
    if nd ~= k + 1 and nd ~= k + 2 then raise(('%s: %s, got %d-d'):format(name, expected, nd)) end
    local c = x:size(-(k + 1))
    if c ~= self.num_features then
      raise(('%s: input has %d channels, expected %d'):format(name, c, self.num_features))
    end
    local xb = nd == k + 1 and x:unsqueeze(1) or x   -- (unbatched: a batch of one)
    local y = F.instance_norm(xb, self.running_mean, self.running_var, self.weight, self.bias,
      self.training or not self.track_running_stats, self.momentum, self.eps)
    return nd == k + 1 and y:select(1, 1) or y
  end

  function class:extra_repr()
    local r = tostring(self.num_features)
    if self.eps ~= 1e-5 then r = r .. ', eps ' .. self.eps end
    if self.momentum ~= 0.1 then r = r .. ', momentum ' .. self.momentum end
    if self.affine then r = r .. ', affine' end
    if self.track_running_stats then r = r .. ', running stats' end
    return r
  end

  return class
end
