-- lunet.optim.Optimizer: the base of SGD, Adam, AdamW, RMSprop, Adagrad,
-- Adamax, NAdam, RAdam, Adadelta, Rprop, ASGD and LBFGS, as
-- torch.optim.Optimizer: param groups, per-param state, zero_grad, state_dict.
--
--   opt = optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9})
--   opt = optim.SGD({{params = body, lr = 0.01}, {params = head}}, {lr = 0.1})
--
-- opt.param_groups[i] is a table {params = {...}, lr = ..., ...} (change lr
-- there, as schedulers do); opt.state[p] is the state of param p (tensors and
-- a step count). Subclasses set `defaults`, `check(fn, group)` and
-- `update(group, p, g, state)`.
local lunet = require 'lunet'
local core = require 'lunet.core'
local C = core.C
local is_table, typename = core.is_table, core.typename
local options = require 'lunet.options'

local Optimizer = {}
Optimizer.__index = Optimizer

local is_tensor = lunet.is_tensor

-- The error level of the first caller outside lunet/optim/ (the user's line).
local function user_level()
  local lvl = 3
  while true do
    local info = debug.getinfo(lvl, 'S')
    if not info then return 1 end
    if not info.source:find('lunet/optim/', 1, true) then return lvl - 1 end
    lvl = lvl + 1
  end
end

-- Raises "Name: problem" at the user's line.
function Optimizer.fail(fn, msg) error(fn .. ': ' .. msg, user_level()) end

-- Raises the C library's last error, prefixed by fn, at the user's line.
function Optimizer.c_fail(fn) Optimizer.fail(fn, core.last_error()) end

-- A number option: present, finite, and cond(v) true, else "invalid <what> v".
function Optimizer.number(fn, group, key, what, cond, expected)
  local v = group[key]
  if type(v) ~= 'number' or v ~= v or not cond(v) then
    Optimizer.fail(fn, ('invalid %s: %s (expected %s)'):format(what, tostring(v), expected))
  end
  return v
end

-- The betas option: a table {beta1, beta2}, each in [0, 1) (torch's message,
-- indices 1-based).
function Optimizer.betas(fn, group)
  local b = group.betas
  if not is_table(b) or type(b[1]) ~= 'number' or type(b[2]) ~= 'number' then
    Optimizer.fail(fn, 'betas must be a table of two numbers {beta1, beta2}')
  end
  for i = 1, 2 do
    if not (b[i] >= 0 and b[i] < 1) then
      Optimizer.fail(fn, ('invalid beta parameter at index %d: %s (expected in [0, 1))'):format(i, tostring(b[i])))
    end
  end
  return b
end

-- Torch7's optim names for the same options
local TORCH7 = {learningRate = 'lr', weightDecay = 'weight_decay', epsilon = 'eps'}
-- keys schedulers keep in param groups (a group copied from another optimizer may hold them)
local SCHEDULER_KEYS = {'initial_lr', 'max_lr', 'min_lr', 'max_momentum', 'base_momentum', 'swa_lr'}

-- the options a class takes (its defaults and lr, typed by the default's
-- type, and class.optional: {name = type} of those whose default is nil),
-- those a param group may hold, and the aliases that apply
local function known_of(class)
  local k = rawget(class, '_known')
  if k then return k, class._known_group, class._aliases end
  k = {lr = 'number'}
  for name, v in pairs(class.defaults) do k[name] = type(v) end
  for name, t in pairs(class.optional or {}) do k[name] = t end
  local g, a = {params = true}, {}
  for name, t in pairs(k) do g[name] = t end
  for _, name in ipairs(SCHEDULER_KEYS) do g[name] = true end
  for alias, target in pairs(TORCH7) do if k[target] then a[alias] = target end end
  class._known, class._known_group, class._aliases = k, g, a
  return k, g, a
end
Optimizer.known_of = known_of

local function add_group(self, group, fn)
  if not is_table(group) then Optimizer.fail(fn, 'a param group must be a table {params = {...}, ...}, got ' .. typename(group)) end
  local _, known_group = known_of(getmetatable(self))
  for k in pairs(group) do
    if known_group[k] == nil then
      local s = options.suggest(tostring(k), known_group)
      Optimizer.fail(fn, ("unknown option '%s' in a param group%s"):format(tostring(k), s and (" (did you mean '" .. s .. "'?)") or ''))
    end
  end
  local params = group.params
  if is_tensor(params) then params = {params} end
  if not is_table(params) or #params == 0 then
    Optimizer.fail(fn, 'a param group needs a non-empty list of tensors in `params`')
  end
  local g = {params = {}}
  for i, p in ipairs(params) do
    if not is_tensor(p) then
      Optimizer.fail(fn, ('param %d is a %s, expected a tensor'):format(i, typename(p)))
    end
    if p.dtype ~= 'float32' and p.dtype ~= 'float64' then
      Optimizer.fail(fn, ('param %d is %s, expected float32 or float64'):format(i, p.dtype))
    end
    if not p:is_leaf() then   -- (its gradient is not kept: nothing would train)
      Optimizer.fail(fn, ("param %d is not a leaf (an operation's result, whose gradient is not kept); "
        .. 'optimize the tensor it was made from'):format(i))
    end
    if self._seen[p] then Optimizer.fail(fn, ('param %d appears in more than one group'):format(i)) end
    self._seen[p] = true
    g.params[i] = p
  end
  for k, v in pairs(group) do if k ~= 'params' then g[k] = v end end
  for k, v in pairs(self.defaults) do
    if g[k] == nil then
      if is_table(v) then local c = {}; for i, x in ipairs(v) do c[i] = x end; v = c end
      g[k] = v
    end
  end
  self:check(fn, g)
  self.param_groups[#self.param_groups + 1] = g
end

-- Optimizer.new(class, name, params, opts): params is a list of tensors or
-- of groups {params = {...}, option = value}; opts fills what groups omit.
-- opts may also come by position, as PyTorch's (params, lr, momentum, ...):
-- class.positional names them.
function Optimizer.new(class, name, params, ...)
  local self = setmetatable({name = name, param_groups = {}, state = {}, _seen = {}}, class)
  local known, _, aliases = known_of(class)
  local opts = options.check(name, options.positional(name, class.positional or {}, ...), known, aliases)
  local defaults = {}
  for k, v in pairs(class.defaults) do defaults[k] = v end
  for k, v in pairs(opts or {}) do defaults[k] = v end
  if class.lr_required and defaults.lr == nil then Optimizer.fail(name, 'option lr is required') end
  self.defaults = defaults
  if is_tensor(params) then params = {params} end
  if not is_table(params) or #params == 0 then
    Optimizer.fail(name, 'expected a non-empty list of tensors or param groups, got ' ..
      (is_table(params) and 'an empty list' or type(params)))
  end
  if is_tensor(params[1]) then add_group(self, {params = params}, name)
  else
    for _, g in ipairs(params) do
      if not is_table(g) then Optimizer.fail(name, 'param groups must be tables, got ' .. typename(g)) end
      add_group(self, g, name)
    end
  end
  return self
end

function Optimizer:add_param_group(group) add_group(self, group, self.name .. ':add_param_group') end

-- set_to_none = false (the default, as PyTorch 1.13) zeroes each grad in
-- place, keeping its memory; true drops the grads (p.grad = nil). PyTorch's
-- keyword form {set_to_none = true} works too.
local ZERO_GRAD_OPTS = {set_to_none = 'boolean'}
function Optimizer:zero_grad(set_to_none)
  if set_to_none ~= nil and type(set_to_none) ~= 'boolean' then
    set_to_none = (options.check(self.name .. ':zero_grad', set_to_none, ZERO_GRAD_OPTS) or {}).set_to_none
  end
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do
      local g = p.grad
      if g ~= nil then
        if set_to_none then p.grad = nil else g:zero_() end
      end
    end
  end
end

-- One update of every param that has a grad (params without .grad are
-- skipped). closure, when given, is called first (it should zero the grads,
-- compute the loss and call backward) and its result is returned.
function Optimizer:step(closure)
  local loss
  if closure ~= nil then
    if type(closure) ~= 'function' then Optimizer.fail(self.name .. ':step', 'closure must be a function') end
    loss = closure()
  end
  local state = self.state
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do
      local g = p.grad
      if g ~= nil then
        local st = state[p]
        if st == nil then st = {}; state[p] = st end
        self:update(group, p, g, st)
        C.ln_storage_bump_unrecorded(p.p)   -- (a write no history records: a graph that saved p cannot backward now)
      end
    end
  end
  return loss
end

-- ---- saving and resuming ------------------------------------------------------------

local function copy_value(v)
  if is_tensor(v) then return v:clone() end
  if is_table(v) then local c = {}; for k, x in pairs(v) do c[k] = copy_value(x) end; return c end
  return v
end

-- A plain table that lunet.save can write: {state = {[i] = {step = n,
-- exp_avg = tensor, ...}}, param_groups = {{lr = ..., params = {i, ...}}}},
-- params numbered 1.. across groups in order. Tensors are copies, so the
-- table keeps this moment's state while training goes on.
function Optimizer:state_dict()
  local state, groups, n = {}, {}, 0
  for gi, group in ipairs(self.param_groups) do
    local g = {params = {}}
    for k, v in pairs(group) do if k ~= 'params' then g[k] = copy_value(v) end end
    for j, p in ipairs(group.params) do
      n = n + 1
      g.params[j] = n
      if self.state[p] then state[n] = copy_value(self.state[p]) end
    end
    groups[gi] = g
  end
  return {state = state, param_groups = groups}
end

-- Restores hyper-parameters and state from state_dict()'s table; the groups
-- must hold as many params as this optimizer's. State tensors are copied to
-- each param's device and dtype.
function Optimizer:load_state_dict(sd)
  local fn = self.name .. ':load_state_dict'
  if not is_table(sd) or not is_table(sd.param_groups) or not is_table(sd.state) then
    Optimizer.fail(fn, 'expected a table with `state` and `param_groups`')
  end
  if #sd.param_groups ~= #self.param_groups then
    Optimizer.fail(fn, ('the saved state has %d param groups, this optimizer %d'):format(
      #sd.param_groups, #self.param_groups), 3)
  end
  for gi, saved in ipairs(sd.param_groups) do
    local group = self.param_groups[gi]
    if not is_table(saved.params) or #saved.params ~= #group.params then
      Optimizer.fail(fn, ('param group %d: the saved state has %d params, this optimizer %d'):format(
        gi, is_table(saved.params) and #saved.params or 0, #group.params), 3)
    end
  end
  local state = {}
  for gi, saved in ipairs(sd.param_groups) do
    local group = self.param_groups[gi]
    for k, v in pairs(saved) do if k ~= 'params' then group[k] = copy_value(v) end end
    for j, p in ipairs(group.params) do
      local st = sd.state[saved.params[j]]
      if st ~= nil then
        local s = {}
        for k, v in pairs(st) do
          if is_tensor(v) then
            if v:numel() ~= p:numel() then
              Optimizer.fail(fn, ("state '%s' of param %d has %d elements, the param %d"):format(
                k, saved.params[j], v:numel(), p:numel()), 3)
            end
            s[k] = lunet.empty_like(p):copy_(v:reshape(p:size()):to(p.device))
          else
            s[k] = copy_value(v)
          end
        end
        state[p] = s
      end
    end
    self:check(fn, group)
  end
  self.state = state
end

function Optimizer:__tostring()
  local lines = {self.name .. ' ('}
  for gi, group in ipairs(self.param_groups) do
    lines[#lines + 1] = 'Parameter Group ' .. gi
    local keys = {}
    for k in pairs(group) do if k ~= 'params' then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v = group[k]
      if is_table(v) then
        local parts = {}
        for i, x in ipairs(v) do parts[i] = tostring(x) end
        v = '(' .. table.concat(parts, ', ') .. ')'
      end
      lines[#lines + 1] = ('    %s: %s'):format(k, tostring(v))
    end
  end
  lines[#lines + 1] = ')'
  return table.concat(lines, '\n')
end

-- A subclass: class.defaults holds its options; instances print with __tostring.
function Optimizer.subclass(defaults)
  local class = setmetatable({defaults = defaults}, {__index = Optimizer})
  class.__index = class
  class.__tostring = Optimizer.__tostring
  return class
end

return Optimizer
