-- nn.MultiheadAttention, nn.TransformerEncoderLayer/DecoderLayer, nn.TransformerEncoder/Decoder
-- and nn.Transformer against PyTorch 1.13 (spec/fixtures/nn_attention.safetensors from
-- tools/gen_nn_attention_fixtures.py): torch's parameters loaded through the state dict,
-- outputs, attention weights and the gradients of the inputs and of every parameter, in
-- float64 and float32; float64 finite differences; printing; the errors.
local lunet = require 'lunet'
local fx_lib = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local nn = lunet.nn

local fx, cases = fx_lib.load_fixture('nn_attention')
local err = fx_lib.err_of

local function get(case, k) return fx[case.name .. '.' .. k] end

local function build(case)
  local a, o, k = case.args, case.opts, case.kind
  if k == 'MultiheadAttention' then return nn.MultiheadAttention(a[1], a[2], o) end
  if k == 'TransformerEncoderLayer' then return nn.TransformerEncoderLayer(a[1], a[2], o) end
  if k == 'TransformerDecoderLayer' then return nn.TransformerDecoderLayer(a[1], a[2], o) end
  if k == 'TransformerEncoder' then
    return nn.TransformerEncoder(nn.TransformerEncoderLayer(a[1], a[2], o), a[3], nn.LayerNorm(a[1]))
  end
  if k == 'TransformerDecoder' then return nn.TransformerDecoder(nn.TransformerDecoderLayer(a[1], a[2], o), a[3]) end
  if k == 'Transformer' then return nn.Transformer(o) end
  error('unknown kind ' .. k)
end

local function is_mask(k) return k:find('mask$') ~= nil end

