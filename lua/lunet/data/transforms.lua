-- lunet.data.transforms: image transforms in the style of torchvision,
-- run in C while a batch is gathered (see ln_transform in lunet.h).
--
--   local T = data.transforms
--   local tf = T.Compose{ T.RandomCrop(32, {padding = 4}), T.RandomHorizontalFlip(),
--                         T.Normalize({0.4914, 0.4822, 0.4465}, {0.247, 0.243, 0.261}) }
--   data.DataLoader(ds, {batch_size = 128, transform = tf})
--
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

local function flatten(t, out)
  if t.kind == 'Compose' then
    for _, u in ipairs(t.list) do flatten(u, out) end
  else
    out[#out + 1] = t
  end
  return out
end

-- The C form of transform `t` (a transform or nil) for images of the given
-- dtype ('uint8' scales by 1/255).
function M.compile(t, dtype)
  local tf = ffi.new('ln_transform')
  tf.scale = dtype == 'uint8' and 1 / 255 or 1
  if t == nil then return tf end
  if is_table(t) and not is_transform(t) and t[1] ~= nil then t = M.Compose(t) end  -- a plain list
  if not is_transform(t) then error('transform: expected a lunet.data.transforms transform, got ' .. typename(t), 3) end
  local seen, crop_at, norm_at = {}, nil, nil
  local list = flatten(t, {})
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

return M
