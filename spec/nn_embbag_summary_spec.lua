-- nn.EmbeddingBag and F.embedding_bag (modes sum, mean, max; 2-d input and
-- 1-d with 1-based offsets, empty bags, include_last_offset,
-- per_sample_weights, padding_idx, max_norm, scale_grad_by_freq), nn.Embedding's
-- max_norm, scale_grad_by_freq and from_pretrained, against PyTorch 1.13
-- (spec/fixtures/nn_embbag.safetensors, tools/gen_nn_embbag_fixtures.py):
-- values, float64 gradients, renormalised weights; finite differences; the
-- errors. Then lunet.summary's rows and totals against counts made here.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local nn = lunet.nn
local F = nn.functional

local T, cases = fx.load_fixture('nn_embbag')
local function get(c, k) return T[c.name .. '.' .. k] end

-- the case's forward on weight w (and psw), by F or by the module
local function run(c, w, psw, module)
  local a, input, offsets = c.args, get(c, 'input'), get(c, 'offsets')
  if c.op == 'embedding' then
    local o = { padding_idx = a.padding_idx, max_norm = a.max_norm, norm_type = a.norm_type,
      scale_grad_by_freq = a.scale_grad_by_freq }
    if not module then return F.embedding(input, w, o) end
    local m = nn.Embedding(w:size(1), w:size(2), o)
    m.weight = w
    return m(input)
  end
  local o = { mode = a.mode, padding_idx = a.padding_idx, max_norm = a.max_norm, norm_type = a.norm_type,
    scale_grad_by_freq = a.scale_grad_by_freq, include_last_offset = a.include_last_offset }
  if not module then
    o.per_sample_weights = psw
    return F.embedding_bag(input, w, offsets, o)
  end
  o._weight = w
  local m = nn.EmbeddingBag(w:size(1), w:size(2), o)
  m.weight = w   -- (the tensor itself, so its gradient lands in w)
  return m(input, offsets, psw)
end

