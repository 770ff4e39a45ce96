-- issue 21 class 5: iterating a DataLoader after close() was a heap use after
-- free in ln_loader_next (a segfault without workers, a hang with them).
local lunet = require 'lunet'
local data = lunet.data
for _, workers in ipairs({ 0, 1, 2 }) do
  local dl = data.DataLoader(data.TensorDataset(lunet.randn(10, 3), lunet.arange(10)), { batch_size = 3, workers = workers })
  local it = dl:iter()
  it()
  dl:close()
  assert(not pcall(it))
  local ok, err = pcall(function() for _ in dl:iter() do end end)
  assert(not ok and tostring(err):find('DataLoader', 1, true), tostring(err))
  dl:close()
end
print('ok')
