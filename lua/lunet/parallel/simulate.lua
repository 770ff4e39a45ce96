-- lunet.parallel.simulate(plan, opts): the chosen strategy of a plan at
-- 8..1024 devices, predicted by the planner's cost model (cost.lua) with the
-- interconnect and devices given instead of this machine's.
--
--   local rows = lunet.parallel.simulate(p, {devices = {8, 64, 512}, bandwidth = 12.5e9,
--     latency = 5e-6, device_speed = 20})
--   print(rows)   -- devices, step ms, samples/s, efficiency
--
-- plan: a Plan (lunet.parallel.plan), or a description of one device's step
-- {compute = s (forward + backward at its batch), backward = share of it (2/3),
-- model_bytes = gradient bytes, batch = samples a device, layers = how many
-- equal layers the parameters lie in (50), stages = p, chunks = m,
-- schedule = '1f1b'}.
-- opts: devices (a count or a list, each 1..65536; default 8, 16, ..., 1024), bandwidth
-- (bytes/s; default the plan's measured all-reduce), latency (s, the alpha
-- of a ring step; default the plan's), device_speed (each device's speed
-- relative to the profiled one; 1), overlap (share of backward that the
-- all-reduce hides behind; default the plan's link, else 1).
-- Weak scaling, as published tables are: each device (each pipeline)
-- keeps its batch. Data parallel at N devices: step = compute + what the
-- ring all-reduce, 2(N-1)/N * S / bandwidth + 2(N-1) * latency, leaves
-- after overlapping backward (at least the last bucket's all-reduce).
-- A pipeline of p stages: N / p replicas of it, each stage's gradients
-- all-reduced among them; its bubble (p-1)/(m+p-1) for equal stages.
-- Efficiency: N devices' samples/s over N times one device's.
local cost = require 'lunet.parallel.cost'
local options = require 'lunet.options'
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)

local MAX_DEVICES = 65536
local OPTS = { devices = 'number|table', bandwidth = 'number', latency = 'number', device_speed = 'number',
  overlap = 'number' }

-- (at the user's line, whatever the call's depth: the first caller outside lunet)
local function fail(msg) options.raise('parallel.simulate: ' .. msg) end

local Rows = {}
Rows.__index = Rows
function Rows:__tostring()
  local out = { ('%8s %12s %14s %11s %12s'):format('devices', 'step ms', 'samples/s', 'efficiency', 'comm ms') }
  for _, r in ipairs(self) do
    out[#out + 1] = ('%8d %12.2f %14.1f %10.1f%% %12.2f'):format(r.devices, r.step * 1e3, r.throughput,
      r.efficiency * 100, r.comm * 1e3)
  end
  return table.concat(out, '\n')
end

local DESCRIPTION = { compute = 'number', backward = 'number', model_bytes = 'number', batch = 'number',
  layers = 'number', stages = 'number', chunks = 'number', schedule = 'string' }
local MAX_LAYERS = 100000
local function finite(v) return type(v) == 'number' and v >= 0 and v < math.huge end
local function count_in(v, lo, hi) return type(v) == 'number' and v >= lo and v <= hi and v % 1 == 0 end

-- a cost model of `layers` equal atoms from a description
local function described(d)
  options.check('parallel.simulate: the description', d, DESCRIPTION)
  for _, k in ipairs({ 'compute', 'model_bytes' }) do
    if not finite(d[k]) then fail(('the description needs %s (a finite number >= 0), got %s'):format(k, tostring(d[k]))) end
  end
  local L = d.layers or 50
  local bshare = d.backward or 2 / 3
  local batch = d.batch or 1
  if not count_in(L, 1, MAX_LAYERS) then fail(('layers must be an integer from 1 to %d, got %s'):format(MAX_LAYERS, tostring(L))) end
  if not (bshare >= 0 and bshare <= 1) then fail('backward must be a share of compute in [0, 1], got ' .. tostring(bshare)) end
  if not count_in(batch, 1, math.huge) then fail('batch must be an integer >= 1, got ' .. tostring(batch)) end
  for _, k in ipairs({ 'stages', 'chunks' }) do
    if d[k] ~= nil and not count_in(d[k], 1, MAX_DEVICES) then
      fail(('%s must be an integer from 1 to %d, got %s'):format(k, MAX_DEVICES, tostring(d[k])))
    end
  end
  options.one_of('parallel.simulate', 'schedule', d.schedule, require('lunet.parallel.schedule').kinds)
  local atoms = {}
  for i = 1, L do
    atoms[i] = { fwd = d.compute * (1 - bshare) / L, bwd = d.compute * bshare / L, act_bytes = 0,
      param_bytes = d.model_bytes / L, out_bytes = 0, batch = batch }
  end
  local kind = (d.stages or 1) > 1 and 'pipeline' or 'data'
  return atoms, { kind = kind, stages = d.stages or 1, chunks = d.chunks or 1, schedule = d.schedule or '1f1b',
    accumulate = 1, devices = d.stages or 1, replicas = 1 }, batch
end

local function simulate(plan, opts)
  opts = options.check('parallel.simulate', opts, OPTS) or {}
  if not is_table(plan) then fail('expected a plan or a description table, got ' .. typename(plan)) end
  local atoms, chosen, batch, link
  if plan.cost and plan.chosen then
    atoms, chosen, link = plan.cost.atoms, plan.chosen, plan.cost
    batch = plan.batch / chosen.replicas   -- a device's (data parallel) or a pipeline's batch
  else
    atoms, chosen, batch = described(plan)
  end
  local counts = opts.devices or { 8, 16, 32, 64, 128, 256, 512, 1024 }
  if type(counts) == 'number' then counts = { counts } end
  if not is_table(counts) or #counts == 0 then fail('devices must be a count or a non-empty list of counts, got ' .. typename(counts)) end
  for _, N in ipairs(counts) do
    -- (the cost model keeps a few numbers a device)
    if type(N) ~= 'number' or not (N >= 1 and N <= MAX_DEVICES) or N % 1 ~= 0 then
      fail(('devices must be integers from 1 to %d, got %s'):format(MAX_DEVICES, tostring(N)))
    end
  end
  local bw, lat = opts.bandwidth, opts.latency
  if bw == nil then bw = link and link.ar.beta > 0 and 1 / link.ar.beta or fail('bandwidth is needed (bytes/s)') end
  if lat == nil then lat = link and link.ar.alpha or 0 end
  if type(bw) ~= 'number' or not (bw > 0) then fail('bandwidth must be > 0 bytes/s, got ' .. tostring(bw)) end
  if not finite(lat) then fail('latency must be a finite number >= 0 s, got ' .. tostring(lat)) end
  local speed = opts.device_speed or 1
  if type(speed) ~= 'number' or not (speed > 0 and speed < math.huge) then fail('device_speed must be a finite number > 0, got ' .. tostring(speed)) end
  local overlap = opts.overlap or (link and link.overlap) or 1
  if not (overlap >= 0 and overlap <= 1) then fail('overlap must be a share of backward in [0, 1], got ' .. tostring(overlap)) end
  local cm = cost.new(atoms, { link = { allreduce = { alpha = lat, beta = 1 / bw },
    copy = link and link.copy or { alpha = lat, beta = 1 / bw }, overlap = overlap },
    speed = setmetatable({}, { __index = function() return speed end }), optimizer = 'sgd',
    host = 0 })   -- (each device has its own host there: no one host queues for all)
  local p, m, k = chosen.stages, chosen.chunks, chosen.accumulate or 1
  local rows = setmetatable({}, Rows)
  local one = cm:data_parallel(1, batch, k).step   -- one device, the same batch
  for _, N in ipairs(counts) do
    local c
    if p > 1 then
      if N % p ~= 0 then fail(('%d devices do not hold whole pipelines of %d stages'):format(N, p)) end
      c = cm:pipeline(p, N / p, batch * N / p, m, chosen.schedule)
    else
      c = cm:data_parallel(N, batch * N, k)
    end
    local replicas = p > 1 and N / p or N
    rows[#rows + 1] = { devices = N, step = c.step, comm = c.comm, bubble = c.bubble,
      throughput = replicas * batch / c.step, efficiency = replicas * one / (N * c.step) }
  end
  return rows
end

return simulate
