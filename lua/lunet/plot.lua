-- lunet.plot: loss and accuracy curves per epoch as an SVG file (no
-- dependencies; opens in any browser).
local plot = {}

local W, H, PAD = 360, 240, 40

local function panel(out, x0, title, series, ymin, ymax)
  out[#out + 1] = ('<g transform="translate(%d,0)">'):format(x0)
  out[#out + 1] = ('<text x="%d" y="18" font-size="13" text-anchor="middle">%s</text>'):format(W / 2, title)
  out[#out + 1] = ('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>'):format(PAD, 25, W - PAD - 10, H - 25 - PAD)
  local n = 0
  for _, s in ipairs(series) do n = math.max(n, #s.values) end
  if ymax <= ymin then ymax = ymin + 1 end
  local function px(i) return PAD + (n > 1 and (i - 1) / (n - 1) or 0.5) * (W - PAD - 10) end
  local function py(v) return 25 + (1 - (v - ymin) / (ymax - ymin)) * (H - 25 - PAD) end
  for k = 0, 4 do
    local v = ymin + (ymax - ymin) * k / 4
    out[#out + 1] = ('<text x="%d" y="%.1f" font-size="10" text-anchor="end">%.3g</text>'):format(PAD - 4, py(v) + 3, v)
  end
  out[#out + 1] = ('<text x="%d" y="%d" font-size="10" text-anchor="middle">epoch (1..%d)</text>'):format(W / 2, H - 12, n)
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
    out[#out + 1] = ('<text x="%d" y="%d" font-size="11" fill="%s">%s</text>'):format(PAD + 8, 40 + 14 * (j - 1), s.color, s.name)
  end
  out[#out + 1] = '</g>'
end

local function range(series)
  local lo, hi = math.huge, -math.huge
  for _, s in ipairs(series) do
    for _, v in ipairs(s.values) do lo = math.min(lo, v); hi = math.max(hi, v) end
  end
  if lo == math.huge then return 0, 1 end
  local pad = (hi - lo) * 0.05
  return lo - pad, hi + pad
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
  local tmp = path .. '.tmp'
  local f = assert(io.open(tmp, 'w'))
  f:write(table.concat(out, '\n'), '\n')
  f:close()
  assert(os.rename(tmp, path))
end

return plot
