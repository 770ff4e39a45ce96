-- nn.utils.rnn's PackedSequence, pack_padded_sequence, pad_packed_sequence,
-- pack_sequence, RNN/LSTM/GRU over PackedSequences and LSTM's proj_size,
-- against PyTorch 1.13 (spec/fixtures/nn_rnn_packed.safetensors from
-- tools/gen_rnn_packed_fixtures.py): outputs, final states, gradients of
-- the input, the states and every weight; float64 finite differences; the
-- errors.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local nn = lunet.nn
local R = nn.utils.rnn

local data, cases = fx.load_fixture('nn_rnn_packed')
local function get(case, k) return data[case.name .. '.' .. k] end
local function num(v) return type(v) == 'number' and v or nil end   -- (JSON null)
local function leaf(case, k, dtype)
  local t = get(case, k)
  return t and t:to(dtype):clone():requires_grad_() or nil
end
local function close(a, b, tol, what)
  assert.same(b:size(), a:size(), what)
  assert.is_true(fx.maxdiff(a, b) < tol, what .. ': ' .. fx.maxdiff(a, b))
end

local function build(case, dtype)
  local m = nn[case.kind](case.input_size, case.hidden_size, case.opts)
  local sd = {}
  for _, k in ipairs(case.keys) do sd[k] = get(case, 'sd.' .. k) end
  m:load_state_dict(sd)
  return m:to(dtype)
end

describe('packed sequences and proj_size against torch 1.13', function()
  it('load a torch state_dict with weight_hr: the same keys, in the same order', function()
    for _, case in ipairs(cases) do
      if case.kind ~= 'pack' then
        local names = {}
        for i, e in ipairs(build(case, 'float32'):named_parameters()) do names[i] = e[1] end
        assert.same(case.keys, names, case.name)
      end
    end
  end)

  for _, dtype in ipairs({ 'float64', 'float32' }) do
    it('give torch\'s outputs, final states and gradients in ' .. dtype, function()
      local tol = dtype == 'float64' and 1e-10 or 2e-5
      local n = 0
      for _, case in ipairs(cases) do
        if case.kind ~= 'pack' then
          local m, lstm = build(case, dtype), case.kind == 'LSTM'
          local bf = case.opts.batch_first == true
          local x, h0, c0 = leaf(case, 'x', dtype), leaf(case, 'h0', dtype), leaf(case, 'c0', dtype)
          local inp = x
          if case.packed then
            inp = R.pack_padded_sequence(x, case.lengths, { batch_first = bf, enforce_sorted = case.enforce_sorted })
          end
          local hx = h0
          if lstm and h0 then hx = { h0, c0 } end
          local out, s = m(inp, hx)
          local hn, cn = s, nil
          if lstm then hn, cn = s[1], s[2] end
          if case.packed then
            assert.is_true(R.PackedSequence.is_packed(out), case.name)
            assert.same(get(case, 'batch_sizes'):tolist(), out.batch_sizes:tolist(), case.name)
            if get(case, 'sorted_indices') then
              assert.same(get(case, 'sorted_indices'):tolist(), out.sorted_indices:tolist(), case.name)
            else
              assert.is_nil(out.sorted_indices, case.name)
            end
            local padded, lengths = R.pad_packed_sequence(out, { batch_first = bf })
            close(padded, get(case, 'outpad'), tol, case.name .. ' outpad')
            assert.same(get(case, 'lengths'):tolist(), lengths:tolist(), case.name)
            out = out.data
          end
          assert.equal(dtype, out.dtype, case.name)
          close(out, get(case, 'out'), tol, case.name .. ' out')
          close(hn, get(case, 'hn'), tol, case.name .. ' hn')
          local loss = (out * get(case, 'dout'):to(dtype)):sum() + (hn * get(case, 'dhn'):to(dtype)):sum()
          if lstm then
            close(cn, get(case, 'cn'), tol, case.name .. ' cn')
            loss = loss + (cn * get(case, 'dcn'):to(dtype)):sum()
          end
          loss:backward()
          close(x.grad, get(case, 'dx'), tol, case.name .. ' dx')
          if h0 then close(h0.grad, get(case, 'dh0'), tol, case.name .. ' dh0') end
          if c0 then close(c0.grad, get(case, 'dc0'), tol, case.name .. ' dc0') end
          for _, e in ipairs(m:named_parameters()) do close(e[2].grad, get(case, 'd.' .. e[1]), tol, case.name .. ' d' .. e[1]) end
          n = n + 1
        end
      end
      assert.equal(11, n)
    end)
  end

  it('pack and pad as torch (values, batch sizes, lengths, gradients)', function()
    local n = 0
    for _, case in ipairs(cases) do
      if case.kind == 'pack' then
        local x = leaf(case, 'x', 'float64')
        local p = R.pack_padded_sequence(x, case.lengths, case.batch_first, case.enforce_sorted)
        close(p.data, get(case, 'data'), 1e-12, case.name .. ' data')
        assert.same(get(case, 'batch_sizes'):tolist(), p.batch_sizes:tolist(), case.name)
        local out, lengths = R.pad_packed_sequence(p, { batch_first = case.batch_first,
          padding_value = num(case.padding_value), total_length = num(case.total_length) })
        close(out, get(case, 'out'), 1e-12, case.name .. ' out')
        assert.same(get(case, 'lengths'):tolist(), lengths:tolist(), case.name)
        assert.equal('int64', lengths.dtype)
        ;(out * get(case, 'dout')):sum():backward()
        close(x.grad, get(case, 'dx'), 1e-12, case.name .. ' dx')
        n = n + 1
      end
    end
    assert.equal(2, n)
  end)
end)

