-- Which kernels the convolutions of the benchmark models run on: oneDNN
-- offers a reference implementation ("ref:any", plain loops, 100-1000x slower
-- than its JIT kernels) for layouts its JIT kernels do not take; lunet must
-- fall back to its own kernels then, never run the reference one. Checked from
-- oneDNN's own log (DNNL_VERBOSE=1) of a child process training each model.
local models = dofile('bench/models.lua')

local function child_log(model, batch)
  local script = os.tmpname()
  local f = assert(io.open(script, 'w'))
  f:write(([[
package.path = 'bench/?.lua;' .. package.path
local lunet = require 'lunet'
local nn, optim = lunet.nn, lunet.optim
local spec = require('models')[%q]
local m = spec.build(nn)
local opt = optim.SGD(m:parameters(), { lr = 0.001, momentum = 0.9 })
local x = lunet.randn(%d, spec.input[1], spec.input[2], spec.input[3])
local y = lunet.randint(1, 11, { %d })
for _ = 1, 2 do
  opt:zero_grad()
  local loss = nn.CrossEntropyLoss()(m(x), y)
  loss:backward()
  opt:step()
end
m:eval()
lunet.no_grad(function() m(x) end)
print('done')
]]):format(model, batch, batch))
  f:close()
  local p = io.popen('DNNL_VERBOSE=1 luajit ' .. script .. ' 2>&1')
  local out = p:read('*a')
  p:close()
  os.remove(script)
  return out
end

describe('convolution dispatch', function()
  for _, name in ipairs(models.order) do
    it(name .. ': no oneDNN reference kernel runs (training and inference)', function()
      local out = child_log(name, 16)
      assert.truthy(out:find('done', 1, true), out)
      local execs, refs = 0, {}
      for line in out:gmatch('[^\n]+') do
        if line:find('^%a+_verbose,exec,') then   -- dnnl_verbose or onednn_verbose
          execs = execs + 1
          if line:find(',ref:', 1, true) then refs[#refs + 1] = line end
        end
      end
      assert.is_true(#refs == 0, table.concat(refs, '\n'))
      -- LeNet-5 and ResNet-8 use oneDNN at all (the log is read); the seed
      -- CNNs' one convolution runs on lunet's direct kernels in every pass
      if name == 'lenet5' or name == 'resnet8' then
        assert.is_true(execs > 0, 'no oneDNN primitive ran:\n' .. out:sub(1, 2000))
      end
    end)
  end
end)

describe('ResNet-8 inference on blocked layouts', function()
  it('eval forward: all nine convolutions on oneDNN, activations blocked from the stem to the last block', function()
    local out = child_log('resnet8', 8)
    assert.truthy(out:find('done', 1, true), out)
    -- the eval forward is the last thing the child runs: its log lines are the
    -- tail after the last training backward pass
    local lines = {}
    for line in out:gmatch('[^\n]+') do
      if line:find('^%a+_verbose,exec,') then lines[#lines + 1] = line end
    end
    local last_bwd = 0
    for i, line in ipairs(lines) do if line:find('backward', 1, true) then last_bwd = i end end
    local convs, act_reorders = 0, 0
    for i = last_bwd + 1, #lines do
      local line = lines[i]
      if line:find(',convolution,', 1, true) then convs = convs + 1 end
      -- an activation (4-d, batch 8) moving between plain abcd and blocked aBcd16b
      if line:find(',reorder,', 1, true) and line:find(',8x%d+x%d+x%d+,') then act_reorders = act_reorders + 1 end
    end
    assert.equal(9, convs, table.concat(lines, '\n', last_bwd + 1))
    assert.is_true(act_reorders <= 2, 'activations reordered between blocks:\n' .. table.concat(lines, '\n', last_bwd + 1))
  end)
end)
