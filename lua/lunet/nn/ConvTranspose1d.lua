-- nn.ConvTranspose1d(in_channels, out_channels, kernel_size[, {stride = 1,
-- padding = 0, output_padding = 0, groups = 1, bias = true, dilation = 1,
-- padding_mode = 'zeros', dtype, device}]), or PyTorch's positional form
-- nn.ConvTranspose1d(cin, cout, k, stride, padding, output_padding, groups, bias, dilation[, opts]).
-- Input (N, C, L) or (C, L); weight (in, out/groups, k), bias (out), as
-- torch's state_dict (F.conv_transpose1d runs it on conv_transpose2d).
-- m(x[, output_size]) picks output_padding to reach output_size ({L} or {N, C, L}).
local lunet = require 'lunet'
local is_table = require('lunet.core').is_table
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local init = require 'lunet.nn.initializers'

local NAME = 'nn.ConvTranspose1d'
local ConvTranspose1d = Module:extend(NAME)

local OPTS = { stride = 'number|table', padding = 'number|table', output_padding = 'number|table',
  groups = 'number', bias = 'boolean', dilation = 'number|table', padding_mode = 'string', dtype = true, device = true }
local POSITIONAL = { 'stride', 'padding', 'output_padding', 'groups', 'bias', 'dilation' }

function ConvTranspose1d:__init(cin, cout, k, ...)
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
  k = options.single(NAME, 'kernel_size', k, 1)
  local s = options.single(NAME, 'stride', opts.stride, 1) or 1
  local p = options.single(NAME, 'padding', opts.padding, 0) or 0
  local op = options.single(NAME, 'output_padding', opts.output_padding, 0) or 0
  local d = options.single(NAME, 'dilation', opts.dilation, 1) or 1
  if not (op < s or op < d) then
    options.fail(NAME, ('output_padding %d must be smaller than stride %d or dilation %d'):format(op, s, d))
  end
  self.in_channels, self.out_channels, self.kernel_size = cin, cout, { k }
  self.stride, self.padding, self.output_padding, self.dilation, self.groups = s, p, op, d, groups
  local o = { dtype = opts.dtype, device = opts.device }
  self:register_parameter('weight', lunet.empty({ cin, cout / groups, k }, o))
  if opts.bias ~= false then self:register_parameter('bias', lunet.empty({ cout }, o)) end
  self._opts = { stride = s, padding = p, output_padding = op, dilation = d, groups = groups }
  self:reset_parameters()
end

-- PyTorch's default: kaiming_uniform(a = sqrt(5)), fan_in = out/groups * k (the weight's dim 2)
function ConvTranspose1d:reset_parameters()
  lunet.no_grad(init.default_, self.weight, self.bias)
end

-- the output_padding that gives output_size (PyTorch's _output_padding)
function ConvTranspose1d:_output_padding(x, size)
  if not is_table(size) or (#size ~= 1 and #size ~= 3) then
    options.fail(NAME, 'output_size must be {L} or {N, C, L}, got ' ..
      (is_table(size) and #size .. ' values' or lunet.is_tensor(size) and 'a tensor' or type(size)))
  end
  if not lunet.is_tensor(x) or (x:dim() ~= 2 and x:dim() ~= 3) then return nil end   -- (F says what is wrong)
  local want = size[#size]
  local least = (x:size(x:dim()) - 1) * self.stride - 2 * self.padding + self.dilation * (self.kernel_size[1] - 1) + 1
  if type(want) ~= 'number' or want % 1 ~= 0 or want < least or want > least + self.stride - 1 then
    options.fail(NAME, ('output_size %s must be between %d and %d for an input of length %d'):format(
      tostring(want), least, least + self.stride - 1, x:size(x:dim())))
  end
  return want - least
end

function ConvTranspose1d:forward(x, output_size)
  local opts = self._opts
  if output_size ~= nil then
    local op = self:_output_padding(x, output_size)
    if op then
      opts = { stride = opts.stride, padding = opts.padding, dilation = opts.dilation, groups = opts.groups,
        output_padding = op }
    end
  end
  return F.conv_transpose1d(x, self.weight, self.bias, opts)
end

function ConvTranspose1d:extra_repr()
  local r = ('%d -> %d, %d'):format(self.in_channels, self.out_channels, self.kernel_size[1])
  if self.stride ~= 1 then r = r .. ', stride ' .. self.stride end
  if self.padding ~= 0 then r = r .. ', pad ' .. self.padding end
  if self.output_padding ~= 0 then r = r .. ', output_padding ' .. self.output_padding end
  if self.dilation ~= 1 then r = r .. ', dilation ' .. self.dilation end
  if self.groups ~= 1 then r = r .. ', groups ' .. self.groups end
  return r .. (self.bias and '' or ', no bias')
end

return ConvTranspose1d
