-- One atomic writer (c/core/file.c's ln_afile, lunet.util.write_file /
-- atomic_open in Lua) behind every file lunet writes: lunet.save,
-- save_torch, data.write_png / write_jpeg, onnx.export, plot.curves. Each
-- failure is "FN: cannot write 'PATH': WHY" with the OS's reason, leaves no
-- temporary file and keeps an existing file as it was.
local lunet = require 'lunet'
local util = require 'lunet.util'
local fx = require 'support.fixtures'

local function sh(cmd)   -- output (stdout + stderr), exit status
  local p = io.popen('exec 2>&1; ( ' .. cmd .. ' ); echo "__rc=$?"')
  local out = p:read('*a')
  p:close()
  local rc = tonumber(out:match('__rc=(%d+)%s*$'))
  return out:gsub('__rc=%d+%s*$', ''), rc
end

local function tmpdir() return (sh('mktemp -d'):gsub('%s+$', '')) end

local function slurp(p)
  local f = io.open(p, 'rb')
  if not f then return nil end
  local s = f:read('*a')
  f:close()
  return s
end

local function put(p, s) local f = assert(io.open(p, 'wb')); f:write(s); f:close() end

-- each writer: its name in errors and a call writing path (size: small or big)
local WRITERS = [[
local lunet = require 'lunet'
local nn = lunet.nn
return {
  { 'save', function(p, big) lunet.save(p, { w = lunet.ones(big and 100000 or 2) }) end },
  { 'save_torch', function(p, big) lunet.save_torch(p, { w = lunet.ones(big and 100000 or 2) }) end },
  { 'write_png', function(p, big)
      local n = big and 300 or 4
      lunet.data.write_png((lunet.rand(3, n, n) * 255):to('uint8'), p) end },
  { 'write_jpeg', function(p, big)
      local n = big and 300 or 4
      lunet.data.write_jpeg((lunet.rand(3, n, n) * 255):to('uint8'), p, 100) end },
  { 'onnx.export', function(p, big)
      local k = big and 300 or 2
      lunet.onnx.export(nn.Linear(k, k), lunet.randn(1, k), p) end },
  { 'plot.curves', function(p, big)
      local h = {}
      for i = 1, big and 20000 or 2 do h[i] = { train_loss = 1 / i } end
      require('lunet.plot').curves(p, h) end },
  { 'util.write_file', function(p, big) require('lunet.util').write_file('util.write_file', p, ('x'):rep(big and 400000 or 3)) end },
}
]]

local writers = assert(loadstring(WRITERS))()

