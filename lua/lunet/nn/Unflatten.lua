-- nn.Unflatten(dim, sizes) or nn.Unflatten{dim = ..., unflattened_size = ...}:
-- splits dim (1-based, negative from the end) into sizes (one may be -1), as torch's
local Module = require 'lunet.nn.Module'
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Unflatten = Module:extend('nn.Unflatten')

local OPTS = { dim = 'number', unflattened_size = 'table' }

function Unflatten:__init(dim, sizes, opts)
  local name = 'nn.Unflatten'
  if is_table(dim) and sizes == nil then   -- the options form
    opts, dim = options.check(name, dim, OPTS), nil
    dim, sizes = opts.dim, opts.unflattened_size
  elseif opts ~= nil then options.fail(name, 'takes dim and sizes, no options') end
  if type(dim) ~= 'number' or dim % 1 ~= 0 or dim == 0 then
    options.fail(name, 'dim must be a non-zero integer (1-based, negative from the end), got ' .. tostring(dim))
  end
  local ok, infer = is_table(sizes) and #sizes > 0, 0
  if ok then
    for k, v in pairs(sizes) do
      if type(k) ~= 'number' or type(v) ~= 'number' or v % 1 ~= 0 or v < -1 then ok = false end
      if v == -1 then infer = infer + 1 end
    end
  end
  if not ok or infer > 1 then
    local shown = tostring(sizes)
    if is_table(sizes) then
      local t = {}
      for i = 1, #sizes do t[i] = tostring(sizes[i]) end
      shown = '{' .. table.concat(t, ', ') .. '}'
    end
    options.fail(name, 'unflattened_size must be a non-empty list of integers >= 0 with at most one -1, got ' .. shown)
  end
  self.dim, self.unflattened_size = dim, { unpack(sizes) }
end

function Unflatten:forward(x) return F.unflatten(x, self.dim, self.unflattened_size) end

function Unflatten:extra_repr() return ('dim %d, {%s}'):format(self.dim, table.concat(self.unflattened_size, ', ')) end

return Unflatten
