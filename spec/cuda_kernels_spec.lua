-- Every kernel of the CUDA backend (c/cuda/) against the CPU's on random
-- shapes: odd sizes, zero-size, broadcast, non-contiguous views, every dtype
-- the kernel takes; cross-device copies both ways; the allocator's stats and
-- OOM; a short training of a linear model. The device is LUNET_TEST_DEVICE,
-- else cuda:0 when there is a GPU; without either every test is pending
-- (tools/gpu-check.sh runs them on a GPU). LUNET_TEST_DEVICE=cpu:1 runs the
-- same comparisons against a second CPU device, which checks the spec itself.
local lunet = require 'lunet'
local optim = require 'lunet.optim'

local dev = os.getenv('LUNET_TEST_DEVICE')
if dev == '' or dev == 'cpu:0' then dev = nil end
if not dev and lunet.cuda.is_available() then dev = 'cuda:0' end
local cpu_dev = dev and dev:match('^cpu:(%d+)$')
local on_cuda = dev and dev:match('^cuda:') ~= nil
local why = dev == nil and ('no GPU (' .. tostring(lunet.cuda.reason()) ..
  '): tools/gpu-check.sh, or LUNET_TEST_DEVICE=cuda:0 on a GPU machine, runs these') or nil

local function it_dev(name, f)
  it(name, function()
    if not dev then pending(why) return end
    f()
  end)
end

local FLOATS = {float32 = true, float64 = true, float16 = true, bfloat16 = true}
local TOL = {float32 = 2e-6, float64 = 1e-13, float16 = 1e-3, bfloat16 = 1e-2}

-- b (on dev) equals a (on the CPU): shape, dtype, values (NaN == NaN; floats
-- within rtol), what says which case
local function same(a, b, what, rtol)
  assert.equal(a.dtype, b.dtype, what .. ': dtype')
  assert.same(a:size(), b:size(), what .. ': shape')
  local ba, n = a:read()
  local bb = b:read()
  local tol = rtol or TOL[a.dtype] or 0
  for i = 0, n - 1 do
    local x, y = tonumber(ba[i]), tonumber(bb[i])
    local ok = x == y or (x ~= x and y ~= y)
    if not ok and tol > 0 then ok = math.abs(x - y) <= tol * math.max(1, math.abs(x)) end
    if not ok then
      error(('%s: element %d is %s on the CPU, %s on %s'):format(what, i, tostring(x), tostring(y), dev), 2)
    end
  end
end

-- a CPU tensor of shape and dtype with values that every dtype holds exactly
-- where it can (integers in [-50, 50], floats with a few special values)
local function rand(shape, dtype)
  local x = lunet.randn(shape) * 20
  if FLOATS[dtype] then
    if x:numel() >= 4 then
      local flat = x:view(-1)
      flat[1] = 0; flat[2] = -0.0
    end
    return x:to(dtype)
  end
  if dtype == 'bool' then return x:gt(0) end
  if dtype == 'uint8' then return x:abs():round():to('uint8') end
  return x:round():to(dtype)
end

