-- Raw Lua errors: every public function of lunet, lunet.nn.functional, the
-- Tensor methods (on tensors and on things that are not tensors), the nn,
-- optim and data constructors and the forward of every nn module, called with
-- hostile argument lists (nothing, nil, wrong types, a number where a tensor
-- goes, NaN, huge numbers, lists of the wrong things). Each call must either
-- succeed or raise a string error that names the function (or, for a module's
-- forward, starts with "name: ") and never a raw Lua error from inside lunet
-- ("attempt to index ...", "bad argument #1 to ...", "cannot convert ...").
local ffi = require 'ffi'
local lunet = require 'lunet'
local nn, F, optim, data = lunet.nn, lunet.nn.functional, lunet.optim, lunet.data

local RAW = { 'attempt to ', 'bad argument #', 'cannot convert', 'table index is nil', 'stack overflow',
  'invalid key to', 'wrong number of arguments' }

local function strip(err) return (tostring(err):gsub('^[^:\n]*:%d+: ', '')) end

-- hostile values, made fresh for each call (in-place methods change tensors)
local NONE = {}
local hostile = {
  function() return NONE end,
  function() return nil end,
  function() return 'x' end,
  function() return {} end,
  function() return true end,
  function() return 0 / 0 end,
  function() return 1e300 end,
  function() return 2 ^ 62 end,
  function() return -1 end,
  function() return 1.5 end,
  function() return print end,
  function() return ffi.new('int[2]') end,
  function() return lunet.randn(3, 4) end,
  function() return lunet.tensor({ 1, 2, 3 }, { dtype = 'int64' }) end,
  function() return lunet.tensor(2.5) end,
  function() return lunet.zeros(0) end,
  function() return { lunet.ones(2), lunet.ones(3) } end,
  function() return { -1, 3 } end,
  function() return { 2 ^ 62, 2 ^ 62 } end,
  function() return { 'a', {} } end,
}
-- plausible first arguments, followed by a hostile second one
local plausible = {
  function() return 1 end,
  function() return 2 end,
  function() return lunet.randn(3, 4) end,
  function() return { 2, 3 } end,
}

