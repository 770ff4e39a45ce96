-- FiveCrop(size) and TenCrop(size[, {vertical_flip = false}]), and
-- functional.five_crop(x, size) / ten_crop(x, size, vertical_flip), as
-- torchvision 0.14's: the four corner crops and the center one (top-left,
-- top-right, bottom-left, bottom-right, center), TenCrop's then again of the
-- image flipped (horizontally, or vertically). They return a list of
-- tensors, so they are not C ops of a Compose; the usual recipe stacks them:
--   transform = function(img) return lunet.stack(T.TenCrop(224)(T.Resize(256)(img))) end
-- then model(x:view(-1, 3, 224, 224)):view(b, 10, -1):mean(2) averages the ten.
-- x: (..., H, W) (C,H,W or N,C,H,W); a float tensor's crops are views of
-- it; uint8 is made float32 in [0,1] first (ToTensor, implicit as in every
-- lunet transform), so they match CenterCrop's output.
local T = require 'lunet.tensor'
local options = require 'lunet.options'
local core = require 'lunet.core'

return function(M)
  local F = M.functional

  -- torchvision's _setup_size: a number, {s} or {h, w}, positive integers
  local function crop_size(fn, size)
    local t = type(size) == 'number' and { size } or size
    if not core.is_table(t) or (#t ~= 1 and #t ~= 2) then
      options.fail(fn, 'size must be a number, {s} or {h, w}, got ' .. (core.is_table(t) and #t .. ' values' or core.typename(t)))
    end
    local hh, ww = t[1], t[2] or t[1]
    for _, v in ipairs({ hh, ww }) do
      if type(v) ~= 'number' or v < 1 or v % 1 ~= 0 or v >= 2 ^ 31 then
        options.fail(fn, 'size must be positive integers, got ' .. tostring(v))
      end
    end
    return hh, ww
  end

  -- Python's round: halves to the even neighbour (center_crop's offsets)
  local function round_half_even(v)
    local f = math.floor(v)
    if v - f ~= 0.5 then return math.floor(v + 0.5) end
    return f % 2 == 0 and f or f + 1
  end

  local function image(fn, x)
    if not T.is_tensor(x) then options.fail(fn, 'input must be a tensor (..., H, W), got ' .. core.typename(x)) end
    if x:dim() < 2 then options.fail(fn, ('input must be (..., H, W), got %d-d'):format(x:dim())) end
    if x.dtype == 'uint8' then x = x:to('float32'):mul(1 / 255) end
    return x
  end

  local function five(fn, x, ch, cw)
    local d = x:dim()
    local H, W = x:size(d - 1), x:size(d)
    if ch > H or cw > W then
      options.fail(fn, ('crop size {%d, %d} is bigger than the input size {%d, %d}'):format(ch, cw, H, W))
    end
    local function crop(top, left) return x:narrow(d - 1, top + 1, ch):narrow(d, left + 1, cw) end
    return { crop(0, 0), crop(0, W - cw), crop(H - ch, 0), crop(H - ch, W - cw),
      crop(round_half_even((H - ch) / 2), round_half_even((W - cw) / 2)) }
  end

  function F.five_crop(x, size)
    local ch, cw = crop_size('five_crop', size)
    return five('five_crop', image('five_crop', x), ch, cw)
  end

  function F.ten_crop(x, size, vertical_flip)
    local fn = 'ten_crop'
    local ch, cw = crop_size(fn, size)
    if vertical_flip ~= nil and type(vertical_flip) ~= 'boolean' then
      options.fail(fn, 'vertical_flip must be true or false, got ' .. core.typename(vertical_flip))
    end
    x = image(fn, x)
    local out = five(fn, x, ch, cw)
    local flipped = five(fn, x:flip(vertical_flip and x:dim() - 1 or x:dim()), ch, cw)
    for i = 1, 5 do out[5 + i] = flipped[i] end
    return out
  end

  -- the modules: callable, with torchvision's repr
  local Crops = {}
  Crops.__index = Crops
  function Crops:__call(x)
    if self.kind == 'FiveCrop' then return F.five_crop(x, { self.h, self.w }) end
    return F.ten_crop(x, { self.h, self.w }, self.vertical_flip)
  end
  function Crops:__tostring()
    if self.kind == 'FiveCrop' then return ('FiveCrop({%d, %d})'):format(self.h, self.w) end
    return ('TenCrop({%d, %d}, {vertical_flip = %s})'):format(self.h, self.w, tostring(self.vertical_flip))
  end

  function M.FiveCrop(size, ...)
    if select('#', ...) > 0 then options.fail('FiveCrop', 'takes only the size') end
    local ch, cw = crop_size('FiveCrop', size)
    return setmetatable({ kind = 'FiveCrop', h = ch, w = cw }, Crops)
  end

  local TEN_OPTS, TEN_POS = { vertical_flip = 'boolean' }, { 'vertical_flip' }
  function M.TenCrop(size, ...)
    local fn = 'TenCrop'
    local ch, cw = crop_size(fn, size)
    local opts = options.check(fn, options.positional(fn, TEN_POS, ...), TEN_OPTS) or {}
    return setmetatable({ kind = 'TenCrop', h = ch, w = cw, vertical_flip = opts.vertical_flip or false }, Crops)
  end
end
