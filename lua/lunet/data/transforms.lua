-- lunet.data.transforms: image transforms in the style of torchvision,
-- run in C while a batch is gathered (see ln_transform in lunet.h).
--
--   local T = data.transforms
--   local tf = T.Compose{ T.RandomCrop(32, {padding = 4}), T.RandomHorizontalFlip(),
--                         T.Normalize({0.4914, 0.4822, 0.4465}, {0.247, 0.243, 0.261}) }
--   data.DataLoader(ds, {batch_size = 128, transform = tf})
--
-- Also RandomVerticalFlip, Resize, RandomResizedCrop, ColorJitter,
-- RandomErasing (and, in transforms_more.lua, Grayscale, RandomGrayscale,
-- RandomRotation, RandomAffine, GaussianBlur, Pad; in transforms_augment.lua
-- the AutoAugment family and policies; in transforms_random.lua RandomApply,
-- RandomChoice, RandomOrder, RandomPerspective, ElasticTransform; in
-- transforms_crops.lua FiveCrop and TenCrop, which return lists), and their fixed-parameter
-- forms in M.functional; a
-- Compose with any of them runs as an ordered list of C ops (tf.ops), its
-- crop and horizontal flip drawing as the fixed path does.
-- uint8 images are turned into float32 in [0,1] first (torchvision's
-- ToTensor, implicit here). Padding pixels are zero in the raw image, so a
-- Normalize after the crop maps them to -mean/std, as in torchvision. Random
-- choices are keyed by (seed, epoch, sample index): the same at any worker count.
-- A transform may also be called on a tensor (C,H,W) or (N,C,H,W):
-- `tf(x, {key = i, seed = s, epoch = e})` returns a new float32 tensor.
local ffi = require 'ffi'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local options = require 'lunet.options'
local C = core.C

local M = {}
local OPS, compile_ops
local Transform = {}
Transform.__index = Transform

local function new(kind, fields)
  fields.kind = kind
  return setmetatable(fields, Transform)
end

local function is_transform(t) return getmetatable(t) == Transform end
M.is_transform = is_transform

local function size2(fn, size)
  if type(size) == 'number' then size = { size, size } end
  if not is_table(size) or type(size[1]) ~= 'number' or type(size[2] or size[1]) ~= 'number' then
    error(fn .. ': size must be a number or {h, w}', 3)
  end
  local h, w = size[1], size[2] or size[1]
  if h < 1 or w < 1 or h % 1 ~= 0 or w % 1 ~= 0 then
    error(('%s: size must be positive integers, got %s x %s'):format(fn, h, w), 3)
  end
  return h, w
end

local function values(fn, what, v)
  if type(v) == 'number' then return { v } end
  if not is_table(v) or #v == 0 then error(('%s: %s must be a number or a list of numbers'):format(fn, what), 3) end
  if #v > C.LN_DATA_MAX_CHANNELS then error(('%s: at most %d channels'):format(fn, C.LN_DATA_MAX_CHANNELS), 3) end
  local out = {}
  for i = 1, #v do
    if type(v[i]) ~= 'number' then error(('%s: %s[%d] must be a number'):format(fn, what, i), 3) end
    out[i] = v[i]
  end
  return out
end

function M.Compose(list)
  if not is_table(list) then error('Compose: expects a list of transforms', 2) end
  for i, t in ipairs(list) do
    if not is_transform(t) then
      error(('Compose: item %d is not a lunet.data.transforms transform (%s)'):format(i, typename(t)), 2)
    end
  end
  return new('Compose', { list = list })
end

function M.Normalize(mean, std)
  local m, s = values('Normalize', 'mean', mean), values('Normalize', 'std', std)
  if #m ~= #s then error(('Normalize: %d means but %d stds'):format(#m, #s), 2) end
  for i = 1, #s do if s[i] == 0 then error(('Normalize: std[%d] is zero'):format(i), 2) end end
  return new('Normalize', { mean = m, std = s })
end

