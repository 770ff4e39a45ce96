-- Options tables across the public API (lunet.options): an unknown key is an
-- error naming the function and the closest known name, PyTorch's (and
-- Torch7's) unambiguous spellings are aliases giving the same result, and
-- PyTorch's positional forms build the same thing as the options form.
local lunet = require 'lunet'
local options = require 'lunet.options'
local nn, optim, data = lunet.nn, lunet.optim, lunet.data
local F = nn.functional

local err_of = require('support.fixtures').err_of

local function raises(f, msg)
  local e = err_of(f)
  assert.truthy(e:find(msg, 1, true), ('expected "%s" in "%s"'):format(msg, e))
  assert.falsy(e:find('attempt to', 1, true), 'a raw Lua error: ' .. e)
  return e
end

local function same(a, b) assert.are.same(a:totable(), b:totable()) end

-- calls each case {name, f} with every pair of vals; returns the raw Lua
-- errors (at most 10) and the number of calls. prints: what was built must print.
local function raw_errors(cases, vals, prints)
  local raw, n = {}, 0
  for _, c in ipairs(cases) do
    for i = 0, #vals do
      for j = 0, #vals do
        local ok, e = pcall(c[2], vals[i], vals[j])
        n = n + 1
        if ok and prints then ok, e = pcall(tostring, e) end
        e = tostring(e)
        if not ok and (e:find('attempt to', 1, true) or e:find('bad argument', 1, true)) and #raw < 10 then
          raw[#raw + 1] = ('%s(%s, %s): %s'):format(c[1], tostring(vals[i]), tostring(vals[j]), e)
        end
      end
    end
  end
  return raw, n
end

local tmp = require 'tmp'
local tmpname = tmp.file
teardown(tmp.clean)

describe('options.check', function()
  local K = { stride = 'number|table', padding = 'number|table|string', bias = 'boolean', w = 'tensor', device = true }

  it('names the function and the closest known option', function()
    raises(function() options.check('nn.Conv2d', { pad = 1 }, K) end, "nn.Conv2d: unknown option 'pad' (did you mean 'padding'?)")
    raises(function() options.check('f', { strides = 2 }, K) end, "f: unknown option 'strides' (did you mean 'stride'?)")
    raises(function() options.check('f', { Bias = false }, K) end, "f: unknown option 'Bias' (did you mean 'bias'?)")
  end)

  it('lists the known options when none is close', function()
    raises(function() options.check('f', { zzz = 1 }, K) end,
      "f: unknown option 'zzz' (known: bias, device, padding, stride, w)")
  end)

  it('checks types where cheap, and that options are a table of names', function()
    raises(function() options.check('f', { bias = 1 }, K) end, "f: option 'bias' must be a boolean, got number")
    raises(function() options.check('f', { stride = 'x' }, K) end, "f: option 'stride' must be a number or table, got string")
    raises(function() options.check('f', { w = 3 }, K) end, "f: option 'w' must be a tensor, got number")
    raises(function() options.check('f', 3, K) end, 'f: options must be a table, got number')
    raises(function() options.check('f', lunet.zeros(1), K) end, 'f: options must be a table, got a tensor')
    raises(function() options.check('f', { 1, 2 }, K) end, 'f: options are named')
    assert.is_nil(options.check('f', nil, K))
    local o = { stride = 2, device = {} }
    assert.are.equal(o, options.check('f', o, K))            -- any type for `true`
    options.check('f', { w = lunet.zeros(1) }, K)
  end)

  it('renames aliases in a copy (the caller\'s table is untouched), and refuses both spellings', function()
    local o = { num_workers = 2, shuffle = true }
    local r = options.check('DataLoader', o, { workers = 'number', shuffle = 'boolean' }, { num_workers = 'workers' })
    assert.are.same({ workers = 2, shuffle = true }, r)
    assert.are.same({ num_workers = 2, shuffle = true }, o)
    raises(function() options.check('DataLoader', { num_workers = 2, workers = 1 }, { workers = 'number' }, { num_workers = 'workers' }) end,
      "DataLoader: options 'num_workers' and 'workers' are the same option")
    raises(function() options.check('DataLoader', { num_worker = 2 }, { workers = 'number' }, { num_workers = 'workers' }) end,
      "DataLoader: unknown option 'num_worker' (did you mean 'workers'?)")
  end)

  it('raises at the caller\'s line', function()
    local line = debug.getinfo(1, 'l').currentline + 1
    local ok, e = pcall(function() local m = nn.Conv2d(3, 16, 3, { pad = 1 }); return m end)
    assert.is_false(ok)
    assert.truthy(tostring(e):find('options_spec.lua:' .. line .. ': nn.Conv2d: unknown option', 1, true), e)
  end)

  it('allocates nothing when the options are right (functional calls check every call)', function()
    local opts = { stride = 1, padding = { 1, 1 }, bias = true, device = 'cpu:0' }
    local function loop() for _ = 1, 2000 do options.check('f', opts, K) end end
    -- interpreted only: a trace recorded in the loop is Lua heap and would
    -- count as an allocation. jit.off stops new traces but the ones earlier
    -- specs compiled through check still run (and exit); flush drops them.
    jit.off(); jit.flush()
    local ok, err = pcall(function()
      loop()
      collectgarbage('stop')
      local before = collectgarbage('count')
      loop()
      local after = collectgarbage('count')
      collectgarbage('restart')
      assert.are.equal(before, after)
    end)
    jit.on()
    collectgarbage('restart')
    assert(ok, err)
  end)
end)

describe('every options table rejects an unknown key', function()
  local x4 = lunet.randn(2, 3, 8, 8)
  local w = lunet.randn(4, 3, 3, 3)
  local logits, y = lunet.randn(4, 3), lunet.tensor({ 1, 2, 3, 1 }, { dtype = 'int64' })
  local params = { lunet.zeros(2) }
  local function sgd() return optim.SGD({ lunet.zeros(2) }, { lr = 0.1 }) end
  local ds = data.TensorDataset(lunet.randn(8, 2), lunet.tensor({ 1, 2, 1, 2, 1, 2, 1, 2 }, { dtype = 'int64' }))
  local st = tmpname('.st')
  lunet.save(st, { a = lunet.zeros(2) })

  local cases = {
    -- nn modules
    { function() return nn.Conv2d(3, 16, 3, { pad = 1 }) end, "nn.Conv2d: unknown option 'pad' (did you mean 'padding'?)" },
    { function() return nn.MaxPool2d(2, { strid = 2 }) end, "nn.MaxPool2d: unknown option 'strid' (did you mean 'stride'?)" },
    { function() return nn.AvgPool2d(2, { ceil = true }) end, "nn.AvgPool2d: unknown option 'ceil' (did you mean 'ceil_mode'?)" },
    { function() return nn.BatchNorm2d(4, { epsilon = 1e-3 }) end, "nn.BatchNorm2d: unknown option 'epsilon' (did you mean 'eps'?)" },
    { function() return nn.BatchNorm1d(4, { momentun = 0.1 }) end, "nn.BatchNorm1d: unknown option 'momentun' (did you mean 'momentum'?)" },
    { function() return nn.Linear(2, 3, { biass = false }) end, "nn.Linear: unknown option 'biass' (did you mean 'bias'?)" },
    { function() return nn.Dropout { p = 0.2, inplce = true } end, "nn.Dropout: unknown option 'inplce' (did you mean 'inplace'?)" },
    { function() return nn.LeakyReLU { negative_slop = 0.1 } end, "nn.LeakyReLU: unknown option 'negative_slop' (did you mean 'negative_slope'?)" },
    { function() return nn.ELU { alph = 1 } end, "nn.ELU: unknown option 'alph' (did you mean 'alpha'?)" },
    { function() return nn.GELU { approx = 'tanh' } end, "nn.GELU: unknown option 'approx' (did you mean 'approximate'?)" },
    { function() return nn.Softmax { dims = 2 } end, "nn.Softmax: unknown option 'dims' (did you mean 'dim'?)" },
    { function() return nn.LogSoftmax { dimm = 2 } end, "nn.LogSoftmax: unknown option 'dimm' (did you mean 'dim'?)" },
    { function() return nn.Flatten { start = 2 } end, "nn.Flatten: unknown option 'start' (did you mean 'start_dim'?)" },
    { function() return nn.AdaptiveAvgPool2d { size = 1 } end, "nn.AdaptiveAvgPool2d: unknown option 'size' (did you mean 'output_size'?)" },
    { function() return nn.ReLU { in_place = true } end, "nn.ReLU: unknown option 'in_place' (did you mean 'inplace'?)" },
    { function() return nn.CrossEntropyLoss { label_smooth = 0.1 } end, "nn.CrossEntropyLoss: unknown option 'label_smooth' (did you mean 'label_smoothing'?)" },
    { function() return nn.NLLLoss { ignore = 1 } end, "nn.NLLLoss: unknown option 'ignore' (did you mean 'ignore_index'?)" },
    { function() return nn.MSELoss { reduce = 'sum' } end, "nn.MSELoss: unknown option 'reduce' (did you mean 'reduction'?)" },
    { function() return nn.BCEWithLogitsLoss { posweight = lunet.ones(1) } end, "nn.BCEWithLogitsLoss: unknown option 'posweight' (did you mean 'pos_weight'?)" },
    { function() return nn.BasicBlock(4, 4, 1, { dtyp = 'float64' }) end, "nn.BasicBlock: unknown option 'dtyp' (did you mean 'dtype'?)" },
    { function() return nn.init.kaiming_uniform_(lunet.empty(2, 2), { mod = 'fan_out' }) end, "init.kaiming_uniform_: unknown option 'mod' (did you mean 'mode'?)" },
    -- functional
    { function() return F.conv2d(x4, w, nil, { pad = 1 }) end, "conv2d: unknown option 'pad' (did you mean 'padding'?)" },
    { function() return F.max_pool2d(x4, 2, { strides = 2 }) end, "max_pool2d: unknown option 'strides' (did you mean 'stride'?)" },
    { function() return F.avg_pool2d(x4, 2, { pad = 1 }) end, "avg_pool2d: unknown option 'pad' (did you mean 'padding'?)" },
    { function() return F.cross_entropy(logits, y, { label_smoothin = 0.1 }) end, "cross_entropy: unknown option 'label_smoothin' (did you mean 'label_smoothing'?)" },
    { function() return F.nll_loss(logits, y, { label_smoothing = 0.1 }) end, "nll_loss: unknown option 'label_smoothing' (known: ignore_index, reduction, weight)" },
    { function() return F.mse_loss(logits, logits, { reduce = 'sum' }) end, "mse_loss: unknown option 'reduce' (did you mean 'reduction'?)" },
    { function() return F.binary_cross_entropy_with_logits(logits, logits, { weights = logits }) end, "binary_cross_entropy_with_logits: unknown option 'weights' (did you mean 'weight'?)" },
    -- data
    { function() return data.DataLoader(ds, { batch_sz = 4 }) end, "DataLoader: unknown option 'batch_sz' (did you mean 'batch_size'?)" },
    { function() return data.TensorDataset(lunet.zeros(2, 2), { images = true }) end, "TensorDataset: unknown option 'images' (did you mean 'image'?)" },
    { function() return data.RandomSampler(ds, { replace = true }) end, "RandomSampler: unknown option 'replace' (did you mean 'replacement'?)" },
    { function() return data.WeightedRandomSampler({ 1, 2 }, 2, { replacment = false }) end, "WeightedRandomSampler: unknown option 'replacment' (did you mean 'replacement'?)" },
    { function() return data.SubsetRandomSampler({ 1 }, { seeds = 1 }) end, "SubsetRandomSampler: unknown option 'seeds' (did you mean 'seed'?)" },
    { function() return data.DataLoader(ds, { collate = print }) end, "DataLoader: unknown option 'collate' (did you mean 'collate_fn'?)" },
    { function() return data.Synthetic { clases = 3 } end, "Synthetic: unknown option 'clases' (did you mean 'classes'?)" },
    { function() return data.FashionMNIST { roots = '/x' } end, "FashionMNIST: unknown option 'roots' (did you mean 'root'?)" },
    { function() return data.MNIST { target_transform = 1 } end, "MNIST: unknown option 'target_transform' (did you mean 'transform'?)" },
    { function() return data.CIFAR10 { transfrom = 1 } end, "CIFAR10: unknown option 'transfrom' (did you mean 'transform'?)" },
    { function() return data.CIFAR100 { label = 'coarse' } end, "CIFAR100: unknown option 'label'" },
    { function() return data.KMNIST { roots = '/x' } end, "KMNIST: unknown option 'roots' (did you mean 'root'?)" },
    { function() return data.EMNIST { splits = 'mnist' } end, "EMNIST: unknown option 'splits' (did you mean 'split'?)" },
    { function() return data.encode_png(lunet.zeros({ 1, 2, 2 }, { dtype = 'uint8' }), { level = 1 }) end, "encode_png: unknown option 'level'" },
    { function() return data.write_jpeg(lunet.zeros({ 1, 2, 2 }, { dtype = 'uint8' }), 'x.jpg', { qualty = 1 }) end, "write_jpeg: unknown option 'qualty' (did you mean 'quality'?)" },
    { function() return lunet.utils.make_grid(x4, { nrows = 2 }) end, "make_grid: unknown option 'nrows' (did you mean 'nrow'?)" },
    { function() return lunet.utils.save_image(x4, 'x.png', { normalise = true }) end, "save_image: unknown option 'normalise' (did you mean 'normalize'?)" },
    { function() return data.ImageFolder('spec/fixtures', { transfrom = 1 }) end, "ImageFolder: unknown option 'transfrom' (did you mean 'transform'?)" },
    { function() return data.read_image('x.png', { mod = 'RGB' }) end, "read_image: unknown option 'mod' (did you mean 'mode'?)" },
    { function() return data.transforms.RandomCrop(8, { pad = 2 }) end, "RandomCrop: unknown option 'pad' (did you mean 'padding'?)" },
    { function() return data.transforms.RandomHorizontalFlip(0.5)(x4, { epochs = 1 }) end, "transform: unknown option 'epochs' (did you mean 'epoch'?)" },
    { function() return data.transforms.RandomPerspective(0.5, { interpolate = 'nearest' }) end, "RandomPerspective: unknown option 'interpolate' (did you mean 'interpolation'?)" },
    { function() return data.transforms.RandomApply({ data.transforms.RandomInvert() }, { prob = 0.5 }) end, "RandomApply: unknown option 'prob'" },
    { function() return data.transforms.TenCrop(4, { vertical = true }) end, "TenCrop: unknown option 'vertical' (did you mean 'vertical_flip'?)" },
    -- optim
    { function() return optim.SGD(params, { lr = 0.1, momentun = 0.9 }) end, "SGD: unknown option 'momentun' (did you mean 'momentum'?)" },
    { function() return optim.Adam(params, { beta = { 0.9, 0.99 } }) end, "Adam: unknown option 'beta' (did you mean 'betas'?)" },
    { function() return optim.AdamW(params, { weight_decy = 0.1 }) end, "AdamW: unknown option 'weight_decy' (did you mean 'weight_decay'?)" },
    { function() return optim.RMSprop(params, { centred = true }) end, "RMSprop: unknown option 'centred' (did you mean 'centered'?)" },
    { function() return optim.Adagrad(params, { lr_decy = 0.1 }) end, "Adagrad: unknown option 'lr_decy' (did you mean 'lr_decay'?)" },
    { function() return optim.Adamax(params, { weight_decy = 0.1 }) end, "Adamax: unknown option 'weight_decy' (did you mean 'weight_decay'?)" },
    { function() return optim.NAdam(params, { momentum_decy = 0.1 }) end, "NAdam: unknown option 'momentum_decy' (did you mean 'momentum_decay'?)" },
    { function() return optim.RAdam(params, { bettas = { 0.9, 0.99 } }) end, "RAdam: unknown option 'bettas' (did you mean 'betas'?)" },
    { function() return optim.Adadelta(params, { rhoo = 0.9 }) end, "Adadelta: unknown option 'rhoo' (did you mean 'rho'?)" },
    { function() return optim.Rprop(params, { eta = { 0.5, 1.2 } }) end, "Rprop: unknown option 'eta' (did you mean 'etas'?)" },
    { function() return optim.ASGD(params, { lambda = 1e-4 }) end, "ASGD: unknown option 'lambda' (did you mean 'lambd'?)" },
    { function() return optim.LBFGS(params, { history = 10 }) end, "LBFGS: unknown option 'history' (did you mean 'history_size'?)" },
    { function() return optim.SWALR(sgd(), { swa_lrr = 0.1 }) end, "SWALR: unknown option 'swa_lrr' (did you mean 'swa_lr'?)" },
    { function() return optim.swa_utils.AveragedModel(lunet.nn.Linear(2, 2), { avgfn = 1 }) end, "AveragedModel: unknown option 'avgfn' (did you mean 'avg_fn'?)" },
    { function() return optim.SGD({ { params = params, lrr = 0.1 } }, { lr = 0.1 }) end, "SGD: unknown option 'lrr' in a param group (did you mean 'lr'?)" },
    { function() return optim.StepLR(sgd(), { step_size = 2, gama = 0.5 }) end, "StepLR: unknown option 'gama' (did you mean 'gamma'?)" },
    { function() return optim.MultiStepLR(sgd(), { milestone = { 1 } }) end, "MultiStepLR: unknown option 'milestone' (did you mean 'milestones'?)" },
    { function() return optim.CosineAnnealingLR(sgd(), { Tmax = 3 }) end, "CosineAnnealingLR: unknown option 'Tmax' (did you mean 'T_max'?)" },
    { function() return optim.LinearLR(sgd(), { start = 0.5 }) end, "LinearLR: unknown option 'start' (did you mean 'start_factor'?)" },
    { function() return optim.ExponentialLR(sgd(), { gamm = 0.9 }) end, "ExponentialLR: unknown option 'gamm' (did you mean 'gamma'?)" },
    { function() return optim.LambdaLR(sgd(), { lambda = function() return 1 end }) end, "LambdaLR: unknown option 'lambda' (did you mean 'lr_lambda'?)" },
    { function() return optim.OneCycleLR(sgd(), { max_lr = 1, total_steps = 10, pct = 0.3 }) end, "OneCycleLR: unknown option 'pct' (did you mean 'pct_start'?)" },
    { function() return optim.clip_grad_norm(params, 1, { norm = 2 }) end, "clip_grad_norm: unknown option 'norm' (did you mean 'norm_type'?)" },
    { function() return nn.utils.weight_norm(nn.Linear(2, 2), { dims = 1 }) end, "weight_norm: unknown option 'dims' (did you mean 'dim'?)" },
    { function() return lunet.randn(2, 3):histogram(3, { densty = true }) end, "histogram: unknown option 'densty' (did you mean 'density'?)" },
    { function() return lunet.rand(3):multinomial(1, { replacment = true }) end, "multinomial: unknown option 'replacment' (did you mean 'replacement'?)" },
    { function() return lunet.randn(2, 3):cov({ corection = 0 }) end, "cov: unknown option 'corection' (did you mean 'correction'?)" },
    { function() return lunet.randn(3):index_reduce(1, { 1 }, lunet.randn(1), 'amax', { include = false }) end,
      "index_reduce: unknown option 'include' (did you mean 'include_self'?)" },
    { function() return nn.utils.spectral_norm(nn.Linear(2, 2), { n_power_iteration = 2 }) end,
      "spectral_norm: unknown option 'n_power_iteration' (did you mean 'n_power_iterations'?)" },
    { function() return nn.utils.rnn.pad_sequence({ lunet.ones(2) }, { padding = 1 }) end,
      "pad_sequence: unknown option 'padding' (did you mean 'padding_value'?)" },
    { function() return nn.utils.rnn.pack_padded_sequence(lunet.ones(2, 1), { 1 }, { enforce_sort = false }) end,
      "pack_padded_sequence: unknown option 'enforce_sort' (did you mean 'enforce_sorted'?)" },
    { function() return nn.utils.rnn.pad_packed_sequence(nn.utils.rnn.pack_sequence({ lunet.ones(2) }), { total_len = 3 }) end,
      "pad_packed_sequence: unknown option 'total_len' (did you mean 'total_length'?)" },
    -- distributions
    { function() return lunet.distributions.Normal(0, 1, { validate = false }) end, "Normal: unknown option 'validate' (did you mean 'validate_args'?)" },
    { function() return lunet.distributions.Bernoulli({ logit = lunet.zeros(2) }) end, "Bernoulli: unknown option 'logit' (did you mean 'logits'?)" },
    { function() return lunet.distributions.MultivariateNormal(lunet.zeros(2), { scale_trill = lunet.eye(2) }) end,
      "MultivariateNormal: unknown option 'scale_trill' (did you mean 'scale_tril'?)" },
    -- training, parallel, files
    { function() return lunet.fit(nn.Linear(2, 2), data.DataLoader(ds), { epoch = 1 }) end, "fit: unknown option 'epoch' (did you mean 'epochs'?)" },
    { function() return lunet.Trainer(nn.Linear(2, 2), { val = 1 }) end, "fit: unknown option 'val' (did you mean 'val_loader'?)" },
    { function() return lunet.fit(nn.Linear(2, 2), data.DataLoader(ds), { checkpoint = '/tmp/x', checkpoint_every = { step = 1 } }) end,
      "fit: checkpoint_every: unknown option 'step' (did you mean 'steps'?)" },
    { function() return lunet.parallel.DataParallel(nn.Linear(2, 2), { device = { 'cpu:0' } }) end, "DataParallel: unknown option 'device' (did you mean 'devices'?)" },
    { function() return lunet.checkpoint.load('/nonexistent', { devic = 'cpu:0' }) end, "checkpoint.load: unknown option 'devic' (did you mean 'device'?)" },
    { function() return lunet.load('/nonexistent', { dev = 'cpu:0' }) end, "load: unknown option 'dev' (did you mean 'device'?)" },
    { function() return require('lunet.serialize').open(st):get('a', { devce = 'cpu:0' }) end, "get: unknown option 'devce' (did you mean 'device'?)" },
    { function() return require('lunet.repl').run({ quit = true }) end, "repl.run: unknown option 'quit' (did you mean 'quiet'?)" },
    -- tensors
    { function() return lunet.zeros(2, { dtyp = 'float64' }) end, "zeros: unknown option 'dtyp' (did you mean 'dtype'?)" },
    { function() return lunet.ones({ 2 }, { devices = 'cpu:0' }) end, "ones: unknown option 'devices' (did you mean 'device'?)" },
    { function() return lunet.randn(2, 3, { require_grad = true }) end, "randn: unknown option 'require_grad' (did you mean 'requires_grad'?)" },
    { function() return lunet.rand(2, { dtyp = 'float64' }) end, "rand: unknown option 'dtyp'" },
    { function() return lunet.empty(2, { dtyp = 'float64' }) end, "empty: unknown option 'dtyp'" },
    { function() return lunet.full({ 2 }, 1, { dtyp = 'float64' }) end, "full: unknown option 'dtyp'" },
    { function() return lunet.arange(5, { dtyp = 'float64' }) end, "arange: unknown option 'dtyp'" },
    { function() return lunet.linspace(0, 1, 5, { dtyp = 'float64' }) end, "linspace: unknown option 'dtyp'" },
    { function() return lunet.eye(2, { dtyp = 'float64' }) end, "eye: unknown option 'dtyp'" },
    { function() return lunet.randint(0, 5, { 3 }, { dtyp = 'int32' }) end, "randint: unknown option 'dtyp'" },
    { function() return lunet.tensor({ 1, 2 }, { dtyp = 'float64' }) end, "tensor: unknown option 'dtyp'" },
    { function() return lunet.zeros_like(logits, { dtyp = 'float64' }) end, "zeros_like: unknown option 'dtyp'" },
    { function() return lunet.full_like(logits, 1, { dtyp = 'float64' }) end, "full_like: unknown option 'dtyp'" },
    { function() return logits:to { dtyp = 'float64' } end, "to: unknown option 'dtyp' (did you mean 'dtype'?)" },
    { function() return nn.Linear(2, 2):to { devce = 'cpu:0' } end, "to: unknown option 'devce' (did you mean 'device'?)" },
    { function() return logits:addmm(logits, lunet.eye(3), { alph = 2 }) end, "addmm: unknown option 'alph' (did you mean 'alpha'?)" },
    { function()
      local a = lunet.ones(2, { requires_grad = true })
      return a:sum():backward({ retain = true })
    end, "backward: unknown option 'retain' (did you mean 'retain_graph'?)" },
    { function()
      local a = lunet.ones(2, { requires_grad = true })
      return lunet.autograd.backward({ a:sum() }, nil, { retain = true })
    end, "autograd.backward: unknown option 'retain' (did you mean 'retain_graph'?)" },
    { function()
      local a = lunet.ones(2, { requires_grad = true })
      return lunet.autograd.grad(a:sum(), a, { create = true })
    end, "autograd.grad: unknown option 'create' (did you mean 'create_graph'?)" },
    { function() return lunet.autograd.functional.hessian(function(t) return t:sum() end, lunet.ones(2), { vectorise = true }) end,
      "autograd.functional.hessian: unknown option 'vectorise' (did you mean 'vectorize'?)" },
    { function() return lunet.randn(3, 4):var(2, { keep_dim = true }) end, "var: unknown option 'keep_dim' (did you mean 'keepdim'?)" },
    { function() return lunet.randn(3, 4):std({ correct = 0 }) end, "std: unknown option 'correct' (did you mean 'correction'?)" },
    { function() return lunet.parallel.Reducer.new({ { lunet.zeros(2, { requires_grad = true }) } }, nil, { bucket = 1 }) end,
      "Reducer: unknown option 'bucket' (did you mean 'bucket_mb'?)" },
    -- collectives
    { function() return lunet.comm.Communicator({ 'cpu:0' }, { backnd = 'local' }) end, "Communicator: unknown option 'backnd' (did you mean 'backend'?)" },
    { function() return lunet.comm.Communicator({ 'cpu:0' }):allreduce({ lunet.zeros(2) }, { opp = 'sum' }) end, "allreduce: unknown option 'opp' (did you mean 'op'?)" },
    { function() return lunet.comm.Communicator({ 'cpu:0' }):broadcast({ lunet.zeros(2) }, { roots = 1 }) end, "broadcast: unknown option 'roots' (did you mean 'root'?)" },
    { function() return lunet.comm.Communicator({ 'cpu:0' }):reduce_scatter({ lunet.zeros(2) }, { compres = 'bf16' }) end, "reduce_scatter: unknown option 'compres' (did you mean 'compress'?)" },
    -- lunet.models
    { function() return lunet.models.resnet18({ num_class = 10 }) end, "models.resnet18: unknown option 'num_class' (did you mean 'num_classes'?)" },
    { function() return lunet.models.get_model('resnet18', { num_class = 10 }) end, "models.resnet18: unknown option 'num_class' (did you mean 'num_classes'?)" },
    -- lunet.onnx
    { function() return lunet.onnx.export(nn.Linear(2, 2), lunet.randn(1, 2), st .. '.onnx', { opset = 13 }) end, "onnx.export: unknown option 'opset' (did you mean 'opset_version'?)" },
  }

  for i, c in ipairs(cases) do
    it(('case %d: %s'):format(i, c[2]:match('^[^:]+')), function() raises(c[1], c[2]) end)
  end
end)

describe('PyTorch aliases give the same result as lunet\'s names', function()
  local ds = data.TensorDataset(lunet.randn(10, 3), lunet.tensor({ 1, 2, 1, 2, 1, 2, 1, 2, 1, 2 }, { dtype = 'int64' }))

  it('DataLoader num_workers is workers', function()
    local a = data.DataLoader(ds, { batch_size = 4, shuffle = true, seed = 3, num_workers = 2 })
    local b = data.DataLoader(ds, { batch_size = 4, shuffle = true, seed = 3, workers = 2 })
    assert.are.equal(2, a.workers)
    local ia, ib = a:iter(), b:iter()
    for _ = 1, #a do
      local xa, ya = ia()
      local xb, yb = ib()
      same(xa, xb); same(ya, yb)
    end
  end)

  it("Synthetic takes torchvision FakeData's size, image_size and num_classes", function()
    local a = data.Synthetic { size = 6, image_size = { 1, 4, 4 }, num_classes = 3, seed = 2 }
    local b = data.Synthetic { n = 6, shape = { 1, 4, 4 }, classes = 3, seed = 2 }
    same(a.x, b.x); same(a.y, b.y)
  end)

  it("optimizers take Torch7's learningRate, weightDecay and epsilon", function()
    local a = optim.SGD({ lunet.zeros(2) }, { learningRate = 0.1, weightDecay = 0.01 })
    assert.are.equal(0.1, a.param_groups[1].lr)
    assert.are.equal(0.01, a.param_groups[1].weight_decay)
    local b = optim.Adam({ lunet.zeros(2) }, { epsilon = 1e-6 })
    assert.are.equal(1e-6, b.param_groups[1].eps)
    raises(function() optim.SGD({ lunet.zeros(2) }, { epsilon = 1e-6, lr = 1 }) end, "SGD: unknown option 'epsilon'")
  end)

  it("DataParallel takes DDP's bucket_cap_mb; fit takes criterion for loss", function()
    assert.are.equal(10, lunet.parallel.DataParallel(nn.Linear(2, 2), { devices = { 'cpu:0' }, bucket_cap_mb = 10 }).bucket_mb)
    local crit = nn.MSELoss()
    assert.are.equal(crit, lunet.Trainer(nn.Linear(2, 2), { criterion = crit, quiet = true }).criterion)
  end)
end)

describe("PyTorch's positional forms", function()
  local x = lunet.randn(2, 4, 9, 9)

  local function conv_same(a, b, seed)
    assert.are.same({ a.stride, a.padding, a.dilation, a.groups }, { b.stride, b.padding, b.dilation, b.groups })
    assert.are.equal(a.bias == nil, b.bias == nil)
    same(a.weight, b.weight)
    same(a(x), b(x))
  end

  local function make(f) lunet.manual_seed(5); return f() end

  it('nn.Conv2d(cin, cout, k, stride, padding, dilation, groups, bias) is the options form', function()
    conv_same(make(function() return nn.Conv2d(4, 8, 3, 2, 1) end),
      make(function() return nn.Conv2d(4, 8, 3, { stride = 2, padding = 1 }) end))
    conv_same(make(function() return nn.Conv2d(4, 8, 3, 1, 2, 2, 2, false) end),
      make(function() return nn.Conv2d(4, 8, 3, { padding = 2, dilation = 2, groups = 2, bias = false }) end))
    conv_same(make(function() return nn.Conv2d(4, 8, 3, 1, 1, { bias = false }) end),
      make(function() return nn.Conv2d(4, 8, 3, { padding = 1, bias = false }) end))
    conv_same(make(function() return nn.Conv2d(4, 8, 3, { 2, 1 }) end),
      make(function() return nn.Conv2d(4, 8, 3, { stride = { 2, 1 } }) end))
  end)

  it('pools: MaxPool2d(k, stride, padding, dilation), AvgPool2d(k, stride, padding, ceil_mode, count_include_pad)', function()
    same(nn.MaxPool2d(2, 2)(x), nn.MaxPool2d(2, { stride = 2 })(x))
    same(nn.MaxPool2d(3, 2, 1)(x), nn.MaxPool2d(3, { stride = 2, padding = 1 })(x))
    same(nn.MaxPool2d(3, 1, 1, 2)(x), nn.MaxPool2d(3, { stride = 1, padding = 1, dilation = 2 })(x))
    local out, idx = nn.MaxPool2d(2, 2, 0, 1, true)(x)
    same(out, nn.MaxPool2d(2)(x))
    assert.are.equal('int64', idx.dtype)
    same(nn.AvgPool2d(3, 2, 1)(x), nn.AvgPool2d(3, { stride = 2, padding = 1 })(x))
    same(nn.AvgPool2d(3, 2, 1, true, false)(x),
      nn.AvgPool2d(3, { stride = 2, padding = 1, ceil_mode = true, count_include_pad = false })(x))
    assert.are_not.same(nn.AvgPool2d(3, 2, 1, true, false)(x):totable(), nn.AvgPool2d(3, 2, 1)(x):totable())
  end)

  it('functional: conv2d(x, w, b, stride, padding), max_pool2d(x, k, stride, padding), avg_pool2d(x, k, stride, padding)', function()
    local w, b = lunet.randn(6, 4, 3, 3), lunet.randn(6)
    same(F.conv2d(x, w, b, 2, 1), F.conv2d(x, w, b, { stride = 2, padding = 1 }))
    same(F.conv2d(x, w, nil, 1, 0, 2), F.conv2d(x, w, nil, { dilation = 2 }))
    same(F.max_pool2d(x, 3, 2, 1), F.max_pool2d(x, 3, { stride = 2, padding = 1 }))
    same(F.avg_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 3, { stride = 2, padding = 1 }))
    same(F.avg_pool2d(x, 3, { 2, 2 }), F.avg_pool2d(x, 3, { stride = 2 }))
  end)

  it('Linear(in, out, false), BatchNorm2d(n, eps, momentum), Dropout{p = ...}, activations by name', function()
    assert.is_nil(nn.Linear(3, 2, false).bias)
    assert.is_not_nil(nn.Linear(3, 2, true).bias)
    local bn = nn.BatchNorm2d(4, 1e-3, 0.2, false)
    assert.are.same({ 1e-3, 0.2, false }, { bn.eps, bn.momentum, bn.affine })
    assert.are.equal(nn.Dropout(0.3).p, nn.Dropout { p = 0.3 }.p)
    assert.are.equal(0.2, nn.LeakyReLU { negative_slope = 0.2 }.negative_slope)
    assert.are.equal(0.5, nn.ELU { alpha = 0.5 }.alpha)
    assert.are.equal('tanh', nn.GELU { approximate = 'tanh' }.approximate)
    assert.are.equal(1, nn.Softmax { dim = 1 }.dim)
    assert.are.same({ 1, 3 }, { nn.Flatten(1, 3).start_dim, nn.Flatten { start_dim = 1, end_dim = 3 }.end_dim })
    assert.are.same({ 2, 3 }, nn.AdaptiveAvgPool2d { output_size = { 2, 3 } }.output_size)
    same(nn.ReLU(true)(x), nn.ReLU()(x))
  end)

  it('DataLoader(ds, batch_size, shuffle), SGD(params, lr, momentum), StepLR(opt, step_size, gamma), RandomCrop(size, padding)', function()
    local ds = data.TensorDataset(lunet.randn(10, 3))
    local a = data.DataLoader(ds, 4, true)
    assert.are.same({ 4, true }, { a.batch_size, a.shuffle })
    local s = optim.SGD({ lunet.zeros(2) }, 0.1, 0.9)
    assert.are.same({ 0.1, 0.9 }, { s.param_groups[1].lr, s.param_groups[1].momentum })
    local sch = optim.StepLR(s, 2, 0.5)
    assert.are.same({ 2, 0.5 }, { sch.step_size, sch.gamma })
    assert.are.equal(tostring(data.transforms.RandomCrop(8, 2)), tostring(data.transforms.RandomCrop(8, { padding = 2 })))
    local adam = optim.Adam({ lunet.zeros(2) }, 0.01, { 0.8, 0.9 })
    assert.are.same({ 0.01, { 0.8, 0.9 } }, { adam.param_groups[1].lr, adam.param_groups[1].betas })
  end)

  it("PyTorch's keywords zero_grad{set_to_none = ...} and load_state_dict(sd, {strict = ...})", function()
    local p = lunet.zeros(2)
    p.grad = lunet.ones(2)
    local opt = optim.SGD({ p }, 0.1)
    opt:zero_grad { set_to_none = false }
    assert.are.same({ 0, 0 }, p.grad:totable())
    opt:zero_grad { set_to_none = true }
    assert.is_nil(p.grad)
    raises(function() opt:zero_grad { set_to_nil = true } end, "SGD:zero_grad: unknown option 'set_to_nil' (did you mean 'set_to_none'?)")
    local m = nn.Linear(2, 2)
    local sd = m:state_dict()
    sd.extra = lunet.zeros(1)
    raises(function() m:load_state_dict(sd, { strict = true }) end, 'unexpected keys: extra')
    assert.are.same({ 'extra' }, m:load_state_dict(sd, { strict = false }).unexpected)
    raises(function() m:load_state_dict(sd, { strct = false }) end, "load_state_dict: unknown option 'strct' (did you mean 'strict'?)")
  end)

  it('anything else is a named error, never a raw Lua one', function()
    raises(function() return nn.Conv2d(3, 16) end, 'nn.Conv2d: expected (in_channels, out_channels, kernel_size')
    raises(function() return nn.Conv2d(3, 16, 3, 1, 1, 1, 1, true, 5) end, 'nn.Conv2d: too many arguments')
    raises(function() return nn.Conv2d(3, 16, 3, { padding = 1 }, 1) end, 'nn.Conv2d: the options table must come last')
    raises(function() return nn.Conv2d(3, 16, 3, 1, { stride = 2 }) end, "nn.Conv2d: 'stride' given both by position and in the options")
    raises(function() return nn.Conv2d(3, 16, 3, 'x') end, "nn.Conv2d: option 'stride' must be a number or table, got string")
    raises(function() return nn.Conv2d(3, 16, 3, { padding_mode = 'mirror' }) end, "nn.Conv2d: padding_mode 'mirror' is not supported")
    raises(function() return nn.MaxPool2d() end, 'nn.MaxPool2d: expected kernel_size')
    raises(function() return nn.AvgPool2d('x') end, 'nn.AvgPool2d: expected kernel_size')
    raises(function() return nn.Linear(3, 2, 'no') end, "nn.Linear: option 'bias' must be a boolean, got string")
    raises(function() return nn.BatchNorm2d(4, { momentum = true }) end, 'nn.BatchNorm2d: momentum must be a number or false')
    raises(function() return nn.Sigmoid(1) end, 'nn.Sigmoid: takes no arguments')
    raises(function() return nn.GELU('fast') end, "nn.GELU: approximate must be 'none' or 'tanh', got 'fast'")
    raises(function() return nn.MSELoss { reduction = 'avg' } end, "nn.MSELoss: reduction must be 'none', 'mean' or 'sum', got 'avg'")
    raises(function() return nn.CrossEntropyLoss(3) end, 'nn.CrossEntropyLoss: options must be a table, got number')
    raises(function() return F.conv2d(x, lunet.randn(6, 4, 3, 3), nil, 1, true) end, "conv2d: option 'padding' must be a number, table or string, got boolean")
    raises(function() return data.DataLoader(data.TensorDataset(lunet.randn(4, 2)), 2, true, 3) end, 'DataLoader: too many arguments')
    -- geometry is checked when a layer is built, and by the functional form at its call
    raises(function() return nn.Conv2d(3, 4, { 3 }) end, 'nn.Conv2d: kernel_size must be an integer >= 1 or {h, w} of them, got {3}')
    raises(function() return nn.MaxPool2d(2, { stride = {} }) end, 'nn.MaxPool2d: stride must be an integer >= 1 or {h, w} of them, got {}')
    raises(function() return nn.AvgPool2d(2, 1, 1.5) end, 'nn.AvgPool2d: padding must be an integer >= 0 or {h, w} of them, got 1.5')
    raises(function() return nn.AdaptiveAvgPool2d({ 0, 2 }) end, 'nn.AdaptiveAvgPool2d: output_size must be an integer >= 1 or {h, w} of them, got {0, 2}')
    raises(function() return F.conv2d(x, lunet.randn(6, 4, 3, 3), nil, { stride = 0 }) end, 'conv2d: stride must be integers >= 1, got 0')
    raises(function() return F.max_pool2d(x, 0) end, 'max_pool2d: kernel_size must be integers >= 1, got 0')
    raises(function() return nn.init.kaiming_normal_(lunet.empty(2, 2), 0, 'fan_mid') end,
      "init.kaiming_normal_: mode must be 'fan_in' or 'fan_out', got 'fan_mid'")
    raises(function() return optim.StepLR({}, 2) end, 'StepLR: first argument must be an optimizer')
    raises(function() return lunet.randn(false, {}) end, 'randn: size 1 must be an integer, got false')
    raises(function() return optim.LambdaLR(optim.SGD({ lunet.zeros(2) }, 1), function() end) end,
      'LambdaLR: lr_lambda(0) returned nil, expected a number')
  end)
end)

