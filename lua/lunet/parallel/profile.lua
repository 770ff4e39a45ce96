-- lunet.parallel.profile: what the planner and the pipeline's balancer know
-- of a model and the links, measured on the devices.
--
--   profile.atoms(atoms, sample_input, device[, {runs = 3, sizes = {B, B/4}}])
--     (atoms: modules, or lunet.parallel.atoms.of(model)'s entries)
--     --> list, per atom {fwd = s, bwd = s, fwd0 = s, bwd0 = s, act_bytes = n,
--         param_bytes = n, out_bytes = n, out_shape = {...}, batch = B, name = '...',
--         w_share = the weights' gradient's share of bwd (a zero-bubble W)}
--   profile.link(devA, devB[, {sizes = {bytes...}, runs = 5, devices = {all the plan's}}])
--     --> {copy = {alpha = s, beta = s/byte}, allreduce = {alpha, beta}, overlap = 0..1,
--          pipeline = {fixed = s, action = {gpipe = s, ['1f1b'] = s, zb = s},
--                      replica = s, replica_micro = s, hybrid = {fixed, action} (4 devices or more)}}
--
-- atoms: the modules a pipeline may cut between (lunet.parallel.atoms), run
-- one after another. Each atom's forward and backward are timed alone
-- (waiting for the device before and after), after one warm-up pass; the
-- median of `runs` passes. The profile is taken at the sample's batch B and
-- at B/4, and fwd0/bwd0 are the fixed part of a call (time = fixed + per
-- sample * b): micro-batches of a pipeline are smaller than the sample.
-- act_bytes is what the allocator holds after the atom's forward that it
-- did not before (the output and what backward keeps), at batch B;
-- temp_bytes the most it held above that during the atom's forward or
-- backward (0 where the build cannot restart the allocator's peak).
-- Waiting for the device after each atom costs a wake-up each: the atoms'
-- times are scaled down so that they add up to the time of the whole chain
-- run without waits and fused as the model runs (list.scale, at most 1); list.whole = {{b, seconds}, ...}
-- times that chain at the batch and its halves (B, B/2, ... at most 7 sizes):
-- the cost model takes a micro-batch's total from them and only the shares
-- of the atoms from the per-atom times. list.min_batch: the smallest batch
-- the chain accepts, where a smaller one failed (nil: down to 1). list.host: the host's time to
-- queue one forward and backward of the whole chain (the smaller batch's):
-- on a device with its own worker the host may be what limits a step.
-- list.host_by_batch = {{b, seconds}, ...}: the same at each batch of list.whole.
-- list.update: the optimizer's step over all the parameters (opts.optimizer:
-- 'adam' default, 'adamw', 'momentum', 'sgd').
-- churn (churn0 its fixed part): the bytes an atom's forward and backward
-- allocate and leave to Lua's collector (everything but workspaces: a
-- tensor is freed when its handle is collected), scaled as the times are to
-- add up to the whole chain's; list.gc: the seconds of
-- one full collection (the heap's traversal), which a step pays each time
-- its churn reaches the collector's trigger (cost.lua).
-- Nothing in the model changes: gradients are dropped, parameters and buffers
-- (BatchNorm running statistics) restored.
-- (together, link, fit and pipeline_overhead live in profile_devices.lua.)
-- link: the median time of a copy from devA to devB and of a 2-device
-- all-reduce at a few sizes (timed in rounds over the sizes), fitted to
-- alpha + beta * S (Theil-Sen: a size that other work slowed is left out); the
-- all-reduce's figures are the ring's (2(n-1)/n * S * beta + 2(n-1) * alpha
-- at n = 2). overlap: the share of backward that gradient traffic can hide
-- behind: 1 on devices with their own cores or a GPU, 0 for virtual CPU
-- devices that together use every core (the communication then takes the
-- cores that compute would).
local lunet = require 'lunet'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local C = core.C

local profile = {}

-- seconds of one full collection of this process's heap as it is now (the
-- least of 5, after one that frees what garbage there is: a fixed cost, the
-- traversal of what is live, which a descheduled thread only lengthens)
function profile.collection()
  collectgarbage()
  local t = math.huge
  for _ = 1, 5 do
    local t0 = lunet.clock()
    collectgarbage()
    t = math.min(t, lunet.clock() - t0)
  end
  return t
end
local time_update
-- (the devices' profile, profile_devices.lua, repeats its short runs alike)
local devices = require 'lunet.parallel.profile_devices'
local WHOLE_RUNS, WHOLE_SECONDS = devices.WHOLE_RUNS, devices.WHOLE_SECONDS
local WARM_RUNS, WARM_SECONDS = 120, 0.5   -- the whole chain's warm-up (the JIT's)
-- a batch timed at more than this times what half of it takes is measured again
local SUPERLINEAR = 1.1

local function fail(fn, msg, lvl) error('profile.' .. fn .. ': ' .. msg, (lvl or 1) + 1) end

local median, quantile = require('lunet.util').median, require('lunet.util').quantile

local function bytes_of(t) return t:numel() * t:element_size() end

-- the allocator's peak restarted (where this build has it), and read
local reset_peak = lunet.reset_peak_memory_stats
local function peak(dev) return reset_peak and lunet.max_memory_allocated(dev) or 0 end

-- one pass at batch x: per atom forward, backward seconds, the bytes kept
-- after forward and the transient bytes above what was allocated before
-- (workspaces, gradients in flight: from the allocator's peak, where
-- lunet.reset_peak_memory_stats exists); then the same chain run whole, with
-- no wait between atoms, timed
-- f(...) with Lua's automatic collector stopped (and as it was after, also on an error)
local function uncollected(f, ...)
  local was = collectgarbage('isrunning')
  collectgarbage('stop')
  local res = { pcall(f, ...) }
  if was then collectgarbage('restart') end
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, table.maxn(res))
end

-- (the parameters whose gradients a zero-bubble W computes: the backward's
-- share that is theirs, w_share, timed as B then W)
local function trained(a)
  local ps = {}
  for _, p in ipairs(a:parameters()) do if p.requires_grad then ps[#ps + 1] = p end end
  return ps
end

local function pass(atoms, chain, x, dev)
  local n = #atoms
  local clock, sync = lunet.clock, lunet.synchronize
  local backward = require('lunet.autograd').backward
  local fwd, bwd, kept, trans, ys, xs, churn, wsh = {}, {}, {}, {}, {}, {}, {}, {}
  local x0 = x
  sync(dev)
  -- (what an atom's forward and backward allocate stays allocated until
  -- Lua collects it: its churn, rescaled below to the whole chain's, which
  -- is measured with the collector stopped)
  do
    for i = 1, n do
      xs[i] = x
      local before = lunet.memory_allocated(dev)
      if reset_peak then reset_peak(dev) end
      local t0 = clock()
      local y = atoms[i](x)
      if not lunet.is_tensor(y) then fail('atoms', ('atom %d (%s) returned %s, not a tensor'):format(i, atoms[i].__name, typename(y)), 3) end
      sync(dev)
      fwd[i] = clock() - t0
      kept[i] = lunet.memory_allocated(dev) - before
      trans[i] = math.max(0, peak(dev) - before - kept[i])
      ys[i] = y
      x = y:detach():requires_grad_(true)
    end
    local g = lunet.ones(ys[n]:size(), { dtype = ys[n].dtype, device = dev }):div(ys[n]:numel())
    for i = n, 1, -1 do
      local y = ys[i]
      sync(dev)
      local before = lunet.memory_allocated(dev)
      if reset_peak then reset_peak(dev) end
      local t0 = clock()
      local ps = trained(atoms[i])
      local tb
      if y.requires_grad and #ps > 0 then
        local later = backward({ y }, { g }, { defer = ps })
        sync(dev)
        tb = clock() - t0
        later:run()
      elseif y.requires_grad then y:backward(g) end
      sync(dev)
      bwd[i] = clock() - t0
      wsh[i] = tb and bwd[i] > 0 and (bwd[i] - tb) / bwd[i] or 0
      trans[i] = math.max(trans[i], peak(dev) - before)
      churn[i] = math.max(0, kept[i] + lunet.memory_allocated(dev) - before)
      g = xs[i].grad
      if i > 1 and g == nil then g = lunet.zeros(xs[i]:size(), { dtype = xs[i].dtype, device = dev }) end
    end
  end
  ys, xs = nil, nil
  -- a collection's fixed cost: the heap's traversal (a second collection:
  -- the first also frees this pass's garbage, many more handles than a
  -- micro-batch leaves between two collections in training)
  -- (the least of 3: a fixed cost, which a descheduled thread only lengthens)
  local t_gc = profile.collection()
  -- whole: the atoms' times above include a wait for the device each
  -- (the chain's churn too: the atoms' above counts each boundary's copies)
  local whole, host, whole_churn = uncollected(function()
    local a0 = lunet.memory_allocated(dev)
    local t0 = clock()
    local y = chain(x0)
    if y.requires_grad then y:sum():backward() end
    local queued = clock() - t0   -- (the host's share: queuing the ops; all of it on an inline device)
    sync(dev)
    return clock() - t0, queued, math.max(0, lunet.memory_allocated(dev) - a0)
  end)
  local sum = 0
  for i = 1, n do sum = sum + churn[i] end
  for i = 1, n do churn[i] = sum > 0 and churn[i] * whole_churn / sum or 0 end
  return fwd, bwd, kept, trans, whole, host, churn, t_gc, wsh
end

-- the optimizer's step over every atom's parameters (their gradients from
-- the last pass), the parameters put back afterwards
local UPDATERS = { adam = 'Adam', adamw = 'AdamW', momentum = 'SGD', sgd = 'SGD' }
function time_update(atoms, dev, kind, runs)
  local params = {}
  for _, a in ipairs(atoms) do
    for _, p in ipairs(a:parameters()) do
      if p.requires_grad and p.grad ~= nil then params[#params + 1] = p end
    end
  end
  if #params == 0 then return 0 end
  local saved = {}
  for k, p in ipairs(params) do saved[k] = p:detach():clone() end
  local optim = require('lunet.optim')
  local opt = optim[UPDATERS[kind] or 'Adam'](params, { lr = 1e-3, momentum = kind == 'momentum' and 0.9 or nil })
  local ts = {}
  for r = -20, runs do   -- (warm-up: the JIT compiles the optimizer's loop)
    lunet.synchronize(dev)
    local t0 = lunet.clock()
    opt:step()
    lunet.synchronize(dev)
    if r > 0 then ts[r] = lunet.clock() - t0 end
  end
  lunet.no_grad(function() for k, p in ipairs(params) do p:copy_(saved[k]) end end)
  return median(ts)
end

function profile.atoms(atoms, sample, device, opts)
  opts = opts or {}
  if not is_table(atoms) or #atoms == 0 then fail('atoms', 'expected a non-empty list of modules', 2) end
  -- (modules, or lunet.parallel.atoms' entries {module =, name =})
  local names, list = {}, {}
  for i, a in ipairs(atoms) do
    if is_table(a) and is_table(a.module) and not a._params then names[i], a = a.name, a.module end
    if not is_table(a) or not a._params then fail('atoms', ('atom %d is not an nn.Module (%s)'):format(i, typename(a)), 2) end
    list[i] = a
  end
  atoms = list
  -- the chain run whole as the model runs it: in a container, which fuses
  -- the runs of layers that have a faster equivalent (lunet.nn.fuse: a
  -- ReLU before a max pool runs after it, on a quarter of the elements), as
  -- a pipeline's stage does (Stage.lua); run one by one, they took more time
  -- and left more garbage than training does
  local chain = require('lunet.nn.Sequential')()
  for _, a in ipairs(atoms) do chain:add(a) end   -- (an unregistered container)
  if not lunet.is_tensor(sample) or sample:dim() == 0 then fail('atoms', 'sample_input must be a tensor with a batch dimension', 2) end
  local ok, id = pcall(core.device_id, 'profile.atoms', device or sample.device)
  if not ok then error(id, 0) end   -- (device_id named the caller's line already)
  local dev = core.device_name(id)
  local runs = devices.check_runs('profile.atoms', opts.runs) or 3
  local B = sample:size(1)
  -- the buffers (running statistics) as they were, put back at the end
  local saved = {}
  for i, a in ipairs(atoms) do
    a:to(dev)
    saved[i] = {}
    for k, b in ipairs(a:buffers()) do saved[i][k] = b:clone() end
  end
  local res, update, shapes, sizes = {}, 0, {}, nil
  local function measure()
    sizes = opts.sizes or (B >= 4 and { B, math.floor(B / 4) } or { B })
    lunet.no_grad(function()
      local y = sample:narrow(1, 1, B):to(dev)
      for i = 1, #atoms do
        y = atoms[i](y)
        shapes[i] = { shape = y:size(), bytes = bytes_of(y) }
      end
    end)
    for s, b in ipairs(sizes) do
      local x = sample:narrow(1, 1, b):to(dev):contiguous()
      pass(atoms, chain, x, dev)   -- warm-up: caches, plans, the allocator's blocks
      local F, Bw, K, Tr, W, H, Ch, G, Ws = {}, {}, nil, nil, {}, {}, nil, {}, {}
      for r = 1, runs do
        local f, bw, kept, trans, whole, host, churn, t_gc, wsh = pass(atoms, chain, x, dev)
        H[r], Ch, G[r] = host, churn, t_gc
        for i = 1, #atoms do
          F[i] = F[i] or {}; Bw[i] = Bw[i] or {}; Ws[i] = Ws[i] or {}
          F[i][r], Bw[i][r], Ws[i][r] = f[i], bw[i], wsh[i]
        end
        K, Tr, W[r] = kept, trans, whole
      end
      local r = { b = b, fwd = {}, bwd = {}, wsh = {}, kept = K, trans = Tr, churn = Ch, gc = math.min(unpack(G)) }
      local sum = 0
      for i = 1, #atoms do
        r.fwd[i], r.bwd[i], r.wsh[i] = median(F[i]), median(Bw[i]), median(Ws[i])
        sum = sum + r.fwd[i] + r.bwd[i]
      end
      -- the waits between atoms out: each atom's times scaled so that they add up to the whole chain's
      local scale = math.min(1, median(W) / sum)
      for i = 1, #atoms do r.fwd[i], r.bwd[i] = r.fwd[i] * scale, r.bwd[i] * scale end
      r.scale, r.host = scale, median(H)
      res[s] = r
    end
    -- the whole chain (forward and backward, no waits between atoms) at the
    -- batch and its halves down to 1: micro-batches' times measured, not extrapolated
    local whole, b = {}, B
    local host_at = {}   -- the host's times to queue the chain, per batch
    local function run_whole(x)
      local t0 = lunet.clock()
      local y = chain(x)
      if y.requires_grad then y:sum():backward() end
      return lunet.clock() - t0
    end
    -- (the per-atom passes, the collector stopped, left the device's block
    -- cache holding every block they took: handed back, so that the chain's
    -- allocations do not search through them)
    for _, a in ipairs(atoms) do for _, q in ipairs(a:parameters()) do q.grad = nil end end
    require('lunet.tensor').collect_rearm()
    lunet.empty_cache(dev)
    -- (the JIT compiles the chain's Lua after some 50 calls: until then a
    -- small model's queueing runs interpreted, several times slower, and the
    -- times would be an untrained loop's)
    -- (at a few samples, where a run is short: the JIT counts calls, not
    -- samples, and the traces it compiles serve every batch; compiling them
    -- inside the timed runs made some sizes' times 2-4x a plain loop's)
    do
      local x = sample:narrow(1, 1, math.min(B, 4)):to(dev):contiguous()
      local t0, k = lunet.clock(), 0
      local ok = pcall(run_whole, x)   -- (a batch too small for a layer: at B)
      if not ok then x = sample:narrow(1, 1, B):to(dev):contiguous() end
      repeat
        run_whole(x)
        k = k + 1
      until k >= WARM_RUNS or (k >= 3 and lunet.clock() - t0 > WARM_SECONDS)
      lunet.synchronize(dev)
    end
    -- the median time of the chain at batch b; nil when a layer refuses so
    -- few samples (BatchNorm1d in training: 1), which sets the smallest micro-batch
    local function time_size(b)
      local x = sample:narrow(1, 1, b):to(dev):contiguous()
      -- (the garbage of the size before is not this one's; the collector's
      -- triggers re-armed from what is live: the per-atom passes, which hold
      -- every atom's tensors, left them at twice that peak, and the chain's
      -- garbage then piled up uncollected, each run slower than the last)
      require('lunet.tensor').collect_rearm()
      local ts, spent, r = {}, 0, -1
      -- (runs at least; small batches more, up to WHOLE_RUNS or WHOLE_SECONDS:
      -- the micro-batches' times come from these, and one run is noisy)
      while r < runs or (spent < WHOLE_SECONDS and r < WHOLE_RUNS) do
        r = r + 1
        lunet.synchronize(dev)
        local t0 = lunet.clock()
        local ok, e = pcall(run_whole, x)
        if ok and r > 0 then
          host_at[b] = host_at[b] or {}
          host_at[b][r] = e
        end
        if not ok then
          -- (running out of memory does not set the smallest batch)
          if not tostring(e):match('out of memory') then res.min_batch = b + 1 end
          return nil
        end
        lunet.synchronize(dev)
        if r > 0 then ts[r] = lunet.clock() - t0; spent = spent + ts[r] end
      end
      return median(ts)
    end
    while b >= 1 do
      local t = time_size(b)
      if not t then break end
      whole[#whole + 1] = { b, t }
      if b == 1 or #whole >= 7 then break end
      b = math.max(1, math.floor(b / 2))
    end
    -- and a second pass over the sizes, the smaller of the two medians kept:
    -- a process's first tenths of a second on a size were at times far
    -- slower than its later ones (bench/RESULTS.md)
    for k = 1, #whole do
      local t = time_size(whole[k][1])
      if t then whole[k][2] = math.min(whole[k][2], t) end
    end
    -- a batch that costs more than twice half of it: a working set past the
    -- caches does, and so does a size whose runs met other work on the
    -- cores. Measured again (at most twice): what stays is the batch's cost,
    -- the least of the measures kept. (Holding every size to twice its half
    -- hid the first kind: a batch past the caches was predicted too fast.)
    for k = #whole - 1, 1, -1 do
      for _ = 1, 2 do
        local twice = whole[k + 1][2] * whole[k][1] / whole[k + 1][1]
        if whole[k][2] <= SUPERLINEAR * twice then break end
        local t = time_size(whole[k][1])
        if not t then break end
        whole[k][2] = math.min(whole[k][2], t)
      end
    end
    -- and no less than one of half its size
    for k = 2, #whole do whole[k][2] = math.min(whole[k][2], whole[k - 1][2]) end
    res.whole = whole
    res.host_at = host_at
    update = time_update(atoms, dev, opts.optimizer or 'adam', runs)
  end
  -- a device too small for the sample batch (a memory limit): half the batch
  -- until it fits (the cost model scales to any batch)
  local result, err
  while true do
    result, err = pcall(measure)
    if result or opts.sizes or B == 1 or not tostring(err):match('out of memory') then break end
    for _, a in ipairs(atoms) do for _, p in ipairs(a:parameters()) do p.grad = nil end end
    res, shapes, B = {}, {}, math.floor(B / 2)
    collectgarbage(); collectgarbage()
  end
  for i, a in ipairs(atoms) do
    for _, p in ipairs(a:parameters()) do p.grad = nil end
    lunet.no_grad(function()
      for k, b in ipairs(a:buffers()) do b:copy_(saved[i][k]) end
    end)
  end
  -- (the runs at the sample's batch left the collector's triggers at their peak)
  require('lunet.tensor').collect_rearm()
  if not result then error(err, 0) end   -- (located where it was raised)
  local out = {}
  local r1, r2 = res[1], res[2]
  for i, a in ipairs(atoms) do
    local pb = 0
    for _, p in ipairs(a:parameters()) do pb = pb + bytes_of(p) end
    local e = { name = names[i] and (names[i] .. ' ' .. a.__name) or a.__name, batch = r1.b, fwd = r1.fwd[i],
      bwd = r1.bwd[i], fwd0 = 0, bwd0 = 0, act_bytes = math.max(0, r1.kept[i]), temp_bytes = r1.trans[i],
      param_bytes = pb, out_bytes = shapes[i].bytes, out_shape = shapes[i].shape, churn = r1.churn[i], churn0 = 0,
      -- (at the smaller batch: micro-batches are smaller than the sample)
      w_share = (r2 or r1).wsh[i] }
    if r2 and r2.b < r1.b then
      -- the fixed part of a call: time = fixed + per sample * b through both sizes, within [0, time at B]
      for _, k in ipairs({ 'fwd', 'bwd' }) do
        local slope = (r1[k][i] - r2[k][i]) / (r1.b - r2.b)
        e[k .. '0'] = math.min(math.max(r1[k][i] - slope * r1.b, 0), r1[k][i])
      end
      -- transient bytes the same way (a workspace need not shrink with the batch)
      local slope = (r1.trans[i] - r2.trans[i]) / (r1.b - r2.b)
      e.temp0 = math.min(math.max(r1.trans[i] - slope * r1.b, 0), r1.trans[i])
      -- and the churn (the weights' fresh gradients do not shrink with it)
      slope = (r1.churn[i] - r2.churn[i]) / (r1.b - r2.b)
      e.churn0 = math.min(math.max(r1.churn[i] - slope * r1.b, 0), r1.churn[i])
    end
    out[i] = e
  end
  out.device, out.in_bytes, out.update, out.scale = dev, bytes_of(sample), update, r1.scale
  out.whole, out.min_batch = res.whole, res.min_batch
  -- a collection's fixed cost (seconds; the smaller batch's garbage)
  out.gc = math.min(r1.gc, res[#res].gc)
  -- the host's time to queue a forward and backward of the chain (per call,
  -- whatever the batch): the lower quartile of the later half of the
  -- whole-chain runs at the smaller profiled batch, after the JIT has
  -- compiled the chain's traces (the first passes queue several times
  -- slower). (Queueing is the same work each time, and what disturbs it,
  -- the host thread descheduled, only adds: the median moved with the
  -- machine's load from one profile to the next.)
  local function host_figure(hs)
    if not hs or #hs == 0 then return nil end
    local late = {}
    for k = math.floor(#hs / 2) + 1, #hs do late[#late + 1] = hs[k] end
    return quantile(late, 0.25)
  end
  out.host = host_figure(res.host_at and res.host_at[res[#res].b]) or res[#res].host
  -- and the same figure at each batch the chain was timed at ({b, seconds},
  -- as whole): what the host's queueing of a micro-batch of b takes, the
  -- host also waiting on the device within the larger ones (kept for the
  -- planner's records, bench/plan_record.lua; the cost model takes list.host)
  out.host_by_batch = {}
  for _, e in ipairs(out.whole or {}) do
    local h = host_figure(res.host_at and res.host_at[e[1]])
    if h then out.host_by_batch[#out.host_by_batch + 1] = { e[1], h } end
  end
  return out
end

-- the devices together and the links (profile_devices.lua)
profile.together, profile.link, profile.fit = devices.together, devices.link, devices.fit
profile.check_runs = devices.check_runs
profile.pipeline_overhead = devices.pipeline_overhead

return profile