describe('F.embedding_bag and nn.EmbeddingBag against PyTorch 1.13', function()
  for _, module in ipairs({ false, true }) do
    for _, dtype in ipairs({ 'float64', 'float32' }) do
      it(('%s, %s: values, gradients, renormalised weights'):format(module and 'modules' or 'F', dtype), function()
        local tol = dtype == 'float32' and 2e-5 or 1e-12
        local n = 0
        for _, c in ipairs(cases) do
          local w = get(c, 'weight'):to(dtype):clone():requires_grad_()
          local psw = get(c, 'psw') and get(c, 'psw'):to(dtype):clone():requires_grad_()
          local out = run(c, w, psw, module)
          assert.equal(dtype, out.dtype, c.name)
          assert.same(get(c, 'out'):size(), out:size(), c.name)
          assert.is_true(fx.maxdiff(out, get(c, 'out')) < tol * 10, c.name .. ' out')
          ;(out * get(c, 'dout'):to(dtype)):sum():backward()
          assert.is_true(fx.maxdiff(w.grad, get(c, 'dweight')) < tol * 10, c.name .. ' dweight')
          if psw then assert.is_true(fx.maxdiff(psw.grad, get(c, 'dpsw')) < tol * 10, c.name .. ' dpsw') end
          if get(c, 'weight_after') then
            assert.is_true(fx.maxdiff(w, get(c, 'weight_after')) < tol, c.name .. ' renormalised weight')
            assert.is_true(fx.maxdiff(w, get(c, 'weight')) > 0.1, c.name .. ' (renormalised at all)')
          end
          n = n + 1
        end
        assert.equal(39, n)
      end)
    end
  end

  it('finite differences in weight and per_sample_weights, each mode', function()
    local input = lunet.tensor({ 3, 1, 3, 5, 2, 2, 4 }, { dtype = 'int64' })
    local offsets = lunet.tensor({ 1, 1, 4, 6 }, { dtype = 'int64' })
    for _, mode in ipairs({ 'sum', 'mean', 'max' }) do
      local w = lunet.randn(6, 3, { dtype = 'float64' }):requires_grad_()
      local p = lunet.randn(7, { dtype = 'float64' }):requires_grad_(mode == 'sum')
      local ok, msg = gradcheck(function(w_, p_)
        return F.embedding_bag(input, w_, offsets, { mode = mode, padding_idx = 2,
          per_sample_weights = mode == 'sum' and p_ or nil })
      end, { w, p })
      assert.is_true(ok, mode .. ': ' .. tostring(msg))
    end
  end)

  it('2-d input is B bags of N, as 1-d input with offsets 1, N+1, ...', function()
    local w = lunet.randn(9, 4)
    local x = lunet.tensor({ { 1, 5, 9 }, { 2, 2, 7 } }, { dtype = 'int64' })
    for _, mode in ipairs({ 'sum', 'mean', 'max' }) do
      local a = F.embedding_bag(x, w, { mode = mode })
      local b = F.embedding_bag(x:reshape({ 6 }), w, lunet.tensor({ 1, 4 }, { dtype = 'int32' }), { mode = mode })
      assert.equal(0, fx.maxdiff(a, b))
    end
  end)

  it('int32 indices, no bags, defaults, printing, from_pretrained', function()
    local w = lunet.randn(5, 2)
    local x = lunet.tensor({ 1, 2, 3 }, { dtype = 'int32' })
    local off = lunet.tensor({ 1, 2 }, { dtype = 'int32' })
    assert.equal(0, fx.maxdiff(F.embedding_bag(x, w, off), F.embedding_bag(x:long(), w, off:long(), { mode = 'mean' })))
    assert.same({ 0, 2 }, F.embedding_bag(x, w, lunet.tensor({}, { dtype = 'int64' })):size())
    local m = nn.EmbeddingBag(10, 3)
    assert.equal('mean', m.mode)
    assert.equal("nn.EmbeddingBag(10, 3, mode 'mean')", tostring(m):match('^[^\n]*'))
    assert.equal("nn.EmbeddingBag(10, 3, padding_idx 10, max_norm 1, mode 'max', include_last_offset)",
      tostring(nn.EmbeddingBag(10, 3, { padding_idx = -1, max_norm = 1, mode = 'max', include_last_offset = true }))
        :match('^[^\n]*'))
    -- the weights shared as they are, padding row included; frozen unless freeze = false
    local pre = lunet.randn(4, 3)
    local e = nn.EmbeddingBag.from_pretrained(pre, { mode = 'sum', padding_idx = 2 })
    assert.is_false(e.weight.requires_grad)
    assert.equal(0, fx.maxdiff(e.weight, pre))
    pre:fill_(1)
    assert.equal(1, e.weight:min():item())
    assert.equal(2, e(lunet.tensor({ { 1, 2, 3 } }, { dtype = 'int64' }))[1][1]:item())   -- (padding left out)
    local e2 = nn.Embedding.from_pretrained(pre, { freeze = false, padding_idx = 1 })
    assert.is_true(e2.weight.requires_grad)
    assert.equal('nn.Embedding(4, 3, padding_idx 1)', tostring(e2):match('^[^\n]*'))
    assert.equal(1, e2.weight[1][1]:item())
    assert.is_nil(pre.grad)
  end)

  it('errors name the function and the problem', function()
    local w = lunet.randn(5, 2)
    local x = lunet.tensor({ 1, 2, 3 }, { dtype = 'int64' })
    local off = lunet.tensor({ 1, 3 }, { dtype = 'int64' })
    local cases_ = {
      { function() F.embedding_bag(x, w) end, 'embedding_bag: a 1-d input needs offsets' },
      { function() F.embedding_bag(x:view({ 1, 3 }), w, off) end, 'embedding_bag: offsets must be nil for a 2-d input' },
      { function() F.embedding_bag(x, w, lunet.tensor({ 2 }, { dtype = 'int64' })) end, 'offsets[1] must be 1' },
      { function() F.embedding_bag(x, w, lunet.tensor({ 1, 3, 2 }, { dtype = 'int64' })) end, 'non-decreasing' },
      { function() F.embedding_bag(x, w, lunet.tensor({ 1, 5 }, { dtype = 'int64' })) end, 'past the end of the input' },
      { function() F.embedding_bag(x, w, off, { include_last_offset = true }) end, "the last offset must be the input's length + 1 (4), got 3" },
      { function() F.embedding_bag(x, w, off, { mode = 'max', per_sample_weights = lunet.ones(3) }) end,
        "per_sample_weights is only supported for mode 'sum'" },
      { function() F.embedding_bag(x, w, off, { mode = 'sum', per_sample_weights = lunet.ones(2) }) end,
        "per_sample_weights must have the input's shape {3}" },
      { function() F.embedding_bag(x, w, off, { mode = 'sum', per_sample_weights = lunet.ones(3, { dtype = 'float64' }) }) end,
        "per_sample_weights must have weight's dtype float32" },
      { function() F.embedding_bag(x, w, off, { mode = 'median' }) end, "mode must be 'sum', 'mean' or 'max'" },
      { function() F.embedding_bag(x, w, off, { mode = 'max', scale_grad_by_freq = true }) end, "mode 'max' does not support" },
      { function() F.embedding_bag(x, w, off, { sparse = true }) end, 'sparse gradients are not supported' },
      { function() F.embedding_bag(x, w, off, { moed = 'sum' }) end, "embedding_bag: unknown option 'moed'" },
      { function() F.embedding_bag(x + 5, w, off) end, 'embedding_bag: index 8 is out of range for 5 embeddings' },
      { function() F.embedding_bag(x:double(), w, off) end, 'input must be an int64 (or int32) tensor' },
      { function() F.embedding_bag(x, w, off:double()) end, 'offsets must be an int64 (or int32) tensor' },
      { function() F.embedding_bag(x:view({ 1, 1, 3 }), w) end, 'input must be 1-d (with offsets) or 2-d' },
      { function() F.embedding_bag(x, w, off, { padding_idx = 6 }) end, 'padding_idx must be an integer in 1..5' },
      { function() nn.EmbeddingBag(5, 2, { sparse = true }) end, 'nn.EmbeddingBag: sparse gradients are not supported' },
      { function() nn.EmbeddingBag(5, 2, { mode = 'max', scale_grad_by_freq = true }) end, "nn.EmbeddingBag: mode 'max'" },
      { function() nn.EmbeddingBag(5, 2)(x, 3) end, 'nn.EmbeddingBag: offsets must be a tensor or nil' },
      { function() nn.EmbeddingBag(5, 2)(x) end, 'nn.EmbeddingBag: a 1-d input needs offsets' },
      { function() nn.EmbeddingBag(5, 2, { _weight = lunet.ones(4, 2) }) end, '_weight must have shape {5,2}' },
      { function() nn.EmbeddingBag.from_pretrained(lunet.ones(3)) end, 'embeddings must be a 2-d tensor' },
      { function() nn.Embedding.from_pretrained(lunet.ones(3, 2), { frozen = true }) end, "unknown option 'frozen'" },
      { function() nn.Embedding(5, 2, { sparse = true }) end, 'nn.Embedding: sparse gradients are not supported' },
      { function() nn.Embedding(5, 2, { max_norm = -1 }) end, 'max_norm must be a number >= 0' },
      { function() F.embedding(x, w, nil, nil, nil, nil, true) end, 'embedding: sparse gradients' },
    }
    for i, c in ipairs(cases_) do
      local e = fx.err_of(c[1])
      assert.truthy(e:find(c[2], 1, true), ('%d: expected %q in %q'):format(i, c[2], e))
    end
  end)
end)

