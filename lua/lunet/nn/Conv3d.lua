-- nn.Conv3d(in_channels, out_channels, kernel_size[, {stride = 1, padding = 0
-- (a number, {d, h, w}, 'same' or 'valid'), dilation = 1, groups = 1, bias = true,
-- padding_mode = 'zeros', dtype, device}]), or PyTorch's positional form
-- nn.Conv3d(cin, cout, k, stride, padding, dilation, groups, bias[, opts]).
-- Input (N, C, D, H, W) or (C, D, H, W); weight {out, in/groups, kD, kH, kW},
-- bias {out}, as torch's state_dict (F.conv3d runs it on conv2d's kernels).
local lunet = require 'lunet'
local is_table = require('lunet.core').is_table
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local init = require 'lunet.nn.initializers'

local Conv3d = Module:extend('nn.Conv3d')

local OPTS = { stride = 'number|table', padding = 'number|table|string', dilation = 'number|table',
  groups = 'number', bias = 'boolean', padding_mode = 'string', dtype = true, device = true }
local POSITIONAL = { 'stride', 'padding', 'dilation', 'groups', 'bias' }

function Conv3d:__init(cin, cout, k, ...)
  local name = 'nn.Conv3d'
  if type(cin) ~= 'number' or type(cout) ~= 'number' or k == nil then
    options.fail(name, 'expected (in_channels, out_channels, kernel_size[, stride, padding, ...][, opts])')
  end
  local opts = options.check(name, options.positional(name, POSITIONAL, ...), OPTS) or {}
  if opts.padding_mode ~= nil and opts.padding_mode ~= 'zeros' then
    options.fail(name, ("padding_mode '%s' is not supported (only 'zeros')"):format(opts.padding_mode))
  end
  for _, c in ipairs({ { 'in_channels', cin, 0 }, { 'out_channels', cout, 1 } }) do
    if not (c[2] % 1 == 0 and c[2] >= c[3]) then
      options.fail(name, ('%s must be an integer >= %d, got %s'):format(c[1], c[3], tostring(c[2])))
    end
  end
  local groups = options.single(name, 'groups', opts.groups, 1) or 1
  if cin % groups ~= 0 or cout % groups ~= 0 then
    options.fail(name, ('in_channels %d and out_channels %d must be divisible by groups %d'):format(cin, cout, groups))
  end
  local kd, kh, kw = options.triple(name, 'kernel_size', k, 1)
  local stride = { options.triple(name, 'stride', opts.stride or 1, 1) }
  local dilation = { options.triple(name, 'dilation', opts.dilation or 1, 1) }
  local padding = opts.padding or 0
  if padding == 'same' then
    if stride[1] * stride[2] * stride[3] ~= 1 then
      options.fail(name, "padding='same' is not supported for strided convolutions")
    end
  elseif padding ~= 'valid' then
    padding = { options.triple(name, 'padding', padding, 0) }
  end
  self.in_channels, self.out_channels, self.kernel_size = cin, cout, { kd, kh, kw }
  self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
  local o = { dtype = opts.dtype, device = opts.device }
  self:register_parameter('weight', lunet.empty({ cout, cin / groups, kd, kh, kw }, o))
  if opts.bias ~= false then self:register_parameter('bias', lunet.empty({ cout }, o)) end
  self._opts = { stride = stride, padding = padding, dilation = dilation, groups = groups }
  self:reset_parameters()
end

-- torch's default: kaiming_uniform(a = sqrt(5)), fan_in = in/groups * kD * kH * kW
function Conv3d:reset_parameters()
  lunet.no_grad(init.default_, self.weight, self.bias)
end

function Conv3d:forward(x) return F.conv3d(x, self.weight, self.bias, self._opts) end

-- ', name 2' or ', name 1x2x3', '' for the default
local function show(v, name, default)
  if not is_table(v) then return v == default and '' or (', %s %s'):format(name, v) end
  if v[1] == v[2] and v[2] == v[3] then
    return v[1] == default and '' or (', %s %d'):format(name, v[1])
  end
  return (', %s %dx%dx%d'):format(name, v[1], v[2], v[3])
end

function Conv3d:extra_repr()
  local k = self.kernel_size
  return ('%d -> %d, %dx%dx%d%s%s%s%s%s'):format(self.in_channels, self.out_channels, k[1], k[2], k[3],
    show(self.stride, 'stride', 1), show(self.padding, 'pad', 0), show(self.dilation, 'dilation', 1),
    show(self.groups, 'groups', 1), self.bias and '' or ', no bias')
end

return Conv3d
