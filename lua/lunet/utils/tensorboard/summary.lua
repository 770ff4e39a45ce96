-- lunet.utils.tensorboard.summary: the Summary protobufs of torch 1.13's
-- torch/utils/tensorboard/summary.py (scalar, histogram, text, image,
-- hparams), as bytes. Field numbers: tensorboard/compat/proto/summary.proto,
-- tensor.proto, tensor_shape.proto and plugins/hparams/{api,plugin_data}.proto.
local ffi = require 'ffi'
local P = require 'lunet.utils.tensorboard.proto'
local lunet = function() return require 'lunet' end
local raise = require('lunet.options').raise   -- (errors at the user's line)
local M = {}

-- Summary{value = {Value{tag = 1, simple_value = 2 | image = 4 | histo = 5 | tensor = 8, metadata = 9}}}
local function summary(fields) return P.msg(1, fields) end
local function plugin(name, content)   -- SummaryMetadata{plugin_data = PluginData{plugin_name, content}}
  return P.msg(9, P.msg(1, P.str(1, name) .. P.str(2, content or '')))
end

function M.scalar(tag, v) return summary(P.str(1, tag) .. P.float(2, v, true)) end   -- (a oneof: 0 is written)

-- torch's 'tensorflow' bins: +-1e-12 growing by 1.1 up to 1e20, and 0
local tf_bins
function M.default_bins()
  if tf_bins then return tf_bins end
  local pos, v = {}, 1e-12
  while v < 1e20 do pos[#pos + 1] = v; v = v * 1.1 end
  tf_bins = {}
  for i = #pos, 1, -1 do tf_bins[#tf_bins + 1] = -pos[i] end
  tf_bins[#tf_bins + 1] = 0
  for i = 1, #pos do tf_bins[#tf_bins + 1] = pos[i] end
  return tf_bins
end

-- np.linspace(lo, hi, n + 1) as numpy computes it (i * step + lo, the last exactly hi)
local function linspace(lo, hi, n)
  local e, step = {}, (hi - lo) / n
  for i = 0, n - 1 do e[i + 1] = i * step + lo end
  e[n + 1] = hi
  return e
end

-- histogram(fn, tag, values, bins, max_bins): make_histogram's proto (np.histogram
-- counts, with empty bins trimmed off both ends but one on the left)
function M.histogram(fn, tag, values, bins, max_bins)
  local L = lunet()
  local v = values:detach():to('float64'):reshape(-1)
  if v:numel() == 0 then raise(fn .. ': values has no element') end
  local lo, hi = v:min():item(), v:max():item()
  local edges = bins
  if bins == 'tensorflow' then edges = M.default_bins()
  elseif type(bins) == 'number' then
    if not (lo > -math.huge and hi < math.huge) then
      raise(('%s: the range of the values [%s, %s] is not finite (bins = %d needs one)'):format(fn, lo, hi, bins))
    end
    if lo == hi then lo, hi = lo - 0.5, hi + 0.5 end
    edges = linspace(lo, hi, bins)
    lo, hi = v:min():item(), v:max():item()
  end
  -- np.histogram's counts: [e_i, e_i+1), the last bin closed; right-bucketize
  -- gives i + 1 for a value in bin i, M + 1 for the last edge and beyond
  local M1 = #edges
  local pos = L.bucketize(v, L.tensor(edges, { dtype = 'float64' }), { right = true })
  local bc = L.bincount(pos, nil, M1 + 2):tolist()
  local counts = {}
  for i = 1, M1 - 1 do counts[i] = bc[i + 2] end
  counts[M1 - 1] = counts[M1 - 1] + v:eq(edges[M1]):sum():item()
  local limits = edges
  if max_bins and #counts > max_bins then   -- merge runs of `sub` bins, as torch
    local sub = math.floor(#counts / max_bins)
    local merged, ml = {}, {}
    for i = 1, #counts, sub do
      local s = 0
      for j = i, math.min(i + sub - 1, #counts) do s = s + counts[j] end
      merged[#merged + 1], ml[#ml + 1] = s, edges[i]
    end
    ml[#ml + 1] = edges[M1]
    counts, limits = merged, ml
  end
  local s, e   -- the first and last non-empty bins
  for i = 1, #counts do if counts[i] > 0 then s = s or i; e = i end end
  if not s then raise(fn .. ': no value falls inside the bins (the histogram is empty)') end
  local c, l = {}, {}
  if s == 1 then c[1] = 0 end
  for i = math.max(s - 1, 1), e do c[#c + 1] = counts[i] end
  for i = s, e + 1 do l[#l + 1] = limits[i] end
  local histo = P.double(1, lo) .. P.double(2, hi) .. P.double(3, v:numel()) .. P.double(4, v:sum():item())
    .. P.double(5, v:dot(v):item()) .. P.doubles(6, l) .. P.doubles(7, c)
  return summary(P.str(1, tag) .. P.msg(5, histo))
end

-- text: a DT_STRING TensorProto of shape {1}, plugin 'text' (TextPluginData{version = 0}: no bytes)
function M.text(tag, s)
  local tensor = P.varint(1, 7) .. P.msg(2, P.msg(2, P.varint(1, 1))) .. P.msg(8, s)
  return summary(P.str(1, tag .. '/text_summary') .. P.msg(8, tensor) .. plugin('text'))
end

-- ---- images: PNG (zlib's compress2 and crc32, which liblunet links) ----
pcall(ffi.cdef, [[
unsigned long crc32(unsigned long crc, const uint8_t *buf, unsigned int len);
int compress2(uint8_t *dest, unsigned long *destLen, const uint8_t *source, unsigned long sourceLen, int level);
unsigned long compressBound(unsigned long sourceLen);
]])
local zlib
function M.zlib(fn)
  if zlib == nil then
    local ok, lib = pcall(ffi.load, 'z')
    if not ok then ok, lib = pcall(ffi.load, 'libz.so.1') end
    zlib = ok and lib or false
  end
  if not zlib then raise(fn .. ': images need zlib (libz.so.1), which could not be loaded') end
  return zlib
end

local function be32(n) return string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256) end
local function chunk(z, kind, data)
  local body = kind .. data
  return be32(#data) .. body .. be32(tonumber(z.crc32(0, ffi.cast('const uint8_t *', body), #body)))
end

-- png(fn, hwc): a contiguous uint8 H x W x C tensor (C 3 or 4) as a PNG, each row filter 0
function M.png(fn, hwc)
  local z = M.zlib(fn)
  local h, w, c = hwc:size(1), hwc:size(2), hwc:size(3)
  local row = w * c
  local raw = ffi.new('uint8_t[?]', h * (row + 1))
  local src = ffi.cast('const uint8_t *', hwc:data_ptr())
  for y = 0, h - 1 do ffi.copy(raw + y * (row + 1) + 1, src + y * row, row) end   -- (the filter bytes stay 0)
  local n = ffi.new('unsigned long[1]', z.compressBound(h * (row + 1)))
  local out = ffi.new('uint8_t[?]', n[0])
  if z.compress2(out, n, raw, h * (row + 1), 6) ~= 0 then raise(fn .. ': zlib could not compress the image') end
  local ihdr = be32(w) .. be32(h) .. string.char(8, c == 4 and 6 or 2, 0, 0, 0)
  return '\137PNG\r\n\26\n' .. chunk(z, 'IHDR', ihdr) .. chunk(z, 'IDAT', ffi.string(out, n[0])) .. chunk(z, 'IEND', '')
end

function M.image(fn, tag, hwc)
  local img = P.varint(1, hwc:size(1)) .. P.varint(2, hwc:size(2)) .. P.varint(3, hwc:size(3)) .. P.str(4, M.png(fn, hwc))
  return summary(P.str(1, tag) .. P.msg(4, img))
end

-- ---- hparams: the plugin's Experiment, SessionStartInfo and SessionEndInfo ----
-- google.protobuf.Value{number_value = 2 | string_value = 3} (a oneof: 0 and '' are written)
local function value(v)
  if type(v) == 'string' then return P.msg(3, v) end
  return P.double(2, v, true)
end
M.value = value
local function hp_summary(tag, content) return summary(P.str(1, tag) .. plugin('hparams', content)) end

-- hparams(keys, hp, metrics, domains): keys are hp's names in order, metrics a list of names,
-- domains[k] a list of values; hp values numbers or strings. Returns exp, ssi, sei.
function M.hparams(keys, hp, metrics, domains)
  local infos, entries = {}, {}
  for _, k in ipairs(keys) do
    local v = hp[k]
    local info = P.str(1, k) .. P.varint(4, type(v) == 'string' and 1 or 3)   -- DATA_TYPE_STRING / FLOAT64
    if domains[k] then
      local vals = {}
      for i, d in ipairs(domains[k]) do vals[i] = P.msg(1, value(d)) end
      info = info .. P.msg(5, table.concat(vals))
    end
    infos[#infos + 1] = P.msg(4, info)
    entries[#entries + 1] = P.msg(1, P.str(1, k) .. P.msg(2, value(v)))
  end
  for _, m in ipairs(metrics) do infos[#infos + 1] = P.msg(5, P.msg(1, P.str(2, m))) end
  return hp_summary('_hparams_/experiment', P.msg(2, table.concat(infos))),
    hp_summary('_hparams_/session_start_info', P.msg(3, table.concat(entries))),
    hp_summary('_hparams_/session_end_info', P.msg(4, P.varint(1, 1)))   -- STATUS_SUCCESS
end

return M
