-- lunet.optim schedulers: StepLR, MultiStepLR, CosineAnnealingLR, LinearLR,
-- ExponentialLR, LambdaLR, OneCycleLR (one_cycle.lua), ReduceLROnPlateau
-- (plateau.lua), SequentialLR and ChainedScheduler (lr_compose.lua),
-- CosineAnnealingWarmRestarts (warm_restarts.lua), ConstantLR, PolynomialLR,
-- MultiplicativeLR (lr_more.lua), CyclicLR (cyclic.lua), SWALR (swa_lr.lua), as torch.optim.lr_scheduler (1.13),
-- chainable forms included, so the lr sequences match PyTorch's. Construction takes the first step
-- (last_epoch 0); call sched:step() after each opt:step().
--   local sched = optim.StepLR(opt, {step_size = 30, gamma = 0.1})
--   sched:step(); sched:get_last_lr()  --> {lr of group 1, ...}
-- Options may also come by position, in PyTorch's order: StepLR(opt, 30, 0.1).
local Optimizer = require 'lunet.optim.Optimizer'
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)
local options = require 'lunet.options'

local M = {}
local Scheduler = {}
Scheduler.__index = Scheduler

local function fail(fn, msg) Optimizer.fail(fn, msg) end

-- each scheduler's options (all take last_epoch) and their order by position (PyTorch's)
local KNOWN = {
  StepLR = {step_size = 'number', gamma = 'number'},
  MultiStepLR = {milestones = 'table', gamma = 'number'},
  CosineAnnealingLR = {T_max = 'number', eta_min = 'number'},
  LinearLR = {start_factor = 'number', end_factor = 'number', total_iters = 'number'},
  ExponentialLR = {gamma = 'number'},
  LambdaLR = {lr_lambda = 'function|table'},
  OneCycleLR = {max_lr = 'number|table', total_steps = 'number', epochs = 'number', steps_per_epoch = 'number',
    pct_start = 'number', anneal_strategy = 'string', cycle_momentum = 'boolean', base_momentum = 'number|table',
    max_momentum = 'number|table', div_factor = 'number', final_div_factor = 'number', three_phase = 'boolean'},
}
local POSITIONAL = {
  StepLR = {'step_size', 'gamma'}, MultiStepLR = {'milestones', 'gamma'}, CosineAnnealingLR = {'T_max', 'eta_min'},
  LinearLR = {'start_factor', 'end_factor', 'total_iters'}, ExponentialLR = {'gamma'}, LambdaLR = {'lr_lambda'},
  OneCycleLR = {'max_lr', 'total_steps', 'epochs', 'steps_per_epoch', 'pct_start', 'anneal_strategy',
    'cycle_momentum', 'base_momentum', 'max_momentum', 'div_factor', 'final_div_factor', 'three_phase'},
}
for name, k in pairs(KNOWN) do k.last_epoch = 'number'; table.insert(POSITIONAL[name], 'last_epoch') end

-- the options of scheduler `name` from the arguments after the optimizer
local function sched_options(name, ...)
  return options.check(name, options.positional(name, POSITIONAL[name], ...), KNOWN[name]) or {}
end

-- base(class, name, opt, opts): records initial_lr in each group, then steps once.
local function base(class, name, opt, opts, init)
  if not is_table(opt) or not is_table(opt.param_groups) then
    fail(name, 'first argument must be an optimizer')
  end
  if not is_table(opts) then fail(name, 'options must be a table, got ' .. typename(opts)) end
  local self = setmetatable({name = name, optimizer = opt}, class)
  local last_epoch = opts.last_epoch or -1
  if init then init(self, opts) end
  self.base_lrs = {}
  for i, g in ipairs(opt.param_groups) do
    if last_epoch == -1 then
      if g.initial_lr == nil then g.initial_lr = g.lr end
    elseif g.initial_lr == nil then
      fail(name, ("param 'initial_lr' is not specified in param_groups[%d] when resuming an optimizer"):format(i))
    end
    self.base_lrs[i] = g.initial_lr
  end
  self.last_epoch = last_epoch
  self._step_count = 0
  self:step()
  return self
end

-- step(epoch) (deprecated in PyTorch, used by SequentialLR at its
-- milestones) jumps to that epoch: the closed form where the class has one
function Scheduler:step(epoch)
  self._step_count = self._step_count + 1
  local lrs
  if epoch == nil then
    self.last_epoch = self.last_epoch + 1
    lrs = self:get_lr()
  else
    if type(epoch) ~= 'number' then fail(self.name .. ':step', 'epoch must be a number, got ' .. typename(epoch)) end
    self.last_epoch = epoch
    lrs = self.closed_form and self:closed_form() or self:get_lr()
  end
  local last = {}
  for i, g in ipairs(self.optimizer.param_groups) do g.lr = lrs[i]; last[i] = lrs[i] end
  self._last_lr = last
