-- lunet.nn.lazy_class(spec): the class of a lazy module (torch 1.13's
-- LazyModuleMixin): nn.LazyLinear(out_features, ...), nn.LazyConv2d(out,
-- kernel_size, ...), nn.LazyBatchNorm2d(...) take the regular module's
-- arguments without the first (in_features, in_channels, num_features),
-- which the first forward reads off its input.
-- Until then the parameters and buffers are placeholders: empty tensors of
-- the right dtype and device (0-d num_batches_tracked stays real, as
-- torch's), in parameters(), state_dict() and moved by :to(). The first
-- forward builds the regular module from the inferred size (its checks and
-- initialisation), moves it to the placeholders' dtype and device, swaps
-- its tensors into the placeholders' Lua objects (an optimizer built over
-- them trains the real ones, as torch's in-place materialize) and turns the
-- module into the regular class (torch's cls_to_become). load_state_dict
-- materializes it from the state dict's shapes instead (_lazy_load_hook).
-- spec: name, regular (the class), dims ({n, ...} input dims accepted),
-- channel (the input dim of the size), from_tensor(self, key, t) (the size a
-- state dict tensor gives, or nil), probe(args) (a legal size to check the
-- constructor's arguments with), normalize(args) (the arguments the
-- regular module gets, where torch's lazy defaults differ).
local lunet = require 'lunet'
local typename = require('lunet.core').typename
local Module = require 'lunet.nn.Module'
local options = require 'lunet.options'
local raise = options.raise

local SKIP = { _params = true, _buffers = true, _children = true, training = true }

return function(spec)
  local name, Regular = spec.name, spec.regular
  local class = Module:extend(name)
  local function renamed(err)   -- (the regular module's error, said as this one's)
    err = tostring(err):gsub('^[^:\n]*:%d+: ', '', 1)
    return (err:gsub(Regular.__name:gsub('%.', '%%.') .. '%f[^%w]', name))
  end
  local function build(self, size)
    local args = self._lazy_args
    local ok, m = pcall(Regular, size, unpack(args, 1, args.n))
    if not ok then raise(renamed(m)) end
    return m
  end
  -- the regular module's fields but its tensors: those the lazy one holds
  local function adopt(self, m, placeholders)
    for k, v in pairs(m) do
      if not SKIP[k] and not m:_has('_params', k) and not m:_has('_buffers', k) then rawset(self, k, v) end
    end
    if not placeholders then return end
    for _, list in ipairs({ '_params', '_buffers' }) do
      for _, n in ipairs(m[list]) do
        local t = m[n]
        if t ~= nil and t:dim() > 0 then
          t = lunet.empty({ 0 }, { dtype = t.dtype, device = t.device })
        end
        if list == '_params' then self:register_parameter(n, t) else self:register_buffer(n, t) end
      end
    end
  end

  function class:__init(...)
    local args = { n = select('#', ...), ... }
    rawset(self, '_lazy_args', spec.normalize and spec.normalize(args) or args)
    adopt(self, build(self, spec.probe(self._lazy_args)), true)
    rawset(self, spec.field, 0)   -- (torch's in_features=0 until the first forward)
  end

  -- true until the first forward (or a load_state_dict) gave the sizes
  function class:has_uninitialized_params() return rawget(self, '_lazy_args') ~= nil end

  -- builds the regular module of input size `size` into self, in place
  function class:_materialize(size)
    local m = build(self, size)
    local first = m[m._params[1] or m._buffers[1] or '']
    local ph = first and self[m._params[1] or m._buffers[1]]
    if ph and (ph.dtype ~= first.dtype or ph.device ~= first.device) then
      m:to({ dtype = ph.dtype, device = ph.device })   -- (a :to() since construction)
    end
    for _, list in ipairs({ '_params', '_buffers' }) do
      for _, n in ipairs(m[list]) do
        local old, new = rawget(self, n), m[n]
        -- (a 0-d buffer, num_batches_tracked, was real already: kept)
        if old ~= nil and new ~= nil and new:dim() > 0 then Module._swap_into(old, new)
        elseif old == nil then rawset(self, n, new) end
      end
    end
    adopt(self, m)
    rawset(self, '_lazy_args', nil)
    return setmetatable(self, Regular)
  end

  local function infer(self, x)
    if not lunet.is_tensor(x) then raise(('%s: input must be a tensor, got %s'):format(name, typename(x))) end
    local d, ok = x:dim(), false
    for _, n in ipairs(spec.dims) do ok = ok or d == n end
    if not ok then
      raise(('%s: expected %s input, got %d-d'):format(name, spec.expected or 'a ' .. table.concat(spec.dims, '-d or ') .. '-d', d))
    end
    return self:_materialize(x:size(spec.channel))
  end

  -- (materialized before the hooks run, as torch's first forward pre hook)
  function class:__call(x, ...)
    infer(self, x)
    return self(x, ...)
  end
  function class:forward(x, ...)
    infer(self, x)
    return self:forward(x, ...)
  end

  -- load_state_dict: the size from the state dict's tensors (none there, or
  -- placeholders of an unmaterialized model: it stays lazy)
  function class:_lazy_load(sd, prefix)
    for _, n in ipairs(spec.keys) do
      local t = sd[prefix .. n]
      local size = lunet.is_tensor(t) and spec.from_tensor(self, n, t)
      if size then return self:_materialize(size) end
    end
  end

  function class:extra_repr()
    local r = Regular.extra_repr(self)
    return (r and r .. ', ' or '') .. 'uninitialized'
  end

  return class
end
