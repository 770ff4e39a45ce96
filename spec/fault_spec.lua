-- Faults a training run must survive (child processes running
-- spec/support/fault_child.lua): SIGKILL at random points then resume, a full
-- disk during a checkpoint write, SIGINT during fit.
local lunet = require 'lunet'
local checkpoint = require 'lunet.checkpoint'

local ffi = require 'ffi'
pcall(ffi.cdef, 'int kill(int pid, int sig); int getpid(void);')

local CHILD = 'spec/support/fault_child.lua'
local STEPS = 36   -- fault_child: 96 samples / batch 8 = 12 steps a epoch, 3 epochs

local function sh(cmd)   -- output (stdout + stderr), exit status
  local p = io.popen('exec 2>&1; ( ' .. cmd .. ' ); echo "__rc=$?"')
  local out = p:read('*a')
  p:close()
  local rc = tonumber(out:match('__rc=(%d+)%s*$'))
  return out:gsub('__rc=%d+%s*$', ''), rc
end

local function tmpdir()
  local out = sh('mktemp -d')
  return (out:gsub('%s+$', ''))
end

local function child(dir, name, every, extra)
  return ('luajit %s %s/%s.ckpt %s/%s.out %d 3 %s'):format(CHILD, dir, name, dir, name, every, extra or '')
end

local function same_params(a_path, b_path)
  local a, b = lunet.load(a_path), lunet.load(b_path)
  local n = 0
  for k, v in pairs(a) do
    assert.is_truthy(b[k], k)
    local diff = (v - b[k]):abs():max():item()
    assert.is_true(diff == 0, ('%s differs by %g'):format(k, diff))
    n = n + 1
  end
  for k in pairs(b) do assert.is_truthy(a[k], k) end
  assert.is_true(n >= 4)
end

