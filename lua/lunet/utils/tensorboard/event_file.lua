-- lunet.utils.tensorboard.event_file: one event file, as tensorboard's
-- EventFileWriter: <log_dir>/events.out.tfevents.<time>.<host>.<pid>.<n><suffix>,
-- created (with the directories above it) holding the file_version event,
-- then appended with one TFRecord per Event. Events wait in memory until
-- max_queue of them are pending, flush_secs have passed since the last write,
-- or flush()/close() (torch's background thread writes on the same terms).
-- No file handle is held between writes, so a writer dropped without close()
-- loses nothing: its __gc writes what is pending.
local ffi = require 'ffi'
local proto = require 'lunet.utils.tensorboard.proto'
require 'lunet.util'   -- (declares struct ln_timespec and clock_gettime)
pcall(ffi.cdef, 'int gethostname(char *name, size_t len);')
pcall(ffi.cdef, 'int getpid(void);')
pcall(ffi.cdef, 'int mkdir(const char *path, unsigned int mode);')
pcall(ffi.cdef, 'char *strerror(int errnum);')

local raise = require('lunet.options').raise   -- (errors at the user's line)
local M = {}

local ts = ffi.new('struct ln_timespec')
-- seconds since the epoch (CLOCK_REALTIME), as Python's time.time(); the spec
-- replaces M.time to write the same wall times as its torch fixtures
function M.time()
  ffi.C.clock_gettime(0, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

function M.hostname()
  local buf = ffi.new('char[256]')
  if ffi.C.gethostname(buf, 256) ~= 0 then return 'localhost' end
  return ffi.string(buf)
end

-- mkdir -p
function M.makedirs(fn, dir)
  local path = ''
  for part in dir:gmatch('[^/]+') do
    path = (path == '' and dir:sub(1, 1) ~= '/') and part or path .. '/' .. part
    if ffi.C.mkdir(path, 511) ~= 0 and ffi.errno() ~= 17 then   -- (17: EEXIST)
      raise(('%s: cannot create the directory %s: %s'):format(fn, path, ffi.string(ffi.C.strerror(ffi.errno()))))
    end
  end
end

-- the n in the file name: one count per process, as tensorboard's _global_uid
local uid = 0

local Writer = {}
Writer.__index = Writer

local function write(self, mode)
  local f, err = io.open(self.path, mode)
  if not f then raise(('SummaryWriter: cannot write %s: %s'):format(self.path, err)) end
  f:write(table.concat(self.queue))
  f:close()
  self.queue, self.last_write = {}, M.time()
end

function M.new(log_dir, max_queue, flush_secs, suffix)
  M.makedirs('SummaryWriter', log_dir)
  local now = M.time()
  local self = setmetatable({ log_dir = log_dir, max_queue = max_queue, flush_secs = flush_secs, queue = {} }, Writer)
  self.path = ('%s/events.out.tfevents.%010d.%s.%d.%d%s'):format(log_dir, math.floor(now), M.hostname(),
    ffi.C.getpid(), uid, suffix)
  uid = uid + 1
  self.queue[1] = proto.record(proto.double(1, now) .. proto.str(3, 'brain.Event:2'))
  write(self, 'wb')
  -- a sentinel whose finalizer writes what is pending (tables have no __gc in LuaJIT)
  local sentinel = newproxy(true)
  getmetatable(sentinel).__gc = function() if not self.closed and #self.queue > 0 then pcall(write, self, 'ab') end end
  self.sentinel = sentinel
  return self
end

-- add(event_bytes): queue one serialized Event
function Writer:add(event)
  self.queue[#self.queue + 1] = proto.record(event)
  if #self.queue >= self.max_queue or M.time() - self.last_write >= self.flush_secs then self:flush() end
end

function Writer:flush()
  if #self.queue > 0 then write(self, 'ab') end
end

function Writer:close()
  self:flush()
  self.closed = true
end

-- event(wall_time, step, fields): an Event's bytes; step nil leaves it out (as torch)
function M.event(wall_time, step, fields)
  return proto.double(1, wall_time) .. (step and proto.varint(2, step) or '') .. fields
end

return M
