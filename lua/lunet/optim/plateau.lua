-- lunet.optim.ReduceLROnPlateau, as torch's: lr *= factor once the metric has
-- not improved for more than `patience` steps, then `cooldown` steps ignored.
--   local sched = optim.ReduceLROnPlateau(opt, {mode = 'min', factor = 0.1, patience = 10})
--   sched:step(val_loss)        -- a number, or a one-element tensor
-- Options (PyTorch's defaults and positional order): mode = 'min' ('max'),
-- factor = 0.1, patience = 10, threshold = 1e-4, threshold_mode = 'rel'
-- ('abs'), cooldown = 0, min_lr = 0 (or one per param group), eps = 1e-8
-- (a smaller change of lr is not made). Unlike the other schedulers it does
-- not step when made, and lunet.fit steps it with the epoch's loss.
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename

return function(M, S)
  local name = 'ReduceLROnPlateau'
  local fail = S.fail
  S.define(name, {mode = 'string', factor = 'number', patience = 'number', threshold = 'number',
    threshold_mode = 'string', cooldown = 'number', min_lr = 'number|table', eps = 'number'},
    {'mode', 'factor', 'patience', 'threshold', 'threshold_mode', 'cooldown', 'min_lr', 'eps'}, true)
  local c = setmetatable({}, {__index = S.Scheduler})
  c.__index = c
  c.takes_metric = true   -- (lunet.fit passes it the epoch's loss)

  local function nonneg_int(v) return type(v) == 'number' and v >= 0 and v % 1 == 0 end

  local function new(_, opt, ...)
    if not is_table(opt) or not is_table(opt.param_groups) then fail(name, 'first argument must be an optimizer') end
    local o = S.options(name, ...)
    local self = setmetatable({name = name, optimizer = opt}, c)
    self.mode = o.mode or 'min'
    if self.mode ~= 'min' and self.mode ~= 'max' then fail(name, "mode must be 'min' or 'max', got '" .. self.mode .. "'") end
    self.threshold_mode = o.threshold_mode or 'rel'
    if self.threshold_mode ~= 'rel' and self.threshold_mode ~= 'abs' then
      fail(name, "threshold_mode must be 'rel' or 'abs', got '" .. self.threshold_mode .. "'")
    end
    self.factor = o.factor or 0.1
    if not (self.factor < 1 and self.factor >= 0) then fail(name, 'factor must be in [0, 1), got ' .. self.factor) end
    self.patience, self.cooldown = o.patience or 10, o.cooldown or 0
    if not nonneg_int(self.patience) then fail(name, 'patience must be an integer >= 0, got ' .. self.patience) end
    if not nonneg_int(self.cooldown) then fail(name, 'cooldown must be an integer >= 0, got ' .. self.cooldown) end
    self.threshold, self.eps = o.threshold or 1e-4, o.eps or 1e-8
    local n, min_lr = #opt.param_groups, o.min_lr or 0
    self.min_lrs = {}
    if is_table(min_lr) then
      if #min_lr ~= n then fail(name, ('expected %d min_lrs (one per param group), got %d'):format(n, #min_lr)) end
      for i = 1, n do
        if type(min_lr[i]) ~= 'number' then fail(name, 'min_lr must be numbers, got ' .. typename(min_lr[i])) end
        self.min_lrs[i] = min_lr[i]
      end
    else
      for i = 1, n do self.min_lrs[i] = min_lr end
    end
    -- best stays nil until the first metric (not +-inf: a checkpoint's JSON has no infinity)
    self.best, self.num_bad_epochs, self.cooldown_counter, self.last_epoch = nil, 0, 0, 0
    self._last_lr = {}
    for i, g in ipairs(opt.param_groups) do self._last_lr[i] = g.lr end
    return self
  end

  function c:is_better(a)
    local best = self.best
    if best == nil then best = self.mode == 'min' and math.huge or -math.huge end
    if self.mode == 'min' then
      return a < (self.threshold_mode == 'rel' and best * (1 - self.threshold) or best - self.threshold)
    end
    return a > (self.threshold_mode == 'rel' and best * (1 + self.threshold) or best + self.threshold)
  end

  -- step(metric[, epoch])
  function c:step(metric, epoch)
    local v = metric
    if require('lunet.tensor').is_tensor(metric) then
      if metric:numel() ~= 1 then
        fail(name .. ':step', ('metric must be a number or a one-element tensor, got a tensor of %d elements'):format(metric:numel()))
      end
      v = metric:item()
    elseif type(metric) ~= 'number' then
      fail(name .. ':step', 'expected the metric to watch (step(val_loss)), got ' .. typename(metric))
    end
    if epoch ~= nil and type(epoch) ~= 'number' then fail(name .. ':step', 'epoch must be a number, got ' .. typename(epoch)) end
    self.last_epoch = epoch or self.last_epoch + 1
    if self:is_better(v) then
      self.best, self.num_bad_epochs = v, 0
    else
      self.num_bad_epochs = self.num_bad_epochs + 1
    end
    if self.cooldown_counter > 0 then
      self.cooldown_counter = self.cooldown_counter - 1
      self.num_bad_epochs = 0    -- bad epochs in cooldown do not count
    end
    if self.num_bad_epochs > self.patience then
      for i, g in ipairs(self.optimizer.param_groups) do
        local new_lr = math.max(g.lr * self.factor, self.min_lrs[i])
        if g.lr - new_lr > self.eps then g.lr = new_lr end
      end
      self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
    end
    for i, g in ipairs(self.optimizer.param_groups) do self._last_lr[i] = g.lr end
  end

  function c:__tostring()
    return ('ReduceLROnPlateau(mode=%s, factor=%g, patience=%d, best=%s, bad epochs=%d, cooldown left=%d, lr=%s)'):format(
      self.mode, self.factor, self.patience, tostring(self.best), self.num_bad_epochs, self.cooldown_counter,
      table.concat(self._last_lr, ', '))
  end

  M[name] = setmetatable(c, {__index = S.Scheduler, __call = new})
end
