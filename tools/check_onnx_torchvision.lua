-- The Lua side of tools/check_onnx_torchvision.py: for each name, loads
-- DIR/<name>.onnx with lunet.onnx.load, runs it on DIR/<name>.safetensors'
-- x and compares with torch's out. Prints one line per model; exits 1 when
-- one fails to load or differs by 1e-4 relative or more.
-- Usage: luajit tools/check_onnx_torchvision.lua DIR name...
local lunet = require 'lunet'

local dir, bad = arg[1], 0
for i = 2, #arg do
  local name = arg[i]
  local t0 = os.clock()
  local ok, m = pcall(lunet.onnx.load, dir .. '/' .. name .. '.onnx')
  if not ok then
    print(('%-20s FAIL  %s'):format(name, tostring(m)))
    bad = bad + 1
  else
    local T = lunet.load(dir .. '/' .. name .. '.safetensors')
    local ok2, y = pcall(lunet.no_grad, function() return m(T.x) end)
    if not ok2 then
      print(('%-20s FAIL  %s'):format(name, tostring(y)))
      bad = bad + 1
    else
      local rel = (y - T.out):abs():max():item() / T.out:abs():max():item()
      local pass = rel < 1e-4 and y:dim() == T.out:dim()
      if not pass then bad = bad + 1 end
      print(('%-20s %s  rel %.2e  (%d nodes, %.1f s)'):format(name, pass and 'ok  ' or 'FAIL', rel,
        #rawget(m, '_graph').steps, os.clock() - t0))
    end
  end
end
print(('%d of %d models match torch'):format(#arg - 1 - bad, #arg - 1))
os.exit(bad == 0 and 0 or 1)
