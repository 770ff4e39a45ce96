-- nn.utils.weight_norm(module[, name = 'weight', dim = 1]) and
-- nn.utils.remove_weight_norm(module[, name]), as torch 1.13's: the
-- parameter `name` is replaced by name_g (its norm over every dim but dim)
-- and name_v (its direction), registered last as torch does, so a torch
-- state_dict with weight_norm loads; a forward pre-hook recomputes
-- module[name] = v * (g / ||v||) before each forward (a plain field, not a
-- parameter). dim is 1-based (torch's dim=0 is 1), negative from the end;
-- dim = false is torch's dim=None (and its dim=-1): one norm of the whole
-- tensor, g a 0-d tensor. The options may be a table: {name =, dim =}.
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local options = require 'lunet.options'
local fail = options.fail
local is_table, typename = core.is_table, core.typename

local M = {}

-- the module, checked, and its registry of norm hooks (by kind:name)
function M.hooks_of(fn, m)
  if not is_table(m) or not rawget(m, '_params') then fail(fn, 'module must be an nn.Module, got ' .. typename(m)) end
  local h = rawget(m, '_norm_hooks')
  if not h then h = {}; rawset(m, '_norm_hooks', h) end
  return h
end

-- removes name from the module's list (_params or _buffers) and the field
function M.unregister(m, list, name)
  local l = m[list]
  for i = #l, 1, -1 do if l[i] == name then table.remove(l, i) end end
  rawset(m, name, nil)
end

-- the module's parameter `name`, checked
function M.param(fn, m, name)
  if type(name) ~= 'string' then fail(fn, 'name must be a string, got ' .. typename(name)) end
  local p = m:_has('_params', name) and rawget(m, name)
  if not T.is_tensor(p) then fail(fn, ("%s has no parameter '%s'"):format(m.__name or 'the module', name)) end
  return p
end

-- ||v|| over every dim but d (1-based; false: all), shaped to broadcast with v
local function norm_except_dim(v, d)
  if not d then return v:pow(2):sum():sqrt() end
  local shape = {}
  for i = 1, v:dim() do shape[i] = i == d and v:size(i) or 1 end
  local w = d == 1 and v or v:transpose(1, d)
  return w:reshape(v:size(d), -1):pow(2):sum(2):sqrt():reshape(shape)
end
M.norm_except_dim = norm_except_dim

local function compute(m, name, d) return m[name .. '_v'] * (m[name .. '_g'] / norm_except_dim(m[name .. '_v'], d)) end

local OPTS = { name = 'string', dim = 'number|boolean' }

function M.weight_norm(module, name, dim)
  local fn = 'weight_norm'
  local reg = M.hooks_of(fn, module)
  if is_table(name) then
    local o = options.check(fn, name, OPTS)
    if dim ~= nil then fail(fn, 'give the options as a table or as (name, dim), not both') end
    name, dim = o.name, o.dim
  end
  name = name == nil and 'weight' or name
  if dim == nil then dim = 1 end
  if type(name) == 'string' and reg['weight_norm:' .. name] then fail(fn, ('cannot register two weight_norm hooks on the same parameter %s'):format(name)) end
  local w = M.param(fn, module, name)
  local nd = w:dim()
  if dim == true or (dim and (type(dim) ~= 'number' or dim % 1 ~= 0 or dim == 0 or dim < -nd or dim > nd)) then
    fail(fn, ('dim must be an integer in 1..%d (negative: from the end) or false (the whole tensor), got %s')
      :format(nd, tostring(dim)))
  end
  if dim and dim < 0 then dim = nd + 1 + dim end
  M.unregister(module, '_params', name)
  -- (v on the weight's storage, as torch's Parameter(weight.data))
  local g, v = norm_except_dim(w:detach(), dim):clone(), w:detach()
  module:register_parameter(name .. '_g', g)
  module:register_parameter(name .. '_v', v)
  rawset(module, name, compute(module, name, dim))
  local handle = module:register_forward_pre_hook(function(m) rawset(m, name, compute(m, name, dim)) end)
  reg['weight_norm:' .. name] = { handle = handle, dim = dim }
  return module
end

function M.remove_weight_norm(module, name)
  local fn = 'remove_weight_norm'
  local reg = M.hooks_of(fn, module)
  name = name == nil and 'weight' or name
  if type(name) ~= 'string' then fail(fn, 'name must be a string, got ' .. typename(name)) end
  local e = reg['weight_norm:' .. name]
  if not e then fail(fn, ("weight_norm of '%s' not found in %s"):format(name, module.__name or 'the module')) end
  local w = compute(module, name, e.dim)   -- (from g and v now, as torch: a loaded state may be newer)
  e.handle:remove()
  reg['weight_norm:' .. name] = nil
  M.unregister(module, '_params', name .. '_g')
  M.unregister(module, '_params', name .. '_v')
  rawset(module, name, nil)
  module:register_parameter(name, w:detach():clone())
  return module
end

return M
