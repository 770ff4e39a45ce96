-- One rank of spec/dpfit_mpi_spec.lua: lunet.fit over a Pipeline whose
-- stages are the processes of lunet.distributed's world (DPFIT_REPLICAS=k:
-- k pipelines, hybrid, each reading its shard of the data), against lunet.fit
-- of the unwrapped model in this process on the same batches (k shards'
-- batches together). DPFIT_PHASE:
--   fit    GPipe + SGD (momentum) and 1F1B + Adam with accumulate = 2, 2 epochs
--          with a val loader: the history (losses, accuracies) and the
--          parameters as one process's to 1e-5; then loaders sharded wrongly
--          (hybrid: or not sharded over the pipelines) raise the named errors on every rank
--   save   2 epochs, a checkpoint after each step, stopped after 3 steps (mid
--          epoch 1), Adam with 2 param groups (weights, biases)
--   sigint 2 epochs, SIGINT raised on rank 0 alone after step 3: every rank
--          stops there (on_interrupt = 'return') and the checkpoint is written
--   resume resumes from DPFIT_CKPT and finishes: as one process's uninterrupted fit
--   one    (no mpirun) the unwrapped model resumes from DPFIT_CKPT: the same
-- Prints "rank R ok CASE" or "rank R FAIL CASE: why", then "rank R done".
package.path = package.path .. ';' .. (arg[0]:match('^(.*)dpfit/fit%.lua$') or 'spec/') .. '?.lua'
local lunet = require 'lunet'
local dist = require 'lunet.distributed'
local nn, optim, data = lunet.nn, lunet.optim, lunet.data
local info = dist.init{ timeout = 60 }
local W, R = info.world_size, info.rank
local REPL = tonumber(os.getenv('DPFIT_REPLICAS') or '1')
local phase, path = os.getenv('DPFIT_PHASE') or 'fit', os.getenv('DPFIT_CKPT')

local function say(fmt, ...) io.stdout:write(('rank %d ' .. fmt .. '\n'):format(R, ...)); io.stdout:flush() end

-- 7 atoms (the Sequential nested once: atoms are flattened)
local function model()
  lunet.manual_seed(5)
  return nn.Sequential { nn.Sequential { nn.Conv2d(3, 4, 3, { padding = 1 }) }, nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(4 * 4 * 4, 6), nn.Tanh(), nn.Linear(6, 5) }
end

