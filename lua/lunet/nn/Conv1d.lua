-- nn.Conv1d(in_channels, out_channels, kernel_size[, {stride = 1, padding = 0
-- (a number, 'same' or 'valid'), dilation = 1, groups = 1, bias = true,
-- padding_mode = 'zeros', dtype, device}]), or PyTorch's positional form
-- nn.Conv1d(cin, cout, k, stride, padding, dilation, groups, bias[, opts]).
-- Input (N, C, L) or (C, L); weight {out, in/groups, k}, bias {out}, as
-- torch's state_dict (F.conv1d runs it on conv2d's kernels).
local lunet = require 'lunet'
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local init = require 'lunet.nn.initializers'

local Conv1d = Module:extend('nn.Conv1d')

local OPTS = { stride = 'number|table', padding = 'number|table|string', dilation = 'number|table',
  groups = 'number', bias = 'boolean', padding_mode = 'string', dtype = true, device = true }
local POSITIONAL = { 'stride', 'padding', 'dilation', 'groups', 'bias' }

function Conv1d:__init(cin, cout, k, ...)
  local name = 'nn.Conv1d'
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
  k = options.single(name, 'kernel_size', k, 1)
  local stride = options.single(name, 'stride', opts.stride, 1) or 1
  local dilation = options.single(name, 'dilation', opts.dilation, 1) or 1
  local padding = opts.padding or 0
  if padding == 'same' then
    if stride ~= 1 then options.fail(name, "padding='same' is not supported for strided convolutions") end
  elseif padding ~= 'valid' then
    padding = options.single(name, 'padding', padding, 0)
  end
  self.in_channels, self.out_channels, self.kernel_size = cin, cout, { k }
  self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
  local o = { dtype = opts.dtype, device = opts.device }
  self:register_parameter('weight', lunet.empty({ cout, cin / groups, k }, o))
  if opts.bias ~= false then self:register_parameter('bias', lunet.empty({ cout }, o)) end
  self._opts = { stride = stride, padding = padding, dilation = dilation, groups = groups }
  self:reset_parameters()
end

-- torch's default: kaiming_uniform(a = sqrt(5)), fan_in = in/groups * k
function Conv1d:reset_parameters()
  lunet.no_grad(init.default_, self.weight, self.bias)
end

function Conv1d:forward(x) return F.conv1d(x, self.weight, self.bias, self._opts) end

function Conv1d:extra_repr()
  local r = ('%d -> %d, %d'):format(self.in_channels, self.out_channels, self.kernel_size[1])
  if self.stride ~= 1 then r = r .. ', stride ' .. self.stride end
  if self.padding ~= 0 then r = r .. ', pad ' .. self.padding end
  if self.dilation ~= 1 then r = r .. ', dilation ' .. self.dilation end
  if self.groups ~= 1 then r = r .. ', groups ' .. self.groups end
  return r .. (self.bias and '' or ', no bias')
end

return Conv1d
