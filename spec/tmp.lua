-- Temporary files and folders for specs, removed by tmp.clean() (call it in
-- the spec file's teardown), so that a run of the suite leaves nothing in /tmp.
--   tmp.file([suffix]) -> a path no other process has: os.tmpname's (an empty
--     file it made), or that name with suffix appended (the plain name stays
--     reserved until clean)
--   tmp.dir() -> a new empty folder
--   tmp.clean() removes every path handed out (folders with their contents)
local tmp = {}
local made = {}

local function reserve()
  local base = os.tmpname()
  made[#made + 1] = base
  return base
end

function tmp.file(suffix)
  local base = reserve()
  if not suffix then return base end
  made[#made + 1] = base .. suffix
  return base .. suffix
end

function tmp.dir()
  local d = reserve() .. '.d'
  made[#made + 1] = d
  assert(os.execute("mkdir '" .. d .. "'") == 0, 'tmp.dir: cannot make ' .. d)
  return d
end

function tmp.clean()
  for i = #made, 1, -1 do
    os.execute("rm -rf '" .. made[i] .. "'")
    made[i] = nil
  end
end

return tmp
