-- lunet.optim.SequentialLR and ChainedScheduler: schedulers of one optimizer
-- combined, as torch's.
--   -- warm-up for 5 steps, then cosine annealing:
--   local warm = optim.LinearLR(opt, {start_factor = 0.1, total_iters = 5})
--   local cos = optim.CosineAnnealingLR(opt, {T_max = 95})
--   local sched = optim.SequentialLR(opt, {schedulers = {warm, cos}, milestones = {5}})
-- SequentialLR runs schedulers[i] from milestones[i - 1] on (the next one
-- starts at its epoch 0); ChainedScheduler({s1, s2}) steps every one at each
-- step, their factors multiplying. state_dict holds each scheduler's.
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename

return function(M, S)
  local fail = S.fail

  -- the schedulers list: schedulers of `opt` (or, when nil, all of one optimizer)
  local function check_list(name, list, opt)
    if not is_table(list) or #list == 0 then fail(name, 'schedulers must be a non-empty list of schedulers, got ' .. typename(list)) end
    for i, s in ipairs(list) do
      if not is_table(s) or type(s.step) ~= 'function' or not is_table(s.optimizer) then
        fail(name, ('schedulers[%d] is %s, expected a scheduler'):format(i, typename(s)))
      end
      if s.takes_metric then fail(name, ('schedulers[%d] is a %s, which steps on a metric: it cannot be combined'):format(i, s.name)) end
      opt = opt or s.optimizer
      if s.optimizer ~= opt then
        fail(name, ('all schedulers must belong to the same optimizer; schedulers[%d] has another one'):format(i))
      end
    end
  end

  local unsaved = {optimizer = true, _schedulers = true}
  local function state_dict(self)
    local sd = {}
    for k, v in pairs(self) do if not unsaved[k] then sd[k] = S.copy(v) end end
    sd._schedulers = {}
    for i, s in ipairs(self._schedulers) do sd._schedulers[i] = s:state_dict() end
    return sd
  end
  local function load_state_dict(self, sd)
    local fn = self.name .. ':load_state_dict'
    if not is_table(sd) then fail(fn, 'expected a table, got ' .. typename(sd)) end
    if not is_table(sd._schedulers) or #sd._schedulers ~= #self._schedulers then
      fail(fn, ('expected the states of %d schedulers'):format(#self._schedulers))
    end
    for k, v in pairs(sd) do if not unsaved[k] then self[k] = S.copy(v) end end
    for i, s in ipairs(self._schedulers) do s:load_state_dict(sd._schedulers[i]) end
  end
  local function tostr(self)
    local names = {}
    for i, s in ipairs(self._schedulers) do names[i] = s.name end
    local at = self.last_epoch and ('last_epoch=%d, '):format(self.last_epoch) or ''
    return ('%s(%s; %slr=%s)'):format(self.name, table.concat(names, ', '), at, table.concat(self._last_lr or {}, ', '))
  end
  local function new_class(name)
    local c = setmetatable({}, {__index = S.Scheduler})
    c.__index, c.__tostring, c.state_dict, c.load_state_dict = c, tostr, state_dict, load_state_dict
    return c
  end

  -- SequentialLR(opt, {schedulers = {...}, milestones = {...}}), or by position
  local Seq = new_class('SequentialLR')
  S.define('SequentialLR', {schedulers = 'table', milestones = 'table'}, {'schedulers', 'milestones'})
  M.SequentialLR = setmetatable(Seq, {__index = S.Scheduler, __call = function(_, opt, ...)
    local name = 'SequentialLR'
    if not is_table(opt) or not is_table(opt.param_groups) then fail(name, 'first argument must be an optimizer') end
    local o = S.options(name, ...)
    if o.schedulers == nil then fail(name, 'option schedulers is required') end
    if o.milestones == nil then fail(name, 'option milestones is required') end
    check_list(name, o.schedulers, opt)
    local ms = o.milestones
    if #ms ~= #o.schedulers - 1 then
      fail(name, ('expected one milestone fewer than schedulers: got %d schedulers and %d milestones'):format(#o.schedulers, #ms))
    end
    for i, m in ipairs(ms) do
      if type(m) ~= 'number' or (i > 1 and m < ms[i - 1]) then fail(name, 'milestones must be increasing numbers') end
    end
    local self = setmetatable({name = name, optimizer = opt, _milestones = S.copy(ms), _schedulers = {}}, Seq)
    for i, s in ipairs(o.schedulers) do self._schedulers[i] = s end
    self.last_epoch = (o.last_epoch or -1) + 1
    -- undo the steps the schedulers took when made; only the first one starts now
    for _, g in ipairs(opt.param_groups) do g.lr = g.initial_lr end
    for _, s in ipairs(self._schedulers) do s.last_epoch = s.last_epoch - 1 end
    local first = self._schedulers[1]
    first._step_count = 0
    first:step()
    self._last_lr = S.copy(first:get_last_lr())
    return self
  end})

  function Seq:step()
    self.last_epoch = self.last_epoch + 1
    local idx = 0   -- milestones passed
    while idx < #self._milestones and self._milestones[idx + 1] <= self.last_epoch do idx = idx + 1 end
    local s = self._schedulers[idx + 1]
    if idx > 0 and self._milestones[idx] == self.last_epoch then s:step(0) else s:step() end
    self._last_lr = S.copy(s:get_last_lr())
  end

  -- ChainedScheduler({s1, s2, ...}) or ChainedScheduler({schedulers = {...}})
  local Chain = new_class('ChainedScheduler')
  S.define('ChainedScheduler', {schedulers = 'table'}, {'schedulers'}, true)
  M.ChainedScheduler = setmetatable(Chain, {__index = S.Scheduler, __call = function(_, ...)
    local name = 'ChainedScheduler'
    if select('#', ...) == 0 then fail(name, 'expected the list of schedulers') end
    local o = S.options(name, ...)
    check_list(name, o.schedulers)
    local self = setmetatable({name = name, optimizer = o.schedulers[1].optimizer, _schedulers = {}}, Chain)
    for i, s in ipairs(o.schedulers) do self._schedulers[i] = s end
    self:last_lrs()
    return self
  end})

  function Chain:last_lrs()
    self._last_lr = {}
    for i, g in ipairs(self.optimizer.param_groups) do self._last_lr[i] = g.lr end
  end

  function Chain:step()
    for _, s in ipairs(self._schedulers) do s:step() end
    self:last_lrs()
  end
end