-- views of a fresh CPU tensor: contiguous, transposed, sliced with a step, expanded
local function views(shape, dtype)
  local out = {}
  out[#out + 1] = {'contiguous ' .. table.concat(shape, 'x'), rand(shape, dtype)}
  if #shape >= 2 then
    local r = {}
    for i = #shape, 1, -1 do r[#r + 1] = shape[i] end
    out[#out + 1] = {'transposed', rand(r, dtype):transpose(1, #shape)}
    local wide = {}
    for i = 1, #shape do wide[i] = shape[i] end
    wide[#wide] = wide[#wide] * 2 + 1
    out[#out + 1] = {'narrowed', rand(wide, dtype):narrow(#shape, 2, shape[#shape])}
  end
  return out
end

local SHAPES = {{}, {0}, {1}, {7}, {3, 5}, {2, 3, 4}, {33, 17}, {1025, 3}, {2, 0, 3}}
local DTYPES = {'float32', 'float64', 'int32', 'int64', 'uint8', 'bool'}
local ALL_DTYPES = {'float32', 'float64', 'int32', 'int64', 'uint8', 'bool', 'float16', 'bfloat16'}

-- errors the CUDA backend gives on purpose (kernels it lacks); anything else
-- on the device where the CPU succeeds is a failure
local function known_gap(err)
  return on_cuda and (err:find('has no kernel', 1, true) or err:find('no cuda kernel', 1, true) or
                      err:find('cuda has no kernel', 1, true) or err:find(' kernel for ', 1, true))
end

-- runs f on the CPU inputs and on their copies on dev, compares
local function check(what, f, inputs, rtol)
  -- (moved first: f may update its inputs in place, as running statistics)
  local moved = {}
  for i, x in ipairs(inputs) do moved[i] = lunet.is_tensor(x) and x:to(dev) or x end
  -- (a stream's error is raised at the next read: read inside the pcall)
  local ok, want = pcall(function() local r = f(unpack(inputs)); r:read(); return r end)
  if not ok then return 'refused' end   -- refused on the CPU too: nothing to compare
  local ok2, got = pcall(function() return f(unpack(moved)):to('cpu:0') end)
  if not ok2 then
    if known_gap(tostring(got)) then return tostring(got) end
    error(what .. ': ' .. tostring(got), 2)
  end
  same(want, got, what, rtol)
end

describe('the ' .. tostring(dev or 'cuda') .. ' kernels against the CPU', function()
  setup(function()
    if cpu_dev then lunet.set_cpu_devices(tonumber(cpu_dev) + 1) end
    lunet.manual_seed(18)
  end)
  teardown(function()
    collectgarbage(); collectgarbage()
    if cpu_dev then lunet.synchronize(); lunet.set_cpu_devices(1) end
  end)

  it_dev('copy and cast between every pair of dtypes, on the device and across devices', function()
    for _, shape in ipairs({{}, {0}, {5}, {3, 7}, {129, 65}}) do
      for _, src in ipairs(ALL_DTYPES) do
        for _, v in ipairs(views(shape, src)) do
          local x = v[2]
          local xd = x:to(dev)
          same(x, xd:to('cpu:0'), ('%s %s to %s and back'):format(v[1], src, dev))
          for _, dst in ipairs(ALL_DTYPES) do
            local what = ('%s %s -> %s'):format(v[1], src, dst)
            same(x:to(dst), xd:to(dst):to('cpu:0'), what .. ' on ' .. dev)
            -- across devices into a strided destination, casting on the way
            if #shape == 2 then
              local d = lunet.zeros({shape[2], shape[1]}, {dtype = dst, device = dev}):t()
              d:copy_(x)
              local c = lunet.zeros({shape[2], shape[1]}, {dtype = dst}):t()
              c:copy_(x)
              same(c, d:to('cpu:0'), what .. ' into a transposed destination')
              local back = lunet.zeros({shape[2], shape[1]}, {dtype = dst}):t()
              back:copy_(xd)
              same(c, back, what .. ' from ' .. dev .. ' into a transposed CPU tensor')
            end
          end
        end
      end
    end
    -- broadcast from the CPU into the device
    local row = rand({1, 7}, 'float32')
    local d = lunet.zeros({5, 7}, {device = dev})
    d:copy_(row)
    same(row:expand(5, 7):contiguous(), d:to('cpu:0'), 'broadcast copy across devices')
  end)

  it_dev('fill, full, zeros, arange and where', function()
    for _, dt in ipairs(ALL_DTYPES) do
      for _, shape in ipairs(SHAPES) do
        check('full ' .. dt, function(x) return lunet.full(shape, 3, {dtype = dt, device = x}) end, {'cpu:0'})
        same(lunet.full(shape, 3, {dtype = dt}), lunet.full(shape, 3, {dtype = dt, device = dev}):to('cpu:0'), 'full ' .. dt)
      end
      local t = lunet.zeros({6, 5}, {dtype = dt, device = dev}):t()
      t:fill_(1)
      same(lunet.ones({5, 6}, {dtype = dt}), t:to('cpu:0'), 'fill_ of a transposed view ' .. dt)
    end
    for _, dt in ipairs({'float32', 'float64', 'int32', 'int64', 'float16', 'bfloat16', 'uint8'}) do
      same(lunet.arange(-3, 11, 0.5, {dtype = dt}), lunet.arange(-3, 11, 0.5, {dtype = dt, device = dev}):to('cpu:0'), 'arange ' .. dt)
    end
    for _, dt in ipairs(ALL_DTYPES) do
      local c, a, b = rand({4, 1, 5}, 'bool'), rand({3, 5}, dt), rand({4, 3, 1}, dt)
      check('where ' .. dt, function(cc, aa, bb) return lunet.where(cc, aa, bb) end, {c, a, b})
    end
  end)

  -- (bit for bit: both run c/core/philox.h; float64 normal up to libm's last bit)
  it_dev('random draws give the CPU numbers for the same seed (uniform, normal, integers, bernoulli)', function()
    for _, case in ipairs({
      {'rand', function(o) return lunet.rand({1000, 3}, o) end, 0},
      {'randn', function(o) return lunet.randn({1001}, o) end, 0},
      {'normal_ float32', function(o) return lunet.empty({1, 4099}, o):normal_(-1, 3) end, 0},
      {'uniform_ float32', function(o) return lunet.empty({4099}, o):uniform_(-2, 0.1) end, 0},
      {'randn float16', function(o) o.dtype = 'float16'; return lunet.randn({1003}, o) end, 0},
      {'rand bfloat16', function(o) o.dtype = 'bfloat16'; return lunet.empty({1003}, o):uniform_(0.5, 3) end, 0},
      {'bernoulli_ uint8', function(o) o.dtype = 'uint8'; return lunet.empty({1003}, o):bernoulli_(0.7) end, 0},
      {'randint', function(o) o.dtype = 'int64'; return lunet.randint(-5, 1000, {77, 3}, o) end, 0},
      {'randint int32', function(o) o.dtype = 'int32'; return lunet.randint(0, 7, {513}, o) end, 0},
      {'uniform_ float64', function(o) o.dtype = 'float64'; return lunet.empty({333}, o):uniform_(-2, 3) end, 0},
      {'normal_ float64', function(o) o.dtype = 'float64'; return lunet.empty({333}, o):normal_(1, 2) end, 1e-12},
      {'bernoulli_', function(o) return lunet.empty({4097}, o):bernoulli_(0.3) end, 0},
    }) do
      lunet.manual_seed(99)
      local a = case[2]({})
      lunet.manual_seed(99)
      local b = case[2]({device = dev})
      same(a, b:to('cpu:0'), case[1], case[3])
    end
  end)

  it_dev('index_select, gather, scatter_add_: every dim, int32 and int64 indices, views; bad indices named', function()
    for _, dt in ipairs({'float32', 'float64', 'int32', 'int64', 'uint8', 'float16'}) do
      for _, v in ipairs(views({4, 5, 6}, dt)) do
        local x = v[2]
        for d = 1, 3 do
          local size = x:size()[d]
          for _, it in ipairs({'int64', 'int32'}) do
            local idx = lunet.randint(1, size + 1, {7}):to(it)
            check(('index_select %s %s dim %d %s'):format(dt, v[1], d, it), function(t, i) return t:index_select(d, i) end, {x, idx})
            local gshape = x:size()
            gshape[d] = 3
            local gidx = lunet.randint(1, size + 1, gshape):to(it)
            check(('gather %s %s dim %d %s'):format(dt, v[1], d, it), function(t, i) return t:gather(d, i) end, {x, gidx})
            if dt ~= 'uint8' and dt ~= 'float16' then
              check(('scatter_add_ %s %s dim %d %s'):format(dt, v[1], d, it), function(t, i, src)
                local o = t:clone(); o:scatter_add_(d, i, src); return o end, {x, gidx, rand(gshape, dt)})
            end
          end
        end
      end
    end
    local ok1, e1 = pcall(function() return lunet.ones({3, 4}):index_select(2, lunet.tensor({1, 5, 9}, {dtype = 'int64'})):read() end)
    local ok2, e2 = pcall(function()
      local r = lunet.ones({3, 4}, {device = dev}):index_select(2, lunet.tensor({1, 5, 9}, {dtype = 'int64'}):to(dev))
      lunet.synchronize(dev)   -- (a queued device raises at its next synchronisation)
      return r
    end)
    assert.is_false(ok1); assert.is_false(ok2)
    assert.truthy(tostring(e2):find('index 5 is out of range for dim 2 of size 4', 1, true), e2)
  end)

  local BINARY = {'add', 'sub', 'mul', 'div', 'pow', 'maximum', 'minimum', 'eq', 'ne', 'lt', 'le', 'gt', 'ge',
                  'logical_and', 'logical_or', 'fmod', 'atan2', 'hypot', 'logaddexp', 'logaddexp2',
                  'igamma', 'igammac', 'bitwise_and', 'bitwise_or', 'bitwise_xor', 'bitwise_left_shift', 'bitwise_right_shift', 'gcd', 'lcm'}
  it_dev('binary ops: every op and dtype, broadcast, non-contiguous, scalars, in place', function()
    for _, dt in ipairs(DTYPES) do
      for _, op in ipairs(BINARY) do
        for _, pair in ipairs({{{7}, {7}}, {{3, 5}, {5}}, {{4, 1, 5}, {3, 1}}, {{0, 3}, {1, 3}}, {{}, {2, 3}},
                               {{33, 17}, {33, 1}}, {{1025, 3}, {1025, 3}}}) do
          local a, b = rand(pair[1], dt), rand(pair[2], dt)
          check(('%s %s %s x %s'):format(op, dt, table.concat(pair[1], 'x'), table.concat(pair[2], 'x')),
                function(x, y) return x[op](x, y) end, {a, b})
          check(('%s %s tensor, scalar'):format(op, dt), function(x) return x[op](x, 3) end, {a})
          check(('%s %s scalar, tensor'):format(op, dt), function(x) return lunet.Tensor[op](2, x) end, {a})
        end
        local a = rand({5, 6}, dt):t()
        local b = rand({5, 6}, dt):t()
        check(('%s %s transposed'):format(op, dt), function(x, y) return x[op](x, y) end, {a, b})
        if a[op .. '_'] then
          check(('%s_ %s in place'):format(op, dt), function(x, y) local z = x:clone(); z[op .. '_'](z, y); return z end, {a, b})
        end
      end
    end
    -- (rand's values are half negative, NaN above: positive a and x here)
    for _, dt in ipairs({'float32', 'float64'}) do
      local a, x = rand({33, 17}, dt):abs() + 0.01, rand({33, 17}, dt):abs():t()
      for _, op in ipairs({'igamma', 'igammac'}) do
        check(('%s %s positive'):format(op, dt), function(p, q) return p[op](p, q) end, {a, x})
        check(('%s %s near a = x'):format(op, dt), function(p) return p[op](p, p + 1) end, {a * 50})
      end
    end
    check('add_ with alpha (axpy)', function(x, y) local z = x:clone(); z:add_(y, 0.25); return z end,
          {rand({9, 4}, 'float32'), rand({4}, 'float32')})
  end)

  local UNARY = {'neg', 'abs', 'exp', 'log', 'sqrt', 'tanh', 'sigmoid', 'relu', 'sin', 'cos', 'rsqrt', 'sign',
                 'floor', 'ceil', 'round', 'reciprocal', 'log1p', 'expm1', 'square', 'logical_not', 'isnan',
                 'isinf', 'erf', 'sinh', 'cosh', 'asinh', 'acosh', 'atanh', 'asin', 'acos', 'atan', 'log2',
                 'log10', 'exp2', 'trunc', 'frac', 'bitwise_not'}
  it_dev('unary ops and clamp: every op and dtype, non-contiguous, in place', function()
    for _, dt in ipairs(DTYPES) do
      for _, op in ipairs(UNARY) do
        for _, shape in ipairs(SHAPES) do
          for _, v in ipairs(views(shape, dt)) do
            check(('%s %s %s'):format(op, dt, v[1]), function(x) return x[op](x) end, {v[2]}, dt == 'float32' and 1e-5 or nil)
          end
        end
        if lunet.Tensor[op .. '_'] then
          check(('%s_ %s'):format(op, dt), function(x) local z = x:clone(); z[op .. '_'](z); return z end,
                {rand({7, 3}, dt)}, dt == 'float32' and 1e-5 or nil)
        end
      end
      check('clamp ' .. dt, function(x) return x:clamp(-5, 7) end, {rand({33, 17}, dt)})
      check('clamp min ' .. dt, function(x) return x:clamp(-5) end, {rand({33, 17}, dt):t()})
    end
    local special = lunet.tensor({0 / 0, 1 / 0, -1 / 0, 0, -0.0, 1e-30, -3.5, 2.5})
    for _, op in ipairs(UNARY) do check(op .. ' of NaN, inf, zeros, halves', function(x) return x[op](x) end, {special}, 1e-5) end
  end)

  it_dev('reductions: sum, mean, max, min, argmax, argmin, prod, var, std, any, all, norm along each dim and over all', function()
    for _, dt in ipairs(DTYPES) do
      for _, shape in ipairs({{7}, {3, 5}, {2, 3, 4}, {33, 17}, {1025, 3}, {2, 0, 3}, {1, 4096}}) do
        for _, v in ipairs(views(shape, dt)) do
          local x = v[2]
          local what = ('%s %s'):format(dt, v[1])
          for _, op in ipairs({'sum', 'mean', 'max', 'min', 'argmax', 'argmin', 'prod', 'var', 'std', 'any', 'all', 'norm'}) do
            check(op .. ' all ' .. what, function(t) return t[op](t) end, {x}, 1e-5)
            for d = 1, #shape do
              check(('%s dim %d %s'):format(op, d, what), function(t) return (t[op](t, d)) end, {x}, 1e-5)
              check(('%s dim %d keepdim %s'):format(op, d, what), function(t) return (t[op](t, d, true)) end, {x}, 1e-5)
              if op == 'max' or op == 'min' then
                check(('%s dim %d indices %s'):format(op, d, what), function(t) return select(2, t[op](t, d)) end, {x})
              end
            end
          end
        end
      end
    end
    for _, pn in ipairs({0, 1, 2, 3.5, math.huge, -math.huge}) do
      check('norm p=' .. pn, function(x) return x:norm(pn, 2) end, {rand({9, 33}, 'float32')}, 1e-5)
      check('norm p=' .. pn .. ' float64 all', function(x) return x:norm(pn) end, {rand({9, 33}, 'float64')}, 1e-12)
    end
    check('var correction 0', function(x) return x:var(2, {correction = 0}) end, {rand({9, 33}, 'float64')}, 1e-12)
    -- NaN wins max/min and argmax at its first position; ties keep the first
    local t = lunet.tensor({{1, 0 / 0, 3, 0 / 0}, {2, 2, 1, 2}})
    for _, op in ipairs({'max', 'min', 'argmax', 'argmin'}) do
      check(op .. ' with NaN and ties', function(x) return (x[op](x, 2)) end, {t})
      check(op .. ' indices with NaN and ties', function(x) return select(2, x[op](x, 2)) end, {t})
    end
  end)

  it_dev('matrix products: odd sizes, transposed operands, batches, empty inner dim', function()
    for _, dt in ipairs({'float32', 'float64'}) do
      for _, mnk in ipairs({{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {64, 64, 64}, {3, 4, 0}, {0, 4, 3}, {129, 1, 257}}) do
        local m, n, k = mnk[1], mnk[2], mnk[3]
        local a, b = rand({m, k}, dt), rand({k, n}, dt)
        local tol = dt == 'float32' and 1e-4 or 1e-12
        check(('matmul %s %dx%dx%d'):format(dt, m, n, k), function(x, y) return x:matmul(y) end, {a, b}, tol)
        check(('matmul %s transposed a'):format(dt), function(x, y) return x:t():contiguous():t():matmul(y) end, {a, b}, tol)
        check(('matmul %s transposed b'):format(dt), function(x, y) return x:matmul(y:t():contiguous():t()) end, {a, b}, tol)
        check(('bmm %s'):format(dt), function(x, y) return x:bmm(y) end, {rand({3, m, k}, dt), rand({3, k, n}, dt)}, tol)
        check(('addmm %s'):format(dt), function(c, x, y) return c:addmm(x, y, {beta = 0.5, alpha = 2}) end, {rand({m, n}, dt), a, b}, tol)
      end
      check('mv ' .. dt, function(x, y) return x:mv(y) end, {rand({9, 13}, dt), rand({13}, dt)}, 1e-5)
    end
  end)

  it_dev('SGD (momentum, nesterov, weight decay, maximize) takes the CPU steps', function()
    for _, cfg in ipairs({{lr = 0.1}, {lr = 0.05, momentum = 0.9}, {lr = 0.05, momentum = 0.9, nesterov = true, weight_decay = 1e-2},
                          {lr = 0.01, momentum = 0.5, dampening = 0.1, maximize = true}}) do
      for _, dt in ipairs({'float32', 'float64'}) do
        local w0 = rand({17, 5}, dt)
        local wc, wd = w0:clone(), w0:to(dev)
        local oc, od = optim.SGD({wc}, cfg), optim.SGD({wd}, cfg)
        for step = 1, 3 do
          local g = rand({17, 5}, dt)
          wc.grad, wd.grad = g, g:to(dev)
          oc:step(); od:step()
        end
        same(wc, wd:to('cpu:0'), 'SGD ' .. dt, dt == 'float32' and 1e-5 or 1e-12)
      end
    end
  end)

  it_dev('Adam, AdamW and RMSprop (weight decay, amsgrad, maximize, momentum, centered) take the CPU steps', function()
    for _, cfg in ipairs({{'Adam', {lr = 0.01}}, {'Adam', {lr = 0.01, weight_decay = 0.1, amsgrad = true}},
                          {'AdamW', {lr = 0.01, weight_decay = 0.1}}, {'Adam', {lr = 0.01, maximize = true}},
                          {'RMSprop', {lr = 0.01}}, {'RMSprop', {lr = 0.01, momentum = 0.9, centered = true, weight_decay = 0.1}}}) do
      for _, dt in ipairs({'float32', 'float64'}) do
        local w0 = rand({17, 5}, dt)
        local wc, wd = w0:clone(), w0:to(dev)
        local oc, od = optim[cfg[1]]({wc}, cfg[2]), optim[cfg[1]]({wd}, cfg[2])
        for step = 1, 3 do
          local g = rand({17, 5}, dt)
          wc.grad, wd.grad = g, g:to(dev)
          oc:step(); od:step()
        end
        same(wc, wd:to('cpu:0'), cfg[1] .. ' ' .. dt, dt == 'float32' and 1e-5 or 1e-12)
      end
    end
  end)

  it_dev('clip_grad_norm (orders 2, 1, 3, inf) scales as on the CPU and returns the same norm', function()
    for _, pn in ipairs({2, 1, 3, math.huge}) do
      for _, dt in ipairs({'float32', 'float64'}) do
        local g1, g2 = rand({17, 5}, dt), rand({1000}, dt)
        local a, b = rand({17, 5}, dt), rand({1000}, dt)
        local c, d = a:to(dev), b:to(dev)
        a.grad, b.grad, c.grad, d.grad = g1, g2, g1:to(dev), g2:to(dev)
        local n1 = optim.clip_grad_norm({a, b}, 1.5, pn)
        local n2 = optim.clip_grad_norm({c, d}, 1.5, pn)
        assert.is_true(math.abs(n1 - n2) <= 1e-5 * n1, ('norm %s %s: %g vs %g'):format(tostring(pn), dt, n1, n2))
        same(a.grad, c.grad:to('cpu:0'), 'clipped gradient ' .. dt, 1e-5)
      end
    end
  end)

  it_dev('trains a linear model as the CPU does', function()
    local function run(device)
      lunet.manual_seed(7)
      local x, wtrue = lunet.randn({256, 13}), lunet.randn({13, 1})
      local y = x:matmul(wtrue) + 0.5
      x, y = x:to(device), y:to(device)
      local w = lunet.zeros({13, 1}, {device = device}):requires_grad_()
      local b = lunet.zeros({1}, {device = device}):requires_grad_()
      local opt = optim.SGD({w, b}, {lr = 0.1, momentum = 0.9})
      local losses = {}
      for step = 1, 30 do
        opt:zero_grad()
        local loss = ((x:matmul(w) + b - y) ^ 2):mean()
        loss:backward()
        opt:step()
        losses[step] = loss:item()
      end
      return losses
    end
    local c, d = run('cpu:0'), run(dev)
    for i = 1, #c do assert.is_true(math.abs(c[i] - d[i]) <= 1e-4 * math.max(1, c[i]), ('step %d: %g vs %g'):format(i, c[i], d[i])) end
    assert.is_true(d[#d] < 0.1 * d[1], ('the loss falls (%g to %g)'):format(d[1], d[#d]))
  end)

  it_dev('trains the benchmark CNNs (seed32, LeNet-5: conv, ReLU, max pool, linear) as the CPU does', function()
    local src = debug.getinfo(1, 'S').source:match('^@(.*)spec/cuda_kernels_spec%.lua$')
    local models = dofile(((src == nil or src == '') and './' or src) .. 'bench/models.lua')
    for _, name in ipairs({'seed32', 'lenet5'}) do
      local function run(device)
        lunet.manual_seed(11)
        local model = models[name].build(lunet.nn)
        model:to(device)
        local shape = {16, unpack(models[name].input)}
        local x, y = lunet.randn(shape):to(device), lunet.randint(1, 11, {16}):to(device)
        local opt = optim.SGD(model:parameters(), {lr = 0.01, momentum = 0.9})
        local losses = {}
        for step = 1, 5 do
          opt:zero_grad()
          local loss = lunet.nn.functional.cross_entropy(model:forward(x), y)
          loss:backward()
          opt:step()
          losses[step] = loss:item()
        end
        return losses
      end
      local c, d = run('cpu:0'), run(dev)
      for i = 1, #c do
        assert.is_true(math.abs(c[i] - d[i]) <= 1e-3 * math.max(1, c[i]), ('%s step %d: %g vs %g'):format(name, i, c[i], d[i]))
      end
    end
  end)

  it_dev('the allocator: stats, reuse, empty_cache, a clear OOM after which the device works', function()
    collectgarbage(); collectgarbage(); lunet.synchronize()
    local base = lunet.memory_allocated(dev)
    local t = lunet.zeros({1000, 1000}, {device = dev})
    assert.is_true(lunet.memory_allocated(dev) >= base + 4e6)
    t = nil
    collectgarbage(); collectgarbage(); lunet.synchronize()
    assert.is_true(lunet.memory_cached(dev) >= 4e6)
    local peak = lunet.max_memory_allocated(dev)
    assert.is_true(peak >= 4e6)
    if on_cuda then
      local s = lunet.cuda.memory_stats(dev)
      assert.is_true(s.cached >= 4e6 and s.peak >= 4e6)
      lunet.cuda.empty_cache(dev)
      assert.equal(0, lunet.cuda.memory_stats(dev).cached)
      local ok, err = pcall(lunet.empty, {2 ^ 43 / 4}, {device = dev})   -- 8 TB
      assert.is_false(ok)
      assert.truthy(tostring(err):find('out of memory on ' .. dev, 1, true), err)
      same(lunet.ones(3) * 2, (lunet.ones(3, {device = dev}) * 2):to('cpu:0'), 'after an OOM')
      lunet.cuda.synchronize()
    end
  end)

  local F = lunet.nn.functional
  -- forward and the input's gradient of f(x) (a random upstream gradient)
  local function check_grad(what, f, x, extra, rtol)
    if check(what, function(xx, ...) return f(xx, ...) end, {x, unpack(extra or {})}, rtol) == 'refused' then
      return   -- (an input the layer refuses, as a window larger than the input)
    end
    local r = check(what .. ' backward', function(xx, ...)
      local xg = xx:clone():requires_grad_()
      local y = f(xg, ...)
      lunet.manual_seed(5)
      local g = lunet.randn(y:size()):to(y.dtype):to(xx.device)
      y:backward(g)
      return xg.grad
    end, {x, unpack(extra or {})}, rtol)
    assert.are_not.equal('refused', r, what .. ': the backward failed on the CPU')
  end

  it_dev('NN kernels: relu, softmax, log_softmax, nll and cross-entropy losses, with their backward', function()
    for _, dt in ipairs({'float32', 'float64'}) do
      local tol = dt == 'float32' and 1e-5 or 1e-12
      for _, shape in ipairs({{7}, {3, 5}, {2, 3, 4}, {64, 10}, {1, 1000}, {5, 0}}) do
        check_grad('relu ' .. dt, F.relu, rand(shape, dt), nil, tol)
        for d = 1, #shape do
          check_grad(('softmax dim %d %s'):format(d, dt), function(x) return F.softmax(x, d) end, rand(shape, dt) * 0.1, nil, tol)
          check_grad(('log_softmax dim %d %s'):format(d, dt), function(x) return F.log_softmax(x, d) end, rand(shape, dt) * 0.1, nil, tol)
        end
      end
      local x = rand({33, 10}, dt) * 0.1
      local t = lunet.randint(1, 11, {33})
      local w = rand({10}, dt):abs() + 0.5
      for _, opts in ipairs({{}, {reduction = 'sum'}, {reduction = 'none'}, {weight = w}, {ignore_index = 3},
                             {weight = w, reduction = 'sum', ignore_index = 4}}) do
        local mv = {}
        for k, v in pairs(opts) do mv[k] = v end
        check_grad('cross_entropy ' .. dt, function(xx, tt, ww)
          local o = {}
          for k, v in pairs(opts) do o[k] = v end
          if o.weight then o.weight = ww end
          return F.cross_entropy(xx, tt, o)
        end, x, {t, w}, tol)
        check_grad('nll_loss ' .. dt, function(xx, tt, ww)
          local o = {}
          for k, v in pairs(opts) do o[k] = v end
          if o.weight then o.weight = ww end
          return F.nll_loss(F.log_softmax(xx, 2), tt, o)
        end, x, {t, w}, tol)
      end
      -- a target out of range is the CPU's error
      local bad = lunet.tensor({1, 2, 99}, {dtype = 'int64'})
      local ok1, e1 = pcall(function() return F.cross_entropy(rand({3, 5}, dt), bad):item() end)
      local ok2, e2 = pcall(function() return F.cross_entropy(rand({3, 5}, dt):to(dev), bad:to(dev)):item() end)
      assert.is_false(ok1); assert.is_false(ok2)
      assert.truthy(tostring(e2):find('target 99 (sample 3) is out of range', 1, true), e2)
    end
  end)

  it_dev('pooling: max and average, padding, stride, dilation, ceil_mode, count_include_pad, with backward', function()
    for _, dt in ipairs({'float32', 'float64'}) do
      local tol = dt == 'float32' and 1e-5 or 1e-12
      for _, shape in ipairs({{2, 3, 8, 8}, {1, 2, 7, 9}, {3, 1, 5, 5}, {2, 4, 1, 1}, {0, 2, 4, 4}}) do
        for _, o in ipairs({{k = 2}, {k = 3, stride = 2, padding = 1}, {k = 3, stride = 2, ceil_mode = true},
                            {k = {2, 3}, stride = {1, 2}, padding = {1, 1}}, {k = 3, dilation = 2, padding = 1},
                            {k = 3, padding = 1, count_include_pad = false}}) do
          local desc = ('%s %s %s'):format(dt, table.concat(shape, 'x'), require('lunet.json').encode(o))
          local mo = {stride = o.stride, padding = o.padding, dilation = o.dilation, ceil_mode = o.ceil_mode}
          local ao = {stride = o.stride, padding = o.padding, ceil_mode = o.ceil_mode, count_include_pad = o.count_include_pad}
          check_grad('max_pool2d ' .. desc, function(x) return F.max_pool2d(x, o.k, mo) end, rand(shape, dt), nil, tol)
          if not o.dilation then
            check_grad('avg_pool2d ' .. desc, function(x) return F.avg_pool2d(x, o.k, ao) end, rand(shape, dt), nil, tol)
          end
        end
      end
    end
  end)

  it_dev('conv2d: stride, padding, dilation, groups, bias or none; gradients of input, weight and bias; fused eval forward', function()
    for _, dt in ipairs({'float32', 'float64'}) do
      local tol = dt == 'float32' and 1e-4 or 1e-10
      for _, c in ipairs({
        {x = {2, 3, 8, 8}, w = {4, 3, 3, 3}, o = {padding = 1}},
        {x = {1, 4, 9, 7}, w = {6, 2, 3, 3}, o = {stride = 2, groups = 2}},
        {x = {2, 2, 11, 11}, w = {3, 2, 3, 3}, o = {dilation = 2, padding = 2}, nobias = true},
        {x = {3, 1, 28, 28}, w = {6, 1, 5, 5}, o = {padding = 2}},
        {x = {2, 16, 8, 8}, w = {16, 16, 1, 1}, o = {stride = 2}},
        {x = {0, 3, 5, 5}, w = {2, 3, 3, 3}, o = {}},
      }) do
        local what = ('conv2d %s x%s w%s %s'):format(dt, table.concat(c.x, 'x'), table.concat(c.w, 'x'),
                                                   require('lunet.json').encode(c.o))
        local x, w, b = rand(c.x, dt) * 0.05, rand(c.w, dt) * 0.05, (not c.nobias) and rand({c.w[1]}, dt) * 0.05 or nil
        check_grad(what, function(xx, ww, bb) return F.conv2d(xx, ww, bb, c.o) end, x, {w, b}, tol)
        check_grad(what .. ' (weight)', function(ww, xx, bb) return F.conv2d(xx, ww, bb, c.o) end, w, {x, b}, tol)
        if b then check_grad(what .. ' (bias)', function(bb, xx, ww) return F.conv2d(xx, ww, bb, c.o) end, b, {x, w}, tol) end
        -- the fused eval forward: relu(bn(conv) + residual), batch norm folded into the weights
        local O = c.w[1]
        local g, be, m, v = rand({O}, dt) * 0.05 + 1, rand({O}, dt) * 0.05, rand({O}, dt) * 0.05, rand({O}, dt):abs() * 0.05 + 0.5
        local y = F.conv2d(x, w, b, c.o)
        local res = rand(y:size(), dt) * 0.05
        local r = check(what .. ' fused', function(xx, ww, gg, bbe, mm, vv, rr, bb)
          return lunet.no_grad(function() return F.conv2d_fused(xx, ww, bb, c.o, gg, bbe, mm, vv, 1e-5, rr, true) end)
        end, {x, w, g, be, m, v, res, b}, tol)
        assert.are_not.equal('refused', r, what .. ' fused: refused on the CPU')
      end
    end
  end)

  it_dev('batch norm (training, eval, fused ReLU, fused add+ReLU) with backward and running statistics; adaptive avg pool', function()
    for _, dt in ipairs({'float32', 'float64'}) do
      local tol = dt == 'float32' and 1e-4 or 1e-10
      for _, shape in ipairs({{8, 3, 5, 5}, {4, 16}, {2, 5, 1, 7}, {33, 2, 3, 3}}) do
        local C = shape[2]
        for _, training in ipairs({true, false}) do
          for _, kind in ipairs({'batch_norm', 'batch_norm_relu', 'batch_norm_add_relu'}) do
            if kind == 'batch_norm' or #shape == 4 then
              local what = ('%s %s %s %s'):format(kind, dt, table.concat(shape, 'x'), training and 'train' or 'eval')
              local rm, rv = rand({C}, dt) * 0.05, rand({C}, dt):abs() * 0.05 + 0.5
              local w, b = rand({C}, dt) * 0.05 + 1, rand({C}, dt) * 0.05
              local res = rand(shape, dt) * 0.05
              local x = rand(shape, dt) * 0.05
              local function f(xx, rrm, rrv, ww, bb, rr)
                if kind == 'batch_norm_add_relu' then return F[kind](xx, rr, rrm, rrv, ww, bb, training, 0.1, 1e-5) end
                return F[kind](xx, rrm, rrv, ww, bb, training, 0.1, 1e-5)
              end
              check_grad(what, f, x, {rm:clone(), rv:clone(), w, b, res}, tol)
              check_grad(what .. ' (weight)', function(ww, xx, rrm, rrv, bb, rr) return f(xx, rrm, rrv, ww, bb, rr) end,
                         w, {x, rm:clone(), rv:clone(), b, res}, tol)
              -- the running statistics after one training forward
              check(what .. ' running_var', function(xx, rrm, rrv, ww, bb, rr) f(xx, rrm, rrv, ww, bb, rr); return rrv end,
                    {x, rm:clone(), rv:clone(), w, b, res}, tol)
              check(what .. ' running_mean', function(xx, rrm, rrv, ww, bb, rr) f(xx, rrm, rrv, ww, bb, rr); return rrm end,
                    {x, rm:clone(), rv:clone(), w, b, res}, tol)
            end
          end
        end
      end
      for _, c in ipairs({{{2, 3, 8, 8}, {1, 1}}, {{1, 2, 7, 9}, {3, 4}}, {{2, 1, 5, 5}, {5, 5}}, {{1, 1, 4, 4}, {6, 6}}}) do
        check_grad(('adaptive_avg_pool2d %s %s to %s'):format(dt, table.concat(c[1], 'x'), table.concat(c[2], 'x')),
                   function(x) return F.adaptive_avg_pool2d(x, c[2]) end, rand(c[1], dt), nil, tol)
      end
    end
  end)

  it_dev('interpolate kernels (nearest, nearest-exact, linear, bilinear, bicubic, trilinear) with backward', function()
    for _, dt in ipairs({'float32', 'float64'}) do
      local tol = dt == 'float32' and 1e-5 or 1e-12
      for _, c in ipairs({{{2, 3, 5, 7}, {scale_factor = 2, mode = 'nearest'}}, {{1, 2, 5, 4}, {size = {3, 9}, mode = 'nearest-exact'}},
          {{2, 2, 9}, {scale_factor = 1.7, mode = 'linear', align_corners = true}}, {{2, 3, 5, 7}, {size = {8, 3}, mode = 'bilinear'}},
          {{1, 2, 6, 6}, {scale_factor = {1.1, 2.5}, mode = 'bicubic'}}, {{1, 2, 3, 4, 5}, {size = {5, 2, 7}, mode = 'trilinear'}},
          {{0, 2, 4, 4}, {scale_factor = 2, mode = 'bilinear'}}}) do
        check_grad(('interpolate %s %s %s'):format(c[2].mode, dt, table.concat(c[1], 'x')),
                   function(x) return F.interpolate(x, c[2]) end, rand(c[1], dt), nil, tol)
      end
    end
  end)

  it_dev('grid_sample (every mode x padding x align_corners, 4-d and 5-d) with both gradients', function()
    for _, dt in ipairs({'float32', 'float64'}) do
      local tol = dt == 'float32' and 1e-4 or 1e-10
      for _, sd in ipairs({2, 3}) do
        for _, mode in ipairs({'bilinear', 'nearest', 'bicubic'}) do
          for _, pad in ipairs({'zeros', 'border', 'reflection'}) do
            for _, align in ipairs({false, true}) do
              if not (mode == 'bicubic' and sd == 3) then
                local what = ('grid_sample %s %d-d %s %s %s'):format(dt, sd + 2, mode, pad, tostring(align))
                local o = {mode = mode, padding_mode = pad, align_corners = align}
                local x = sd == 2 and rand({2, 3, 5, 6}, dt) or rand({2, 2, 3, 4, 5}, dt)
                local g = ((sd == 2 and lunet.rand(2, 4, 3, 2) or lunet.rand(2, 2, 3, 2, 3)) * 2.6 - 1.3):to(dt)
                check_grad(what, function(xx, gg) return F.grid_sample(xx, gg, o) end, x, {g}, tol)
                if mode ~= 'nearest' then
                  check_grad(what .. ' (grid)', function(gg, xx) return F.grid_sample(xx, gg, o) end, g, {x}, tol)
                end
              end
            end
          end
        end
      end
    end
  end)

  it_dev('ResNet-8 (batch norm, BasicBlocks, global pool) trains, then infers in eval mode, as on the CPU', function()
    local src = debug.getinfo(1, 'S').source:match('^@(.*)spec/cuda_kernels_spec%.lua$')
    local models = dofile(((src == nil or src == '') and './' or src) .. 'bench/models.lua')
    local function run(device)
      lunet.manual_seed(13)
      local model = models.resnet8.build(lunet.nn)
      model:to(device)
      local x, y = lunet.randn({8, 3, 32, 32}):to(device), lunet.randint(1, 11, {8}):to(device)
      local opt = optim.SGD(model:parameters(), {lr = 0.01, momentum = 0.9})
      local losses = {}
      for step = 1, 3 do
        opt:zero_grad()
        local loss = F.cross_entropy(model:forward(x), y)
        loss:backward()
        opt:step()
        losses[step] = loss:item()
      end
      model:eval()
      local out = lunet.no_grad(function() return model:forward(x) end)
      return losses, out:to('cpu:0')
    end
    local c, co = run('cpu:0')
    local d, dout = run(dev)
    for i = 1, #c do assert.is_true(math.abs(c[i] - d[i]) <= 1e-3 * math.max(1, c[i]), ('step %d: %g vs %g'):format(i, c[i], d[i])) end
    same(co, dout, 'ResNet-8 eval forward (fused blocks)', 1e-3)
  end)

  it_dev('trains a small classifier (Linear, ReLU, max pool, cross-entropy) as the CPU does', function()
    local nn = lunet.nn
    local function run(device)
      lunet.manual_seed(3)
      local model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 4))
      model:to(device)
      local x, y = lunet.randn({128, 20}):to(device), lunet.randint(1, 5, {128}):to(device)
      local opt = optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9})
      local losses = {}
      for step = 1, 20 do
        opt:zero_grad()
        local loss = F.cross_entropy(model:forward(x), y)
        loss:backward()
        opt:step()
        losses[step] = loss:item()
      end
      return losses
    end
    local c, d = run('cpu:0'), run(dev)
    for i = 1, #c do assert.is_true(math.abs(c[i] - d[i]) <= 1e-4 * math.max(1, c[i]), ('step %d: %g vs %g'):format(i, c[i], d[i])) end
    assert.is_true(d[#d] < d[1], 'the loss falls')
  end)

  it_dev('a kernel the device lacks is a named error, never a crash', function()
    if not on_cuda then pending('cuda only') return end
    local ok, err = pcall(function()
      return lunet.nn.functional.conv2d(lunet.ones({1, 1, 4, 4}, {device = dev}), lunet.ones({1, 1, 3, 3}, {device = dev}))
    end)
    if not ok then assert.truthy(tostring(err):find(dev, 1, true), err) end
  end)
end)