describe('atomic writes: one writer for every file', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() sh('rm -rf ' .. dir) end)

  it('each writer writes a new file and replaces an old one, mode 0666 less the umask, nothing left beside', function()
    for _, w in ipairs(writers) do
      local p = dir .. '/f'
      w[2](p)
      local first = slurp(p)
      assert.truthy(first and #first > 0, w[1])
      w[2](p)
      assert.truthy(#slurp(p) > 0, w[1])
      assert.are.equal('f\n', (sh('ls -A ' .. dir)), w[1])
      assert.are.equal('644\n', (sh("umask 022; stat -c %a " .. p)), w[1])
      os.remove(p)
    end
  end)

  it('errors name the writer, the path and the OS error; nothing is created', function()
    for _, w in ipairs(writers) do
      for path, why in pairs { ['/etc/passwd/x'] = 'Not a directory',
                               [dir .. '/no/such/x'] = 'No such file or directory' } do
        local err = fx.err_of(w[2], path)
        assert.truthy(err:find(("%s: cannot write '%s': %s"):format(w[1], path, why), 1, true), err)
      end
      local err = fx.err_of(w[2], dir)   -- a directory is never replaced
      assert.truthy(err:find(w[1] .. ': ', 1, true) and err:find('directory', 1, true), err)
    end
    assert.are.equal('', (sh('ls -A ' .. dir)))
  end)

  it('follows a symbolic link and keeps it (as lunet.save)', function()
    for _, w in ipairs(writers) do
      os.execute(('ln -sf real %s/link'):format(dir))
      w[2](dir .. '/link')
      assert.are.equal(0, os.execute('test -L ' .. dir .. '/link'), w[1])
      assert.truthy(#slurp(dir .. '/real') > 0, w[1])
      sh(('rm -f %s/link %s/real'):format(dir, dir))
    end
  end)

  it('util.atomic_open: pieces, abort removes the temporary file and keeps the old file', function()
    local p = dir .. '/a.txt'
    put(p, 'OLD')
    local f = util.atomic_open('mine', p)
    f:write('ab')
    f:write(require('ffi').cast('const char *', 'cdef'), 2)
    local err = fx.err_of(f.abort, f, 'changed my mind')
    assert.truthy(err:find("mine: cannot write '" .. p .. "': changed my mind", 1, true), err)
    assert.are.equal('OLD', slurp(p))
    assert.are.equal('a.txt\n', (sh('ls -A ' .. dir)))
    f = util.atomic_open('mine', p)
    f:write('ab'); f:write('cd')
    assert.are.equal('OLD', slurp(p))   -- nothing visible before commit
    f:commit()
    assert.are.equal('abcd', slurp(p))
    -- a file dropped without commit is removed when collected
    f = util.atomic_open('mine', p)
    f:write('zz')
    f = nil
    collectgarbage(); collectgarbage()
    assert.are.equal('a.txt\n', (sh('ls -A ' .. dir)))
    assert.are.equal('abcd', slurp(p))
    assert.matches("mine: cannot write 'a\\0b': the path contains a NUL byte",
      fx.err_of(util.write_file, 'mine', 'a\0b', 'x'), 1, true)
    assert.matches('mine: path must be a non%-empty string', fx.err_of(util.write_file, 'mine', '', 'x'))
  end)

  -- a write that fails halfway (EFBIG under ulimit -f): the old file stays
  it('a write failing halfway (file size limit) keeps the old file and leaves no temporary file', function()
    put(dir .. '/writers.lua', WRITERS)
    put(dir .. '/child.lua', [[
      local dir = arg[1]
      for _, w in ipairs(dofile(dir .. '/writers.lua')) do
        local p = dir .. '/out'
        w[2](p)
        local f = io.open(p, 'rb'); local old = f:read('*a'); f:close()
        local ok, err = pcall(w[2], p, true)
        f = io.open(p, 'rb'); local now = f:read('*a'); f:close()
        local ls = io.popen('ls -A ' .. dir):read('*a'):gsub('%s+', ' ')
        print(('%s ok=%s same=%s files=%s err=%s'):format(w[1], tostring(ok), tostring(old == now), ls, tostring(err)))
        os.remove(p)
      end
    ]])
    local out, rc = sh(("trap '' XFSZ; ulimit -f 200; luajit %s/child.lua %s"):format(dir, dir))
    assert.are.equal(0, rc, out)
    for _, w in ipairs(writers) do
      local line = out:match('\n?(' .. w[1]:gsub('%p', '%%%0') .. ' ok=[^\n]*)')
      assert.truthy(line, out)
      assert.truthy(line:find('ok=false same=true files=child.lua out writers.lua *err='), line)
      assert.truthy(line:find(("%s: cannot write '%s/out': File too large"):format(w[1], dir), 1, true), line)
    end
  end)

  -- a read-only directory (as root, permissions do not stop a write: a
  -- read-only bind mount in a private namespace does), where allowed
  local probe = sh('unshare -r -m sh -c "mount -t tmpfs -o size=64k none /tmp && echo mounted" 2>/dev/null')
  local it_ro = probe:find('mounted') and it or pending
  it_ro('a read-only directory: EROFS named, the old file untouched', function()
    put(dir .. '/writers.lua', WRITERS)
    sh(('mkdir %s/ro && echo OLD > %s/ro/out'):format(dir, dir))
    put(dir .. '/child.lua', [[
      local dir = arg[1]
      for _, w in ipairs(dofile(dir .. '/writers.lua')) do
        local ok, err = pcall(w[2], dir .. '/ro/out')
        print(('%s ok=%s err=%s'):format(w[1], tostring(ok), tostring(err)))
      end
    ]])
    local out, rc = sh(('unshare -r -m sh -c "mount --bind %s/ro %s/ro && mount -o remount,ro,bind %s/ro %s/ro && luajit %s/child.lua %s"')
      :format(dir, dir, dir, dir, dir, dir))
    assert.are.equal(0, rc, out)
    for _, w in ipairs(writers) do
      assert.truthy(out:find(("%s ok=false err=[^\n]*%s: cannot write '%s/ro/out': Read%%-only file system")
        :format(w[1]:gsub('%p', '%%%0'), w[1]:gsub('%p', '%%%0'), dir:gsub('%p', '%%%0'))), out)
    end
    assert.are.equal('OLD\n', slurp(dir .. '/ro/out'))
    assert.are.equal('out\n', (sh('ls -A ' .. dir .. '/ro')))
  end)

  if sh('id -u'):match('^0') == nil then
    it('a directory without write permission: EACCES named', function()
      sh(('mkdir %s/locked && chmod 555 %s/locked'):format(dir, dir))
      for _, w in ipairs(writers) do
        local err = fx.err_of(w[2], dir .. '/locked/out')
        assert.truthy(err:find(("%s: cannot write '%s/locked/out': Permission denied"):format(w[1], dir), 1, true), err)
      end
      assert.are.equal('', (sh('ls -A ' .. dir .. '/locked')))
      sh('chmod 755 ' .. dir .. '/locked')
    end)
  end
end)
