-- The CUDA backend as a library of its own (c/cuda/ -> build/liblunet_cuda.so,
-- c/core/cuda_load.c): never linked into liblunet.so, loaded on the first
-- question about cuda devices, and without a driver, a GPU or the library,
-- no cuda devices and errors that say which. Runs everywhere (CI has no GPU);
-- on a GPU machine the first block checks the devices are there instead.
local lunet = require 'lunet'
local shell = require 'shell'
local root, sh = shell.root, shell.sh

local lib = os.getenv('LUNET_LIB') or (root .. 'build/liblunet.so')
local dir = lib:match('^(.*/)') or './'
local cuda_lib = dir .. 'liblunet_cuda.so'
local function exists(p) local f = io.open(p, 'rb'); if f then f:close() end; return f ~= nil end

-- a child luajit with env set, printing what code returns
local function child(env, code)
  return sh(('cd %q && %s LUA_PATH="lua/?.lua;lua/?/init.lua;${LUA_PATH:-;}" LUNET_LIB=%q luajit -e %q'):format(
    root, env, lib, "local l = require 'lunet'; " .. code))
end

describe('cuda devices', function()
  it('are listed first when there are GPUs, else devices() is the CPU devices and the reason is kept', function()
    local n = lunet.cuda.device_count()
    assert.equal(n, lunet.device_count('cuda'))
    assert.equal(n, #lunet.devices('cuda'))
    if n > 0 then
      assert.is_true(lunet.cuda.is_available())
      assert.is_nil(lunet.cuda.reason())
      assert.equal('cuda:0', lunet.devices()[1])
      return
    end
    assert.is_false(lunet.cuda.is_available())
    assert.same(lunet.devices('cpu'), lunet.devices())
    assert.same({}, lunet.devices('cuda'))
    local why = lunet.cuda.reason()
    assert.is_string(why)
    assert.truthy(why:find('CUDA driver', 1, true) or why:find('did not load', 1, true) or
                  why:find('no CUDA device', 1, true) or why:find('LUNET_CUDA=0', 1, true), why)
  end)

  it('say why they are not available in every error that names one', function()
    if lunet.cuda.is_available() then pending('a GPU is present') return end
    local why = lunet.cuda.reason()
    for _, f in ipairs({
      function() return lunet.zeros(3):to('cuda:0') end,
      function() return lunet.zeros(3, {device = 'cuda:0'}) end,
      function() return lunet.zeros(3):cuda() end,
    }) do
      local ok, err = pcall(f)
      assert.is_false(ok)
      assert.truthy(err:find('cuda:0 is not available (' .. why .. ')', 1, true), err)
    end
    -- the CPU library works on
    assert.equal(6, (lunet.ones(3) * 2):sum():item())
  end)

  it('name the CUDA error without a driver, and the missing library without one', function()
    if lunet.cuda.is_available() then pending('a GPU is present') return end
    if exists(cuda_lib) and not exists('/dev/nvidiactl') then
      local out = child('', "print(l.cuda.reason())")
      assert.truthy(out:find('CUDA driver: ', 1, true) and out:find('(cudaGetDeviceCount: CUDA error ', 1, true), out)
    end
    local out = child('LUNET_CUDA_LIB=/nonexistent/liblunet_cuda.so',
                      "print(pcall(function() return l.zeros(2):to('cuda:0') end))")
    assert.truthy(out:find("to: cuda:0 is not available (the CUDA backend did not load: " ..
                           "/nonexistent/liblunet_cuda.so: cannot open shared object file", 1, true), out)
    out = child('LUNET_CUDA=0', "print(l.device_count('cuda'), l.cuda.reason())")
    assert.equal('0\tCUDA disabled by LUNET_CUDA=0\n', out)
  end)

  it('refuse a library that is not a CUDA backend, and one that declines to start, with its reason', function()
    if lunet.cuda.is_available() then pending('a GPU is present') return end
    local tmp = os.tmpname()
    os.remove(tmp)
    assert.equal(0, select(2, sh('mkdir -p ' .. tmp)))
    -- a library without the entry point, and one whose entry point declines
    local _, rc = sh(('printf "int x;\\n" > %s/a.c && cc -shared -fPIC -o %s/none.so %s/a.c'):format(tmp, tmp, tmp))
    assert.equal(0, rc)
    _, rc = sh(('printf "#include <stdio.h>\\nconst void *ln_cuda_backend_init(const void *c, char *why, size_t n)' ..
                ' { snprintf(why, n, \\"test backend declines\\"); return 0; }\\n" > %s/b.c && ' ..
                'cc -shared -fPIC -o %s/declines.so %s/b.c'):format(tmp, tmp, tmp))
    assert.equal(0, rc)
    local out = child('LUNET_CUDA_LIB=' .. tmp .. '/none.so', "print(l.cuda.reason())")
    assert.truthy(out:find(tmp .. '/none.so has no ln_cuda_backend_init', 1, true), out)
    out = child('LUNET_CUDA_LIB=' .. tmp .. '/declines.so', "print(pcall(l.zeros, 2, {device = 'cuda:0'}))")
    assert.truthy(out:find('zeros: cuda:0 is not available (test backend declines)', 1, true), out)
    sh('rm -rf ' .. tmp)
  end)

  it('lunet.cuda functions name the missing device, or a device that is not a GPU', function()
    if lunet.cuda.is_available() then pending('a GPU is present') return end
    local why = lunet.cuda.reason()
    for _, f in ipairs({'synchronize', 'memory_stats', 'empty_cache'}) do
      local ok, err = pcall(lunet.cuda[f])
      assert.is_false(ok)
      assert.truthy(err:find('cuda.' .. f .. ': no CUDA device (' .. why .. ')', 1, true), err)
      ok, err = pcall(lunet.cuda[f], 'cpu:0')
      assert.is_false(ok)
      assert.truthy(err:find('cuda.' .. f .. ': cpu:0 is not a CUDA device', 1, true), err)
      ok, err = pcall(lunet.cuda[f], 'cuda:0')
      assert.is_false(ok)
      assert.truthy(err:find('cuda:0 is not available', 1, true), err)
    end
  end)
end)

describe('the CUDA backend library', function()
  it('is never linked into liblunet.so', function()
    local out, rc = sh('readelf -d ' .. lib)
    assert.equal(0, rc)
    assert.falsy(out:lower():find('cuda') or out:find('cublas') or out:find('cudnn'), out)
  end)

  it('exports one symbol, resolves everything else itself, and needs no CUDA library to load', function()
    if not exists(cuda_lib) then pending('not built (no nvcc, or make CUDA=0)') return end
    local out = sh('nm -D --defined-only ' .. cuda_lib .. " | awk '$2 != \"V\" && $2 != \"W\" { print $3 }'")
    assert.equal('ln_cuda_backend_init\n', out)
    -- cudart is static, cuBLAS is dlopened on the first product: no CUDA library is NEEDED
    out = sh('readelf -d ' .. cuda_lib .. ' | grep NEEDED')
    assert.falsy(out:find('libcuda') or out:find('cublas') or out:find('cudnn'), out)
  end)
end)
