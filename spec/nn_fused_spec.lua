-- Inference fusion: F.conv2d_fused (eval batch norm folded into the
-- convolution, residual add and relu as post-ops), F.basic_block_eval (a
-- whole BasicBlock in one call, blocked layouts inside), and their automatic
-- use by nn.Sequential and nn.BasicBlock in eval mode. Each is checked
-- against the unfused composition of the existing ops (float64 references),
-- on oneDNN and on the other implementations (LUNET_CONV_IMPL=gemm|direct).
local ffi = require 'ffi'
local lunet = require 'lunet'
local gradcheck = require 'gradcheck'
local nn = lunet.nn
local F = nn.functional

ffi.cdef [[ int setenv(const char *name, const char *value, int overwrite); int unsetenv(const char *name); ]]
local function with_impl(impl, fn)
  if impl then ffi.C.setenv('LUNET_CONV_IMPL', impl, 1) end
  local ok, err = pcall(fn)
  ffi.C.unsetenv('LUNET_CONV_IMPL')
  if not ok then error(err, 0) end
end

local maxdiff = require('support.fixtures').maxdiff
local function maxabs(a) return a:double():abs():max():item() end

-- float64 reference: relu?(bn_eval?(conv2d(x, w, b)) + residual?) with the
-- unfused ops, all inputs converted to float64
local function reference(x, w, b, opts, bn, residual, relu)
  local d = function(t) return t and t:double() end
  local y = F.conv2d(d(x), d(w), d(b), opts)
  if bn then y = F.batch_norm(y, d(bn.rm), d(bn.rv), d(bn.g), d(bn.be), false, 0, bn.eps) end
  if residual then y = y + d(residual) end
  if relu then y = y:relu() end
  return y
end

local function random_bn(O, dtype, affine)
  local o = { dtype = dtype }
  return {
    rm = lunet.randn({ O }, o) * 0.5,
    rv = lunet.rand({ O }, o) + 0.5,
    g = affine and lunet.randn({ O }, o) or nil,
    be = affine and lunet.randn({ O }, o) or nil,
    eps = 1e-5,
  }
end

