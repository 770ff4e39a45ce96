-- nn.Module: the base of every layer. A module keeps its parameters,
-- buffers and child modules as fields (self.weight, self.running_mean, ...)
-- and remembers their names in order, so parameters(), state_dict() and
-- printing walk them as PyTorch does. Keys of state_dict are PyTorch's
-- ("0.weight", "layer1.bn.running_var").
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename   -- (tensors are tables)
local T = require 'lunet.tensor'
local autograd = require 'lunet.autograd'
local options = require 'lunet.options'
local raise = options.raise   -- (errors at the user's line)
local is_tensor = T.is_tensor
local hooks = require 'lunet.nn.hooks'

local Module = {}
Module.__index = Module
Module.__name = 'nn.Module'

-- Class helper: local Linear = Module:extend('nn.Linear'); Linear(...) calls
-- Linear.__init(self, ...). Metamethods are copied so instances get them.
-- A constructor's error names its class ("nn.Linear: empty: negative size
-- -1"), at the caller's line, when the message does not already.
local function init_failed(cls, err)
  if type(err) ~= 'string' then error(err, 0) end
  err = err:gsub('^[^:\n]*:%d+: ', '', 1)
  local short = cls.__name:match('[^.]*$')
  if not err:lower():find(short:lower(), 1, true) then err = cls.__name .. ': ' .. err end
  error(err, 3)
end

function Module.extend(parent, name)
  local cls = setmetatable({}, {
    __index = parent,
    __call = function(cls, ...)
      local self = setmetatable({}, cls)
      Module.__init(self)
      local ok, err = pcall(cls.__init, self, ...)
      if not ok then init_failed(cls, err) end
      return self
    end,
  })
  -- (a parent that indexes its instances itself, as nn.Sequential's seq[i]:
  -- its subclasses' instances too, after their own methods)
  local indexer = rawget(parent, '__index')
  if type(indexer) == 'function' then
    cls.__index = function(self, k)
      local v = cls[k]
      if v ~= nil then return v end
      return indexer(self, k)
    end
  else
    cls.__index = cls
  end
  cls.__name = name
  cls.__call = parent.__call
  cls.__tostring = parent.__tostring
  cls.__newindex = parent.__newindex
  cls.super = parent
  return cls
end

-- Assigning a new field registers it, as PyTorch's __setattr__ does:
-- self.fc = nn.Linear(...) adds a child, self.w = <tensor requiring grad>
-- a parameter; anything else is a plain field.
function Module.__newindex(self, k, v)
  if rawget(self, '_params') and type(k) == 'string' then
    if is_table(v) and rawget(v, '_params') then return Module.add_module(self, k, v) end
    if is_tensor(v) and v.requires_grad and v:is_leaf() then return Module.register_parameter(self, k, v) end
  end
  rawset(self, k, v)
end

function Module.__init(self)
  if rawget(self, '_params') then return end
  self._params, self._buffers, self._children = {}, {}, {}
  self.training = true
end

-- A name torch would refuse: not a string, empty, with a '.' (it would
-- split state_dict keys), or already another kind of member.
local function check_name(fn, kind, self, name, others)
  if type(name) ~= 'string' then raise(('%s: %s name must be a string, got %s'):format(fn, kind, typename(name))) end
  if name == '' then raise(("%s: %s name can't be empty"):format(fn, kind)) end
  if name:find('.', 1, true) then raise(('%s: %s name can\'t contain ".", got \'%s\''):format(fn, kind, name)) end
  for _, list in ipairs(others) do
    if self:_has(list, name) then raise(("%s: attribute '%s' already exists"):format(fn, name)) end
  end
end

function Module:register_parameter(name, t)
  check_name('register_parameter', 'parameter', self, name, { '_buffers', '_children' })
  if t ~= nil and not is_tensor(t) then error(('register_parameter: %s must be a tensor or nil'):format(name), 2) end
  if t ~= nil and not t.requires_grad then t.requires_grad = true end
  if not self:_has('_params', name) then table.insert(self._params, name) end
  rawset(self, name, t)
  return t
end

-- register_buffer(name, t[, persistent]) or (name, t, {persistent = false}):
-- a non-persistent buffer moves with the module but stays out of state_dict
function Module:register_buffer(name, t, persistent)
  check_name('register_buffer', 'buffer', self, name, { '_params', '_children' })
  if t ~= nil and not is_tensor(t) then error(('register_buffer: %s must be a tensor or nil'):format(name), 2) end
  if persistent ~= nil and type(persistent) ~= 'boolean' then
    persistent = options.check('register_buffer', persistent, { persistent = 'boolean' }).persistent
  end
  if not self:_has('_buffers', name) then table.insert(self._buffers, name) end
  local np = rawget(self, '_non_persistent')
  if persistent == false then
    if not np then np = {}; rawset(self, '_non_persistent', np) end
    np[name] = true
  elseif np then
    np[name] = nil
  end
  rawset(self, name, t)
  return t
end

function Module:add_module(name, m)
  if type(name) == 'number' then name = tostring(name) end   -- (a container's index)
  check_name('add_module', 'module', self, name, { '_params', '_buffers' })
  if not is_table(m) or not m._params then error(('add_module: %s must be an nn.Module'):format(name), 2) end
  -- (a module inside itself made every walk of the tree a stack overflow)
  for _, d in ipairs(m:modules()) do
    if d == self then
      raise(("add_module: %s as '%s' would put %s inside itself (a module cannot be its own descendant; rawset keeps a" ..
        " reference that is not a child)"):format(m.__name or 'a module', name, self.__name or 'the module'))
    end
  end
  if not self:_has('_children', name) then table.insert(self._children, name) end
  rawset(self, name, m)
  return m
end
Module.register_module = Module.add_module   -- (torch's alias)

function Module:_has(list, name)
  for _, n in ipairs(self[list]) do if n == name then return true end end
  return false
end

function Module:forward(...) error(self.__name .. ': forward is not implemented', 2) end
-- (a module with hooks runs them around its forward: lunet.nn.hooks)
Module.__call = function(self, ...)
  local h = rawget(self, '_hooks')
  if h then return hooks.call(self, h, ...) end
  return self:forward(...)
end

-- fn(module, inputs) before each forward; returns nil, or what replaces the inputs
function Module:register_forward_pre_hook(fn, opts)
  return hooks.register(self, 'pre', 'register_forward_pre_hook', fn, opts)
end
-- fn(module, inputs, output) after each forward; returns nil, or what replaces the output
function Module:register_forward_hook(fn, opts)
  return hooks.register(self, 'post', 'register_forward_hook', fn, opts)
end
-- fn(module, grad_input, grad_output) in the backward of each call; returns
-- nil, or the list that replaces grad_input (nil for inputs needing no grad)
function Module:register_full_backward_hook(fn, opts)
  return hooks.register(self, 'bw', 'register_full_backward_hook', fn, opts)
end
-- fn(module, grad_output) in the backward of each call, before the module's
-- own; returns nil, or the list that replaces grad_output
function Module:register_full_backward_pre_hook(fn, opts)
  return hooks.register(self, 'bwpre', 'register_full_backward_pre_hook', fn, opts)
end

-- ---- walking the tree ----------------------------------------------------------------
-- As torch, a module or tensor reached twice (shared) is listed once, under
-- its first name; state_dict alone lists every name (module_state.lua).

-- {{name, module}, ...} of the direct children
function Module:named_children()
  local out, seen = {}, {}
  for _, n in ipairs(self._children) do
    local m = self[n]
    if m ~= nil and not seen[m] then seen[m] = true; out[#out + 1] = { n, m } end
  end
  return out
end

function Module:children()
  local out = {}
  for i, e in ipairs(self:named_children()) do out[i] = e[2] end
  return out
end

-- {{name, module}, ...} depth first, self first (name ''): named_modules(prefix)
-- or named_modules{prefix =, remove_duplicate = false}. (out and memo are the
-- walk's own: containers that override this pass them on.)
local NAMED_MODULES_OPTS = { prefix = 'string', remove_duplicate = 'boolean' }
function Module:named_modules(prefix, out, memo)
  if is_table(prefix) then
    local o = options.check('named_modules', prefix, NAMED_MODULES_OPTS)
    prefix = o.prefix
    if o.remove_duplicate == false then memo = false end
  elseif prefix ~= nil and type(prefix) ~= 'string' then
    error('named_modules: prefix must be a string, got ' .. typename(prefix), 2)
  end
  if out ~= nil and not is_table(out) or memo ~= nil and memo ~= false and not is_table(memo) then
    raise('named_modules: expected named_modules([prefix]) or named_modules{prefix =, remove_duplicate =}')
  end
  out = out or {}
  if memo == nil then memo = {} end
  if memo then
    if memo[self] then return out end
    memo[self] = true
  end
  prefix = prefix or ''
  out[#out + 1] = { prefix, self }
  for _, n in ipairs(self._children) do
    local m = self[n]
    if m ~= nil then m:named_modules(prefix == '' and n or prefix .. '.' .. n, out, memo) end
  end
  return out
end

function Module:modules()
  local out = {}
  for i, e in ipairs(self:named_modules()) do out[i] = e[2] end
  return out
end

-- the tensors of list ('_params' or '_buffers') under their names, each once
local function named(self, list, prefix, recurse)
  local out, seen = {}, {}
  local mods = recurse == false and { { prefix or '', self } } or self:named_modules(prefix)
  for _, e in ipairs(mods) do
    local m, p = e[2], e[1]
    for _, n in ipairs(m[list]) do
      local t = m[n]
      if t ~= nil and not seen[t] then
        seen[t] = true
        out[#out + 1] = { p == '' and n or p .. '.' .. n, t }
      end
    end
  end
  return out
end

-- named_parameters(prefix) or named_parameters{prefix =, recurse = false}; the same for buffers
local NAMED_OPTS = { prefix = 'string', recurse = 'boolean' }
local function named_args(fn, list, self, prefix)
  local recurse
  if is_table(prefix) then
    local o = options.check(fn, prefix, NAMED_OPTS)
    prefix, recurse = o.prefix, o.recurse
  elseif prefix ~= nil and type(prefix) ~= 'string' then
    raise(fn .. ': prefix must be a string, got ' .. typename(prefix))
  end
  return named(self, list, prefix, recurse)
end
function Module:named_parameters(prefix) return named_args('named_parameters', '_params', self, prefix) end
function Module:named_buffers(prefix) return named_args('named_buffers', '_buffers', self, prefix) end

-- parameters(), parameters(false) or parameters{recurse = false}: only self's own
local function values(fn, list, self, recurse)
  if is_table(recurse) then recurse = options.check(fn, recurse, { recurse = 'boolean' }).recurse
  elseif recurse ~= nil and type(recurse) ~= 'boolean' then
    raise(fn .. ': recurse must be true or false, got ' .. typename(recurse))
  end
  local out = {}
  for i, e in ipairs(named(self, list, '', recurse)) do out[i] = e[2] end
  return out
end
function Module:parameters(recurse) return values('parameters', '_params', self, recurse) end
function Module:buffers(recurse) return values('buffers', '_buffers', self, recurse) end

function Module:num_parameters()
  local n = 0
  for _, p in ipairs(self:parameters()) do n = n + p:numel() end
  return n
end

function Module:apply(fn)
  if type(fn) ~= 'function' then error('apply: expected a function, got ' .. typename(fn), 2) end
  for _, n in ipairs(self._children) do self[n]:apply(fn) end
  fn(self)
  return self
end

function Module:train(mode)
  if mode == nil then mode = true end
  if type(mode) ~= 'boolean' then raise('train: mode must be true or false, got ' .. typename(mode)) end
  for _, m in ipairs(self:modules()) do m.training = mode end
  return self
end
function Module:eval() return self:train(false) end

-- zero_grad() zeroes each grad in place, keeping its memory (PyTorch 1.13's
-- default, as the optimizers'); zero_grad(true) or {set_to_none = true} drops them
function Module:zero_grad(set_to_none)
  if set_to_none ~= nil and type(set_to_none) ~= 'boolean' then
    set_to_none = (options.check('zero_grad', set_to_none, { set_to_none = 'boolean' }) or {}).set_to_none
  end
  for _, p in ipairs(self:parameters()) do
    local g = p.grad
    if not set_to_none and g ~= nil then autograd.no_grad(g.zero_, g) else p.grad = nil end
  end
end

function Module:requires_grad_(on)
  if on == nil then on = true end
  if type(on) ~= 'boolean' then raise('requires_grad_: expected true or false, got ' .. typename(on)) end
  for _, p in ipairs(self:parameters()) do p.requires_grad = on end
  return self
end

-- (the rest of the interface, in its own files)
require('lunet.nn.module_members')(Module)
require('lunet.nn.module_print')(Module)
require('lunet.nn.module_to')(Module)
require('lunet.nn.module_state')(Module)

return Module
