-- lunet.parallel.step_sim: a pipeline's training step played out in time,
-- for the cost model (cost.lua), where bounds taken one at a time (the
-- stages' dependencies, the cores they share, the host's queueing) miss how
-- they delay each other.
--
--   step_sim.run{stages = p, replicas = d, steps = schedule.build(kind, p, m),
--     fwd = {s}, bwd = {s} (seconds a micro-batch on each stage), wgt = {s}
--     (a W action's, the weights' gradients of a zero-bubble schedule, whose
--     B then takes bwd: the input's gradient), copy = s (a
--     boundary transfer), host = {s} (the host's time to queue one action of
--     each stage), cores = n (threads that run at full speed at once; nil:
--     every one), host_shares = bool (the host thread takes a core too),
--     paced = {bool} (the host waits for the stage's previous backward
--     before queuing to it: Stage.lua, past half of a device's memory),
--     devices = n (the devices a replica's stages run on, stage s on
--     (s - 1) % n + 1: the interleaved schedule; default one a stage)}
--   --> seconds from the first action queued to the last one done
--
-- The host walks the schedule's steps in order, each action on every replica
-- (as pipeline_run.lua does), spending host[s] to queue it; a device runs
-- what was queued to it in order, each action once its inputs are there
-- (F(s, m) after F(s - 1, m) and its copy; B(s, m) after F(s, m), and after
-- B(s + 1, m) and its copy; W(s, m) after B(s, m)). The threads that can run (the host while it
-- has actions to queue; each device whose next action is ready) share the
-- cores equally: each runs at min(1, cores / running).
local step_sim = {}

local EPS = 1e-12

function step_sim.run(o)
  local P, D, steps = o.stages, o.replicas or 1, o.steps
  local copy, cores = o.copy or 0, o.cores or math.huge
  local L = o.devices or P
  local function dev_of(r, s) return (r - 1) * L + (s - 1) % L + 1 end
  -- the host's list: (stage, micro-batch, kind, replica) in queueing order
  local list = {}
  for _, step in ipairs(steps) do
    for _, a in ipairs(step) do
      for r = 1, D do list[#list + 1] = { s = a[1], m = a[2], k = a[3], r = r } end
    end
  end
  local n = #list
  local done_at = {}        -- key -> time the action finished
  local function key(s, m, k, r) return ((r * (P + 2) + s) * 4096 + m) * 3 + (k == 'F' and 0 or k == 'B' and 1 or 2) end
  -- (the action after which a stage's buffers are free: what a paced stage waits for)
  local frees = o.wgt and 'W' or 'B'
  local queue, head = {}, {}   -- per device (r, s): its queued actions, the next to run
  local left = {}              -- remaining work of each device's running action
  for dev = 1, L * D do queue[dev], head[dev] = {}, 1 end
  local last_b = {}            -- per device: the key of its last queued backward
  local now, pos, host_left = 0, 1, nil
  local finished = 0
  -- when can action a (on its device) start: nil if an input is missing
  local function ready_at(a)
    local t = 0
    if a.k == 'W' then return done_at[key(a.s, a.m, 'B', a.r)] end
    if a.k == 'F' then
      if a.s > 1 then
        local d = done_at[key(a.s - 1, a.m, 'F', a.r)]
        if not d then return nil end
        t = d + copy
      end
    else
      local d = done_at[key(a.s, a.m, 'F', a.r)]
      if not d then return nil end
      t = d
      if a.s < P then
        d = done_at[key(a.s + 1, a.m, 'B', a.r)]
        if not d then return nil end
        t = math.max(t, d + copy)
      end
    end
    return t
  end
  local nd = L * D
  while finished < n do
    -- the host: its next action, unless it waits for a paced stage's backward
    local host_runs = false
    if pos <= n then
      local a = list[pos]
      local dev = dev_of(a.r, a.s)
      local wait = o.paced and o.paced[a.s] and last_b[dev]
      if not (wait and not done_at[wait]) then
        host_left = host_left or (o.host and o.host[a.s] or 0)
        host_runs = true
      end
    end
    -- the devices whose next action can start now, and the next time one can
    local running, next_start = {}, math.huge
    for dev = 1, nd do
      local a = queue[dev][head[dev]]
      if a then
        local t = ready_at(a)
        if t and t <= now + EPS then
          running[#running + 1] = dev
          if not left[dev] then left[dev] = a.k == 'F' and o.fwd[a.s] or a.k == 'B' and o.bwd[a.s] or o.wgt[a.s] end
        elseif t then
          next_start = math.min(next_start, t)
        end
      end
    end
    local threads = #running + ((host_runs and o.host_shares) and 1 or 0)
    local rate = threads > 0 and math.min(1, cores / threads) or 1
    local host_rate = (host_runs and o.host_shares) and rate or 1
    -- the next event: an action or the host's queueing done, or an input arriving
    local dt = next_start - now
    if host_runs then dt = math.min(dt, host_left / host_rate) end
    for _, dev in ipairs(running) do dt = math.min(dt, left[dev] / rate) end
    if dt == math.huge then error('parallel.step_sim: the schedule cannot go on (an action waits for what never runs)', 2) end
    dt = math.max(dt, 0)
    now = now + dt
    if host_runs then
      host_left = host_left - dt * host_rate
      if host_left <= EPS then
        local a = list[pos]
        local dev = dev_of(a.r, a.s)
        local q = queue[dev]
        q[#q + 1] = a
        if a.k == frees then last_b[dev] = key(a.s, a.m, frees, a.r) end
        pos, host_left = pos + 1, nil
      end
    end
    for _, dev in ipairs(running) do
      left[dev] = left[dev] - dt * rate
      if left[dev] <= EPS then
        local a = queue[dev][head[dev]]
        done_at[key(a.s, a.m, a.k, a.r)] = now
        head[dev], left[dev] = head[dev] + 1, nil
        finished = finished + 1
      end
    end
  end
  return now
end

-- a score for partition.split_looped: the step of stages' times (forward
-- and backward together, a backward taken as twice its forward) played out
-- on the steps of S stages looping over P devices
function step_sim.looped_score(steps, S, P)
  local f, b = {}, {}
  return function(times)
    for j = 1, S do f[j], b[j] = times[j] / 3, 2 * times[j] / 3 end
    return step_sim.run { stages = S, devices = P, steps = steps, fwd = f, bwd = b }
  end
end

return step_sim
