-- Files and handles used the wrong way: a DataLoader after close(), readers
-- and writers given FIFOs, directories, device nodes, symlinks and paths or
-- names with NUL bytes, and checkpoints whose state has the wrong types.
-- What could hang runs in a child process under `timeout`, so that a hang is
-- a failure, not a stuck suite.
local ffi = require 'ffi'
local lunet = require 'lunet'
local data = lunet.data
local C = require('lunet.core').C

local tmp = require 'tmp'
local tmpdir = tmp.dir
teardown(tmp.clean)

-- Runs `code` (Lua text) in a child luajit with the same paths and library;
-- returns its output and exit code (124: it hung past `secs`).
local function child(code, secs)
  local dir = tmpdir()
  local script = dir .. '/child.lua'
  local f = assert(io.open(script, 'w'))
  f:write(code)
  f:close()
  local p = io.popen(('timeout -s KILL %d luajit %s 2>&1; echo "rc=$?"'):format(secs or 60, script))
  local out = p:read('*a')
  p:close()
  os.execute('rm -rf ' .. dir)
  local rc = tonumber(out:match('rc=(%d+)%s*$'))
  return out, rc
end

local function errmsg(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, 'expected an error')
  return tostring(err)
end

local function tensor_ds(n)
  return data.TensorDataset(lunet.arange(n * 3):view(n, 3):float(), lunet.arange(n):long())
end

describe('DataLoader after close()', function()
  for _, workers in ipairs({ 0, 2 }) do
    it('is a named error to iterate after close, workers = ' .. workers, function()
      local loader = data.DataLoader(tensor_ds(20), { batch_size = 4, workers = workers })
      local it = loader:iter()
      local x = it()
      loader:close()
      -- the batch handed out before close stays readable
      assert.are.same({ { 0, 1, 2 }, { 3, 4, 5 }, { 6, 7, 8 }, { 9, 10, 11 } }, x:totable())
      assert.matches('DataLoader: used after close%(%)', errmsg(it))
      assert.matches('DataLoader: used after close%(%)', errmsg(loader.iter, loader))
      loader:close()   -- twice: harmless
      assert.matches('DataLoader: used after close%(%)', errmsg(it))
      loader = nil
      collectgarbage(); collectgarbage()   -- the struct is freed with the object
    end)

    it('closing inside a loop ends it with the named error, workers = ' .. workers, function()
      local loader = data.DataLoader(tensor_ds(20), { batch_size = 2, workers = workers, shuffle = true, seed = 4 })
      local seen = 0
      local err = errmsg(function()
        for x in loader:iter() do
          seen = seen + 1
          assert.are.equal(2, x:size(1))
          if seen == 3 then loader:close() end
        end
      end)
      assert.are.equal(3, seen)
      assert.matches('DataLoader: used after close%(%)', err)
    end)
  end

  it('the C loader refuses calls after ln_loader_close (no use after free)', function()
    local x = lunet.arange(12):view(6, 2):float()
    for _, workers in ipairs({ 0, 3 }) do
      local h = ffi.gc(C.ln_loader_new(x.p, nil, 2, nil, workers, 0), C.ln_loader_free)
      local order = ffi.new('int64_t[6]', { 0, 1, 2, 3, 4, 5 })
      assert.are.equal(3, tonumber(C.ln_loader_start(h, order, 6, 0, 0, 1, 1)))
      local rows = ffi.new('int64_t[1]')
      assert.is_true(C.ln_loader_next(h, rows) >= 0)
      C.ln_loader_close(h)
      C.ln_loader_close(h)
      assert.are.equal(-1, C.ln_loader_next(h, rows))
      assert.matches('DataLoader: used after close%(%)', ffi.string(C.ln_last_error()))
      assert.are.equal(-1, tonumber(C.ln_loader_start(h, order, 6, 0, 0, 1, 2)))
      assert.matches('DataLoader: used after close%(%)', ffi.string(C.ln_last_error()))
      assert.are.equal(-1, C.ln_loader_nslots(h))
      assert.is_true(C.ln_loader_slot(h, 0, 0) == nil)
    end
  end)

  it('never crashes or hangs in a fresh process (workers 0 and 4, several devices)', function()
    local out, rc = child([[
      local lunet = require 'lunet'
      lunet.set_cpu_devices(2)
      local data = lunet.data
      for _, w in ipairs({0, 4}) do
        local ds = data.TensorDataset(lunet.ones(64, 3, 8, 8), lunet.zeros(64):long())
        local l = data.DataLoader(ds, {batch_size = 8, workers = w, prefetch = 6})
        local it = l:iter()
        it()
        local x = it()
        local sums = {}
        for k = 1, 20 do sums[k] = (x:to('cpu:1') * k):sum() end   -- queued work reading the batch
        x = nil
        l:close()
        collectgarbage(); collectgarbage()
        for k = 1, 20 do assert(sums[k]:item() == k * 8 * 3 * 8 * 8, 'a batch changed under queued work') end
        for k = 1, 3 do
          local ok, err = pcall(it)
          assert(not ok and err:find('DataLoader: used after close()', 1, true), tostring(err))
        end
        l = nil
        collectgarbage(); collectgarbage()
      end
      print('child ok')
    ]], 60)
    assert.are.equal(0, rc, out)
    assert.matches('child ok', out)
  end)
end)

