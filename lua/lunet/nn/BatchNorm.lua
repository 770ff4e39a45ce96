-- The shared body of nn.BatchNorm1d and nn.BatchNorm2d:
-- (num_features[, {eps = 1e-5, momentum = 0.1, affine = true,
-- track_running_stats = true, dtype, device}]). Buffers running_mean,
-- running_var and num_batches_tracked (int64); momentum = false means a
-- cumulative average (PyTorch's momentum=None). PyTorch's positional form
-- (num_features, eps, momentum, affine, track_running_stats[, opts]) too.
local lunet = require 'lunet'
local typename = require('lunet.core').typename   -- (type, or 'tensor')
local Module = require 'lunet.nn.Module'
local plain = require('lunet.nn.hooks').plain   -- (no forward of its own, no hooks: fusable)
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local raise = options.raise

local BatchNorm = Module:extend('nn.BatchNorm')

local OPTS = { eps = 'number', momentum = 'number|boolean', cumulative = 'boolean', affine = 'boolean',
  track_running_stats = 'boolean', dtype = true, device = true }
local POSITIONAL = { 'eps', 'momentum', 'affine', 'track_running_stats' }

function BatchNorm:__init(num_features, ...)
  if type(num_features) ~= 'number' or num_features % 1 ~= 0 or num_features < 1 then
    options.fail(self.__name, 'num_features must be an integer >= 1, got ' .. tostring(num_features))
  end
  local opts = options.check(self.__name, options.positional(self.__name, POSITIONAL, ...), OPTS) or {}
  if opts.momentum == true then options.fail(self.__name, "momentum must be a number or false (a cumulative average), got true") end
  if opts.eps ~= nil and not (opts.eps >= 0 and opts.eps < math.huge) then
    options.fail(self.__name, 'eps must be a finite number >= 0, got ' .. tostring(opts.eps))
  end
  if type(opts.momentum) == 'number' and not (opts.momentum >= 0 and opts.momentum <= 1) then
    options.fail(self.__name, 'momentum must be in [0, 1] or false (a cumulative average), got ' .. tostring(opts.momentum))
  end
  self.num_features = num_features
  self.eps = opts.eps or 1e-5
  -- momentum = false (or cumulative = true): a cumulative moving average (PyTorch's momentum=None)
  if opts.momentum == false or opts.cumulative then self.momentum = nil
  else self.momentum = opts.momentum or 0.1 end
  self.affine = opts.affine ~= false
  self.track_running_stats = opts.track_running_stats ~= false
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

function BatchNorm:reset_running_stats()
  if self.track_running_stats then
    self.running_mean:fill_(0); self.running_var:fill_(1); self.num_batches_tracked:fill_(0)
  end
end

function BatchNorm:check_input(x) end

local function run(self, x, relu, residual)
  -- (at the user's line: a fixed level named the caller's caller)
  if not require('lunet.tensor').is_tensor(x) then raise(('%s: input must be a tensor, got %s'):format(self.__name, typename(x))) end
  self:check_input(x)
  if x:size(2) ~= self.num_features then
    raise(('%s: input has %d channels, expected %d'):format(self.__name, x:size(2), self.num_features))
  end
  local momentum = self.momentum or 0
  if self.training and self.track_running_stats then
    self.num_batches_tracked:add_(1)
    if self.momentum == nil then momentum = 1 / self.num_batches_tracked:item() end
  end
  local use_batch = self.training or not self.track_running_stats
  if residual then
    return F.batch_norm_add_relu(x, residual, self.running_mean, self.running_var, self.weight, self.bias,
      use_batch, momentum, self.eps)
  end
  return (relu and F.batch_norm_relu or F.batch_norm)(x, self.running_mean, self.running_var, self.weight,
    self.bias, use_batch, momentum, self.eps)
end

function BatchNorm:forward(x) return run(self, x, false) end

-- relu(self:forward(x)) in one pass (F.batch_norm_relu); for nn.Sequential
-- and nn.BasicBlock, when fusable(bn) says that is the same as the two modules
function BatchNorm:forward_relu(x) return run(self, x, true) end

-- relu(self:forward(x) + residual) in one pass (F.batch_norm_add_relu): the
-- tail of nn.BasicBlock in training, when fusable(bn)
function BatchNorm:forward_add_relu(x, residual) return run(self, x, true, residual) end

-- bn:forward(x):relu() may run as bn:forward_relu(x): a BatchNorm1d/2d
-- itself (a subclass such as a user's, or an instance with its own forward,
-- e.g. DataParallel's sync_bn, runs as written)
local BN1d, BN2d
function BatchNorm.fusable(bn)
  BN1d = BN1d or require 'lunet.nn.BatchNorm1d'
  BN2d = BN2d or require 'lunet.nn.BatchNorm2d'
  local mt = getmetatable(bn)
  return (mt == BN2d or mt == BN1d) and plain(bn)
end

function BatchNorm:extra_repr()
  local r = tostring(self.num_features)
  if self.eps ~= 1e-5 then r = r .. ', eps ' .. self.eps end
  if self.momentum == nil then r = r .. ', cumulative'
  elseif self.momentum ~= 0.1 then r = r .. ', momentum ' .. self.momentum end
  if not self.affine then r = r .. ', affine false' end
  if not self.track_running_stats then r = r .. ', no running stats' end
  return r
end

return BatchNorm
