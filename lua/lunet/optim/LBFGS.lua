-- lunet.optim.LBFGS, as torch.optim.LBFGS (1.13, after minFunc): limited-memory
-- BFGS over all params flattened into one vector, with an optional strong
-- Wolfe line search. One param group only.
--
--   local opt = optim.LBFGS(model:parameters(), {lr = 1, line_search_fn = 'strong_wolfe'})
--   opt:step(function() opt:zero_grad(); local l = loss(); l:backward(); return l end)
--
-- step(closure) runs up to max_iter iterations, calling the closure (with
-- grad enabled) each time it needs the loss and gradients; it returns the
-- closure's first result. Composed from tensor ops under no_grad: the work is
-- dot products and axpys on the flat vector, which those ops already do well.
-- State (of the first param, as torch's): func_evals, n_iter, d, t, old_dirs,
-- old_stps, ro, H_diag, prev_flat_grad, prev_loss, al. Scalars are numbers;
-- with float32 params they are rounded to float32 where torch's are float32
-- tensors.
local ffi = require 'ffi'
local lunet = require 'lunet'
local core = require 'lunet.core'
local Optimizer = require 'lunet.optim.Optimizer'
local options = require 'lunet.options'
local is_table, typename = core.is_table, core.typename
local is_tensor = lunet.is_tensor

local LBFGS = Optimizer.subclass {
  lr = 1, max_iter = 20, tolerance_grad = 1e-7, tolerance_change = 1e-9, history_size = 100,
}
-- (options whose default is nil: max_eval is max_iter * 5 // 4)
LBFGS.optional = {max_eval = 'number', line_search_fn = 'string'}
LBFGS.positional = {'lr', 'max_iter', 'max_eval', 'tolerance_grad', 'tolerance_change', 'history_size',
  'line_search_fn'}

local function nonneg(v) return v >= 0 and v < math.huge end
local function posint(v) return v >= 1 and v % 1 == 0 and v < 2 ^ 53 end

function LBFGS:check(fn, g)
  local num = Optimizer.number
  num(fn, g, 'lr', 'learning rate', nonneg, '>= 0')
  num(fn, g, 'max_iter', 'max_iter value', posint, 'a positive integer')
  if g.max_eval ~= nil then num(fn, g, 'max_eval', 'max_eval value', posint, 'a positive integer') end
  num(fn, g, 'tolerance_grad', 'tolerance_grad value', nonneg, '>= 0')
  num(fn, g, 'tolerance_change', 'tolerance_change value', nonneg, '>= 0')
  num(fn, g, 'history_size', 'history_size value', posint, 'a positive integer')
  if g.line_search_fn ~= nil and g.line_search_fn ~= 'strong_wolfe' then
    Optimizer.fail(fn, ("only 'strong_wolfe' is supported as line_search_fn, got %s"):format(tostring(g.line_search_fn)))
  end
end

-- optim.LBFGS(params, {lr = 1, max_iter = 20, max_eval = max_iter * 5 // 4,
--   tolerance_grad = 1e-7, tolerance_change = 1e-9, history_size = 100,
--   line_search_fn = nil | 'strong_wolfe'}), or PyTorch's positional order
local function new(params, ...)
  local self = Optimizer.new(LBFGS, 'LBFGS', params, ...)
  if #self.param_groups ~= 1 then
    Optimizer.fail('LBFGS', "doesn't support per-parameter options (param groups): give one list of params")
  end
  local group = self.param_groups[1]
  if self.defaults.max_eval == nil then self.defaults.max_eval = math.floor(self.defaults.max_iter * 5 / 4) end
  if group.max_eval == nil then group.max_eval = self.defaults.max_eval end
  local p1 = group.params[1]
  for i, p in ipairs(group.params) do
    -- (all params are one flat vector: torch.cat would fail at the first step)
    if p.dtype ~= p1.dtype or p.device ~= p1.device then
      Optimizer.fail('LBFGS', ('param %d is %s on %s, param 1 %s on %s: all params must share a dtype and device'):format(
        i, p.dtype, tostring(p.device), p1.dtype, tostring(p1.device)))
    end
  end
  return self
end

function LBFGS:add_param_group()
  Optimizer.fail('LBFGS:add_param_group', "LBFGS doesn't support per-parameter options (param groups)")
end

-- ---- the flat vector ---------------------------------------------------------------

local f32 = ffi.new('float[1]')
local function float32(x) f32[0] = x; return tonumber(f32[0]) end
local function same(x) return x end

local function numel(params)
  local n = 0
  for _, p in ipairs(params) do n = n + p:numel() end
  return n
end

local function gather_flat_grad(params)
  local views = {}
  for i, p in ipairs(params) do
    local g = p.grad
    views[i] = g == nil and lunet.zeros_like(p):reshape(-1) or g:reshape(-1)
  end
  return lunet.cat(views, 1)
end

-- params += step * update
local function add_grad(params, step, update)
  local off = 0
  for _, p in ipairs(params) do
    local n = p:numel()
    p:add_(update:narrow(1, off + 1, n):view_as(p), step)
    off = off + n
  end
end

local function clone_params(params)
  local out = {}
  for i, p in ipairs(params) do out[i] = p:clone() end
  return out
end

local function set_params(params, x)
  for i, p in ipairs(params) do p:copy_(x[i]) end
end

local function amax(t) return t:abs():max():item() end

-- the closure's loss as a number
local function loss_value(v)
  if type(v) == 'number' then return v end
  if is_tensor(v) and v:numel() == 1 then return v:item() end
  options.fail('LBFGS:step', 'the closure must return the loss (a number or a one-element tensor), got ' ..
    (is_tensor(v) and ('a tensor of %d elements'):format(v:numel()) or typename(v)))
end

local function evaluate(closure) return lunet.enable_grad(closure) end

-- ---- the strong Wolfe line search (torch's _strong_wolfe) ------------------------------

local function cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds)
  local lo, hi
  if bounds then lo, hi = bounds[1], bounds[2]
  elseif x1 <= x2 then lo, hi = x1, x2 else lo, hi = x2, x1 end
  local d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
  local d2_square = d1 * d1 - g1 * g2
  if d2_square >= 0 then
    local d2 = math.sqrt(d2_square)
    local min_pos
    if x1 <= x2 then min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2)) end
    return math.min(math.max(min_pos, lo), hi)
  end
  return (lo + hi) / 2
