-- lunet.parallel.trial: a plan's candidates trained for a few steps, for
-- real, so that the choice rests on measured step times where the cost
-- model's predictions are close (lunet.parallel.plan's opts.trials = n).
--
--   trial.run(plan, model, sample, n)
--
-- Timed: the n candidates predicted fastest that fit, and the one
-- predicted fastest of each other kind (one device, data parallel,
-- pipeline, hybrid) (trial.pick), and the candidates a quarter, half and
-- three quarters down the predicted order (trial.spread: what the
-- calibration rests on; the plan chooses the fastest of all measured). Each trains a copy of the model (the user's model is
-- not touched) on the plan's batch made from the sample's rows, with a mean
-- squared error against zeros (the criterion's own cost is a small part of
-- a step) and the plan's optimizer; the devices' memory limited to what the
-- plan was told they hold. Its step time: the median of 3 groups of steps
-- after 3 warm-up steps, each group at least GROUP_SECONDS (profile's
-- per_call), the smaller of PASSES such figures taken in passes over the
-- candidates in turn; those then within TIE of the fastest are timed in
-- TIE_PASSES more passes among themselves (one pass's figure moved by more
-- than the few percent between them, and the choice with it).
-- Each timed candidate gets c.measured (seconds; c.trial_times: each
-- pass's figure); one whose trial failed
-- (out of memory: the copy and its optimizer beside the model) gets
-- c.trial_error and keeps only its prediction.
--
--   trial.calibrate(plan) -> the factor
--
-- Every candidate's predicted step scaled by what the trials measured over
-- what the cost model predicted for the spread candidates (c.calibrates;
-- their geometric mean; every candidate measured where none is marked):
-- the cost model's errors on a machine are largely shared by its
-- candidates (the cores' speed while all devices work, the collector's
-- cost in training, the host's), which a few measured steps see. Not from
-- the fastest predicted: those are the ones the cost model under-predicts
-- most (part of why they look fastest), and their factor over-corrected
-- every other candidate. Per kind of candidate the factor rests on one or
-- two trials and followed their noise more than it corrected
-- (bench/RESULTS.md). The factor applied is the square root of that mean
-- (half of it in logs, trial.CALIBRATION_WEIGHT): the trials' ratio holds
-- the cost model's shared error and also how fast the machine ran in those
-- few tenths of a second, which the steps after them do not share; the
-- whole ratio carried both to every candidate (bench/RESULTS.md: replayed
-- over five grids, fewer predictions within 15% than half of it).
-- c.model_step keeps the cost model's own figure; plan.calibration the
-- factor applied (1: nothing tried), plan.trials_ratio the whole mean.
-- Beside candidates over several devices, one device's candidates are
-- scaled by their own trials' ratio alone (half of it, as the rest;
-- plan.calibration_single; 1 where none was tried): replayed over the
-- grid's records (tools/replay_plan.lua), the shared factor raised their
-- figures, close alone, past the measured (bench/RESULTS.md).
local lunet = require 'lunet'
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)
local C = lunet.C
local wrap = require 'lunet.parallel.wrap'
local per_call = require('lunet.parallel.profile_devices').per_call
local collect_rearm = require('lunet.tensor').collect_rearm

local trial = {}
-- (a short group is a few steps, which one descheduled thread moves far
-- enough to flip the choice between candidates well apart; two passes over
-- the candidates in turn, the smaller figure kept, let a disturbance of one
-- pass not decide)
local GROUP_SECONDS, PASSES = 0.1, 2
local TIE, TIE_PASSES = 0.05, 2
trial.CALIBRATION_WEIGHT = 0.5
local OPTIMIZERS = { adam = 'Adam', adamw = 'AdamW', momentum = 'SGD', sgd = 'SGD' }

local function check(fn, plan, n)
  if not is_table(plan) or not is_table(plan.candidates) then
    error(('parallel.trial.%s: expected a plan (lunet.parallel.plan), got %s'):format(fn, typename(plan)), 3)
  end
  if type(n) ~= 'number' or n < 1 or n % 1 ~= 0 then
    error(('parallel.trial.%s: n must be an integer >= 1, got %s'):format(fn, tostring(n)), 3)
  end
