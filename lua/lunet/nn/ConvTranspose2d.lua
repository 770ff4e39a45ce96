-- nn.ConvTranspose2d(in_channels, out_channels, kernel_size[, {stride = 1,
-- padding = 0, output_padding = 0, groups = 1, bias = true, dilation = 1,
-- padding_mode = 'zeros', dtype, device}]), or PyTorch's positional form
-- nn.ConvTranspose2d(cin, cout, k, stride, padding, output_padding, groups, bias, dilation[, opts]).
-- The weight is (in_channels, out_channels/groups, kH, kW), as PyTorch's;
-- m(x[, output_size]) picks output_padding to reach output_size ({H, W} or
-- {N, C, H, W}) when the stride leaves the size ambiguous, as PyTorch's forward.
local lunet = require 'lunet'
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local init = require 'lunet.nn.initializers'

local NAME = 'nn.ConvTranspose2d'
local ConvTranspose2d = Module:extend(NAME)

local function pair(v) if is_table(v) then return v[1], v[2] end return v, v end

local OPTS = { stride = 'number|table', padding = 'number|table', output_padding = 'number|table',
  groups = 'number', bias = 'boolean', dilation = 'number|table', padding_mode = 'string', dtype = true, device = true }
local POSITIONAL = { 'stride', 'padding', 'output_padding', 'groups', 'bias', 'dilation' }

function ConvTranspose2d:__init(cin, cout, k, ...)
  if type(cin) ~= 'number' or type(cout) ~= 'number' or (type(k) ~= 'number' and not is_table(k)) then
    options.fail(NAME, 'expected (in_channels, out_channels, kernel_size[, stride, padding, ...][, opts])')
  end
  local opts = options.check(NAME, options.positional(NAME, POSITIONAL, ...), OPTS) or {}
  if opts.padding_mode ~= nil and opts.padding_mode ~= 'zeros' then
    options.fail(NAME, ("padding_mode '%s' is not supported (only 'zeros', as PyTorch's)"):format(opts.padding_mode))
  end
  local groups = opts.groups or 1
  for _, c in ipairs({ { 'in_channels', cin, 1 }, { 'out_channels', cout, 1 }, { 'groups', groups, 1 } }) do
    if not (c[2] % 1 == 0 and c[2] >= c[3] and c[2] < 2 ^ 31) then
      options.fail(NAME, ('%s must be an integer >= %d, got %s'):format(c[1], c[3], tostring(c[2])))
    end
  end
  if cin % groups ~= 0 or cout % groups ~= 0 then
    options.fail(NAME, ('in_channels %d and out_channels %d must be divisible by groups %d'):format(cin, cout, groups))
  end
  options.pair(NAME, 'kernel_size', k, 1)
  options.pair(NAME, 'stride', opts.stride, 1)
  options.pair(NAME, 'padding', opts.padding, 0)
  options.pair(NAME, 'output_padding', opts.output_padding, 0)
  options.pair(NAME, 'dilation', opts.dilation, 1)
  local kh, kw = pair(k)
  local sh, sw = pair(opts.stride or 1)
  local dh, dw = pair(opts.dilation or 1)
  local oh, ow = pair(opts.output_padding or 0)
  if not (oh < sh or oh < dh) or not (ow < sw or ow < dw) then
    options.fail(NAME, ('output_padding %s must be smaller than stride %s or dilation %s'):format(
      oh == ow and oh or ('{' .. oh .. ', ' .. ow .. '}'), sh == sw and sh or ('{' .. sh .. ', ' .. sw .. '}'),
      dh == dw and dh or ('{' .. dh .. ', ' .. dw .. '}')))
  end
  self.in_channels, self.out_channels, self.kernel_size = cin, cout, { kh, kw }
  self.stride, self.padding, self.output_padding = opts.stride or 1, opts.padding or 0, opts.output_padding or 0
  self.dilation, self.groups = opts.dilation or 1, groups
  local o = { dtype = opts.dtype, device = opts.device }
  self:register_parameter('weight', lunet.empty({ cin, cout / groups, kh, kw }, o))
  if opts.bias ~= false then self:register_parameter('bias', lunet.empty({ cout }, o)) end
  self._opts = { stride = self.stride, padding = self.padding, output_padding = self.output_padding,
    dilation = self.dilation, groups = groups }
  self:reset_parameters()
end

-- PyTorch's default: kaiming_uniform(a = sqrt(5)) and a bias bound of
-- 1/sqrt(fan_in), fan_in from the weight's dim 2 (out_channels/groups) * kH * kW
function ConvTranspose2d:reset_parameters()
  lunet.no_grad(init.default_, self.weight, self.bias)
end

-- output_padding that gives output_size (PyTorch's _output_padding): the
-- size must lie between the smallest output and that plus stride - 1
function ConvTranspose2d:_output_padding(x, size)
  if not is_table(size) or (#size ~= 2 and #size ~= 4) then
    options.fail(NAME, 'output_size must be {H, W} or {N, C, H, W}, got ' ..
      (is_table(size) and #size .. ' values' or lunet.is_tensor(size) and 'a tensor' or type(size)))
  end
  if not lunet.is_tensor(x) or x:dim() ~= 4 then return nil end   -- (F says what is wrong with x)
  local h, w = size[#size - 1], size[#size]
  local s, p, d = { pair(self.stride) }, { pair(self.padding) }, { pair(self.dilation) }
  local op = {}
  for i, want in ipairs({ h, w }) do
    local least = (x:size(i + 2) - 1) * s[i] - 2 * p[i] + d[i] * (self.kernel_size[i] - 1) + 1
    if type(want) ~= 'number' or want % 1 ~= 0 or want < least or want > least + s[i] - 1 then
      options.fail(NAME, ('output_size %s must be between %d and %d for an input of size %d'):format(
        tostring(want), least, least + s[i] - 1, x:size(i + 2)))
    end
    op[i] = want - least
  end
  return op
end

function ConvTranspose2d:forward(x, output_size)
  local opts = self._opts
  if output_size ~= nil then
    local op = self:_output_padding(x, output_size)
    if op then
      opts = { stride = opts.stride, padding = opts.padding, dilation = opts.dilation, groups = opts.groups,
        output_padding = op }
    end
  end
  return F.conv_transpose2d(x, self.weight, self.bias, opts)
end

local function show(v, name, default)
  if v == default then return '' end
  if is_table(v) then
    if v[1] == v[2] then v = v[1] else v = v[1] .. 'x' .. v[2] end
    if v == default then return '' end
  end
  return (', %s %s'):format(name, tostring(v))
end

-- as nn.Conv2d's: the options that differ from their defaults
function ConvTranspose2d:extra_repr()
  return ('%d -> %d, %dx%d%s%s%s%s%s%s'):format(self.in_channels, self.out_channels, self.kernel_size[1],
    self.kernel_size[2], show(self.stride, 'stride', 1), show(self.padding, 'pad', 0),
    show(self.output_padding, 'output_padding', 0), show(self.dilation, 'dilation', 1),
    show(self.groups, 'groups', 1), self.bias and '' or ', no bias')
end

return ConvTranspose2d
