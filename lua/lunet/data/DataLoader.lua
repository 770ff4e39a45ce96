-- lunet.data.DataLoader(ds, opts): batches of a dataset, as in PyTorch.
--
--   local loader = data.DataLoader(ds, {batch_size = 64, shuffle = true, seed = 1,
--                                       drop_last = false, workers = 2, transform = tf})
--   #loader                               -- batches per epoch
--   for x, y in loader:iter() do ... end  -- one epoch; the next iter() is the next epoch
--   for x, y in loader do ... end         -- the same (PyTorch's habit)
--   local st = loader:state_dict()        -- {epoch, position, seed}: resume mid-epoch
--   loader2:load_state_dict(st)           -- its next iter() continues where st was taken
--
-- Options (batch_size and shuffle may also come by position, as in PyTorch:
-- DataLoader(ds, 64, true)): batch_size (1), shuffle (false), seed (default: drawn from lunet's
-- generator), drop_last (false), workers (0), prefetch (batches assembled
-- ahead, default 2 * workers), transform (a data.transforms transform, a list
-- of them, or a Lua function of one sample; default: the dataset's),
-- copy (false), num_replicas and rank (0-based) to shard each epoch over
-- processes (see below), group (a lunet.comm Communicator holding one rank
-- here: its size and this process's rank). PyTorch's num_workers is accepted for workers; an unknown
-- option is an error.
-- sampler (a data.RandomSampler, SequentialSampler, SubsetRandomSampler,
-- WeightedRandomSampler, a list of indices, or your own: see Sampler.lua) picks
-- each epoch's indices instead of shuffle (not with shuffle = true); it draws
-- them from the loader's (seed, epoch) unless it has its own seed, and
-- num_replicas shards its indices. batch_sampler (a data.BatchSampler or your
-- own) gives whole batches (not with batch_size, shuffle, sampler, drop_last
-- nor num_replicas > 1). collate_fn(samples) makes a batch of a dataset
-- batched in Lua from the list of its samples ({x, y} each); the loop gets
-- what it returns (data.default_collate is the stacking done without it).
--
-- Tensor datasets (TensorDataset, FashionMNIST, MNIST, CIFAR10, Synthetic and
-- Subsets of them) are batched in C: `workers` threads assemble batches ahead
-- of the loop into a ring of pre-allocated buffers, with the transforms
-- applied on the way. Those batches are VIEWS of the ring: a batch stays
-- valid until the next-but-one batch is taken (batch k is overwritten when
-- batch k+2 is returned); keep one longer with :clone(), or pass copy = true.
-- Work already queued on a (virtual) CPU device that reads a batch is waited
-- for before its buffer is refilled.
-- ImageFolder / DatasetFolder (and Subsets of them) with the default loader,
-- no target_transform and a data.transforms transform (or none) are batched
-- in C too: each worker reads, decodes and transforms the files of its
-- batch, each at its own size (a batch's size is its first sample's; its
-- buffer is remade when a batch's size differs). A file that cannot be read
-- or decoded is an error from that batch's step naming the file; the next
-- step goes on with the next batch.
-- Other datasets (Lua classes with ds:get(i)) are batched in Lua, on the
-- calling thread, into fresh tensors (workers is ignored for them).
--
-- Sharding (multi-process data parallel, as torch's DistributedSampler):
-- rank r of num_replicas W takes samples r, r + W, r + 2W, ... of each
-- epoch's order, padded by wrapping around to ceil(#ds / W) samples, so every
-- rank has as many batches; batch b of the W ranks together is samples
-- b*bs*W .. (b+1)*bs*W - 1 of the order. Every rank must use the same seed.
-- Once lunet.distributed is initialised (dist.init() before the loader is
-- made) num_replicas and rank default to its world size and this process's rank; num_replicas = 1 opts
-- out. After a Pipeline across processes is made, to its pipelines' (the
-- ranks of one read the same batches): pipe.replicas, pipe.replica - 1. A state_dict taken with W ranks loads with another count: the samples
-- the W ranks had consumed are skipped (whole batches of the new count).
--
-- The order of an epoch is a permutation keyed by (seed, epoch) and random
-- transforms by (seed, epoch, sample index), so batches are the same for any
-- worker count, and a restored state gives the same remaining batches.
local ffi = require 'ffi'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local Dataset = require 'lunet.data.Dataset'
local TensorDataset = require 'lunet.data.TensorDataset'
local subset = require 'lunet.data.Subset'
local transforms = require 'lunet.data.transforms'
local collate = require 'lunet.data.collate'
local options = require 'lunet.options'
local Sampler = require 'lunet.data.Sampler'
local BatchSampler = require 'lunet.data.BatchSampler'
local C = core.C

local Subset, len = subset.Subset, subset.len
local DataLoader = Dataset.class('DataLoader')

local function int_opt(name, v, default, min, max)
  if v == nil then return default end
  if type(v) ~= 'number' or v % 1 ~= 0 or v < min then
    error(('DataLoader: %s must be an integer >= %d, got %s'):format(name, min, tostring(v)), 4)
  end
  if max and v > max then error(('DataLoader: %s must be in %d..%d, got %s'):format(name, min, max, tostring(v)), 4) end
  return v
end

-- The tensor dataset under a chain of Subsets, and the 0-based rows of it
-- that the n samples of ds are (nil: the identity).
local function resolve(ds, n)
  local base, map = ds, nil
  while Dataset.is_a(base, Subset) do
    local m = base.map
    if map == nil then
      map = ffi.new('int64_t[?]', math.max(n, 1))
      ffi.copy(map, m, n * 8)
    else
      for k = 0, n - 1 do map[k] = m[map[k]] end
    end
    base = base.dataset
  end
  return base, map
end

local OPTS = { batch_size = 'number', shuffle = 'boolean', seed = 'number', drop_last = 'boolean',
  workers = 'number', prefetch = 'number', transform = 'table|function', copy = 'boolean',
  num_replicas = 'number', rank = 'number', group = 'table', sampler = true, batch_sampler = true,
  collate_fn = 'function' }

-- torch's exclusions between sampler, batch_sampler and the batching options
local function check_samplers(opts)
  if opts.batch_sampler ~= nil then
    if (opts.batch_size ~= nil and opts.batch_size ~= 1) or opts.shuffle or opts.sampler ~= nil or opts.drop_last then
      error('DataLoader: batch_sampler is mutually exclusive with batch_size, shuffle, sampler and drop_last', 4)
    end
  elseif opts.sampler ~= nil and opts.shuffle then
    error('DataLoader: sampler is mutually exclusive with shuffle', 4)
  end
end

-- num_replicas and rank by default: the group's, else lunet.distributed's
-- world when it is initialised (package.loaded: a loader never starts MPI)
local function shard_defaults(opts)
  local g = opts.group
  if g then
    if type(g.local_size) ~= 'function' or g:local_size() ~= 1 then
      error('DataLoader: group must be a lunet.comm Communicator holding one rank in this process', 4)
    end
    return g:size(), g:ranks()[1] - 1
  end
  local dist = package.loaded['lunet.distributed']
  if opts.num_replicas == nil and opts.rank == nil and is_table(dist) and dist.is_initialized() then
    return dist.data_shard()   -- (the world's, or a Pipeline across processes': its pipelines')
  end
end
local ALIASES = { num_workers = 'workers' }

local POSITIONAL = { 'batch_size', 'shuffle' }   -- PyTorch's DataLoader(ds, 64, true)

function DataLoader:__init(ds, ...)
  if type(ds) ~= 'userdata' and not is_table(ds) then
    error('DataLoader: expected a dataset, got ' .. typename(ds), 3)
  end
  local opts = options.check('DataLoader', options.positional('DataLoader', POSITIONAL, ...), OPTS, ALIASES) or {}
  check_samplers(opts)
  self.dataset = ds
  self.size = len(ds)   -- the dataset's samples; total: those of an epoch
  self.total = self.size
  if opts.sampler ~= nil then
    self.sampler = Sampler.wrap('DataLoader', opts.sampler)
    self.total = len(self.sampler)
  elseif opts.batch_sampler ~= nil then
    self.batch_sampler = BatchSampler.wrap('DataLoader', opts.batch_sampler)
  end
  getmetatable(self).__call = DataLoader.__call
  -- sharding for multi-process data parallel (as torch's DistributedSampler):
  -- rank r of W takes samples r, r+W, r+2W, ... of each epoch's order, padded
  -- by wrapping around to ceil(total / W) samples. Every rank must use the same seed.
  local W, R = shard_defaults(opts)
  self.num_replicas = int_opt('num_replicas', opts.num_replicas, W or 1, 1)
  self.rank = int_opt('rank', opts.rank, self.num_replicas == 1 and 0 or R or 0, 0)
  if self.rank >= self.num_replicas then
    error(('DataLoader: rank %d must be below num_replicas %d'):format(self.rank, self.num_replicas), 3)
  end
  if self.batch_sampler and self.num_replicas > 1 then
    error('DataLoader: batch_sampler cannot be sharded (num_replicas > 1): shard in the batch sampler', 3)
  end
  self.n = self.num_replicas == 1 and self.total or math.ceil(self.total / self.num_replicas)
  self.batch_size = int_opt('batch_size', opts.batch_size, 1, 1)
  self.workers = int_opt('workers', opts.workers, 0, 0)
  self.shuffle = opts.shuffle and true or false
  self.drop_last = opts.drop_last and true or false
  self.copy = opts.copy and true or false
  self.seed = opts.seed ~= nil and options.seed('DataLoader', 'seed', opts.seed) or nil
  if self.seed == nil then self.seed = require('lunet').randint(0, 2 ^ 31 - 1, { 1 }):item() end
  self.epoch, self.position = 0, 0
  self.order = ffi.new('int64_t[?]', math.max(self.n, 1))
  if self.num_replicas > 1 then self.full = ffi.new('int64_t[?]', math.max(self.total, 1)) end
  self.rows = ffi.new('int64_t[1]')
  local base, map = resolve(ds, self.size)
  self.map, self.source = map, base   -- samples are rows `order` of `source`
  -- the C path serves tensor datasets whose samples are their rows (a
  -- subclass that overrides get goes through get)
  local fast = Dataset.is_a(base, TensorDataset) and base.get == TensorDataset.get
  local transform = opts.transform
  if transform == nil and fast then transform = base.transform end
  self.transform = transform
  self.collate_fn = opts.collate_fn
  if self.collate_fn and fast then
    error(('DataLoader: collate_fn needs a dataset batched in Lua; %s is batched in C (its batches are ' ..
      'tensors already: change them in the loop, or wrap the dataset in a Lua class)'):format(tostring(base.__name)), 3)
  end
  if self.collate_fn and transform ~= nil and type(transform) ~= 'function' then
    error('DataLoader: with collate_fn, transform must be a Lua function of one sample', 3)
  end
  local bs = self.batch_sampler
  local folder_tf = nil
  if not fast and base.get_transformed then
    folder_tf = transform == nil and base.transform or transform
    if is_table(folder_tf) and not transforms.is_transform(folder_tf) then folder_tf = transforms.Compose(folder_tf) end
    if folder_tf ~= nil and type(folder_tf) ~= 'function' then transforms.compile(folder_tf, 'uint8') end
    self.folder_tf, self.transform = folder_tf, nil
    -- (ImageFolder: files decoded and transformed by the C workers when they can be)
    self.files = not self.collate_fn and base.c_files ~= nil and base:c_files(folder_tf) or false
  end
  if fast or self.files then
    local tf = nil
    if fast and (base.image or transform ~= nil) then tf = transforms.compile(transform, base.x.dtype) end
    if self.files and folder_tf ~= nil then tf = transforms.compile(folder_tf, 'uint8') end
    -- (batches assembled ahead, a slot each: 1e9 of them took all the memory and the process was killed)
    local prefetch = int_opt('prefetch', opts.prefetch, 0, 0, 1024)
    -- (the slots hold a batch's rows: no batch has more than the samples, so
    -- a batch_size past them does not allocate slots of batch_size rows)
    local rows = math.min(self.batch_size, math.max(self.n, 1))
    if bs then
      if type(bs.batch_size) ~= 'number' or bs.batch_size % 1 ~= 0 or bs.batch_size < 1 then
        error('DataLoader: a batch_sampler for a dataset batched in C needs a batch_size field (its largest batch)', 3)
      end
      rows = math.min(bs.batch_size, bs.num_samples or bs.batch_size)
    end
    self.slot_rows = math.max(rows, 1)
    local h
    if self.files then
      local n, samples = #base.samples, base.samples
      local paths, labels = ffi.new('const char *[?]', n), ffi.new('int64_t[?]', n)
      for i = 1, n do paths[i - 1], labels[i - 1] = samples[i][1], samples[i][2] end
      h = C.ln_loader_new_files(n, paths, labels, C.LN_IMAGE_RGB, self.slot_rows, tf, self.workers, prefetch)
    else
      h = C.ln_loader_new(base.x.p, base.y and base.y.p or nil, self.slot_rows, tf, self.workers, prefetch)
    end
    if h == nil then core.raise() end
    self.handle = ffi.gc(h, C.ln_loader_free)
    self.slots_x, self.slots_y, self.short = {}, {}, {}
    for s = 0, C.ln_loader_nslots(h) - 1 do
      -- (files: a slot's input tensor is made by its first batch, and remade with the size)
      if not self.files then self.slots_x[s] = T.wrap(C.ln_loader_slot(h, s, 0)) end
      if base.y or self.files then self.slots_y[s] = T.wrap(C.ln_loader_slot(h, s, 1)) end
    end
  elseif base.get_transformed then
    -- (ImageFolder in Lua: each sample decoded and transformed alone, keyed by
    -- this loader's seed and epoch, so images of different sizes batch)
  else
    if type(transform) == 'function' then self.sample_transform = transform
    elseif transform ~= nil then transforms.compile(transform, 'float32') end   -- checks it
  end
end

function DataLoader:__len()
  if self.batch_sampler then return len(self.batch_sampler) end
  local n, b = self.n, self.batch_size
  return self.drop_last and math.floor(n / b) or math.ceil(n / b)
end

function DataLoader:__tostring()
  if self.batch_sampler then
    return ('DataLoader(%d batches from %s, workers %d, epoch %d)'):format(self:__len(), tostring(self.batch_sampler),
      self.workers, self.epoch)
  end
  local shard = self.num_replicas > 1 and (', rank %d of %d'):format(self.rank, self.num_replicas) or ''
  return ('DataLoader(%d samples, batch_size %d, %d batches, shuffle %s, workers %d, epoch %d%s)'):format(
    self.n, self.batch_size, self:__len(), tostring(self.shuffle), self.workers, self.epoch, shard)
end

-- indices a sampler gave are in range (a Subset's map is read at them)
local function check_range(self, order, n)
  local size = self.size
  for k = 0, n - 1 do
    local i = order[k]
    if i < 0 or i >= size then
      options.raise(('DataLoader: the sampler gave index %d, out of range 1..%d'):format(tonumber(i) + 1, size))
    end
  end
end

-- This epoch's batches of a batch_sampler: self.order (rows of the base
-- dataset) and self.offs, batch b being self.order[offs[b] .. offs[b+1]).
local function fill_batches(self)
  local src, soffs, nb = self.batch_sampler:plan(self.seed, self.epoch)
  local n, map = tonumber(soffs[nb]), self.map
  check_range(self, src, n)
  -- (copies: a batch sampler shared by two loaders refills its buffers)
  if (self.bcap or 0) < n then self.border, self.bcap = ffi.new('int64_t[?]', math.max(n, 1)), n end
  if not self.offs then self.offs = ffi.new('int64_t[?]', nb + 1) end
  local order = self.border
  ffi.copy(self.offs, soffs, (nb + 1) * 8)
  if map then for k = 0, n - 1 do order[k] = map[src[k]] end else ffi.copy(order, src, n * 8) end
  self.order = order
  return nb
end

-- This epoch's order (0-based rows of the base dataset) into self.order.
local function fill_order(self)
  local n, order, map = self.total, self.full or self.order, self.map
  if self.sampler then
    self.sampler:fill(order, self.seed, self.epoch)
    check_range(self, order, n)
    if map then for k = 0, n - 1 do order[k] = map[order[k]] end end
  elseif self.shuffle then
    if C.ln_data_permutation(order, n, self.seed, self.epoch) ~= 0 then core.raise() end
    if map then for k = 0, n - 1 do order[k] = map[order[k]] end end
  elseif map then
    ffi.copy(order, map, n * 8)
  else
    for k = 0, n - 1 do order[k] = k end
  end
  if self.full then
    local W, r, out = self.num_replicas, self.rank, self.order
    for k = 0, self.n - 1 do out[k] = order[(r + k * W) % n] end
  end
end

-- ---- iteration ----------------------------------------------------------------------------

-- The views of slot s for a batch of `rows` rows. The worker wrote the
-- slot in C: its storage's version moves here, so that a graph that saved
-- the batch it held before (kept across batches, then backward) is refused
-- rather than differentiated with this batch's values.
local function slot_views(self, s, rows)
  local x, y = self.slots_x[s], self.slots_y[s]
  if self.files then   -- (a new header a batch: a worker may have remade the slot's tensor)
    x = T.wrap(C.ln_loader_slot(self.handle, s, 0))
    if rows < self.slot_rows then x, y = x:narrow(1, 1, rows), y:narrow(1, 1, rows) end
    C.ln_storage_bump_unrecorded(x.p)
    C.ln_storage_bump_unrecorded(y.p)
    if self.copy then return x:clone(), y:clone() end
    return x, y
  end
  C.ln_storage_bump_unrecorded(x.p)
  if y then C.ln_storage_bump_unrecorded(y.p) end
  if rows < self.slot_rows then
    local c = self.short[s]
    if not c or c.rows ~= rows then
      c = { rows = rows, x = x:narrow(1, 1, rows), y = y and y:narrow(1, 1, rows) }
      self.short[s] = c
    end
    x, y = c.x, c.y
  end
  if self.copy then return x:clone(), y and y:clone() end
  return x, y
end

-- One epoch: the next one, or the rest of a restored one.
function DataLoader:iter()
  if self.closed then error('DataLoader: used after close()', 2) end
  local nb = self:__len()
  if not (self.resume and self.epoch > 0 and self.position < nb) then
    self.epoch, self.position = self.epoch + 1, 0
  end
  self.resume = false
  local h = self.handle
  if self.batch_sampler then
    fill_batches(self)
    if h and nb > 0 then
      if C.ln_loader_start_batches(h, self.order, self.offs, nb, self.position, self.seed, self.epoch) < 0 then
        core.raise()
      end
    end
  else
    fill_order(self)
  end
  if h and nb > 0 and not self.batch_sampler then   -- (drop_last with fewer samples than batch_size: no batch to assemble)
    local got = C.ln_loader_start(h, self.order, self.n, self.position, self.drop_last and 1 or 0,
      self.seed, self.epoch)
    if got < 0 then core.raise() end
  end
  local epoch = self.epoch
  return function()
    if self.closed then error('DataLoader: used after close()', 2) end
    if self.epoch ~= epoch then error('DataLoader: this iterator was superseded by a newer iter()', 2) end
    local b = self.position
    if b >= nb then return nil end
    self.position = b + 1
    if not h then return collate.batch(self, b) end
    local s = C.ln_loader_next(h, self.rows)
    if s < 0 then core.raise() end
    return slot_views(self, s, tonumber(self.rows[0]))
  end
end

-- `for x, y in loader do`: Lua's generic for calls loader(nil, control), with
-- control nil on the first call only, so a nil control starts an epoch as
-- iter() does (a loop left early does not carry over into the next one).
function DataLoader:__call(_, control)
  if control == nil or not self.for_iter then self.for_iter = self:iter() end
  return self.for_iter()
end

-- Make the next iter() run epoch e (1-based), from its start.
function DataLoader:set_epoch(e)
  if type(e) ~= 'number' or e % 1 ~= 0 or e < 1 then error('set_epoch: epoch must be an integer >= 1', 2) end
  self.epoch, self.position, self.resume = e - 1, 0, false
end

function DataLoader:state_dict()
  return { epoch = self.epoch, position = self.position, seed = self.seed,
           batch_size = self.batch_size, num_samples = self.n, shuffle = self.shuffle,
           num_replicas = self.num_replicas, total = self.total }
end

-- a state taken with another number of replicas, in this loader's terms: the
-- W ranks had consumed position * batch_size * W samples of the epoch's
-- order; this one skips as many whole batches of its own count
function DataLoader:convert_state(st)
  local W = st.num_replicas
  if type(W) ~= 'number' or W == self.num_replicas or type(st.position) ~= 'number' then return st end
  if st.total ~= nil and st.total ~= self.total then
    error(('load_state_dict: the state is for a dataset of %s samples, this loader has %d'):format(
      tostring(st.total), self.total), 3)
  end
  local c = {}
  for k, v in pairs(st) do c[k] = v end
  local consumed = st.position * (st.batch_size or self.batch_size) * W
  c.position = math.min(math.floor(consumed / (self.batch_size * self.num_replicas)), self:__len())
  c.num_samples, c.num_replicas = self.n, self.num_replicas
  return c
end

function DataLoader:load_state_dict(st)
  if not is_table(st) then error('load_state_dict: expected a table from state_dict()', 2) end
  st = self:convert_state(st)
  for _, k in ipairs({ 'epoch', 'position' }) do
    if type(st[k]) ~= 'number' or st[k] % 1 ~= 0 or st[k] < 0 then
      error(('load_state_dict: %s must be a non-negative integer, got %s'):format(k, tostring(st[k])), 2)
    end
  end
  options.seed('load_state_dict', 'seed', st.seed)   -- (a saved 2^64 wrapped as a new one did)
  if st.num_samples and st.num_samples ~= self.n then
    error(('load_state_dict: the state is for %d samples, this loader has %d'):format(st.num_samples, self.n), 2)
  end
  if st.batch_size and st.batch_size ~= self.batch_size then
    error(('load_state_dict: the state is for batch_size %d, this loader has %d'):format(st.batch_size, self.batch_size), 2)
  end
  if st.position > self:__len() then
    error(('load_state_dict: position %d is past the %d batches of an epoch'):format(st.position, self:__len()), 2)
  end
  self.epoch, self.position, self.seed, self.resume = st.epoch, st.position, st.seed, true
end

-- Stop the worker threads and free the batch buffers now (the GC would do
-- it later). Batches already handed out stay valid; iterating afterwards
-- (an iterator from before, or a new iter()) is the error
-- 'DataLoader: used after close()'. Closing twice does nothing.
function DataLoader:close()
  if self.handle then C.ln_loader_close(self.handle) end   -- the struct is freed when collected
  self.slots_x, self.slots_y, self.short = nil, nil, nil
  self.closed = true
end

return DataLoader