-- the case's module (torch's weights) and its result on the case's inputs in dtype
local function run_case(case, dtype, view)
  local m = build(case):to(dtype)
  local sd = {}
  for _, e in ipairs(m:named_parameters()) do sd[e[1]] = get(case, 'p.' .. e[1]) end
  m:load_state_dict(sd)
  m:eval()
  local xs, args, call = {}, {}, {}
  for k, v in pairs(case.call) do call[k] = v end
  for _, k in ipairs(case.inputs) do
    local t = get(case, k)
    if is_mask(k) then
      call[k] = t.dtype == 'bool' and t or t:to(dtype)
    else
      t = t:to(dtype)
      -- (the same values through a non-contiguous view)
      if view then t = t:transpose(1, 2):contiguous():transpose(1, 2) end
      t = t:detach():requires_grad_()
      xs[k] = t
      args[#args + 1] = t
    end
  end
  if case.kind == 'MultiheadAttention' then
    if #args == 1 then args = { args[1], args[1], args[1] } elseif #args == 2 then args[3] = args[2] end
  end
  args[#args + 1] = call
  local out, w = m(unpack(args))
  return m, xs, out, w
end

local function check(case, dtype, view)
  local m, xs, out, w = run_case(case, dtype, view)
  local what = ('%s %s'):format(case.name, dtype)
  local tol = dtype == 'float64' and 1e-10 or 2e-5
  assert.equal(dtype, out.dtype, what)
  assert.same(get(case, 'out'):size(), out:size(), what)
  if case.nan then
    local ref = get(case, 'out')
    assert.same(ref:isnan():totable(), out:isnan():totable(), what .. ' NaN places')
    local ok = ref:isnan():logical_not()
    assert.is_true(fx_lib.maxdiff(out:masked_fill(ok:logical_not(), 0), ref:masked_fill(ok:logical_not(), 0)) < tol, what)
    return
  end
  assert.is_true(fx_lib.rel(out, get(case, 'out')) < tol, what .. ' out ' .. fx_lib.rel(out, get(case, 'out')))
  assert.equal(case.weights, w ~= nil, what .. ' weights returned')
  local loss = (out * get(case, 'dout'):to(dtype)):sum()
  if w then
    assert.is_true(fx_lib.rel(w, get(case, 'weights')) < tol, what .. ' weights')
    loss = loss + (w * get(case, 'dweights'):to(dtype)):sum()
  end
  loss:backward()
  local gtol = dtype == 'float64' and 1e-9 or 1e-3
  for k, x in pairs(xs) do
    local r = fx_lib.rel(x.grad, get(case, 'd' .. k))
    assert.is_true(r < gtol, ('%s d%s %g'):format(what, k, r))
  end
  local n = 0
  for _, e in ipairs(m:named_parameters()) do
    local r = fx_lib.rel(e[2].grad, get(case, 'dp.' .. e[1]))
    assert.is_true(r < gtol, ('%s d%s %g'):format(what, e[1], r))
    n = n + 1
  end
  assert.is_true(n >= 2, what)
end

local function fixture_cases(kind)
  local n = 0
  for _, case in ipairs(cases) do
    if case.kind == kind then
      n = n + 1
      check(case, 'float64')
      check(case, 'float32')
    end
  end
  assert.is_true(n >= 1)
end

describe('nn.MultiheadAttention', function()
  it('matches torch: self/cross, kdim/vdim, batch_first, unbatched, bool and float masks, 2-d and 3-d attn_mask,' ..
     ' bias_kv, zero_attn, need_weights false, per-head weights, a fully masked row (NaN)', function()
    fixture_cases('MultiheadAttention')
  end)
  it('non-contiguous inputs give the same values and gradients', function()
    for _, case in ipairs(cases) do
      if case.name == 'mha_cross_kdim_vdim' or case.name == 'mha_self' then check(case, 'float64', true) end
    end
  end)
  it("has torch's parameter names and init", function()
    local m = nn.MultiheadAttention(8, 2)
    local names = {}
    for _, e in ipairs(m:named_parameters()) do names[#names + 1] = e[1] end
    assert.same({ 'in_proj_weight', 'in_proj_bias', 'out_proj.weight', 'out_proj.bias' }, names)
    assert.equal(0, m.in_proj_bias:abs():max():item())
    assert.equal(0, m.out_proj.bias:abs():max():item())
    assert.is_true(m.in_proj_weight:abs():max():item() <= math.sqrt(6 / (8 + 24)))
    local s = nn.MultiheadAttention(6, 3, { kdim = 4, vdim = 5, bias = false, add_bias_kv = true })
    names = {}
    for _, e in ipairs(s:named_parameters()) do names[#names + 1] = e[1] end
    assert.same({ 'q_proj_weight', 'k_proj_weight', 'v_proj_weight', 'bias_k', 'bias_v', 'out_proj.weight' }, names)
    assert.same({ 6, 4 }, s.k_proj_weight:size())
    assert.same({ 1, 1, 6 }, s.bias_k:size())
  end)
  it('float64 finite differences (masks, bias_kv, zero_attn)', function()
    local m = nn.MultiheadAttention(4, 2, { add_bias_kv = true, add_zero_attn = true, kdim = 3 , vdim = 5}):double()
    local q = lunet.randn(3, 2, 4):double():requires_grad_()
    local k = lunet.randn(2, 2, 3):double():requires_grad_()
    local v = lunet.randn(2, 2, 5):double():requires_grad_()
    local opts = { attn_mask = lunet.tensor({ { false, true }, { false, false }, { true, false } }),
                   key_padding_mask = lunet.tensor({ { false, false }, { false, true } }) }
    local function f(...) return (m(...)) end
    assert.is_true(gradcheck(function(a, b, c) return f(a, b, c, opts) end, { q, k, v }))
    assert.is_true(gradcheck(function(a, b, c) return select(2, m(a, b, c, opts)) end, { q, k, v }))
  end)
  it('empty batch and training-mode dropout', function()
    local m = nn.MultiheadAttention(4, 2)
    local out, w = m(lunet.randn(3, 0, 4), lunet.randn(5, 0, 4), lunet.randn(5, 0, 4))
    assert.same({ 3, 0, 4 }, out:size())
    assert.same({ 0, 3, 5 }, w:size())
    local d = nn.MultiheadAttention(4, 2, { dropout = 0.5 })
    local x = lunet.randn(6, 2, 4)
    local _, wt = d(x, x, x, { average_attn_weights = false })
    assert.is_true((wt:eq(0)):sum():item() > 0)   -- (dropped weights, as torch's)
    d:eval()
    local _, we = d(x, x, x)
    assert.is_true(fx_lib.maxdiff(we:sum(3), lunet.ones(2, 6)) < 1e-5)
  end)
  it('errors', function()
    assert.matches('nn.MultiheadAttention: embed_dim must be divisible by num_heads', err(nn.MultiheadAttention, 10, 3), 1, true)
    assert.matches("unknown option 'dropuot'", err(nn.MultiheadAttention, 8, 2, { dropuot = 0.1 }), 1, true)
    assert.matches('num_heads must be an integer', err(nn.MultiheadAttention, 8, 0), 1, true)
    local m = nn.MultiheadAttention(8, 2)
    local x = lunet.randn(4, 3, 8)
    assert.matches("unknown option 'attn_msk'", err(m, x, x, x, { attn_msk = lunet.zeros(4, 4) }), 1, true)
    assert.matches('attn_mask has shape {4, 5}, but should be {4, 4}', err(m, x, x, x, { attn_mask = lunet.zeros(4, 5) }), 1, true)
    assert.matches('should be {6, 4, 4}', err(m, x, x, x, { attn_mask = lunet.zeros(2, 4, 4) }), 1, true)
    assert.matches('attn_mask must be 2-d or 3-d', err(m, x, x, x, { attn_mask = lunet.zeros(4) }), 1, true)
    assert.matches('key_padding_mask has shape {3, 5}, expected {3, 4}',
      err(m, x, x, x, { key_padding_mask = lunet.zeros(3, 5):bool() }), 1, true)
    assert.matches('key_padding_mask must be 2-d', err(m, x, x, x, { key_padding_mask = lunet.zeros(3):bool() }), 1, true)
    assert.matches('bool or floating', err(m, x, x, x, { attn_mask = lunet.zeros(4, 4):long() }), 1, true)
    assert.matches('query must be unbatched 2-d or batched 3-d', err(m, lunet.randn(8), x, x), 1, true)
    assert.matches('key and value must be 3-d', err(m, x, lunet.randn(4, 8), x), 1, true)
    assert.matches('expected query embedding size 8, got 6', err(m, lunet.randn(4, 3, 6), x, x), 1, true)
    assert.matches("batch size 3", err(m, x, lunet.randn(4, 2, 8), lunet.randn(4, 2, 8)), 1, true)
    assert.matches('query must be a tensor', err(m, 1, x, x), 1, true)
  end)
  it('prints', function()
    assert.matches('nn.MultiheadAttention(8, heads 2, kdim 3, vdim 5, add_bias_kv, batch_first)',
      tostring(nn.MultiheadAttention(8, 2, { kdim = 3, vdim = 5, add_bias_kv = true, batch_first = true })), 1, true)
  end)
end)

describe('nn.TransformerEncoderLayer / nn.TransformerDecoderLayer', function()
  it('match torch: norm_first on and off, relu and gelu, batch_first, unbatched, every mask', function()
    fixture_cases('TransformerEncoderLayer')
    fixture_cases('TransformerDecoderLayer')
  end)
  it("have torch's submodule names", function()
    local names = {}
    for _, e in ipairs(nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 4 }):named_children()) do names[#names + 1] = e[1] end
    assert.same({ 'self_attn', 'multihead_attn', 'linear1', 'dropout', 'linear2', 'norm1', 'norm2', 'norm3',
      'dropout1', 'dropout2', 'dropout3' }, names)
  end)
  it('float64 finite differences', function()
    local l = nn.TransformerEncoderLayer(4, 2, 6, 0, 'gelu', { norm_first = true }):double()
    local mask = nn.Transformer.generate_square_subsequent_mask(3):double()
    assert.is_true(gradcheck(function(x) return l(x, { src_mask = mask }) end, { lunet.randn(3, 2, 4):double():requires_grad_() }))
  end)
  it('a function or module as activation', function()
    local l = nn.TransformerEncoderLayer(4, 2, { activation = nn.Tanh(), dropout = 0 })
    local f = nn.TransformerEncoderLayer(4, 2, 2048, 0, function(x) return x:tanh() end)
    assert.equal(l.activation.__name, nn.TransformerEncoderLayer(4, 2, 8, 0, nn.Tanh()).activation.__name)
    f:load_state_dict(l:state_dict())
    local x = lunet.randn(3, 2, 4)
    assert.is_true(fx_lib.maxdiff(l(x), f(x)) < 1e-6)
  end)
  it('errors and printing', function()
    assert.matches("activation should be 'relu' or 'gelu', not 'tanh'", err(nn.TransformerEncoderLayer, 8, 2, { activation = 'tanh' }), 1, true)
    assert.matches('d_model must be divisible by nhead', err(nn.TransformerDecoderLayer, 8, 3), 1, true)
    assert.matches("unknown option 'norm_frist'", err(nn.TransformerEncoderLayer, 8, 2, { norm_frist = true }), 1, true)
    local l = nn.TransformerEncoderLayer(8, 2, 16)
    assert.matches("unknown option 'mask'", err(l, lunet.randn(3, 2, 8), { mask = lunet.zeros(3, 3) }), 1, true)
    assert.matches('only bool and floating types of src_key_padding_mask',
      err(l, lunet.randn(3, 2, 8), { src_key_padding_mask = lunet.zeros(2, 3):long() }), 1, true)
    assert.matches('nn.TransformerEncoderLayer(8, nhead 2, dim_feedforward 16, dropout 0.1, relu)', tostring(l), 1, true)
  end)
end)

describe('nn.TransformerEncoder / nn.TransformerDecoder / nn.Transformer', function()
  it('match torch: a 2-layer encoder with a final norm, a 2-layer pre-norm decoder, a transformer', function()
    fixture_cases('TransformerEncoder')
    fixture_cases('TransformerDecoder')
    fixture_cases('Transformer')
  end)
  it('deep-copies the layer, with layers.0... names', function()
    local layer = nn.TransformerEncoderLayer(4, 2, 8)
    local e = nn.TransformerEncoder(layer, 2)
    assert.is_not.equal(layer.linear1.weight, e.layers[1].linear1.weight)
    assert.is_not.equal(e.layers[1].linear1.weight, e.layers[2].linear1.weight)
    assert.equal(0, fx_lib.maxdiff(layer.linear1.weight, e.layers[2].linear1.weight))
    assert.is_not_nil(e:state_dict()['layers.1.self_attn.in_proj_weight'])
    assert.is_nil(e.norm)
  end)
  it('generate_square_subsequent_mask', function()
    local m = nn.Transformer.generate_square_subsequent_mask(3)
    assert.equal('float32', m.dtype)
    assert.same({ { 0, -math.huge, -math.huge }, { 0, 0, -math.huge }, { 0, 0, 0 } }, m:totable())
  end)
  it('errors and printing', function()
    local t = nn.Transformer({ d_model = 4, nhead = 2, num_encoder_layers = 1, num_decoder_layers = 1, dim_feedforward = 8 })
    assert.matches('the batch number of src and tgt must be equal', err(t, lunet.randn(3, 2, 4), lunet.randn(3, 1, 4)), 1, true)
    assert.matches('equal to d_model (4)', err(t, lunet.randn(3, 2, 5), lunet.randn(3, 2, 4)), 1, true)
    assert.matches("unknown option 'src_msk'", err(t, lunet.randn(3, 2, 4), lunet.randn(3, 2, 4), { src_msk = 1 }), 1, true)
    assert.matches("unknown option 'nheads'", err(nn.Transformer, { nheads = 2 }), 1, true)
    assert.matches('num_layers must be an integer >= 1', err(nn.TransformerEncoder, nn.TransformerEncoderLayer(4, 2), 0), 1, true)
    assert.matches('layer must be an nn.Module', err(nn.TransformerDecoder, 3, 2), 1, true)
    assert.matches('nn.Transformer(d_model 4, nhead 2)', tostring(t), 1, true)
    assert.matches('nn.TransformerEncoder(1 layer)', tostring(t), 1, true)
  end)
end)
