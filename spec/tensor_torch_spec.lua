-- Reductions and index ops against PyTorch (fixtures written by
-- tools/gen_tensor_fixtures.py; this spec needs no Python).
local lunet = require 'lunet'
local fx = dofile('spec/fixtures/tensor_torch.lua')

local x = lunet.tensor(fx.x):view(fx.x_shape)
local sources = {
  x = x, p = x / 4 + 1, ['x>1.5'] = x:gt(1.5), ['x>-1.5'] = x:gt(-1.5),
}

local function run(c)
  local t = sources[c.src]
  if c.op == 'max' or c.op == 'min' then return t[c.op](t, c.dim) end
  if c.op == 'norm' then return t:norm(c.p, c.dim) end
  if c.op == 'var' or c.op == 'std' then return t[c.op](t, c.dim, {correction = c.correction}) end
  return t[c.op](t, c.dim)
end

describe('reductions match PyTorch', function()
  local groups = {}
  for _, c in ipairs(fx.cases) do
    groups[c.op] = groups[c.op] or {}
    table.insert(groups[c.op], c)
  end
  for _, op in ipairs({'sum', 'mean', 'prod', 'amax', 'amin', 'max', 'min', 'argmax', 'argmin', 'var', 'std', 'norm', 'any', 'all'}) do
    it(op .. ' over all elements and every dim', function()
      assert.is_true(#groups[op] > 0)
      for _, c in ipairs(groups[op]) do
        local r, i = run(c)
        local what = ('%s dim=%s p=%s corr=%s'):format(op, tostring(c.dim), tostring(c.p), tostring(c.correction))
        assert.same(c.shape, r:size(), what)
        local tol = (op == 'argmax' or op == 'argmin' or op == 'any' or op == 'all' or op == 'max'
          or op == 'min' or op == 'amax' or op == 'amin') and 0 or 2e-6
        local ok, err = pcall(assert.tensor_near, r:view(-1), c.out, tol)
        assert(ok, what .. ': ' .. tostring(err))
        if c.indices then assert.same(c.indices, i:view(-1):totable(), what) end
      end
    end)
  end
end)

describe('index ops match PyTorch', function()
  it('index_select', function()
    local s = fx.index_select
    local r = x:index_select(s.dim, lunet.tensor(s.index, {dtype = 'int64'}))
    assert.same(s.shape, r:size())
    assert.tensor_near(r:view(-1), s.out, 0)
  end)

  it('gather and scatter_add_', function()
    local g = fx.gather
    local idx = lunet.tensor(g.index, {dtype = 'int64'}):view(g.index_shape)
    assert.tensor_near(x:gather(g.dim, idx):view(-1), g.out, 0)
    local s = fx.scatter_add
    local r = lunet.zeros(s.shape):scatter_add_(s.dim, idx, x)
    assert.tensor_near(r:view(-1), s.out, 1e-6)
  end)
end)
