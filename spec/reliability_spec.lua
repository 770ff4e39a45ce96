-- Checkpoint integrity (atomic writes, crc32 verified on load, truncated /
-- corrupt / hostile files), loading into a model with mismatched keys,
-- lunet.detect_anomaly, and fit's stop on a non-finite loss.
local lunet = require 'lunet'
local checkpoint = require 'lunet.checkpoint'
local nn = lunet.nn

local function read(path) local f = assert(io.open(path, 'rb')); local s = f:read('*a'); f:close(); return s end
local function write(path, s) local f = assert(io.open(path, 'wb')); f:write(s); f:close() end
local function rss_kb()
  return tonumber(read('/proc/self/status'):match('VmRSS:%s*(%d+)'))
end
local function le64(n)
  local b = {}
  for i = 1, 8 do b[i] = string.char(n % 256); n = math.floor(n / 256) end
  return table.concat(b)
end

local function model()
  lunet.manual_seed(3)
  return nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3))
end

local function state_of(m)
  local opt = lunet.optim.SGD(m:parameters(), { lr = 0.1, momentum = 0.9 })
  local loss = m(lunet.randn(2, 4)):sum()
  loss:backward()
  opt:step()
  return { model = m:state_dict(), optimizer = opt:state_dict(), step = 7, note = 'os.exit(1) -- text only' }
end

