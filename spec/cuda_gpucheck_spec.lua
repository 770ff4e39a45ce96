-- tools/gpu-check.sh, the one command a session with a GPU runs
-- (tools/gpu-check.sh's header gives the device call): without a GPU it says
-- so and exits 2 at once; with GPU_CHECK_DRY=1 it finds everything it needs
-- in a clean copy of the tree plus the carried folder (make gpu-carry,
-- tools/gpu-carry.sh) under an empty environment, and runs the CUDA specs.
local shell = require 'shell'
local root, sh, readfile = shell.root, shell.sh, shell.readfile

local function exists(p) local f = io.open(p, 'rb'); if f then f:close() end; return f ~= nil end
local have_gpu = exists('/dev/nvidiactl')
local clean_env = 'env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp '

local function tmpdir()
  local t = os.tmpname()
  os.remove(t)
  assert.equal(0, select(2, sh('mkdir -p ' .. t)))
  return t
end

describe('tools/gpu-check.sh', function()
  it('without a GPU says so and exits 2 within seconds, writing summary.json', function()
    if have_gpu then pending('a GPU is present') return end
    local t = tmpdir()
    local start = os.time()
    local out, rc = sh(('cd %q && %s bash tools/gpu-check.sh %s/out'):format(root, clean_env, t))
    assert.equal(2, rc, out)
    assert.truthy(out:find('gpu-check: no NVIDIA GPU here', 1, true), out)
    assert.is_true(os.time() - start <= 10)
    local s = readfile(t .. '/out/summary.json')
    assert.truthy(s:find('"gpu": false', 1, true), s)
    assert.truthy(s:find('"exit_status": 2', 1, true), s)
    sh('rm -rf ' .. t)
  end)

  it('names a missing carried folder (exit 3)', function()
    local t = tmpdir()
    local out, rc = sh(('cd %q && %s GPU_CHECK_DRY=1 GPU_CARRY=%s/none bash tools/gpu-check.sh %s/out'):format(
      root, clean_env, t, t))
    assert.equal(3, rc, out)
    assert.truthy(out:find(t .. "/none/MANIFEST is missing: run 'make gpu-carry'", 1, true), out)
    sh('rm -rf ' .. t)
  end)

  it('runs from a clean copy of the tree plus the carried folder alone (dry run)', function()
    if not exists(root .. 'build/liblunet_cuda.so') then pending('build/liblunet_cuda.so not built (no nvcc)') return end
    -- (the carry is made where lunet is developed: luajit and busted from the system)
    if not exists('/usr/bin/luajit') or not exists('/usr/bin/busted') then pending('no /usr/bin/luajit or busted here') return end
    local t = tmpdir()
    -- what the device tool sends: tracked and untracked-not-ignored files
    local out, rc = sh(('cd %q && mkdir -p %s/tree && git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -C %s/tree -xf -')
      :format(root, t, t))
    assert.equal(0, rc, out)
    out, rc = sh(('cd %q && GPU_CARRY_XZ=-0 bash tools/gpu-carry.sh build %s/tree/build/gpu-carry'):format(root, t))
    assert.equal(0, rc, out)
    assert.truthy(out:find('gpu-carry: ' .. t .. '/tree/build/gpu-carry holds', 1, true), out)
    -- a damaged carry is refused (exit 3) before anything runs
    sh(('cp %s/tree/build/gpu-carry/luajit %s/luajit.bak && echo x >> %s/tree/build/gpu-carry/luajit'):format(t, t, t))
    out, rc = sh(('cd %s/tree && %s GPU_CHECK_DRY=1 bash tools/gpu-check.sh %s/out'):format(t, clean_env, t))
    assert.equal(3, rc, out)
    assert.truthy(out:find('does not match its MANIFEST', 1, true), out)
    sh(('cp %s/luajit.bak %s/tree/build/gpu-carry/luajit'):format(t, t))
    out, rc = sh(('cd %s/tree && %s GPU_CHECK_DRY=1 bash tools/gpu-check.sh %s/out'):format(t, clean_env, t))
    assert.equal(0, rc, out .. '\n' .. (exists(t .. '/out/specs-cuda.log') and readfile(t .. '/out/specs-cuda.log') or ''))
    local log = readfile(t .. '/out/specs-cuda.log')
    assert.truthy(log:find(' 0 failed', 1, true), log)
    local env = readfile(t .. '/out/env.log')
    assert.falsy(env:find('not found', 1, true), env)          -- ldd: every carried library resolves
    assert.truthy(env:find('\ndevices\tcpu:0', 1, true), env)   -- lunet loaded from the carry
    local s = readfile(t .. '/out/summary.json')
    assert.truthy(s:find('"dry_run": true', 1, true) and s:find('"exit_status": 0', 1, true), s)
    sh('rm -rf ' .. t)
  end)
end)
