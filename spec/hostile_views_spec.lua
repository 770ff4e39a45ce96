-- Hostile shapes, strides and offsets (issue 21, class 2): every view made
-- from random sizes, strides and offsets -- huge, negative, wrapping -- either
-- raises a named error or reads exactly the elements its strides say, and
-- every op on it stays inside its storage. A seeded loop, so a failure
-- replays; under the ASan+UBSan build a wrapped product is a report.
local lunet = require 'lunet'

local function strip(err) return (tostring(err):gsub('^[^:\n]*:%d+: ', '')) end

-- a small deterministic generator (the spec must not depend on lunet's)
local function lcg(seed)
  local s = seed
  return function(n)
    s = (s * 16807) % 2147483647
    return s % n
  end
end

local HUGE = { 2 ^ 31, 2 ^ 32, 2 ^ 62, 2 ^ 63 - 1024, 2 ^ 40, 3 * 2 ^ 60 }

local function pick_size(r)
  local k = r(10)
  if k < 7 then return r(5) end
  return HUGE[r(#HUGE) + 1]
end

local function pick_stride(r)
  local k = r(10)
  if k < 6 then return r(7) - 2 end
  local v = HUGE[r(#HUGE) + 1]
  return r(2) == 0 and v or -v
end

local function pick_offset(r)
  local k = r(10)
  if k < 7 then return r(12) end
  return HUGE[r(#HUGE) + 1]
end

-- the elements of view v of base (values 0..n-1) by walking its strides in Lua
local function expected(shape, stride, offset)
  local out, idx, nd = {}, {}, #shape
  for d = 1, nd do
    if shape[d] == 0 then return out end
    idx[d] = 0
  end
  while true do
    local off = offset
    for d = 1, nd do off = off + idx[d] * stride[d] end
    out[#out + 1] = off
    local d = nd
    while d >= 1 do
      idx[d] = idx[d] + 1
      if idx[d] < shape[d] then break end
      idx[d] = 0
      d = d - 1
    end
    if d < 1 then return out end
  end
end

local function flat(t)
  local buf, n = t:double():contiguous():read()
  local out = {}
  for i = 0, n - 1 do out[i + 1] = buf[i] end
  return out
end

describe('hostile views', function()
  it('as_strided with random huge sizes, strides and offsets: named error or exact elements', function()
    local r = lcg(21)
    local ok_count, err_count = 0, 0
    for case = 1, 400 do
      local n = r(40)
      local base = lunet.arange(n):double()
      local nd = r(5)
      local shape, stride = {}, {}
      for d = 1, nd do shape[d] = pick_size(r); stride[d] = pick_stride(r) end
      local offset = pick_offset(r)
      local what = ('case %d: n=%d shape {%s} stride {%s} offset %s'):format(case, n,
        table.concat(shape, ','), table.concat(stride, ','), offset)
      local ok, v = pcall(base.as_strided, base, shape, stride, offset)
      if not ok then
        err_count = err_count + 1
        assert.truthy(strip(v):find('^as_strided: '), what .. ': ' .. strip(v))
      else
        ok_count = ok_count + 1
        local numel = 1
        for d = 1, nd do numel = numel * shape[d] end
        assert.equal(numel, v:numel(), what)
        if numel > 0 and numel <= 4096 then
          local want, got = expected(shape, stride, offset), flat(v)
          for i = 1, #want do
            assert.is_true(want[i] >= 0 and want[i] < n, what)
            assert.equal(want[i], got[i], what)
          end
        end
        if numel > 0 then
          -- the corners (first two and last two indices of each dim), by selects
          local lists = {}
          for d = 1, nd do
            local sz = shape[d]
            lists[d] = sz <= 4 and {} or { 1, 2, sz - 1, sz }
            if sz <= 4 then for i = 1, sz do lists[d][i] = i end end
          end
          local function walk(d, t, off)
            if d > nd then
              assert.is_true(off >= 0 and off < n, what)
              assert.equal(off, t:item(), what)
              return
            end
            for _, i in ipairs(lists[d]) do walk(d + 1, t:select(1, i), off + (i - 1) * stride[d]) end
          end
          walk(1, v, offset)
        end
        if numel > 0 and numel <= 4096 then
          -- ops on the view stay inside the storage and agree with it
          assert.equal(numel, #v:contiguous():view(-1):totable(), what)
          if nd > 0 then
            local d = r(nd) + 1
            if shape[d] > 0 then
              local s = v:select(d, shape[d])
              assert.equal(numel / shape[d], s:numel(), what)
            end
            local e = v:unsqueeze(1)
            assert.equal(numel, e:numel(), what)
          end
        end
      end
    end
    assert.is_true(ok_count > 60 and err_count > 60, ok_count .. ' views, ' .. err_count .. ' errors')
  end)

  it('narrow, select, expand, view and reshape of views with huge strides on size-1 dims', function()
    local base = lunet.arange(12):double()
    local huge = { 2 ^ 62, -(2 ^ 62), 2 ^ 63 - 1024, -(2 ^ 63) }
    for _, h in ipairs(huge) do
      local v = base:as_strided({ 1, 3, 1 }, { h, 2, h }, 1)     -- size-1 dims: any stride
      assert.same({ { { 1 }, { 3 }, { 5 } } }, v:totable())
      assert.same({ 1, 3, 5 }, v:reshape(3):totable())
      assert.same({ 3, 5 }, v:narrow(2, 2, 2):reshape(2):totable())
      assert.same({ 5 }, v:select(2, 3):reshape(1):totable())
      assert.same({ 3, 3 }, v:expand(3, 3, 1):reshape(3, 3):size())
      local u = v:unsqueeze(1)
      assert.same({ 1, 1, 3, 1 }, u:size())
      assert.same({ 1, 3, 5 }, u:contiguous():view(-1):totable())
      assert.same({ 1, 3, 5 }, v:squeeze():totable())
      assert.equal(9, v:sum():item())
      -- in place through such a view (the overlap checks take |stride|)
      local w = lunet.arange(12):double()
      local wv = w:as_strided({ 1, 3, 1 }, { h, 2, h }, 1)
      wv:mul_(2)
      wv:add_(wv)
      wv:copy_(wv:clone():add(1))
      assert.same({ 5, 13, 21 }, wv:reshape(3):totable())
      assert.equal(0, w[1]:item())
    end
  end)

  it('expand and empty shapes whose counts or strides overflow are named errors', function()
    local one = lunet.ones(1, 1)
    local cases = {
      { function() return one:expand(2 ^ 32, 2 ^ 32) end, 'expand: shape {4294967296,4294967296} is too large' },
      { function() return one:expand(2 ^ 62, 2 ^ 62) end, 'expand: shape' },
      { function() return lunet.ones(1):expand(2 ^ 31, 2 ^ 31, 2 ^ 31) end, 'expand: shape' },
      { function() return lunet.empty(0, 2 ^ 62, 2 ^ 62) end, 'empty: shape {0,4611686018427387904,4611686018427387904} is too large (its strides overflow)' },
      { function() return lunet.zeros(2 ^ 62, 0, 2 ^ 62) end, 'is too large' },
      { function() return lunet.zeros(0, 2 ^ 40, 2 ^ 40) end, 'is too large (its strides overflow)' },
      { function() return lunet.empty(2 ^ 63) end, 'empty: size 1 must be an integer' },
      { function() return lunet.empty(2 ^ 64) end, 'empty: size 1 must be an integer' },
      { function() return one:view(2 ^ 63) end, 'view: size 1 must be an integer' },
      { function() return lunet.ones(3):as_strided({ 2 }, { 2 ^ 63 }) end, 'as_strided: stride 1 must be an integer' },
      { function() return lunet.ones(3):as_strided({ 2 }, { 1 }, 2 ^ 62) end, 'as_strided: storage offset 4611686018427387904 is out of range' },
      { function() return lunet.ones(3):as_strided({ 2, 2 }, { 2 ^ 62, -(2 ^ 62) }) end, 'as_strided: view reaches outside the storage' },
      { function() return lunet.ones(3):as_strided({ 3, 3 }, { 2 ^ 62, 2 ^ 62 }, 2) end, 'as_strided: view reaches outside the storage' },
      { function() return lunet.ones(3):narrow(1, 2 ^ 62, 1) end, 'narrow: range' },
      { function() return lunet.ones(3):select(1, -(2 ^ 62)) end, 'select: index' },
    }
    for i, c in ipairs(cases) do
      local ok, err = pcall(c[1])
      assert.is_false(ok, 'case ' .. i .. ' gave no error')
      assert.truthy(strip(err):find(c[2], 1, true), ('case %d: got "%s"'):format(i, strip(err)))
    end
    -- an expanded view that fits: numel is exact, and reading it works
    local e = one:expand(2 ^ 20, 2 ^ 20)
    assert.equal(2 ^ 40, e:numel())
    assert.equal(2 ^ 20, one:expand(2 ^ 20, 1):sum():item())
  end)

  it('matmul with broadcast batch dims whose product overflows is a named error', function()
    local a = lunet.ones(1, 1, 1):expand(2 ^ 40, 1, 1)
    local b = lunet.ones(1, 1, 1):expand(1, 1, 1)
    local big = lunet.ones(1, 1, 1, 1):expand(2 ^ 40, 1, 1, 1)
    local ok, err = pcall(function() return big:matmul(a) end)
    assert.is_false(ok)
    assert.truthy(strip(err):find('matmul: ', 1, true), strip(err))
    assert.same({ 1, 1, 1 }, b:matmul(b):size())
  end)
end)

describe('hostile shapes in ops that combine sizes', function()
  it('broadcasting and cat of expanded tensors whose sizes overflow are named errors', function()
    local col = lunet.ones(1, 1):expand(2 ^ 31, 1)
    local row = lunet.ones(1, 1):expand(1, 2 ^ 31)
    local cases = {
      { function() return lunet.ones(1):expand(2 ^ 59) + lunet.ones(16, 1) end, 'add: the broadcast shape {16,576460752303423488} is too large' },
      { function() return lunet.ones(1, 1):expand(2 ^ 40, 1):mul(lunet.ones(1, 1):expand(1, 2 ^ 40)) end, 'mul: the broadcast shape' },
      { function() return lunet.where(lunet.ones(1, 1):bool():expand(2 ^ 40, 1), col:narrow(1, 1, 1), lunet.ones(1, 1):expand(1, 2 ^ 40)) end, 'where: the broadcast shape' },
      { function() local e = lunet.ones(1, { dtype = 'uint8' }):expand(2 ^ 62); return lunet.cat({ e, e }) end, 'cat: the concatenated size of dim 1 overflows (tensor 2)' },
      { function() local e = lunet.ones(1):expand(2 ^ 59); return lunet.cat({ e, e, e, e }) end, 'cat: ' },
    }
    for i, c in ipairs(cases) do
      local ok, err = pcall(c[1])
      assert.is_false(ok, 'case ' .. i .. ' gave no error')
      assert.truthy(strip(err):find(c[2], 1, true), ('case %d: got "%s"'):format(i, strip(err)))
    end
    -- what fits still works
    assert.same({ 3, 4 }, (col:narrow(1, 1, 3) + lunet.ones(1, 4)):size())
    assert.same({ 2 ^ 31, 2 ^ 29 }, (col:expand(2 ^ 31, 2 ^ 29)):size())
    assert.is_true(row:numel() == 2 ^ 31)
  end)
end)
