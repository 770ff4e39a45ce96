-- Tensor methods composed of other ops (lunet.tensor_compose): values and
-- gradients against PyTorch 1.13's (the expected lists below are
-- torch's `.tolist()` of the same calls on the same inputs), float64 finite
-- differences, and their errors.
local lunet = require 'lunet'
local gradcheck = require 'gradcheck'

local function x23() return lunet.tensor { { 1, -2, 3.5 }, { 0.25, 5, -6 } } end
local function y34() return lunet.arange(1, 13):float():view(3, 4) end

local function same(want, got, tol)
  local t = lunet.tensor(want, { dtype = 'float64' })
  assert.same(t:size(), got:size())
  local err = (t - got:double()):abs():max():item()
  assert.is_true(err <= (tol or 1e-5), ('off by %g: got\n%s'):format(err, tostring(got)))
end

describe('composed Tensor methods', function()
  it('softmax, log_softmax, lerp, addcmul, addcdiv as torch', function()
    local x = x23()
    same({ { 0.07557276636362076, 0.0037625464610755444, 0.9206647276878357 },
      { 0.008577343076467514, 0.9914060831069946, 1.655816777201835e-05 } }, x:softmax(2))
    same({ { -0.38687101006507874, -7.000911235809326, -7.486063259420916e-05 },
      { -1.1368709802627563, -0.0009114163694903255, -9.50007438659668 } }, x:log_softmax(1))
    same({ { 0.75, -1.5, 2.625 }, { 0.1875, 3.75, -4.5 } }, x:lerp(lunet.zeros(2, 3), 0.25))
    same({ { 1.0, -0.5, 1.0 }, { 0.25, 3.0, 1.0 } }, x:lerp(lunet.ones(2, 3), lunet.tensor { 0, 0.5, 1 }))
    same({ { 3.0, 6.0, 28.0 }, { 0.375, 55.0, 66.0 } }, x:addcmul(x, x, 2))
    same({ { 1.2727272510528564, -2.75, 4.277777671813965 }, { 0.3231707215309143, 6.0, -10.5 } },
      x:addcdiv(x, x + 10, { value = 3 }))
    local z = x23()
    z:lerp_(lunet.zeros(2, 3), 0.25)
    same({ { 0.75, -1.5, 2.625 }, { 0.1875, 3.75, -4.5 } }, z)
    z = x23()
    z:addcmul_(x, x, 2)
    same({ { 3.0, 6.0, 28.0 }, { 0.375, 55.0, 66.0 } }, z)
  end)

  it('masked_fill, flip, roll, tril, triu, tile as torch', function()
    local x = x23()
    same({ { 1.0, -2.0, -1.0 }, { 0.25, -1.0, -6.0 } }, x:masked_fill(x:gt(1), -1))
    local m = x23()
    m:masked_fill_(m:gt(1), -1)
    same({ { 1.0, -2.0, -1.0 }, { 0.25, -1.0, -6.0 } }, m)
    same({ { 3.5, -2.0, 1.0 }, { -6.0, 5.0, 0.25 } }, x:flip(2))
    same({ { -6.0, 5.0, 0.25 }, { 3.5, -2.0, 1.0 } }, x:flip({ 1, 2 }))
    same({ { -6.0, 1.0, -2.0 }, { 3.5, 0.25, 5.0 } }, x:roll(1))
    same({ { -2.0, 3.5, 1.0 }, { 5.0, -6.0, 0.25 } }, x:roll(-1, 2))
    same({ { 5.0, -6.0, 0.25 }, { -2.0, 3.5, 1.0 } }, x:roll({ 1, 2 }, { 1, 2 }))
    same({ { 3.5, 1.0, -2.0 }, { -6.0, 0.25, 5.0 } }, x:roll(4, 2))
    local y = y34()
    same({ { 1, 0, 0, 0 }, { 5, 6, 0, 0 }, { 9, 10, 11, 0 } }, y:tril())
    same({ { 0, 0, 0, 0 }, { 5, 0, 0, 0 }, { 9, 10, 0, 0 } }, y:tril(-1))
    same({ { 0, 2, 3, 4 }, { 0, 0, 7, 8 }, { 0, 0, 0, 12 } }, y:triu(1))
    same({ { 1, 2, 3, 4 }, { 5, 6, 7, 8 }, { 0, 10, 11, 12 } }, y:triu(-1))
    same({ { 1.0, -2.0, 3.5, 1.0, -2.0, 3.5 }, { 0.25, 5.0, -6.0, 0.25, 5.0, -6.0 } }, x:tile(2))
    assert.same({ 2, 2, 6 }, x:tile(2, 1, 2):size())
    assert.same({ 2, 2, 6 }, x:tile({ 2, 1, 2 }):size())
    local t = lunet.tensor({ 1, 2 }, { dtype = 'int64' }):tile(2, 2)
    assert.equal('int64', t.dtype)
    same({ { 1, 2, 1, 2 }, { 1, 2, 1, 2 } }, t)
    -- a non-contiguous input (a transpose) and an empty dim
    same({ { 3.5, -6.0 }, { -2.0, 5.0 }, { 1.0, 0.25 } }, x:t():flip(1))
    same({ { 0.25, 1.0 }, { 5.0, -2.0 }, { -6.0, 3.5 } }, x:t():roll(1, 2))
    assert.same({ 0, 3 }, lunet.zeros(0, 3):flip(1):size())
    assert.same({ 0, 3 }, lunet.zeros(0, 3):roll(2, 1):size())
  end)

  it('logsumexp, count_nonzero, dist, outer, clamp_min/max, isfinite, nan_to_num as torch', function()
    local x = x23()
    same({ 3.5826592445373535, 5.008631229400635 }, x:logsumexp(2))
    same({ { 5.223964214324951 } }, x:logsumexp({ 1, 2 }, true))
    local big = lunet.tensor { { -math.huge, -math.huge }, { 1000, 1000 } }:logsumexp(2):totable()
    assert.equal(-math.huge, big[1])
    assert.is_true(math.abs(big[2] - 1000.6931762695312) < 1e-3)
    assert.equal(6, x:count_nonzero():item())
    same({ 1, 1, 0 }, lunet.tensor({ { 0, 1 }, { 2, 0 }, { 0, 0 } }, { dtype = 'int64' }):count_nonzero(2))
    assert.is_true(math.abs(x:dist(lunet.zeros(2, 3)):item() - 8.849434852600098) < 1e-5)
    assert.is_true(math.abs(x:dist(lunet.zeros(2, 3), 1):item() - 17.75) < 1e-5)
    same({ { 1, 2, 3 }, { 2, 4, 6 } }, lunet.tensor { 1, 2 }:outer(lunet.tensor { 1, 2, 3 }))
    same({ { 1, 1, 3.5 }, { 1, 5, 1 } }, x:clamp_min(1))
    same({ { 1, -2, 1 }, { 0.25, 1, -6 } }, x:clamp_max(1))
    local odd = lunet.tensor { 1, 0 / 0, math.huge, -math.huge }
    assert.same({ true, false, false, false }, odd:isfinite():totable())
    assert.same({ true, true }, lunet.tensor({ 1, 2 }, { dtype = 'int64' }):isfinite():totable())
    same({ 1.0, 0.0, 3.4028234663852886e+38, -3.4028234663852886e+38 }, odd:nan_to_num(), 1e32)
    same({ 1.0, 2.0, 3.0, -4.0 }, odd:nan_to_num(2, 3, -4))
    odd:nan_to_num_(2, 3, -4)
    same({ 1.0, 2.0, 3.0, -4.0 }, odd)
  end)

  it('gradients as torch', function()
    local function grad_of(f)
      local a = x23():requires_grad_(true)
      f(a):backward()
      return a.grad
    end
    local w = lunet.arange(6):float():view(2, 3)
    same({ { 0.07557276636362076, 0.003762546693906188, 0.9206647872924805 },
      { 0.01715468429028988, 1.9828118085861206, 3.311634645797312e-05 } },
      grad_of(function(a) return (a:logsumexp(2) * lunet.tensor { 1, 2 }):sum() end))
    same({ { 2.0, 1.0, 0.0 }, { 5.0, 4.0, 3.0 } }, grad_of(function(a) return (a:flip(2) * w):sum() end))
    same({ { 1.0, 2.0, 0.0 }, { 4.0, 5.0, 3.0 } }, grad_of(function(a) return (a:roll(1, 2) * w):sum() end))
    same({ { 3.0, 3.0, 0.0 }, { 3.0, 0.0, 3.0 } }, grad_of(function(a) return (a:masked_fill(a:gt(1):detach(), 0) * 3):sum() end))
    same({ { 2.0, 0.0, 0.0 }, { 2.0, 2.0, 0.0 } }, grad_of(function(a) return (a:tril() * 2):sum() end))
    same({ { 6.0, 8.0, 10.0 }, { 12.0, 14.0, 16.0 } },
      grad_of(function(a) return (a:tile(2, 1) * lunet.arange(12):float():view(4, 3)):sum() end))
    -- float64 finite differences
    local function d(a, b, c) return lunet.randn(a, b, c, { dtype = 'float64' }):requires_grad_(true) end
    for name, f in pairs {
      lerp = function(a, b, c) return a:lerp(b, c) end,
      addcdiv = function(a, b, c) return a:addcdiv(b, c:abs() + 1, 0.5) end,
      logsumexp = function(a) return a:logsumexp({ 1, 3 }) end,
      nan_to_num = function(a) return a:nan_to_num() end,
      triu = function(a) return a:triu(1) end,
      outer = function(a, b) return a:reshape(-1):outer(b:reshape(-1)) end,
    } do
      local ok, msg = gradcheck(f, { d(2, 3, 4), d(2, 3, 4), d(2, 3, 4) })
      assert.is_true(ok, name .. ': ' .. tostring(msg))
    end
  end)

  it('new_zeros, new_ones, new_full, new_empty take the tensor\'s dtype and device unless told', function()
    local x = lunet.zeros(2, { dtype = 'float64' })
    local a = x:new_zeros(2, 3)
    assert.same({ 2, 3 }, a:size())
    assert.equal('float64', a.dtype)
    assert.equal(x.device, a.device)
    local b = x:new_ones({ 1, 2 }, { dtype = 'int64' })
    assert.equal('int64', b.dtype)
    assert.same({ { 1, 1 } }, b:totable())
    local c = x:new_full({ 2 }, 7)
    assert.equal('float64', c.dtype)
    assert.same({ 7, 7 }, c:totable())
    assert.same({ 3 }, x:new_empty(3):size())
    assert.is_true(x:new_zeros(2, { requires_grad = true }).requires_grad)
  end)

  it('refuses bad input with the function named at the caller\'s line', function()
    local x = x23()
    local cases = {
      { function() return x:masked_fill(x:gt(1):float(), 0) end, 'masked_fill: mask must be a bool tensor, got float32' },
      { function() return x:masked_fill(x:gt(1), 'a') end, 'masked_fill: value must be a number or a tensor' },
      { function() return x:flip(3) end, 'flip: dim 3 out of range for a 2%-d tensor' },
      { function() return x:flip({ 1, 1 }) end, 'flip: dim 1 appears twice' },
      { function() return x:flip() end, 'flip: dims' },
      { function() return x:roll({ 1, 2 }, 1) end, 'roll: 2 shifts for 1 dims' },
      { function() return x:roll(1.5, 1) end, 'roll: shifts must be integers' },
      { function() return x:roll({ 1 }) end, 'roll: without dims, shifts must be one integer' },
      { function() return lunet.zeros(3):tril() end, 'tril: needs at least 2 dims, got 1' },
      { function() return x:triu(0.5) end, 'triu: diagonal must be an integer' },
      { function() return x:tile(-1) end, 'tile: repetitions must be integers >= 0' },
      { function() return x:tile() end, 'tile: expected the repetitions' },
      { function() return x:lerp(1, 0.5) end, 'lerp: end must be a tensor, got number' },
      { function() return x:lerp(x, 'a') end, 'lerp: weight must be a number or a tensor' },
      { function() return x:addcmul(x, x, { valu = 1 }) end, "addcmul: unknown option 'valu'" },
      { function() return x:addcdiv(x, 2) end, 'addcdiv: tensor2 must be a tensor, got number' },
      { function() return x:logsumexp() end, 'logsumexp: dims' },
      { function() return x:logsumexp(1, 1) end, 'logsumexp: keepdim must be a boolean' },
      { function() return x:outer(x) end, 'outer: needs two 1%-d tensors, got 2%-d and 2%-d' },
      { function() return x:nan_to_num(0 / 0) end, 'nan_to_num: nan must be a number, got nan' },
      { function() return x:dist(3) end, 'dist: other must be a tensor, got number' },
      { function() return x:new_zeros(2, 'x') end, 'zeros' },
    }
    for i, c in ipairs(cases) do
      local ok, err = pcall(c[1])
      assert.is_false(ok, 'case ' .. i)
      assert.matches(c[2], err)
      assert.matches('tensor_compose_spec.lua', err, nil, nil, 'case ' .. i .. ': ' .. err)
    end
  end)
end)
