-- The Lua-API fuzzer (tools/fuzz_api.lua) in the normal suite: its corpus of
-- past crashes (tools/corpus/api/: issue 21's crashes and what the fuzzer
-- found since) replayed, each file in a child process; a fixed run of
-- cases; and the fuzzer itself seen to catch a planted crash, hang and
-- broken invariant, with a reproducer that fails on replay.
local function sh(cmd)
  local p = io.popen(cmd .. ' 2>&1; echo "rc=$?"')
  local out = p:read('*a')
  p:close()
  return tonumber(out:match('rc=(%d+)%s*$')), out
end

local function tmpdir()
  local p = io.popen('mktemp -d')
  local d = p:read('*l')
  p:close()
  return d
end

describe('fuzz_api', function()
  it('replays every file of the corpus in a child process', function()
    local rc, out = sh('luajit tools/fuzz_api.lua --replay --timeout 120')
    local n, passed, failed = out:match('(%d+) corpus files, (%d+) passed, (%d+) failed')
    assert.equal(0, rc, out)
    assert.is_true(tonumber(n) >= 7, out)
    assert.equal(n, passed, out)
    assert.equal('0', failed, out)
  end)

  it('runs 600 cases of seed 1 with no crash, hang, broken invariant or raw Lua error', function()
    local dir = tmpdir()
    local rc, out = sh('luajit tools/fuzz_api.lua --cases 600 --seed 1 --strict --timeout 120 --corpus ' .. dir)
    os.execute('rm -rf ' .. dir)
    assert.equal(0, rc, out)
    assert.truthy(out:find('600 cases in 6 batches', 1, true), out)
    assert.truthy(out:find('0 raw Lua errors', 1, true), out)
  end)

  -- (a crash under ASan is its report and an abort, or exit status 1)
  for _, c in ipairs({ { 'crash', '[ek][xi][il]', 60 }, { 'hang', 'timed out', 3 }, { 'fail', 'an invariant failed', 60 } }) do
    it('catches a planted ' .. c[1] .. ' and writes a reproducer that fails on replay', function()
      local dir = tmpdir()
      local rc, out = sh(('FUZZ_API_PLANT=23:%s luajit tools/fuzz_api.lua --cases 60 --batch 20 --seed 3 --timeout %d --corpus %s')
        :format(c[1], c[3], dir))
      assert.equal(1, rc, out)
      assert.truthy(out:find('FOUND: seed 3, case 23: ' .. c[2]), out)
      local f = io.open(dir .. '/crash-3-23.lua')
      assert.truthy(f, out)
      local src = f:read('*a')
      f:close()
      assert.truthy(src:find('-- fuzz_case seed 3 case 23', 1, true))
      assert.is_nil(src:find('fuzz_case seed 3 case 22', 1, true))   -- the case alone reproduces it
      local rc2, out2 = sh(('luajit tools/fuzz_api.lua --replay --timeout %d --corpus %s'):format(c[3], dir))
      os.execute('rm -rf ' .. dir)
      assert.equal(1, rc2, out2)
      assert.truthy(out2:find('1 corpus files, 0 passed, 1 failed', 1, true), out2)
    end)
  end

  it('what it found stays fixed (values; tools/corpus/api/crash-* replay them under ASan+UBSan)', function()
    local lunet = require 'lunet'
    -- int64 sums wrap as PyTorch's (no signed overflow): crash-7-818
    local big = lunet.tensor({ -2 ^ 63, -2 ^ 63, 5 }, { dtype = 'int64' })
    assert.equal(5, big:sum():item())
    assert.equal(5, big:view(3, 1):sum(1):item())
    -- an index of 2^63 - 1 is named as such, not overflowed: crash-7-718
    local ok, err = pcall(function()
      return lunet.ones(3):index_select(1, lunet.tensor({ 2 ^ 62 }, { dtype = 'int64' })):sum():item()
    end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find('index_select: index 4611686018427387904 is out of range', 1, true), err)
    -- a convolution of an empty batch with padding: crash-11-5234
    local y = lunet.nn.functional.conv2d(lunet.randn(0, 1, 4, 6), lunet.randn(4, 1, 2, 3), nil, { padding = { 3, 4 } })
    assert.same({ 0, 4, 9, 12 }, y:size())
    -- an empty view's strides stay within the byte range: crash-12-61556, crash-21-6129
    local a = lunet.randn(3, 4)
    ok, err = pcall(a.as_strided, a, { 0 }, { 2 ^ 62 }, 2)
    assert.is_false(ok)
    assert.truthy(tostring(err):find('as_strided: the strides of this empty view overflow', 1, true), err)
    assert.is_false(pcall(a.as_strided, a, { 4, 0, 3 }, { 2 ^ 31, 0, -2 ^ 62 }, 2))
    assert.equal(0, a:as_strided({ 0, 5 }, { 100, 1000 }, 11):numel())   -- ordinary strides past the end still work
    assert.equal(0, a:narrow(1, 4, 0):add_(1):numel())
  end)
end)
