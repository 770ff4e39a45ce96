-- lunet.optim.CyclicLR (Smith's cyclical learning rates), as torch's: the
-- lr goes from base_lr up to max_lr over step_size_up steps and back over
-- step_size_down; momentum cycles the other way, between max_momentum and
-- base_momentum. Step it after each batch.
--   local sched = optim.CyclicLR(opt, {base_lr = 0.001, max_lr = 0.1, step_size_up = 500})
-- Options (PyTorch's defaults and positional order): base_lr, max_lr (numbers
-- or one per param group), step_size_up = 2000, step_size_down (=
-- step_size_up), mode = 'triangular' ('triangular2': the amplitude halves
-- each cycle; 'exp_range': scaled by gamma^step), gamma = 1, scale_fn (a
-- function replacing mode's) with scale_mode = 'cycle' ('iterations'),
-- cycle_momentum = true, base_momentum = 0.8, max_momentum = 0.9.
-- As in PyTorch 1.13, cycle_momentum needs an optimizer with a `momentum`
-- option (SGD, RMSprop; not Adam): pass cycle_momentum = false otherwise.
-- scale_fn is not part of state_dict.
local is_table = require('lunet.core').is_table

return function(M, S)
  local name = 'CyclicLR'
  local fail = S.fail
  S.define(name, {base_lr = 'number|table', max_lr = 'number|table', step_size_up = 'number', step_size_down = 'number',
    mode = 'string', gamma = 'number', scale_fn = 'function', scale_mode = 'string', cycle_momentum = 'boolean',
    base_momentum = 'number|table', max_momentum = 'number|table'},
    {'base_lr', 'max_lr', 'step_size_up', 'step_size_down', 'mode', 'gamma', 'scale_fn', 'scale_mode',
     'cycle_momentum', 'base_momentum', 'max_momentum'})
  local c = setmetatable({}, {__index = S.Scheduler})
  c.__index = c
  c.unsaved = {optimizer = true, scale_fn = true}

  local function per_group(opt, key, v)
    local n, r = #opt.param_groups, {}
    if is_table(v) and #v ~= n then fail(name, ('expected %d values for %s, got %d'):format(n, key, #v)) end
    for i = 1, n do
      r[i] = is_table(v) and v[i] or v
      if type(r[i]) ~= 'number' then fail(name, key .. ' must be a number or a list of numbers (one per param group)') end
    end
    return r
  end

  local SCALE = {
    triangular = function() return 1 end,
    triangular2 = function(x) return 1 / 2 ^ (x - 1) end,
    exp_range = function(x, self) return self.gamma ^ x end,
  }

  local function init(self, o)
    local opt, resuming = self.optimizer, (o.last_epoch or -1) ~= -1
    if o.base_lr == nil then fail(name, 'option base_lr is required') end
    if o.max_lr == nil then fail(name, 'option max_lr is required') end
    self.cyclic_base_lrs = per_group(opt, 'base_lr', o.base_lr)
    if not resuming then for i, g in ipairs(opt.param_groups) do g.lr = self.cyclic_base_lrs[i] end end
    self.max_lrs = per_group(opt, 'max_lr', o.max_lr)
    local up = o.step_size_up or 2000
    local down = o.step_size_down or up
    if not (up > 0) then fail(name, 'step_size_up must be positive, got ' .. up) end
    if not (down >= 0) then fail(name, 'step_size_down must be >= 0, got ' .. down) end
    self.total_size = up + down
    self.step_ratio = up / self.total_size
    self.mode, self.gamma = o.mode or 'triangular', o.gamma or 1
    if o.scale_fn then
      self.scale_fn, self.scale_mode = o.scale_fn, o.scale_mode or 'cycle'
      if self.scale_mode ~= 'cycle' and self.scale_mode ~= 'iterations' then
        fail(name, "scale_mode must be 'cycle' or 'iterations', got '" .. self.scale_mode .. "'")
      end
    else
      if not SCALE[self.mode] then
        fail(name, "mode must be 'triangular', 'triangular2' or 'exp_range' (or give scale_fn), got '" .. self.mode .. "'")
      end
      self.scale_mode = self.mode == 'exp_range' and 'iterations' or 'cycle'
    end
    self.cycle_momentum = o.cycle_momentum ~= false
    if self.cycle_momentum then
      if (opt.defaults or {}).momentum == nil then
        fail(name, "optimizer must support momentum with `cycle_momentum` option enabled (this one has no 'momentum' option: pass cycle_momentum = false)")
      end
      local basem = per_group(opt, 'base_momentum', o.base_momentum or 0.8)
      if not resuming then for i, g in ipairs(opt.param_groups) do g.momentum = basem[i] end end
      self.base_momentums = {}
      for i, g in ipairs(opt.param_groups) do self.base_momentums[i] = g.momentum end
      self.max_momentums = per_group(opt, 'max_momentum', o.max_momentum or 0.9)
    end
  end

  local function scale(self, cycle)
    local x = self.scale_mode == 'cycle' and cycle or self.last_epoch
    local f = self.scale_fn and self.scale_fn(x) or SCALE[self.mode](x, self)
    if type(f) ~= 'number' then fail(name, ('scale_fn(%s) returned %s, expected a number'):format(x, tostring(f))) end
    return f
  end

  function c:get_lr()
    local e = self.last_epoch
    local cycle = math.floor(1 + e / self.total_size)
    local x = 1 + e / self.total_size - cycle
    local sf = x <= self.step_ratio and x / self.step_ratio or (x - 1) / (self.step_ratio - 1)
    local s = scale(self, cycle)
    local lrs = {}
    for i, b in ipairs(self.base_lrs) do lrs[i] = b + (self.max_lrs[i] - b) * sf * s end
    if self.cycle_momentum then
      for i, g in ipairs(self.optimizer.param_groups) do
        local bm, mm = self.base_momentums[i], self.max_momentums[i]
        g.momentum = mm - (mm - bm) * sf * s
      end
    end
    return lrs
  end

  function c:__tostring()
    return ('CyclicLR(mode=%s, step=%d, cycle size=%g, lr=%s)'):format(self.scale_fn and 'custom' or self.mode,
      self.last_epoch, self.total_size, table.concat(self._last_lr or {}, ', '))
  end

  M[name] = setmetatable(c, {__index = S.Scheduler, __call = function(_, opt, ...)
    if not is_table(opt) or not is_table(opt.param_groups) then fail(name, 'first argument must be an optimizer') end
    if select('#', ...) == 0 then fail(name, 'expected base_lr and max_lr') end
    local self = S.base(c, name, opt, S.options(name, ...), init)
    -- (the first step used the groups' initial_lr, as PyTorch's does)
    self.base_lrs, self.cyclic_base_lrs = self.cyclic_base_lrs, nil
    return self
  end})
end
