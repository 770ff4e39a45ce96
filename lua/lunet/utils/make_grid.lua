-- lunet.utils.make_grid(tensor_or_list[, opts]) and save_image(tensor, path[,
-- opts]), as torchvision 0.14's utils: images (B, C, H, W) (or a list of
-- (C, H, W), or one (C, H, W) / (H, W)) laid out nrow to a row with `padding`
-- pixels of pad_value between and around them; one-channel images become
-- three (as there). normalize = true shifts to [0, 1] by value_range = {lo,
-- hi} (default: the min and max, of each image with scale_each = true).
-- save_image writes the grid as torchvision's (PIL's) uint8 conversion,
-- mul(255):add(0.5):clamp(0, 255), to a PNG or JPEG (format, else path's
-- extension; PIL's JPEG quality 75).
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local options = require 'lunet.options'
local fail = options.fail

local M = {}

local OPTS = { nrow = 'number', padding = 'number', normalize = 'boolean', value_range = 'table',
  scale_each = 'boolean', pad_value = 'number' }
local ALIASES = { range = 'value_range' }   -- (torchvision's deprecated name)

local function int_at_least(fn, what, v, min)
  if type(v) ~= 'number' or v % 1 ~= 0 or v < min or v >= 2 ^ 31 then
    fail(fn, ('%s must be an integer >= %d, got %s'):format(what, min, tostring(v)))
  end
  return v
end

-- clamp to [lo, hi], then (x - lo) / max(hi - lo, 1e-5), in place
local function norm_ip(img, lo, hi)
  img:clamp_(lo, hi):sub_(lo):div_(math.max(hi - lo, 1e-5))
end

local function grid_of(fn, tensor, opts)
  opts = options.check(fn, opts, OPTS, ALIASES) or {}
  local nrow = int_at_least(fn, 'nrow', opts.nrow or 8, 1)
  local padding = int_at_least(fn, 'padding', opts.padding or 2, 0)
  local pad_value = opts.pad_value or 0
  local vr = opts.value_range
  if vr ~= nil and not (#vr == 2 and type(vr[1]) == 'number' and type(vr[2]) == 'number') then
    fail(fn, 'value_range must be {min, max} (two numbers)')
  end
  if is_table(tensor) then
    if #tensor == 0 then fail(fn, 'expected a tensor or a non-empty list of tensors, got an empty list') end
    for i, t in ipairs(tensor) do
      if not T.is_tensor(t) then fail(fn, ('list item %d must be a tensor, got %s'):format(i, typename(t))) end
    end
    local ok, s = pcall(require('lunet').stack, tensor, 1)
    if not ok then fail(fn, 'the images of the list must all have the same shape (' .. tostring(s) .. ')') end
    tensor = s
  elseif not T.is_tensor(tensor) then
    fail(fn, 'expected a tensor or a list of tensors, got ' .. typename(tensor))
  end
  local d = tensor:dim()
  if d < 2 or d > 4 then fail(fn, ('tensor must be (H, W), (C, H, W) or (B, C, H, W), got %d-d'):format(d)) end
  if d == 2 then tensor = tensor:unsqueeze(1) end
  if tensor:dim() == 3 then tensor = tensor:unsqueeze(1) end
  if tensor:size(1) == 0 then fail(fn, 'no images to lay out (an empty batch)') end
  if tensor:size(2) == 1 then tensor = tensor:expand(tensor:size(1), 3, tensor:size(3), tensor:size(4)) end
  if opts.normalize then
    if not tensor:is_floating_point() then fail(fn, 'normalize = true needs floating-point images, got ' .. tensor.dtype) end
    tensor = tensor:clone()   -- (the caller's images stay as they are)
    local function norm_range(t)
      if vr then norm_ip(t, vr[1], vr[2]) else norm_ip(t, t:min():item(), t:max():item()) end
    end
    if opts.scale_each then
      for i = 1, tensor:size(1) do norm_range(tensor:select(1, i)) end
    else
      norm_range(tensor)
    end
  end
  if tensor:size(1) == 1 then return tensor:select(1, 1):contiguous() end
  local n, c, h, w = tensor:size(1), tensor:size(2), tensor:size(3) + padding, tensor:size(4) + padding
  local xmaps = math.min(nrow, n)
  local ymaps = math.ceil(n / xmaps)
  local grid = tensor:new_full({ c, h * ymaps + padding, w * xmaps + padding }, pad_value)
  -- one copy per image (a loop over images, not pixels)
  for k = 0, n - 1 do
    local y, x = math.floor(k / xmaps), k % xmaps
    grid:narrow(2, y * h + padding + 1, h - padding):narrow(3, x * w + padding + 1, w - padding)
      :copy_(tensor:select(1, k + 1))
  end
  return grid
end

function M.make_grid(tensor, opts) return grid_of('make_grid', tensor, opts) end

local SAVE_OPTS = { format = 'string' }
for k, v in pairs(OPTS) do SAVE_OPTS[k] = v end
local FORMATS = { png = 'png', jpg = 'jpeg', jpeg = 'jpeg' }

function M.save_image(tensor, path, opts)
  local fn = 'save_image'
  opts = options.check(fn, opts, SAVE_OPTS, ALIASES) or {}
  if type(path) ~= 'string' or path == '' then fail(fn, 'path must be a non-empty string, got ' .. typename(path)) end
  local format = opts.format or path:match('%.([^./]+)$')
  local kind = format and FORMATS[format:lower()]
  if not kind then
    fail(fn, format and ("format must be 'png' or 'jpeg', got '%s'"):format(format)
      or ("cannot tell the format from '%s' (no extension): pass format = 'png' or 'jpeg'"):format(path))
  end
  local gopts = {}
  for k, v in pairs(opts) do if k ~= 'format' then gopts[k] = v end end
  local grid = grid_of(fn, tensor, gopts)
  if tostring(grid.device):match('^cuda') then grid = grid:to('cpu:0') end
  if not grid:is_floating_point() then fail(fn, 'expected floating-point images in [0, 1], got ' .. grid.dtype) end
  local img = grid:mul(255):add_(0.5):clamp_(0, 255):to('uint8')   -- (in the images' dtype, as there)
  local data = require 'lunet.data'
  if kind == 'png' then data.write_png(img, path) else data.write_jpeg(img, path, { quality = 75 }) end
  return path
end

return M