describe('fault: SIGKILL at random points', function()
  it('resumes from the last checkpoint and ends bitwise equal to an uninterrupted run', function()
    local seed = os.time() % 100000
    math.randomseed(seed)
    local every = math.random(1, 3)
    local dir = tmpdir()
    local t0 = lunet.clock()
    local out, rc = sh(child(dir, 'ref', every, 0.02))
    local t_ref = lunet.clock() - t0
    assert.equal(0, rc, out)
    assert.truthy(out:find('done'), out)
    local kills, resumed, attempts, delays = 0, {}, 0, {}
    local msg = ('seed %d, every %d, reference run %.2fs'):format(seed, every, t_ref)
    while attempts < 12 do
      attempts = attempts + 1
      local cmd = child(dir, 'run', every, 0.02)   -- (20 ms a step)
      if kills == 0 then
        -- the first kill -9 lands in the first half, start-up included
        -- (at least 10 ms: timeout's duration 0, printed 0.000, sets no timeout at all)
        local delay = math.max(0.01, 0.5 * t_ref * math.random())
        cmd = ('timeout -s KILL %.3f %s'):format(delay, cmd)
        delays[#delays + 1] = ('%.3f'):format(delay)
      elseif kills < 5 or (kills < 8 and not io.open(dir .. '/run.ckpt', 'rb')) then
        -- then kill -9 a random 20-120 ms into training (the child makes the file
        -- at its first step): in a step or a checkpoint write, 1-6 steps on.
        -- If those kills all came before the first checkpoint (every 3 steps
        -- of 20 ms and delays under 60 ms), up to three more wait for the
        -- checkpoint file before their random delay, so that a run resumes
        local wait_for, mark = 'started', '+'
        if kills >= 5 then wait_for, mark = 'run.ckpt', 'ckpt+' end
        local delay = 0.02 + 0.1 * math.random()
        delays[#delays + 1] = ('%s%.3f'):format(mark, delay)
        cmd = ('rm -f %s/started; FAULT_STARTED=%s/started %s & pid=$!; i=0; ' ..
          'while [ ! -f %s/%s ] && [ $i -lt 1000 ] && kill -0 $pid 2>/dev/null; do sleep 0.01; i=$((i+1)); done; ' ..
          'sleep %.3f; kill -9 $pid 2>/dev/null; wait $pid'):format(dir, dir, cmd, dir, wait_for, delay)
      end
      out, rc = sh(cmd)
      local at = tonumber(out:match('resumed at step (%d+)'))
      if at then resumed[#resumed + 1] = at end
      if rc == 0 then break end
      assert.equal(137, rc, msg .. ': ' .. out)   -- 128 + SIGKILL, nothing else
      kills = kills + 1
      -- whatever the kill interrupted, the checkpoint on disk is whole
      if io.open(dir .. '/run.ckpt', 'rb') then
        local st = checkpoint.load(dir .. '/run.ckpt')
        assert.is_true(st.step >= 1 and st.step <= STEPS and st.step % every == 0, msg)
      end
    end
    assert.equal(0, rc, msg .. ': ' .. out)
    msg = msg .. ', delays ' .. table.concat(delays, ' ') .. ', resumed at ' .. table.concat(resumed, ' ')
    assert.is_true(kills >= 3, msg .. (': only %d kills landed'):format(kills))
    assert.is_true(#resumed >= 1, msg .. ': never resumed')
    same_params(dir .. '/ref.out', dir .. '/run.out')
    if os.getenv('FAULT_VERBOSE') then
      local ls = sh('ls -A ' .. dir)
      io.stderr:write(('\nSIGKILL: %s; %d kills, %d runs; files left: %s\n'):format(msg, kills, attempts, (ls:gsub('%s+', ' '))))
    end
    sh('rm -rf ' .. dir)
  end)
end)

-- rewrites a 16 MB checkpoint in a loop (step i: every element = i)
local WRITER_CHILD = [[
local lunet = require 'lunet'
local checkpoint = require 'lunet.checkpoint'
local path = arg[1]
local w = lunet.empty(4 * 2 ^ 20)
for i = 1, 100000 do
  w:fill_(i)
  checkpoint.save(path, { w = w, step = i })
  io.stdout:write(i, '\n'); io.stdout:flush()
end
]]

describe('fault: SIGKILL during large checkpoint writes', function()
  it('always leaves a whole checkpoint (crc verified) of a step that completed', function()
    local dir = tmpdir()
    local f = io.open(dir .. '/writer.lua', 'w'); f:write(WRITER_CHILD); f:close()
    math.randomseed(os.time() % 100000 + 1)
    -- at least four rounds, and on until two of them landed their own file:
    -- a loaded machine may start a child too slowly for its first save to
    -- land before the kill, so a round that did not land lengthens the next
    -- one's delay (up to 40 rounds)
    local landed, checks, prev, round, slow = 0, {}, nil, 0, 1
    while round < 4 or (landed < 2 and round < 40) do
      round = round + 1
      local landed0 = landed
      local delay = (0.15 + 0.5 * math.random()) * slow
      local out, rc = sh(('timeout -s KILL %.3f luajit %s/writer.lua %s/big.ckpt'):format(delay, dir, dir))
      assert.equal(137, rc, out)
      local last = 0
      for n in out:gmatch('(%d+)\n') do last = tonumber(n) end
      if io.open(dir .. '/big.ckpt', 'rb') then
        local st = checkpoint.load(dir .. '/big.ckpt')   -- raises on a torn or corrupt file
        -- the step whose save returned last, or the one being written when killed (renamed, not yet printed);
        -- a round killed before its first rename (a slow start on a loaded machine) leaves the previous round's
        assert.is_true(st.step == last or st.step == last + 1 or (last == 0 and st.step == prev),
          ('step %d, last printed %d, previous round left %s'):format(st.step, last, tostring(prev)))
        local old = prev
        prev = st.step
        assert.equal(st.step, st.w:min():item())
        assert.equal(st.step, st.w:max():item())
        checks[#checks + 1] = ('%.2fs: step %d'):format(delay, st.step)
        -- this round's file (not the previous round's step 1 left by a child killed before its first save)
        if (st.step == last or st.step == last + 1) and not (last == 0 and st.step == old) then landed = landed + 1 end
      end
      if landed == landed0 then slow = math.min(slow * 1.5, 20) end
    end
    assert.is_true(landed >= 2, table.concat(checks, ', '))
    -- a killed writer's temporary file (PATH.tmp.HOST.PID.XXXXXX, as large as
    -- the checkpoint) is removed by the next successful save
    local fake = dir .. '/big.ckpt.tmp.' .. (sh('hostname'):gsub('%s+$', ''):gsub('[/.]', '_')) .. '.999999999.abcdef'
    io.open(fake, 'w'):close()
    local left = sh(('timeout -s KILL 0.3 luajit %s/writer.lua %s/big.ckpt'):format(dir, dir))
    local ok2 = checkpoint.save(dir .. '/big.ckpt', { w = lunet.ones(2), step = 0 })
    assert.is_nil(io.open(fake, 'r'))
    local ls = sh('ls -A ' .. dir)
    assert.equal('big.ckpt\nwriter.lua\n', ls)
    if os.getenv('FAULT_VERBOSE') then
      io.stderr:write(('\nwrites killed at %s; files left: %s\n'):format(table.concat(checks, ', '), (sh('ls -A ' .. dir):gsub('%s+', ' '))))
    end
    sh('rm -rf ' .. dir)
  end)
end)

-- writes A, then B (too big for the space left) over it; prints what it saw
local DISK_CHILD = [[
local lunet = require 'lunet'
local checkpoint = require 'lunet.checkpoint'
local dir = arg[1]
local path = dir .. '/ck'
os.execute('mkdir -p ' .. dir)
local a = lunet.arange(1, 101):float()
checkpoint.save(path, {w = a, step = 1})
local ok, err = pcall(checkpoint.save, path, {w = lunet.ones(400000), step = 2})
print('save ok=' .. tostring(ok) .. ' err=' .. tostring(err))
local st = checkpoint.load(path)
print('step=' .. st.step .. ' sum=' .. st.w:sum():item())
local p = io.popen('ls -A ' .. dir); print('files=' .. p:read('*a'):gsub('%s+', ' ')); p:close()
-- the process is still usable: a small save into that directory works
checkpoint.save(path, {w = a * 2, step = 3})
print('after step=' .. checkpoint.load(path).step)
]]

local function check_disk_output(out)
  assert.truthy(out:find('save ok=false', 1, true), out)
  -- the previous checkpoint is intact
  assert.truthy(out:find('step=1 sum=5050', 1, true), out)
  -- no temporary file left behind
  assert.truthy(out:find('files= ?ck ?\n'), out)
  assert.truthy(out:find('after step=3', 1, true), out)
end

describe('fault: a full disk during a checkpoint write', function()
  it('(file size limit, ulimit -f) keeps the previous checkpoint and raises a clear error', function()
    local dir = tmpdir()
    local f = io.open(dir .. '/child.lua', 'w'); f:write(DISK_CHILD); f:close()
    -- 200 KB: room for the small checkpoints, not the 1.6 MB one; SIGXFSZ
    -- ignored so that write() fails with EFBIG instead of killing the process
    local out, rc = sh(("trap '' XFSZ; ulimit -f 400; luajit %s/child.lua %s/d"):format(dir, dir))
    assert.equal(0, rc, out)
    check_disk_output(out)
    assert.truthy(out:find("err=[^\n]*checkpoint.save: save: cannot write '" .. dir:gsub('%p', '%%%0') .. "/d/ck': File too large"), out)
    sh('rm -rf ' .. dir)
  end)

  -- a real ENOSPC: a 256 KB tmpfs in a private mount namespace, where allowed
  local probe = sh('unshare -r -m sh -c "mount -t tmpfs -o size=64k none /tmp && echo mounted" 2>/dev/null')
  if probe:find('mounted') then
    it('(a full 256 KB tmpfs) keeps the previous checkpoint and raises ENOSPC', function()
      local dir = tmpdir()
      local f = io.open(dir .. '/child.lua', 'w'); f:write(DISK_CHILD); f:close()
      local out, rc = sh(('unshare -r -m sh -c "mkdir -p %s/mnt && mount -t tmpfs -o size=256k none %s/mnt && luajit %s/child.lua %s/mnt"')
        :format(dir, dir, dir, dir))
      assert.equal(0, rc, out)
      check_disk_output(out)
      assert.truthy(out:find("checkpoint.save: save: cannot write '[^\n]*/mnt/ck': No space left on device"), out)
      sh('rm -rf ' .. dir)
    end)
  end
end)

describe('fault: SIGINT during fit', function()
  it('writes a final checkpoint at a step boundary, exits with a clear message, and resumes exactly', function()
    local dir = tmpdir()
    local out, rc = sh(child(dir, 'ref', 5, 0))
    assert.equal(0, rc, out)
    -- (a background child: started from a script, so SIGINT comes from kill)
    out, rc = sh(('FAULT_STARTED=%s/started %s & pid=$!; i=0; while [ ! -f %s/started ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; sleep 0.15; kill -INT $pid; wait $pid')
      :format(dir, child(dir, 'run', 5, 0.02), dir))
    assert.equal(1, rc, out)
    local epoch, step = out:match('fit: interrupted %(SIGINT%) at epoch (%d+), step (%d+); checkpoint saved to ')
    assert.truthy(step, out)
    step = tonumber(step)
    assert.is_true(step >= 1 and step < STEPS, out)
    assert.falsy(out:find('traceback', 1, true) and out:find('interrupted!', 1, true), out)
    -- the final checkpoint is that step's (not the last periodic one, every 5 steps)
    local st = checkpoint.load(dir .. '/run.ckpt')
    assert.equal(step, st.step)
    out, rc = sh(child(dir, 'run', 5, 0))
    assert.equal(0, rc, out)
    assert.truthy(out:find('resumed at step ' .. step, 1, true), out)
    same_params(dir .. '/ref.out', dir .. '/run.out')
    sh('rm -rf ' .. dir)
  end)

  it('with on_interrupt = "return", fit returns the history so far (flag set in-process)', function()
    local nn = lunet.nn
    local C = require('lunet.core').C
    lunet.manual_seed(1)
    local x = lunet.randn(32, 4)
    local y = x:narrow(2, 1, 1):squeeze(2):gt(0):long() + 1
    local loader = lunet.data.DataLoader(lunet.data.TensorDataset(x, y), { batch_size = 4 })
    local model = nn.Linear(4, 2)
    local path = os.tmpname()
    local trainer = lunet.Trainer(model, { epochs = 2, checkpoint = path, quiet = true, progress = false,
      on_interrupt = 'return' })
    local f = model.forward
    local calls = 0
    model.forward = function(self, ...)
      calls = calls + 1
      if calls == 3 then ffi.C.kill(ffi.C.getpid(), 2) end   -- SIGINT to this process
      return f(self, ...)
    end
    local hist = trainer:fit(loader)
    os.remove(path)
    assert.is_true(trainer.interrupted)
    assert.equal(0, #hist)
    assert.equal(3, trainer.step)
    -- the handler is gone after fit: the flag is not set any more
    assert.equal(0, C.ln_sigint_pending(0))
  end)
end)