describe('checkpoint integrity', function()
  local dir = os.tmpname()
  os.remove(dir)
  os.execute('mkdir -p ' .. dir)
  local path = dir .. '/run.ckpt'
  local m = model()
  checkpoint.save(path, state_of(m))
  local bytes = read(path)
  local hlen = 0
  for i = 8, 1, -1 do hlen = hlen * 256 + bytes:byte(i) end

  teardown(function() os.execute('rm -rf ' .. dir) end)

  it('keeps a crc32 of the payload in the metadata and round-trips the state', function()
    local _, meta = lunet.load(path)
    assert.truthy(meta['lunet.crc32']:match('^%x%x%x%x%x%x%x%x$'))
    local st = checkpoint.load(path)
    assert.equal(7, st.step)
    assert.equal('os.exit(1) -- text only', st.note)   -- strings stay strings: nothing runs
    for k, v in pairs(m:state_dict()) do assert.tensor_near(st.model[k], v, 0) end
    -- the file is replaced atomically: no temporary file stays beside it
    local p = io.popen('ls -A ' .. dir); local files = p:read('*a'); p:close()
    assert.equal('run.ckpt\n', files)
  end)

  it('detects a flipped bit in every tensor byte and in the state JSON', function()
    local p = dir .. '/flip.ckpt'
    local data_start = 8 + hlen
    local n, caught = 0, 0
    -- every byte of the data, and a stride over the header (where the state lives)
    local positions = {}
    for i = data_start + 1, #bytes do positions[#positions + 1] = i end
    for i = 9, data_start, 7 do positions[#positions + 1] = i end
    for _, i in ipairs(positions) do
      local b = bytes:byte(i)
      write(p, bytes:sub(1, i - 1) .. string.char(bit.bxor(b, 2 ^ (i % 8))) .. bytes:sub(i + 1))
      n = n + 1
      local ok, err = pcall(checkpoint.load, p)
      if ok then
        -- only bytes outside the payload may change without an error (e.g. the
        -- "format" value); the state must then be exactly the original
        assert.is_true(i <= data_start, 'a flipped data byte loaded: ' .. i)
        assert.equal(7, err.step)
        for k, v in pairs(m:state_dict()) do assert.tensor_near(err.model[k], v, 0) end
      else
        caught = caught + 1
        assert.truthy(tostring(err):find(p, 1, true), err)
        if i > data_start then assert.truthy(tostring(err):find('checksum mismatch', 1, true), err) end
      end
    end
    assert.is_true(caught >= n - 10, ('%d of %d flips caught'):format(caught, n))
  end)

  it('gives a clear error for every truncation', function()
    local p = dir .. '/cut.ckpt'
    for len = 0, #bytes - 1, 13 do
      write(p, bytes:sub(1, len))
      local ok, err = pcall(checkpoint.load, p)
      assert.is_false(ok)
      assert.truthy(tostring(err):find('load: ' .. p, 1, true), err)
      assert.truthy(tostring(err):find('truncated') or tostring(err):find('too short') or
        tostring(err):find('header') or tostring(err):find('bytes of data'), err)
    end
  end)

  it('rejects a dtype changed in the header (same size) by the checksum', function()
    local p = dir .. '/dtype.ckpt'
    local s = bytes:gsub('"F32"', '"I32"', 1)
    assert.are_not.equal(s, bytes)
    write(p, s)
    local ok, err = pcall(checkpoint.load, p)
    assert.is_false(ok)
    assert.truthy(err:find('checksum mismatch', 1, true), err)
  end)

  it('refuses oversize headers and absurd sizes without allocating them', function()
    local p = dir .. '/big.ckpt'
    local before = rss_kb()
    write(p, le64(2 ^ 50) .. '{}')
    local ok, err = pcall(checkpoint.load, p)
    assert.truthy(not ok and err:find('exceeds the file size', 1, true), err)
    -- a sparse 120 MB file whose header claims 110 MB: over the 100 MB limit
    write(p, le64(110 * 2 ^ 20) .. '{}')
    os.execute(('truncate -s 120M %s'):format(p))
    ok, err = pcall(checkpoint.load, p)
    assert.truthy(not ok and err:find('over the limit', 1, true), err)
    -- a tensor that claims 2^62 elements in a tiny file
    local h = '{"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,16]}}'
    write(p, le64(#h) .. h .. string.rep('\0', 16))
    ok, err = pcall(checkpoint.load, p)
    assert.truthy(not ok and err:find('needs', 1, true), err)
    assert.is_true(rss_kb() - before < 50 * 1024, 'RSS grew by ' .. (rss_kb() - before) .. ' kB')
  end)

  it('names the file and the problem for hostile state metadata', function()
    local p = dir .. '/hostile.ckpt'
    local w = lunet.ones(2)
    local cases = {
      { '{"a":[1,{"__tensor__":"w2"}]}', 'bad lunet.state: tensor w2 is missing' },
      { '"text"', 'not an object' },
      { '{"a":{"__tensor__":"nope"}}', 'tensor nope is missing' },
      { '{"a":' .. string.rep('{"b":', 300) .. '1' .. string.rep('}', 300) .. '}', 'nested too deeply' },
      { '{"a":', 'bad metadata' },
      { string.rep('[', 100000), 'checkpoint.load' },
    }
    for i, c in ipairs(cases) do
      -- a forged file: its crc recomputed, so only the state's shape can stop it
      lunet.save(p, { w = w }, { ['lunet.state'] = c[1], format = 'lunet-checkpoint-1',
        ['lunet.crc32'] = checkpoint.payload_crc({ w = w }, c[1]) })
      local ok, err = pcall(checkpoint.load, p)
      assert.is_false(ok, 'case ' .. i)
      assert.truthy(tostring(err):find(p, 1, true), tostring(err))
      assert.truthy(tostring(err):find(c[2], 1, true), ('case %d: %s'):format(i, tostring(err)))
    end
    -- not a checkpoint at all
    lunet.save(p, { w = w })
    local ok, err = pcall(checkpoint.load, p)
    assert.truthy(not ok and err:find('is not a lunet checkpoint', 1, true), err)
  end)

  it('loading into a different model names each mismatched key and shape', function()
    local other = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3), nn.Linear(3, 2))
    local st = checkpoint.load(path)
    local ok, err = pcall(other.load_state_dict, other, st.model)
    assert.is_false(ok)
    assert.truthy(err:find('missing keys: 3.bias, 3.weight', 1, true), err)
    assert.truthy(err:find('0.weight: checkpoint has shape {5,4}, model has {6,4}', 1, true), err)
    assert.truthy(err:find('0.bias: checkpoint has shape {5}, model has {6}', 1, true), err)
    assert.truthy(err:find('2.weight: checkpoint has shape {3,5}, model has {3,6}', 1, true), err)
    -- and nothing was copied
    local fresh = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3), nn.Linear(3, 2))
    assert.is_false(pcall(fresh.load_state_dict, fresh, { ['0.weight'] = lunet.zeros(6, 4), extra = lunet.ones(1) }))
  end)

  it('fit with resume = true on a checkpoint of another model names the mismatch', function()
    local x = lunet.randn(8, 4)
    local y = lunet.ones(8):long()
    local loader = lunet.data.DataLoader(lunet.data.TensorDataset(x, y), { batch_size = 4 })
    local other = nn.Sequential(nn.Linear(4, 2))
    local ok, err = pcall(lunet.fit, other, loader, { checkpoint = path, resume = true, quiet = true, progress = false })
    assert.is_false(ok)
    assert.truthy(err:find('load_state_dict', 1, true) and err:find('0.weight: checkpoint has shape {5,4}, model has {2,4}', 1, true), err)
  end)