describe('constructors given any two values after their required arguments', function()
  it('build (something that prints), or raise a named error (never a raw Lua one)', function()
    local vals = { 0, 1, -1, 2.5, 'x', true, false, {}, { 1 }, { 1, 2 }, { a = 1 }, { padding = 'x' }, { stride = {} }, function() end, lunet.zeros(1) }
    local function p() return { lunet.zeros(2) } end
    local ds = data.TensorDataset(lunet.randn(4, 2))
    local ctors = {
      { 'Conv2d', function(...) return nn.Conv2d(2, 4, 3, ...) end },
      { 'MaxPool2d', function(...) return nn.MaxPool2d(2, ...) end },
      { 'AvgPool2d', function(...) return nn.AvgPool2d(2, ...) end },
      { 'Linear', function(...) return nn.Linear(2, 3, ...) end },
      { 'BatchNorm2d', function(...) return nn.BatchNorm2d(2, ...) end },
      { 'Dropout', nn.Dropout }, { 'LeakyReLU', nn.LeakyReLU }, { 'ELU', nn.ELU }, { 'GELU', nn.GELU },
      { 'Softmax', nn.Softmax }, { 'Flatten', nn.Flatten }, { 'AdaptiveAvgPool2d', nn.AdaptiveAvgPool2d },
      { 'ReLU', nn.ReLU }, { 'CrossEntropyLoss', nn.CrossEntropyLoss }, { 'NLLLoss', nn.NLLLoss }, { 'MSELoss', nn.MSELoss },
      { 'BCE', nn.BCEWithLogitsLoss }, { 'BasicBlock', function(...) return nn.BasicBlock(2, 2, ...) end },
      { 'SiLU', nn.SiLU }, { 'Hardswish', nn.Hardswish }, { 'Hardsigmoid', nn.Hardsigmoid }, { 'ReLU6', nn.ReLU6 },
      { 'Softplus', nn.Softplus }, { 'Mish', nn.Mish }, { 'PReLU', nn.PReLU }, { 'L1Loss', nn.L1Loss },
      { 'SmoothL1Loss', nn.SmoothL1Loss }, { 'HuberLoss', nn.HuberLoss }, { 'BCELoss', nn.BCELoss },
      { 'KLDivLoss', nn.KLDivLoss },
      { 'Hardtanh', nn.Hardtanh }, { 'SELU', nn.SELU }, { 'CELU', nn.CELU }, { 'LogSigmoid', nn.LogSigmoid },
      { 'Softsign', nn.Softsign }, { 'Tanhshrink', nn.Tanhshrink }, { 'Threshold', nn.Threshold }, { 'GLU', nn.GLU },
      { 'Softmin', nn.Softmin }, { 'Hardshrink', nn.Hardshrink }, { 'Softshrink', nn.Softshrink },
      { 'KLDivLoss', nn.KLDivLoss }, { 'CosineSimilarity', nn.CosineSimilarity }, { 'PairwiseDistance', nn.PairwiseDistance },
      { 'MarginRankingLoss', nn.MarginRankingLoss }, { 'CosineEmbeddingLoss', nn.CosineEmbeddingLoss },
      { 'TripletMarginLoss', nn.TripletMarginLoss }, { 'MultiLabelSoftMarginLoss', nn.MultiLabelSoftMarginLoss },
      { 'MultiMarginLoss', nn.MultiMarginLoss }, { 'PoissonNLLLoss', nn.PoissonNLLLoss },
      { 'GaussianNLLLoss', nn.GaussianNLLLoss }, { 'SoftMarginLoss', nn.SoftMarginLoss },
      { 'Conv1d', function(...) return nn.Conv1d(2, 4, 3, ...) end },
      { 'MaxPool1d', function(...) return nn.MaxPool1d(2, ...) end },
      { 'AvgPool1d', function(...) return nn.AvgPool1d(2, ...) end },
      { 'AdaptiveAvgPool1d', nn.AdaptiveAvgPool1d }, { 'AdaptiveMaxPool1d', nn.AdaptiveMaxPool1d },
      { 'Bilinear', function(...) return nn.Bilinear(2, 3, 4, ...) end },
      { 'LazyLinear', function(...) return nn.LazyLinear(3, ...) end },
      { 'LazyConv2d', function(...) return nn.LazyConv2d(4, 3, ...) end },
      { 'LazyConvTranspose3d', function(...) return nn.LazyConvTranspose3d(4, 3, ...) end },
      { 'LazyBatchNorm1d', nn.LazyBatchNorm1d }, { 'LazyInstanceNorm2d', nn.LazyInstanceNorm2d },
      { 'MaxUnpool2d', function(...) return nn.MaxUnpool2d(2, ...) end },
      { 'FractionalMaxPool2d', function(...) return nn.FractionalMaxPool2d(2, ...) end },
      { 'RReLU', nn.RReLU }, { 'NLLLoss2d', nn.NLLLoss2d }, { 'CrossMapLRN2d', function(...) return nn.CrossMapLRN2d(3, ...) end },
      { 'AdaptiveLogSoftmaxWithLoss', function(...) return nn.AdaptiveLogSoftmaxWithLoss(4, 10, { 3 }, ...) end },
      { 'F.max_unpool2d', function(...) return F.max_unpool2d(lunet.zeros(1, 1, 1, 1), lunet.ones(1, 1, 1, 1, { dtype = 'int64' }), 2, ...) end },
      { 'F.fractional_max_pool2d', function(...) return F.fractional_max_pool2d(lunet.zeros(1, 1, 4, 4), 2, ...) end },
      { 'F.rrelu', function(...) return F.rrelu(lunet.zeros(2), ...) end },
      { 'F.gumbel_softmax', function(...) return F.gumbel_softmax(lunet.zeros(2), ...) end },
      { 'F.upsample', function(...) return F.upsample(lunet.zeros(1, 1, 2, 2), ...) end },
      { 'Upsample', nn.Upsample }, { 'UpsamplingNearest2d', nn.UpsamplingNearest2d },
      { 'InstanceNorm1d', function(...) return nn.InstanceNorm1d(2, ...) end },
      { 'InstanceNorm3d', function(...) return nn.InstanceNorm3d(2, ...) end },
      { 'ParameterList', nn.ParameterList }, { 'ParameterDict', nn.ParameterDict },
      { 'prune.l1_unstructured', function(...) return nn.utils.prune.l1_unstructured(nn.Linear(2, 2), 'weight', ...) end },
      { 'prune.ln_structured', function(...) return nn.utils.prune.ln_structured(nn.Linear(2, 2), 'weight', 1, ...) end },
      { 'prune.global_unstructured', function(a, b)
        return nn.utils.prune.global_unstructured({ { nn.Linear(2, 2), 'weight' } }, a or nn.utils.prune.L1Unstructured, b)
      end },
      { 'EmbeddingBag', function(...) return nn.EmbeddingBag(10, 3, ...) end },
      { 'Embedding.from_pretrained', function(...) return nn.Embedding.from_pretrained(lunet.ones(4, 2), ...) end },
      { 'RNNCell', function(...) return nn.RNNCell(2, 3, ...) end }, { 'LSTM', function(...) return nn.LSTM(2, 3, ...) end },
      { 'LSTMCell', function(...) return nn.LSTMCell(2, 3, ...) end }, { 'GRU', function(...) return nn.GRU(2, 3, ...) end },
      { 'GRUCell', function(...) return nn.GRUCell(2, 3, ...) end }, { 'RNN', function(...) return nn.RNN(2, 3, ...) end },
      { 'Conv3d', function(...) return nn.Conv3d(2, 4, 3, ...) end },
      { 'MaxPool3d', function(...) return nn.MaxPool3d(2, ...) end },
      { 'AvgPool3d', function(...) return nn.AvgPool3d(2, ...) end },
      { 'AdaptiveAvgPool3d', nn.AdaptiveAvgPool3d },
      { 'BatchNorm3d', function(...) return nn.BatchNorm3d(2, ...) end },
      { 'Unfold', function(...) return nn.Unfold(2, ...) end }, { 'Fold', function(...) return nn.Fold(4, 2, ...) end },
      { 'ReflectionPad1d', nn.ReflectionPad1d }, { 'ReplicationPad2d', nn.ReplicationPad2d },
      { 'ConstantPad1d', function(...) return nn.ConstantPad1d(1, ...) end }, { 'ConstantPad2d', nn.ConstantPad2d },
      { 'LocalResponseNorm', function(...) return nn.LocalResponseNorm(2, ...) end }, { 'ChannelShuffle', nn.ChannelShuffle },
      { 'MultiheadAttention', function(...) return nn.MultiheadAttention(4, 2, ...) end },
      { 'TransformerEncoderLayer', function(...) return nn.TransformerEncoderLayer(4, 2, ...) end },
      { 'TransformerDecoderLayer', function(...) return nn.TransformerDecoderLayer(4, 2, ...) end },
      { 'TransformerEncoder', function(...) return nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 8), 1, ...) end },
      { 'TransformerDecoder', function(...) return nn.TransformerDecoder(nn.TransformerDecoderLayer(4, 2, 8), 1, ...) end },
      { 'Transformer', function(...) return nn.Transformer(4, 2, 1, 1, 8, ...) end },
      { 'CTCLoss', nn.CTCLoss }, { 'HingeEmbeddingLoss', nn.HingeEmbeddingLoss },
      { 'MultiLabelMarginLoss', nn.MultiLabelMarginLoss }, { 'TripletMarginWithDistanceLoss', nn.TripletMarginWithDistanceLoss },
      { 'ConvTranspose1d', function(...) return nn.ConvTranspose1d(2, 4, 3, ...) end },
      { 'ConvTranspose3d', function(...) return nn.ConvTranspose3d(2, 4, 2, ...) end },
      { 'AdaptiveMaxPool3d', nn.AdaptiveMaxPool3d }, { 'Dropout1d', nn.Dropout1d }, { 'Dropout3d', nn.Dropout3d },
      { 'AlphaDropout', nn.AlphaDropout }, { 'FeatureAlphaDropout', nn.FeatureAlphaDropout },
      { 'LPPool1d', function(...) return nn.LPPool1d(2, ...) end }, { 'LPPool2d', function(...) return nn.LPPool2d(2, ...) end },
      { 'DataLoader', function(...) return data.DataLoader(ds, ...) end }, { 'Synthetic', data.Synthetic },
      { 'TensorDataset', function(...) return data.TensorDataset(lunet.zeros(2, 2), ...) end },
      { 'RandomCrop', function(...) return data.transforms.RandomCrop(4, ...) end },
      { 'RandomVerticalFlip', data.transforms.RandomVerticalFlip }, { 'Resize', data.transforms.Resize },
      { 'RandomResizedCrop', function(...) return data.transforms.RandomResizedCrop(4, ...) end },
      { 'ColorJitter', data.transforms.ColorJitter }, { 'RandomErasing', data.transforms.RandomErasing },
      { 'RandomRotation', function(...) return data.transforms.RandomRotation(10, ...) end },
      { 'RandomAffine', function(...) return data.transforms.RandomAffine(10, ...) end },
      { 'GaussianBlur', function(...) return data.transforms.GaussianBlur(3, ...) end },
      { 'Pad', function(...) return data.transforms.Pad(1, ...) end }, { 'Grayscale', data.transforms.Grayscale },
      { 'RandomPosterize', function(...) return data.transforms.RandomPosterize(4, ...) end },
      { 'RandomSolarize', function(...) return data.transforms.RandomSolarize(0.5, ...) end },
      { 'RandomAdjustSharpness', function(...) return data.transforms.RandomAdjustSharpness(2, ...) end },
      { 'RandomAutocontrast', data.transforms.RandomAutocontrast }, { 'RandomEqualize', data.transforms.RandomEqualize },
      { 'RandomInvert', data.transforms.RandomInvert }, { 'AutoAugment', data.transforms.AutoAugment },
      { 'RandAugment', data.transforms.RandAugment }, { 'TrivialAugmentWide', data.transforms.TrivialAugmentWide },
      { 'RandomApply', function(...) return data.transforms.RandomApply({ data.transforms.RandomInvert() }, ...) end },
      { 'RandomChoice', function(...) return data.transforms.RandomChoice({ data.transforms.RandomInvert() }, ...) end },
      { 'RandomOrder', data.transforms.RandomOrder }, { 'RandomPerspective', data.transforms.RandomPerspective },
      { 'ElasticTransform', data.transforms.ElasticTransform },
      { 'FiveCrop', function(...) return data.transforms.FiveCrop(4, ...) end },
      { 'TenCrop', function(...) return data.transforms.TenCrop(4, ...) end },
      { 'SGD', function(...) return optim.SGD(p(), ...) end }, { 'Adam', function(...) return optim.Adam(p(), ...) end },
      { 'RMSprop', function(...) return optim.RMSprop(p(), ...) end },
      { 'Adagrad', function(...) return optim.Adagrad(p(), ...) end }, { 'Adamax', function(...) return optim.Adamax(p(), ...) end },
      { 'NAdam', function(...) return optim.NAdam(p(), ...) end }, { 'RAdam', function(...) return optim.RAdam(p(), ...) end },
      { 'Adadelta', function(...) return optim.Adadelta(p(), ...) end },
      { 'Rprop', function(...) return optim.Rprop(p(), ...) end }, { 'ASGD', function(...) return optim.ASGD(p(), ...) end },
      { 'LBFGS', function(...) return optim.LBFGS(p(), ...) end },
      { 'SWALR', function(...) return optim.SWALR(optim.SGD(p(), 1), ...) end },
      { 'AveragedModel', function(...) return optim.swa_utils.AveragedModel(nn.Linear(2, 2), ...) end },
      { 'StepLR', function(...) return optim.StepLR(optim.SGD(p(), 1), ...) end },
      { 'MultiStepLR', function(...) return optim.MultiStepLR(optim.SGD(p(), 1), ...) end },
      { 'CosineAnnealingLR', function(...) return optim.CosineAnnealingLR(optim.SGD(p(), 1), ...) end },
      { 'LinearLR', function(...) return optim.LinearLR(optim.SGD(p(), 1), ...) end },
      { 'ExponentialLR', function(...) return optim.ExponentialLR(optim.SGD(p(), 1), ...) end },
      { 'LambdaLR', function(...) return optim.LambdaLR(optim.SGD(p(), 1), ...) end },
      { 'OneCycleLR', function(...) return optim.OneCycleLR(optim.SGD(p(), { lr = 1, momentum = 0.9 }), ...) end },
      { 'clip', function(...) local q = lunet.zeros(2); q.grad = lunet.ones(2); return optim.clip_grad_norm({ q }, 1, ...) end },
      { 'Trainer', function(...) return lunet.Trainer(nn.Linear(2, 2), ...) end },
      { 'DataParallel', function(...) return lunet.parallel.DataParallel(nn.Linear(2, 2), ...) end },
      { 'kaiming', function(...) return nn.init.kaiming_uniform_(lunet.empty(2, 2), ...) end },
      { 'zeros', function(...) return lunet.zeros(2, ...) end },
      { 'FashionMNIST', function(a, b) return data.FashionMNIST(a or '/nonexistent', b) end },
      { 'CIFAR10', function(a, b) return data.CIFAR10(a or '/nonexistent', b) end },
      { 'CIFAR100', function(a, b) return data.CIFAR100(a or '/nonexistent', b) end },
      { 'EMNIST', function(a, b) return data.EMNIST('/nonexistent', a, b) end },
      { 'models.squeezenet1_1', function(...) return lunet.models.squeezenet1_1(...) end },
      { 'models.mobilenet_v3_small', function(...) return lunet.models.mobilenet_v3_small(...) end },
      { 'models.efficientnet_b0', function(...) return lunet.models.efficientnet_b0(...) end },
      { 'models.shufflenet_v2_x0_5', function(...) return lunet.models.shufflenet_v2_x0_5(...) end },
      { 'models.mnasnet0_5', function(...) return lunet.models.mnasnet0_5(...) end },
      { 'models.get_model', function(a, b) return lunet.models.get_model(a or 'squeezenet1_1', b) end },
    }
    local raw, n = raw_errors(ctors, vals, true)
    assert.is_true(n > 9000, tostring(n))
    assert.are.same({}, raw)
  end)