describe('conv2d_fused', function()
  lunet.manual_seed(11)
  local cases = {
    -- N, C, O, H, k, opts
    { 4, 16, 16, 12, 3, { padding = 1 } },                 -- oneDNN 3x3
    { 3, 16, 32, 12, 3, { padding = 1, stride = 2 } },     -- stride 2
    { 3, 16, 32, 12, 1, { stride = 2 } },                  -- 1x1 stride 2 (right padding -1)
    { 2, 3, 16, 9, 3, { padding = 1 } },                   -- 3 input channels
    { 2, 4, 6, 7, 3, { padding = 1, groups = 2 } },        -- groups: not oneDNN
    { 2, 2, 5, 6, 3, { padding = { 1, 0 }, dilation = 2 } },
  }
  for _, impl in ipairs { false, 'gemm', 'direct' } do
    for _, dtype in ipairs { 'float32', 'float64' } do
      it(('matches conv2d -> batch_norm (eval) -> + residual -> relu (%s, %s)'):format(dtype, impl or 'auto'), function()
        with_impl(impl, function()
          for ci, c in ipairs(cases) do
            local N, Cc, O, H, k, opts = c[1], c[2], c[3], c[4], c[5], c[6]
            local o = { dtype = dtype }
            local x = lunet.randn({ N, Cc, H, H + 1 }, o)
            local w = lunet.randn({ O, Cc / (opts.groups or 1), k, k }, o) * 0.3
            local b = lunet.randn({ O }, o)
            local y0 = F.conv2d(x, w, b, opts)
            local res = lunet.randn(y0:size(), o)
            for variant = 1, 6 do
              local bn = variant ~= 5 and random_bn(O, dtype, variant ~= 2) or nil
              local r = (variant == 3 or variant >= 5) and res or nil
              local relu = variant ~= 4
              local bias = variant ~= 6 and b or nil
              local got = lunet.no_grad(F.conv2d_fused, x, w, bias, opts, bn and bn.g, bn and bn.be,
                bn and bn.rm, bn and bn.rv, bn and bn.eps, r, relu)
              local want = reference(x, w, bias, opts, bn, r, relu)
              assert.same(want:size(), got:size())
              assert.equal(dtype, got.dtype)
              local tol = dtype == 'float64' and 1e-10 or 2e-5 * math.max(1, maxabs(want))
              local dd = maxdiff(got, want)
              assert(dd <= tol, ('case %d variant %d: max diff %g > %g'):format(ci, variant, dd, tol))
              if relu then assert(got:min():item() >= 0) end
            end
          end
        end)
      end)
    end
  end

  it('takes non-contiguous inputs and residuals', function()
    local x = lunet.randn({ 2, 16, 10, 10 }):transpose(3, 4)
    local w = lunet.randn({ 16, 16, 3, 3 }) * 0.2
    local res = lunet.randn({ 2, 16, 10, 10 }):transpose(3, 4)
    local bn = random_bn(16, 'float32', true)
    local got = lunet.no_grad(F.conv2d_fused, x, w, nil, { padding = 1 }, bn.g, bn.be, bn.rm, bn.rv, bn.eps, res, true)
    local want = reference(x, w, nil, { padding = 1 }, bn, res, true)
    assert(maxdiff(got, want) < 1e-4)
  end)

  it('records the unfused composition when a gradient is needed (float64 finite differences)', function()
    local o = { dtype = 'float64' }
    local x = lunet.randn({ 2, 3, 5, 5 }, o):requires_grad_()
    local w = lunet.randn({ 4, 3, 3, 3 }, o):requires_grad_()
    local g = lunet.randn({ 4 }, o):requires_grad_()
    local be = lunet.randn({ 4 }, o):requires_grad_()
    local res = lunet.randn({ 2, 4, 5, 5 }, o):requires_grad_()
    local rm, rv = lunet.randn({ 4 }, o), lunet.rand({ 4 }, o) + 0.5
    local ok, msg = gradcheck(function(x, w, g, be, res)
      return F.conv2d_fused(x, w, nil, { padding = 1 }, g, be, rm, rv, 1e-5, res, true)
    end, { x, w, g, be, res })
    assert(ok, msg)
  end)

  it('conv2d 1x1 stride 2 on an even size (oneDNN, right padding -1) matches float64', function()
    local x = lunet.randn({ 3, 16, 16, 16 })
    local w = lunet.randn({ 32, 16, 1, 1 })
    local got = F.conv2d(x, w, nil, { stride = 2 })
    local want = F.conv2d(x:double(), w:double(), nil, { stride = 2 })
    assert(maxdiff(got, want) < 1e-4 * math.max(1, maxabs(want)))
  end)

  it('conv2d backward with both gradients (oneDNN: grad_output blocked once) matches float64', function()
    for _, c in ipairs { { 16, 16, 3, 1, 1, 10 }, { 16, 32, 3, 2, 1, 10 }, { 32, 64, 1, 2, 0, 8 }, { 8, 32, 3, 1, 1, 7 } } do
      local Cc, O, k, st, pad, H = c[1], c[2], c[3], c[4], c[5], c[6]
      local x = lunet.randn({ 3, Cc, H, H }):requires_grad_()
      local w = (lunet.randn({ O, Cc, k, k }) * 0.2):requires_grad_()
      local b = lunet.randn({ O }):requires_grad_()
      local y = F.conv2d(x, w, b, { stride = st, padding = pad })
      local g = lunet.randn(y:size())
      lunet.sum(y * g):backward()
      local x64, w64, b64 = x:detach():double():requires_grad_(), w:detach():double():requires_grad_(),
        b:detach():double():requires_grad_()
      lunet.sum(F.conv2d(x64, w64, b64, { stride = st, padding = pad }) * g:double()):backward()
      for _, p in ipairs { { x, x64 }, { w, w64 }, { b, b64 } } do
        local d = maxdiff(p[1].grad, p[2].grad)
        assert(d < 1e-4 * math.max(1, maxabs(p[2].grad)), ('%d->%d: %g'):format(Cc, O, d))
      end
    end
  end)

  it('conv2d training with the input kept blocked (ln_conv2d_forward_saving) = without', function()
    local C = lunet.C
    for _, c in ipairs { { 16, 16, 1, 10 }, { 16, 32, 2, 9 }, { 32, 32, 1, 6 } } do
      local Cc, O, st, H = c[1], c[2], c[3], c[4]
      local x = lunet.randn({ 3, Cc, H, H }):requires_grad_()
      local w = (lunet.randn({ O, Cc, 3, 3 }) * 0.2):requires_grad_()
      local b = lunet.randn({ O }):requires_grad_()
      local opts = { stride = st, padding = 1 }
      local params = require('ffi').new('ln_conv2d_params', st, st, 1, 1, 1, 1, 1)
      local numel = tonumber(C.ln_conv2d_saved_numel(x.p, w.p, params))
      assert.is_true(numel >= x:numel(), 'the saved path is taken for ' .. Cc .. '->' .. O)
      local y = F.conv2d(x, w, b, opts)   -- (records the node with its saved input)
      local g = lunet.randn(y:size())
      y:backward(g)
      -- the same convolution through the plain entry points (no saved input)
      local y2, dx, dw, db = lunet.empty(y:size()), lunet.empty(x:size()), lunet.empty(w:size()), lunet.empty({ O })
      assert.equal(0, C.ln_conv2d_forward(y2.p, x.p, w.p, b.p, params))
      assert.equal(0, C.ln_conv2d_backward(dx.p, dw.p, db.p, g.p, x.p, w.p, params))
      for _, p in ipairs { { y, y2 }, { x.grad, dx }, { w.grad, dw }, { b.grad, db } } do
        assert.is_true(maxdiff(p[1], p[2]) <= 1e-5 * math.max(1, maxabs(p[2])), Cc .. '->' .. O)
      end
    end
    -- misuse: a wrong size, a convolution that keeps no saved input
    local x, w = lunet.randn({ 2, 16, 6, 6 }), lunet.randn({ 16, 16, 3, 3 })
    local params = require('ffi').new('ln_conv2d_params', 1, 1, 1, 1, 1, 1, 1)
    local out = lunet.empty({ 2, 16, 6, 6 })
    assert.equal(-1, C.ln_conv2d_forward_saving(out.p, lunet.empty({ 7 }).p, x.p, w.p, nil, params))
    assert.matches('conv2d: saved has shape {7}, expected', require('lunet.core').last_error())
    local x3, w3 = lunet.randn({ 2, 3, 6, 6 }), lunet.randn({ 16, 3, 3, 3 })
    assert.equal(0, tonumber(C.ln_conv2d_saved_numel(x3.p, w3.p, params)))
    -- 1x1 stride 2 on an even size: oneDNN runs no backward for it, so nothing is saved
    local s2 = require('ffi').new('ln_conv2d_params', 2, 2, 0, 0, 1, 1, 1)
    assert.equal(0, tonumber(C.ln_conv2d_saved_numel(lunet.randn({ 2, 16, 8, 8 }).p, lunet.randn({ 32, 16, 1, 1 }).p, s2)))
    assert.equal(-1, C.ln_conv2d_forward_saving(out.p, lunet.empty({ 7 }).p, x3.p, w3.p, nil, params))
    assert.matches('no saved input is used for this convolution', require('lunet.core').last_error())
  end)

  it('bad input gives named errors', function()
    local x, w = lunet.randn({ 1, 2, 4, 4 }), lunet.randn({ 3, 2, 3, 3 })
    local rm = lunet.zeros({ 3 })
    assert.has_error(function() lunet.no_grad(F.conv2d_fused, x, w, nil, {}, nil, nil, rm, nil, 1e-5, nil, true) end)
    local ok, err = pcall(lunet.no_grad, F.conv2d_fused, x, w, nil, {}, nil, nil, rm, lunet.ones({ 4 }), 1e-5, nil, true)
    assert.is_false(ok)
    assert.matches('conv2d_fused', err)
    ok, err = pcall(lunet.no_grad, F.conv2d_fused, x, w, nil, {}, nil, nil, nil, nil, nil, lunet.zeros({ 1, 3, 3, 3 }), true)
    assert.is_false(ok)
    assert.matches('conv2d_fused: residual', err)
  end)
end)

