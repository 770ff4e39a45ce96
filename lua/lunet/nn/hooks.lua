-- lunet.nn.hooks: forward and backward hooks on a module, as PyTorch's.
--
--   local h = model.fc1:register_forward_hook(function(module, inputs, output)
--     features[#features + 1] = output:detach()   -- (return a tensor to replace the output)
--   end)
--   model.conv1:register_forward_pre_hook(function(module, inputs)
--     return inputs[1]:clamp(-1, 1)                -- (return a value or a list to replace the inputs)
--   end)
--   ...
--   model.fc2:register_full_backward_hook(function(module, grad_input, grad_output)
--     return { grad_input[1]:clamp(-1, 1) }       -- (return a list to replace grad_input)
--   end)                                         -- (backward pre-hook: fn(module, grad_output))
--   h:remove()
--
-- A hook runs each time the module is called (module(x), and as a child of
-- a container, a pipeline's stage or a DataParallel replica, which call
-- their modules), in the order registered (opts.prepend = true: first).
-- inputs is the list of the call's arguments. Backward hooks run in the
-- backward of each call made in grad mode (lunet.nn.backward_hooks).
-- A module with hooks is never fused with its neighbours (lunet.nn.fuse):
-- it runs as written, so that its hooks see its own input, output and
-- gradients. A copy (module:clone()) keeps the
-- hooks it had; DataParallel's replicas and a hybrid pipeline's run the
-- model's hooks as they are at each forward (hooks.share). A pipeline cuts
-- a model into atoms when it is built: a hook on a nested Sequential it
-- flattened (one registered after) never runs; register it before.
local options = require 'lunet.options'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename   -- (tensors are tables)
local S = require 'lunet.autograd.mode'
local backward = require 'lunet.nn.backward_hooks'

local hooks = {}

-- whether module m runs as its class wrote it: no forward of its own (an
-- instance field: DataParallel's sync_bn, deferred BatchNorm) and no hooks;
-- only such modules are fused
function hooks.plain(m) return rawget(m, 'forward') == nil and rawget(m, '_hooks') == nil end

-- forward pre-hooks, forward hooks, full backward hooks, backward pre-hooks
local KINDS = { 'pre', 'post', 'bw', 'bwpre' }

local Handle = {}
Handle.__index = Handle
Handle.__name = 'nn.hooks.Handle'

-- removes the hook (again: nothing); the last one removed leaves the module plain
function Handle:remove()
  if getmetatable(self) ~= Handle then options.raise('RemovableHandle.remove: call it as a method (handle:remove())') end
  local m, entry = self.module, self.entry
  local h = rawget(m, '_hooks')
  if not h then return end
  for _, kind in ipairs(KINDS) do
    -- (a new list: a call iterating the old one, whose hook removes itself, goes on over it)
    local kept = {}
    for _, e in ipairs(h[kind]) do if e ~= entry then kept[#kept + 1] = e end end
    h[kind] = kept
  end
  if #h.pre == 0 and #h.post == 0 and #h.bw == 0 and #h.bwpre == 0 then rawset(m, '_hooks', nil) end
end
Handle.__tostring = function(self) return ('RemovableHandle(%s)'):format(self.module.__name) end

local function callable(f)
  if type(f) == 'function' then return true end
  local mt = getmetatable(f)
  return is_table(f) and mt ~= nil and mt.__call ~= nil
end

function hooks.register(m, kind, fname, fn, opts)
  if not is_table(m) or not rawget(m, '_params') then
    options.raise(('%s: call it as a method on a module (module:%s(fn)), got %s'):format(fname, fname, typename(m)))
  end
  if not callable(fn) then options.fail(fname, 'expected a function, got ' .. typename(fn)) end
  opts = options.check(fname, opts, { prepend = 'boolean' }) or {}
  local h = rawget(m, '_hooks')
  if not h then
    h = { pre = {}, post = {}, bw = {}, bwpre = {} }
    rawset(m, '_hooks', h)
  end
  local entry = { fn = fn }
  local list = {}
  if opts.prepend then list[1] = entry end
  for _, e in ipairs(h[kind]) do list[#list + 1] = e end
  if not opts.prepend then list[#list + 1] = entry end
  h[kind] = list
  return setmetatable({ module = m, entry = entry }, Handle)
end

-- the copies of a module (DataParallel's replicas, a hybrid pipeline's) run
-- the hooks registered on it since they were made: to and each of its
-- descendants share from's (the same tables: a removal reaches them too);
-- two modules of the same tree (copies), walked together, nothing allocated
function hooks.share(from, to)
  if rawget(to, '_hooks') ~= rawget(from, '_hooks') then rawset(to, '_hooks', rawget(from, '_hooks')) end
  local names = from._children
  for i = 1, #names do
    local a, b = from[names[i]], to[names[i]]
    if a and b then hooks.share(a, b) end
  end
end

-- module(...) when it has hooks: the pre-hooks, forward, the hooks; with
-- backward hooks (in grad mode) the inputs and output through their nodes
local function pack(...) return select('#', ...), { ... } end

function hooks.call(m, h, ...)
  local n = select('#', ...)
  local inputs = { ... }
  local pre = h.pre
  for i = 1, #pre do
    local r = pre[i].fn(m, inputs)
    if r ~= nil then
      -- (PyTorch: a tuple replaces the arguments, any other value is the one argument)
      if is_table(r) then inputs, n = r, table.maxn(r) else inputs, n = { r }, 1 end
    end
  end
  local bw
  if (h.bw[1] or h.bwpre[1]) and S.grad_enabled then bw, inputs = backward.inputs(m, h.bw, h.bwpre, inputs, n) end
  -- (a forward may return more than its output, as pooling's indices or a
  -- recurrent layer's state: the hooks see and may replace the first, the
  -- rest go back to the caller as they are)
  local nres, res = pack(m:forward(unpack(inputs, 1, n)))
  local out = res[1]
  local post = h.post
  for i = 1, #post do
    local r = post[i].fn(m, inputs, out)
    if r ~= nil then out = r end
  end
  if bw then out = backward.output(bw, out) end
  if nres <= 1 then return out end
  return out, unpack(res, 2, nres)
end

return hooks
