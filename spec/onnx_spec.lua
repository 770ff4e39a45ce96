-- lunet.onnx against PyTorch 1.13 (spec/fixtures/onnx_*.onnx and
-- onnx.safetensors from tools/gen_onnx_fixtures.py): torch's exports of a
-- LeNet-5, a small ResNet and a Concat/AvgPool/Softmax model load and give
-- torch's outputs (batch 2, and 3 through the dynamic batch dim); lunet's
-- exports of the same models have torch's node types and attributes, load
-- back with the same outputs and pass onnx.checker (when python3-onnx is
-- installed); corrupt files, unknown ops and unsupported attributes are
-- named errors.
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local P = require 'lunet.onnx.proto'
local nn = lunet.nn

local here = debug.getinfo(1, 'S').source:match('^@(.*/)') or './'
local T, cases = fx.load_fixture('onnx')
local tmp = os.tmpname()
local function file(name) return here .. 'fixtures/' .. name end

local function read(path)
  local f = assert(io.open(path, 'rb'))
  local s = f:read('*a')
  f:close()
  return s
end
local function write(path, s)
  local f = assert(io.open(path, 'wb'))
  f:write(s)
  f:close()
end

-- the lunet model torch's fixture model is, with its weights
local function build(name)
  local m
  if name == 'lenet' then
    m = nn.Sequential(nn.Conv2d(1, 6, 5, { padding = 2 }), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
      nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
  else
    m = nn.Sequential(nn.Conv2d(3, 8, 3, { padding = 1, bias = false }), nn.BatchNorm2d(8), nn.ReLU(),
      nn.BasicBlock(8, 8), nn.BasicBlock(8, 16, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
  end
  local sd, prefix = {}, name .. '.sd.'
  for k, v in pairs(T) do
    if k:sub(1, #prefix) == prefix then sd[k:sub(#prefix + 1)] = v end
  end
  m:load_state_dict(sd, false)
  return m:eval()
end

-- the nodes of an .onnx file as 'Op(attr=value ...)' strings
local function ops_of(path)
  local g = P.decode(P.schema.Model, read(path), 'ops_of').graph
  local out = {}
  for _, n in ipairs(g.node) do
    local a = {}
    for _, at in ipairs(n.attribute or {}) do
      local v = at.i or at.s or (at.f and ('%.6g'):format(at.f)) or (at.ints and table.concat(at.ints, ','))
        or (at.t and 'tensor' .. table.concat(at.t.dims or {}, 'x'))
      a[#a + 1] = at.name .. '=' .. tostring(v)
    end
    table.sort(a)
    out[#out + 1] = n.op_type .. '(' .. table.concat(a, ' ') .. ')'
  end
  return out
end

local rc = os.execute("/usr/bin/python3 -c 'import onnx' >/dev/null 2>&1")
local has_onnx = rc == 0 or rc == true
local function check_model(path)
  local p = io.popen(("/usr/bin/python3 -c \"import onnx,sys; onnx.checker.check_model(onnx.load(sys.argv[1]), "
    .. "full_check=True); print('checked')\" '%s' 2>&1"):format(path))
  local text = p:read('*a')
  p:close()
  return text
end

describe('lunet.onnx.load of torch 1.13 exports', function()
  for _, c in ipairs(cases) do
    it(c.name .. ' gives torch\'s outputs (batch 2 and a dynamic batch of 3)', function()
      local m = lunet.onnx.load(file(c.file))
      assert.truthy(tostring(m):find('onnx.Graph', 1, true))
      for _, s in ipairs({ '', '3' }) do
        local y = m(T[c.name .. '.x' .. s])
        assert.same(T[c.name .. '.out' .. s]:size(), y:size())
        assert.is_true(fx.maxdiff(y, T[c.name .. '.out' .. s]) < 1e-5, c.name .. s)
      end
      -- float64 through the module's :double()
      local y = m:double()(T[c.name .. '.x']:double())
      assert.is_true(fx.maxdiff(y, T[c.name .. '.out']) < 1e-5)
    end)
  end
end)

describe('lunet.onnx.export', function()
  after_each(function() os.remove(tmp) end)

  for _, name in ipairs({ 'lenet', 'resnet' }) do
    it(name .. ': torch\'s nodes and attributes, and the same outputs loaded back', function()
      local m, x = build(name), T[name .. '.x']
      assert.is_true(fx.maxdiff(m(x), T[name .. '.out']) < 1e-5)
      assert.equal(tmp, lunet.onnx.export(m, x, tmp, { input_names = { 'input' }, output_names = { 'output' },
        dynamic_axes = { input = { 'batch' }, output = { 'batch' } } }))
      assert.same(ops_of(file('onnx_' .. name .. '.onnx')), ops_of(tmp))
      local back = lunet.onnx.load(tmp)
      assert.is_true(fx.maxdiff(back(x), m(x)) < 1e-5)
      assert.is_true(fx.maxdiff(back(T[name .. '.x3']), T[name .. '.out3']) < 1e-5)
      if has_onnx then assert.equal('checked\n', check_model(tmp))
      else print('onnx_spec: python3-onnx not installed, onnx.checker not run') end
    end)
  end

  it('more layers: pools, batch norm, activations, softmax, upsample; non-contiguous input', function()
    local m = nn.Sequential(nn.Conv2d(2, 4, 3, { padding = 'same', bias = false }), nn.BatchNorm2d(4), nn.LeakyReLU(0.2),
      nn.Upsample({ scale_factor = 2 }), nn.MaxPool2d(3, { stride = 2, padding = 1 }),
      nn.AvgPool2d(3, { stride = 2, padding = 1, count_include_pad = false }), nn.AvgPool2d(2, { padding = 1 }),
      nn.ELU(), nn.Hardtanh(-0.5, 0.5), nn.Dropout(), nn.Sequential(nn.Flatten(), nn.Identity()),
      nn.BatchNorm1d(4 * 3 * 3), nn.Tanh(), nn.Linear(36, 5), nn.Sigmoid(), nn.ReLU6(), nn.LogSoftmax(-1))
    m[2].running_mean:uniform_(-1, 1)
    m[12].running_var:uniform_(0.5, 2)
    m:train()
    local x = lunet.randn(8, 8, 2, 3):permute(4, 3, 1, 2)   -- (3, 2, 8, 8), not contiguous
    lunet.onnx.export(m, x, tmp, { opset_version = 14 })
    assert.is_true(m.training)   -- (restored after the eval-mode walk)
    m:eval()
    assert.is_true(fx.maxdiff(lunet.onnx.load(tmp)(x), m(x)) < 1e-5)
    if has_onnx then assert.equal('checked\n', check_model(tmp)) end
  end)

  it('models.resnet18 round trip', function()
    local m = lunet.models.resnet18({ num_classes = 7 }):eval()
    local x = lunet.randn(1, 3, 32, 32)
    lunet.onnx.export(m, x, tmp)
    local ops = ops_of(tmp)
    assert.equal(3 + 8 * 5 + 3 + 3, #ops)   -- (stem, 8 blocks, 3 shortcuts, pool/flatten/gemm)
    assert.is_true(fx.rel(lunet.onnx.load(tmp)(x), m(x)) < 1e-5)
  end)

  it('names what it cannot export, and checks its options', function()
    local x = lunet.randn(1, 3)
    assert.truthy(fx.err_of(lunet.onnx.export, nn.Sequential(nn.Linear(3, 3), nn.GRUCell(3, 3)), x, tmp)
      :find('onnx.export: unsupported module nn.GRUCell at 1 (supported: ', 1, true))
    local m = nn.Sequential(nn.Linear(3, 3))
    assert.truthy(fx.err_of(lunet.onnx.export, m, x, tmp, { opset = 13 }):find("unknown option 'opset'", 1, true))
    assert.truthy(fx.err_of(lunet.onnx.export, m, x, tmp, { opset_version = 11 })
      :find('opset_version must be an integer from 13 to 17', 1, true))
    assert.truthy(fx.err_of(lunet.onnx.export, m, x, tmp, { dynamic_axes = { inp = { 'b' } } })
      :find('dynamic_axes names inp', 1, true))
    assert.truthy(fx.err_of(lunet.onnx.export, m, 'x', tmp):find('sample_input must be a tensor', 1, true))
    assert.truthy(fx.err_of(lunet.onnx.export, {}, x, tmp):find('model must be an nn.Module', 1, true))
    assert.truthy(fx.err_of(lunet.onnx.export, m, x, '/nonexistent/dir/m.onnx'):find('onnx.export: cannot write', 1, true))
  end)
end)

describe('lunet.onnx.load errors', function()
  after_each(function() os.remove(tmp) end)

  -- a one-node model: op with attributes (already encoded)
  local function one_node(op, attrs, inputs, extra)
    local node = P.str(1, 'x')
    local g = P.msg(11, P.str(1, 'x'))
    for _, v in ipairs(inputs or {}) do
      node = node .. P.str(1, v)
      g = g .. P.msg(11, P.str(1, v))
    end
    node = node .. P.str(2, 'y') .. P.str(4, op) .. (attrs or '')
    g = P.msg(1, node) .. g .. P.msg(12, P.str(1, 'y'))
    return P.int(1, 7) .. P.msg(7, g) .. P.msg(8, P.int(2, 13))
  end

  it('unknown ops, listed', function()
    local node2 = P.msg(1, P.str(1, 'y') .. P.str(2, 'z') .. P.str(4, 'Bar'))
    write(tmp, one_node('Foo'))
    assert.truthy(fx.err_of(lunet.onnx.load, tmp):find('unsupported ONNX ops: Foo', 1, true))
    write(tmp, P.int(1, 7) .. P.msg(7, P.msg(1, P.str(1, 'x') .. P.str(2, 'y') .. P.str(4, 'Foo')) .. node2
      .. P.msg(11, P.str(1, 'x')) .. P.msg(12, P.str(1, 'z'))) .. P.msg(8, P.int(2, 13)))
    assert.truthy(fx.err_of(lunet.onnx.load, tmp):find('unsupported ONNX ops: Bar, Foo', 1, true))
  end)

  it('attributes it cannot honour', function()
    local function attr_s(name, v) return P.msg(5, P.str(1, name) .. P.bytes(4, v) .. P.int(20, 3)) end
    local function attr_i(name, v) return P.msg(5, P.str(1, name) .. P.int(3, v) .. P.int(20, 2)) end
    write(tmp, one_node('Conv', attr_s('auto_pad', 'SAME_UPPER'), { 'w' }))
    assert.truthy(fx.err_of(lunet.onnx.load, tmp):find('(Conv): auto_pad SAME_UPPER is not supported', 1, true))
    write(tmp, one_node('Relu', attr_i('frobnicate', 1)))
    assert.truthy(fx.err_of(lunet.onnx.load, tmp):find('(Relu): attribute frobnicate is not supported', 1, true))
    write(tmp, one_node('BatchNormalization', attr_i('training_mode', 1)))
    assert.truthy(fx.err_of(lunet.onnx.load, tmp):find('only inference', 1, true))
    write(tmp, one_node('Resize', attr_s('mode', 'cubic')))
    assert.truthy(fx.err_of(lunet.onnx.load, tmp):find('mode cubic', 1, true))
    write(tmp, P.int(1, 7) .. P.msg(7, P.msg(1, P.str(1, 'missing') .. P.str(2, 'y') .. P.str(4, 'Relu'))
      .. P.msg(12, P.str(1, 'y'))) .. P.msg(8, P.int(2, 13)))
    assert.truthy(fx.err_of(lunet.onnx.load, tmp):find('reads "missing"', 1, true))
    -- a pad lunet's pools do not have
    local pads = P.msg(5, P.str(1, 'pads') .. P.ints(8, { 0, 0, 1, 1 }) .. P.int(20, 7))
    local k = P.msg(5, P.str(1, 'kernel_shape') .. P.ints(8, { 2, 2 }) .. P.int(20, 7))
    write(tmp, one_node('MaxPool', pads .. k))
    local m = lunet.onnx.load(tmp)
    assert.truthy(fx.err_of(m, lunet.randn(1, 1, 4, 4)):find('asymmetric pads', 1, true))
    assert.truthy(fx.err_of(lunet.onnx.load, 'no/such.onnx'):find('onnx.load: cannot open', 1, true))
  end)

  it('a node missing an input or output is a named error (corrupt files, found by tools/fuzz_api.lua)', function()
    local function graph(node, out) return P.int(1, 7) .. P.msg(7, P.msg(1, node) .. P.msg(11, P.str(1, 'x'))
      .. P.msg(12, P.str(1, out or 'y'))) .. P.msg(8, P.int(2, 13)) end
    write(tmp, graph(P.str(2, 'y') .. P.str(4, 'Relu')))
    assert.truthy(fx.err_of(lunet.onnx.load, tmp):find('(Relu): has 0 inputs, needs at least 1', 1, true))
    write(tmp, graph(P.str(1, 'x') .. P.str(2, 'y') .. P.str(4, 'Add')))
    assert.truthy(fx.err_of(lunet.onnx.load, tmp):find('(Add): has 1 inputs, needs at least 2', 1, true))
    local value = P.msg(5, P.str(1, 'value_float') .. P.float(2, 1) .. P.int(20, 1))
    write(tmp, graph(P.str(4, 'Constant') .. value, 'x'))
    assert.truthy(fx.err_of(lunet.onnx.load, tmp):find('(Constant): has no output', 1, true))
    -- an op's error at run time names its node
    write(tmp, graph(P.str(1, 'x') .. P.str(1, 'x') .. P.str(2, 'y') .. P.str(4, 'MatMul')))
    local e = fx.err_of(lunet.onnx.load(tmp), lunet.randn(2, 3))
    assert.truthy(e:find('^onnx.Graph: .*: node %? %(MatMul%): matmul: shapes'), e)
  end)

  it('a truncated file, at every length, is a named error', function()
    local s = read(file('onnx_mixed.onnx'))
    for n = 0, #s - 1 do
      local ok, e = pcall(function()
        write(tmp, s:sub(1, n))
        return lunet.onnx.load(tmp)
      end)
      assert.is_false(ok, 'length ' .. n)
      assert.truthy(tostring(e):find('onnx.load: ', 1, true), tostring(e))
    end
  end)

  it('random byte flips: a model or a named error, never a crash', function()
    local s = read(file('onnx_mixed.onnx'))
    math.randomseed(7)
    local loaded = 0
    for _ = 1, 300 do
      local b = { s:byte(1, -1) }
      for _ = 1, math.random(1, 3) do
        local i = math.random(1, #b)
        b[i] = math.random(0, 255)
      end
      local flipped = string.char(unpack(b))
      write(tmp, flipped)
      local ok, e = pcall(lunet.onnx.load, tmp)
      if ok then loaded = loaded + 1
      else assert.truthy(tostring(e):find('onnx.load: ', 1, true), tostring(e)) end
    end
    assert.is_true(loaded > 0)
  end)

  it('a varint too long or a length past the end', function()
    write(tmp, '\8' .. string.rep('\255', 11))
    assert.truthy(fx.err_of(lunet.onnx.load, tmp):find('corrupt file: varint longer than 10 bytes', 1, true))
    write(tmp, P.int(1, 7) .. '\58\200\1')   -- graph of 200 bytes, none there
    assert.truthy(fx.err_of(lunet.onnx.load, tmp):find('length 200 runs past the end', 1, true))
  end)
end)
