-- lunet.data samplers (Random, Sequential, SubsetRandom, WeightedRandom,
-- Batch), the DataLoader's sampler / batch_sampler / collate_fn options and
-- ConcatDataset: orders and counts, determinism at 0/1/2 workers, conflicts.
local lunet = require 'lunet'
local data = lunet.data

local function raises(f, msg)
  local ok, err = pcall(f)
  assert.is_false(ok, 'expected an error: ' .. msg)
  assert.truthy(tostring(err):find(msg, 1, true), tostring(err))
end

-- 10 samples: x = i - 1 (float, shape {1}), y = i
local function ds10(n)
  n = n or 10
  return data.TensorDataset(lunet.arange(0, n):float():reshape({ n, 1 }), lunet.arange(1, n + 1))
end

-- every batch's targets of an epoch, flattened, and the batch sizes
local function epoch(loader)
  local ys, sizes = {}, {}
  for _, y in loader:iter() do
    sizes[#sizes + 1] = y:size(1)
    for _, v in ipairs(y:totable()) do ys[#ys + 1] = v end
  end
  return ys, sizes
end

local function counts(list)
  local c = {}
  for _, v in ipairs(list) do c[v] = (c[v] or 0) + 1 end
  return c
end

describe('samplers', function()
  it('SequentialSampler gives 1..n; RandomSampler each index once per epoch, new order per epoch', function()
    local ds = ds10()
    assert.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, data.SequentialSampler(ds):indices())
    local s = data.RandomSampler(ds, { seed = 7 })
    local a, b = s:indices(nil, 1), s:indices(nil, 2)
    assert.same(a, s:indices(nil, 1))
    assert.are_not.same(a, b)
    for _, l in ipairs { a, b } do
      local c = counts(l)
      for i = 1, 10 do assert.are.equal(1, c[i]) end
    end
    assert.are.equal(10, #s)
  end)

  it('RandomSampler num_samples past #ds without replacement repeats whole permutations', function()
    local s = data.RandomSampler(ds10(4), { num_samples = 10, seed = 1 })
    local l = s:indices()
    assert.are.equal(10, #l)
    local c = counts({ l[1], l[2], l[3], l[4] })
    for i = 1, 4 do assert.are.equal(1, c[i]) end
    c = counts({ l[5], l[6], l[7], l[8] })
    for i = 1, 4 do assert.are.equal(1, c[i]) end
  end)

  it('RandomSampler with replacement: uniform frequencies', function()
    local s = data.RandomSampler(ds10(5), { replacement = true, num_samples = 50000, seed = 3 })
    local c = counts(s:indices())
    for i = 1, 5 do assert.is_true(math.abs(c[i] / 50000 - 0.2) < 0.01, tostring(c[i])) end
  end)

  it('SubsetRandomSampler permutes the given indices only', function()
    local s = data.SubsetRandomSampler({ 2, 4, 6, 8 })
    local l = s:indices(5, 1)
    table.sort(l)
    assert.same({ 2, 4, 6, 8 }, l)
    assert.same(s:indices(5, 3), s:indices(5, 3))
    assert.same({ 3, 9 }, (function() local t = data.SubsetRandomSampler(lunet.tensor({ 9, 3 }, { dtype = 'int64' })):indices(1, 1); table.sort(t); return t end)())
  end)

  it('WeightedRandomSampler frequencies follow the weights; without replacement each once', function()
    local s = data.WeightedRandomSampler({ 1, 0, 3, 6 }, 100000, { seed = 2 })
    local c = counts(s:indices())
    assert.is_nil(c[2])
    assert.is_true(math.abs(c[1] / 1e5 - 0.1) < 0.01, tostring(c[1]))
    assert.is_true(math.abs(c[3] / 1e5 - 0.3) < 0.01, tostring(c[3]))
    assert.is_true(math.abs(c[4] / 1e5 - 0.6) < 0.01, tostring(c[4]))
    local w = data.WeightedRandomSampler(lunet.tensor({ 1, 5, 0, 2 }), 3, { replacement = false })
    local firsts = {}
    for e = 1, 3000 do
      local l = w:indices(9, e)
      local cc = counts(l)
      assert.is_nil(cc[3])
      for _, v in pairs(cc) do assert.are.equal(1, v) end
      firsts[l[1]] = (firsts[l[1]] or 0) + 1
    end
    -- the first draw is weighted as with replacement: 1/8, 5/8, 2/8
    assert.is_true(math.abs(firsts[2] / 3000 - 0.625) < 0.03, tostring(firsts[2]))
  end)

  it('BatchSampler cuts a sampler into batches, drop_last drops the short one', function()
    local ds = ds10()
    local b = data.BatchSampler(data.SequentialSampler(ds), 4, false)
    assert.are.equal(3, #b)
    assert.same({ { 1, 2, 3, 4 }, { 5, 6, 7, 8 }, { 9, 10 } }, b:batches())
    local d = data.BatchSampler({ 3, 1, 2, 5, 4 }, 2, true)
    assert.are.equal(2, #d)
    assert.same({ { 3, 1 }, { 2, 5 } }, d:batches())
    local got = {}
    for batch in d:iter() do got[#got + 1] = batch end
    assert.are.equal(2, #got)
  end)

  it('bad arguments are named errors', function()
    local ds = ds10()
    raises(function() data.RandomSampler(ds, { num_samples = 0 }) end, 'RandomSampler: num_samples must be a positive integer')
    raises(function() data.RandomSampler(ds, { replace = true }) end, "RandomSampler: unknown option 'replace'")
    raises(function() data.SubsetRandomSampler({ 1, 0 }) end, 'SubsetRandomSampler: indices holds 0: indices are 1-based')
    raises(function() data.SubsetRandomSampler({ 1.5 }) end, 'SubsetRandomSampler: indices[1] must be an integer')
    raises(function() data.WeightedRandomSampler({ 1, -1 }, 2) end, 'WeightedRandomSampler: weights[2] is -1')
    raises(function() data.WeightedRandomSampler({ 0, 0 }, 2) end, 'WeightedRandomSampler: the weights must have a finite, positive sum')
    raises(function() data.WeightedRandomSampler({ 1, 0, 1 }, 3, { replacement = false }) end,
      'WeightedRandomSampler: cannot draw 3 samples without replacement from 2 non-zero weights')
    raises(function() data.WeightedRandomSampler({ 1 }, 1.5) end, 'WeightedRandomSampler: num_samples must be a positive integer')
    raises(function() data.BatchSampler(data.SequentialSampler(ds), 0, false) end, 'BatchSampler: batch_size must be a positive integer')
    raises(function() data.BatchSampler(5, 2, false) end, 'BatchSampler: sampler must be a data sampler')
    raises(function() data.BatchSampler({ 1 }, 2, 'yes') end, 'BatchSampler: drop_last must be a boolean')
  end)
end)

describe('DataLoader with samplers', function()
  it('sampler = gives its indices, the same batches at 0, 1 and 2 workers, new ones per epoch', function()
    local ds = ds10()
    local ref
    for _, w in ipairs { 0, 1, 2 } do
      local l = data.DataLoader(ds, { batch_size = 3, seed = 11, workers = w, sampler = data.RandomSampler(ds) })
      assert.are.equal(4, #l)
      local e1, sizes = epoch(l)
      local e2 = epoch(l)
      assert.same({ 3, 3, 3, 1 }, sizes)
      local c = counts(e1)
      for i = 1, 10 do assert.are.equal(1, c[i]) end
      assert.are_not.same(e1, e2)
      if ref then assert.same(ref, { e1, e2 }) else ref = { e1, e2 } end
      l:set_epoch(2)
      assert.same(e2, (epoch(l)))
    end
    -- the loader's seed keys a sampler without its own
    local a = epoch(data.DataLoader(ds, { batch_size = 3, seed = 12, sampler = data.RandomSampler(ds) }))
    assert.are_not.same(ref[1], a)
  end)

  it('weighted, subset and list samplers through the C and the Lua paths', function()
    local ds = ds10()
    local ys = epoch(data.DataLoader(ds, { batch_size = 4, sampler = data.SubsetRandomSampler({ 2, 5, 9 }), workers = 2 }))
    table.sort(ys)
    assert.same({ 2, 5, 9 }, ys)
    assert.same({ 4, 2, 2 }, (epoch(data.DataLoader(ds, { batch_size = 2, sampler = { 4, 2, 2 } }))))
    local w = epoch(data.DataLoader(ds, { batch_size = 64, seed = 1, sampler = data.WeightedRandomSampler({ 0, 1, 0, 0, 0, 0, 0, 0, 0, 1 }, 200) }))
    local c = counts(w)
    assert.are.equal(200, c[2] + c[10])
    -- a Lua dataset (ConcatDataset) gets the same indices
    local cat = data.ConcatDataset({ ds10(5), data.Subset(ds10(), { 6, 7, 8, 9, 10 }) })
    local r = {}
    for _, wk in ipairs { 0, 2 } do
      r[#r + 1] = epoch(data.DataLoader(cat, { batch_size = 3, seed = 4, workers = wk, sampler = data.RandomSampler(cat) }))
      r[#r + 1] = epoch(data.DataLoader(ds, { batch_size = 3, seed = 4, workers = wk, sampler = data.RandomSampler(ds) }))
    end
    for k = 2, 4 do assert.same(r[1], r[k]) end
  end)

  it('batch_sampler = gives its batches, deterministic at 0, 1 and 2 workers, through a Subset', function()
    local sub = data.Subset(ds10(), { 10, 9, 8, 7, 6, 5, 4 })   -- sample i is row 11 - i
    local ref
    for _, w in ipairs { 0, 1, 2 } do
      local bs = data.BatchSampler(data.RandomSampler(sub), 3, false)
      local l = data.DataLoader(sub, { batch_sampler = bs, seed = 5, workers = w })
      assert.are.equal(3, #l)
      local e1, sizes = epoch(l)
      assert.same({ 3, 3, 1 }, sizes)
      local sorted = { unpack(e1) }
      table.sort(sorted)
      assert.same({ 4, 5, 6, 7, 8, 9, 10 }, sorted)
      local e2 = epoch(l)
      if ref then assert.same(ref, { e1, e2 }) else ref = { e1, e2 } end
    end
    -- your own: a list of lists, or an object with batches(seed, epoch)
    local ys, sizes = epoch(data.DataLoader(ds10(), { batch_sampler = { { 1 }, { 2, 3, 4 }, { 5, 6 } }, workers = 1 }))
    assert.same({ 1, 2, 3, 4, 5, 6 }, ys)
    assert.same({ 1, 3, 2 }, sizes)
    local mine = setmetatable({ batch_size = 2 }, { __len = function() return 2 end })
    function mine:len() return 2 end
    function mine:batches(seed, e) return { { e }, { e + 1, e + 2 } } end
    local l = data.DataLoader(ds10(), { batch_sampler = mine })
    assert.same({ 1, 2, 3 }, (epoch(l)))
    assert.same({ 2, 3, 4 }, (epoch(l)))
  end)

  it('state_dict resumes a sampler epoch mid-way', function()
    local ds = ds10()
    local l = data.DataLoader(ds, { batch_size = 2, seed = 3, sampler = data.RandomSampler(ds) })
    local full = epoch(l)
    l:set_epoch(1)
    local it = l:iter()
    it()
    local st = l:state_dict()
    local l2 = data.DataLoader(ds, { batch_size = 2, seed = 99, sampler = data.RandomSampler(ds) })
    l2:load_state_dict(st)
    local rest = epoch(l2)
    assert.same({ unpack(full, 3) }, rest)
  end)

  it('option conflicts and bad samplers are errors', function()
    local ds = ds10()
    raises(function() data.DataLoader(ds, { sampler = data.SequentialSampler(ds), shuffle = true }) end,
      'DataLoader: sampler is mutually exclusive with shuffle')
    local bs = data.BatchSampler({ 1, 2 }, 1, false)
    for _, o in ipairs { { batch_size = 2 }, { shuffle = true }, { drop_last = true }, { sampler = { 1 } } } do
      o.batch_sampler = bs
      raises(function() data.DataLoader(ds, o) end,
        'DataLoader: batch_sampler is mutually exclusive with batch_size, shuffle, sampler and drop_last')
    end
    raises(function() data.DataLoader(ds, { batch_sampler = bs, num_replicas = 2, rank = 0 }) end,
      'DataLoader: batch_sampler cannot be sharded')
    raises(function() data.DataLoader(ds, { sampler = 'x' }) end, 'DataLoader: sampler must be a data sampler')
    raises(function() data.DataLoader(ds, { batch_sampler = 3 }) end, 'DataLoader: batch_sampler must be a data.BatchSampler')
    local l = data.DataLoader(ds, { sampler = { 1, 11 } })
    raises(function() for _ in l:iter() do end end, 'DataLoader: the sampler gave index 11, out of range 1..10')
    l = data.DataLoader(ds, { batch_sampler = { { 1, 2, 3 }, { 4 } } })   -- (fixed: its largest batch sizes the buffers)
    assert.same({ 1, 2, 3, 4 }, (epoch(l)))
    local mine = setmetatable({ batch_size = 1 }, {})
    function mine:len() return 1 end
    function mine:batches() return { { 1, 2 } } end
    l = data.DataLoader(ds, { batch_sampler = mine })
    raises(function() for _ in l:iter() do end end, 'batch 1 has 2 samples, must be 1..1')
    mine.batch_size = nil
    raises(function() data.DataLoader(ds, { batch_sampler = mine }) end, 'DataLoader: a batch_sampler for a dataset batched in C needs a batch_size field')
  end)

  it('sharding (num_replicas) splits a sampler\'s indices between ranks', function()
    local ds = ds10()
    local all = {}
    for r = 0, 1 do
      for _, v in ipairs(epoch(data.DataLoader(ds, { batch_size = 2, seed = 8, num_replicas = 2, rank = r, sampler = data.RandomSampler(ds) }))) do
        all[#all + 1] = v
      end
    end
    local c = counts(all)
    for i = 1, 10 do assert.are.equal(1, c[i]) end
  end)
end)

describe('collate_fn', function()
  it('gets the list of samples of a Lua-batched dataset; default_collate stacks them', function()
    local cat = data.ConcatDataset({ ds10(3), ds10(2) })
    local seen = {}
    local l = data.DataLoader(cat, { batch_size = 2, collate_fn = function(samples)
      seen[#seen + 1] = #samples
      return samples[1][2], 'extra'
    end })
    local firsts = {}
    for y, e in l:iter() do firsts[#firsts + 1] = y; assert.are.equal('extra', e) end
    assert.same({ 2, 2, 1 }, seen)
    assert.same({ 1, 3, 2 }, firsts)
    local x, y = data.default_collate({ { lunet.ones(2), 1 }, { lunet.zeros(2), 2 } })
    assert.same({ 2, 2 }, x:size())
    assert.same({ 1, 2 }, y:totable())
    raises(function() data.default_collate({}) end, 'default_collate: expected a non-empty list of samples')
  end)

  it('is refused for a dataset batched in C, and with a non-function transform', function()
    raises(function() data.DataLoader(ds10(), { collate_fn = data.default_collate }) end,
      'DataLoader: collate_fn needs a dataset batched in Lua; TensorDataset is batched in C')
    raises(function() data.DataLoader(data.ConcatDataset({ ds10() }), { collate_fn = data.default_collate,
      transform = data.transforms.Normalize({ 0 }, { 1 }) }) end, 'DataLoader: with collate_fn, transform must be a Lua function')
  end)
end)

describe('ConcatDataset', function()
  it('indexes across its parts at the boundaries', function()
    local a, b = ds10(3), data.TensorDataset(lunet.arange(100, 102):float():reshape({ 2, 1 }), lunet.arange(101, 103))
    local empty = data.TensorDataset(lunet.zeros(0, 1), lunet.zeros(0):long())
    local c = data.ConcatDataset({ a, empty, b })
    assert.are.equal(5, #c)
    local ys = {}
    for i = 1, 5 do local _, y = c:get(i); ys[i] = y end
    assert.same({ 1, 2, 3, 101, 102 }, ys)
    local x3 = c[3]
    assert.are.equal(2, x3:item())
    assert.are.equal(100, (c[4]):item())
    raises(function() c:get(6) end, 'ConcatDataset:get: index 6 out of range 1..5')
    raises(function() c:get(0) end, 'ConcatDataset:get: index 0 out of range 1..5')
    raises(function() data.ConcatDataset({}) end, 'ConcatDataset: the list of datasets is empty')
    raises(function() data.ConcatDataset({ a, 5 }) end, 'ConcatDataset: datasets[2] is not a dataset')
    raises(function() data.ConcatDataset(a) end, 'ConcatDataset: expected a list of datasets')
    assert.truthy(tostring(c):find('ConcatDataset(5 samples', 1, true))
  end)

  it('works with random_split, Subset and the DataLoader at 0, 1 and 2 workers', function()
    local c = data.ConcatDataset({ ds10(4), data.TensorDataset(lunet.arange(0, 3):float():reshape({ 3, 1 }), lunet.arange(11, 14)) })
    local p1, p2 = unpack(data.random_split(c, { 5, 2 }, 3))
    local all = {}
    for _, p in ipairs { p1, p2 } do for i = 1, #p do local _, y = p:get(i); all[#all + 1] = y end end
    table.sort(all)
    assert.same({ 1, 2, 3, 4, 11, 12, 13 }, all)
    local s = data.Subset(c, { 4, 5 })
    assert.same({ 4, 11 }, { select(2, s:get(1)), select(2, s:get(2)) })
    local ref
    for _, w in ipairs { 0, 1, 2 } do
      local e = { epoch(data.DataLoader(c, { batch_size = 3, shuffle = true, seed = 6, workers = w })) }
      local sorted = { unpack(e[1]) }
      table.sort(sorted)
      assert.same({ 1, 2, 3, 4, 11, 12, 13 }, sorted)
      assert.same({ 3, 3, 1 }, e[2])
      if ref then assert.same(ref, e) else ref = e end
    end
  end)
end)