end)

describe('functional calls and factories given any two values in their options places', function()
  it('run, or raise a named error (never a raw Lua one)', function()
    local vals = { 0, 1, -1, 2.5, 'x', 'same', true, false, {}, { 1 }, { 1, 2 }, { a = 1 }, { padding = 'x' }, { stride = {} }, { stride = 2 }, { reduction = 'x' }, { weight = 1 }, function() end, lunet.zeros(1) }
    local x = lunet.randn(2, 3, 8, 8)
    local w = lunet.randn(4, 3, 3, 3)
    local x1, w1 = lunet.randn(2, 3, 8), lunet.randn(4, 3, 3)
    local lg, y = lunet.randn(4, 3), lunet.tensor({ 1, 2, 3, 1 }, { dtype = 'int64' })
    local fs = {
      { 'conv2d', function(a, b) return F.conv2d(x, w, nil, a, b) end },
      { 'max_pool2d', function(a, b) return F.max_pool2d(x, 2, a, b) end },
      { 'max_pool2d k', function(a, b) return F.max_pool2d(x, a, b) end },
      { 'avg_pool2d', function(a, b) return F.avg_pool2d(x, 2, a, b) end },
      { 'ce', function(a) return F.cross_entropy(lg, y, a) end },
      { 'nll', function(a) return F.nll_loss(lg, y, a) end },
      { 'mse', function(a) return F.mse_loss(lg, lg, a) end },
      { 'bce', function(a) return F.binary_cross_entropy_with_logits(lg, lg, a) end },
      { 'l1', function(a) return F.l1_loss(lg, lg, a) end },
      { 'smooth_l1', function(a) return F.smooth_l1_loss(lg, lg, a) end },
      { 'huber', function(a) return F.huber_loss(lg, lg, a) end },
      { 'bce probs', function(a) return F.binary_cross_entropy(lg:sigmoid(), lg:sigmoid(), a) end },
      { 'kl_div', function(a) return F.kl_div(lg, lg, a) end },
      { 'softplus', function(a, b) return F.softplus(lg, a, b) end },
      { 'prelu', function(a) return F.prelu(lg, a) end },
      { 'hardtanh', function(a, b) return F.hardtanh(lg, a, b) end },
      { 'hardtanh_', function(a, b) return F.hardtanh_(lg:clone(), a, b) end },
      { 'selu', function(a, b) return F.selu(lg, a, b) end },
      { 'celu', function(a, b) return F.celu(lg, a, b) end },
      { 'threshold', function(a, b) return F.threshold(lg, a, b) end },
      { 'interpolate', function(a) return F.interpolate(x, a) end },
      { 'grid_sample', function(a) return F.grid_sample(x, lunet.zeros(2, 3, 3, 2), a) end },
      { 'affine_grid', function(a, b) return F.affine_grid(lunet.zeros(2, 2, 3), a or { 2, 3, 4, 4 }, b) end },
      { 'threshold_', function(a, b) return F.threshold_(lg:clone(), a, b) end },
      { 'glu', function(a, b) return F.glu(lg, a, b) end },
      { 'softmin', function(a, b) return F.softmin(lg, a, b) end },
      { 'hardshrink', function(a, b) return F.hardshrink(lg, a, b) end },
      { 'softshrink', function(a, b) return F.softshrink(lg, a, b) end },
      { 'cosine_similarity', function(a, b) return F.cosine_similarity(lg, lg, a, b) end },
      { 'pairwise_distance', function(a, b) return F.pairwise_distance(lg, lg, a, b) end },
      { 'triplet', function(a) return F.triplet_margin_loss(lg, lg, lg, a) end },
      { 'cosine_embedding', function(a) return F.cosine_embedding_loss(lg, lg, lg:select(2, 1):sign(), a) end },
      { 'margin_ranking', function(a) return F.margin_ranking_loss(lg, lg, lg, a) end },
      { 'soft_margin', function(a) return F.soft_margin_loss(lg, lg, a) end },
      { 'multilabel_soft_margin', function(a) return F.multilabel_soft_margin_loss(lg, lg, a) end },
      { 'multi_margin', function(a) return F.multi_margin_loss(lg, y, a) end },
      { 'poisson_nll', function(a) return F.poisson_nll_loss(lg, lg, a) end },
      { 'gaussian_nll', function(a) return F.gaussian_nll_loss(lg, lg, lg:abs(), a) end },
      { 'relu', function(a, b) return F.relu(lg:clone(), a, b) end },
      { 'relu_', function(a, b) return F.relu_(lg:clone(), a, b) end },
      { 'leaky_relu', function(a, b) return F.leaky_relu(lg:clone(), a, b) end },
      { 'leaky_relu_', function(a, b) return F.leaky_relu_(lg:clone(), a, b) end },
      { 'elu', function(a, b) return F.elu(lg:clone(), a, b) end },
      { 'elu_', function(a, b) return F.elu_(lg:clone(), a, b) end },
      { 'silu', function(a, b) return F.silu(lg:clone(), a, b) end },
      { 'gelu', function(a, b) return F.gelu(lg:clone(), a, b) end },
      { 'conv1d', function(a, b) return F.conv1d(x1, w1, nil, a, b) end },
      { 'max_pool1d', function(a, b) return F.max_pool1d(x1, 2, a, b) end },
      { 'max_pool1d k', function(a, b) return F.max_pool1d(x1, a, b) end },
      { 'avg_pool1d', function(a, b) return F.avg_pool1d(x1, 2, a, b) end },
      { 'adaptive_avg_pool1d', function(a) return F.adaptive_avg_pool1d(x1, a) end },
      { 'adaptive_max_pool1d', function(a, b) return F.adaptive_max_pool1d(x1, a, b) end },
      { 'one_hot', function(a, b) return F.one_hot(y, a, b) end },
      { 'unfold', function(a, b) return F.unfold(x, 2, a, b) end },
      { 'unfold k', function(a, b) return F.unfold(x, a, b) end },
      { 'fold', function(a, b) return F.fold(lunet.randn(2, 12, 9), 4, 2, a, b) end },
      { 'normalize', function(a, b) return F.normalize(lg, a, b) end },
      { 'local_response_norm', function(a, b) return F.local_response_norm(x1, 2, a, b) end },
      { 'channel_shuffle', function(a) return F.channel_shuffle(x1, a) end },
      { 'conv_transpose1d', function(a, b) return F.conv_transpose1d(x1, w1:transpose(1, 2), nil, a, b) end },
      { 'conv_transpose3d', function(a, b) return F.conv_transpose3d(x1:view(1, 3, 2, 2, 2), lunet.randn(3, 2, 2, 2, 2), nil, a, b) end },
      { 'adaptive_max_pool3d', function(a, b) return F.adaptive_max_pool3d(x1:view(3, 2, 2, 4), a, b) end },
      { 'dropout1d', function(a, b) return F.dropout1d(x1, a, b) end },
      { 'dropout3d', function(a, b) return F.dropout3d(x1, a, b) end },
      { 'alpha_dropout', function(a, b) return F.alpha_dropout(x1, a, b) end },
      { 'feature_alpha_dropout', function(a, b) return F.feature_alpha_dropout(x1, a, b) end },
      { 'lp_pool1d', function(a, b) return F.lp_pool1d(x1, 2, a, b) end },
      { 'lp_pool1d k', function(a, b) return F.lp_pool1d(x1, a, b) end },
      { 'lp_pool2d', function(a, b) return F.lp_pool2d(x, 2, 2, a, b) end },
      { 'clip_grad_value_', function(a, b) local q = lunet.zeros(2); q.grad = lunet.ones(2); return nn.utils.clip_grad_value_({ q }, 1, a, b) end },
      { 'weight_norm', function(a, b) return nn.utils.weight_norm(nn.Linear(2, 2), a, b) end },
      { 'spectral_norm', function(a, b) return nn.utils.spectral_norm(nn.Linear(2, 2), a, b) end },
      { 'pad_sequence', function(a, b) return nn.utils.rnn.pad_sequence({ lunet.ones(2), lunet.ones(1) }, a, b) end },
      { 'pack_padded_sequence', function(a, b) return nn.utils.rnn.pack_padded_sequence(lunet.ones(2, 2), a, b) end },
      { 'pad_packed_sequence', function(a, b) return nn.utils.rnn.pad_packed_sequence(nn.utils.rnn.pack_sequence({ lunet.ones(2) }), a, b) end },
      { 'pack_sequence', function(a, b) return nn.utils.rnn.pack_sequence(a, b) end },
      { 'PackedSequence', function(a, b) return nn.utils.rnn.PackedSequence(a, b) end },
      { 'LSTM packed', function(a, b) return nn.LSTM(1, 2, { proj_size = 1 })(nn.utils.rnn.pack_sequence({ lunet.ones(2, 1) }), { a, b }) end },
      { 'checkpoint_sequential', function(a, b) return lunet.utils.checkpoint_sequential({ function(u) return u end }, a, b) end },
      { 'zeros', function(a, b) return lunet.zeros(2, a, b) end },
      { 'randn', function(a, b) return lunet.randn(a, b) end },
      { 'tensor', function(a) return lunet.tensor({ 1, 2 }, a) end },
      { 'arange', function(a, b) return lunet.arange(3, a, b) end },
      { 'to', function(a, b) return lg:to(a, b) end },
      { 'var', function(a, b) return lg:var(a, b) end },
      { 'backward', function(a, b) local t = lunet.ones(2, { requires_grad = true }); return (t * 2):sum():backward(a, b) end },
      { 'autograd.grad', function(a, b) local t = lunet.ones(2, { requires_grad = true }); return lunet.autograd.grad((t * 2):sum(), a, b) end },
      { 'autograd.functional.jacobian', function(a, b) return lunet.autograd.functional.jacobian(function(t) return t * 2 end, a, b) end },
      { 'autograd.functional.vjp', function(a, b) return lunet.autograd.functional.vjp(function(t) return t * 2 end, a, b) end },
      { 'load', function(a) return lunet.load('/nonexistent', a) end },
      { 'load torch', function(a) return lunet.load((debug.getinfo(1, 'S').source:match('^@(.*/)') or './') .. 'fixtures/torch_small.pt', a) end },
      { 'clip', function(a, b) local q = lunet.zeros(2); q.grad = lunet.ones(2); return lunet.optim.clip_grad_norm({ q }, 1, a, b) end },
      { 'kaiming', function(a, b) return nn.init.kaiming_normal_(lunet.empty(2, 2), a, b) end },
    }
    local raw, n = raw_errors(fs, vals)
    assert.is_true(n > 7000, tostring(n))
    assert.are.same({}, raw)
  end)
end)

