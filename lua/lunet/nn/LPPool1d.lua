-- nn.LPPool1d(norm_type, kernel_size[, {stride = kernel_size, ceil_mode = false}]),
-- or PyTorch's positional nn.LPPool1d(norm_type, kernel_size, stride, ceil_mode):
-- the p-norm of each window, (sum x^p)^(1/p), as F.lp_pool1d (avg_pool of x^p times
-- the window's length, so torch's values in ceil_mode's clipped windows too).
-- Input (N, C, L) or (C, L); kernel_size and stride a number or {n}.
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local NAME = 'nn.LPPool1d'
local LPPool1d = Module:extend(NAME)

local OPTS, POSITIONAL = { stride = 'number|table', ceil_mode = 'boolean' }, { 'stride', 'ceil_mode' }

function LPPool1d:__init(norm, k, ...)
  if type(norm) ~= 'number' or norm == 0 or norm ~= norm or norm == math.huge or norm == -math.huge then
    options.fail(NAME, 'norm_type must be a finite nonzero number, got ' .. tostring(norm))
  end
  if k == nil then options.fail(NAME, 'expected (norm_type, kernel_size[, stride, ceil_mode])') end
  local o = options.check(NAME, options.positional(NAME, POSITIONAL, ...), OPTS) or {}
  options.single(NAME, 'kernel_size', k, 1)
  options.single(NAME, 'stride', o.stride, 1)
  self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm, k, o.stride, o.ceil_mode == true
  self._opts = { stride = o.stride, ceil_mode = self.ceil_mode }
end

function LPPool1d:forward(x) return F.lp_pool1d(x, self.norm_type, self.kernel_size, self._opts) end

local function show(v) return type(v) == 'table' and table.concat(v, 'x') or tostring(v) end

function LPPool1d:extra_repr()
  local r = 'norm_type ' .. self.norm_type .. ', ' .. show(self.kernel_size)
  if self.stride ~= nil then r = r .. ', stride ' .. show(self.stride) end
  return r .. (self.ceil_mode and ', ceil' or '')
end

return LPPool1d
