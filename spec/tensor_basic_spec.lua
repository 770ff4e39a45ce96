local lunet = require 'lunet'

describe('tensor creation', function()
  it('builds from nested tables with shape and dtype', function()
    local t = lunet.tensor{{1, 2, 3}, {4, 5, 6}}
    assert.same({2, 3}, t:size())
    assert.equal('float32', t.dtype)
    assert.equal('cpu:0', t.device)
    assert.same({{1, 2, 3}, {4, 5, 6}}, t:totable())
  end)

  it('rejects ragged tables with a clear error', function()
    assert.has_error(function() lunet.tensor{{1, 2}, {3}} end)
    local ok, err = pcall(lunet.tensor, {{1, 2}, {3}})
    assert.is_false(ok)
    assert.matches('tensor: ragged nested table', err)
  end)

  it('zeros, ones, full, eye, arange, linspace', function()
    assert.same({{0, 0}, {0, 0}}, lunet.zeros(2, 2):totable())
    assert.same({1, 1, 1}, lunet.ones(3):totable())
    assert.same({{7, 7}}, lunet.full({1, 2}, 7):totable())
    assert.same({{1, 0, 0}, {0, 1, 0}}, lunet.eye(2, 3):totable())
    assert.same({0, 1, 2, 3}, lunet.arange(4):totable())
    assert.equal('int64', lunet.arange(4).dtype)
    assert.same({2, 4, 6}, lunet.arange(2, 8, 2):totable())
    assert.tensor_near(lunet.linspace(0, 1, 5), {0, 0.25, 0.5, 0.75, 1})
  end)
end)

describe('elementwise arithmetic', function()
  it('broadcasts a row against a column', function()
    local a = lunet.tensor{{1}, {2}, {3}}
    local b = lunet.tensor{10, 20}
    assert.same({{11, 21}, {12, 22}, {13, 23}}, (a + b):totable())
  end)

  it('names the op and both shapes when shapes cannot broadcast', function()
    local ok, err = pcall(function() return lunet.zeros(2, 3) + lunet.zeros(4) end)
    assert.is_false(ok)
    assert.matches('add: shapes {2,3} and {4} cannot broadcast', err, 1, true)
  end)

  it('mixes numbers on either side', function()
    local a = lunet.tensor{1, 2, 4}
    assert.same({2, 3, 5}, (a + 1):totable())
    assert.same({9, 8, 6}, (10 - a):totable())
    assert.same({4, 2, 1}, (4 / a):totable())
    assert.same({-1, -2, -4}, (-a):totable())
  end)

  it('matmul matches a hand computation', function()
    local a = lunet.tensor{{1, 2}, {3, 4}}
    assert.same({{7, 10}, {15, 22}}, a:matmul(a):totable())
    assert.same({{5, 11}, {11, 25}}, a:matmul(a:t()):totable())
  end)
end)
