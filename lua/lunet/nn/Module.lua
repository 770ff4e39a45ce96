-- nn.Module: the base of every layer. A module keeps its parameters,
-- buffers and child modules as fields (self.weight, self.running_mean, ...)
-- and remembers their names in order, so parameters(), state_dict() and
-- printing walk them as PyTorch does. Keys of state_dict are PyTorch's
-- ("0.weight", "layer1.bn.running_var").
local ffi = require 'ffi'
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
  cls.__index = cls
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

function Module:register_parameter(name, t)
  if t ~= nil and not is_tensor(t) then error(('register_parameter: %s must be a tensor or nil'):format(name), 2) end
  if t ~= nil and not t.requires_grad then t.requires_grad = true end
  if not self:_has('_params', name) then table.insert(self._params, name) end
  rawset(self, name, t)
  return t
end

function Module:register_buffer(name, t)
  if t ~= nil and not is_tensor(t) then error(('register_buffer: %s must be a tensor or nil'):format(name), 2) end
  if not self:_has('_buffers', name) then table.insert(self._buffers, name) end
  rawset(self, name, t)
  return t
end

function Module:add_module(name, m)
  name = tostring(name)
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

function Module:children()
  local out = {}
  for _, n in ipairs(self._children) do out[#out + 1] = self[n] end
  return out
end

function Module:named_children()
  local out = {}
  for _, n in ipairs(self._children) do out[#out + 1] = { n, self[n] } end
  return out
end

-- {{name, module}, ...} depth first, self first (name '')
function Module:named_modules(prefix, out)
  if prefix ~= nil and type(prefix) ~= 'string' then error('named_modules: prefix must be a string, got ' .. typename(prefix), 2) end
  out = out or {}
  prefix = prefix or ''
  out[#out + 1] = { prefix, self }
  for _, n in ipairs(self._children) do
    self[n]:named_modules(prefix == '' and n or prefix .. '.' .. n, out)
  end
  return out
end

function Module:modules()
  local out = {}
  for i, e in ipairs(self:named_modules()) do out[i] = e[2] end
  return out
end

local function named(self, list, prefix, out, seen)
  for _, e in ipairs(self:named_modules(prefix)) do
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

-- {{name, tensor}, ...}; a tensor shared by two modules appears once
local function need_prefix(fn, prefix)
  if prefix ~= nil and type(prefix) ~= 'string' then error(fn .. ': prefix must be a string, got ' .. typename(prefix), 3) end
end
function Module:named_parameters(prefix) need_prefix('named_parameters', prefix); return named(self, '_params', prefix, {}, {}) end
function Module:named_buffers(prefix) need_prefix('named_buffers', prefix); return named(self, '_buffers', prefix, {}, {}) end

function Module:parameters()
  local out = {}
  for i, e in ipairs(self:named_parameters()) do out[i] = e[2] end
  return out
end

function Module:buffers()
  local out = {}
  for i, e in ipairs(self:named_buffers()) do out[i] = e[2] end
  return out
end

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

-- set_to_none (default true) drops the grads; false zeroes each in place
-- (PyTorch's default before 2.0), keeping its memory
function Module:zero_grad(set_to_none)
  if set_to_none ~= nil and type(set_to_none) ~= 'boolean' then
    set_to_none = (options.check('zero_grad', set_to_none, { set_to_none = 'boolean' }) or {}).set_to_none
  end
  for _, p in ipairs(self:parameters()) do
    local g = p.grad
    if set_to_none == false and g ~= nil then autograd.no_grad(g.zero_, g) else p.grad = nil end
  end
end

function Module:requires_grad_(on)
  if on == nil then on = true end
  for _, p in ipairs(self:parameters()) do p.requires_grad = on end
  return self
end

-- ---- devices and dtypes ----------------------------------------------------------------

-- Replace t's contents by u's (another device or dtype) while keeping the
-- Lua object, so optimizers and other holders of t see the move.
local function swap_into(t, u)
  local old, new = t.p, u.p
  if old == new then return end
  new.grad_flag, old.grad_flag = old.grad_flag, 0
  t.p, u.p = new, old
end
Module._swap_into = swap_into

-- m:to('cpu:1'), m:to('float64'), m:to{device=..., dtype=...}: moves parameters
-- (floating ones for dtype), their gradients and buffers, in place
local FLOAT_DTYPES = { float32 = true, float64 = true, float16 = true, bfloat16 = true }
function Module:to(what, more)
  local opts = what
  if type(what) == 'string' then
    if core.dtype_ids[what] then opts = { dtype = what }
    else opts = { device = what, dtype = more } end
  elseif not is_table(what) then
    error('to: expected a device, a dtype or {device=, dtype=}, got ' .. typename(what), 2)
  else
    require('lunet.options').check('to', what, { device = true, dtype = true })
  end
  -- (an integer dtype left the float parameters as they were, silently)
  local dt = opts.dtype and core.dtype_ids[opts.dtype]
  if dt and not FLOAT_DTYPES[core.dtypes[dt]] then
    raise(('to: a module moves to a floating-point dtype (float32, float64, float16, bfloat16), got %s'):format(opts.dtype))
  end
  local function move(t)
    local u = t
    if opts.device then u = u:to({ device = opts.device }) end
    if opts.dtype and t:is_floating_point() then u = u:to({ dtype = opts.dtype }) end
    if u ~= t then
      local g = t.grad
      swap_into(t, u)
      if g then t.grad = autograd.no_grad(move, g) end
    end
    return t
  end
  autograd.no_grad(function()
    for _, p in ipairs(self:parameters()) do move(p) end
    for _, b in ipairs(self:buffers()) do move(b) end
  end)
  return self
end
function Module:float() return self:to('float32') end
function Module:double() return self:to('float64') end
function Module:cpu(k)
  if k ~= nil and (type(k) ~= 'number' or k % 1 ~= 0) then error('cpu: device index must be an integer, got ' .. tostring(k), 2) end
  return self:to('cpu:' .. (k or 0))
end

-- ---- state dicts ------------------------------------------------------------------------

-- flat {name = tensor}: parameters and buffers (detached, sharing storage)
function Module:state_dict()
  local sd = {}
  for _, e in ipairs(named(self, '_params', '', {}, {})) do sd[e[1]] = e[2]:detach() end
  for _, e in ipairs(named(self, '_buffers', '', {}, {})) do sd[e[1]] = e[2]:detach() end
  return sd
end

local function shape_str(t) return '{' .. table.concat(t:size(), ',') .. '}' end

-- load_state_dict(sd[, strict = true]): copies values in place. Raises one
-- error naming every missing, unexpected and mis-shaped key; with strict =
-- false only shape mismatches raise. Returns {missing = {...}, unexpected = {...}}.
function Module:load_state_dict(sd, strict)
  if not is_table(sd) then error('load_state_dict: expected a table of tensors, got ' .. typename(sd), 2) end
  if strict ~= nil and type(strict) ~= 'boolean' then   -- PyTorch's keyword: {strict = false}
    strict = require('lunet.options').check('load_state_dict', strict, { strict = 'boolean' }).strict
  end
  if strict == nil then strict = true end
  local own = {}
  for _, e in ipairs(named(self, '_params', '', {}, {})) do own[e[1]] = e[2] end
  for _, e in ipairs(named(self, '_buffers', '', {}, {})) do own[e[1]] = e[2] end
  local missing, unexpected, bad = {}, {}, {}
  for k, t in pairs(own) do
    local v = sd[k]
    if v == nil then missing[#missing + 1] = k
    elseif not is_tensor(v) then bad[#bad + 1] = ('%s is a %s, not a tensor'):format(k, typename(v))
    elseif shape_str(v) ~= shape_str(t) then
      bad[#bad + 1] = ('%s: checkpoint has shape %s, model has %s'):format(k, shape_str(v), shape_str(t))
    end
  end
  for k in pairs(sd) do if own[k] == nil then unexpected[#unexpected + 1] = tostring(k) end end
  table.sort(missing); table.sort(unexpected); table.sort(bad)
  local msgs = {}
  if strict and #missing > 0 then msgs[#msgs + 1] = 'missing keys: ' .. table.concat(missing, ', ') end
  if strict and #unexpected > 0 then msgs[#msgs + 1] = 'unexpected keys: ' .. table.concat(unexpected, ', ') end
  if #bad > 0 then msgs[#msgs + 1] = 'size mismatch: ' .. table.concat(bad, '; ') end
  if #msgs > 0 then error('load_state_dict: ' .. table.concat(msgs, '; '), 2) end
  autograd.no_grad(function()
    for k, t in pairs(own) do
      local v = sd[k]
      if v ~= nil then t:copy_(v) end
    end
  end)
  return { missing = missing, unexpected = unexpected, missing_keys = missing, unexpected_keys = unexpected }   -- (PyTorch's names too)
end

-- ---- copying and printing --------------------------------------------------------------

local function deep_copy(v, memo)
  if is_tensor(v) then
    if memo[v] then return memo[v] end
    local c = autograd.no_grad(function() return v:clone() end)
    if v.requires_grad then c.requires_grad = true end
    memo[v] = c
    return c
  end
  if not is_table(v) then return v end
  if memo[v] then return memo[v] end
  local c = {}
  memo[v] = c
  for k, x in pairs(v) do c[deep_copy(k, memo)] = deep_copy(x, memo) end
  return setmetatable(c, getmetatable(v))
end

-- a deep copy: new parameters and buffers with the same values, no gradients
function Module:clone() return deep_copy(self, {}) end

-- the one-line description inside the parentheses (layers override)
function Module:extra_repr() return nil end

-- 41418 -> "41,418": every parameter count lunet prints is grouped so
local function group(n)
  local s = tostring(n)
  return (s:reverse():gsub('(%d%d%d)', '%1,'):reverse():gsub('^,', ''))
end
Module.format_count = group

function Module:repr(indent)
  indent = indent or ''
  local extra = self:extra_repr()
  local head = self.__name .. (extra and '(' .. extra .. ')' or '')
  if #self._children == 0 then return head end
  local lines = { head .. ' {' }
  for _, n in ipairs(self._children) do
    lines[#lines + 1] = indent .. '  (' .. n .. '): ' .. self[n]:repr(indent .. '  ')
  end
  lines[#lines + 1] = indent .. '}'
  return table.concat(lines, '\n')
end

Module.__tostring = function(self)
  local n = self:num_parameters()
  return self:repr() .. ('\n%s parameter%s'):format(group(n), n == 1 and '' or 's')
end

return Module