describe('nn.Embedding: max_norm, scale_grad_by_freq, positional options', function()
  it('max_norm renormalises only the rows looked up, in place, unrecorded', function()
    local m = nn.Embedding(6, 3, { max_norm = 1 })
    lunet.no_grad(function() m.weight:mul_(5) end)
    local before = m.weight:clone()
    local out = m(lunet.tensor({ 2, 4, 2 }, { dtype = 'int64' }))
    local norms = m.weight:norm(2, 2)
    for i = 1, 6 do
      if i == 2 or i == 4 then assert.near(1, norms[i]:item(), 1e-5)
      else assert.equal(0, fx.maxdiff(m.weight[i], before[i])) end
    end
    assert.is_true(m.weight:is_leaf())
    assert.near(1, out:norm(2, 2):max():item(), 1e-5)
  end)

  it('PyTorch positional order: padding_idx, max_norm, norm_type, scale_grad_by_freq', function()
    local m = nn.Embedding(5, 2, 1, 2.0, 1, true)
    assert.same({ 1, 2, 1, true }, { m.padding_idx, m.max_norm, m.norm_type, m.scale_grad_by_freq })
    assert.equal('nn.Embedding(5, 2, padding_idx 1, max_norm 2, norm_type 1, scale_grad_by_freq)', tostring(m):match('^[^\n]*'))
    local w = lunet.randn(5, 2)
    local x = lunet.tensor({ 1, 2 }, { dtype = 'int64' })
    assert.equal(0, fx.maxdiff(F.embedding(x, w, 2), F.embedding(x, w, { padding_idx = 2 })))
  end)
end)

-- ---- lunet.summary -----------------------------------------------------------------------------

local function numel_sum(params, only_trainable)
  local n = 0
  for _, p in ipairs(params) do if not only_trainable or p.requires_grad then n = n + p:numel() end end
  return n
end