describe('files that are not regular files', function()
  local dir = tmpdir()
  local fifo = dir .. '/fifo'
  assert(os.execute('mkfifo ' .. fifo) == 0)
  local subdir = dir .. '/adir'
  assert(os.execute('mkdir ' .. subdir) == 0)
  local specials = { fifo = fifo, directory = subdir, ['/dev/zero'] = '/dev/zero', ['/dev/null'] = '/dev/null' }
  local kinds = { fifo = 'a FIFO', directory = 'a directory', ['/dev/zero'] = 'a character device',
                  ['/dev/null'] = 'a character device' }

  -- every reader, each run in a child under timeout: a FIFO used to block the
  -- open (a hang), /dev/zero to be read until memory ran out
  local readers = {
    { 'lunet.load', "lunet.load(P)", 'load: ' },
    { 'serialize.open', "require('lunet.serialize').open(P)", 'load: ' },
    { 'checkpoint.load', "require('lunet.checkpoint').load(P)", 'checkpoint.load: load: ' },
    { 'read_idx', "lunet.data.read_idx(P)", 'idx_read: ' },
    { 'read_cifar10', "lunet.data.read_cifar10(P)", 'cifar10_read: ' },
    { 'read_cifar10 list', "lunet.data.read_cifar10({P})", 'cifar10_read: ' },
  }
  it('every reader refuses a FIFO, a directory, /dev/zero and /dev/null at once', function()
    local lines = { "local lunet = require 'lunet'" }
    for kind, path in pairs(specials) do
      for _, r in ipairs(readers) do
        lines[#lines + 1] = ([[
do
  local P = %q
  local ok, err = pcall(function() return %s end)
  print(%q, ok, err)
end]]):format(path, r[2], kind .. ' ' .. r[1])
      end
    end
    -- a dataset root that holds FIFOs where the files should be
    lines[#lines + 1] = ([[
for _, n in ipairs({'train-images-idx3-ubyte', 'train-labels-idx1-ubyte', 'data_batch_1.bin'}) do os.execute('mkfifo %s/' .. n) end
print('FashionMNIST root', pcall(lunet.data.FashionMNIST, {root = %q}))
print('CIFAR10 root', pcall(lunet.data.CIFAR10, {root = %q, files = {'data_batch_1.bin'}}))
print('done')]]):format(dir .. '/root', dir .. '/root', dir .. '/root')
    os.execute('mkdir -p ' .. dir .. '/root')
    local out, rc = child(table.concat(lines, '\n'), 60)
    out = '\n' .. out
    assert.are.equal(0, rc, out)
    assert.matches('\ndone', out)
    for kind, path in pairs(specials) do
      for _, r in ipairs(readers) do
        local line = out:match('\n' .. (kind .. ' ' .. r[1]):gsub('%p', '%%%0') .. '\t([^\n]*)')
        assert.is_not_nil(line, kind .. ' ' .. r[1] .. ' printed nothing:\n' .. out)
        assert.matches('^false\t', line)
        assert.truthy(line:find(r[3], 1, true), line)
        assert.truthy(line:find(path, 1, true), line)
        assert.truthy(line:find('not a regular file (it is ' .. kinds[kind], 1, true), line)
      end
    end
    assert.matches("FashionMNIST root\tfalse\t[^\n]*idx_read: '[^']*train%-images%-idx3%-ubyte' is not a regular file %(it is a FIFO", out)
    assert.matches("CIFAR10 root\tfalse\t[^\n]*cifar10_read: '[^']*data_batch_1.bin' is not a regular file %(it is a FIFO", out)
  end)

  it('fit with resume = true and a FIFO as its checkpoint says so instead of waiting', function()
    local out, rc = child(([[
      local lunet = require 'lunet'
      local nn = lunet.nn
      local m = nn.Sequential(nn.Linear(3, 2))
      local ds = lunet.data.TensorDataset(lunet.randn(8, 3), lunet.ones(8):long())
      local ok, err = pcall(lunet.fit, m, lunet.data.DataLoader(ds, {batch_size = 4}),
        {checkpoint = %q, resume = true, quiet = true, progress = false})
      print('fit', ok, err)
    ]]):format(fifo), 60)
    assert.are.equal(0, rc, out)
    assert.matches('fit\tfalse\t[^\n]*not a regular file %(it is a FIFO', out)
  end)

  it('a save refuses to replace a FIFO, a directory or a device node', function()
    local t = { w = lunet.ones(2) }
    for kind, path in pairs(specials) do
      local err = errmsg(lunet.save, path, t)
      assert.truthy(err:find("save: cannot write '" .. path .. "': refusing to replace " .. kinds[kind], 1, true), err)
      err = errmsg(require('lunet.checkpoint').save, path, { w = lunet.ones(2), step = 1 })
      assert.truthy(err:find("checkpoint.save: save: cannot write '" .. path .. "': refusing to replace", 1, true), err)
    end
    -- still what they were (the FIFO not replaced, /dev/null a device)
    assert.are.equal(0, os.execute('test -p ' .. fifo))
    assert.are.equal(0, os.execute('test -d ' .. subdir))
    assert.are.equal(0, os.execute('test -c /dev/null'))
    -- and no temporary file left beside them
    local p = io.popen('ls -A ' .. dir)
    local names = p:read('*a')
    p:close()
    assert.is_nil(names:find('.tmp.', 1, true), names)
    -- a symlink to a special file is refused too
    os.execute(('ln -sf %s %s/to_null'):format('/dev/null', dir))
    local err = errmsg(lunet.save, dir .. '/to_null', t)
    assert.truthy(err:find('refusing to replace a character device at /dev/null', 1, true), err)
    assert.are.equal(0, os.execute('test -L ' .. dir .. '/to_null'))
  end)

  it('a save through a symlink writes the target atomically and keeps the link', function()
    local target = dir .. '/real.safetensors'
    lunet.save(target, { w = lunet.zeros(3) })
    os.execute(('mkdir -p %s/links && ln -sf ../real.safetensors %s/links/rel && ln -sf %s/links/rel %s/chain')
      :format(dir, dir, dir, dir))
    lunet.save(dir .. '/chain', { w = lunet.full({ 3 }, 7) })   -- a link to a relative link
    assert.are.equal(0, os.execute('test -L ' .. dir .. '/chain'))
    assert.are.equal(0, os.execute('test -L ' .. dir .. '/links/rel'))
    assert.are.same({ 7, 7, 7 }, lunet.load(target).w:totable())
    assert.are.same({ 7, 7, 7 }, lunet.load(dir .. '/chain').w:totable())
    -- a dangling link: its target is created
    os.execute(('ln -sf %s/new.safetensors %s/dangling'):format(dir, dir))
    lunet.save(dir .. '/dangling', { w = lunet.ones(1) })
    assert.are.equal(0, os.execute('test -L ' .. dir .. '/dangling'))
    assert.are.same({ 1 }, lunet.load(dir .. '/new.safetensors').w:totable())
    -- a loop of links is an error, not a hang
    os.execute(('ln -sf %s/loop2 %s/loop1 && ln -sf %s/loop1 %s/loop2'):format(dir, dir, dir, dir))
    assert.matches('too many levels of symbolic links', errmsg(lunet.save, dir .. '/loop1', { w = lunet.ones(1) }))
    -- checkpoints through a link, loaded back through it
    local ck = require 'lunet.checkpoint'
    os.execute(('ln -sf %s/run.ckpt %s/latest'):format(dir, dir))
    ck.save(dir .. '/latest', { w = lunet.ones(2), step = 3 })
    assert.are.equal(0, os.execute('test -L ' .. dir .. '/latest'))
    assert.are.equal(3, ck.load(dir .. '/run.ckpt').step)
    assert.are.equal(3, ck.load(dir .. '/latest').step)
  end)
