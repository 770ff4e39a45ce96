-- lunet.data.encode_png(img[, {compression_level = 6}]), encode_jpeg(img[,
-- {quality = 75}]) -> a 1-D uint8 tensor of the file's bytes, and
-- write_png(img, path[, opts]) / write_jpeg(img, path[, opts]), as
-- torchvision 0.14's io functions of those names (encoded in C by libpng and
-- libjpeg-turbo with the same calls, so the bytes are torchvision's). img:
-- uint8 (C, H, W), C = 1 or 3 (PNG also 2: gray+alpha, 4: RGBA, which
-- torchvision 0.14 refuses). The level/quality may also come by position, as
-- there. Files are written atomically (lunet.util.write_file: a temporary
-- file beside path, fsync, renamed over it, as lunet.save). Images on a GPU are copied to the host first.
local core = require 'lunet.core'
local typename = core.typename
local T = require 'lunet.tensor'
local options = require 'lunet.options'
local serialize = require 'lunet.serialize'
local util = require 'lunet.util'
local C = core.C

local M = {}

local function image_of(fn, img)
  if not T.is_tensor(img) then options.fail(fn, 'image must be a uint8 (C, H, W) tensor, got ' .. typename(img)) end
  if img.dtype ~= 'uint8' then options.fail(fn, 'image must be a uint8 tensor, got ' .. img.dtype) end
  if img:dim() ~= 3 then options.fail(fn, ('image must be a 3-d (C, H, W) tensor, got %d-d'):format(img:dim())) end
  if tostring(img.device):match('^cuda') then img = img:to('cpu:0') end
  return img:contiguous()
end

local function int_in(fn, what, v, lo, hi)
  if type(v) ~= 'number' or v % 1 ~= 0 or v < lo or v > hi then
    options.fail(fn, ('%s must be an integer in %d..%d, got %s'):format(what, lo, hi,
      type(v) == 'number' and tostring(v) or typename(v)))
  end
  return v
end

local PNG_OPTS, PNG_POS = { compression_level = 'number' }, { 'compression_level' }
local JPEG_OPTS, JPEG_POS = { quality = 'number' }, { 'quality' }

local function png_bytes(fn, img, ...)
  local opts = options.check(fn, options.positional(fn, PNG_POS, ...), PNG_OPTS) or {}
  local level = int_in(fn, 'compression_level', opts.compression_level or 6, 0, 9)
  img = image_of(fn, img)
  local p = C.ln_image_encode_png(img.p, level)
  if p == nil then core.raise() end
  return T.wrap(p)
end

local function jpeg_bytes(fn, img, ...)
  local opts = options.check(fn, options.positional(fn, JPEG_POS, ...), JPEG_OPTS) or {}
  local quality = int_in(fn, 'quality', opts.quality or 75, 1, 100)
  img = image_of(fn, img)
  if img:size(1) ~= 1 and img:size(1) ~= 3 then
    options.fail(fn, ('image must have 1 or 3 channels, got %d'):format(img:size(1)))
  end
  local p = C.ln_image_encode_jpeg(img.p, quality)
  if p == nil then core.raise() end
  return T.wrap(p)
end

local function check_path(fn, path)
  if type(path) ~= 'string' or path == '' then options.fail(fn, 'path must be a non-empty string, got ' .. typename(path)) end
  serialize.no_nul(fn, 'path', path, 3)
  if serialize.exists(path .. '/.') then options.fail(fn, ("'%s' is a directory"):format(path)) end
end

-- bytes (a 1-D uint8 tensor) into path, atomically
local function write_file(fn, path, bytes)
  util.write_file(fn, path, bytes:data_ptr(), bytes:numel())
end

function M.encode_png(img, ...) return png_bytes('encode_png', img, ...) end
function M.encode_jpeg(img, ...) return jpeg_bytes('encode_jpeg', img, ...) end

function M.write_png(img, path, ...)
  check_path('write_png', path)
  local b = png_bytes('write_png', img, ...)
  write_file('write_png', path, b)
end

function M.write_jpeg(img, path, ...)
  check_path('write_jpeg', path)
  local b = jpeg_bytes('write_jpeg', img, ...)
  write_file('write_jpeg', path, b)
end

return M