describe('lunet.summary', function()
  it('a small CNN: one row per layer, output shapes, counts, totals', function()
    local m = nn.Sequential(nn.Conv2d(3, 8, 3, { padding = 1 }), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
      nn.Flatten(), nn.Linear(8 * 4 * 4, 10))
    m.training = true
    local s = lunet.summary(m, { 2, 3, 8, 8 })
    assert.equal(7, #s.rows)
    local want = {
      { '', 'nn.Sequential', 0, { 2, 10 } }, { '0', 'nn.Conv2d', 1, { 2, 8, 8, 8 } },
      { '1', 'nn.BatchNorm2d', 1, { 2, 8, 8, 8 } }, { '2', 'nn.ReLU', 1, { 2, 8, 8, 8 } },
      { '3', 'nn.MaxPool2d', 1, { 2, 8, 4, 4 } }, { '4', 'nn.Flatten', 1, { 2, 128 } }, { '5', 'nn.Linear', 1, { 2, 10 } },
    }
    local children = m:children()
    for i, w in ipairs(want) do
      local r = s.rows[i]
      assert.same(w, { r.name, r.class, r.depth, r.output_shape }, 'row ' .. i)
      local mod = i == 1 and m or children[i - 1]
      assert.equal(numel_sum(mod:parameters()), r.params)
      assert.equal(r.params == 0 and '--' or 'yes', r.trainable)
    end
    assert.equal(numel_sum(m:parameters()), s.total_params)
    assert.equal(3 * 8 * 9 + 8 + 16 + 128 * 10 + 10, s.total_params)
    assert.equal(s.total_params, s.trainable_params)
    assert.equal(s.total_params * 4, s.param_bytes)
    assert.equal(2 * 3 * 8 * 8 * 4, s.input_bytes)
    -- the outputs of the layers (the Sequential's is its last layer's)
    assert.equal((3 * 512 + 128 + 128 + 10) * 2 * 4, s.activation_bytes)
    assert.is_true(m.training and m[2].training, 'modes restored')
    assert.equal(0, m[2].num_batches_tracked:item(), 'ran in eval mode')
    local text = tostring(s)
    for _, needle in ipairs({ 'nn.Sequential', '  1: nn.BatchNorm2d', '{2,8,4,4}', 'Total params: 1,530',
      'Trainable params: 1,530', 'Non-trainable params: 0', 'Params size: 5.98 KB' }) do
      assert.truthy(text:find(needle, 1, true), needle .. ' in\n' .. text)
    end
  end)

  it('containers, depth, a module used twice (its parameters once), frozen parameters', function()
    local shared = nn.Linear(4, 4)
    local emb = nn.EmbeddingBag(10, 4, { mode = 'sum' })
    local m = nn.Sequential(nn.Sequential(emb, shared, nn.ReLU()), nn.Sequential(shared, nn.Linear(4, 2)))
    emb.weight.requires_grad = false
    local s = lunet.summary(m, lunet.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = 'int64' }))
    local got = {}
    for i, r in ipairs(s.rows) do got[i] = { r.name, r.depth, r.params, r.trainable, r.recursive or false } end
    assert.same({
      { '', 0, 40 + 20 + 10, 'partial', false },
      { '0', 1, 40 + 20, 'partial', false }, { '0.0', 2, 40, 'no', false }, { '0.1', 2, 20, 'yes', false },
      { '0.2', 2, 0, '--', false },
      { '1', 1, 30, 'yes', false }, { '1.0', 2, 20, 'yes', true }, { '1.1', 2, 10, 'yes', false },
    }, got)
    assert.equal(numel_sum(m:parameters()), s.total_params)
    assert.equal(70, s.total_params)
    assert.equal(numel_sum(m:parameters(), true), s.trainable_params)
    assert.equal(30, s.trainable_params)
    assert.truthy(tostring(s):find('(recursive)', 1, true))
    assert.truthy(tostring(s):find('Non-trainable params: 40', 1, true))
    -- depth 1: the deeper rows hidden, the totals the same
    local s1 = lunet.summary(m, lunet.tensor({ { 1, 2, 3 } }, { dtype = 'int64' }), { depth = 1 })
    assert.equal(3, #s1.rows)
    assert.equal(70, s1.total_params)
    assert.is_nil(rawget(m, '_hooks'), 'hooks removed')
    assert.is_nil(rawget(shared, '_hooks'), 'hooks removed')
  end)

  it('shapes with dtypes, several inputs, errors', function()
    local s = lunet.summary(nn.Embedding(10, 3), { 2, 5 }, { dtypes = { 'int64' } })
    assert.same({ 2, 5, 3 }, s.rows[1].output_shape)
    assert.equal(2 * 5 * 8, s.input_bytes)
    local b = lunet.summary(nn.Bilinear(2, 3, 4), { { 5, 2 }, { 5, 3 } })
    assert.same({ 5, 4 }, b.rows[1].output_shape)
    assert.matches('summary: model must be an nn.Module', fx.err_of(lunet.summary, 3, { 1 }))
    assert.matches("summary: unknown option 'deep'", fx.err_of(lunet.summary, nn.ReLU(), { 1 }, { deep = 1 }))
    assert.matches('summary: depth must be an integer >= 0', fx.err_of(lunet.summary, nn.ReLU(), { 1 }, { depth = -1 }))
    assert.matches('summary: input must be a tensor', fx.err_of(lunet.summary, nn.ReLU(), 'x'))
    local m = nn.Linear(3, 2)
    assert.matches('summary: the forward failed: linear: input has 5 features', fx.err_of(lunet.summary, m, { 2, 5 }))
    assert.is_nil(rawget(m, '_hooks'), 'hooks removed after a failed forward')
  end)
end)
