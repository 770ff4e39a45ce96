-- nn.ParameterList and nn.ParameterDict as PyTorch 1.13's: registration
-- under torch's names ('0', '1', ... and the keys), so parameters(),
-- named_parameters(), state_dict and load_state_dict (a torch state_dict
-- from spec/fixtures/nn_paramlist.safetensors, tools/gen_nnsmall_fixtures.py),
-- dtype moves, zero_grad and optimizers see them; 1-based indexing, #,
-- ipairs, append/extend/insert, keys/values/items/update/pop; printing; errors.
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local nn = lunet.nn
local err = fixtures.err_of

local function names(list)
  local out = {}
  for i, e in ipairs(list) do out[i] = e[1] end
  return out
end
local function sorted_keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

describe('nn.ParameterList', function()
  it('registers as torch: names 0, 1, ..., plain tensors become parameters, 1-based indexing, #, ipairs', function()
    local a, b = lunet.randn(2, 3), lunet.zeros(4)
    local pl = nn.ParameterList{ a, b }
    assert.equal(2, #pl)
    assert.equal(a, pl[1])
    assert.equal(b, pl[2])
    assert.is_true(b.requires_grad)
    assert.same({ '0', '1' }, names(pl:named_parameters()))
    local seen = {}
    for i, p in ipairs(pl) do seen[i] = p end
    assert.same({ a, b }, seen)
    for i, p in pl:ipairs() do assert.equal(seen[i], p) end
    pl:append(lunet.ones(1)):extend{ lunet.ones(5), lunet.ones(6) }
    assert.equal(5, pl:size())
    local c = lunet.ones(7)
    pl:insert(1, c)
    assert.equal(6, #pl)
    assert.equal(c, pl[1])
    assert.equal(a, pl[2])
    assert.same({ '0', '1', '2', '3', '4', '5' }, names(pl:named_parameters()))
    assert.same({ 7 }, pl:named_parameters()[1][2]:size())
    local d = lunet.ones(3)
    pl[2] = d
    assert.equal(d, pl[2])
    assert.equal(d, pl:parameters()[2])
    -- (a non-leaf tensor becomes a leaf of its own)
    local y = lunet.ones(2):requires_grad_() * 2
    pl:append(y)
    assert.is_true(pl[7]:is_leaf() and pl[7].requires_grad)
  end)

  it('loads a torch state_dict; moves dtype in place; zero_grad and optimizers reach the parameters', function()
    local fx, cases = fixtures.load_fixture('nn_paramlist')
    local Holder = nn.Module:extend('Holder')
    function Holder.__init() end
    local h = Holder()
    h.pl = nn.ParameterList{ lunet.zeros(2, 3), lunet.zeros(4) }
    h.pd = nn.ParameterDict{ beta = lunet.zeros(3), alpha = lunet.zeros(2, 2) }
    assert.same(cases[1].named_parameters, names(h:named_parameters()))
    local ks = cases[1].keys
    table.sort(ks)
    assert.same(ks, sorted_keys(h:state_dict()))
    h:load_state_dict(fx)
    assert.equal(0, fixtures.maxdiff(h.pl[1], fx['pl.0']))
    assert.equal(0, fixtures.maxdiff(h.pl[2], fx['pl.1']))
    assert.equal(0, fixtures.maxdiff(h.pd.alpha, fx['pd.alpha']))
    local p1 = h.pl[1]
    h:double()
    assert.equal(p1, h.pl[1])
    assert.equal('float64', h.pl[1].dtype)
    assert.equal('float64', h.pd.beta.dtype)
    local opt = lunet.optim.SGD(h:parameters(), { lr = 1 })
    local loss = h.pl[1]:sum() + h.pd.beta:sum()
    loss:backward()
    opt:step()
    assert.equal(0, fixtures.maxdiff(h.pl[1], fx['pl.0']:double() - 1))
    h:zero_grad()
    assert.equal(0, h.pl[1].grad:abs():sum():item())
  end)

  it('prints as torch', function()
    local pl = nn.ParameterList{ lunet.zeros(2, 3), lunet.zeros(4, { dtype = 'float64' }) }
    assert.equal('nn.ParameterList {\n  (0): Parameter containing: [float32 of size 2x3]\n' ..
      '  (1): Parameter containing: [float64 of size 4]\n}', pl:repr())
    assert.matches('10 parameters', tostring(pl))
  end)

  it('refuses bad input', function()
    assert.matches('ParameterList: expected a list of tensors', err(nn.ParameterList, 5))
    assert.matches('ParameterList: parameter 2 must be a tensor, got string', err(nn.ParameterList, { lunet.ones(1), 'x' }))
    assert.matches('ParameterList: parameter 1 must be a floating%-point tensor',
      err(nn.ParameterList, { lunet.ones(1, { dtype = 'int64' }) }))
    local pl = nn.ParameterList{ lunet.ones(1) }
    assert.matches('index 3 out of range 1..1', err(function() pl[3] = lunet.ones(1) end))
    assert.matches('insert index must be an integer in 1..2', err(function() pl:insert(5, lunet.ones(1)) end))
    assert.matches('extend expects a list of tensors', err(function() pl:extend(lunet.ones(2)) end))
    assert.matches('ParameterList: has no forward', err(function() pl(lunet.ones(1)) end))
  end)
end)

describe('nn.ParameterDict', function()
  it('registers under its keys, sorted; keys, values, items, update, pop, get, contains, clear', function()
    local a, b = lunet.randn(3), lunet.zeros(2)
    local pd = nn.ParameterDict{ b = b, a = a }
    assert.same({ 'a', 'b' }, pd:keys())
    assert.same({ a, b }, pd:values())
    assert.same({ { 'a', a }, { 'b', b } }, pd:items())
    assert.same({ 'a', 'b' }, names(pd:named_parameters()))
    assert.is_true(b.requires_grad)
    assert.equal(a, pd.a)
    assert.equal(a, pd['a'])
    pd.c = lunet.ones(1)
    pd:update{ aa = lunet.ones(2), b = lunet.ones(5) }
    assert.same({ 'a', 'aa', 'b', 'c' }, pd:keys())
    assert.same({ 5 }, pd.b:size())
    assert.equal(4, pd:size())
    assert.is_true(pd:contains('aa'))
    assert.is_false(pd:contains('zz'))
    assert.equal(7, pd:get('zz', 7))
    assert.equal(a, pd:pop('a'))
    assert.same({ 'aa', 'b', 'c' }, pd:keys())
    assert.is_nil(pd.a)
    assert.same({ 'aa', 'b', 'c' }, sorted_keys(pd:state_dict()))
    local other = nn.ParameterDict{ z = lunet.ones(1) }
    pd:update(other)
    assert.equal(other.z, pd.z)
    pd:clear()
    assert.equal(0, pd:size())
    assert.same({}, pd:parameters())
  end)

  it('prints as torch', function()
    local pd = nn.ParameterDict{ w = lunet.zeros(2, 2) }
    assert.equal('nn.ParameterDict {\n  (w): Parameter containing: [float32 of size 2x2]\n}', pd:repr())
  end)

  it('refuses bad input', function()
    assert.matches('ParameterDict: expected a table', err(nn.ParameterDict, 3))
    assert.matches("ParameterDict: name 'a.b' must be non%-empty", err(nn.ParameterDict, { ['a.b'] = lunet.ones(1) }))
    assert.matches("ParameterDict: name 'keys' is taken", err(nn.ParameterDict, { keys = lunet.ones(1) }))
    assert.matches('ParameterDict: x must be a tensor', err(nn.ParameterDict, { x = 5 }))
    local pd = nn.ParameterDict()
    assert.matches("pop: no parameter named 'q'", err(function() pd:pop('q') end))
    assert.matches('update expects a table', err(function() pd:update(4) end))
  end)
end)
