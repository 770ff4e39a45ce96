-- nn.RNNCell, LSTMCell, GRUCell, RNN, LSTM, GRU against PyTorch 1.13:
-- outputs, final states and float64 gradients of the input, the states and
-- every weight from spec/fixtures/nn_rnn.safetensors
-- (tools/gen_nn_rnn_fixtures.py), the weights a torch state_dict loaded with
-- load_state_dict; float64 finite differences; dropout between layers;
-- empty batches, non-contiguous input; printing; the errors.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local gradcheck = require 'gradcheck'
local nn = lunet.nn

local data, cases = fx.load_fixture('nn_rnn')
local function get(case, k) return data[case.name .. '.' .. k] end

-- the case's module, its weights torch's (from the state_dict), in dtype
local function build(case, dtype)
  local m = nn[case.kind](case.input_size, case.hidden_size, case.opts)
  local sd = {}
  for _, k in ipairs(case.keys) do sd[k] = get(case, 'sd.' .. k) end
  m:load_state_dict(sd)
  return m:to(dtype)
end

local function lstm_like(case) return case.kind == 'LSTM' or case.kind == 'LSTMCell' end
local function is_cell(case) return case.kind:sub(-4) == 'Cell' end

-- out (nil for cells), h_n, c_n for x and the case's states (leaves, in dtype)
local function run(case, m, x, h0, c0)
  local hx = h0
  if lstm_like(case) and h0 then hx = { h0, c0 } end
  local a, b = m(x, hx)
  if is_cell(case) then a, b = nil, a end
  if lstm_like(case) then return a, b[1], b[2] end
  return a, b, nil
end

local function leaf(case, k, dtype)
  local t = get(case, k)
  return t and t:to(dtype):clone():requires_grad_() or nil
end

describe('recurrent layers against torch 1.13', function()
  it('load a torch state_dict: the same keys, in the same order', function()
    for _, case in ipairs(cases) do
      local names = {}
      for i, e in ipairs(build(case, 'float32'):named_parameters()) do names[i] = e[1] end
      assert.same(case.keys, names, case.name)
    end
  end)

  for _, dtype in ipairs({ 'float64', 'float32' }) do
    it('give torch\'s outputs, final states and gradients in ' .. dtype, function()
      local tol = dtype == 'float64' and 1e-10 or 2e-5
      local n = 0
      for _, case in ipairs(cases) do
        local m = build(case, dtype)
        local x, h0, c0 = leaf(case, 'x', dtype), leaf(case, 'h0', dtype), leaf(case, 'c0', dtype)
        local out, hn, cn = run(case, m, x, h0, c0)
        local loss = (hn * get(case, 'dhn'):to(dtype)):sum()
        if out then
          assert.equal(dtype, out.dtype, case.name)
          assert.same(get(case, 'out'):size(), out:size(), case.name)
          assert.is_true(fx.maxdiff(out, get(case, 'out')) < tol, case.name .. ' out')
          loss = loss + (out * get(case, 'dout'):to(dtype)):sum()
        end
        assert.same(get(case, 'hn'):size(), hn:size(), case.name)
        assert.is_true(fx.maxdiff(hn, get(case, 'hn')) < tol, case.name .. ' hn')
        if cn then
          assert.is_true(fx.maxdiff(cn, get(case, 'cn')) < tol, case.name .. ' cn')
          loss = loss + (cn * get(case, 'dcn'):to(dtype)):sum()
        end
        loss:backward()
        assert.is_true(fx.maxdiff(x.grad, get(case, 'dx')) < tol, case.name .. ' dx')
        if h0 then assert.is_true(fx.maxdiff(h0.grad, get(case, 'dh0')) < tol, case.name .. ' dh0') end
        if c0 then assert.is_true(fx.maxdiff(c0.grad, get(case, 'dc0')) < tol, case.name .. ' dc0') end
        for _, e in ipairs(m:named_parameters()) do
          assert.is_true(fx.maxdiff(e[2].grad, get(case, 'd.' .. e[1])) < tol, case.name .. ' d' .. e[1])
        end
        n = n + 1
      end
      assert.equal(39, n)
    end)
  end

  it('take a non-contiguous input (a narrowed view) as its contiguous copy', function()
    for _, name in ipairs({ 'lstm_l2_bi', 'gru_l2_bi_bf', 'rnncell_tanh' }) do
      local case
      for _, c in ipairs(cases) do if c.name == name then case = c end end
      local m = build(case, 'float64')
      local x = get(case, 'x'):double()
      local v = lunet.cat({ x, x }, -1):narrow(-1, x:size(-1) + 1, x:size(-1))
      assert.is_false(v:is_contiguous())
      local _, h1 = run(case, m, x, get(case, 'h0'):double(), get(case, 'c0') and get(case, 'c0'):double())
      local _, h2 = run(case, m, v, get(case, 'h0'):double(), get(case, 'c0') and get(case, 'c0'):double())
      assert.is_true(fx.maxdiff(h1, h2) < 1e-12, name)
      assert.is_true(fx.maxdiff(h2, get(case, 'hn')) < 1e-10, name)
    end
  end)
end)