end

function Scheduler:get_last_lr() return self._last_lr end

local function copy(v)
  if not is_table(v) then return v end
  local c = {}
  for k, x in pairs(v) do c[k] = copy(x) end
  return c
end

-- not saved: the optimizer, and LambdaLR's functions (as in PyTorch); a
-- class may name more fields in its own `unsaved`
Scheduler.unsaved = {optimizer = true, lr_lambdas = true}

-- Every other field, as plain Lua values.
function Scheduler:state_dict()
  local sd, unsaved = {}, self.unsaved
  for k, v in pairs(self) do if not unsaved[k] then sd[k] = copy(v) end end
  return sd
end

function Scheduler:load_state_dict(sd)
  if not is_table(sd) then fail(self.name .. ':load_state_dict', 'expected a table, got ' .. typename(sd)) end
  local unsaved = self.unsaved
  for k, v in pairs(sd) do if not unsaved[k] then self[k] = copy(v) end end
end

function Scheduler:__tostring()
  return ('%s(last_epoch=%d, lr=%s)'):format(self.name, self.last_epoch,
    table.concat(self._last_lr or {}, ', '))
end

-- class(name, required option, init(self, opts), get_lr(self)[, closed_form(self)]) -> the class
local function class(name, required, init, get_lr, closed_form)
  local c = setmetatable({}, {__index = Scheduler})
  c.__index, c.__tostring, c.get_lr, c.closed_form = c, Scheduler.__tostring, get_lr, closed_form
  -- Sched(opt, {opts}) or Sched(opt, values by position...[, {opts}])
  local function new(_, opt, ...)
    if not is_table(opt) or not is_table(opt.param_groups) then
      fail(name, 'first argument must be an optimizer')
    end
    local opts = sched_options(name, ...)
    if required and opts[required] == nil then fail(name, 'option ' .. required .. ' is required') end
    return base(c, name, opt, opts, init)
  end
  M[name] = setmetatable(c, {__index = Scheduler, __call = new})
  return c
end

local function group_lrs(self, f)
  local lrs = {}
  for i, g in ipairs(self.optimizer.param_groups) do lrs[i] = f(g, self.base_lrs[i], i) end
  return lrs
end

-- StepLR(opt, {step_size = n, gamma = 0.1}): lr *= gamma every step_size steps
class('StepLR', 'step_size', function(self, o)
  if type(o.step_size) ~= 'number' or o.step_size < 1 or o.step_size % 1 ~= 0 then
    fail('StepLR', 'step_size must be a positive integer, got ' .. tostring(o.step_size))
  end
  self.step_size, self.gamma = o.step_size, o.gamma or 0.1
end, function(self)
  local e = self.last_epoch
  if e == 0 or e % self.step_size ~= 0 then return group_lrs(self, function(g) return g.lr end) end
  return group_lrs(self, function(g) return g.lr * self.gamma end)
end, function(self)
  return group_lrs(self, function(_, b) return b * self.gamma ^ math.floor(self.last_epoch / self.step_size) end)
end)

-- MultiStepLR(opt, {milestones = {30, 80}, gamma = 0.1}): lr *= gamma at each milestone
class('MultiStepLR', 'milestones', function(self, o)
  if not is_table(o.milestones) then fail('MultiStepLR', 'milestones must be a list of step numbers') end
  self.milestones = {}
  for _, m in ipairs(o.milestones) do
    if type(m) ~= 'number' then fail('MultiStepLR', 'milestones must be numbers, got ' .. typename(m)) end
    self.milestones[m] = (self.milestones[m] or 0) + 1
  end
  self.gamma = o.gamma or 0.1
end, function(self)
  local n = self.milestones[self.last_epoch]
  if not n then return group_lrs(self, function(g) return g.lr end) end
  return group_lrs(self, function(g) return g.lr * self.gamma ^ n end)
end, function(self)
  local n = 0
  for m, k in pairs(self.milestones) do if m <= self.last_epoch then n = n + k end end
  return group_lrs(self, function(_, b) return b * self.gamma ^ n end)
end)