-- argument lists: every hostile value alone, then each plausible value with
-- every hostile value after it
local function arglists()
  local lists = {}
  for _, h in ipairs(hostile) do lists[#lists + 1] = { h } end
  for _, p in ipairs(plausible) do
    for _, h in ipairs(hostile) do lists[#lists + 1] = { p, h } end
  end
  return lists
end
local ARGS = arglists()

local function call(f, pre, list)
  local args, n = {}, 0
  for i = 1, pre.n or #pre do n = n + 1; args[n] = pre[i] end
  for _, make in ipairs(list) do
    local v = make()
    if v == NONE then break end
    n = n + 1; args[n] = v
  end
  return pcall(f, unpack(args, 1, n))
end


-- nil when the outcome is fine, else what is wrong with it
local function judge(ok, err, names, prefixed)
  if ok then return nil end
  if type(err) ~= 'string' then return 'error is a ' .. type(err) end
  for _, r in ipairs(RAW) do
    if err:find(r, 1, true) then return 'raw Lua error: ' .. strip(err) end
  end
  local msg = strip(err)
  if prefixed then
    if not msg:find('^[%w_.]+: ') then return 'names no function: ' .. msg end
    return nil
  end
  local low = msg:lower()
  for name in names:gmatch('[^|]+') do
    if low:find(name:lower(), 1, true) then return nil end
  end
  return 'does not name ' .. names .. ': ' .. msg
end

-- one line per function: its first bad outcome, and how many it had
local function collect(bad, key, why)
  if not why then return end
  local e = bad[key]
  if e then e.n = e.n + 1 else bad[key] = { n = 1, first = why } end
end
local function report(bad)
  local lines = {}
  for k, e in pairs(bad) do lines[#lines + 1] = ('%s (%d calls): %s'):format(k, e.n, e.first) end
  table.sort(lines)
  return lines
end

-- names an error may give instead of the function's own (aliases and the
-- functions they call)
local alias = {
  concat = 'cat', nelement = 'numel', remainder = 'fmod', get_index = 'select|index', set_index = 'select|copy_|index',
  view_as = 'view', expand_as = 'expand', uniform_ = 'rand|uniform', normal_ = 'randn|normal', var = 'mean|var',
  std = 'mean|std', type = 'to|type', mm = 'matmul|mm', mv = 'matmul|mv', dot = 'matmul|dot', sub = 'add_scaled|sub|add',
  sub_ = 'add_scaled|sub|add', tolist = 'totable|tolist|read', totable = 'totable|read', zero_ = 'fill_|zero_',
  cross_entropy = 'nll_loss|log_softmax', swapaxes = 'transpose', swapdims = 'transpose',
}
for _, k in ipairs({ 'max_pool1d', 'max_pool2d', 'max_pool3d', 'adaptive_max_pool1d', 'adaptive_max_pool2d',
  'adaptive_max_pool3d', 'fractional_max_pool2d', 'fractional_max_pool3d' }) do alias[k .. '_with_indices'] = k end
local function names_of(k)
  local base = k:gsub('_$', '')
  return base .. (alias[k] and ('|' .. alias[k]) or '')
end

describe('API errors: no raw Lua error from any public function', function()
  it('lunet.* (factories, devices, save/load, functional forms of every method)', function()
    local skip = {
      set_cpu_devices = 'changes the devices of the process', fit = 'trains', Trainer = 'trains',
      set_num_threads = 'changes the thread count', set_rng_state = 'changes the generator',
      manual_seed = 'changes the generator', set_flush_denormal = 'changes the FPU mode',
      set_default_dtype = 'changes the default dtype', set_grad_enabled = 'changes grad mode',
      set_detect_anomaly = 'changes anomaly mode', no_grad = 'calls its argument', enable_grad = 'calls its argument',
      detect_anomaly = 'calls its argument', empty_cache = 'no arguments to check', save = 'writes files',
      save_torch = 'writes files',
    }
    local names, had = {}, {}
    for k in pairs(lunet) do had[k] = true end
    finally(function()   -- the functional forms made here stay out of lunet (the REPL completes its keys)
      for k in pairs(lunet) do if not had[k] then rawset(lunet, k, nil) end end
    end)
    for k, v in pairs(lunet) do
      if type(v) == 'function' and not skip[k] then names[k] = true end
    end
    for k, v in pairs(lunet.Tensor) do
      if type(v) == 'function' and type(lunet[k]) == 'function' then names[k] = true end
    end
    local list = {}
    for k in pairs(names) do list[#list + 1] = k end
    table.sort(list)
    assert.is_true(#list > 180, tostring(#list))
    local bad, calls = {}, 0
    local dtype = lunet.get_default_dtype()
    for _, k in ipairs(list) do
      do
        for _, args in ipairs(ARGS) do
          calls = calls + 1
          local ok, err = call(lunet[k], {}, args)
          collect(bad, 'lunet.' .. k, judge(ok, err, names_of(k)))
        end
      end
    end
    assert.equal(dtype, lunet.get_default_dtype())
    assert.is_true(calls > 15000, tostring(calls))
    assert.same({}, report(bad))
    assert.equal(6, lunet.ones(2, 3):sum():item())   -- still usable
  end)

  it('Tensor methods called on something that is not a tensor name the method', function()
    local free = require('lunet.tensor_guard').free_self   -- add(2, t), cat({a, b}): checked by the method
    local selfs = { function() return nil end, function() return 5 end, function() return 'x' end,
      function() return {} end, function() return true end, function() return ffi.new('int[2]') end,
      function() return { lunet.ones(2) } end }
    local bad, calls = {}, 0
    for k, f in pairs(lunet.Tensor) do
      if type(f) == 'function' then
        for _, s in ipairs(selfs) do
          for _, args in ipairs({ {}, { plausible[1] }, { plausible[3] } }) do
            calls = calls + 1
            local ok, err = call(f, { s(), n = 1 }, args)
            local why = judge(ok, err, names_of(k))
            if ok and not free[k] then why = 'succeeded on a ' .. type(s()) end
            collect(bad, 'Tensor.' .. k, why)
          end
        end
      end
    end
    assert.is_true(calls > 3000, tostring(calls))
    assert.same({}, report(bad))
    assert.equal('view: self must be a tensor, got number', strip(select(2, pcall(lunet.Tensor.view, 5, 3))))
    assert.equal('item: self must be a tensor, got table', strip(select(2, pcall(lunet.Tensor.item, {}))))
  end)

  it('Tensor methods on tensors (contiguous, a transposed view, int64, 0-d) with hostile arguments', function()
    local selfs = { function() return lunet.randn(3, 4) end, function() return lunet.randn(4, 3):t() end,
      function() return lunet.tensor({ 1, 2, 3 }, { dtype = 'int64' }) end, function() return lunet.tensor(1.5) end }
    local skip = { data_ptr = 'returns the address' }
    local bad, calls = {}, 0
    for k, f in pairs(lunet.Tensor) do
      if type(f) == 'function' and not skip[k] then
        for _, s in ipairs(selfs) do
          for _, args in ipairs(ARGS) do
            calls = calls + 1
            local ok, err = call(f, { s() }, args)
            collect(bad, 'Tensor.' .. k, judge(ok, err, names_of(k)))
          end
        end
      end
    end
    lunet.synchronize()
    assert.is_true(calls > 50000, tostring(calls))
    assert.same({}, report(bad))
  end)

  it('nn.functional', function()
    local internal = { _new = true, _grid_sample_composed = true }   -- (internal: the specs' and double backward's)
    local bad, calls = {}, 0
    for k, f in pairs(F) do
      if type(f) == 'function' and not internal[k] then
        for _, args in ipairs(ARGS) do
          calls = calls + 1
          local ok, err = call(f, {}, args)
          collect(bad, 'F.' .. k, judge(ok, err, names_of(k)))
        end
        -- a good 4-d input first, then hostile arguments
        for _, args in ipairs(ARGS) do
          calls = calls + 1
          local ok, err = call(f, { lunet.randn(2, 3, 5, 5) }, args)
          collect(bad, 'F.' .. k, judge(ok, err, names_of(k), true))
        end
      end
    end
    assert.is_true(calls > 4000, tostring(calls))
    assert.same({}, report(bad))
  end)

  it('nn, optim and data constructors, and the forward of every nn module', function()
    local bad, calls = {}, 0
    local function callable(v)
      return type(v) == 'function' or (type(v) == 'table' and getmetatable(v) and getmetatable(v).__call)
    end
    local skip = {}
    for mname, m in pairs({ nn = nn, optim = optim, data = data, transforms = data.transforms, utils = nn.utils,
                            rnn = nn.utils.rnn, ['lunet.utils'] = lunet.utils, swa_utils = optim.swa_utils,
                            distributions = lunet.distributions }) do
      for k, v in pairs(m) do
        if callable(v) and not skip[k] and k:sub(1, 1) ~= '_' and k ~= 'functional' then
          for _, args in ipairs(ARGS) do
            calls = calls + 1
            local ok, err = call(v, {}, args)
            collect(bad, mname .. '.' .. k, judge(ok, err, names_of(k), mname ~= 'nn'))
          end
        end
      end
    end
    -- every module, made with plausible arguments, forward with hostile inputs
    local make = {
      Linear = { 3, 2 }, Conv2d = { 3, 4, 3 }, BatchNorm1d = { 3 }, BatchNorm2d = { 3 }, MaxPool2d = { 2 },
      AvgPool2d = { 2 }, AdaptiveAvgPool2d = { 1 }, BasicBlock = { 3, 3 }, Sequential = { nn.ReLU() },
      ModuleList = { { nn.ReLU() } }, Dropout = { 0.5 }, Softmax = { 2 }, LogSoftmax = { 2 },
      AdaptiveMaxPool2d = { 2 }, PixelShuffle = { 2 }, PixelUnshuffle = { 2 }, Unflatten = { 2, { 2, 2 } },
      InstanceNorm2d = { 3 }, InstanceNorm1d = { 3 }, InstanceNorm3d = { 3 }, ParameterList = { {} }, Threshold = { 0.1, 20 },
      Conv1d = { 3, 4, 3 }, MaxPool1d = { 2 }, AvgPool1d = { 2 }, AdaptiveAvgPool1d = { 2 }, AdaptiveMaxPool1d = { 2 },
      CosineSimilarity = { 1 }, PairwiseDistance = { 1, 0.5, true },
      Bilinear = { 4, 4, 2 }, Embedding = { 10, 3 }, EmbeddingBag = { 10, 3 },
      MaxUnpool1d = { 2 }, MaxUnpool2d = { 2 }, MaxUnpool3d = { 2 }, FractionalMaxPool2d = { 2, 1 },
      FractionalMaxPool3d = { 2, 1 }, ConstantPad3d = { 1, 0 }, ReflectionPad3d = { 1 }, ReplicationPad3d = { 1 },
      CrossMapLRN2d = { 3 }, AdaptiveLogSoftmaxWithLoss = { 4, 10, { 3 } },
      Upsample = { { scale_factor = 2 } }, UpsamplingNearest2d = { { scale_factor = 2 } },
      RNNCell = { 4, 3 }, LSTMCell = { 4, 3 }, GRUCell = { 4, 3 }, RNN = { 4, 3 }, LSTM = { 4, 3 }, GRU = { 4, 3 },
      Conv3d = { 3, 4, 3 }, MaxPool3d = { 2 }, AvgPool3d = { 2 }, AdaptiveAvgPool3d = { 2 }, BatchNorm3d = { 3 },
      Unfold = { 2 }, Fold = { 4, 2 }, ReflectionPad1d = { 1 }, ReflectionPad2d = { 1 }, ReplicationPad1d = { 1 },
      ReplicationPad2d = { 1 }, ConstantPad1d = { 1, 0 }, ConstantPad2d = { 1, 0 }, LocalResponseNorm = { 2 },
      ChannelShuffle = { 2 },
      MultiheadAttention = { 4, 2 }, TransformerEncoderLayer = { 4, 2, 8 }, TransformerDecoderLayer = { 4, 2, 8 },
      TransformerEncoder = { nn.TransformerEncoderLayer(4, 2, 8), 2 }, TransformerDecoder = { nn.TransformerDecoderLayer(4, 2, 8), 2 },
      Transformer = { { d_model = 4, nhead = 2, num_encoder_layers = 1, num_decoder_layers = 1, dim_feedforward = 8 } },
      CTCLoss = { { blank = 2, zero_infinity = true } }, HingeEmbeddingLoss = { { margin = 2 } },
      TripletMarginWithDistanceLoss = { { swap = true } },
      ConvTranspose1d = { 3, 4, 3 }, ConvTranspose3d = { 3, 4, 2 }, AdaptiveMaxPool3d = { 2 }, LPPool1d = { 2, 2 },
      LPPool2d = { 2, 2 },
      LazyLinear = { 3 }, LazyConv1d = { 4, 3 }, LazyConv2d = { 4, 3 }, LazyConv3d = { 4, 3 }, LazyConvTranspose1d = { 4, 3 },
      LazyConvTranspose2d = { 4, 3 }, LazyConvTranspose3d = { 4, 2 },
      TripletMarginLoss = { { swap = true } }, MultiMarginLoss = { { p = 2, weight = lunet.ones(4) } },
    }
    local modules = 0
    for k, v in pairs(nn) do
      if type(v) == 'table' and getmetatable(v) and getmetatable(v).__call and k ~= 'Module' then
        local ok, mod = pcall(v, unpack(make[k] or {}))
        if ok and type(mod) == 'table' and mod.forward then
          modules = modules + 1
          for _, args in ipairs(ARGS) do
            calls = calls + 1
            local ok2, err = call(mod, {}, args)
            collect(bad, 'nn.' .. k .. ' forward', judge(ok2, err, k, true))
          end
        end
      end
    end
    assert.is_true(modules >= 20, tostring(modules))
    assert.is_true(calls > 3000, tostring(calls))
    assert.same({}, report(bad))
  end)

  it('the named cases of issue 21 class 10', function()
    local cases = {
      { function() return lunet.eye() end, 'eye: n must be an integer, got nil' },
      { function() return lunet.eye(2, 'x') end, 'eye: m must be an integer, got x' },
      { function() return lunet.arange() end, 'arange: start, end and step must be numbers, got number, nil, number' },
      { function() return lunet.arange(0 / 0) end, 'arange: start, end and step must be finite' },
      { function() return lunet.arange(0, 1e300) end, 'arange: 1.0000000000000001e+300 elements is too large' },
      { function() return lunet.zeros_like(nil) end, 'zeros_like: input must be a tensor, got nil' },
      { function() return lunet.ones_like(5) end, 'ones_like: input must be a tensor, got number' },
      { function() return lunet.full_like(lunet.ones(2), 'x') end, 'full_like: value must be a number, got string' },
      { function() return lunet.empty_like(lunet.ones(2), 3) end, 'empty_like: options must be a table, got number' },
      { function() return lunet.ones(-1) end, 'ones: negative size -1' },
      { function() return lunet.linspace('a', 1, 3) end, 'linspace: start and end must be numbers, got string and number' },
      { function() return lunet.ones(3):clamp() end, 'clamp: at least one of min and max must be given' },
      { function() return lunet.ones(3):clamp_('x') end, 'clamp_: min must be a number, a tensor or nil, got string' },
      { function() return lunet.Tensor.add(5, 3) end, 'add: ' },
      { function() return lunet.Tensor.add(5, lunet.ones(2), 2) end, 'add: first argument must be a tensor, got number' },
      { function() return lunet.ones(2):sub({}, 2) end, 'sub: second argument must be a tensor, got table' },
      { function() return lunet.tensor({ 1 }, 5) end, 'tensor: options must be a table, got number' },
      { function() return lunet.ones(2):permute() end, 'permute: 0 dims given for a 1-d tensor' },
      { function() return lunet.ones(2):normal_('x') end, 'randn: mean must be a number, got string' },
      { function() return lunet.optim.LinearLR(lunet.optim.SGD(nn.Linear(2, 2):parameters(), { lr = 0.1 }), 3) end, 'LinearLR: start_factor must be in (0, 1], got 3' },
      { function() return nn.ReLU()(nil) end, 'relu: input must be a tensor, got nil' },
      { function() return nn.Flatten()(5) end, 'flatten: input must be a tensor, got number' },
      { function() return lunet.ones(1):expand(2 ^ 32):totable() end, 'read: 4294967296 elements is too many to read into Lua' },
      { function() return lunet.empty(0, 1):reshape({ 2 ^ 31, 4, 0, 2 }):totable() end, 'totable: an empty tensor of shape {2147483648,4,0,2} would need 10737418240 nested Lua tables' },
      { function() return F.pad(lunet.ones(1, 1, 2, 2), { 1, 1, true, 0 }) end, 'pad: padding must be integers in 0..2^31' },
      { function() return lunet.cat({ lunet.ones(2), lunet.ones(2) }, 2 ^ 31) end, 'cat: dim 2147483648 out of range' },
      { function() return lunet.Tensor.view(5, 3) end, 'view: self must be a tensor, got number' },
      { function() return lunet.item('x') end, 'item: input must be a tensor, got string' },
      { function() return lunet.exp(3) end, 'exp: input must be a tensor, got number' },
      { function() return lunet.Tensor.t({}) end, 't: self must be a tensor, got table' },
      { function() return lunet.synchronize(77) end, 'synchronize: no device' },
      { function() return F.dropout(lunet.ones(3), 0 / 0) end, 'dropout: p must be in [0, 1], got' },
      { function() return F.adaptive_avg_pool2d(lunet.ones(1, 1, 2, 2), 2 ^ 40) end, 'adaptive_avg_pool2d: output {1,1,1099511627776,1099511627776} is too large' },
      { function() return F.sum_all(nil) end, 'sum_all: input must be a tensor, got nil' },
      { function() return nn.Linear(-1, 3) end, 'nn.Linear: in_features must be an integer >= 0, got -1' },
      { function() return nn.BasicBlock(3, -1) end, 'nn.BasicBlock: ' },
    }
    for i, c in ipairs(cases) do
      local ok, err = pcall(c[1])
      assert.is_false(ok, 'case ' .. i)
      assert.truthy(strip(err):find(c[2], 1, true), ('case %d: got "%s"'):format(i, strip(err)))
    end
    -- what the checks must still allow
    assert.same({ 0, 0.5, 3 }, lunet.tensor({ -1, 0.5, 3 }):clamp(0):totable())
    assert.same({ 2, 2 }, lunet.zeros_like(lunet.ones(2, 2, { dtype = 'int64' })):size())
    assert.equal('int64', lunet.ones_like(lunet.ones(2, { dtype = 'int64' })).dtype)
    assert.equal('float64', lunet.full_like(lunet.ones(2), 7, { dtype = 'float64' }).dtype)
    assert.same({ 7, 7 }, lunet.full_like(lunet.ones(2), 7):totable())
    assert.same({ { 1, 0, 0 }, { 0, 1, 0 } }, lunet.eye(2, 3):totable())
    assert.equal(6, lunet.add(2, lunet.ones(2)):sum():item())
  end)
end)


describe('API errors point at the line that called lunet', function()
  -- a bad dtype or device is found deep inside lunet (factory -> make -> core):
  -- the message still carries this file's line, not lunet's
  local function where(fn)
    local ok, err = pcall(fn)
    assert.is_false(ok)
    return tostring(err)
  end
  -- each case's error names this file's line, once, and no lunet file
  local function located_once(cases)
    for i, fn in ipairs(cases) do
      local err = where(fn)
      assert.truthy(err:find('^[^:]*api_errors_spec%.lua:%d+: '), 'case ' .. i .. ': ' .. err)
      assert.is_nil(err:find('api_errors_spec%.lua:%d+: [^\n]*api_errors_spec%.lua:%d+: '), 'case ' .. i .. ': ' .. err)
      assert.is_nil(err:find('lunet/'), 'case ' .. i .. ': ' .. err)
    end
  end
  it('bad devices and dtypes in factories, to() and modules', function()
    local cases = {
      function() lunet.ones(2, { device = 'cpu:9' }) end,
      function() lunet.zeros({ 2 }, { dtype = 'float13' }) end,
      function() lunet.full({ 2 }, 1, { device = 'gpu' }) end,
      function() lunet.ones(2):to('cpu:9') end,
      function() lunet.nn.Linear(2, 2):to('cpu:9') end,
      -- (the parallel wrappers and profiles named the line twice)
      function() lunet.parallel.Pipeline(lunet.nn.Sequential { lunet.nn.Linear(2, 2), lunet.nn.ReLU() }, { devices = { 'cpu:0', 'cpu:99' } }) end,
      function() lunet.parallel.DataParallel(lunet.nn.Linear(2, 2), { devices = { 'cpu:0', 'cpu:99' } }) end,
      function() lunet.parallel.DataParallel(lunet.nn.Linear(2, 2), { devices = { 0.5 } }) end,
      function() lunet.parallel.profile.atoms({ lunet.nn.Linear(2, 2) }, lunet.randn(2, 2), 'cpu:99') end,
      function() lunet.parallel.profile.link('cpu:0', 'cpu:99') end,
    }
    located_once(cases)
  end)

  it('errors the C library reports (shapes, indices, targets) name the caller\'s line, through modules and fit', function()
    local nn, data = lunet.nn, lunet.data
    local cases = {
      function() lunet.ones(2, 3):view(5) end,
      function() lunet.ones(2, 3):matmul(lunet.ones(2, 3)) end,
      function() local _ = lunet.ones(2, 3) + lunet.ones(4, 5) end,
      function() lunet.cat({ lunet.ones(2, 3), lunet.ones(2, 4) }, 1) end,
      function() lunet.ones(3):index_select(1, { 7 }) end,
      function() nn.Sequential { nn.Conv2d(3, 4, 3) }(lunet.ones(1, 2, 8, 8)) end,
      function() nn.CrossEntropyLoss()(lunet.randn(2, 3), lunet.tensor({ 1, 9 }):long()) end,
      function()
        local ds = data.TensorDataset(lunet.randn(8, 4), lunet.randint(4, 9, { 8 }))
        lunet.fit(nn.Sequential { nn.Linear(4, 3) }, data.DataLoader(ds, { batch_size = 4 }), { quiet = true, progress = false })
      end,
    }
    for i, fn in ipairs(cases) do
      local err = where(fn)
      assert.truthy(err:find('^[^:]*api_errors_spec%.lua:%d+: '), 'case ' .. i .. ': ' .. err)
      assert.is_nil(err:find('lunet/'), 'case ' .. i .. ': ' .. err)
    end
  end)

  it('argument checks in Lua (shapes, dims, lists, fields) name the caller\'s line once, and a DataLoader\'s too', function()
    local data, T = lunet.data, lunet.data.transforms
    local x = lunet.randn(3, 4)
    local w = lunet.randn(3)
    w.requires_grad = true
    local ds = data.TensorDataset(lunet.ones(8, 1, 4, 4), lunet.zeros(8):long())
    local cases = {
      -- (these had no location: their level was counted through lunet's frames)
      function() x:view(2.5, 4) end,
      function() x:reshape('a') end,
      function() x:select(9, 1) end,
      function() x:transpose(0, 1) end,
      function() x:squeeze(5) end,
      function() x:unsqueeze(9) end,
      function() lunet.cat({}) end,
      function() lunet.tensor({ { 1, 2 }, { 3 } }) end,
      function() lunet.full({ 0 / 0 }, 1) end,
      function() local y = x:clone(); y[1] = 'a' end,
      function() lunet.ones(2):int().requires_grad = true end,
      -- (accepted before: a number taken as true, a gradient of another shape, start after end)
      function() w.requires_grad = 'yes' end,
      function() w.grad = lunet.ones(5) end,
      function() w.grad = lunet.ones(3, 1) end,
      function() x:flatten(2, 1) end,
      -- (these named the line twice)
      function() data.DataLoader(ds, { batch_size = 4, transform = T.RandomCrop(8) }) end,
      function() data.DataLoader(ds, { batch_size = 4, sampler = 5 }) end,
      function() data.DataLoader(ds, { batch_size = 4, shuffle = 'x' }) end,
      -- (these named the line that called the caller: a fixed level)
      function() lunet.nn.BatchNorm2d(4)(lunet.randn(2, 3, 4, 4)) end,
      function() lunet.nn.BatchNorm1d(3)(lunet.randn(2, 3, 4, 4)) end,
      function() lunet.nn.BatchNorm2d(3)('x') end,
      function() lunet.nn.Conv2d(3, 4, 3, { groups = 2 }) end,
    }
    located_once(cases)
    w.grad = lunet.ones(3)   -- (one of the right shape, dtype and device is taken)
    assert.same({ 1, 1, 1 }, w.grad:totable())
  end)

  it("a Lua dataset's samples that cannot make a batch, at the loop over the loader", function()
    local data = lunet.data
    local function loader(get)
      local D = data.Dataset:extend('D')
      function D:__len() return 4 end
      D.get = get
      return data.DataLoader(D(), { batch_size = 2 })
    end
    for i, c in ipairs {
      { function(_, k) return lunet.ones(k), 1 end, 'DataLoader: sample 2 input has shape {2}, sample 1 {1}' },
      { function() return nil end, 'DataLoader: a sample input must be a number or a tensor, got nil' },
      { function(_, k) return k == 1 and 1 or lunet.ones(1), 1 end, 'DataLoader: sample 2 input is tensor, sample 1 a number' },
      { function(_, k) return lunet.ones(k == 1 and 2 or 3), 1 end, 'DataLoader: sample 2 input' },
    } do
      local l = loader(c[1])
      local err = where(function() for _ in l:iter() do end end)
      assert.truthy(err:find('^[^:]*api_errors_spec%.lua:%d+: '), 'case ' .. i .. ': ' .. err)
      assert.truthy(err:find(c[2], 1, true), 'case ' .. i .. ': ' .. err)
    end
  end)

  it("a Communicator's bad world_size and ranks", function()
    for i, fn in ipairs {
      function() lunet.comm.Communicator({ 'cpu:0' }, { world_size = 0 }) end,
      function() lunet.comm.Communicator({ 'cpu:0' }, { ranks = { 0.5 } }) end,
    } do
      local err = where(fn)
      assert.truthy(err:find('^[^:]*api_errors_spec%.lua:%d+: Communicator: '), 'case ' .. i .. ': ' .. err)
    end
  end)

  it("a layer's bad input, called directly, through a module, a Sequential and a profile", function()
    local nn, F = lunet.nn, lunet.nn.functional
    local seq = nn.Sequential { nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3) }
    local cases = {
      { function() F.linear(lunet.randn(2, 5), lunet.randn(3, 4)) end, 'linear: input has 5 features, weight expects 4' },
      { function() nn.Linear(4, 3)(lunet.randn(2, 5)) end, 'linear: input has 5 features, weight expects 4' },
      { function() seq(lunet.randn(2, 5)) end, 'linear: input has 5 features, weight expects 4' },
      { function() lunet.no_grad(function() return seq(lunet.randn(2, 5)) end) end, 'linear: input has 5 features' },
      { function() nn.Conv2d(1, 2, 3)(lunet.randn(1, 1, 2, 2)) end, 'conv2d: input {1,1,2,2} is too small' },
      { function() nn.MaxPool2d(4)(lunet.randn(1, 1, 2, 2)) end, 'max_pool2d: input {1,1,2,2} is too small' },
      { function() nn.CrossEntropyLoss()(lunet.randn(4, 3), lunet.randint(1, 4, { 5 })) end, 'input has batch size 4, target has 5' },
      { function() lunet.parallel.profile.atoms({ seq[1], seq[2], seq[3] }, lunet.randn(8, 5), 'cpu:0') end,
        'linear: input has 5 features' },
    }
    for i, c in ipairs(cases) do
      local err = where(c[1])
      assert.truthy(err:find('^[^:]*api_errors_spec%.lua:%d+: '), 'case ' .. i .. ': ' .. err)
      assert.truthy(err:find(c[2], 1, true), 'case ' .. i .. ': ' .. err)
      assert.is_nil(err:find('lunet/'), 'case ' .. i .. ': ' .. err)
    end
  end)
end)
