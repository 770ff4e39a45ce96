-- Randomised reductions and index ops on random shapes, layouts (transposed,
-- narrowed, expanded) and dtypes, against a plain Lua float64 reference.
local lunet = require 'lunet'

local function flat(t, out)
  out = out or {}
  if type(t) == 'table' then for _, v in ipairs(t) do flat(v, out) end else out[#out + 1] = t end
  return out
end

-- values of t as a flat row-major list plus its shape
local function values(t)
  local v = flat(t:totable())
  for i = 1, #v do if type(v[i]) == 'boolean' then v[i] = v[i] and 1 or 0 end end
  return v, t:size()
end

-- reference reduction of a flat row-major list over dim d (nil = all)
local function ref_reduce(op, v, shape, d, p)
  local n = #shape
  local groups, order = {}, {}
  local idx = {}
  for i = 1, n do idx[i] = 1 end
  for k = 1, #v do
    local key
    if d == nil then key = 1 else
      local parts = {}
      for i = 1, n do if i ~= d then parts[#parts + 1] = idx[i] end end
      key = table.concat(parts, ',')
    end
    if not groups[key] then groups[key] = {}; order[#order + 1] = key end
    table.insert(groups[key], v[k])
    for i = n, 1, -1 do idx[i] = idx[i] + 1; if idx[i] <= shape[i] then break end; idx[i] = 1 end
  end
  if #v == 0 then   -- every group is empty; there is one per kept position
    local count = 1
    for i = 1, n do if i ~= d then count = count * shape[i] end end
    if d == nil then count = 1 end
    for k = 1, count do order[k] = k; groups[k] = {} end
  end
  local out = {}
  for _, key in ipairs(order) do
    local g = groups[key]
    local r
    if op == 'sum' then r = 0; for _, x in ipairs(g) do r = r + x end
    elseif op == 'prod' then r = 1; for _, x in ipairs(g) do r = r * x end
    elseif op == 'mean' then r = 0; for _, x in ipairs(g) do r = r + x end; r = r / #g
    elseif op == 'amax' then r = -math.huge; for _, x in ipairs(g) do r = math.max(r, x) end
    elseif op == 'amin' then r = math.huge; for _, x in ipairs(g) do r = math.min(r, x) end
    elseif op == 'argmax' or op == 'argmin' then
      r = 1
      for i, x in ipairs(g) do if (op == 'argmax' and x > g[r]) or (op == 'argmin' and x < g[r]) then r = i end end
    elseif op == 'var' then
      local s = 0; for _, x in ipairs(g) do s = s + x end
      local m, s2 = s / #g, 0
      for _, x in ipairs(g) do s2 = s2 + (x - m) ^ 2 end
      r = s2 / math.max(0, #g - 1)   -- 0/0: nan for fewer than 2 values
    elseif op == 'norm' then r = 0; for _, x in ipairs(g) do r = r + math.abs(x) ^ p end; r = r ^ (1 / p)
    elseif op == 'any' then r = false; for _, x in ipairs(g) do r = r or x ~= 0 end
    elseif op == 'all' then r = true; for _, x in ipairs(g) do r = r and x ~= 0 end
    end
    out[#out + 1] = r
  end
  return out
end

-- m random small integers (exact sums) of dtype, 1-d
local function fresh(m, dtype)
  local t = (lunet.rand(m) * 10 - 5):floor()
  if dtype == 'bool' then t = t:gt(0) end
  return t:to(dtype)
end

-- a random tensor of the given shape in a random layout
local function random_tensor(shape, dtype)
  local nd = #shape
  local function numel(s) local n = 1 for _, v in ipairs(s) do n = n * v end return n end
  local layout = math.random(4)
  if layout == 1 or nd < 2 then                        -- contiguous
    return fresh(numel(shape), dtype):view(shape)
  elseif layout == 2 then                              -- transposed storage
    local rs, perm = {}, {}
    for i = 1, nd do rs[i] = shape[nd - i + 1]; perm[i] = nd - i + 1 end
    return fresh(numel(shape), dtype):view(rs):permute(perm)
  elseif layout == 3 then                              -- narrowed inner dim
    local ws = {}
    for i = 1, nd do ws[i] = shape[i] end
    ws[nd] = shape[nd] + 1
    return fresh(numel(ws), dtype):view(ws):narrow(nd, 2, shape[nd])
  else                                                 -- expanded along a random dim
    local d = math.random(nd)
    local s1 = {}
    for i = 1, nd do s1[i] = i == d and 1 or shape[i] end
    return fresh(numel(s1), dtype):view(s1):expand(shape)
  end
end

describe('randomised reductions', function()
  it('match a Lua reference over 400 random shapes, layouts, dtypes, ops and dims', function()
    math.randomseed(42)
    lunet.manual_seed(42)
    local ops = {'sum', 'prod', 'mean', 'amax', 'amin', 'argmax', 'argmin', 'var', 'norm', 'any', 'all'}
    local float_only = {mean = true, var = true, norm = true}
    local dtypes = {'float32', 'float64', 'int32', 'int64', 'uint8', 'bool'}
    local checked = 0
    for case = 1, 400 do
      local nd = math.random(1, 4)
      local shape = {}
      for i = 1, nd do shape[i] = math.random(0, 5) == 0 and (math.random(3) == 1 and 0 or 1) or math.random(2, 6) end
      local op = ops[math.random(#ops)]
      local dt = dtypes[math.random(#dtypes)]
      if float_only[op] and not dt:match('float') then dt = 'float64' end
      if op == 'prod' and dt == 'bool' then dt = 'int64' end
      local x = random_tensor(shape, dt)
      local d = math.random(0, nd)
      if d == 0 then d = nil end
      local n = x:numel()
      local rsize = d and shape[d] or n
      local what = ('case %d: %s %s shape {%s} dim %s strides {%s}'):format(case, op, dt,
        table.concat(shape, ','), tostring(d), table.concat(x:stride(), ','))
      if (op:match('^arg') or op == 'amax' or op == 'amin') and rsize == 0 then
        assert.has_error(function() return x[op](x, d) end)
      else
        local p = op == 'norm' and ({1, 2, 3})[math.random(3)] or nil
        local r
        if op == 'norm' then r = x:norm(p, d)
        elseif op == 'var' then r = x:var(d)
        else r = x[op](x, d) end
        local v, sh = values(x)
        local ref = ref_reduce(op, v, sh, d, p)
        local got = values(r)
        assert.equal(#ref, #got, what)
        for i = 1, #ref do
          local a, b = got[i], ref[i]
          if type(b) == 'boolean' then b = b and 1 or 0 end
          local ok = a == b or (a ~= a and b ~= b) or math.abs(a - b) <= 1e-5 * (1 + math.abs(b))
          if op == 'prod' and not dt:match('float') and math.abs(b) >= 2 ^ 53 then ok = true end  -- int64 wraps
          assert(ok, what .. (': element %d got %s expected %s'):format(i, tostring(a), tostring(b)))
        end
        checked = checked + 1
      end
    end
    assert.is_true(checked > 300)
  end)

  it('index_select and gather match a Lua reference on random layouts', function()
    math.randomseed(7)
    for case = 1, 100 do
      local nd = math.random(1, 3)
      local shape = {}
      for i = 1, nd do shape[i] = math.random(1, 5) end
      local x = random_tensor(shape, ({'float32', 'int64', 'uint8'})[math.random(3)])
      local d = math.random(nd)
      local k = math.random(0, 4)
      local idx = {}
      for i = 1, k do idx[i] = math.random(shape[d]) end
      local r = x:index_select(d, lunet.tensor(idx, {dtype = 'int64'}):view(k))
      local xt = x:totable()
      local rt = r:totable()
      local function get(t, pos) for _, p in ipairs(pos) do t = t[p] end return t end
      local osh = r:size()
      local total = 1
      for _, s in ipairs(osh) do total = total * s end
      local pos = {}
      for i = 1, nd do pos[i] = 1 end
      for _ = 1, total do
        local src = {}
        for i = 1, nd do src[i] = pos[i] end
        src[d] = idx[pos[d]]
        assert.equal(get(xt, src), get(rt, pos), ('case %d'):format(case))
        for i = nd, 1, -1 do pos[i] = pos[i] + 1; if pos[i] <= osh[i] then break end; pos[i] = 1 end
      end
      -- gather with a random index of the same rank, no larger than x off dim d
      local gshape = {}
      for i = 1, nd do gshape[i] = i == d and math.random(1, 4) or math.random(1, shape[i]) end
      local gsz = 1
      for _, s in ipairs(gshape) do gsz = gsz * s end
      local gi = {}
      for i = 1, gsz do gi[i] = math.random(shape[d]) end
      local git = lunet.tensor(gi, {dtype = 'int64'}):view(gshape)
      local g = x:gather(d, git):totable()
      local gitt = git:totable()
      for i = 1, nd do pos[i] = 1 end
      for _ = 1, gsz do
        local src = {}
        for i = 1, nd do src[i] = pos[i] end
        src[d] = get(gitt, pos)
        assert.equal(get(xt, src), get(g, pos), ('gather case %d'):format(case))
        for i = nd, 1, -1 do pos[i] = pos[i] + 1; if pos[i] <= gshape[i] then break end; pos[i] = 1 end
      end
    end
  end)
end)
