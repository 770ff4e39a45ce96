-- lunet.data.read_image(path[, {mode = 'RGB'}]) and decode_image(bytes[, opts]):
-- a JPEG or PNG as a uint8 (C, H, W) tensor, decoded in C (libjpeg-turbo,
-- libpng) as torchvision 0.14's io.read_image / io.decode_image. Modes are
-- torchvision's ImageReadMode names: 'UNCHANGED' (default: the file's own
-- channels; a palette PNG gives its indices, as there), 'GRAY', 'GRAY_ALPHA',
-- 'RGB' (also PIL's Image.open(p).convert('RGB'), ImageFolder's loader) and
-- 'RGB_ALPHA'. They live in lunet.data beside read_idx and read_cifar10
-- (lunet has no io namespace; its files are read where their datasets are).
-- Differences from torchvision 0.14, which refuses these: 16-bit PNGs keep
-- the high byte (as PIL for RGB/RGBA/LA); CMYK/YCCK JPEGs and the alpha
-- modes of a JPEG are named errors, as there.
local ffi = require 'ffi'
local core = require 'lunet.core'
local typename = core.typename
local T = require 'lunet.tensor'
local options = require 'lunet.options'
local serialize = require 'lunet.serialize'
local C = core.C

local M = {}
local MODES = { UNCHANGED = 0, GRAY = 1, GRAY_ALPHA = 2, RGB = 3, RGB_ALPHA = 4 }
local MODE_LIST = { 'UNCHANGED', 'GRAY', 'GRAY_ALPHA', 'RGB', 'RGB_ALPHA' }
M.ImageReadMode = {}
for k in pairs(MODES) do M.ImageReadMode[k] = k end

local OPTS = { mode = 'string' }

local function mode_of(fn, opts)
  opts = options.check(fn, opts, OPTS) or {}
  local m = opts.mode or 'UNCHANGED'
  local v = MODES[m:upper()]
  if not v then options.one_of(fn, 'mode', m, MODE_LIST) end
  return v
end

function M.read_image(path, opts)
  if type(path) ~= 'string' then error('read_image: path must be a string, got ' .. typename(path), 2) end
  serialize.no_nul('read_image', 'path', path, 2)
  local mode = mode_of('read_image', opts)
  local p = C.ln_image_read(path, mode)
  if p == nil then core.raise() end
  return T.wrap(p)
end

function M.decode_image(bytes, opts)
  if type(bytes) == 'string' then   -- (a file's contents read in Lua)
    local t = require('lunet').empty({ math.max(#bytes, 0) }, { dtype = 'uint8' })
    if #bytes > 0 then ffi.copy(t:data_ptr(), bytes, #bytes) end
    bytes = t
  end
  if not T.is_tensor(bytes) then
    error('decode_image: expected a 1-D uint8 tensor (or a string) of the file bytes, got ' .. typename(bytes), 2)
  end
  local mode = mode_of('decode_image', opts)
  local p = C.ln_image_decode(bytes:contiguous().p, mode)
  if p == nil then core.raise() end
  return T.wrap(p)
end

-- The entries of folder `path`: a list of {name, is_dir} (symlinks followed),
-- in no particular order.
function M.list_dir(path)
  local cap, buf = 4096, nil
  while true do
    buf = ffi.new('char[?]', cap)
    local need = C.ln_dir_list(path, buf, cap)
    if need < 0 then core.raise() end
    if need <= cap then cap = tonumber(need); break end
    cap = tonumber(need) + 4096   -- (the folder grew meanwhile: try again)
  end
  local out, at = {}, 0
  while at < cap do
    local name = ffi.string(buf + at + 1)
    out[#out + 1] = { name, buf[at] == 100 }   -- ('d')
    at = at + #name + 2
  end
  return out
end

return M