end)

describe('NUL bytes in paths and names', function()
  local dir = tmpdir()
  it('are a named error, never a file or name cut short', function()
    local t = { w = lunet.ones(2) }
    local p = dir .. '/a.safetensors\0.evil'
    assert.matches('save: the path contains a NUL byte', errmsg(lunet.save, p, t))
    assert.are_not.equal(0, os.execute('test -e ' .. dir .. '/a.safetensors'))   -- nothing written
    assert.matches("save: tensor name contains a NUL byte", errmsg(lunet.save, dir .. '/b', { ['w\0x'] = lunet.ones(1) }))
    assert.matches("save: metadata key contains a NUL byte", errmsg(lunet.save, dir .. '/b', t, { ['k\0'] = 'v' }))
    assert.matches("save: the value of metadata 'k' contains a NUL byte", errmsg(lunet.save, dir .. '/b', t, { k = 'v\0w' }))
    assert.are_not.equal(0, os.execute('test -e ' .. dir .. '/b'))
    lunet.save(dir .. '/ok', t)
    assert.matches('load: the path contains a NUL byte', errmsg(lunet.load, dir .. '/ok\0junk'))
    assert.matches('open: the path contains a NUL byte', errmsg(require('lunet.serialize').open, dir .. '/ok\0'))
    local ck = require 'lunet.checkpoint'
    assert.matches('checkpoint.save: the path contains a NUL byte', errmsg(ck.save, dir .. '/c\0', { step = 1 }))
    assert.matches('checkpoint.save: save: tensor name contains a NUL byte',
      errmsg(ck.save, dir .. '/c', { ['model\0x'] = lunet.ones(1) }))
    assert.matches('checkpoint.load: the path contains a NUL byte', errmsg(ck.load, dir .. '/ok\0'))
    assert.matches('read_idx: the path contains a NUL byte', errmsg(lunet.data.read_idx, dir .. '/ok\0'))
    assert.matches('read_cifar10: path 1 contains a NUL byte', errmsg(lunet.data.read_cifar10, dir .. '/ok\0'))
    assert.matches('FashionMNIST: root contains a NUL byte', errmsg(lunet.data.FashionMNIST, { root = dir .. '\0x' }))
    assert.matches('CIFAR10: root contains a NUL byte', errmsg(lunet.data.CIFAR10, { root = dir .. '\0x' }))
    -- names with a NUL inside checkpoint state (not tensor names) survive as JSON escapes
    ck.save(dir .. '/c', { note = 'a\0b', step = 1 })
    assert.are.equal('a\0b', ck.load(dir .. '/c').note)
  end)

  it('a file whose header has \\u0000 in a name is refused on load', function()
    local hdr = '{"a\\u0000b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}'
    while #hdr % 8 ~= 0 do hdr = hdr .. ' ' end
    local n, le = #hdr, {}
    for i = 1, 8 do le[i] = string.char(n % 256); n = math.floor(n / 256) end
    local f = assert(io.open(dir .. '/nul.safetensors', 'wb'))
    f:write(table.concat(le), hdr, '\1')
    f:close()
    assert.matches('\\u0000 in a string', errmsg(lunet.load, dir .. '/nul.safetensors'))
  end)
end)