describe('datasets never download', function()
  it('download = true says where the files come from', function()
    raises(function() return data.FashionMNIST { download = true } end, 'FashionMNIST: lunet does not download datasets')
    raises(function() return data.FashionMNIST { download = true } end, 'apt-get install dataset-fashion-mnist')
    raises(function() return data.MNIST { root = '/x', download = true } end, 'MNIST: lunet does not download datasets')
    raises(function() return data.CIFAR10 { download = true } end, 'cifar-10-binary.tar.gz')
    raises(function() return data.CIFAR10 { download = true } end, 'https://www.cs.toronto.edu/~kriz/cifar.html')
    raises(function() return data.CIFAR100 { download = true } end, 'cifar-100-binary.tar.gz')
    raises(function() return data.EMNIST { split = 'mnist', download = true } end, 'EMNIST: lunet does not download')
  end)

  local FMNIST = '/usr/share/datasets/fashion-mnist'
  local have = io.open(FMNIST .. '/t10k-labels-idx1-ubyte.gz', 'rb')
  if have then have:close() end
  local it_fm = have and it or pending
  it_fm('download = false and the positional (root, train) load the files', function()
    local a = data.FashionMNIST(FMNIST, false)
    local b = data.FashionMNIST { root = FMNIST, train = false, download = false }
    assert.are.equal(10000, #a)
    same(a.y, b.y)
  end)
end)

describe('fit checkpoint_every', function()
  local function run(every, epochs)
    local path = tmpname('.ckpt')
    lunet.manual_seed(1)
    local ds = data.TensorDataset(lunet.randn(8, 2), lunet.tensor({ 1, 2, 1, 2, 1, 2, 1, 2 }, { dtype = 'int64' }))
    local saves = 0
    local real = lunet.checkpoint.save
    lunet.checkpoint.save = function(...) saves = saves + 1; return real(...) end
    local ok, err = pcall(lunet.fit, nn.Linear(2, 2), data.DataLoader(ds, { batch_size = 4 }),
      { epochs = epochs, checkpoint = path, checkpoint_every = every, quiet = true, progress = false })
    lunet.checkpoint.save = real
    assert(ok, err)
    return saves, lunet.checkpoint.load(path)
  end

  it("a number N is every N epochs; 'epoch' every epoch; {steps = N} every N steps", function()
    local n, st = run(2, 3)
    assert.are.same({ 1, 2 }, { n, st.epoch })
    n, st = run('epoch', 3)
    assert.are.same({ 3, 3 }, { n, st.epoch })
    n, st = run({ steps = 3 }, 3)          -- 2 steps an epoch: steps 3 and 6
    assert.are.same({ 2, 6 }, { n, st.step })
    n, st = run({ epochs = 3 }, 3)
    assert.are.same({ 1, 3 }, { n, st.epoch })
  end)

  it('anything else is a named error', function()
    local m, ds = nn.Linear(2, 2), data.TensorDataset(lunet.randn(4, 2))
    local function fit(o) return function() return lunet.Trainer(m, o) end end
    raises(fit { checkpoint = '/tmp/x', checkpoint_every = 'weekly' }, "fit: checkpoint_every must be a number of epochs, 'epoch', 'step'")
    raises(fit { checkpoint = '/tmp/x', checkpoint_every = 0 }, 'fit: checkpoint_every must be a positive integer (epochs), got 0')
    raises(fit { checkpoint = '/tmp/x', checkpoint_every = {} }, 'fit: checkpoint_every needs epochs = N or steps = N')
    raises(fit { checkpoint = '/tmp/x', checkpoint_every = { steps = 1.5 } }, 'fit: checkpoint_every.steps must be a positive integer, got 1.5')
    raises(fit { checkpoint_every = 1 }, 'fit: checkpoint_every needs checkpoint = a file path')
    raises(fit { resume = true }, 'fit: resume = true needs checkpoint')
    raises(fit { scheduler_step = 'batch' }, "fit: scheduler_step must be 'epoch' or 'step', got 'batch'")
    assert.is_not_nil(ds)
  end)
end)

describe('options.named (the composed tensor methods name themselves)', function()
  local options = require 'lunet.options'
  it('passes every return value, renames an inner error, keeps one that names the method', function()
    local f = options.named('unfold', function(a, b) return a, b, 3 end)
    assert.same({ 1, 2, 3 }, { f(1, 2) })
    local g = options.named('unfold', function() error('narrow: size 5 is too large', 0) end)
    assert.equal('unfold: size 5 is too large', select(2, pcall(g)):gsub('^[^:]*:%d+: ', ''))
    local h = options.named('index_add_', function() error('index_add: dim 3 out of range') end)
    assert.equal('index_add: dim 3 out of range', select(2, pcall(h)):gsub('^[^:]*:%d+: ', ''))
    local t = {}
    local k = options.named('x', function() error(t) end)
    assert.equal(t, select(2, pcall(k)))
  end)
end)
