-- nn.Module's state dicts, as torch 1.13's: state_dict{prefix =, keep_vars =,
-- destination =}, load_state_dict(sd[, {strict = false}]),
-- register_load_state_dict_post_hook(fn), get_extra_state/set_extra_state.
-- A state dict is a flat Lua table {key = tensor}; its keys are torch's
-- ("0.weight", "layer1.bn.running_var"). Installed by lunet.nn.Module.
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local autograd = require 'lunet.autograd'
local options = require 'lunet.options'
local raise, is_tensor = options.raise, T.is_tensor
local Metadata = require('lunet.serialize').Metadata

return function(Module)

-- a class overriding get_extra_state saves it under prefix .. '_extra_state'
function Module:get_extra_state()
  raise('get_extra_state: not implemented by ' .. tostring(self.__name) .. ' (override it, with set_extra_state)')
end
function Module:set_extra_state()
  raise('set_extra_state: not implemented by ' .. tostring(self.__name) .. ' (override it, with get_extra_state)')
end

-- {{key, tensor or nil, module, kind}, ...} in torch's order: each module's
-- parameters, persistent buffers and extra state, then its children's. A
-- shared module or tensor is listed under every name, as torch's state_dict.
-- (The walk is named_modules', which pipelines override to show their stages.)
local function entries(self, prefix)
  local out = {}
  for _, e in ipairs(self:named_modules('', nil, false)) do
    local p, m = e[1] == '' and prefix or prefix .. e[1] .. '.', e[2]
    for _, n in ipairs(m._params) do
      local t = m[n]
      if t ~= nil then out[#out + 1] = { p .. n, t } end
    end
    local np = rawget(m, '_non_persistent')
    for _, n in ipairs(m._buffers) do
      local t = m[n]
      if t ~= nil and not (np and np[n]) then out[#out + 1] = { p .. n, t } end
    end
    if m.get_extra_state ~= Module.get_extra_state then out[#out + 1] = { p .. '_extra_state', nil, m, 'extra' } end
  end
  return out
end
Module._state_entries = entries

local STATE_DICT_OPTS = { prefix = 'string', keep_vars = 'boolean', destination = 'table' }
-- flat {key = tensor}: parameters and persistent buffers, detached (sharing
-- storage) unless keep_vars; keys start with prefix (torch's: 'model.' gives
-- 'model.0.weight'); destination: a table filled and returned
function Module:state_dict(opts)
  opts = options.check('state_dict', opts, STATE_DICT_OPTS) or {}
  local sd = opts.destination or {}
  for _, e in ipairs(entries(self, opts.prefix or '')) do
    if e[4] == 'extra' then sd[e[1]] = e[3]:get_extra_state()
    else sd[e[1]] = opts.keep_vars and e[2] or e[2]:detach() end
  end
  return sd
end

local function shape_str(t) return '{' .. table.concat(t:size(), ',') .. '}' end

-- ---- load_state_dict's post hooks: fn(module, incompatible_keys) after the module loaded

local Handle = { __name = 'nn.hooks.RemovableHandle' }
Handle.__index = Handle
function Handle:remove()
  local list = rawget(self.module, '_load_post_hooks')
  if not list then return end
  for i = #list, 1, -1 do if list[i] == self.fn then table.remove(list, i) end end
  if #list == 0 then rawset(self.module, '_load_post_hooks', nil) end
end

-- fn(module, incompatible_keys) runs after load_state_dict loaded the module
-- (children first); it may empty incompatible_keys.missing_keys or
-- .unexpected_keys, in place, to let a strict load pass
function Module:register_load_state_dict_post_hook(fn)
  if type(fn) ~= 'function' then raise('register_load_state_dict_post_hook: expected a function, got ' .. typename(fn)) end
  local list = rawget(self, '_load_post_hooks')
  if not list then list = {}; rawset(self, '_load_post_hooks', list) end
  list[#list + 1] = fn
  return setmetatable({ module = self, fn = fn }, Handle)
end

local function run_post_hooks(m, incompat)
  for _, n in ipairs(m._children) do
    local c = m[n]
    if c ~= nil then run_post_hooks(c, incompat) end
  end
  for _, fn in ipairs(rawget(m, '_load_post_hooks') or {}) do
    if fn(m, incompat) ~= nil then raise('load_state_dict: a load_state_dict post hook should return nothing') end
  end
end

-- load_state_dict(sd[, strict = true]) or (sd, {strict = false}): copies the
-- values in place. Mis-shaped keys always raise, before anything is copied;
-- with strict, so do missing and unexpected keys (one error naming them all).
-- Returns {missing_keys = {...}, unexpected_keys = {...}} (also .missing,
-- .unexpected): missing in the module's order (torch's), unexpected sorted.
function Module:load_state_dict(sd, strict)
  if not is_table(sd) then raise('load_state_dict: expected a table of tensors, got ' .. typename(sd)) end
  if getmetatable(strict) == Metadata then strict = nil end   -- (load_state_dict(lunet.load(path)))
  if strict ~= nil and type(strict) ~= 'boolean' then   -- PyTorch's keyword: {strict = false}
    strict = options.check('load_state_dict', strict, { strict = 'boolean' }).strict
  end
  if strict == nil then strict = true end
  -- lazy modules take their sizes from sd's tensors first (torch's _lazy_load_hook)
  for _, e in ipairs(self:named_modules('', nil, false)) do
    if e[2]._lazy_load then e[2]:_lazy_load(sd, e[1] == '' and '' or e[1] .. '.') end
  end
  local own, list = {}, entries(self, '')
  local missing, unexpected, bad = {}, {}, {}
  for _, e in ipairs(list) do
    local k, t = e[1], e[2]
    own[k] = true
    local v = sd[k]
    if v == nil then missing[#missing + 1] = k
    elseif e[4] == 'extra' then -- (any value)
    elseif not is_tensor(v) then bad[#bad + 1] = ('%s is a %s, not a tensor'):format(k, typename(v))
    elseif shape_str(v) ~= shape_str(t) then
      bad[#bad + 1] = ('%s: checkpoint has shape %s, model has %s'):format(k, shape_str(v), shape_str(t))
    end
  end
  for k in pairs(sd) do if not own[k] then unexpected[#unexpected + 1] = tostring(k) end end
  table.sort(unexpected); table.sort(bad)
  local res = { missing = missing, unexpected = unexpected, missing_keys = missing, unexpected_keys = unexpected }
  local function check(keys)
    local msgs = {}
    if keys and #missing > 0 then   -- (sorted here, as the other lists)
      local sorted = { unpack(missing) }
      table.sort(sorted)
      msgs[#msgs + 1] = 'missing keys: ' .. table.concat(sorted, ', ')
    end
    if keys and #unexpected > 0 then msgs[#msgs + 1] = 'unexpected keys: ' .. table.concat(unexpected, ', ') end
    if #bad > 0 then msgs[#msgs + 1] = 'size mismatch: ' .. table.concat(bad, '; ') end
    if #msgs > 0 then raise('load_state_dict: ' .. table.concat(msgs, '; ')) end
  end
  -- a failed load copies nothing, unless post hooks (which may forgive
  -- missing or unexpected keys) must see the loaded module first
  local hooked = false
  for _, m in ipairs(self:modules()) do if rawget(m, '_load_post_hooks') then hooked = true end end
  check(strict and not hooked)
  autograd.no_grad(function()
    for _, e in ipairs(list) do
      local v = sd[e[1]]
      if v ~= nil then
        if e[4] == 'extra' then e[3]:set_extra_state(v) else e[2]:copy_(v) end
      end
    end
  end)
  if hooked then
    run_post_hooks(self, res)
    check(strict)
  end
  return res
end

end
