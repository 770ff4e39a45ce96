-- lunet.parallel.plan(model, sample_input, opts) -> a Plan: the strategies
-- for training model on opts.devices, each with its predicted step time,
-- memory per device, bytes on the wire, bubble and whether it fits, and the
-- one chosen, with the reason in a sentence.
--
--   local p = lunet.parallel.plan(model, lunet.randn(32, 3, 32, 32), {devices = lunet.devices(), batch = 128})
--   print(p)          -- the candidates as a table
--   print(p.reason)   -- "the model and its Adam state need 3.1 GB, ...: 2-stage pipeline, ..."
--   p.chosen          -- {kind = 'pipeline', stages = 2, chunks = 8, schedule = '1f1b', balance = {5, 4}, step = s, ...}
--
-- opts: devices (default lunet.devices()), batch (the global batch; default
-- the sample's), memory (bytes per device: a number or a list; default each
-- device's limit, LUNET_CPU_MEMORY for virtual CPU devices, unlimited if
-- none), speed (relative speeds; default the devices' shares of the cores),
-- optimizer ('adam' default, 'momentum', 'sgd': the state it keeps),
-- chunks (the micro-batch counts tried, default {2, 4, 8, 16}), schedules
-- ({'1f1b', 'gpipe', 'interleaved', 'zb'}), kinds (the strategies that may be chosen), runs
-- (profiling repeats), trials (n: the n candidates predicted fastest, and
-- the fastest predicted of each other kind, are trained for a few steps on
-- copies of the model and the measured fastest is chosen; each gets
-- c.measured; plan.predicted_choice is the cost model's own; every
-- candidate's step is then scaled by the square root of the trials'
-- measured over predicted, c.model_step the cost model's figure,
-- plan.calibration the factor (parallel.trial.calibrate); 0 default). profile (a stated per-atom profile, see cost.lua) and
-- link ({copy = {alpha, beta}, allreduce = {alpha, beta}}) skip measuring:
-- together (each device's speed while all compute, relative to alone;
-- default measured: profile.together) and gc (seconds of a full collection;
-- default measured at the plan's start, profile.collection) too:
-- the specs state them, so that no choice depends on the machine's speed;
-- with a stated profile model may be nil.
local lunet = require 'lunet'
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)
local options = require 'lunet.options'
local cost = require 'lunet.parallel.cost'
local fmt_bytes = require('lunet.parallel.partition').fmt_bytes

local Plan = {}
Plan.__index = Plan

local OPTS = { devices = 'table', batch = 'number', memory = true, speed = 'table', optimizer = 'string',
  chunks = 'table', schedules = 'table', kinds = 'table', runs = 'number', profile = 'table', link = 'table',
  headroom = 'number', bucket_mb = 'number', together = 'number', trials = 'number', gc = 'number' }

-- (at the user's line: plan is reached through auto and the bench's wrappers too)
local function fail(msg) require('lunet.options').raise('parallel.plan: ' .. msg) end
local KINDS = { 'single', 'data', 'pipeline', 'hybrid' }   -- (every one, the default)
-- each entry of list (an option) one of allowed, or an error naming it
local function each_one_of(name, list, allowed)
  if list ~= nil and #list == 0 then fail(('%s must list at least one of %s'):format(name, table.concat(allowed, ', '))) end
  for i, v in ipairs(list or {}) do
    local known = false
    for _, a in ipairs(allowed) do known = known or v == a end
    if not known then fail(('%s[%d] must be one of %s, got %s'):format(name, i, table.concat(allowed, ', '), tostring(v))) end
  end
end

-- the model's atoms (lunet.parallel.atoms): the modules a pipeline cuts between
local function atoms_of(model) return require('lunet.parallel.atoms').of(model) end
Plan.atoms_of = atoms_of

local function memory_of(opts, names)
  local m, out = opts.memory, {}
  for d = 1, #names do
    local v
    if type(m) == 'number' then v = m
    elseif is_table(m) then
      if #m ~= #names then fail(('memory has %d entries for %d devices (bytes for each, or one number for all)'):format(#m, #names)) end
      v = m[d]
    elseif m ~= nil then fail('memory must be bytes per device (a number or a list), got ' .. typename(m)) end
    if v == nil then
      local lim = lunet.memory_limit and lunet.memory_limit(names[d]) or 0
      v = lim > 0 and lim or math.huge
    end
    if type(v) ~= 'number' or not (v > 0) then
      fail(('%s must be a positive number of bytes, got %s'):format(is_table(m) and ('memory[%d]'):format(d) or 'memory',
        tostring(v)))
    end
    out[d] = v
  end
  return out
end

-- relative speeds (the first device's share of the cores = 1) and, for
-- virtual CPU devices, each one's thread share and the cores they share
local function speed_of(opts, names)
  local out, threads, base = {}, {}, nil
  local cpu = true
  for d = 1, #names do
    local ok, t = pcall(lunet.get_num_threads, names[d])
    if not ok then cpu = false end
    t = ok and t or 1
    base = base or t
    threads[d], out[d] = t, t / base
  end
  if opts.speed then return opts.speed end
  return out, cpu and threads or nil, cpu and lunet.C.ln_num_cores() or nil
end

-- together, measured (profile.together). A measure below three quarters of
-- the devices' fair share of the cores (virtual CPU devices: the cores over
-- their threads) was disturbed (a JIT compile, the collector, other work on
-- the machine): measured again, at most twice, the largest kept.
local function measure_together(profile, atoms, sample, names, runs, threads, cores)
  local t = profile.together(atoms, sample, names, { runs = runs })
  local fair = cost.core_share(threads, cores, 1, #names)
  for _ = 1, fair and 2 or 0 do
    if t >= 0.75 * fair then break end
    t = math.max(t, profile.together(atoms, sample, names, { runs = runs }))
  end
  return t
end

local function sentence(self)
  local c, cm = self.chosen, self.cost
  local state = c.state
  local oname = ({ adam = 'Adam', adamw = 'AdamW', momentum = 'momentum', sgd = 'SGD' })[cm.optimizer]
  local held = self.memory[1]
  local same = true
  for d = 2, #self.memory do if self.memory[d] ~= held then same = false end end
  local holds = held == math.huge and 'no device has a memory limit'
    or same and ('each device holds %s'):format(fmt_bytes(held)) or 'the devices hold ' .. table.concat(
      (function() local t = {}; for d, v in ipairs(self.memory) do t[d] = v == math.huge and 'unlimited' or fmt_bytes(v) end; return t end)(), ', ')
  local what
  if c.kind == 'single' or c.kind == 'data' then
    what = c.kind == 'single' and 'one device' or ('data parallel over %d devices'):format(c.devices)
    what = what .. (', %d samples%s'):format(math.floor(self.batch / c.devices + 0.5), c.kind == 'data' and ' a device' or '')
    if c.accumulate > 1 then what = what .. (' in %d accumulated micro-batches'):format(c.accumulate) end
    if c.kind == 'data' then what = what .. (', all-reduce of %s (%.1f ms not hidden by backward)'):format(fmt_bytes(c.params), c.comm * 1e3) end
    what = what .. (', %.1f ms a step'):format(c.step * 1e3)
  else
    what = (c.kind == 'hybrid' and ('%d pipelines of %d stages'):format(c.replicas, c.stages) or ('%d-stage pipeline'):format(c.stages))
      .. (' (atoms per stage %s), %d micro-batches, %s, %.1f ms a step, %d%% bubble'):format(table.concat(c.balance, '+'),
      c.chunks, cost.schedule_name(c) .. (c.interleave and ' (stages a device)' or ''), c.step * 1e3,
      math.floor(c.bubble * 100 + 0.5))
  end
  if c.measured then
    local n = 0
    for _, o in ipairs(self.candidates) do if o.measured then n = n + 1 end end
    what = what .. (' (%.1f ms measured, the fastest of %d tried)'):format(c.measured * 1e3, n)
    local p = self.predicted_choice
    if p and p ~= c then
      what = what .. ('; predicted fastest was %s, %s'):format(p.label,
        p.measured and ('%.1f ms measured'):format(p.measured * 1e3) or ('its trial failed: ' .. tostring(p.trial_error)))
    end
  end
  -- why not something faster, or (a pipeline chosen) why not data parallel
  local why, other = '', self.candidates[1]
  if other == c or other.fits then
    other = nil
    for _, o in ipairs(self.candidates) do
      if (o.kind == 'data' or o.kind == 'single') and c.kind ~= 'data' and c.kind ~= 'single' then other = o; break end
    end
  end
  if other and not other.fits then
    why = (' (%s%s does not fit: %s)'):format(other.step < c.step and 'the faster ' or '', other.label, other.why)
  end
  return ('the model and its %s state need %s, its activations %s at batch %d; %s: %s%s'):format(
    oname, fmt_bytes(state), fmt_bytes(self.act_total), self.batch, holds, what, why)
end

local function divisors_upto(B, cap)
  local out, k = {}, 1
  while k <= cap and k <= B do out[#out + 1] = k; k = k * 2 end
  return out
end

function Plan.new(model, sample, opts)
  opts = options.check('parallel.plan', opts, OPTS) or {}
  local names = {}
  for d, dev in ipairs(opts.devices or lunet.devices()) do
    local ok, id = pcall(require('lunet.core').device_id, 'parallel.plan', dev)
    if not ok then error(id, 0) end   -- (device_id named the caller's line already)
    names[d] = require('lunet.core').device_name(id)
    for e = 1, d - 1 do if names[e] == names[d] then fail('device ' .. names[d] .. ' appears twice') end end
  end
  local n = #names
  if n == 0 then fail('devices must be a non-empty list') end
  -- (the candidates' shapes, checked before anything is measured)
  each_one_of('schedules', opts.schedules, require('lunet.parallel.schedule').kinds)
  if opts.chunks and #opts.chunks == 0 then fail('chunks must list at least one micro-batch count') end
  for i, m in ipairs(opts.chunks or {}) do
    if type(m) ~= 'number' or m < 1 or m % 1 ~= 0 then
      fail(('chunks[%d] must be an integer >= 1, got %s'):format(i, tostring(m)))
    end
  end
  -- (the rest of the options too: each failed after the profile, deep in
  -- the cost model, or gave "nothing fits")
  local function number_in(name, v, ok, what)
    if v ~= nil and not (type(v) == 'number' and ok(v)) then fail(('%s must be %s, got %s'):format(name, what, tostring(v))) end
  end
  number_in('headroom', opts.headroom, function(v) return v > 0 and v <= 1 end, 'a share in (0, 1]')
  number_in('together', opts.together, function(v) return v > 0 and v <= 1 end, 'a share in (0, 1]')
  number_in('bucket_mb', opts.bucket_mb, function(v) return v > 0 and v < math.huge end, 'a positive number')
  number_in('gc', opts.gc, function(v) return v >= 0 and v < math.huge end, 'seconds >= 0')
  if opts.speed then
    if #opts.speed ~= n then fail(('speed has %d entries for %d devices'):format(#opts.speed, n)) end
    for d = 1, n do number_in(('speed[%d]'):format(d), opts.speed[d], function(v) return v > 0 and v < math.huge end, 'a positive number') end
  end
  if opts.optimizer ~= nil and not cost.OPT_STATES[opts.optimizer] then
    fail(("optimizer must be 'adam', 'adamw', 'momentum' or 'sgd', got %s"):format(tostring(opts.optimizer)))
  end
  each_one_of('kinds', opts.kinds, KINDS)
  local memory = memory_of(opts, names)
  local profile = require 'lunet.parallel.profile'
  local atoms, list
  if opts.profile then
    list = opts.profile
    if is_table(model) and model._params and #atoms_of(model) ~= #list then
      fail(('the stated profile has %d atoms, the model %d'):format(#list, #atoms_of(model)))
    end
  else
    if not is_table(model) or not model._params then fail('expected an nn.Module, got ' .. typename(model)) end
    if not lunet.is_tensor(sample) or sample:dim() == 0 then fail('sample_input must be a batch (a tensor with a batch dimension)') end
    atoms = atoms_of(model)
    model:to(names[1])
    profile.check_runs('parallel.plan', opts.runs)   -- (before any profiling)
    local ok, res = pcall(profile.atoms, atoms, sample:to(names[1]), names[1], { runs = opts.runs, optimizer = opts.optimizer })
    -- (the sample's own fault, a shape the model does not take: said as the plan's)
    if not ok then fail('sample_input does not train through the model: ' .. tostring(res):gsub('^[^\n]-:%d+: ', '')) end
    list = res
  end
  local b0 = list[1] and list[1].batch or 1
  local batch = opts.batch or (lunet.is_tensor(sample) and sample:size(1)) or b0
  if type(batch) ~= 'number' or batch < 1 or batch % 1 ~= 0 then fail('batch must be an integer >= 1, got ' .. tostring(batch)) end
  local link = opts.link or (n > 1 and profile.link(names[1], names[2], { devices = names })) or {}
  -- the devices' speed while all of them compute (measured where the layers were)
  local speed, threads, cores = speed_of(opts, names)
  local together = opts.together
  if together == nil and not opts.profile and not opts.speed and n > 1 then
    -- (at the batch the profile fitted the device's memory with)
    together = measure_together(profile, atoms, sample:narrow(1, 1, list[1].batch), names, opts.runs, threads, cores)
  end
  -- a full collection's seconds, measured now: training collects this heap
  -- (the model, the data, the program's own), larger than the profile's
  -- was when it timed one (stated profiles keep theirs)
  local gc = opts.gc
  if gc == nil and not opts.profile then gc = math.max(list.gc or 0, profile.collection()) end
  local in_bytes = lunet.is_tensor(sample) and sample:numel() * sample:element_size() or (list.in_bytes or 0)
  local cm = cost.new(list, { link = link, speed = speed, memory = memory, optimizer = opts.optimizer,
    headroom = opts.headroom, names = names, threads = threads, cores = cores, together = together, bucket_mb = opts.bucket_mb, in_bytes = in_bytes, gc = gc,
    in_batch = lunet.is_tensor(sample) and sample:size(1) or b0 })
  local self = setmetatable({ together = together, gc = gc or list.gc, devices = names, batch = batch, memory = memory, speed = speed, cost = cm,
    profile = list, link = link, atoms = atoms, model = model }, Plan)
  local _, _, act = cm:range(1, cm.n, batch)
  self.act_total = act
  -- the candidates
  local kinds = {}
  for _, k in ipairs(opts.kinds or KINDS) do kinds[k] = true end
  local cands = {}
  local function add(c) cands[#cands + 1] = c end
  -- data parallel over nd devices; when it does not fit, also the fewest
  -- accumulated micro-batches that do
  -- (micro-batches below what a layer accepts, BatchNorm1d's 2, are no candidates)
  local min_b = list.min_batch or 1
  local function with_accumulation(nd)
    if batch < nd * min_b then return end
    local c = cm:data_parallel(nd, batch, 1)
    add(c)
    if c.fits then return end
    local ks = divisors_upto(math.floor(batch / (nd * min_b)), 64)
    for i = 2, #ks do
      c = cm:data_parallel(nd, batch, ks[i])
      if c.fits or i == #ks then add(c); return end
    end
  end
  with_accumulation(1)
  if n > 1 then with_accumulation(n) end
  local chunks = opts.chunks or { 2, 4, 8, 16 }
  local schedules = opts.schedules or { '1f1b', 'gpipe', 'interleaved', 'zb' }
  for p = 2, math.min(n, cm.n) do
    if n % p == 0 then
      local d = n / p
      for _, m in ipairs(chunks) do
        if m * min_b <= batch / d then
          for _, s in ipairs(schedules) do add(cm:pipeline(p, d, batch, m, s)) end
        end
      end
    end
  end
  -- fastest first; on a tie the one needing less memory (1F1B before GPipe)
  local function peak(c) local m = 0; for _, v in ipairs(c.memory) do m = math.max(m, v) end; return m end
  for _, c in ipairs(cands) do c.peak = peak(c) end
  table.sort(cands, function(a, b)
    if a.step ~= b.step then return a.step < b.step end
    return a.peak < b.peak
  end)
  for _, c in ipairs(cands) do
    c.label = cost.label(c)
    c.available = kinds[c.kind] or false
  end
  self.candidates = cands
  local chosen
  for _, c in ipairs(cands) do if c.fits and c.available then chosen = c; break end end
  if not chosen then
    local lines = {}
    for i = 1, math.min(3, #cands) do lines[i] = cands[i].label .. ': ' .. (cands[i].why or 'not available') end
    fail(('nothing fits the devices\' memory (%s)'):format(table.concat(lines, '; ')))
  end
  self.chosen = chosen
  -- trials: the candidates predicted fastest (and each kind's fastest)
  -- trained for a few steps; the measured fastest is chosen
  local trials = opts.trials or 0
  if trials % 1 ~= 0 or trials < 0 then fail('trials must be an integer >= 0, got ' .. tostring(trials)) end
  if trials > 0 then
    if not is_table(model) or not model._params or not lunet.is_tensor(sample) then
      fail('trials need the model and a sample input')
    end
    self.predicted_choice = chosen
    local trial = require('lunet.parallel.trial')
    trial.run(self, model, sample, trials)
    -- (the predictions scaled by the trials' measured over predicted; the
    -- order of the candidates stays the cost model's)
    trial.calibrate(self)
    for _, c in ipairs(cands) do
      if c.measured and (not self.chosen.measured or c.measured < self.chosen.measured) then self.chosen = c end
    end
  end
  self.reason = sentence(self)
  return self
end

function Plan:__tostring()
  local tried = self.predicted_choice ~= nil
  local rows = { ('%-34s %10s%s %8s %12s %12s %6s'):format('candidate', 'step ms', tried and '   trial ms' or '', 'bubble',
    'max memory', 'wire/step', 'fits') }
  for _, c in ipairs(self.candidates) do
    rows[#rows + 1] = ('%-34s %10.2f%s %7.0f%% %12s %12s %6s%s'):format(c.label, c.step * 1e3,
      tried and (c.measured and ('%11.2f'):format(c.measured * 1e3) or ('%11s'):format(c.trial_error and 'failed' or '-')) or '',
      c.bubble * 100, fmt_bytes(c.peak), fmt_bytes(c.wire), c.fits and 'yes' or 'no', c == self.chosen and '  <- chosen' or
      (not c.available and '  (not available)' or ''))
  end
  if self.calibration then
    rows[#rows + 1] = ('(step ms: the cost model\'s figures x %.3f, the square root of the trials\' measured over predicted, %.3f%s)')
      :format(self.calibration, self.trials_ratio, self.calibration_single and self.calibration_single ~= self.calibration
        and ('; one device\'s x %.3f, from its own trials'):format(self.calibration_single) or '')
  end
  rows[#rows + 1] = 'chosen: ' .. self.reason
  return table.concat(rows, '\n')
end

return Plan