describe('packed sequences', function()
  local function d(...) return lunet.randn(...):double():requires_grad_() end

  it('pack_sequence: a list packed, unsorted with enforce_sorted false, and padded back', function()
    local a, b, c = lunet.randn(2, 3), lunet.randn(4, 3), lunet.randn(1, 3)
    local p = R.pack_sequence({ a, b, c }, { enforce_sorted = false })
    assert.same({ 3, 2, 1, 1 }, p.batch_sizes:tolist())
    assert.same({ 2, 1, 3 }, p.sorted_indices:tolist())
    assert.same({ 2, 1, 3 }, p.unsorted_indices:tolist())
    assert.same({ 7, 3 }, p.data:size())
    local out, lengths = R.pad_packed_sequence(p, { batch_first = true })
    assert.same({ 2, 4, 1 }, lengths:tolist())
    assert.is_true(fx.maxdiff(out, R.pad_sequence({ a, b, c }, true)) == 0)
    assert.matches('PackedSequence%(data=7x3 float32, batch_sizes={3, 2, 1, 1}, sorted_indices={2, 1, 3}%)', tostring(p))
    assert.same({ 2, 3, 1 }, R.PackedSequence(p.data, p.batch_sizes, { 3, 1, 2 }).unsorted_indices:tolist())
    -- (sorted input: no indices, as torch)
    assert.is_nil(R.pack_sequence({ b, a }).sorted_indices)
  end)

  it('pack and pad pass float64 finite differences', function()
    lunet.manual_seed(4)
    local ok, msg = gradcheck(function(x)
      local p = R.pack_padded_sequence(x, { 2, 4, 1 }, { enforce_sorted = false })
      return (R.pad_packed_sequence(p, { total_length = 5, padding_value = 2 }))
    end, { d(4, 3, 2) })
    assert.is_true(ok, tostring(msg))
  end)

  it('LSTM (proj_size, bidirectional, 2 layers) over packed input passes float64 finite differences', function()
    lunet.manual_seed(6)
    local m = nn.LSTM(2, 3, { num_layers = 2, bidirectional = true, proj_size = 2 }):double()
    local inputs = { d(4, 3, 2), d(4, 3, 2), d(4, 3, 3) }
    for _, p in ipairs(m:parameters()) do inputs[#inputs + 1] = p end
    local ok, msg = gradcheck(function(x, h, c)
      local out, s = m(R.pack_padded_sequence(x, { 3, 4, 1 }, { enforce_sorted = false }), { h, c })
      return lunet.cat({ out.data:flatten(), s[1]:flatten(), s[2]:flatten() }, 1)
    end, inputs)
    assert.is_true(ok, tostring(msg))
  end)

  it('give each sequence the state at its own last step (as running it alone)', function()
    lunet.manual_seed(7)
    local m = nn.GRU(3, 4, { num_layers = 2, bidirectional = true }):double()
    local seqs = { lunet.randn(3, 3):double(), lunet.randn(5, 3):double(), lunet.randn(1, 3):double() }
    local out, hn = m(R.pack_sequence(seqs, false))
    local padded = R.pad_packed_sequence(out)
    for i, s in ipairs(seqs) do
      local o1, h1 = m(s)
      assert.is_true(fx.maxdiff(h1, hn:select(2, i)) < 1e-12, i)
      assert.is_true(fx.maxdiff(o1, padded:select(2, i):narrow(1, 1, s:size(1))) < 1e-12, i)
    end
  end)

  it('drop out between layers over packed input, in training only', function()
    lunet.manual_seed(8)
    local m = nn.LSTM(3, 4, { num_layers = 2, dropout = 1 })
    local p1 = R.pack_sequence({ lunet.randn(4, 3), lunet.randn(2, 3) })
    local p2 = R.pack_sequence({ lunet.randn(4, 3), lunet.randn(2, 3) })
    -- (p = 1: the second layer sees zeros whatever the input)
    assert.is_true(fx.maxdiff(m(p1).data, m(p2).data) == 0)
    m:eval()
    assert.is_true(fx.maxdiff(m(p1).data, m(p2).data) > 1e-4)
  end)

  it('have torch\'s proj_size shapes and repr', function()
    local m = nn.LSTM(3, 5, { num_layers = 2, bidirectional = true, proj_size = 2 })
    assert.same({ 20, 3 }, m.weight_ih_l0:size())
    assert.same({ 20, 2 }, m.weight_hh_l0:size())
    assert.same({ 20, 4 }, m.weight_ih_l1_reverse:size())
    assert.same({ 2, 5 }, m.weight_hr_l1_reverse:size())
    local out, s = m(lunet.randn(6, 3))   -- (unbatched)
    assert.same({ 6, 4 }, out:size())
    assert.same({ 4, 2 }, s[1]:size())
    assert.same({ 4, 5 }, s[2]:size())
    assert.equal('nn.LSTM(3, 5, proj_size=2, num_layers=2, bidirectional=True)', tostring(m):match('^[^\n]*'))
  end)

  it('raise named errors for bad arguments', function()
    local e = fx.err_of
    local x = lunet.randn(4, 3, 2)
    assert.matches("pack_padded_sequence: `lengths` array must be sorted in decreasing order", e(R.pack_padded_sequence, x, { 2, 4, 1 }))
    assert.matches('pack_padded_sequence: expected len%(lengths%) to be equal to batch_size, but got 2 %(batch_size=3%)',
      e(R.pack_padded_sequence, x, { 2, 1 }))
    assert.matches('pack_padded_sequence: length of all samples has to be greater than 0', e(R.pack_padded_sequence, x, { 2, 1, 0 }))
    assert.matches('pack_padded_sequence: lengths%[1%] is 5 but the input has only 4 time steps', e(R.pack_padded_sequence, x, { 5, 1, 1 }))
    assert.matches('pack_padded_sequence: lengths must be a 1%-D integer tensor or a list', e(R.pack_padded_sequence, x, 3))
    assert.matches('pack_padded_sequence: lengths must be a 1%-D integer tensor', e(R.pack_padded_sequence, x, lunet.ones(3)))
    assert.matches('pack_padded_sequence: input must be a tensor of at least 2 dims', e(R.pack_padded_sequence, lunet.ones(3), { 1 }))
    assert.matches("pack_padded_sequence: unknown option 'sorted'", e(R.pack_padded_sequence, x, { 3, 2, 1 }, { sorted = true }))
    local p = R.pack_padded_sequence(x, lunet.tensor({ 3, 2, 1 }, { dtype = 'int64' }))
    assert.matches('pad_packed_sequence: expected total_length to be at least the length of the longest sequence in input,'
      .. ' but got total_length=2 and max sequence length being 3', e(R.pad_packed_sequence, p, { total_length = 2 }))
    assert.matches('pad_packed_sequence: sequence must be a PackedSequence, got tensor', e(R.pad_packed_sequence, x))
    assert.matches("pad_packed_sequence: unknown option 'total_len'", e(R.pad_packed_sequence, p, { total_len = 4 }))
    assert.matches("pack_sequence: unknown option 'sorted'", e(R.pack_sequence, { lunet.ones(2) }, { sorted = false }))
    assert.matches('pack_padded_sequence: cannot pack empty tensors', e(R.pack_padded_sequence, lunet.ones(3, 0, 2), {}))
    assert.matches('pack_padded_sequence: cannot pack empty tensors', e(R.pack_padded_sequence, lunet.ones(0, 1), { 1 }))
    assert.matches('pack_sequence: sequences must be a non%-empty list of tensors, got table', e(R.pack_sequence, {}))
    assert.matches('PackedSequence: batch_sizes must be positive and non%-increasing, got {1, 2}', e(R.PackedSequence, lunet.ones(3, 2), { 1, 2 }))
    assert.matches('PackedSequence: batch_sizes sum to 3 but data has 4 rows', e(R.PackedSequence, lunet.ones(4, 2), { 2, 1 }))
    assert.matches('PackedSequence: batch_sizes must be a 1%-D int64 tensor', e(R.PackedSequence, lunet.ones(4, 2), lunet.ones(2)))
    -- modules over packed input
    local m = nn.LSTM(2, 3)
    assert.matches('nn.LSTM: h0 must have shape {1, 3, 3}', e(m, p, { lunet.zeros(1, 2, 3), lunet.zeros(1, 3, 3) }))
    assert.matches('nn.GRU: input has 2 features %(its last dim%), expected input_size 4', e(nn.GRU(4, 3), p))
    assert.matches('nn.RNN: input is float64 but the weights are float32', e(nn.RNN(2, 3), p:to('float64')))
    assert.matches('nn.LSTM: h0 must have shape {1, 3, 2}', e(nn.LSTM(2, 3, { proj_size = 2 }), x, { lunet.zeros(1, 3, 3), lunet.zeros(1, 3, 3) }))
  end)
end)