lunet.manual_seed(11)
local N, NV = 44, 20   -- 6 batches of 8 (the last of 4); val: 2 of 16 (the last of 4)
local ds = data.TensorDataset(lunet.randn(N, 3, 8, 8), lunet.randint(1, 6, { N }))
local vds = data.TensorDataset(lunet.randn(NV, 3, 8, 8), lunet.randint(1, 6, { NV }))
-- the default sharding (after a Pipeline is made: its pipeline's shard), or
-- opts' (opts.ref: not sharded, for the one-process reference). A batch of 8
-- (val: 16) in all: each of k pipelines' is 8 / k, so that a checkpoint
-- resumes with any k.
local function loaders(opts)
  opts = opts or {}
  local k = opts.ref and 1 or REPL
  local n, rank = opts.num_replicas, opts.rank
  if opts.ref then n, rank = 1, 0 end
  return data.DataLoader(ds, { batch_size = 8 / k, shuffle = true, seed = opts.seed or 1, num_replicas = n, rank = rank }),
    data.DataLoader(vds, { batch_size = 16 / k, num_replicas = n, rank = rank })
end
local function new_opt(kind, params)
  if kind == 'adam' then return optim.Adam(params, { lr = 0.01 }) end
  if kind == 'adam2' then   -- (2 param groups: the weights, and the biases at another learning rate)
    local w, b = {}, {}
    for _, p in ipairs(params) do table.insert(p:dim() == 1 and b or w, p) end
    return optim.Adam({ { params = w }, { params = b, lr = 0.02 } }, { lr = 0.01 })
  end
  return optim.SGD(params, { lr = 0.05, momentum = 0.9 })
end

local function pipeline(o)
  local m = model()
  if R >= W / REPL then   -- (the other pipelines' copies start elsewhere: made the first's at construction)
    lunet.no_grad(function() for _, p in ipairs(m:parameters()) do p:add_(0.05 * R) end end)
  end
  return lunet.parallel.Pipeline(m, { group = dist.world(), replicas = REPL, chunks = o.chunks or 3,
    schedule = o.schedule, balance = 'params' })
end

-- the same options for both fits
local function fit_opts(o, opt, val)
  return { epochs = 2, optimizer = opt, val_loader = val, accumulate = o.accumulate, quiet = o.quiet ~= false,
    progress = false, checkpoint = o.checkpoint, checkpoint_every = o.every, resume = o.resume,
    max_steps = o.max_steps }
end

local function reference(o)
  local m = model()
  local l, v = loaders({ ref = true })
  local h = lunet.fit(m, l, fit_opts({ accumulate = o.accumulate }, new_opt(o.optim, m:parameters()), v))
  return m, h
end

local function rel(a, b) return math.abs(a - b) / math.max(math.abs(b), 1e-12) end

-- the histories and this rank's parameters (of its stage, or the whole model) against the reference's
local function compare(h, sd, ref, rh)
  if #h ~= #rh then return ('%d epochs in the history, one process %d'):format(#h, #rh) end
  for e = 1, #rh do
    for _, k in ipairs({ 'train_loss', 'train_acc', 'val_loss', 'val_acc' }) do
      if type(h[e][k]) ~= 'number' or rel(h[e][k], rh[e][k]) > 1e-5 then
        return ('epoch %d %s: %s, one process %.9g'):format(e, k, tostring(h[e][k]), rh[e][k])
      end
    end
    if h[e].step ~= rh[e].step then return ('epoch %d: step %s, one process %d'):format(e, tostring(h[e].step), rh[e].step) end
  end
  local want, n = ref:state_dict(), 0
  for k, t in pairs(sd) do
    n = n + 1
    local d = (t:to('cpu:0') - want[k]:to('cpu:0')):abs():max():item() / math.max(want[k]:abs():max():item(), 1e-12)
    if d > 1e-5 then return ('%s differs from one process by %g'):format(k, d) end
  end
  if n == 0 then return 'no parameters compared' end
end

local function case(name, fn)
  local ok, err = pcall(fn)
  if ok and err == nil then say('ok %s', name) else say('FAIL %s: %s', name, tostring(err)) end
end

local CASES = { { name = 'gpipe sgd', schedule = 'gpipe', optim = 'sgd' },
  { name = '1f1b adam accumulate 2', schedule = '1f1b', optim = 'adam', accumulate = 2, chunks = 2 } }
local CK = { name = 'checkpoint', schedule = '1f1b', optim = 'adam2' }

if phase == 'fit' then
  for _, o in ipairs(CASES) do
    case(o.name, function()
      local ref, rh = reference(o)
      local pipe = pipeline(o)
      local l, v = loaders()
      if l.num_replicas ~= REPL or v.rank ~= pipe.replica - 1 then
        return ('the loaders made after the pipeline are shards %d, %d of %d, %d'):format(l.rank, v.rank,
          l.num_replicas, v.num_replicas)
      end
      -- (hybrid: the backward passes that all-reduce the stage's gradients over its replicas)
      local Reducer = require 'lunet.parallel.Reducer'
      local prepare, syncs = Reducer.prepare, 0
      Reducer.prepare = function(self, ...)
        prepare(self, ...)
        if self.step and self.step.sync then syncs = syncs + 1 end
      end
      local ok, h = pcall(lunet.fit, pipe, l, fit_opts(o, new_opt(o.optim, pipe:parameters()), v))
      Reducer.prepare = prepare
      if not ok then error(h, 0) end
      -- each batch reduces once (accumulate = 2: each group of 2, and the epoch's last of 1)
      local want = REPL == 1 and 0 or 2 * math.ceil(#l / (o.accumulate or 1))
      if syncs ~= want then return ('%d reducing backward passes in 2 epochs, expected %d'):format(syncs, want) end
      return compare(h, pipe:state_dict(), ref, rh)
    end)
  end
  -- loaders that would give the ranks different batches
  local function refuses(name, opts, want)
    case(name, function()
      local pipe = pipeline({ schedule = 'gpipe' })
      local l, v = loaders(opts)
      local ok, err = pcall(lunet.fit, pipe, l, { epochs = 1, val_loader = v, quiet = true, progress = false })
      if ok then return 'fit did not fail' end
      if not tostring(err):find(want, 1, true) then return 'the error: ' .. tostring(err) end
    end)
  end
  refuses('a loader sharded over the world (as data parallel\'s)', { num_replicas = W, rank = R },
    ('fit: the loader of process rank 0 is sharded as rank 0 of %d, but the ranks of a pipeline across processes read '
      .. 'the same batches'):format(W))
  refuses('a seed of its own on the last rank', { seed = R == W - 1 and 2 or 1 },
    ('fit: the loader differs between the ranks of the pipeline: process rank 0 has seed = 1, process rank %d 2')
      :format(W - 1))
  if REPL > 1 then   -- (every pipeline would train on the same batches)
    refuses('a loader not sharded over the pipelines', { num_replicas = 1, rank = 0 },
      ('fit: the loader of process rank 0 is sharded as rank 0 of 1, but the ranks of a pipeline across processes read '
        .. 'the same batches (the first stage\'s rank the inputs, the last\'s the targets), each pipeline its shard: '
        .. 'give the DataLoader num_replicas = pipe.replicas (%d) and rank = pipe.replica - 1 (0 on process rank 0)')
        :format(REPL))
  end
elseif phase == 'save' then
  case('save', function()
    local pipe = pipeline(CK)
    local l, v = loaders()
    lunet.fit(pipe, l, fit_opts({ checkpoint = path, every = { steps = 1 }, max_steps = 3 },
      new_opt(CK.optim, pipe:parameters()), v))
  end)
elseif phase == 'sigint' then
  case('sigint', function()
    local ffi = require 'ffi'
    pcall(ffi.cdef, 'int raise(int sig);')
    local sched = { n = 0 }   -- (its step after each optimizer step: the third raises SIGINT on rank 0)
    function sched.step(self)
      self.n = self.n + 1
      if R == 0 and self.n == 3 then ffi.C.raise(2) end
    end
    function sched.state_dict(self) return { name = 'raise', n = self.n } end
    function sched.load_state_dict(self, st) self.n = st.n end
    local pipe = pipeline(CK)
    local l, v = loaders()
    local o = fit_opts({ checkpoint = path }, new_opt(CK.optim, pipe:parameters()), v)
    o.scheduler, o.scheduler_step, o.on_interrupt = sched, 'step', 'return'
    local h = lunet.fit(pipe, l, o)
    if #h ~= 0 or sched.n ~= 3 then return ('stopped after %d steps, %d epochs'):format(sched.n, #h) end
    if pipe:is_main() then
      local st = lunet.checkpoint.load(path)
      if st.step ~= 3 or st.running.steps ~= 3 then return 'the checkpoint is at step ' .. tostring(st.step) end
    end
  end)
elseif phase == 'resume' then
  case('resume', function()
    local ref, rh = reference(CK)
    local pipe = pipeline(CK)
    local l, v = loaders()
    local h = lunet.fit(pipe, l, fit_opts({ checkpoint = path, resume = true, quiet = false },
      new_opt(CK.optim, pipe:parameters()), v))
    return compare(h, pipe:state_dict(), ref, rh)
  end)
elseif phase == 'one' then
  case('resume in one process', function()
    local ref, rh = reference(CK)
    local m = model()
    local l, v = loaders()
    local h = lunet.fit(m, l, fit_opts({ checkpoint = path, resume = true }, new_opt(CK.optim, m:parameters()), v))
    return compare(h, m:state_dict(), ref, rh)
  end)
end
say('done')
dist.finalize()
