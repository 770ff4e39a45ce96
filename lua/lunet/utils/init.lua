-- lunet.utils, as torch.utils: activation checkpointing.
--   local y = lunet.utils.checkpoint(block, x)                  -- (lunet/utils/checkpoint.lua)
--   local y = lunet.utils.checkpoint_sequential(seq, 4, x)
--   lunet.utils.save_image(lunet.utils.make_grid(x, {nrow = 8}), 'x.png')  -- (lunet/utils/make_grid.lua)
--   local w = lunet.utils.tensorboard.SummaryWriter{log_dir = 'runs/x'}  -- (lunet/utils/tensorboard/)
local core = require 'lunet.core'
local options = require 'lunet.options'
local fail = options.fail
local is_table, typename = core.is_table, core.typename

local utils = {}

utils.checkpoint = require 'lunet.utils.checkpoint'
local checkpoint = utils.checkpoint
local grid = require 'lunet.utils.make_grid'
utils.make_grid, utils.save_image = grid.make_grid, grid.save_image

-- the functions of checkpoint_sequential: an nn.Sequential's modules, or a list
local function functions_of(fn, fs)
  if is_table(fs) and rawget(fs, '_params') then
    local list = {}
    for i, name in ipairs(fs._children) do list[i] = fs[name] end
    return list
  end
  if not is_table(fs) or getmetatable(fs) ~= nil then
    fail(fn, 'functions must be an nn.Sequential or a list of functions or modules, got ' .. typename(fs))
  end
  for i = 1, table.maxn(fs) do
    local f = fs[i]
    local mt = getmetatable(f)
    if type(f) ~= 'function' and not (is_table(f) and mt and mt.__call) then
      fail(fn, ('functions[%d] is a %s, not a function or a module'):format(i, typename(f)))
    end
  end
  return fs
end

-- the composition of fs[a..b]
local function run(fs, a, b)
  return function(x)
    for j = a, b do x = fs[j](x) end
    return x
  end
end

-- checkpoint_sequential(functions, segments, input): functions (an
-- nn.Sequential or a list) cut into `segments` runs of #functions //
-- segments, each but the last checkpointed (the last one's activations are
-- needed at once by the backward), as torch's
function utils.checkpoint_sequential(functions, segments, input)
  local fn = 'checkpoint_sequential'
  local fs = functions_of(fn, functions)
  local n = #fs
  if type(segments) ~= 'number' or segments % 1 ~= 0 or segments < 1 or segments > math.max(n, 1) then
    fail(fn, ('segments must be an integer in 1..%d (the number of functions), got %s'):format(math.max(n, 1),
      type(segments) == 'number' and tostring(segments) or typename(segments)))
  end
  local size = math.floor(n / segments)
  local last = 0
  for start = 1, size * (segments - 1), size do
    last = start + size - 1
    input = checkpoint(run(fs, start, last), input)
  end
  return run(fs, last + 1, n)(input)
end

-- lunet.utils.tensorboard, loaded on first use
setmetatable(utils, { __index = function(t, k)
  if k == 'tensorboard' then rawset(t, k, require 'lunet.utils.tensorboard'); return t[k] end
end })

return utils
