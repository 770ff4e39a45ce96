-- lunet.optim.OneCycleLR (Smith's 1cycle policy), as torch's OneCycleLR:
-- lr rises from max_lr/div_factor to max_lr over pct_start of the steps, then
-- anneals to initial_lr/final_div_factor; momentum (or Adam's beta1) cycles
-- the other way between max_momentum and base_momentum.
--   optim.OneCycleLR(opt, {max_lr = 0.1, total_steps = 1000})   -- or epochs + steps_per_epoch
-- Options (PyTorch's defaults): pct_start = 0.3, anneal_strategy = 'cos'
-- ('linear'), cycle_momentum = true, base_momentum = 0.85, max_momentum = 0.95,
-- div_factor = 25, final_div_factor = 1e4, three_phase = false.
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)
return function(M, base, fail, sched_options)
  local Scheduler = getmetatable(M.StepLR).__index
  local c = setmetatable({}, {__index = Scheduler})
  c.__index, c.__tostring = c, Scheduler.__tostring
  local name = 'OneCycleLR'

  local function per_group(opt, key, v)
    local n = #opt.param_groups
    if is_table(v) then
      if #v ~= n then fail(name, ('expected %d values for %s, got %d'):format(n, key, #v)) end
      return v
    end
    if type(v) ~= 'number' then fail(name, key .. ' must be a number or a list of numbers') end
    local r = {}
    for i = 1, n do r[i] = v end
    return r
  end

  local function posint(v) return type(v) == 'number' and v > 0 and v % 1 == 0 end

  local function init(self, o)
    local opt = self.optimizer
    if o.total_steps ~= nil then
      if not posint(o.total_steps) then fail(name, 'expected a positive integer total_steps, got ' .. tostring(o.total_steps)) end
      self.total_steps = o.total_steps
    elseif o.epochs ~= nil or o.steps_per_epoch ~= nil then
      if not posint(o.epochs) then fail(name, 'expected a positive integer epochs, got ' .. tostring(o.epochs)) end
      if not posint(o.steps_per_epoch) then
        fail(name, 'expected a positive integer steps_per_epoch, got ' .. tostring(o.steps_per_epoch))
      end
      self.total_steps = o.epochs * o.steps_per_epoch
    else
      fail(name, 'you must define either total_steps or (epochs and steps_per_epoch)')
    end
    local pct = o.pct_start or 0.3
    if type(pct) ~= 'number' or not (pct >= 0 and pct <= 1) then fail(name, 'expected pct_start between 0 and 1, got ' .. tostring(pct)) end
    local n = self.total_steps
    if o.three_phase then
      self.phases = {
        {end_step = pct * n - 1, start_lr = 'initial_lr', end_lr = 'max_lr', start_m = 'max_momentum', end_m = 'base_momentum'},
        {end_step = 2 * pct * n - 2, start_lr = 'max_lr', end_lr = 'initial_lr', start_m = 'base_momentum', end_m = 'max_momentum'},
        {end_step = n - 1, start_lr = 'initial_lr', end_lr = 'min_lr', start_m = 'max_momentum', end_m = 'max_momentum'},
      }
    else
      self.phases = {
        {end_step = pct * n - 1, start_lr = 'initial_lr', end_lr = 'max_lr', start_m = 'max_momentum', end_m = 'base_momentum'},
        {end_step = n - 1, start_lr = 'max_lr', end_lr = 'min_lr', start_m = 'base_momentum', end_m = 'max_momentum'},
      }
    end
    local strategy = o.anneal_strategy or 'cos'
    if strategy ~= 'cos' and strategy ~= 'linear' then
      fail(name, "anneal_strategy must be 'cos' or 'linear', got " .. tostring(strategy))
    end
    self.anneal_strategy = strategy
    if o.max_lr == nil then fail(name, 'option max_lr is required') end
    local max_lrs = per_group(opt, 'max_lr', o.max_lr)
    local div, final_div = o.div_factor or 25, o.final_div_factor or 1e4
    if (o.last_epoch or -1) == -1 then
      for i, g in ipairs(opt.param_groups) do
        g.initial_lr = max_lrs[i] / div
        g.max_lr = max_lrs[i]
        g.min_lr = g.initial_lr / final_div
      end
    end
    self.cycle_momentum = o.cycle_momentum ~= false
    if self.cycle_momentum then
      local d = opt.defaults or {}
      if d.momentum == nil and d.betas == nil then
        fail(name, 'optimizer must support momentum with `cycle_momentum` option enabled')
      end
      self.use_beta1 = d.betas ~= nil
      local maxm = per_group(opt, 'max_momentum', o.max_momentum or 0.95)
      local basem = per_group(opt, 'base_momentum', o.base_momentum or 0.85)
      if (o.last_epoch or -1) == -1 then
        for i, g in ipairs(opt.param_groups) do
          if self.use_beta1 then g.betas = {maxm[i], g.betas[2]} else g.momentum = maxm[i] end
          g.max_momentum, g.base_momentum = maxm[i], basem[i]
        end
      end
    end
  end

  local function anneal(strategy, a, b, pct)
    if strategy == 'cos' then return b + (a - b) / 2 * (math.cos(math.pi * pct) + 1) end
    return (b - a) * pct + a
  end

  function c:get_lr()
    local step = self.last_epoch
    if step > self.total_steps then
      fail(name, ('tried to step %d times; the specified number of total steps is %d'):format(step + 1, self.total_steps))
    end
    local lrs, phases = {}, self.phases
    for gi, g in ipairs(self.optimizer.param_groups) do
      local start, lr, m = 0, nil, nil
      for i, ph in ipairs(phases) do
        if step <= ph.end_step or i == #phases then
          local pct = (step - start) / (ph.end_step - start)
          lr = anneal(self.anneal_strategy, g[ph.start_lr], g[ph.end_lr], pct)
          if self.cycle_momentum then m = anneal(self.anneal_strategy, g[ph.start_m], g[ph.end_m], pct) end
          break
        end
        start = ph.end_step
      end
      lrs[gi] = lr
      if self.cycle_momentum then
        if self.use_beta1 then g.betas = {m, g.betas[2]} else g.momentum = m end
      end
    end
    return lrs
  end

  M[name] = setmetatable(c, {__index = Scheduler, __call = function(_, opt, ...)
    if not is_table(opt) or not is_table(opt.param_groups) then
      fail(name, 'first argument must be an optimizer')
    end
    if select('#', ...) == 0 then fail(name, 'expected an options table with max_lr') end
    return base(c, name, opt, sched_options(name, ...), init)
  end})
end
