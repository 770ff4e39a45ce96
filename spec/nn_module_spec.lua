-- nn.Module behaviour: parameters, buffers, state_dict round trips and their
-- errors, printing, clone, to(), train/eval of BatchNorm and Dropout,
-- initialisation, Sequential, BasicBlock and a few training steps.
local lunet = require 'lunet'
local nn = lunet.nn
local function fx_err(f) local ok, e = pcall(f); assert(not ok, 'expected an error'); return tostring(e) end

local function small_cnn()
  return nn.Sequential {
    nn.Conv2d(3, 4, 3, { padding = 1 }), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(4 * 2 * 2, 5),
  }
end

local function keys(t)
  local k = {}
  for n in pairs(t) do k[#k + 1] = n end
  table.sort(k)
  return k
end

describe('nn.Module', function()
  it('lists parameters, buffers and children with PyTorch names', function()
    local m = small_cnn()
    local names = {}
    for i, e in ipairs(m:named_parameters()) do names[i] = e[1] end
    assert.same({ '0.weight', '0.bias', '1.weight', '1.bias', '5.weight', '5.bias' }, names)
    local bn = {}
    for i, e in ipairs(m:named_buffers()) do bn[i] = e[1] end
    assert.same({ '1.running_mean', '1.running_var', '1.num_batches_tracked' }, bn)
    assert.equal(6, #m:children())
    assert.equal(7, #m:modules())
    assert.equal(4 * 3 * 9 + 4 + 4 + 4 + 16 * 5 + 5, m:num_parameters())
    assert.equal(m[1 - 1 .. ''], m:get(1))
    for _, p in ipairs(m:parameters()) do assert.is_true(p.requires_grad) end
  end)

  it('prints a tree with layer shapes and the parameter count', function()
    local s = tostring(small_cnn())
    assert.matches('nn.Sequential {', s, 1, true)
    assert.matches('(0): nn.Conv2d(3 -> 4, 3x3, pad 1)', s, 1, true)
    assert.matches('(1): nn.BatchNorm2d(4)', s, 1, true)
    assert.matches('(3): nn.MaxPool2d(2x2)', s, 1, true)
    assert.matches('(5): nn.Linear(16 -> 5)', s, 1, true)
    assert.matches('205 parameters', s, 1, true)
    assert.matches('(4): nn.Flatten\n', s, 1, true)
    assert.equal('nn.Conv2d(3 -> 15, 3x3, stride 2, pad 1, groups 3, no bias)',
      nn.Conv2d(3, 15, 3, { stride = 2, padding = 1, groups = 3, bias = false }):repr())
    assert.matches('1,024 parameters', tostring(nn.Linear(1023, 1)), 1, true)
  end)

  it('state_dict round trip restores outputs exactly', function()
    lunet.manual_seed(3)
    local a, b = small_cnn(), small_cnn()
    local x = lunet.randn(2, 3, 4, 4)
    a:eval(); b:eval()
    a[tostring(1)].running_mean:uniform_(-1, 1)
    local sd = a:state_dict()
    assert.same({ '0.bias', '0.weight', '1.bias', '1.num_batches_tracked', '1.running_mean', '1.running_var',
      '1.weight', '5.bias', '5.weight' }, keys(sd))
    assert.is_false(lunet.no_grad(function() return a(x) end):allclose(b(x)))
    b:load_state_dict(sd)
    assert.tensor_near(b(x), a(x), 0)
    -- copies, not aliases
    lunet.no_grad(function() a['0'].weight:fill_(0) end)
    assert.is_false(b['0'].weight:eq(0):all():item())
  end)

  it('state_dict survives a safetensors file', function()
    local a, b = small_cnn(), small_cnn()
    local path = os.tmpname()
    lunet.save(path, a:state_dict())
    b:load_state_dict((lunet.load(path)))
    os.remove(path)
    for _, e in ipairs(a:named_parameters()) do
      assert.tensor_near(b:state_dict()[e[1]], e[2], 0)
    end
  end)

  it('load_state_dict(lunet.load(path)): the metadata handed on is no options', function()
    local a, b, c = small_cnn(), small_cnn(), small_cnn()
    local path = os.tmpname()
    lunet.save(path, a:state_dict(), { epoch = '3', strict = 'no' })   -- (keys that would be options)
    b:load_state_dict(lunet.load(path))
    local _, meta = lunet.load(path)
    assert.equal('3', meta.epoch)
    for _, e in ipairs(a:named_parameters()) do
      assert.tensor_near(b:state_dict()[e[1]], e[2], 0)
    end
    -- strict still applies: a metadata table is not {strict = false}
    local sd, m2 = lunet.load(path)
    sd['0.weight'] = nil
    local ok, err = pcall(c.load_state_dict, c, sd, m2)
    os.remove(path)
    assert.is_false(ok)
    assert.matches('missing', tostring(err))
    -- a plain table with those keys is still an options table, checked
    assert.matches("load_state_dict: unknown option 'epoch'",
      tostring(select(2, pcall(c.load_state_dict, c, a:state_dict(), { epoch = '3' }))))
  end)

  it('load_state_dict names missing, unexpected and mis-shaped keys', function()
    local m = small_cnn()
    local sd = m:state_dict()
    sd['0.weight'] = nil
    sd['9.extra'] = lunet.zeros(1)
    sd['5.bias'] = lunet.zeros(7)
    local ok, err = pcall(m.load_state_dict, m, sd)
    assert.is_false(ok)
    assert.matches('load_state_dict: missing keys: 0.weight', err, 1, true)
    assert.matches('unexpected keys: 9.extra', err, 1, true)
    assert.matches('5.bias: checkpoint has shape {7}, model has {5}', err, 1, true)
    -- non-strict: missing and unexpected are reported, shape errors still raise
    sd['5.bias'] = lunet.zeros(5)
    local r = m:load_state_dict(sd, false)
    assert.same({ '0.weight' }, r.missing)
    assert.same({ '9.extra' }, r.unexpected)
    assert.tensor_near(m['5'].bias, lunet.zeros(5), 0)
    assert.has_error(function() m:load_state_dict('x') end)
  end)

  it('clone is a deep copy', function()
    local m = small_cnn()
    local c = m:clone()
    lunet.no_grad(function() c['0'].weight:fill_(1) end)
    assert.is_false(m['0'].weight:eq(1):all():item())
    assert.is_true(c['0'].weight.requires_grad)
    assert.equal(#m:parameters(), #c:parameters())
    assert.equal(tostring(m), tostring(c))
  end)

  it('to(dtype) moves parameters and buffers in place, keeping the objects', function()
    local m = small_cnn()
    local w = m['0'].weight
    local before = w:totable()
    m:to('float64')
    assert.equal(w, m['0'].weight)
    assert.equal('float64', w.dtype)
    assert.is_true(w.requires_grad)
    assert.equal('float64', m['1'].running_var.dtype)
    assert.equal('int64', m['1'].num_batches_tracked.dtype)
    assert.tensor_near(w, before, 1e-7)
    local y = m(lunet.randn({ 2, 3, 4, 4 }, { dtype = 'float64' }))
    assert.equal('float64', y.dtype)
    y:sum():backward()
    assert.equal('float64', w.grad.dtype)
  end)

  it('refuses a module inside itself, an integer dtype, a train mode not boolean; zero_grad(false) zeroes in place', function()
    local function refused(what, msg, fn)
      local ok, err = pcall(fn)
      assert.is_false(ok, what)
      assert.matches(msg, err, 1, true)
      assert.matches('nn_module_spec%.lua:%d+: ', err)
    end
    -- (each was a stack overflow at the first walk of the tree: print, parameters, forward)
    local s = nn.Sequential { nn.Linear(2, 2) }
    refused('itself', "add_module: nn.Sequential as '1' would put nn.Sequential inside itself", function() s:add(s) end)
    local inner = nn.Sequential { nn.ReLU() }
    s:add(inner)
    refused('its parent', "would put nn.Sequential inside itself", function() inner:add(s) end)
    local lin = s[1]
    refused('a field', "add_module: nn.Sequential as 'parent' would put nn.Linear inside itself", function() lin.parent = s end)
    assert.equal(2, #s:parameters())
    rawset(lin, 'owner', s)   -- (a reference that is not a child)
    assert.equal(2, #s:parameters())
    -- (to('int32') left the float parameters as they were; train('no') set training to 'no')
    refused('int dtype', 'to: a module moves to a floating-point dtype (float32, float64, float16, bfloat16), got int32',
      function() nn.Linear(2, 2):to('int32') end)
    refused('train mode', 'train: mode must be true or false, got string', function() nn.Linear(2, 2):train('no') end)
    -- zero_grad: zeroes the grads in place by default (PyTorch 1.13's, as the optimizers'); true drops them
    local m = nn.Linear(2, 2)
    m(lunet.ones(1, 2)):sum():backward()
    local g = m.weight.grad
    m:zero_grad(false)
    assert.equal(g, m.weight.grad)
    assert.equal(0, g:abs():sum():item())
    m:zero_grad({ set_to_none = true })
    assert.is_nil(m.weight.grad)
    -- load_state_dict names what was missing and unexpected under PyTorch's keys too
    local sd = m:state_dict()
    sd.weight, sd.extra = nil, lunet.ones(1)
    local r = m:load_state_dict(sd, { strict = false })
    assert.same({ 'weight' }, r.missing_keys)
    assert.same({ 'extra' }, r.unexpected_keys)
    assert.same(r.missing_keys, r.missing)
  end)

  it('zero_grad clears gradients; apply and train/eval walk the tree', function()
    local m = small_cnn()
    m(lunet.randn(2, 3, 4, 4)):sum():backward()
    assert.is_not_nil(m['0'].weight.grad)
    m:zero_grad()
    for _, p in ipairs(m:parameters()) do assert.equal(0, p.grad:abs():sum():item()) end
    m:zero_grad(true)
    for _, p in ipairs(m:parameters()) do assert.is_nil(p.grad) end
    local n = 0
    m:apply(function() n = n + 1 end)
    assert.equal(7, n)
    m:eval()
    for _, x in ipairs(m:modules()) do assert.is_false(x.training) end
    m:train()
    for _, x in ipairs(m:modules()) do assert.is_true(x.training) end
  end)

  it('calculate_gain as torch.nn.init.calculate_gain', function()
    local gain = lunet.nn.init.calculate_gain
    for _, c in ipairs({ { 'linear', 1 }, { 'conv2d', 1 }, { 'conv_transpose3d', 1 }, { 'sigmoid', 1 }, { 'tanh', 5 / 3 },
      { 'relu', math.sqrt(2) }, { 'selu', 3 / 4 } }) do
      assert.equal(c[2], gain(c[1]))
    end
    assert.near(math.sqrt(2 / (1 + 0.01 ^ 2)), gain('leaky_relu'), 1e-15)
    assert.near(math.sqrt(2 / (1 + 0.2 ^ 2)), gain('leaky_relu', 0.2), 1e-15)
    assert.has_error(function() gain('leaky_relu', 'x') end)
  end)

  it('initialises as PyTorch: kaiming_uniform(a=sqrt(5)) and bias bounds, seeded', function()
    lunet.manual_seed(7)
    local c = nn.Conv2d(8, 16, 3)
    local bound = 1 / math.sqrt(8 * 9)
    assert.is_true(c.weight:abs():max():item() <= bound + 1e-7)
    assert.is_true(c.weight:abs():max():item() > 0.9 * bound)
    assert.is_true(c.bias:abs():max():item() <= bound + 1e-7)
    local std = c.weight:std():item()
    assert.is_true(math.abs(std - bound / math.sqrt(3)) < 0.1 * bound)
    lunet.manual_seed(7)
    local c2 = nn.Conv2d(8, 16, 3)
    assert.tensor_near(c2.weight, c.weight, 0)
  end)

  it('Sequential takes a table or varargs, add appends, errors are clear', function()
    local s = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    s:add(nn.Linear(3, 1))
    assert.equal(3, s:size())
    assert.same({ 4, 1 }, s(lunet.randn(4, 2)):size())
    assert.has_error(function() nn.Sequential { nn.ReLU(), 5 } end)
    local ok, err = pcall(function() nn.Linear(3, 2)(lunet.randn(4, 5)) end)
    assert.is_false(ok)
    assert.matches('linear: input has 5 features, weight expects 3', err, 1, true)
    ok, err = pcall(function() nn.Conv2d(3, 4, 3)(lunet.randn(1, 2, 5, 5)) end)
    assert.is_false(ok)
    assert.matches('conv2d', err, 1, true)
  end)
end)

describe('nn.functional.pad', function()
  it("pads with a constant, or by reflecting, replicating or wrapping the edge, as torch's F.pad", function()
    local F = nn.functional
    local x = lunet.arange(1, 13):float():view(1, 1, 3, 4)
    local function rows(t) return t[1][1]:totable() end
    -- {left 2, right 1, top 1, bottom 2}: the 3x4 input 1..12 becomes 6x7
    assert.same({ { 7, 6, 5, 6, 7, 8, 7 }, { 3, 2, 1, 2, 3, 4, 3 }, { 7, 6, 5, 6, 7, 8, 7 },
      { 11, 10, 9, 10, 11, 12, 11 }, { 7, 6, 5, 6, 7, 8, 7 }, { 3, 2, 1, 2, 3, 4, 3 } }, rows(F.pad(x, { 2, 1, 1, 2 }, 'reflect')))
    assert.same({ { 1, 1, 1, 2, 3, 4, 4 }, { 1, 1, 1, 2, 3, 4, 4 }, { 5, 5, 5, 6, 7, 8, 8 },
      { 9, 9, 9, 10, 11, 12, 12 }, { 9, 9, 9, 10, 11, 12, 12 }, { 9, 9, 9, 10, 11, 12, 12 } },
      rows(F.pad(x, { 2, 1, 1, 2 }, { mode = 'replicate' })))
    assert.same({ { 11, 12, 9, 10, 11, 12, 9 }, { 3, 4, 1, 2, 3, 4, 1 }, { 7, 8, 5, 6, 7, 8, 5 },
      { 11, 12, 9, 10, 11, 12, 9 }, { 3, 4, 1, 2, 3, 4, 1 }, { 7, 8, 5, 6, 7, 8, 5 } }, rows(F.pad(x, { 2, 1, 1, 2 }, 'circular')))
    assert.same({ { 7, 1, 2, 3, 4, 7 }, { 7, 5, 6, 7, 8, 7 }, { 7, 9, 10, 11, 12, 7 } }, rows(F.pad(x, { 1, 1 }, 'constant', 7)))
    assert.same({ 0, 0, 1, 2, 3, 4, 0 }, rows(F.pad(x, { 2, 1, 1, 2 }))[2])
    -- (the mode was ignored before: 'reflect' padded with zeros; 3 values took the bottom as 0)
    local bad = {
      { { { 1, 1, 1 } }, 'pad: padding must be a list {left, right[, top, bottom[, front, back, ...]]} of integers, a pair per padded dim of the 4-d input, got 3 values' },
      { { { 4, 0 }, 'reflect' }, "pad: left padding 4 is too large for mode 'reflect' on a dim of size 4" },
      { { { 0, 0, 0, 4 }, 'circular' }, "pad: bottom padding 4 is too large for mode 'circular' on a dim of size 3" },
      { { { 1, 1 }, 'mirror' }, "pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got 'mirror'" },
      { { { 1, 1 }, 'reflect', 3 }, "pad: value is for mode 'constant', not 'reflect'" },
      { { { 1, 1 }, { modes = 'reflect' } }, "pad: unknown option 'modes' (did you mean 'mode'?)" },
    }
    for _, case in ipairs(bad) do
      local ok, err = pcall(F.pad, x, unpack(case[1]))
      assert.is_false(ok)
      assert.matches(case[2], err, 1, true)
    end
    local ok, err = pcall(F.pad, x:long(), { 1, 1 }, 'constant', 0.5)
    assert.is_false(ok)
    assert.matches('pad: value 0.5 does not fit a int64 input', err, 1, true)
  end)
end)

describe('train and eval modes', function()
  it('BatchNorm2d uses batch statistics in training and running ones in eval', function()
    local bn = nn.BatchNorm2d(3, { momentum = 0.5 })
    local x = lunet.randn(4, 3, 2, 2) * 2 + 3
    local y = bn(x)
    -- training output: per-channel mean 0, var 1 (biased)
    assert.tensor_near(y:mean(1):mean(2):mean(2), lunet.zeros(3), 1e-5)
    assert.equal(1, bn.num_batches_tracked:item())
    local m = x:transpose(1, 2):reshape(3, -1)
    assert.tensor_near(bn.running_mean, m:mean(2) * 0.5, 1e-5)
    assert.tensor_near(bn.running_var, m:var(2) * 0.5 + 0.5, 1e-5)
    bn:eval()
    local ye = bn(x)
    local want = (x - bn.running_mean:view(1, 3, 1, 1)) / (bn.running_var:view(1, 3, 1, 1) + 1e-5):sqrt()
    assert.tensor_near(ye, want, 1e-5)
    assert.equal(1, bn.num_batches_tracked:item())
  end)

  it('BatchNorm with momentum=false keeps a cumulative average; affine=false has no parameters', function()
    local bn = nn.BatchNorm1d(2, { momentum = false, affine = false })
    assert.equal(0, #bn:parameters())
    local a, b = lunet.randn(5, 2), lunet.randn(5, 2)
    bn(a); bn(b)
    assert.tensor_near(bn.running_mean, (a:mean(1) + b:mean(1)) / 2, 1e-5)
    assert.has_error(function() nn.BatchNorm2d(2)(lunet.randn(1, 2, 1, 1)) end)
    assert.has_error(function() nn.BatchNorm2d(3)(lunet.randn(2, 2, 3, 3)) end)
  end)

  it('Dropout zeroes about p of the elements in training, scales the rest, is seeded, and is the identity in eval', function()
    local d = nn.Dropout(0.25)
    local x = lunet.ones(100, 100)
    lunet.manual_seed(11)
    local y = d(x)
    local zeros = y:eq(0):sum():item()
    assert.is_true(zeros > 2300 and zeros < 2700)
    assert.tensor_near(y:max(), lunet.tensor(1 / 0.75), 1e-6)
    lunet.manual_seed(11)
    assert.tensor_near(d(x), y, 0)
    d:eval()
    assert.equal(x, d(x))
    assert.has_error(function() nn.Dropout(1.5) end)
  end)
end)

describe('BasicBlock and training', function()
  it("loads PyTorch's state_dict of a BasicBlock and matches its output, gradients and running stats", function()
    local fx = require('support.fixtures').load_fixture('nn_layers')
    local sd = {}
    for k, v in pairs(fx) do
      local key = k:match('^block%.sd%.(.*)$')
      if key then sd[key] = v end
    end
    local blk = nn.BasicBlock(4, 8, 2)
    blk:load_state_dict(sd)   -- strict: PyTorch's keys are ours
    assert.equal(3, blk.bn1.num_batches_tracked:item())
    local x = fx['block.x']:detach():requires_grad_()
    local out = blk(x)
    assert.tensor_near(out, fx['block.out'], 1e-5)
    out:backward(fx['block.dout'])
    assert.tensor_near(x.grad, fx['block.dx'], 1e-5)
    for _, e in ipairs(blk:named_parameters()) do
      assert.tensor_near(e[2].grad, fx['block.grad.' .. e[1]], 1e-4)
    end
    for _, e in ipairs(blk:named_buffers()) do
      assert.tensor_near(e[2], fx['block.after.' .. e[1]], 1e-5)
    end
  end)

  it('ModuleList holds modules with PyTorch keys and iterates from 1', function()
    local l = nn.ModuleList { nn.Linear(2, 2), nn.Linear(2, 3) }
    l:append(nn.ReLU())
    assert.equal(3, l:size())
    local n = 0
    for i, m in l:ipairs() do n = n + 1; assert.equal(l[i], m) end
    assert.equal(3, n)
    local keys = {}
    for k in pairs(l:state_dict()) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.same({ '0.bias', '0.weight', '1.bias', '1.weight' }, keys)
    assert.has_error(function() l(lunet.randn(1, 2)) end)
    local x = lunet.randn(4, 2)
    for _, m in l:ipairs() do x = m(x) end
    assert.same({ 4, 3 }, x:size())
  end)

  it('custom modules register fields on assignment; Sequential indexes from 1', function()
    local Net = nn.Module:extend('Net')
    function Net:__init(n)
      self.body = nn.Sequential { nn.Linear(n, 4), nn.Tanh() }
      self.scale = lunet.ones({ 4 }, { requires_grad = true })
      self.note = 'plain field'
    end
    function Net:forward(x) return self.body(x) * self.scale end
    local m = Net(3)
    local names = {}
    for i, e in ipairs(m:named_parameters()) do names[i] = e[1] end
    assert.same({ 'scale', 'body.0.weight', 'body.0.bias' }, names)
    assert.equal('plain field', m.note)
    assert.equal(m.body['0'], m.body[1])
    assert.equal(nn.Tanh, getmetatable(m.body[2]))
    assert.is_nil(m.body[3])
    m(lunet.randn(2, 3)):sum():backward()
    assert.same({ 4 }, m.scale.grad:size())
    assert.matches('Net {\n  (body): nn.Sequential {', tostring(m), 1, true)
  end)

  it('BasicBlock keeps or changes the shape and backpropagates to every parameter', function()
    local b1, b2 = nn.BasicBlock(4, 4, 1), nn.BasicBlock(4, 8, 2)
    assert.is_nil(b1.shortcut)
    assert.is_not_nil(b2.shortcut)
    local x = lunet.randn({ 2, 4, 6, 6 }, { requires_grad = true })
    local y = b2(b1(x))
    assert.same({ 2, 8, 3, 3 }, y:size())
    y:sum():backward()
    for _, e in ipairs(b2:named_parameters()) do assert.is_not_nil(e[2].grad, e[1]) end
    assert.same({ 2, 4, 6, 6 }, x.grad:size())
    assert.matches('nn.BasicBlock(4 -> 8, stride 2)', tostring(b2), 1, true)
  end)

  it('a small CNN fits a fixed batch (loss falls) with plain SGD written here', function()
    lunet.manual_seed(5)
    local m = small_cnn()
    local crit = nn.CrossEntropyLoss()
    local x = lunet.randn(8, 3, 4, 4)
    local y = lunet.tensor({ 1, 2, 3, 4, 5, 1, 2, 3 }, { dtype = 'int64' })
    local first, last
    for step = 1, 30 do
      m:zero_grad()
      local loss = crit(m(x), y)
      loss:backward()
      lunet.no_grad(function()
        for _, p in ipairs(m:parameters()) do p:sub_(p.grad * 0.1) end
      end)
      if step == 1 then first = loss:item() end
      last = loss:item()
    end
    assert.is_true(last < first * 0.5, ('loss %g -> %g'):format(first, last))
  end)
end)

describe('subclasses of indexing containers', function()
  it('a Sequential or ModuleList subclass indexes its modules as its parent does, its own methods first', function()
    local Block = nn.Sequential:extend('spec.Block')
    function Block:__init(n)
      nn.Sequential.__init(self)
      for i = 1, n do self:add(nn.Linear(2, 2)) end
    end
    function Block:width() return #self._children end
    local b = Block(3)
    assert.equal(b:get(2), b[2])
    assert.equal(rawget(b, '0'), b[1])
    assert.is_nil(b[4])
    assert.equal(3, b:width())
    -- a subclass of the subclass, and a field of the same name as a method
    local Deeper = Block:extend('spec.Deeper')
    function Deeper:width() return 10 * Block.width(self) end
    local d = Deeper(2)
    assert.equal(d:get(1), d[1])
    assert.equal(20, d:width())
    assert.equal(2, #d(lunet.randn(4, 2)):size() == 2 and 2 or 0)
    local List = nn.ModuleList:extend('spec.List')
    local l = List({ nn.ReLU(), nn.Tanh() })
    assert.equal(rawget(l, '1'), l[2])
  end)
end)

describe('container item assignment', function()
  it('seq[i] = m replaces the i-th module (torch\'s seq[i - 1] = m): forward, parameters and state_dict follow', function()
    local s = nn.Sequential { nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 4) }
    local head = nn.Linear(3, 7)
    s[3] = head
    assert.equal(head, s[3])
    assert.are.same({ 1, 7 }, s(lunet.randn(1, 2)):size())
    assert.are.same({ 7, 3 }, s:state_dict()['2.weight']:size())
    local found = false
    for _, p in ipairs(s:parameters()) do if p == head.weight then found = true end end
    assert.is_true(found)
    assert.equal(3, #s._children)
    s[-1] = nn.Linear(3, 5)
    assert.are.same({ 5, 3 }, s:state_dict()['2.weight']:size())
    -- a model's head, as the fine-tuning tutorials replace it
    local m = nn.Sequential():add(nn.Linear(4, 4), 'features'):add(nn.Sequential { nn.ReLU(), nn.Linear(4, 10) }, 'classifier')
    m.classifier[2] = nn.Linear(4, 2)
    assert.are.same({ 3, 2 }, m(lunet.randn(3, 4)):size())
    local l = nn.ModuleList { nn.ReLU(), nn.Tanh() }
    l[2] = nn.Sigmoid()
    assert.equal('nn.Sigmoid', l[2].__name)
    -- a subclass (lunet.models' blocks) too
    local Block = nn.Sequential:extend('spec.SetBlock')
    local b = Block(nn.ReLU(), nn.ReLU())
    b[1] = nn.Tanh()
    assert.equal('nn.Tanh', rawget(b, '0').__name)
  end)

  it('out-of-range indices and non-modules are named errors, nothing changed', function()
    local s = nn.Sequential { nn.ReLU(), nn.Tanh() }
    assert.matches('nn.Sequential: index 3 out of range %(2 modules', fx_err(function() s[3] = nn.ReLU() end))
    assert.matches('nn.Sequential: index 0 out of range', fx_err(function() s[0] = nn.ReLU() end))
    assert.matches('nn.Sequential: index %-3 out of range', fx_err(function() s[-3] = nn.ReLU() end))
    assert.matches('nn.Sequential: index must be an integer, got 1.5', fx_err(function() s[1.5] = nn.ReLU() end))
    assert.matches('nn.Sequential: %[1%] = value must be an nn.Module, got number', fx_err(function() s[1] = 5 end))
    assert.matches('nn.ModuleList: index 1 out of range %(0 modules', fx_err(function() nn.ModuleList()[1] = nn.ReLU() end))
    assert.equal('nn.ReLU', s[1].__name)
    assert.equal(2, #s._children)
  end)
end)

describe('container list operations (torch 1.13\'s, 1-based)', function()
  local function names(c) return table.concat(c._children, ',') end
  local function classes(c)
    local out = {}
    for i = 1, #c._children do out[i] = c[i].__name:gsub('^nn%.', '') end
    return table.concat(out, ',')
  end
  it('insert, pop, extend, append renumber torch\'s names, so state_dict keys follow', function()
    local s = nn.Sequential { nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 4) }
    s:insert(2, nn.Tanh())
    assert.equal('0,1,2,3', names(s))
    assert.equal('Linear,Tanh,ReLU,Linear', classes(s))
    assert.is_not_nil(s:state_dict()['3.weight'])
    assert.is_nil(s:state_dict()['2.weight'])
    s:insert(-1, nn.Sigmoid())          -- torch's insert(-1, m): before the last
    assert.equal('Linear,Tanh,ReLU,Sigmoid,Linear', classes(s))
    s:insert(6, nn.Identity())          -- #s + 1: at the end
    assert.equal('Identity', classes(s):match('[^,]+$'))
    local last = s:pop()
    assert.equal('nn.Identity', last.__name)
    local tanh = s:pop(2)
    assert.equal('nn.Tanh', tanh.__name)
    assert.equal('Linear,ReLU,Sigmoid,Linear', classes(s))
    assert.equal('0,1,2,3', names(s))
    assert.is_nil(rawget(s, '4'))
    assert.are.same({ 5, 4 }, s(lunet.randn(5, 2)):size())
    s:extend({ nn.ReLU(), nn.Linear(4, 1) }):append(nn.Sigmoid())
    assert.equal('Linear,ReLU,Sigmoid,Linear,ReLU,Linear,Sigmoid', classes(s))
    s:extend(nn.Sequential { nn.Tanh() })
    assert.equal(8, s:size())
    assert.are.same({ 5, 1 }, s(lunet.randn(5, 2)):size())
    -- the parameters follow (an optimizer built now sees the inserted Linear's)
    assert.equal(6, #s:parameters())
    local l = nn.ModuleList { nn.ReLU() }
    l:insert(1, nn.Tanh()):extend({ nn.Sigmoid() })
    assert.equal('Tanh,ReLU,Sigmoid', classes(l))
    assert.equal('nn.Tanh', l:pop(1).__name)
    assert.equal('0,1', names(l))
  end)

  it('a container with names of its own keeps them', function()
    local s = nn.Sequential():add(nn.Linear(2, 2), 'features'):add(nn.ReLU(), 'act')
    s:insert(2, nn.Tanh())
    assert.equal('features,1,act', names(s))
    assert.equal('nn.Tanh', s:pop(2).__name)
    assert.equal('features,act', names(s))
    assert.matches("name '1' is taken", fx_err(function()
      local t = nn.Sequential():add(nn.ReLU(), 'a'):add(nn.ReLU(), '1')
      t:insert(2, nn.Tanh())
    end))
  end)

  it('bad indices and values are named errors', function()
    local s = nn.Sequential { nn.ReLU(), nn.Tanh() }
    assert.matches('nn.Sequential:insert: index 4 out of range %(2 modules: 1..3', fx_err(function() s:insert(4, nn.ReLU()) end))
    assert.matches('nn.Sequential:insert: module must be an nn.Module, got number', fx_err(function() s:insert(1, 3) end))
    assert.matches('nn.Sequential:pop: index 3 out of range', fx_err(function() s:pop(3) end))
    assert.matches('nn.Sequential:pop: index must be an integer, got x', fx_err(function() s:pop('x') end))
    assert.matches('nn.ModuleList:pop: index %-1 out of range %(0 modules', fx_err(function() nn.ModuleList():pop() end))
    assert.matches('nn.Sequential:extend: module 2 must be an nn.Module, got string', fx_err(function() s:extend({ nn.ReLU(), 'x' }) end))
    assert.matches('a container cannot hold itself', fx_err(function() s:insert(1, s) end))
    assert.equal(2, s:size())
  end)
end)