end

local function strong_wolfe(obj_func, x, t, d, f, g, gtd, tolerance_change)
  local c1, c2, max_ls = 1e-4, 0.9, 25
  local d_norm = amax(d)
  g = g:clone()
  local f_new, g_new = obj_func(x, t, d)
  local ls_func_evals = 1
  local gtd_new = g_new:dot(d):item()
  local t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
  local done, ls_iter = false, 0
  local bracket, bracket_f, bracket_g, bracket_gtd
  while ls_iter < max_ls do
    if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev) then
      bracket, bracket_f = {t_prev, t}, {f_prev, f_new}
      bracket_g, bracket_gtd = {g_prev, g_new:clone()}, {gtd_prev, gtd_new}
      break
    end
    if math.abs(gtd_new) <= -c2 * gtd then
      bracket, bracket_f, bracket_g = {t}, {f_new}, {g_new}
      done = true
      break
    end
    if gtd_new >= 0 then
      bracket, bracket_f = {t_prev, t}, {f_prev, f_new}
      bracket_g, bracket_gtd = {g_prev, g_new:clone()}, {gtd_prev, gtd_new}
      break
    end
    -- interpolate, between a bit past t and 10 t
    local min_step, max_step = t + 0.01 * (t - t_prev), t * 10
    local tmp = t
    t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, {min_step, max_step})
    t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new:clone(), gtd_new
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = ls_func_evals + 1
    gtd_new = g_new:dot(d):item()
    ls_iter = ls_iter + 1
  end
  if ls_iter == max_ls then
    bracket, bracket_f, bracket_g = {0, t}, {f, f_new}, {g, g_new}
  end

  -- zoom: shrink the bracket until a point satisfies the strong Wolfe conditions
  local insuf_progress = false
  local low, high = 1, 2
  if not (bracket_f[1] <= bracket_f[#bracket_f]) then low, high = 2, 1 end
  while not done and ls_iter < max_ls do
    if math.abs(bracket[2] - bracket[1]) * d_norm < tolerance_change then break end
    t = cubic_interpolate(bracket[1], bracket_f[1], bracket_gtd[1], bracket[2], bracket_f[2], bracket_gtd[2])
    -- (a point too near the bracket's ends makes little progress: move it in)
    local bmax, bmin = math.max(bracket[1], bracket[2]), math.min(bracket[1], bracket[2])
    local eps = 0.1 * (bmax - bmin)
    if math.min(bmax - t, t - bmin) < eps then
      if insuf_progress or t >= bmax or t <= bmin then
        if math.abs(t - bmax) < math.abs(t - bmin) then t = bmax - eps else t = bmin + eps end
        insuf_progress = false
      else
        insuf_progress = true
      end
    else
      insuf_progress = false
    end
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = ls_func_evals + 1
    gtd_new = g_new:dot(d):item()
    ls_iter = ls_iter + 1
    if f_new > f + c1 * t * gtd or f_new >= bracket_f[low] then
      bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = t, f_new, g_new:clone(), gtd_new
      if bracket_f[1] <= bracket_f[2] then low, high = 1, 2 else low, high = 2, 1 end
    else
      if math.abs(gtd_new) <= -c2 * gtd then
        done = true
      elseif gtd_new * (bracket[high] - bracket[low]) >= 0 then
        bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
        bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
      end
      bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new:clone(), gtd_new
    end
  end
  return bracket_f[low], bracket_g[low], bracket[low], ls_func_evals
end

-- ---- the step ------------------------------------------------------------------------

local function run(self, closure)
  local group = self.param_groups[1]
  local params = group.params
  local lr, max_iter, max_eval = group.lr, group.max_iter, group.max_eval
  local tolerance_grad, tolerance_change = group.tolerance_grad, group.tolerance_change
  local line_search_fn, history_size = group.line_search_fn, group.history_size
  local r = params[1].dtype == 'float32' and float32 or same

  local state = self.state[params[1]]
  if state == nil then state = {}; self.state[params[1]] = state end
  state.func_evals = state.func_evals or 0
  state.n_iter = state.n_iter or 0

  local orig_loss = evaluate(closure)
  local loss = loss_value(orig_loss)
  local current_evals = 1
  state.func_evals = state.func_evals + 1
  local flat_grad = gather_flat_grad(params)
  if amax(flat_grad) <= tolerance_grad then return orig_loss end   -- (already optimal)

  local d, t, old_dirs, old_stps, ro = state.d, state.t, state.old_dirs, state.old_stps, state.ro
  local H_diag, prev_flat_grad, prev_loss = state.H_diag, state.prev_flat_grad, state.prev_loss
  local opt_cond
  local n_iter = 0
  while n_iter < max_iter do
    n_iter = n_iter + 1
    state.n_iter = state.n_iter + 1
    if state.n_iter == 1 then
      d = flat_grad:neg()
      old_dirs, old_stps, ro, H_diag = {}, {}, {}, 1
    else
      -- update the memory with the last step s and gradient change y (when curvature is positive)
      local y = flat_grad:sub(prev_flat_grad)
      local s = d:mul(t)
      local ys = y:dot(s):item()
      if ys > 1e-10 then
        if #old_dirs == history_size then
          table.remove(old_dirs, 1); table.remove(old_stps, 1); table.remove(ro, 1)
        end
        old_dirs[#old_dirs + 1], old_stps[#old_stps + 1], ro[#ro + 1] = y, s, r(1 / ys)
        H_diag = r(ys / y:dot(y):item())
      end
      -- the two-loop recursion: d = -H g
      local num_old = #old_dirs
      state.al = state.al or {}
      local al = state.al
      local q = flat_grad:neg()
      for i = num_old, 1, -1 do
        al[i] = r(old_stps[i]:dot(q):item() * ro[i])
        q:add_(old_dirs[i], -al[i])
      end
      d = q:mul(H_diag)
      for i = 1, num_old do
        local be_i = r(old_dirs[i]:dot(d):item() * ro[i])
        d:add_(old_stps[i], r(al[i] - be_i))
      end
    end
    if prev_flat_grad == nil then prev_flat_grad = flat_grad:clone() else prev_flat_grad:copy_(flat_grad) end
    prev_loss = loss

    -- the step length: small at the very first iteration, lr after
    if state.n_iter == 1 then
      local inv = r(1 / flat_grad:abs():sum():item())
      t = inv < 1 and r(inv * lr) or lr
    else
      t = lr
    end
    local gtd = flat_grad:dot(d):item()
    if gtd > -tolerance_change then break end   -- (not a descent direction)

    local ls_func_evals = 0
    if line_search_fn ~= nil then
      local x_init = clone_params(params)
      local function obj_func(x, step, dir)
        add_grad(params, step, dir)
        local l = loss_value(evaluate(closure))
        local fg = gather_flat_grad(params)
        set_params(params, x)
        return l, fg
      end
      loss, flat_grad, t, ls_func_evals = strong_wolfe(obj_func, x_init, t, d, loss, flat_grad, gtd, tolerance_change)
      add_grad(params, t, d)
      opt_cond = amax(flat_grad) <= tolerance_grad
    else
      add_grad(params, t, d)
      if n_iter ~= max_iter then
        -- (the last iteration's loss is not needed: the next step evaluates it)
        loss = loss_value(evaluate(closure))
        flat_grad = gather_flat_grad(params)
        opt_cond = amax(flat_grad) <= tolerance_grad
        ls_func_evals = 1
      end
    end
    current_evals = current_evals + ls_func_evals
    state.func_evals = state.func_evals + ls_func_evals

    if n_iter == max_iter or current_evals >= max_eval or opt_cond then break end
    if amax(d:mul(t)) <= tolerance_change then break end   -- (no move)
    if math.abs(loss - prev_loss) < tolerance_change then break end   -- (no change)
  end

  state.d, state.t, state.old_dirs, state.old_stps, state.ro = d, t, old_dirs, old_stps, ro
  state.H_diag, state.prev_flat_grad, state.prev_loss = H_diag, prev_flat_grad, prev_loss
  return orig_loss
end

-- step(closure): closure() zeroes the grads, computes the loss, calls backward
-- and returns the loss; it is called at least once. Returns its first result.
function LBFGS:step(closure)
  if type(closure) ~= 'function' then
    Optimizer.fail('LBFGS:step', 'expected a closure that re-evaluates the model and returns the loss, got ' ..
      typename(closure))
  end
  return lunet.no_grad(run, self, closure)
end

-- ---- saving and resuming: the state holds flat vectors and lists of them ------------------

local function copy_value(v, like)
  if is_tensor(v) then return v:to(like):clone() end
  if is_table(v) then local c = {}; for k, x in pairs(v) do c[k] = copy_value(x, like) end; return c end
  return v
end

-- state_dict() is the base's (copies of every tensor and list); load_state_dict
-- takes it back, tensors moved to the params' device and dtype.
function LBFGS:load_state_dict(sd)
  local fn = 'LBFGS:load_state_dict'
  if not is_table(sd) or not is_table(sd.param_groups) or not is_table(sd.state) then
    Optimizer.fail(fn, 'expected a table with `state` and `param_groups`')
  end
  Optimizer.load_state_dict(self, {param_groups = sd.param_groups, state = {}})
  local params = self.param_groups[1].params
  local saved = sd.state[sd.param_groups[1].params[1]]
  if saved == nil then return end
  if not is_table(saved) then Optimizer.fail(fn, 'the saved state of param 1 must be a table, got ' .. typename(saved)) end
  local n = numel(params)
  local function check_flat(k, v)
    if is_tensor(v) and v:numel() ~= n then
      Optimizer.fail(fn, ("state '%s' has %d elements, the params %d"):format(k, v:numel(), n))
    end
  end
  for k, v in pairs(saved) do
    if is_table(v) and not is_tensor(v) then for _, x in ipairs(v) do check_flat(k, x) end
    else check_flat(k, v) end
  end
  self.state = {[params[1]] = copy_value(saved, params[1])}
end

return setmetatable(LBFGS, {__index = Optimizer, __call = function(_, ...) return new(...) end})