end)

describe('lunet.detect_anomaly', function()
  it('names the forward op that first produced NaN', function()
    local x = lunet.tensor({ 1, -1, 4, 2 }):requires_grad_()
    local line = debug.getinfo(1, 'l').currentline + 2
    local ok, err = pcall(lunet.detect_anomaly, function()
      local y = (x * 2):log()        -- NaN at element 2
      return (y:exp() + 1):sum()
    end)
    assert.is_false(ok)
    -- (at the line of the op: where to look)
    assert.equal('spec/reliability_spec.lua:' .. line .. ': detect_anomaly: forward of log produced NaN (1 of 4 elements, shape {4})',
      err:gsub('^.-(spec/reliability_spec%.lua)', '%1'))
  end)

  it('names a forward Inf inside an nn layer (functional ops)', function()
    local lin = nn.Linear(2, 2)
    lunet.no_grad(function() lin.weight:fill_(1e38); lin.bias:zero_() end)
    local ok, err = pcall(lunet.detect_anomaly, function() return lin(lunet.ones(1, 2) * 1e3):sum() end)
    assert.is_false(ok)
    assert.truthy(err:find('reliability_spec%.lua:%d+: detect_anomaly: forward of %S+ produced Inf'), err)
  end)

  it('names the backward op that first produced a non-finite gradient', function()
    local x = lunet.tensor({ 0, 1, 4 }):requires_grad_()
    local ok, err = pcall(lunet.detect_anomaly, function()
      local y = x:sqrt()              -- finite forward, gradient 1/(2 sqrt 0) = Inf
      y:sum():backward()
    end)
    assert.is_false(ok)
    assert.truthy(err:find('backward of sqrt: detect_anomaly: the gradient for input 1 has Inf (1 of 3 elements, shape {3})', 1, true), err)
  end)

  it('is off by default, restores the mode after an error, and passes clean runs through', function()
    local anomaly = require 'lunet.anomaly'
    assert.is_false(anomaly.is_enabled())
    local x = lunet.tensor({ -1 }):requires_grad_()
    assert.is_true(x:log():isnan():all():item())   -- no check outside
    local a, b = lunet.detect_anomaly(function(u) return u + 1, 'two' end, 1)
    assert.equal(2, a); assert.equal('two', b)
    pcall(lunet.detect_anomaly, function() return x:log() end)
    assert.is_false(anomaly.is_enabled())
    assert.is_false(lunet.set_detect_anomaly(true))
    assert.is_false(pcall(function() return x:log() end))
    assert.is_true(lunet.set_detect_anomaly(false))
    assert.has_error(function() lunet.detect_anomaly(42) end, 'detect_anomaly: expected a function, got number')
    -- (1 was taken as true)
    local ok, err = pcall(lunet.set_detect_anomaly, 1)
    assert.is_false(ok)
    assert.matches('set_detect_anomaly: expected true or false, got number', err, 1, true)
    assert.is_false(anomaly.is_enabled())
  end)
end)

describe('fit and a non-finite loss', function()
  it('stops with an error naming the epoch and the step', function()
    local x = lunet.randn(16, 3)
    local y = lunet.ones(16):long()
    local loader = lunet.data.DataLoader(lunet.data.TensorDataset(x, y), { batch_size = 4 })
    local m = nn.Linear(3, 2)
    local calls = 0
    local crit = nn.CrossEntropyLoss()
    local bad_loss = function(out, t)
      calls = calls + 1
      local l = crit(out, t)
      if calls == 3 then l = l * (0 / 0) end
      return l
    end
    local ok, err = pcall(lunet.fit, m, loader, { loss = bad_loss, epochs = 2, quiet = true, progress = false })
    assert.is_false(ok)
    assert.truthy(err:find('fit: loss became nan at epoch 1, step 3; stopping', 1, true)
      or err:find('fit: loss became -nan at epoch 1, step 3; stopping', 1, true), err)
    -- checked before the update: the parameters are still finite
    for _, p in ipairs(m:parameters()) do assert.is_false((p:isnan() + p:isinf()):any():item()) end
    calls = 0
    local inf_loss = function(out, t) calls = calls + 1; return crit(out, t) * (calls == 6 and math.huge or 1) end
    ok, err = pcall(lunet.fit, m, loader, { loss = inf_loss, epochs = 2, quiet = true, progress = false })
    assert.truthy(not ok and err:find('fit: loss became inf at epoch 2, step 6; stopping', 1, true), err)
  end)
end)