end

-- which candidates: the n fastest predicted that fit, and each kind's fastest
function trial.pick(plan, n)
  check('pick', plan, n)
  local picked, kinds = {}, {}
  for _, c in ipairs(plan.candidates) do
    if c.fits and c.available and (#picked < n or not kinds[c.kind]) then
      picked[#picked + 1] = c
      kinds[c.kind] = true
    end
  end
  return picked
end

-- which candidates calibrate: those that fit at a quarter, half and three
-- quarters of the predicted order (the candidates are in that order)
local SPREAD = { 0.25, 0.5, 0.75 }
function trial.spread(plan)
  if not is_table(plan) or not is_table(plan.candidates) then
    error(('parallel.trial.spread: expected a plan (lunet.parallel.plan), got %s'):format(typename(plan)), 2)
  end
  local fit = {}
  for _, c in ipairs(plan.candidates) do if c.fits and c.available then fit[#fit + 1] = c end end
  local out, seen = {}, {}
  for _, q in ipairs(SPREAD) do
    local c = fit[math.floor(q * (#fit - 1) + 0.5) + 1]
    if c and not seen[c] then out[#out + 1], seen[c] = c, true end
  end
  return out
end

-- the plan's batch of B rows, the sample's rows in turn
local function batch_of(sample, B)
  local b0 = sample:size(1)
  if b0 == B then return sample end
  local idx = {}
  for i = 1, B do idx[i] = (i - 1) % b0 + 1 end
  return sample:index_select(1, idx)
end

-- one training step of candidate c on a copy of model
local function step_of(plan, c, model, x)
  local nn, optim = lunet.nn, lunet.optim
  local wrapped = wrap(model:clone(), plan, c)
  local kind = plan.cost.optimizer
  local opt = optim[OPTIMIZERS[kind] or 'Adam'](wrapped:parameters(), { lr = 1e-9, momentum = kind == 'momentum' and 0.9 or nil })
  local crit = nn.MSELoss()
  local dev = plan.devices[1]
  x = x:to(dev)
  -- (the output's shape from the profile: a forward of the whole batch may not fit)
  local shape = {}
  for i, s in ipairs(plan.profile[#plan.profile].out_shape) do shape[i] = s end
  shape[1] = x:size(1)
  local y = lunet.zeros(shape, { device = dev })
  if c.kind == 'pipeline' or c.kind == 'hybrid' then
    return function()
      opt:zero_grad()
      wrapped:forward_loss(crit, x, y):backward()
      opt:step()
    end
  end
  local k, B = c.accumulate, x:size(1)
  local xs, ys = {}, {}
  for i = 1, k do
    local lo, hi = math.floor((i - 1) * B / k), math.floor(i * B / k)
    xs[i], ys[i] = x:narrow(1, lo + 1, hi - lo), y:narrow(1, lo + 1, hi - lo)
  end
  local data = c.kind == 'data'
  return function()
    opt:zero_grad()
    for i = 1, k do
      if data then wrapped:forward_loss(crit, xs[i], ys[i]):backward()
      else crit(wrapped(xs[i]), ys[i]):backward() end
    end
    opt:step()
  end
end

-- each device limited to what it holds now plus what the plan says it holds
local function limit(plan)
  local saved = {}
  for d, name in ipairs(plan.devices) do
    local id = require('lunet.core').device_id('parallel.trial', name)
    saved[d] = { id = id, limit = tonumber(C.ln_memory_limit(id)) }
    local m = plan.memory[d]
    if m < math.huge then
      local want = tonumber(C.ln_memory_allocated(id)) + m
      if saved[d].limit > 0 then want = math.min(want, saved[d].limit) end
      C.ln_memory_set_limit(id, want)
    end
  end
  return function() for _, s in ipairs(saved) do C.ln_memory_set_limit(s.id, s.limit) end end
end

function trial.run(plan, model, sample, n)
  check('run', plan, n)
  if not is_table(model) or not model._params then error('parallel.trial.run: expected an nn.Module, got ' .. typename(model), 2) end
  if not lunet.is_tensor(sample) or sample:dim() == 0 then
    error('parallel.trial.run: sample must be a batch (a tensor with a batch dimension)', 2)
  end
  local x = batch_of(sample, plan.batch)
  local picked = trial.pick(plan, n)
  local timed, seen = {}, {}
  for _, c in ipairs(picked) do timed[#timed + 1], seen[c] = c, true end
  for _, c in ipairs(trial.spread(plan)) do
    c.calibrates = true
    if not seen[c] then timed[#timed + 1], seen[c] = c, true end
  end
  local function time(c)
    if c.trial_error then return end
    -- (each candidate from the same start: the collector's triggers
    -- re-armed from what is live, and the devices' block caches handed
    -- back, which the one before filled with its own block sizes)
    collectgarbage()
    collect_rearm()
    for _, d in ipairs(plan.devices) do lunet.empty_cache(d) end
    local restore = limit(plan)
    local ok, t = pcall(function() return per_call(step_of(plan, c, model, x), 3, GROUP_SECONDS, 1) end)
    restore()
    if ok then
      c.trial_times = c.trial_times or {}
      c.trial_times[#c.trial_times + 1] = t
      c.measured = math.min(c.measured or math.huge, t)
    else
      c.measured, c.trial_error = nil, tostring(t)
    end
  end
  for _ = 1, PASSES do
    for _, c in ipairs(timed) do time(c) end
  end
  local best = math.huge
  for _, c in ipairs(timed) do if c.measured then best = math.min(best, c.measured) end end
  local close = {}
  for _, c in ipairs(timed) do if c.measured and c.measured <= best * (1 + TIE) then close[#close + 1] = c end end
  if #close > 1 then
    for _ = 1, TIE_PASSES do
      for _, c in ipairs(close) do time(c) end
    end
  end
  -- (the last candidate's copy and optimizer freed before the plan goes on)
  collectgarbage(); collectgarbage()
  lunet.synchronize()
  return picked
end

-- the mean log of measured over predicted of the candidates that pick
-- takes, and how many
local function mean_log(plan, pick)
  local sum, n = 0, 0
  for _, c in ipairs(plan.candidates) do
    local predicted = c.model_step or c.step
    if c.measured and predicted > 0 and pick(c) then sum, n = sum + math.log(c.measured / predicted), n + 1 end
  end
  return n > 0 and sum / n or 0, n
end

function trial.calibrate(plan)
  if not is_table(plan) or not is_table(plan.candidates) then
    error(('parallel.trial.calibrate: expected a plan (lunet.parallel.plan), got %s'):format(typename(plan)), 2)
  end
  local marked, several = false, false
  for _, c in ipairs(plan.candidates) do
    if c.calibrates and c.measured then marked = true end
    if c.kind ~= 'single' then several = true end
  end
  local shared = mean_log(plan, function(c) return c.calibrates or not marked end)
  local factor = math.exp(trial.CALIBRATION_WEIGHT * shared)
  -- one device's step, beside candidates over several: its own trials'
  -- (none of the cores' sharing, the links or the host's queueing for other
  -- devices that the shared factor carries is in it; with the shared
  -- factor its figure, within a few percent alone, rose 10-20%)
  local single = factor
  if several then
    local own, n = mean_log(plan, function(c) return c.kind == 'single' end)
    single = n > 0 and math.exp(trial.CALIBRATION_WEIGHT * own) or 1
  end
  for _, c in ipairs(plan.candidates) do
    c.model_step = c.model_step or c.step
    c.step = c.model_step * (c.kind == 'single' and single or factor)
  end
  plan.calibration, plan.trials_ratio, plan.calibration_single = factor, math.exp(shared), single
  return factor
end

return trial
