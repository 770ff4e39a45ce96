-- nn.Conv2d(in_channels, out_channels, kernel_size[, {stride = 1, padding = 0
-- (a number, {h, w}, 'same' or 'valid'), dilation = 1, groups = 1, bias = true,
-- padding_mode = 'zeros', dtype, device}]), or PyTorch's positional form
-- nn.Conv2d(cin, cout, k, stride, padding, dilation, groups, bias[, opts])
local lunet = require 'lunet'
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)
local Module = require 'lunet.nn.Module'
local plain = require('lunet.nn.hooks').plain   -- (no forward of its own, no hooks: fusable)
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local init = require 'lunet.nn.initializers'

local Conv2d = Module:extend('nn.Conv2d')

local function pair(v) if is_table(v) then return v[1], v[2] end return v, v end

local OPTS = { stride = 'number|table', padding = 'number|table|string', dilation = 'number|table',
  groups = 'number', bias = 'boolean', padding_mode = 'string', dtype = true, device = true }
local POSITIONAL = { 'stride', 'padding', 'dilation', 'groups', 'bias' }

function Conv2d:__init(cin, cout, k, ...)
  if type(cin) ~= 'number' or type(cout) ~= 'number' or (type(k) ~= 'number' and not is_table(k)) then
    options.fail('nn.Conv2d', 'expected (in_channels, out_channels, kernel_size[, stride, padding, ...][, opts])')
  end
  local opts = options.check('nn.Conv2d', options.positional('nn.Conv2d', POSITIONAL, ...), OPTS) or {}
  if opts.padding_mode ~= nil and opts.padding_mode ~= 'zeros' then
    options.fail('nn.Conv2d', ("padding_mode '%s' is not supported (only 'zeros')"):format(opts.padding_mode))
  end
  local groups = opts.groups or 1
  -- (2.5 channels read as 2 in the message below, which blamed the groups)
  for _, c in ipairs({ { 'in_channels', cin, 0 }, { 'out_channels', cout, 1 }, { 'groups', groups, 1 } }) do
    if not (c[2] % 1 == 0 and c[2] >= c[3]) then
      options.fail('nn.Conv2d', ('%s must be an integer >= %d, got %s'):format(c[1], c[3], tostring(c[2])))
    end
  end
  if cin % groups ~= 0 or cout % groups ~= 0 then
    options.fail('nn.Conv2d', ('in_channels %d and out_channels %d must be divisible by groups %d'):format(cin, cout, groups))
  end
  options.pair('nn.Conv2d', 'kernel_size', k, 1)
  options.pair('nn.Conv2d', 'stride', opts.stride, 1)
  options.pair('nn.Conv2d', 'dilation', opts.dilation, 1)
  if opts.padding ~= 'same' and opts.padding ~= 'valid' then options.pair('nn.Conv2d', 'padding', opts.padding, 0) end
  if opts.groups ~= nil then options.pair('nn.Conv2d', 'groups', opts.groups, 1) end
  local kh, kw = pair(k)
  self.in_channels, self.out_channels, self.kernel_size = cin, cout, { kh, kw }
  self.stride, self.padding, self.dilation, self.groups = opts.stride or 1, opts.padding or 0, opts.dilation or 1, groups
  local o = { dtype = opts.dtype, device = opts.device }
  self:register_parameter('weight', lunet.empty({ cout, cin / groups, kh, kw }, o))
  if opts.bias ~= false then self:register_parameter('bias', lunet.empty({ cout }, o)) end
  self._opts = { stride = self.stride, padding = self.padding, dilation = self.dilation, groups = groups }
  self:reset_parameters()
end

function Conv2d:reset_parameters()
  lunet.no_grad(init.default_, self.weight, self.bias)
end

function Conv2d:forward(x) return F.conv2d(x, self.weight, self.bias, self._opts) end

-- Inference fusion (used by nn.Sequential and nn.BasicBlock, see fusable):
-- relu?(bn(self(x)) + residual?) in one kernel, bn an nn.BatchNorm2d in eval
-- mode with running statistics; the same composition of differentiable ops
-- when a gradient is recorded. Parameters and state_dict are untouched.
function Conv2d:forward_fused(x, bn, residual, relu)
  return F.conv2d_fused(x, self.weight, self.bias, self._opts, bn.weight, bn.bias, bn.running_mean,
    bn.running_var, bn.eps, residual, relu)
end

-- true when conv -> bn can run as one fused kernel: exactly an nn.Conv2d and
-- an nn.BatchNorm2d (not subclasses or instances with their own forward), the
-- batch norm in eval mode on its running statistics, channels matching.
local BatchNorm2d
function Conv2d.fusable(conv, bn)
  BatchNorm2d = BatchNorm2d or require 'lunet.nn.BatchNorm2d'
  return getmetatable(conv) == Conv2d and getmetatable(bn) == BatchNorm2d and not bn.training
    and bn.track_running_stats and bn.num_features == conv.out_channels
    and plain(conv) and plain(bn)
end

local function show(v, name, default)
  if v == default then return '' end
  if is_table(v) then
    if v[1] == v[2] then v = v[1] else v = v[1] .. 'x' .. v[2] end
    if v == default then return '' end
  end
  return (', %s %s'):format(name, tostring(v))
end

function Conv2d:extra_repr()
  return ('%d -> %d, %dx%d%s%s%s%s%s'):format(self.in_channels, self.out_channels, self.kernel_size[1],
    self.kernel_size[2], show(self.stride, 'stride', 1), show(self.padding, 'pad', 0),
    show(self.dilation, 'dilation', 1), show(self.groups, 'groups', 1), self.bias and '' or ', no bias')
end

return Conv2d