describe('checkpoints with a valid crc32 but a wrong state', function()
  local nn = lunet.nn
  local ck = require 'lunet.checkpoint'
  local dir = tmpdir()

  local function setup(optname)
    lunet.manual_seed(5)
    local model = nn.Sequential(nn.Linear(4, 3))
    local opt = optname == 'Adam' and lunet.optim.Adam(model:parameters(), { lr = 0.01 })
      or lunet.optim.SGD(model:parameters(), { lr = 0.1, momentum = 0.9 })
    local ds = data.TensorDataset(lunet.randn(16, 4), lunet.randint(1, 4, { 16 }):long())
    local loader = data.DataLoader(ds, { batch_size = 4, seed = 1 })
    local calls = 0
    local ce = nn.CrossEntropyLoss()
    local loss = setmetatable({}, { __call = function(_, o, y) calls = calls + 1; return ce(o, y) end })
    local sched = optname == 'StepLR' and lunet.optim.StepLR(opt, { step_size = 1 }) or nil
    return model, opt, loader, loss, function() return calls end, sched
  end

  -- a mid-epoch checkpoint from a real run (running sums, loader position)
  local function good(optname)
    local path = dir .. '/good_' .. optname .. '.ckpt'
    local model, opt, loader, loss, _, sched = setup(optname)
    lunet.fit(model, loader, { epochs = 2, optimizer = opt, loss = loss, scheduler = sched, checkpoint = path, quiet = true,
      progress = false, checkpoint_every = { steps = 1 }, max_steps = 3 })
    return path
  end
  local paths = { SGD = good('SGD'), Adam = good('Adam'), StepLR = good('StepLR') }

  local function t(...) return lunet.zeros(...) end
  local cases = {
    { 'SGD', function(s) s.step = 'abc' end, 'step is abc, expected a non%-negative integer' },
    { 'SGD', function(s) s.epoch = -1 end, 'epoch is %-1, expected a non%-negative integer' },
    { 'SGD', function(s) s.epoch = 0.5 end, 'epoch is 0.5' },
    { 'SGD', function(s) s.optimizer.state[1].momentum_buffer = t(4, 3) end,
      'optimizer.state.1.momentum_buffer has shape {4,3}, the param {3,4}' },
    { 'SGD', function(s) s.optimizer.state[2].momentum_buffer = 'x' end,
      'optimizer.state.2.momentum_buffer is a string, expected a tensor' },
    { 'SGD', function(s) s.optimizer.state[2].momentum_buffer = lunet.zeros(3):long() end,
      'optimizer.state.2.momentum_buffer is int64, expected float32 or float64' },
    { 'SGD', function(s) s.optimizer.state[7] = {} end, 'optimizer.state.7 belongs to no param' },
    { 'SGD', function(s) s.optimizer = nil end, 'optimizer is a nil, expected a table' },
    { 'SGD', function(s) s.optimizer.param_groups[1].lr = 'fast' end,
      'optimizer.param_groups.1.lr is a string, expected a number' },
    { 'SGD', function(s) s.optimizer.param_groups[1].lr = -1 end,
      'optimizer.param_groups.1: invalid learning rate: %-1' },
    { 'SGD', function(s) s.optimizer.param_groups[1].params = { 1 } end,
      'optimizer.param_groups.1.params has 1 params, the optimizer 2' },
    { 'SGD', function(s) s.optimizer.param_groups[2] = s.optimizer.param_groups[1] end,
      'optimizer.param_groups has 2 groups, the optimizer 1' },
    { 'SGD', function(s) s.model['0.bias'] = nil end, 'model: load_state_dict: missing keys: 0.bias' },
    { 'SGD', function(s) s.model['1.weight'] = t(2); s.model['2.bias'] = t(1) end,
      'model: load_state_dict: unexpected keys: 1.weight, 2.bias' },
    { 'SGD', function(s) s.model['0.weight'] = t(4, 3) end,
      'model: load_state_dict: size mismatch: 0.weight: checkpoint has shape {4,3}, model has {3,4}' },
    { 'SGD', function(s) s.model['0.weight'] = 3; s.model['0.bias'] = nil end,
      'model: load_state_dict: missing keys: 0.bias; not tensors: 0.weight is a number' },
    { 'SGD', function(s) s.model = 'weights' end, 'model is a string' },
    { 'SGD', function(s) s.rng.seed = 'x' end, 'rng.seed is x, expected a non%-negative integer' },
    { 'SGD', function(s) s.rng = nil end, 'rng is a nil' },
    { 'SGD', function(s) s.loader.position = 'abc' end, 'loader.position is abc' },
    { 'SGD', function(s) s.loader.position = 99 end, 'loader.position is 99, past the 4 batches' },
    { 'SGD', function(s) s.loader.batch_size = 8 end, 'loader.batch_size is 8, the loader has 4' },
    { 'SGD', function(s) s.history = 5 end, 'history is a number, expected a list' },
    { 'SGD', function(s) s.running.loss = 'x' end, 'running.loss is a string, expected a number' },
    { 'Adam', function(s) s.optimizer.state[1].exp_avg = nil end, 'optimizer.state.1.exp_avg is missing' },
    { 'Adam', function(s) s.optimizer.state[1].step = 'two' end, 'optimizer.state.1.step is two' },
    { 'Adam', function(s) s.optimizer.state[2].exp_avg_sq = t(1, 3) end,
      'optimizer.state.2.exp_avg_sq has shape {1,3}, the param {3}' },
    { 'Adam', function(s) s.optimizer.param_groups[1].betas = { 0.9, 'x' } end,
      'optimizer.param_groups.1.betas.2 is a string, expected a number' },
    { 'StepLR', function(s) s.scheduler.last_epoch = 'x' end, 'scheduler.last_epoch is a string, expected a number' },
    { 'StepLR', function(s) s.scheduler.base_lrs = { 'x' } end, 'scheduler.base_lrs.1 is a string, expected a number' },
    { 'StepLR', function(s) s.scheduler.name = 'CosineAnnealingLR' end,
      'scheduler.name is CosineAnnealingLR, the scheduler is StepLR' },
  }

  for i, c in ipairs(cases) do
    it(('fit refuses it before the first step: %s'):format(c[3]:gsub('%%', '')), function()
      local state = ck.load(paths[c[1]])
      c[2](state)
      local bad = dir .. '/bad' .. i .. '.ckpt'
      ck.save(bad, state)                 -- a valid crc32: only the content is wrong
      assert.is_table(ck.load(bad))
      local model, opt, loader, loss, calls, sched = setup(c[1])
      local before = model:state_dict()['0.weight']:clone()
      local ok, err = pcall(lunet.fit, model, loader, { epochs = 2, optimizer = opt, loss = loss, scheduler = sched, checkpoint = bad,
        resume = true, quiet = true, progress = false })
      assert.is_false(ok)
      assert.matches('fit: resuming from ' .. bad:gsub('%p', '%%%0') .. ': ' .. c[3], tostring(err))
      assert.are.equal(0, calls())   -- no step ran
      assert.are.same(before:totable(), model:state_dict()['0.weight']:totable())   -- nothing restored
      -- Trainer:load_state_dict checks the same
      local tr = lunet.Trainer(model, { optimizer = opt, scheduler = sched, quiet = true, progress = false })
      local ok2, err2 = pcall(tr.load_state_dict, tr, state, loader)
      assert.is_false(ok2)
      assert.matches('Trainer:load_state_dict: ' .. c[3], tostring(err2))
    end)
  end

  it('the untouched checkpoints resume', function()
    for name, path in pairs(paths) do
      local model, opt, loader, loss, calls, sched = setup(name)
      lunet.fit(model, loader, { epochs = 2, optimizer = opt, loss = loss, scheduler = sched, checkpoint = path, resume = true,
        quiet = true, progress = false })
      assert.are.equal(8 - 3, calls())
    end
  end)
end)

