-- Files and handles used the wrong way: a DataLoader after close(), readers
-- and writers given FIFOs, directories, device nodes, symlinks and paths or
-- names with NUL bytes, and checkpoints whose state has the wrong types.
-- What could hang runs in a child process under `timeout`, so that a hang is
-- a failure, not a stuck suite.
local ffi = require 'ffi'
local lunet = require 'lunet'
local data = lunet.data
local C = require('lunet.core').C

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute('mkdir -p ' .. d) == 0)
  return d
end

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
      local data = lunet.data
      for _, w in ipairs({0, 4}) do
        local ds = data.TensorDataset(lunet.randn(64, 3, 8, 8), lunet.zeros(64):long())
        local l = data.DataLoader(ds, {batch_size = 8, workers = w, prefetch = 6})
        local it = l:iter()
        it(); it()
        l:close()
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