-- the eval forward of a BasicBlock from its modules, one module at a time
local function block_reference(blk, x)
  local y = blk.bn1:forward(blk.conv1:forward(x)):relu()
  y = blk.bn2:forward(blk.conv2:forward(y))
  local r = x
  if blk.shortcut then r = blk.shortcut[2]:forward(blk.shortcut[1]:forward(x)) end
  return (y + r):relu()
end

-- a block with trained running statistics and non-trivial affine parameters
local function trained_block(cin, cout, stride, dtype)
  local blk = nn.BasicBlock(cin, cout, stride, { dtype = dtype })
  for _ = 1, 3 do blk(lunet.randn({ 4, cin, 8, 8 }, { dtype = dtype }) * 2 + 1) end
  lunet.no_grad(function()
    for _, bn in ipairs { blk.bn1, blk.bn2, blk.shortcut and blk.shortcut[2] } do
      bn.weight:copy_(lunet.randn({ cout }, { dtype = dtype }))
      bn.bias:copy_(lunet.randn({ cout }, { dtype = dtype }))
    end
  end)
  blk:eval()
  return blk
end

describe('BasicBlock and Sequential in eval mode (fused)', function()
  lunet.manual_seed(12)
  for _, impl in ipairs { false, 'gemm' } do
    for _, dtype in ipairs { 'float32', 'float64' } do
      it(('BasicBlock matches its modules run one by one (%s, %s)'):format(dtype, impl or 'auto'), function()
        with_impl(impl, function()
          for _, c in ipairs { { 16, 16, 1 }, { 16, 32, 2 }, { 32, 64, 2 }, { 3, 5, 2 }, { 4, 4, 1 } } do
            local blk = trained_block(c[1], c[2], c[3], dtype)
            local x = lunet.randn({ 3, c[1], 10, 10 }, { dtype = dtype })
            local got = lunet.no_grad(function() return blk(x) end)
            local want = lunet.no_grad(block_reference, blk, x:double():to(dtype))
            local tol = dtype == 'float64' and 1e-10 or 1e-4 * math.max(1, maxabs(want))
            assert(maxdiff(got, want) <= tol, ('%d->%d: %g'):format(c[1], c[2], maxdiff(got, want)))
            -- grad enabled (parameters require grad): the unfused path, same values
            local g = blk(x)
            assert(maxdiff(g, want) <= tol)
          end
        end)
      end)
    end
  end

  for _, impl in ipairs { false, 'gemm' } do
    for _, dtype in ipairs { 'float32', 'float64' } do
      it(('Sequential runs BasicBlocks in a row as one chain, same as block by block (%s, %s)'):format(dtype, impl or 'auto'), function()
        with_impl(impl, function()
          for _, spec in ipairs {
            { { 16, 16, 1 }, { 16, 32, 2 }, { 32, 64, 2 } },   -- ResNet-8's blocks (blocked between blocks)
            { { 16, 16, 1 }, { 16, 16, 1 }, { 16, 32, 1 }, { 32, 32, 1 } },
            { { 3, 16, 1 }, { 16, 8, 2 } },                     -- channels not in 16s: NCHW between blocks
            { stem = 3, { 16, 16, 1 } },                          -- a stem conv + bn + relu, one block
            { stem = 3, { 16, 32, 2 }, { 32, 32, 1 } },
            { stem = 2, { 8, 8, 1 } },                            -- stem to 8 channels: NCHW
          } do
            local seq = nn.Sequential()
            local cin = spec[1][1]
            if spec.stem then
              cin = spec.stem
              local o = { dtype = dtype }
              local sbn = nn.BatchNorm2d(spec[1][1], o)
              lunet.no_grad(function()
                sbn.running_mean:copy_(lunet.randn({ spec[1][1] }, o))
                sbn.running_var:copy_(lunet.rand({ spec[1][1] }, o) + 0.5)
                sbn.weight:copy_(lunet.randn({ spec[1][1] }, o))
              end)
              seq:add(nn.Conv2d(cin, spec[1][1], 3, { padding = 1, bias = false, dtype = dtype }))
              seq:add(sbn)
              seq:add(nn.ReLU())
            end
            for _, c in ipairs(spec) do seq:add(trained_block(c[1], c[2], c[3], dtype)) end
            seq:eval()
            local x = lunet.randn({ 3, cin, 12, 12 }, { dtype = dtype })
            local got = lunet.no_grad(function() return seq(x) end)
            local want = lunet.no_grad(function()
              local z = x:double():to(dtype)
              for i = 1, seq:size() do
                if getmetatable(seq[i]) == nn.BasicBlock then z = block_reference(seq[i], z) else z = seq[i]:forward(z) end
              end
              return z
            end)
            assert.same(want:size(), got:size())
            local tol = dtype == 'float64' and 1e-10 or 1e-4 * math.max(1, maxabs(want))
            assert(maxdiff(got, want) <= tol, ('%d blocks: %g'):format(#spec, maxdiff(got, want)))
          end
        end)
      end)
    end
  end

  it('ResNet-8 (bench/models.lua) in eval: fused forward = module by module; output stays NCHW', function()
    package.path = 'bench/?.lua;' .. package.path
    local models = require 'models'
    lunet.manual_seed(3)
    local m = models.resnet8.build(nn)
    local opt = lunet.optim.SGD(m:parameters(), { lr = 0.05, momentum = 0.9 })
    for _ = 1, 3 do
      opt:zero_grad()
      nn.CrossEntropyLoss()(m(lunet.randn({ 8, 3, 32, 32 })), lunet.randint(1, 11, { 8 })):backward()
      opt:step()
    end
    m:eval()
    local x = lunet.randn({ 5, 3, 32, 32 })
    local got = lunet.no_grad(function() return m(x) end)
    local want = lunet.no_grad(function()
      local z = x:double()
      local dm = m:clone():to('float64')
      for i = 1, dm:size() do
        local mod = dm[i]
        if getmetatable(mod) == nn.BasicBlock then z = block_reference(mod, z) else z = mod:forward(z) end
      end
      return z
    end)
    assert.same({ 5, 10 }, got:size())
    assert(maxdiff(got, want) < 1e-4 * math.max(1, maxabs(want)), maxdiff(got, want))
  end)

  it('BasicBlock in eval mode still backpropagates (float64 finite differences)', function()
    local blk = trained_block(2, 3, 2, 'float64')
    local x = lunet.randn({ 2, 2, 4, 4 }, { dtype = 'float64' }):requires_grad_()
    local params = blk:parameters()
    local ok, msg = gradcheck(function(x, w) return blk(x) end, { x, params[1] })
    assert(ok, msg)
  end)

  it('Sequential fuses Conv2d -> BatchNorm2d [-> ReLU] in eval only; state_dict and running stats as before', function()
    local function build()
      lunet.manual_seed(5)
      return nn.Sequential { nn.Conv2d(3, 16, 3, { padding = 1, bias = false }), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 16, 3, { padding = 1 }), nn.BatchNorm2d(16),
        nn.Conv2d(16, 8, 1), nn.ReLU(), nn.BasicBlock(8, 16, 2) }
    end
    local m, ref = build(), build()
    local x = lunet.randn({ 4, 3, 8, 8 })
    -- training: same outputs and running statistics as running the modules by hand
    local y = m(x)
    local h = x
    for i = 1, ref:size() do h = ref[i]:forward(h) end
    assert(maxdiff(y, h) == 0)
    for k, v in pairs(m:state_dict()) do
      assert(maxdiff(v, ref:state_dict()[k]) == 0, k)
    end
    local keys_before = {}
    for k in pairs(m:state_dict()) do keys_before[#keys_before + 1] = k end
    table.sort(keys_before)
    m:eval(); ref:eval()
    local sd_before = {}
    for k, v in pairs(m:state_dict()) do sd_before[k] = v:clone() end
    local got = lunet.no_grad(function() return m(x) end)
    local want = lunet.no_grad(function()
      local z = x
      for i = 1, ref:size() - 1 do z = ref[i]:forward(z) end
      return block_reference(ref[ref:size()], z)
    end)
    assert(maxdiff(got, want) < 1e-4 * math.max(1, maxabs(want)))
    local keys_after = {}
    for k, v in pairs(m:state_dict()) do
      keys_after[#keys_after + 1] = k
      assert(maxdiff(v, sd_before[k]) == 0, k)
    end
    table.sort(keys_after)
    assert.same(keys_before, keys_after)
    -- back to training: no fusion, running stats updated
    m:train()
    local rm = m[2].running_mean:clone()
    m(x)
    assert(maxdiff(m[2].running_mean, rm) > 0)
  end)
end)

describe('Sequential runs ReLU -> MaxPool2d as MaxPool2d -> ReLU', function()
  local nn = lunet.nn
  local ffi = require 'ffi'
  local function vals(t) return t:double():flatten():totable() end
  -- bitwise the same (NaN where NaN) as the modules called one by one
  local function same(a, b, what)
    local av, bv = vals(a), vals(b)
    assert.are.equal(#bv, #av, what)
    for i = 1, #bv do
      if bv[i] ~= bv[i] then assert.is_true(av[i] ~= av[i], what .. ' NaN at ' .. i)
      else assert.are.equal(bv[i], av[i], what .. ' at ' .. i) end
    end
  end
  for _, pool in ipairs({ { 2 }, { 3, { stride = 2, padding = 1 } }, { 2, { ceil_mode = true } } }) do
    for _, dt in ipairs({ 'float32', 'float64' }) do
      it(('values and gradients match the unfused modules (%s, pool %s%s)'):format(dt, pool[1],
        pool[2] and ' with options' or ''), function()
        lunet.manual_seed(5)
        -- many ties, exact zeros, all-negative windows and a few NaN
        local n = 2 * 3 * 9 * 9
        local buf = ffi.new('double[?]', n)
        local seed = 99
        for i = 0, n - 1 do
          seed = (seed * 1103515245 + 12345) % 2147483648
          buf[i] = (seed % 7) - 4
          if i % 41 == 40 then buf[i] = 0 / 0 end
        end
        local x0 = lunet.from_buffer(buf, { 2, 3, 9, 9 }, 'float64')
        if dt == 'float32' then x0 = x0:float() end
        local conv = nn.Conv2d(3, 4, 1, { dtype = dt })
        local relu, mp = nn.ReLU(), nn.MaxPool2d(pool[1], pool[2])
        local seq = nn.Sequential { conv, relu, mp }
        local x1, x2 = x0:clone():requires_grad_(), x0:clone():requires_grad_()
        local y1 = seq(x1)
        local y2 = mp(relu(conv(x2)))
        same(y1, y2, 'output')
        local g = lunet.randn(y2:size(), { dtype = dt })
        y1:backward(g)
        local gw1, gx1 = conv.weight.grad:clone(), x1.grad
        conv.weight.grad, conv.bias.grad = nil, nil
        y2:backward(g)
        same(gx1, x2.grad, 'input gradient')
        same(gw1, conv.weight.grad, 'weight gradient')
      end)
    end
  end
end)

-- training: BatchNorm2d -> ReLU runs as F.batch_norm_relu in nn.Sequential and
-- nn.BasicBlock, and a BasicBlock's relu(bn2(.) + shortcut) as
-- F.batch_norm_add_relu. The reference is the same modules with the fusion
-- turned off (an instance with its own forward runs as written): the values
-- must be the same bit for bit (same arithmetic, one pass instead of two or
-- three).
describe('BatchNorm -> ReLU in training (fused)', function()
  local function unfused(model)
    for _, m in ipairs(model:modules()) do
      if m.__name == 'nn.BatchNorm2d' then rawset(m, 'forward', getmetatable(m).forward) end
    end
    return model
  end
  local function run(model, x, g)
    local y = model(x)
    y:backward(g)
    local out = { y, x.grad }
    for _, p in ipairs(model:parameters()) do out[#out + 1] = p.grad end
    for _, b in ipairs(model:buffers()) do out[#out + 1] = b end
    return out
  end
  local function same(a, b)
    assert.equal(#b, #a)
    for i = 1, #b do assert.equal(0, maxdiff(a[i], b[i]), 'tensor ' .. i) end
  end

  for _, case in ipairs({
    { 'Sequential stem', function() return nn.Sequential { nn.Conv2d(3, 8, 3, { padding = 1, bias = false }),
      nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2) } end, { 4, 3, 8, 8 } },
    { 'BasicBlock 8 -> 16, stride 2', function() return nn.Sequential { nn.BasicBlock(8, 16, 2) } end, { 4, 8, 8, 8 } },
    { 'ResNet-8', function()
      package.path = 'bench/?.lua;' .. package.path
      return require('models').resnet8.build(nn)
    end, { 4, 3, 32, 32 } },
  }) do
    it(case[1] .. ': outputs, gradients and running statistics equal the unfused modules', function()
      lunet.manual_seed(11)
      local model = case[2]()
      local ref = unfused(model:clone())
      local x = lunet.randn(case[3])
      local xa, xb = x:clone():requires_grad_(), x:clone():requires_grad_()
      local g = lunet.randn(model:clone()(x):size())   -- (a clone: the running stats stay as they are)
      model:zero_grad()
      local a, b = run(model, xa, g), run(ref, xb, g)
      same(a, b)
      assert.is_true(maxabs(a[2]) > 0)   -- a gradient flowed through the fused op
    end)
  end

  it('is not used for a BatchNorm with its own forward (as DataParallel sync_bn makes) or a subclass', function()
    local BatchNorm = require 'lunet.nn.BatchNorm'
    local bn = nn.BatchNorm2d(4)
    assert.is_true(BatchNorm.fusable(bn))
    rawset(bn, 'forward', function(self, x) return x end)
    assert.is_false(BatchNorm.fusable(bn))
    local Sub = nn.BatchNorm2d:extend('MyBN')
    assert.is_false(BatchNorm.fusable(Sub(4)))
    -- the module seen through the Sequential: its own forward runs
    local calls = 0
    local mine = nn.BatchNorm2d(4)
    rawset(mine, 'forward', function(self, x) calls = calls + 1; return getmetatable(self).forward(self, x) end)
    nn.Sequential { mine, nn.ReLU() }(lunet.randn(2, 4, 3, 3))
    assert.equal(1, calls)
  end)
end)