-- RandomCrop(size[, {padding = 0}]) or torchvision's positional RandomCrop(size, padding)
local CROP_OPTS = { padding = 'number' }
local CROP_POSITIONAL = { 'padding' }
function M.RandomCrop(size, ...)
  local h, w = size2('RandomCrop', size)
  local opts = options.check('RandomCrop', options.positional('RandomCrop', CROP_POSITIONAL, ...), CROP_OPTS)
  local pad = opts and opts.padding or 0
  if type(pad) ~= 'number' or pad < 0 or pad % 1 ~= 0 then
    error('RandomCrop: padding must be a non-negative integer', 2)
  end
  return new('RandomCrop', { h = h, w = w, padding = pad })
end

function M.CenterCrop(size)
  local h, w = size2('CenterCrop', size)
  return new('CenterCrop', { h = h, w = w })
end

function M.RandomHorizontalFlip(p)
  p = p == nil and 0.5 or p
  if type(p) ~= 'number' or not (p >= 0 and p <= 1) then error('RandomHorizontalFlip: p must be in [0, 1], got ' .. tostring(p), 2) end
  return new('RandomHorizontalFlip', { p = p })
end

function M.RandomVerticalFlip(p)
  p = p == nil and 0.5 or p
  if type(p) ~= 'number' or not (p >= 0 and p <= 1) then error('RandomVerticalFlip: p must be in [0, 1], got ' .. tostring(p), 2) end
  return new('RandomVerticalFlip', { p = p })
end

-- Resize(size): an integer makes the shorter side `size` (the longer one
-- int(size * long / short), as torchvision), {h, w} is the exact size.
-- Bilinear, align_corners false, no antialias (torchvision's tensor path with
-- antialias off), on the [0,1] float image.
function M.Resize(size, ...)
  if select('#', ...) > 0 then error('Resize: takes only the size (bilinear, no antialias)', 2) end
  if type(size) == 'number' or is_table(size) and #size == 1 then
    local s = type(size) == 'number' and size or size[1]
    if type(s) ~= 'number' or s < 1 or s % 1 ~= 0 or s >= 2 ^ 31 then
      error('Resize: size must be a positive integer or {h, w}, got ' .. tostring(s), 2)
    end
    return new('Resize', { short = s })
  end
  local h, w = size2('Resize', size)
  return new('Resize', { h = h, w = w })
end