describe('recurrent layers', function()
  local function d(...) return lunet.randn(...):double():requires_grad_() end

  it('pass float64 finite differences (inputs, states and weights)', function()
    lunet.manual_seed(3)
    for _, kind in ipairs({ 'RNN', 'LSTM', 'GRU' }) do
      local m = nn[kind](2, 2, { num_layers = 2, bidirectional = true }):double()
      local ps = m:parameters()
      local inputs = { d(3, 2, 2), d(4, 2, 2), d(4, 2, 2) }
      for _, p in ipairs(ps) do inputs[#inputs + 1] = p end
      local ok, msg = gradcheck(function(x, h, c)
        local out, s = m(x, kind == 'LSTM' and { h, c } or h)
        local hn = kind == 'LSTM' and s[1] or s
        return lunet.cat({ out:flatten(), hn:flatten() }, 1)
      end, inputs)
      assert.is_true(ok, kind .. ': ' .. tostring(msg))
    end
    for _, kind in ipairs({ 'RNNCell', 'LSTMCell', 'GRUCell' }) do
      local m = nn[kind](3, 2, kind == 'RNNCell' and { nonlinearity = 'relu' } or nil):double()
      local inputs = { d(2, 3), d(2, 2), d(2, 2) }
      for _, p in ipairs(m:parameters()) do inputs[#inputs + 1] = p end
      local ok, msg = gradcheck(function(x, h, c)
        local r = m(x, kind == 'LSTMCell' and { h, c } or h)
        return kind == 'LSTMCell' and lunet.cat(r, 2) or r
      end, inputs)
      assert.is_true(ok, kind .. ': ' .. tostring(msg))
    end
  end)

  it('drop out between layers in training only', function()
    lunet.manual_seed(5)
    local m = nn.GRU(3, 4, { num_layers = 2, dropout = 1 })
    local ref = nn.GRU(3, 4, { num_layers = 2 })
    ref:load_state_dict(m:state_dict())
    local x1, x2 = lunet.randn(5, 2, 3), lunet.randn(5, 2, 3)
    -- (p = 1: the second layer sees zeros whatever the input)
    local a = m(x1)
    local b = m(x2)
    assert.is_true(fx.maxdiff(a, b) == 0)
    m:eval()
    local c = m(x1)
    assert.is_true(fx.maxdiff(c, ref(x1)) == 0)
    assert.is_true(fx.maxdiff(c, a) > 1e-3)
    -- (one layer: no dropout at all, as torch)
    local one = nn.LSTM(3, 4, { dropout = 1 })
    local o1 = one(x1)
    assert.is_true(fx.maxdiff(o1, one:eval()(x1)) == 0)
  end)

  it('run on an empty batch', function()
    local out, hn = nn.GRU(3, 4, { num_layers = 2, bidirectional = true })(lunet.randn(5, 0, 3))
    assert.same({ 5, 0, 8 }, out:size())
    assert.same({ 4, 0, 4 }, hn:size())
    local o2, s = nn.LSTM(3, 4, { batch_first = true })(lunet.randn(0, 5, 3))
    assert.same({ 0, 5, 4 }, o2:size())
    assert.same({ 1, 0, 4 }, s[2]:size())
    assert.same({ 0, 4 }, nn.RNNCell(3, 4)(lunet.randn(0, 3)):size())
    assert.same({ 0, 4 }, nn.LSTMCell(3, 4)(lunet.randn(0, 3))[2]:size())
  end)

  it('have torch\'s parameter shapes, init bound and dtype option', function()
    local m = nn.LSTM(3, 5, { num_layers = 2, bidirectional = true, dtype = 'float64' })
    assert.same({ 20, 3 }, m.weight_ih_l0:size())
    assert.same({ 20, 10 }, m.weight_ih_l1_reverse:size())
    assert.same({ 20, 5 }, m.weight_hh_l1:size())
    assert.equal('float64', m.bias_hh_l0.dtype)
    for _, p in ipairs(m:parameters()) do assert.is_true(p:abs():max():item() <= 1 / math.sqrt(5)) end
    assert.same({ 9, 3 }, nn.GRUCell(3, 3).weight_ih:size())
    assert.is_nil(nn.RNN(3, 3, 1, 'relu', false).bias_ih_l0)   -- (torch's positional order)
    assert.equal('relu', nn.RNN(3, 3, 1, 'relu').nonlinearity)
    assert.equal(2, nn.GRU(3, 3, 2, true, true).num_layers)
    assert.is_true(nn.GRU(3, 3, 2, true, true).batch_first)
  end)

  it('print as torch\'s repr', function()
    local function head(m) return tostring(m):match('^[^\n]*') end
    assert.equal('nn.LSTM(10, 20, num_layers=2, batch_first=True)', head(nn.LSTM(10, 20, { num_layers = 2, batch_first = true })))
    assert.equal('nn.RNN(3, 4, bias=False, dropout=0.5, bidirectional=True)',
      head(nn.RNN(3, 4, { bias = false, dropout = 0.5, bidirectional = true, nonlinearity = 'relu' })))
    assert.equal('nn.GRU(3, 4)', head(nn.GRU(3, 4)))
    assert.equal('nn.RNNCell(3, 4, nonlinearity=relu)', head(nn.RNNCell(3, 4, { nonlinearity = 'relu' })))
    assert.equal('nn.GRUCell(3, 4, bias=False)', head(nn.GRUCell(3, 4, false)))
    assert.equal('nn.LSTMCell(3, 4)', head(nn.LSTMCell(3, 4)))
    assert.truthy(tostring(nn.LSTMCell(3, 4)):find('144 parameters', 1, true))
  end)

  it('raise named errors for bad arguments', function()
    local e = fx.err_of
    local x = lunet.randn(5, 2, 3)
    assert.matches('nn.LSTM: unknown option', e(nn.LSTM, 3, 4, { num_layer = 2 }))
    assert.matches('nn.GRU: num_layers must be an integer >= 1, got 0', e(nn.GRU, 3, 4, { num_layers = 0 }))
    assert.matches('nn.RNN: num_layers must be an integer >= 1, got 1.5', e(nn.RNN, 3, 4, { num_layers = 1.5 }))
    assert.matches('nn.LSTM: dropout must be a number in %[0, 1%], got 1.5', e(nn.LSTM, 3, 4, { dropout = 1.5 }))
    assert.matches('nn.LSTM: dropout must be a number in %[0, 1%], got %-0.1', e(nn.LSTM, 3, 4, { dropout = -0.1 }))
    assert.matches('nn.LSTM: dropout must be a number', e(nn.LSTM, 3, 4, { dropout = 0 / 0 }))
    assert.matches('nn.LSTM: proj_size has to be smaller than hidden_size, got 4 >= 4', e(nn.LSTM, 3, 4, { proj_size = 4 }))
    assert.matches('nn.LSTM: proj_size should be a positive integer or zero', e(nn.LSTM, 3, 4, { proj_size = -1 }))
    assert.matches('nn.GRU: proj_size argument is only supported for LSTM, not RNN or GRU', e(nn.GRU, 3, 4, { proj_size = 2 }))
    assert.matches('nn.RNN: proj_size argument is only supported for LSTM', e(nn.RNN, 3, 4, { proj_size = 2 }))
    assert.matches("nn.RNN: nonlinearity must be 'tanh' or 'relu', got 'gelu'", e(nn.RNN, 3, 4, { nonlinearity = 'gelu' }))
    assert.matches("nn.RNNCell: nonlinearity must be", e(nn.RNNCell, 3, 4, { nonlinearity = 'sigmoid' }))
    assert.matches('nn.GRU: unknown option', e(nn.GRU, 3, 4, { nonlinearity = 'relu' }))
    assert.matches('nn.LSTMCell: unknown option', e(nn.LSTMCell, 3, 4, { num_layers = 2 }))
    assert.matches('nn.GRUCell: hidden_size must be an integer >= 1, got 0', e(nn.GRUCell, 3, 0))
    assert.matches('nn.LSTM: input_size must be an integer >= 0, got nil', e(nn.LSTM))
    assert.matches('nn.RNN: hidden_size must be an integer >= 1, got 2.5', e(nn.RNN, 3, 2.5))
    -- forward
    local m = nn.LSTM(3, 4, { num_layers = 2 })
    assert.matches('nn.LSTM: input has 5 features %(its last dim%), expected input_size 3', e(m, lunet.randn(5, 2, 5)))
    assert.matches('nn.LSTM: expected input to be 2%-D or 3%-D but received 4%-D tensor', e(m, lunet.randn(5, 2, 3, 1)))
    assert.matches('nn.LSTM: expected input to be 2%-D or 3%-D but received 1%-D tensor', e(m, lunet.randn(3)))
    assert.matches('nn.LSTM: expected sequence length to be larger than 0', e(m, lunet.randn(0, 2, 3)))
    assert.matches('nn.LSTM: input must be a tensor or a PackedSequence, got table', e(m, { data = x, batch_sizes = lunet.ones(5) }))
    assert.matches('nn.LSTM: hx must be {h0, c0}, a list of two tensors, got a tensor', e(m, x, lunet.zeros(2, 2, 4)))
    assert.matches('nn.LSTM: hx must be {h0, c0}, a list of two tensors, got a list of 1', e(m, x, { lunet.zeros(2, 2, 4) }))
    assert.matches('nn.LSTM: h0 must have shape {2, 2, 4} %(num_layers %* num_directions, N, H%), got {1, 2, 4}',
      e(m, x, { lunet.zeros(1, 2, 4), lunet.zeros(2, 2, 4) }))
    assert.matches('nn.LSTM: c0 must have shape {2, 2, 4}', e(m, x, { lunet.zeros(2, 2, 4), lunet.zeros(2, 3, 4) }))
    assert.matches('nn.GRU: h0 must have shape {2, 4} %(num_layers %* num_directions, H%), got {2, 1, 4}',
      e(nn.GRU(3, 4, { bidirectional = true }), lunet.randn(5, 3), lunet.zeros(2, 1, 4)))
    assert.matches('nn.RNN: h0 must have shape {1, 2, 4}', e(nn.RNN(3, 4), x, lunet.zeros(1, 4)))
    assert.matches('nn.RNN: h0 must be a tensor, got number', e(nn.RNN(3, 4), x, 1))
    assert.matches('nn.LSTM: input is float64 but the weights are float32; cast one first', e(m, x:double()))
    assert.matches('nn.GRU: h0 is float64 but the input is float32', e(nn.GRU(3, 4), x, lunet.zeros(1, 2, 4):double()))
    -- cells
    assert.matches('nn.GRUCell: input is int32 but the weights are float32', e(nn.GRUCell(3, 4), lunet.zeros(2, 3):int()))
    assert.matches('nn.LSTMCell: c is float64 but the input is float32',
      e(nn.LSTMCell(3, 4), lunet.zeros(2, 3), { lunet.zeros(2, 4), lunet.zeros(2, 4):double() }))
    local c = nn.GRUCell(3, 4)
    assert.matches('nn.GRUCell: expected input to be 1%-D or 2%-D but received 3%-D tensor', e(c, x))
    assert.matches('nn.GRUCell: input has 5 features, expected input_size 3', e(c, lunet.randn(2, 5)))
    assert.matches('nn.GRUCell: hx must have shape {2, 4} for input of shape {2, 3}, got {3, 4}',
      e(c, lunet.randn(2, 3), lunet.zeros(3, 4)))
    assert.matches('nn.GRUCell: hx must have shape {4} for input of shape {3}, got {1, 4}', e(c, lunet.randn(3), lunet.zeros(1, 4)))
    assert.matches('nn.RNNCell: hx must have shape {2, 4}', e(nn.RNNCell(3, 4), lunet.randn(2, 3), lunet.zeros(2, 5)))
    assert.matches('nn.LSTMCell: hx must be {h, c}', e(nn.LSTMCell(3, 4), lunet.randn(2, 3), lunet.zeros(2, 4)))
    assert.matches('nn.LSTMCell: c must have shape {2, 4}',
      e(nn.LSTMCell(3, 4), lunet.randn(2, 3), { lunet.zeros(2, 4), lunet.zeros(4) }))
    assert.matches('nn.RNNCell: input must be a tensor, got nil', e(nn.RNNCell(3, 4)))
  end)
end)