describe('checkpoint state values', function()
  local ck = require 'lunet.checkpoint'
  local dir = tmpdir()

  it('keeps inf, -inf and NaN (JSON has none: they were dropped) and every number exactly', function()
    local path = dir .. '/numbers.ckpt'
    ck.save(path, { best = math.huge, h = { 1, 0 / 0, -math.huge, 0.1 + 0.2 }, w = lunet.ones(2) })
    local s = ck.load(path)
    assert.equal(math.huge, s.best)
    assert.equal(4, #s.h)
    assert.equal(1, s.h[1])
    assert.is_true(s.h[2] ~= s.h[2])
    assert.equal(-math.huge, s.h[3])
    assert.equal(0.1 + 0.2, s.h[4])
    assert.same({ 1, 1 }, s.w:totable())
  end)

  it('names what it cannot hold instead of a stack overflow, an error inside lunet or a tensor written over', function()
    local function err(state)
      local ok, e = pcall(ck.save, dir .. '/bad.ckpt', state)
      assert.is_false(ok)
      return tostring(e)
    end
    local cyc = {}
    cyc.me = { up = cyc }
    assert.matches('checkpoint.save: state.me.up holds a table that contains it (a cycle)', err(cyc), 1, true)
    assert.matches('checkpoint.save: state.f is a function; a checkpoint holds tensors, numbers, strings',
      err({ f = print }), 1, true)
    assert.matches('checkpoint.save: state.n is a cdata', err({ n = 5LL }), 1, true)
    assert.matches('checkpoint.save: the state has a boolean key; keys must be strings or numbers',
      err({ [true] = 1 }), 1, true)
    assert.matches('checkpoint.save: two tensors would be saved as "a.b"',
      err({ ['a.b'] = lunet.ones(1), a = { b = lunet.zeros(1) } }), 1, true)
    -- (a table reached twice, not inside itself, is no cycle: saved twice)
    local shared = { 1, 2 }
    ck.save(dir .. '/shared.ckpt', { a = shared, b = shared })
    assert.same({ a = { 1, 2 }, b = { 1, 2 } }, ck.load(dir .. '/shared.ckpt'))
    assert.is_nil(io.open(dir .. '/bad.ckpt'))   -- (nothing written)
  end)
end)

describe("fit's log path", function()
  it('a directory as the log is a named error', function()
    local dir = tmpdir()
    local m = lunet.nn.Sequential(lunet.nn.Linear(3, 2))
    local ds = data.TensorDataset(lunet.randn(8, 3), lunet.ones(8):long())
    local err = errmsg(lunet.fit, m, data.DataLoader(ds, { batch_size = 4 }), { log = dir, quiet = true, progress = false })
    assert.truthy(err:find('fit: cannot write the log ' .. dir, 1, true), err)
  end)

  it('writes a CSV (header once) and JSONL log', function()
    local dir = tmpdir()
    local m = lunet.nn.Sequential(lunet.nn.Linear(3, 2))
    local ds = data.TensorDataset(lunet.randn(8, 3), lunet.ones(8):long())
    lunet.fit(m, data.DataLoader(ds, { batch_size = 4 }), { epochs = 2, log = dir .. '/m.csv', quiet = true, progress = false })
    lunet.fit(m, data.DataLoader(ds, { batch_size = 4 }), { epochs = 2, log = dir .. '/m.jsonl', quiet = true, progress = false })
    local f = assert(io.open(dir .. '/m.csv'))
    local csv = f:read('*a'); f:close()
    local lines = {}
    for l in csv:gmatch('[^\n]+') do lines[#lines + 1] = l end
    assert.are.equal(3, #lines, csv)
    assert.matches('^epoch,step,lr,train_loss', lines[1])
    assert.matches('^1,2,', lines[2])
    assert.matches('^2,4,', lines[3])
    f = assert(io.open(dir .. '/m.jsonl'))
    local js = f:read('*a'); f:close()
    local n = 0
    for l in js:gmatch('[^\n]+') do n = n + 1; assert.are.equal(n, require('lunet.json').decode(l).epoch) end
    assert.are.equal(2, n)
  end)
end)
