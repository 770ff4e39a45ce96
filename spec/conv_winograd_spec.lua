-- Winograd convolutions (oneDNN's jit_wino_4x3, AVX-512 only) for float32 3x3
-- stride-1 layers with channels in multiples of 16, where it measured faster
-- than the direct kernel (c/cpu/conv_dnnl.c, winograd_wanted): all three passes
-- with 32+ channels and 512+ output pixels per channel (N*OH*OW), the weight
-- gradient alone with 16 channels and 32768+ pixels. Its results are checked
-- against float64, and the rule against oneDNN's own log (DNNL_VERBOSE=1) of
-- child processes.
local lunet = require 'lunet'
local nn = lunet.nn
local F = nn.functional

-- largest difference relative to the largest magnitude of the float64 value
local function rel(got, want)
  return (got:double() - want):abs():max():item() / want:abs():max():item()
end

-- does this CPU have AVX-512 (F, BW, VL, DQ: oneDNN's avx512_core)?
local function avx512_core()
  local f = io.open('/proc/cpuinfo')
  if not f then return false end
  local s = f:read('*a'); f:close()
  local flags = s:match('\nflags%s*:([^\n]*)') or ''
  for _, x in ipairs { 'avx512f', 'avx512bw', 'avx512vl', 'avx512dq' } do
    if not flags:find(' ' .. x .. ' ', 1, true) and not flags:find(' ' .. x .. '$') then return false end
  end
  return true
end

-- stdout and stderr of a child luajit running src with oneDNN's log on
-- (env: extra variables), after checking that it printed 'done'
local function logged_child(src, env)
  local script = os.tmpname()
  local f = assert(io.open(script, 'w'))
  f:write(src)
  f:close()
  local p = io.popen((env or '') .. ' DNNL_VERBOSE=1 luajit ' .. script .. ' 2>&1')
  local out = p:read('*a')
  p:close()
  os.remove(script)
  assert.truthy(out:find('done', 1, true), out)
  return out
end

describe('Winograd convolutions', function()
  lunet.manual_seed(5)

  it('forward, input, weight and bias gradients match float64 (training, saved blocked input)', function()
    -- {C, O, H, W, padding, bias, batch}
    for _, c in ipairs { { 32, 32, 16, 16, 1, false, 8 }, { 64, 64, 8, 8, 1, true, 8 }, { 48, 32, 9, 13, 1, true, 8 },
      { 32, 64, 10, 10, 0, false, 8 }, { 16, 16, 32, 32, 1, true, 32 } } do
      local x = lunet.randn({ c[7], c[1], c[3], c[4] })
      local w = lunet.randn({ c[2], c[1], 3, 3 }) * (1 / math.sqrt(9 * c[1]))
      local b = c[6] and lunet.randn({ c[2] }) or nil
      local opts = { padding = c[5] }
      local function run(dtype)
        local xx = x:to(dtype):detach():requires_grad_()
        local ww = w:to(dtype):detach():requires_grad_()
        local bb = b and b:to(dtype):detach():requires_grad_()
        local y = F.conv2d(xx, ww, bb, opts)
        lunet.manual_seed(9)
        y:backward(lunet.randn(y:size()):to(dtype))   -- (the same gradient in both: float64 draws are another stream)
        return y, xx.grad, ww.grad, bb and bb.grad
      end
      local y, dx, dw, db = run('float32')
      local y64, dx64, dw64, db64 = run('float64')
      local what = ('%d->%d %dx%d pad %d'):format(c[1], c[2], c[3], c[4], c[5])
      assert(rel(y, y64) < 2e-5, what .. ' output: ' .. rel(y, y64))
      assert(rel(dx, dx64) < 2e-5, what .. ' input gradient: ' .. rel(dx, dx64))
      assert(rel(dw, dw64) < 2e-5, what .. ' weight gradient: ' .. rel(dw, dw64))
      if db then assert(rel(db, db64) < 2e-5, what .. ' bias gradient: ' .. rel(db, db64)) end
    end
  end)

  it('a 32-channel BasicBlock in eval mode (fused, blocked layouts) matches its float64 copy', function()
    local blk = nn.BasicBlock(32, 32, 1)
    for _ = 1, 2 do blk(lunet.randn({ 4, 32, 8, 8 }) * 2 + 1) end   -- running statistics
    blk:eval()
    local blk64 = blk:clone():double()
    local x = lunet.randn({ 4, 32, 12, 12 })
    local got = lunet.no_grad(function() return blk(x) end)
    local want = lunet.no_grad(function() return blk64(x:double()) end)
    assert(rel(got, want) < 2e-5, rel(got, want))
    -- the reordered weights are kept between calls: again with the same
    -- weights, then after one weight deep in conv2 changed (and one of bn2's
    -- statistics, which the folded weights carry)
    got = lunet.no_grad(function() return blk(x) end)
    assert(rel(got, want) < 2e-5, 'same weights again: ' .. rel(got, want))
    lunet.no_grad(function()
      blk.conv2.weight[27][19][2][3] = 0.9
      blk.bn2.running_var[30] = 4
    end)
    blk64 = blk:clone():double()
    got = lunet.no_grad(function() return blk(x) end)
    want = lunet.no_grad(function() return blk64(x:double()) end)
    assert(rel(got, want) < 2e-5, 'after the weights changed: ' .. rel(got, want))
  end)

  it('reorders an eval-mode layer\'s Winograd weights again only when they change', function()
    local out = logged_child([[
local lunet = require 'lunet'
local blk = lunet.nn.BasicBlock(32, 32, 1)
blk:eval()
local x = lunet.randn({ 4, 32, 12, 12 })
for i = 1, 4 do
  if i == 4 then lunet.no_grad(function() blk.conv1.weight[3][7][3][1] = 0.5 end) end
  lunet.no_grad(function() return blk(x) end)
  lunet.synchronize()
  io.write('step ', i, '\n')   -- stdout, in order with oneDNN's log
end
print('done')
]])
    local step, counts = 0, { 0, 0, 0, 0 }
    for line in out:gmatch('[^\n]+') do
      local s = line:match('^step (%d)')
      if s then step = tonumber(s)
      elseif line:find(',exec,', 1, true) and line:find('wino_reorder', 1, true) then
        counts[step + 1] = counts[step + 1] + 1
      end
    end
    -- both 32->32 convolutions on the first call, none while the weights
    -- stay, conv1's alone after it changed (no Winograd without AVX-512)
    assert.same(avx512_core() and { 2, 0, 0, 1 } or { 0, 0, 0, 0 }, counts, out)
  end)

  -- oneDNN's log of a child training layers of {channels, size, batch}; the
  -- passes that ran on Winograd, by "channels/size/batch"
  local layers = { { 32, 16, 2 }, { 16, 16, 2 }, { 48, 8, 2 }, { 16, 32, 32 } }
  local function child_log(env)
    local out = logged_child([[
local lunet = require 'lunet'
local F = lunet.nn.functional
for _, c in ipairs { { 32, 16, 2 }, { 16, 16, 2 }, { 48, 8, 2 }, { 16, 32, 32 } } do
  local x = lunet.randn({ c[3], c[1], c[2], c[2] }):requires_grad_()
  local w = lunet.randn({ c[1], c[1], 3, 3 }):requires_grad_()
  F.conv2d(x, w, nil, { padding = 1 }):sum():backward()
end
print('done')
]], env)
    local wino = {}
    for _, c in ipairs(layers) do wino[table.concat(c, '/')] = {} end
    for line in out:gmatch('[^\n]+') do
      if line:find(',convolution,', 1, true) and line:find('^%a+_verbose,exec,') and line:find('wino', 1, true) then
        local mb, ic, ih = line:match('mb(%d+)_ic(%d+)oc%d+_ih(%d+)')
        local pass = line:match(',(forward_%a+),') or line:match(',(backward_%a+),')
        local key = ('%s/%s/%s'):format(ic, ih, mb)
        if wino[key] and pass then wino[key][pass] = true end
      end
    end
    return wino, out
  end

  it('runs where the rule says', function()
    local wino, out = child_log('env -u LUNET_WINOGRAD')
    if avx512_core() then
      for _, pass in ipairs { 'forward_training', 'backward_data', 'backward_weights' } do
        assert.is_true(wino['32/16/2'][pass] == true, '32->32 ' .. pass .. ' not on Winograd:\n' .. out)
      end
      -- 16 channels: the weight gradient, from 32768 pixels
      assert.is_true(wino['16/32/32'].backward_weights == true, '16->16 on 32 x 32x32, weights:\n' .. out)
      assert.is_nil(wino['16/32/32'].forward_training, out)
      assert.is_nil(wino['16/32/32'].backward_data, out)
    else   -- oneDNN has no Winograd kernel here: the direct one runs
      for _, c in ipairs(layers) do assert.is_nil(next(wino[table.concat(c, '/')]), out) end
    end
    assert.is_nil(next(wino['16/16/2']), '16->16 on 2 x 16x16 on Winograd:\n' .. out)
    assert.is_nil(next(wino['48/8/2']), '48->48 on 2 x 8x8 (128 pixels) on Winograd:\n' .. out)
  end)

  it('LUNET_WINOGRAD=0 turns it off', function()
    local wino, out = child_log('LUNET_WINOGRAD=0')
    for _, c in ipairs(layers) do assert.is_nil(next(wino[table.concat(c, '/')]), out) end
  end)
end)