-- a {lo, hi} range of positive numbers, lo <= hi
local function range(fn, what, v, lo_min, hi_max)
  if not (is_table(v) and #v == 2 and type(v[1]) == 'number' and type(v[2]) == 'number') then
    error(('%s: %s must be {min, max}'):format(fn, what), 3)
  end
  if not (v[1] >= lo_min and v[1] <= v[2] and v[2] <= (hi_max or math.huge) and v[2] < math.huge) then
    error(('%s: %s must have %g <= min <= max%s, got {%s, %s}'):format(fn, what, lo_min,
      hi_max and (' <= %g'):format(hi_max) or '', v[1], v[2]), 3)
  end
  return { v[1], v[2] }
end

-- RandomResizedCrop(size[, {scale = {0.08, 1}, ratio = {3/4, 4/3}}]): a box of
-- area share in scale and aspect ratio (w/h, log-uniform) in ratio, 10 tries
-- then the central crop (torchvision's sampling), bilinear-resized to size.
local RRC_OPTS = { scale = 'table', ratio = 'table' }
function M.RandomResizedCrop(size, ...)
  local h, w = size2('RandomResizedCrop', size)
  local opts = options.check('RandomResizedCrop', options.positional('RandomResizedCrop', { 'scale', 'ratio' }, ...),
    RRC_OPTS) or {}
  local scale = range('RandomResizedCrop', 'scale', opts.scale or { 0.08, 1 }, 1e-300)
  local ratio = range('RandomResizedCrop', 'ratio', opts.ratio or { 3 / 4, 4 / 3 }, 1e-300)
  return new('RandomResizedCrop', { h = h, w = w, scale = scale, ratio = ratio })
end

-- ColorJitter{brightness =, contrast =, saturation =} (or positional): b gives
-- factors uniform in [max(0, 1 - b), 1 + b], {min, max} that range; applied
-- to [0,1] images in a random order per sample, as torchvision.
local CJ_OPTS = { brightness = 'number|table', contrast = 'number|table', saturation = 'number|table', hue = 'number|table' }
local function jitter_range(what, v)
  if v == nil or v == 0 then return nil end
  if type(v) == 'number' then
    if not (v > 0 and v < math.huge) then error(('ColorJitter: %s must be a non-negative number or {min, max}, got %s'):format(what, v), 3) end
    return { math.max(0, 1 - v), 1 + v }
  end
  return range('ColorJitter', what, v, 0)
end
function M.ColorJitter(...)
  local opts = options.check('ColorJitter', options.positional('ColorJitter',
    { 'brightness', 'contrast', 'saturation', 'hue' }, ...), CJ_OPTS) or {}
  -- hue: h gives shifts uniform in [-h, h] (0 <= h <= 0.5), {min, max} within [-0.5, 0.5]
  local hue = opts.hue
  if type(hue) == 'number' then
    if not (hue >= 0 and hue <= 0.5) then error('ColorJitter: hue must be in [0, 0.5] or {min, max}, got ' .. hue, 2) end
    hue = hue > 0 and { -hue, hue } or nil
  elseif hue ~= nil then
    hue = range('ColorJitter', 'hue', hue, -0.5, 0.5)
  end
  return new('ColorJitter', { brightness = jitter_range('brightness', opts.brightness),
    contrast = jitter_range('contrast', opts.contrast), saturation = jitter_range('saturation', opts.saturation),
    hue = hue })
end

-- RandomErasing([{p = 0.5, scale = {0.02, 0.33}, ratio = {0.3, 3.3}, value = 0}]):
-- with probability p a box (area share in scale, aspect h/w log-uniform in
-- ratio; 10 tries, else nothing) is set to value (a number or one per
-- channel), as torchvision's; it acts on the values it is given, so after
-- Normalize as in torchvision.
local ERASE_OPTS = { p = 'number', scale = 'table', ratio = 'table', value = 'number|table|string', inplace = 'boolean' }
function M.RandomErasing(opts, ...)
  if select('#', ...) > 0 then error('RandomErasing: takes one options table', 2) end
  opts = options.check('RandomErasing', opts, ERASE_OPTS) or {}
  local p = opts.p == nil and 0.5 or opts.p
  if not (p >= 0 and p <= 1) then error('RandomErasing: p must be in [0, 1], got ' .. tostring(p), 2) end
  if opts.value == 'random' then error("RandomErasing: value = 'random' is not supported (a number or one per channel)", 2) end
  if type(opts.value) == 'string' then error(("RandomErasing: value must be a number or a list, got '%s'"):format(opts.value), 2) end
  local value = values('RandomErasing', 'value', opts.value or 0)
  return new('RandomErasing', { p = p, scale = range('RandomErasing', 'scale', opts.scale or { 0.02, 0.33 }, 0, 1),
    ratio = range('RandomErasing', 'ratio', opts.ratio or { 0.3, 3.3 }, 1e-300), value = value })
end

-- torchvision.transforms.functional's fixed-parameter forms, run by the same
-- C ops: F.resize(x, size), F.resized_crop(x, top, left, h, w, size),
-- F.adjust_brightness/contrast/saturation(x, factor), F.erase(x, i, j, h, w, v),
-- F.vflip(x), F.hflip(x) (1-based tensors, 0-based pixel offsets as torchvision).
local F = {}
M.functional = F
local function int_arg(fn, what, v, min)
  if type(v) ~= 'number' or v % 1 ~= 0 or v < min or v >= 2 ^ 31 then
    error(('%s: %s must be an integer >= %d, got %s'):format(fn, what, min, tostring(v)), 3)
  end
  return v
end
local function box_args(fn, i, j, h, w)
  return { i = int_arg(fn, 'top', i, 0), j = int_arg(fn, 'left', j, 0), bh = int_arg(fn, 'height', h, 1),
    bw = int_arg(fn, 'width', w, 1) }
end
function F.resize(x, size) return M.Resize(size)(x) end
function F.hflip(x) return M.RandomHorizontalFlip(1)(x) end
function F.vflip(x) return M.RandomVerticalFlip(1)(x) end
function F.resized_crop(x, top, left, h, w, size)
  local box = box_args('resized_crop', top, left, h, w)
  box.h, box.w = size2('resized_crop', size)
  return new('ResizedCropBox', box)(x)
end
for _, what in ipairs { 'brightness', 'contrast', 'saturation' } do
  F['adjust_' .. what] = function(x, f)
    if type(f) ~= 'number' or not (f >= 0 and f < math.huge) then
      error(('adjust_%s: factor must be a non-negative number, got %s'):format(what, tostring(f)), 2)
    end
    return new('JitterFactors', { [what] = f })(x)
  end
end
function F.erase(x, i, j, h, w, v)
  local box = box_args('erase', i, j, h, w)
  box.value = values('erase', 'value', v == nil and 0 or v)
  return new('EraseBox', box)(x)
end

-- GROUP[kind]: the C group mode of RandomApply, RandomChoice, RandomOrder
-- (transforms_random.lua); a Compose inside one is a group of mode 3
local GROUP = { Compose = 3 }
local function flatten(t, out, nested)
  if t.kind == 'Compose' and not nested then
    for _, u in ipairs(t.list) do flatten(u, out) end
  elseif GROUP[t.kind] then   -- a Group entry, then its items' ops (span of them)
    local g = { kind = 'Group', mode = GROUP[t.kind], p = t.p, weights = t.weights, count = #t.list }
    out[#out + 1] = g
    local start = #out
    for _, u in ipairs(t.list) do flatten(u, out, true) end
    g.span = #out - start
  else
    out[#out + 1] = t
  end
  return out
end

-- The transforms the fixed crop/flip/normalize fields cannot express: a
-- Compose with any of them runs as tf.ops, in the order given.
OPS = { RandomVerticalFlip = true, Resize = true, RandomResizedCrop = true, ColorJitter = true,
  RandomErasing = true, ResizedCropBox = true, JitterFactors = true, EraseBox = true }
local COMPILE = {}   -- kind -> function(o, u): the ops transforms_more.lua adds

function compile_ops(tf, list)
  if #list > C.LN_TF_MAX_OPS then error(('transform: at most %d transforms in a Compose'):format(C.LN_TF_MAX_OPS), 4) end
  local seen = {}
  for k, u in ipairs(list) do
    local o = tf.ops[k - 1]
    -- (one crop, flip and Normalize: the crop and flip share the fixed path's draws)
    local one = u.kind == 'CenterCrop' and 'RandomCrop' or u.kind
    if (one == 'RandomCrop' or one == 'RandomHorizontalFlip' or one == 'Normalize') and seen[one] then
      error(('transform: more than one %s is not supported'):format(u.kind), 4)
    end
    seen[one] = true
    if u.kind == 'RandomCrop' or u.kind == 'CenterCrop' then
      o.kind = C.LN_OP_CROP
      o.mode = u.kind == 'RandomCrop' and C.LN_CROP_RANDOM or C.LN_CROP_CENTER
      o.h, o.w, o.pad = u.h, u.w, u.padding or 0
    elseif u.kind == 'RandomHorizontalFlip' or u.kind == 'RandomVerticalFlip' then
      o.kind = u.kind == 'RandomHorizontalFlip' and C.LN_OP_HFLIP or C.LN_OP_VFLIP
      o.p = u.p
    elseif u.kind == 'Normalize' then
      o.kind = C.LN_OP_NORMALIZE
      tf.nchannels = #u.mean
      for c = 1, #u.mean do tf.mean[c - 1], tf.std[c - 1] = u.mean[c], u.std[c] end
    elseif u.kind == 'Resize' then
      o.kind = C.LN_OP_RESIZE
      if u.short then o.h, o.w = u.short, 0 else o.h, o.w = u.h, u.w end
    elseif u.kind == 'RandomResizedCrop' or u.kind == 'ResizedCropBox' then
      o.kind = C.LN_OP_RESIZED_CROP
      o.h, o.w = u.h, u.w
      if u.scale then
        o.a[0], o.a[1], o.a[2], o.a[3] = u.scale[1], u.scale[2], u.ratio[1], u.ratio[2]
      else
        o.mode, o.i, o.j, o.bh, o.bw = 1, u.i, u.j, u.bh, u.bw
      end
    elseif u.kind == 'ColorJitter' or u.kind == 'JitterFactors' then
      o.kind = C.LN_OP_JITTER
      o.mode = u.kind == 'JitterFactors' and 1 or 0
      for f, what in ipairs { 'brightness', 'contrast', 'saturation' } do
        local v = u[what]
        if u.kind == 'JitterFactors' then v = v and { v, v } end
        o.a[2 * f - 2], o.a[2 * f - 1] = v and v[1] or -1, v and v[2] or -1
      end
      -- (mode 1: every factor applies, as torchvision's blends all clamp; adjust_hue alone does not)
      if u.kind == 'JitterFactors' and not u.hue then
        if not u.brightness then o.a[0] = 1 end
        if not u.contrast then o.a[2] = 1 end
        if not u.saturation then o.a[4] = 1 end
      end
      if u.hue then o.flags, o.a[6], o.a[7] = C.LN_TF_HUE, u.hue[1], u.hue[2] end
    elseif u.kind == 'RandomErasing' or u.kind == 'EraseBox' then
      o.kind = C.LN_OP_ERASE
      o.nv = #u.value
      for c = 1, #u.value do o.v[c - 1] = u.value[c] end
      if u.scale then
        o.p = u.p
        o.a[0], o.a[1], o.a[2], o.a[3] = u.scale[1], u.scale[2], u.ratio[1], u.ratio[2]
      else
        o.p, o.mode, o.i, o.j, o.bh, o.bw = 1, 1, u.i, u.j, u.bh, u.bw
      end
    else
      COMPILE[u.kind](o, u)
    end
  end
  tf.nops = #list
  return tf
end

-- The C form of transform `t` (a transform or nil) for images of the given
-- dtype ('uint8' scales by 1/255).
function M.compile(t, dtype)
  local tf = ffi.new('ln_transform')
  tf.scale = dtype == 'uint8' and 1 / 255 or 1
  if t == nil then return tf end
  if is_table(t) and not is_transform(t) and t[1] ~= nil then t = M.Compose(t) end  -- a plain list
  if not is_transform(t) then error('transform: expected a lunet.data.transforms transform, got ' .. typename(t), 3) end
  local list = flatten(t, {})
  for _, u in ipairs(list) do
    if OPS[u.kind] then return compile_ops(tf, list) end
  end
  local seen, crop_at, norm_at = {}, nil, nil
  for i, u in ipairs(list) do
    local k = u.kind == 'CenterCrop' and 'RandomCrop' or u.kind
    if seen[k] then error(('transform: more than one %s is not supported'):format(u.kind), 3) end
    seen[k] = true
    if u.kind == 'RandomCrop' or u.kind == 'CenterCrop' then
      tf.crop = u.kind == 'RandomCrop' and C.LN_CROP_RANDOM or C.LN_CROP_CENTER
      tf.out_h, tf.out_w, tf.pad = u.h, u.w, u.padding or 0
      crop_at = i
    elseif u.kind == 'RandomHorizontalFlip' then
      tf.flip_p = u.p
    elseif u.kind == 'Normalize' then
      tf.normalize = 1
      tf.nchannels = #u.mean
      for c = 1, #u.mean do tf.mean[c - 1], tf.std[c - 1] = u.mean[c], u.std[c] end
      norm_at = i
    end
  end
  -- zero pixels padded before a Normalize become -mean/std
  if norm_at and crop_at and crop_at < norm_at then
    for c = 0, tf.nchannels - 1 do tf.fill[c] = -tf.mean[c] / tf.std[c] end
  end
  return tf
end

local tostr = {
  Compose = function(t)
    local parts = {}
    for i, u in ipairs(t.list) do parts[i] = '  ' .. tostring(u) end
    return 'Compose{\n' .. table.concat(parts, ',\n') .. '\n}'
  end,
  Normalize = function(t)
    return ('Normalize({%s}, {%s})'):format(table.concat(t.mean, ', '), table.concat(t.std, ', '))
  end,
  RandomCrop = function(t) return ('RandomCrop({%d, %d}, {padding = %d})'):format(t.h, t.w, t.padding) end,
  CenterCrop = function(t) return ('CenterCrop({%d, %d})'):format(t.h, t.w) end,
  RandomHorizontalFlip = function(t) return ('RandomHorizontalFlip(%g)'):format(t.p) end,
  RandomVerticalFlip = function(t) return ('RandomVerticalFlip(%g)'):format(t.p) end,
  Resize = function(t) return t.short and ('Resize(%d)'):format(t.short) or ('Resize({%d, %d})'):format(t.h, t.w) end,
  RandomResizedCrop = function(t)
    return ('RandomResizedCrop({%d, %d}, {scale = {%g, %g}, ratio = {%g, %g}})'):format(t.h, t.w, t.scale[1],
      t.scale[2], t.ratio[1], t.ratio[2])
  end,
  ColorJitter = function(t)
    local parts = {}
    for _, what in ipairs { 'brightness', 'contrast', 'saturation' } do
      if t[what] then parts[#parts + 1] = ('%s = {%g, %g}'):format(what, t[what][1], t[what][2]) end
    end
    if t.hue then parts[#parts + 1] = ('hue = {%g, %g}'):format(t.hue[1], t.hue[2]) end
    return 'ColorJitter{' .. table.concat(parts, ', ') .. '}'
  end,
  RandomErasing = function(t)
    return ('RandomErasing{p = %g, scale = {%g, %g}, ratio = {%g, %g}, value = {%s}}'):format(t.p, t.scale[1],
      t.scale[2], t.ratio[1], t.ratio[2], table.concat(t.value, ', '))
  end,
  ResizedCropBox = function(t) return ('resized_crop(%d, %d, %d, %d, {%d, %d})'):format(t.i, t.j, t.bh, t.bw, t.h, t.w) end,
  JitterFactors = function() return 'adjust' end,
  EraseBox = function(t) return ('erase(%d, %d, %d, %d)'):format(t.i, t.j, t.bh, t.bw) end,
}
function Transform:__tostring() return tostr[self.kind](self) end

-- Apply to a (C,H,W) or (N,C,H,W) uint8/float32 tensor.
local idx_buf = ffi.new('int64_t[1]')
local CALL_OPTS = { key = 'number', seed = 'number', epoch = 'number' }
function Transform:__call(x, opts)
  if not T.is_tensor(x) then error('transform: input must be a tensor', 2) end
  opts = options.check('transform', opts, CALL_OPTS) or {}
  local single = x:dim() == 3
  local xb = single and x:unsqueeze(1) or x
  if xb:dim() ~= 4 then error(('transform: input must be (C,H,W) or (N,C,H,W), got %d-d'):format(x:dim()), 2) end
  xb = xb:contiguous()
  local n = xb:size(1)
  local idx = n == 1 and idx_buf or ffi.new('int64_t[?]', n)
  for i = 0, n - 1 do idx[i] = i end
  local keys = idx
  if opts.key then
    keys = ffi.new('int64_t[?]', n)
    for i = 0, n - 1 do keys[i] = opts.key - 1 + i end
  end
  local tf = M.compile(self, x.dtype)
  local shape = ffi.new('int64_t[8]')
  local dt = ffi.new('int[1]')
  local nd = C.ln_batch_shape(xb.p, tf, n, shape, dt)
  if nd < 0 then core.raise() end
  local out = T.wrap(C.ln_empty(nd, shape, dt[0], 0))
  if C.ln_batch_gather(out.p, nil, xb.p, nil, idx, keys, n, tf, opts.seed or 0, opts.epoch or 0) ~= 0 then
    core.raise()
  end
  return single and out:select(1, 1) or out
end

-- a geometric op's fill values into op o: the flag to add (LN_TF_FILL, or 0 for none: zeros)
local function put_fill(o, fill)
  if not fill then return 0 end
  o.nv = #fill
  for c = 1, #fill do o.v[c - 1] = fill[c] end
  return C.LN_TF_FILL
end
-- the repr's tail of an op with interpolation and fill
local function geometry_repr(t)
  return ('interpolation = %q, fill = %s'):format(t.interp, t.fill and '{' .. table.concat(t.fill, ', ') .. '}' or 'nil')
end

require('lunet.data.transforms_more')(M, { new = new, OPS = OPS, COMPILE = COMPILE, tostr = tostr,
  values = values, range = range, size2 = size2, put_fill = put_fill })
require('lunet.data.transforms_augment')(M, { new = new, OPS = OPS, COMPILE = COMPILE, tostr = tostr, values = values,
  put_fill = put_fill, geometry_repr = geometry_repr })
require('lunet.data.transforms_random')(M, { new = new, OPS = OPS, COMPILE = COMPILE, tostr = tostr, values = values,
  range = range, GROUP = GROUP, is_transform = is_transform, put_fill = put_fill, geometry_repr = geometry_repr })
require('lunet.data.transforms_crops')(M)
return M
