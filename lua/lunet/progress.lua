-- lunet.progress: a one-line terminal progress bar with rate and ETA; or, for
-- a log or a pipe (lines = true), a whole line every Progress.line_every
-- seconds, so that a long epoch is not silent until its end.
local clock = require('lunet.util').clock

local Progress = {}
Progress.__index = Progress
Progress.line_every = 5   -- seconds between lines in lines mode

function Progress.new(total, label, out, lines)
  local now = clock()
  return setmetatable({ total = total, label = label or '', out = out or io.stdout,
    start = now, last = -1, lines = lines and true or false, last_line = now }, Progress)
end

local function hms(s)
  s = math.max(0, math.floor(s + 0.5))
  if s >= 3600 then return ('%d:%02d:%02d'):format(s / 3600, s % 3600 / 60, s % 60) end
  return ('%d:%02d'):format(s / 60, s % 60)
end

function Progress:update(done, info)
  local now = clock()
  local elapsed = now - self.start
  local eta = done > 0 and elapsed * (self.total - done) / done or 0
  local rate = done / math.max(elapsed, 1e-9)
  if self.lines then
    -- (the end of an epoch has its own line: fit's summary)
    if now - self.last_line < Progress.line_every or done >= self.total then return end
    self.last_line = now
    self.out:write(('%s  step %d/%d  %s  %.1f it/s  ETA %s\n'):format(self.label, done, self.total,
      info or '', rate, hms(eta)))
    self.out:flush()
    return
  end
  if now - self.last < 0.1 and done < self.total then return end   -- at most 10 redraws/s
  self.last = now
  local width = 24
  local frac = self.total > 0 and math.min(done / self.total, 1) or 1
  local filled = math.floor(frac * width + 0.5)
  self.out:write(('\r%s [%s%s] %d/%d %s  %.1f it/s  ETA %s \027[K'):format(self.label,
    ('='):rep(filled), (' '):rep(width - filled), done, self.total, info or '', rate, hms(eta)))
  self.out:flush()
end

function Progress:finish()
  if self.lines then return end
  self.out:write('\r\027[K')
  self.out:flush()
end

return Progress
