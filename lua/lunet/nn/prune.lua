-- nn.utils.prune, as torch 1.13's: identity, random_unstructured,
-- l1_unstructured, random_structured, ln_structured, global_unstructured,
-- custom_from_mask, remove, is_pruned. Pruning `name` replaces the parameter
-- by the parameter name_orig and the buffer name_mask (registered last, as
-- torch's, so state_dicts match), and a forward pre-hook recomputes
-- module[name] = name_orig * name_mask (a plain field) before each forward.
-- Pruning again composes the masks (torch's PruningContainer): the new
-- method sees only the entries (channels, for structured ones) still
-- unpruned, and amount counts among them. amount: an integer >= 1 is a count
-- (1 is one entry: to prune everything give the count), a number in [0, 1)
-- a fraction (rounded half to even, as Python's round). Structured dims are
-- 1-based (torch's dim=0 is 1), negative from the end. Ties: lunet's topk is
-- stable, so among equal importances the lowest positions are pruned (l1)
-- or kept (ln); torch's CPU topk picks an unspecified one of them.
-- The random methods use lunet's RNG.
local lunet = require 'lunet'
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local options = require 'lunet.options'
local wn = require 'lunet.nn.weight_norm'
local fail = options.fail
local is_table, typename = core.is_table, core.typename
local no_grad = require('lunet.autograd.mode').no_grad

local M = {}

-- torch's _compute_nparams_toprune with its validations
local function nparams(fn, amount, size)
  if type(amount) ~= 'number' or not (amount >= 0) or amount > 1 and amount % 1 ~= 0 then
    fail(fn, ('amount=%s should either be a float in the range [0, 1) or a non-negative integer count'):format(tostring(amount)))
  end
  if amount >= 1 then
    if amount > size then fail(fn, ('amount=%d should be smaller than the number of parameters to prune=%d'):format(amount, size)) end
    return amount
  end
  local r = amount * size
  local f = math.floor(r)
  if r - f > 0.5 or r - f == 0.5 and f % 2 == 1 then f = f + 1 end   -- (Python's round: half to even)
  return f
end

-- the unstructured methods: mask with k of the still-unpruned entries zeroed,
-- those with the lowest score (dead entries scored +inf, never chosen)
local function unstructured(fn, score)
  return function(imp, mask, amount, who)   -- (who: the caller's name, for global_unstructured)
    local alive = mask:eq(1)
    local k = nparams(who or fn, amount, alive:sum():item())
    local s = score(imp):masked_fill(alive:logical_not(), math.huge):reshape(-1)
    local _, idx = s:topk(k, 1, false)
    return mask:clone():reshape(-1):index_fill(1, idx, 0):reshape(mask:size())
  end
end

-- the structured methods: of the channels along d still alive, those with
-- the lowest score(imp, d) (C entries) are zeroed, k of them
local function structured(fn, score)
  return function(imp, mask, amount, d, n)
    local nd = mask:dim()
    if nd < 2 then fail(fn, ('structured pruning needs a tensor of 2 or more dims, got %d-d'):format(nd)) end
    if type(d) ~= 'number' or d % 1 ~= 0 or d == 0 or d < -nd or d > nd then
      fail(fn, ('dim must be an integer in 1..%d (negative: from the end), got %s'):format(nd, tostring(d)))
    end
    if d < 0 then d = nd + 1 + d end
    local C = mask:size(d)
    local alive = mask:transpose(1, d):reshape(C, -1):ne(0):any(2)
    local k = nparams(fn, amount, alive:sum():item())
    if k == 0 then return mask:clone() end
    local s = score(imp:transpose(1, d):reshape(C, -1), C, n):masked_fill(alive:logical_not(), -math.huge)
    local _, keep = s:topk(alive:sum():item() - k, 1, true)
    local shape = {}
    for i = 1, nd do shape[i] = i == d and C or 1 end
    return mask * lunet.zeros({ C }, { dtype = mask.dtype }):index_fill(1, keep, 1):reshape(shape)
  end
end

-- the methods, as torch's classes (global_unstructured takes the unstructured ones)
M.Identity = { PRUNING_TYPE = 'unstructured', name = 'Identity', compute = function(_, mask) return mask:clone() end }
M.RandomUnstructured = { PRUNING_TYPE = 'unstructured', name = 'RandomUnstructured',
  compute = unstructured('random_unstructured', function(imp) return lunet.rand(imp:size(), { dtype = 'float64' }) end) }
M.L1Unstructured = { PRUNING_TYPE = 'unstructured', name = 'L1Unstructured',
  compute = unstructured('l1_unstructured', function(imp) return imp:abs() end) }
M.RandomStructured = { PRUNING_TYPE = 'structured', name = 'RandomStructured',
  compute = structured('random_structured', function(_, C) return lunet.rand({ C }, { dtype = 'float64' }) end) }

-- ||row||_n of each channel (torch.norm's p: a number, math.huge, -math.huge, 0 or 'fro')
local function ln_norm(rows, _, n)
  if n == 'fro' then n = 2 end
  local a = rows:abs()
  if n == math.huge then return (a:max(2)) end
  if n == -math.huge then return (a:min(2)) end
  if n == 0 then return a:ne(0):to({ dtype = a.dtype }):sum(2) end
  return a:pow(n):sum(2):pow(1 / n)
end
M.LnStructured = { PRUNING_TYPE = 'structured', name = 'LnStructured', compute = structured('ln_structured', ln_norm) }
M.CustomFromMask = { PRUNING_TYPE = 'global', name = 'CustomFromMask',
  compute = function(_, mask, m)
    if not m:is_same_size(mask) then
      fail('custom_from_mask', ('mask must have the shape {%s} of the tensor, got {%s}'):format(table.concat(mask:size(), ','), table.concat(m:size(), ',')))
    end
    return mask * m:to({ dtype = mask.dtype, device = mask.device }) end }

local function key(name) return 'prune:' .. name end

-- torch's BasePruningMethod.apply: mask = method(importance, current mask, ...)
local function apply(fn, module, name, method, imp, ...)
  local reg = wn.hooks_of(fn, module)
  if type(name) ~= 'string' then fail(fn, 'name must be a string, got ' .. typename(name)) end
  local entry = reg[key(name)]
  local w, mask
  if entry then
    w, mask = rawget(module, name), module[name .. '_mask']
  else
    w = wn.param(fn, module, name)
    mask = lunet.ones_like(w)
  end
  if imp == nil then imp = w
  elseif not T.is_tensor(imp) or not imp:is_same_size(w) then
    fail(fn, ('importance_scores must be a tensor of the shape of %s {%s}'):format(name, table.concat(w:size(), ',')))
  end
  local args = { ... }
  local new = no_grad(function() return method.compute(imp:detach(), mask:detach(), unpack(args, 1, 3)) end)
  if not entry then
    wn.unregister(module, '_params', name)
    module:register_parameter(name .. '_orig', w)
    local handle = module:register_forward_pre_hook(function(m) rawset(m, name, m[name .. '_orig'] * m[name .. '_mask']) end)
    reg[key(name)] = { handle = handle }
  end
  module:register_buffer(name .. '_mask', new)
  rawset(module, name, module[name .. '_orig'] * new)
  return module
end

-- identity(module, name): a mask of ones (the reparametrisation alone)
function M.identity(module, name) return apply('identity', module, name, M.Identity) end
-- random_unstructured(module, name, amount)
function M.random_unstructured(module, name, amount)
  return apply('random_unstructured', module, name, M.RandomUnstructured, nil, amount)
end
-- l1_unstructured(module, name, amount[, importance_scores]): the smallest |importance| go
function M.l1_unstructured(module, name, amount, importance_scores)
  return apply('l1_unstructured', module, name, M.L1Unstructured, importance_scores, amount)
end
-- random_structured(module, name, amount, dim)
function M.random_structured(module, name, amount, dim)
  return apply('random_structured', module, name, M.RandomStructured, nil, amount, dim)
end
-- ln_structured(module, name, amount, n, dim[, importance_scores]): the channels along dim of smallest L_n norm go
function M.ln_structured(module, name, amount, n, dim, importance_scores)
  if n ~= 'fro' and type(n) ~= 'number' then
    fail('ln_structured', "n must be a number (math.huge for inf), or 'fro', got " .. tostring(n))
  end
  return apply('ln_structured', module, name, M.LnStructured, importance_scores, amount, dim, n)
end
-- custom_from_mask(module, name, mask): the entries where mask is 0 go
function M.custom_from_mask(module, name, mask)
  if not T.is_tensor(mask) then fail('custom_from_mask', 'mask must be a tensor, got ' .. typename(mask)) end
  return apply('custom_from_mask', module, name, M.CustomFromMask, nil, mask)
end

-- global_unstructured(parameters, method, amount) or (parameters, method,
-- {amount =}): parameters {{module, name}, ...} pruned together, as one
-- vector (method: prune.L1Unstructured or prune.RandomUnstructured)
function M.global_unstructured(parameters, method, amount)
  local fn = 'global_unstructured'
  if is_table(amount) and not T.is_tensor(amount) then amount = options.check(fn, amount, { amount = 'number' }).amount end
  if not is_table(parameters) or T.is_tensor(parameters) or #parameters == 0 then
    fail(fn, 'parameters must be a non-empty list of {module, name} pairs, got ' .. typename(parameters))
  end
  if not is_table(method) or type(method.compute) ~= 'function' then
    fail(fn, 'pruning_method must be one of prune\'s methods (prune.L1Unstructured, ...), got ' .. typename(method))
  end
  if method.PRUNING_TYPE ~= 'unstructured' then
    fail(fn, ('only "unstructured" pruning methods are supported, got %s of type %s'):format(method.name, method.PRUNING_TYPE))
  end
  local ws, ms = {}, {}
  for i, e in ipairs(parameters) do
    if not is_table(e) or not is_table(e[1]) or not rawget(e[1], '_params') or type(e[2]) ~= 'string' then
      fail(fn, ('parameters[%d] must be a {module, name} pair'):format(i))
    end
    local w = rawget(e[1], e[2])
    if not T.is_tensor(w) then fail(fn, ("%s has no parameter '%s'"):format(e[1].__name or 'the module', e[2])) end
    local m = rawget(e[1], e[2] .. '_mask')
    ws[i], ms[i] = w:detach():reshape(-1), (m or lunet.ones_like(w)):reshape(-1)
  end
  local all = no_grad(function() return method.compute(lunet.cat(ws), lunet.cat(ms), amount, fn) end)
  local at = 1
  for i, e in ipairs(parameters) do
    local n = ws[i]:numel()
    M.custom_from_mask(e[1], e[2], all:narrow(1, at, n):reshape(rawget(e[1], e[2]):size()))
    at = at + n
  end
end

-- remove(module, name): makes the pruning permanent: `name` is a parameter
-- again (name_orig's tensor, now holding orig * mask), name_orig, name_mask
-- and the hook go
function M.remove(module, name)
  local fn = 'remove'
  local reg = wn.hooks_of(fn, module)
  local e = type(name) == 'string' and reg[key(name)]
  if not e then
    fail(fn, ("parameter '%s' of module %s has to be pruned before pruning can be removed"):format(tostring(name), module.__name or '?'))
  end
  local orig, mask = module[name .. '_orig'], module[name .. '_mask']
  no_grad(function() orig:mul_(mask) end)
  e.handle:remove()
  reg[key(name)] = nil
  wn.unregister(module, '_params', name .. '_orig')
  wn.unregister(module, '_buffers', name .. '_mask')
  rawset(module, name, nil)
  module:register_parameter(name, orig)
  return module
end

-- is_pruned(module): whether it or one of its submodules has a pruned tensor
function M.is_pruned(module)
  if not is_table(module) or not rawget(module, '_params') then fail('is_pruned', 'module must be an nn.Module, got ' .. typename(module)) end
  for _, m in ipairs(module:modules()) do
    for k in pairs(rawget(m, '_norm_hooks') or {}) do if k:sub(1, 6) == 'prune:' then return true end end
  end
  return false
end

return M
