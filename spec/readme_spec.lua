-- The README's tour must run as written.
describe('README tour', function()
  it('runs and prints what its comments say', function()
    local f = assert(io.open('README.md'))
    local text = f:read('*a')
    f:close()
    local code = text:match("## A short tour.-```lua\n(.-)```")
    assert.is_string(code)
    local printed = {}
    local env = setmetatable({ print = function(...)
      local parts = {}
      for i = 1, select('#', ...) do parts[i] = tostring((select(i, ...))) end
      printed[#printed + 1] = table.concat(parts, '\t')
    end }, { __index = _G })
    local chunk = assert(loadstring(code, 'README tour'))
    setfenv(chunk, env)
    chunk()
    local all = table.concat(printed, '\n')
    assert.matches('54', all, 1, true)
    assert.matches('float64\tcpu:0\t3', all, 1, true)
    assert.matches('add: shapes {2,2} and {3} cannot broadcast', all, 1, true)
  end)
end)
