-- nn.ConvTranspose3d(in_channels, out_channels, kernel_size[, {stride = 1,
-- padding = 0, output_padding = 0, groups = 1, bias = true, dilation = 1,
-- padding_mode = 'zeros', dtype, device}]), or PyTorch's positional form
-- nn.ConvTranspose3d(cin, cout, k, stride, padding, output_padding, groups, bias, dilation[, opts]);
-- each size a number or {d, h, w}. Input (N, C, D, H, W) or (C, D, H, W);
-- weight (in, out/groups, kD, kH, kW), bias (out), as torch's state_dict.
local lunet = require 'lunet'
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local init = require 'lunet.nn.initializers'

local NAME = 'nn.ConvTranspose3d'
local ConvTranspose3d = Module:extend(NAME)

local OPTS = { stride = 'number|table', padding = 'number|table', output_padding = 'number|table',
  groups = 'number', bias = 'boolean', dilation = 'number|table', padding_mode = 'string', dtype = true, device = true }
local POSITIONAL = { 'stride', 'padding', 'output_padding', 'groups', 'bias', 'dilation' }

local function list(what, v, min) return { options.triple(NAME, what, v, min) } end

function ConvTranspose3d:__init(cin, cout, k, ...)
  if type(cin) ~= 'number' or type(cout) ~= 'number' or k == nil then
    options.fail(NAME, 'expected (in_channels, out_channels, kernel_size[, stride, padding, ...][, opts])')
  end
  local opts = options.check(NAME, options.positional(NAME, POSITIONAL, ...), OPTS) or {}
  if opts.padding_mode ~= nil and opts.padding_mode ~= 'zeros' then
    options.fail(NAME, ("padding_mode '%s' is not supported (only 'zeros', as PyTorch's)"):format(opts.padding_mode))
  end
  local groups = options.single(NAME, 'groups', opts.groups, 1) or 1
  for _, c in ipairs({ { 'in_channels', cin }, { 'out_channels', cout } }) do
    if not (c[2] % 1 == 0 and c[2] >= 1 and c[2] < 2 ^ 31) then
      options.fail(NAME, ('%s must be an integer >= 1, got %s'):format(c[1], tostring(c[2])))
    end
  end
  if cin % groups ~= 0 or cout % groups ~= 0 then
    options.fail(NAME, ('in_channels %d and out_channels %d must be divisible by groups %d'):format(cin, cout, groups))
  end
  local kk = list('kernel_size', k, 1)
  local s, p = list('stride', opts.stride or 1, 1), list('padding', opts.padding or 0, 0)
  local op, d = list('output_padding', opts.output_padding or 0, 0), list('dilation', opts.dilation or 1, 1)
  for i = 1, 3 do
    if not (op[i] < s[i] or op[i] < d[i]) then
      options.fail(NAME, ('output_padding %s must be smaller than stride %s or dilation %s'):format(
        table.concat(op, 'x'), table.concat(s, 'x'), table.concat(d, 'x')))
    end
  end
  self.in_channels, self.out_channels, self.kernel_size = cin, cout, kk
  self.stride, self.padding, self.output_padding, self.dilation, self.groups = s, p, op, d, groups
  local o = { dtype = opts.dtype, device = opts.device }
  self:register_parameter('weight', lunet.empty({ cin, cout / groups, kk[1], kk[2], kk[3] }, o))
  if opts.bias ~= false then self:register_parameter('bias', lunet.empty({ cout }, o)) end
  self._opts = { stride = s, padding = p, output_padding = op, dilation = d, groups = groups }
  self:reset_parameters()
end

-- PyTorch's default: kaiming_uniform(a = sqrt(5)), fan_in = out/groups * kD * kH * kW
function ConvTranspose3d:reset_parameters()
  lunet.no_grad(init.default_, self.weight, self.bias)
end

function ConvTranspose3d:forward(x) return F.conv_transpose3d(x, self.weight, self.bias, self._opts) end

local function is(v, n) return v[1] == n and v[2] == n and v[3] == n end
local function show(v, name, default) return is(v, default) and '' or (', %s %s'):format(name, table.concat(v, 'x')) end

function ConvTranspose3d:extra_repr()
  return ('%d -> %d, %s%s%s%s%s%s%s'):format(self.in_channels, self.out_channels, table.concat(self.kernel_size, 'x'),
    show(self.stride, 'stride', 1), show(self.padding, 'pad', 0), show(self.output_padding, 'output_padding', 0),
    show(self.dilation, 'dilation', 1), self.groups ~= 1 and ', groups ' .. self.groups or '',
    self.bias and '' or ', no bias')
end

return ConvTranspose3d
