-- lunet.progress: a one-line terminal progress bar with rate and ETA.
local clock = require('lunet.util').clock

local Progress = {}
Progress.__index = Progress

function Progress.new(total, label, out)
  return setmetatable({ total = total, label = label or '', out = out or io.stdout,
    start = clock(), last = -1 }, Progress)
end

local function hms(s)
  s = math.max(0, math.floor(s + 0.5))
  if s >= 3600 then return ('%d:%02d:%02d'):format(s / 3600, s % 3600 / 60, s % 60) end
  return ('%d:%02d'):format(s / 60, s % 60)
end

function Progress:update(done, info)
  local now = clock()
  if now - self.last < 0.1 and done < self.total then return end   -- at most 10 redraws/s
  self.last = now
  local width = 24
  local frac = self.total > 0 and math.min(done / self.total, 1) or 1
  local filled = math.floor(frac * width + 0.5)
  local elapsed = now - self.start
  local eta = done > 0 and elapsed * (self.total - done) / done or 0
  self.out:write(('\r%s [%s%s] %d/%d %s  %.1f it/s  ETA %s \027[K'):format(self.label,
    ('='):rep(filled), (' '):rep(width - filled), done, self.total, info or '',
    done / math.max(elapsed, 1e-9), hms(eta)))
  self.out:flush()
end

function Progress:finish()
  self.out:write('\r\027[K')
  self.out:flush()
end

return Progress