-- CosineAnnealingLR(opt, {T_max = n, eta_min = 0})
class('CosineAnnealingLR', 'T_max', function(self, o)
  if type(o.T_max) ~= 'number' or o.T_max <= 0 then
    fail('CosineAnnealingLR', 'T_max must be a positive number, got ' .. tostring(o.T_max))
  end
  self.T_max, self.eta_min = o.T_max, o.eta_min or 0
end, function(self)
  local e, T, emin, pi = self.last_epoch, self.T_max, self.eta_min, math.pi
  if e == 0 then return group_lrs(self, function(g) return g.lr end) end
  if self._step_count == 1 and e > 0 then
    return group_lrs(self, function(_, b) return emin + (b - emin) * (1 + math.cos(e * pi / T)) / 2 end)
  end
  if (e - 1 - T) % (2 * T) == 0 then
    return group_lrs(self, function(g, b) return g.lr + (b - emin) * (1 - math.cos(pi / T)) / 2 end)
  end
  return group_lrs(self, function(g)
    return (1 + math.cos(pi * e / T)) / (1 + math.cos(pi * (e - 1) / T)) * (g.lr - emin) + emin
  end)
end, function(self)
  local emin = self.eta_min
  return group_lrs(self, function(_, b) return emin + (b - emin) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2 end)
end)

-- LinearLR(opt, {start_factor = 1/3, end_factor = 1, total_iters = 5}): linear warm-up
class('LinearLR', nil, function(self, o)
  self.start_factor, self.end_factor = o.start_factor or 1 / 3, o.end_factor or 1
  self.total_iters = o.total_iters or 5
  if not (self.start_factor > 0 and self.start_factor <= 1) then
    fail('LinearLR', 'start_factor must be in (0, 1], got ' .. tostring(self.start_factor))
  end
  if not (self.end_factor >= 0 and self.end_factor <= 1) then
    fail('LinearLR', 'end_factor must be in [0, 1], got ' .. tostring(self.end_factor))
  end
end, function(self)
  local e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
  if e == 0 then return group_lrs(self, function(g) return g.lr * s end) end
  if e > n then return group_lrs(self, function(g) return g.lr end) end
  return group_lrs(self, function(g) return g.lr * (1 + (f - s) / (n * s + (e - 1) * (f - s))) end)
end, function(self)
  local s, f, n = self.start_factor, self.end_factor, self.total_iters
  return group_lrs(self, function(_, b) return b * (s + (f - s) * math.min(n, self.last_epoch) / n) end)
end)

-- ExponentialLR(opt, {gamma = g}): lr *= gamma every step
class('ExponentialLR', 'gamma', function(self, o)
  if type(o.gamma) ~= 'number' then fail('ExponentialLR', 'gamma must be a number, got ' .. typename(o.gamma)) end
  self.gamma = o.gamma
end, function(self)
  if self.last_epoch == 0 then return group_lrs(self, function(g) return g.lr end) end
  return group_lrs(self, function(g) return g.lr * self.gamma end)
end, function(self)
  return group_lrs(self, function(_, b) return b * self.gamma ^ self.last_epoch end)
end)

-- LambdaLR(opt, {lr_lambda = f or {f per group}}): lr = initial_lr * f(step).
-- The functions are not part of state_dict.
class('LambdaLR', 'lr_lambda', function(self, o)
  local f, n = o.lr_lambda, #self.optimizer.param_groups
  local fs = {}
  for i = 1, n do fs[i] = is_table(f) and f[i] or f end
  if is_table(f) and #f ~= n then fail('LambdaLR', ('expected %d lr_lambdas, got %d'):format(n, #f)) end
  for i = 1, n do
    if type(fs[i]) ~= 'function' then fail('LambdaLR', 'lr_lambda must be a function or a list of functions') end
  end
  self.lr_lambdas = fs
end, function(self)
  return group_lrs(self, function(_, b, i)
    local f = self.lr_lambdas[i](self.last_epoch)
    if type(f) ~= 'number' then
      fail('LambdaLR', ('lr_lambda(%d) returned %s, expected a number'):format(self.last_epoch, tostring(f)))
    end
    return b * f
  end)
end)

require('lunet.optim.one_cycle')(M, base, fail, sched_options)

-- what the other scheduler files build on. define(name, known, positional)
-- registers a scheduler's options (last_epoch added, as for every one here).
local internal = {Scheduler = Scheduler, base = base, fail = fail, class = class, group_lrs = group_lrs,
  options = sched_options, copy = copy}
function internal.define(name, known, positional, no_last_epoch)
  KNOWN[name], POSITIONAL[name] = known, positional
  if not no_last_epoch then known.last_epoch = 'number'; table.insert(positional, 'last_epoch') end
end
for _, file in ipairs({'plateau', 'lr_compose', 'warm_restarts', 'lr_more', 'cyclic', 'swa_lr'}) do
  require('lunet.optim.' .. file)(M, internal)
end

return M
