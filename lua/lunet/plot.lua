-- lunet.plot: loss and accuracy curves per epoch as an SVG file (no
-- dependencies; opens in any browser).
local util = require 'lunet.util'
local plot = {}

local W, H, PAD = 360, 240, 40

-- A "nice" tick step for a range: 1, 2 or 5 times a power of ten, about
-- `want` steps across it.
local function nice_step(span, want)
  local raw = span / want
  local p = 10 ^ math.floor(math.log10(raw))
  for _, m in ipairs({ 1, 2, 5, 10 }) do
    if m * p >= raw * 0.999 then return m * p end
  end
  return 10 * p
end
plot.nice_step = nice_step

local function panel(out, x0, title, series, lo, hi)
  out[#out + 1] = ('<g transform="translate(%d,0)">'):format(x0)
  out[#out + 1] = ('<text x="%d" y="18" font-size="13" text-anchor="middle">%s</text>'):format(W / 2, title)
  local n = 0
  for _, s in ipairs(series) do n = math.max(n, #s.values) end
  -- the y axis spans whole ticks at round values (0.1, 0.2, ... or 85, 90, ...)
  if hi <= lo then lo, hi = lo - 0.5, hi + 0.5 end
  local step = nice_step(hi - lo, 4)
  local ymin, ymax = math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step
  if ymax <= ymin then ymax = ymin + step end
  local decimals = step >= 1 and 0 or math.ceil(-math.log10(step) - 1e-9)
  local x1, x2, y1, y2 = PAD, W - 10, 25, H - PAD
  local function px(i) return x1 + (n > 1 and (i - 1) / (n - 1) or 0.5) * (x2 - x1) end
  local function py(v) return y1 + (1 - (v - ymin) / (ymax - ymin)) * (y2 - y1) end
  -- light grid and ticks: one line per y tick, one per epoch (every k-th when many)
  local ticks = math.floor((ymax - ymin) / step + 0.5)
  for k = 0, ticks do
    local v = ymin + k * step
    out[#out + 1] = ('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e6e6e6"/>'):format(x1, x2, py(v), py(v))
    out[#out + 1] = ('<text x="%d" y="%.1f" font-size="10" text-anchor="end">%s</text>')
      :format(x1 - 4, py(v) + 3, ('%.' .. decimals .. 'f'):format(v))
  end
  local every = math.max(1, math.ceil(n / 12))
  for i = 1, n, every do
    out[#out + 1] = ('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#e6e6e6"/>'):format(px(i), px(i), y1, y2)
    out[#out + 1] = ('<text x="%.1f" y="%d" font-size="10" text-anchor="middle">%d</text>'):format(px(i), y2 + 12, i)
  end
  out[#out + 1] = ('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>'):format(x1, y1, x2 - x1, y2 - y1)
  out[#out + 1] = ('<text x="%d" y="%d" font-size="10" text-anchor="middle">epoch</text>'):format(W / 2, H - 8)
  for j, s in ipairs(series) do
    local pts = {}
    for i, v in ipairs(s.values) do pts[#pts + 1] = ('%.1f,%.1f'):format(px(i), py(v)) end
    if #pts > 0 then
      out[#out + 1] = ('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'):format(s.color, table.concat(pts, ' '))
      for _, p in ipairs(pts) do
        local x, y = p:match('([^,]+),(.+)')
        out[#out + 1] = ('<circle cx="%s" cy="%s" r="2.5" fill="%s"/>'):format(x, y, s.color)
      end
    end
    out[#out + 1] = ('<text x="%d" y="%d" font-size="11" fill="%s">%s</text>'):format(x1 + 8, 40 + 14 * (j - 1), s.color, s.name)
  end
  out[#out + 1] = '</g>'
end

local function range(series)
  local lo, hi = math.huge, -math.huge
  for _, s in ipairs(series) do
    for _, v in ipairs(s.values) do lo = math.min(lo, v); hi = math.max(hi, v) end
  end
  if lo == math.huge then return 0, 1 end
  return lo, hi
end

-- curves(path, history): history is fit's list of per-epoch records.
function plot.curves(path, history)
  local function col(key, scale)
    local v = {}
    for i, r in ipairs(history) do if r[key] then v[#v + 1] = r[key] * (scale or 1) end end
    return v
  end
  local loss = { { name = 'train loss', color = '#1f77b4', values = col('train_loss') },
                 { name = 'val loss', color = '#ff7f0e', values = col('val_loss') } }
  local acc = { { name = 'train acc %', color = '#1f77b4', values = col('train_acc', 100) },
                { name = 'val acc %', color = '#ff7f0e', values = col('val_acc', 100) } }
  local out = { ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">'):format(2 * W, H),
                ('<rect width="%d" height="%d" fill="white"/>'):format(2 * W, H) }
  panel(out, 0, 'loss', loss, range(loss))
  panel(out, W, 'accuracy (%)', acc, range(acc))
  out[#out + 1] = '</svg>'
  -- atomic: a fit's plot is rewritten each epoch; a reader never sees half
  util.write_file('plot.curves', path, table.concat(out, '\n') .. '\n')
end

return plot
