-- The padding modules' shared body, over F.pad: nn.ReflectionPad1d/2d,
-- nn.ReplicationPad1d/2d/3d, nn.ConstantPad1d/2d/3d, as torch's. padding is a
-- number (every side), {left, right} (1-d), {left, right, top, bottom} (2-d)
-- or {left, right, top, bottom, front, back} (3-d), integers >= 0. Reflect
-- and replicate pad (N, C, W) or (C, W) input (1-d), (N, C, H, W) or (C, H, W)
-- (2-d), (N, C, D, H, W) or (C, D, H, W) (3-d), as torch; constant pads any
-- input with at least nd dims, its leading dims folded into one for F.pad.
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local core = require 'lunet.core'
local T = require 'lunet.tensor'

local SIDES = { '{left, right}', '{left, right, top, bottom}', '{left, right, top, bottom, front, back}' }
local SHAPES = { { '(N, C, W)', '(C, W)' }, { '(N, C, H, W)', '(C, H, W)' }, { '(N, C, D, H, W)', '(C, D, H, W)' } }
local VALUE_OPTS, VALUE_POS = { value = 'number' }, { 'value' }

-- padding(name, nd, mode[, value]): the class nn.<name>, padding the last nd
-- dims in mode; a constant mode with value given takes padding only (ZeroPad2d)
return function(name, nd, mode, fixed)
  local fname = 'nn.' .. name
  local Pad = Module:extend(fname)

  function Pad:__init(padding, ...)
    local p = padding
    if type(p) == 'number' then p = { p, p, p, p, p, p } end
    if not core.is_table(p) or (#p ~= 2 * nd and type(padding) ~= 'number') then
      options.fail(fname, ('padding must be a number or %s, got %s'):format(SIDES[nd],
        core.is_table(p) and #p .. ' values' or core.typename(p)))
    end
    local q = {}
    for i = 1, 2 * nd do
      local v = p[i]
      if type(v) ~= 'number' or v % 1 ~= 0 or v < 0 or v > 2 ^ 31 then
        options.fail(fname, ('padding must be integers >= 0, got %s'):format(tostring(v)))
      end
      q[i] = v
    end
    self.padding = q
    if fixed ~= nil then self.value = fixed end
    if mode == 'constant' and fixed == nil then
      -- torch's value is required: nn.ConstantPad1d(2, 3.5) or (2, {value = 3.5})
      local o = options.check(fname, options.positional(fname, VALUE_POS, ...), VALUE_OPTS) or {}
      if o.value == nil then options.fail(fname, 'expected value (a number) after padding') end
      self.value = o.value
    else
      for i = 1, select('#', ...) do
        if select(i, ...) ~= nil then options.fail(fname, 'takes padding only, got another argument') end
      end
    end
  end

  function Pad:forward(x)
    if not T.is_tensor(x) then options.raise(fname .. ': input must be a tensor, got ' .. core.typename(x)) end
    local d, p = x:dim(), self.padding
    if mode == 'constant' then
      if d < nd then
        options.raise(('%s: input must have at least %d dim(s), got %d-d'):format(fname, nd, d))
      end
      if nd == 3 then return F.pad(x, p, 'constant', self.value) end   -- (F.pad takes any rank)
      local s = x:size()
      local H, W, lead = nd == 2 and s[d - 1] or 1, s[d], 1
      for i = 1, d - nd do lead = lead * s[i] end
      local y = F.pad(x:reshape(lead, 1, H, W), p, 'constant', self.value)
      s[d] = W + p[1] + p[2]
      if nd == 2 then s[d - 1] = H + p[3] + p[4] end
      return y:reshape(s)
    end
    if d ~= nd + 1 and d ~= nd + 2 then
      options.raise(('%s: input must be %s or %s, got %d-d {%s}'):format(fname,
        SHAPES[nd][1], SHAPES[nd][2], d, table.concat(x:size(), ',')))
    end
    local x4 = d == nd + 1 and x:unsqueeze(1) or x
    if nd == 3 then
      local y = F.pad(x4, p, mode)
      return d == nd + 1 and y:select(1, 1) or y
    end
    if nd == 1 then x4 = x4:unsqueeze(3) end
    local y = F.pad(x4, p, mode)
    if nd == 1 then y = y:select(3, 1) end
    return d == nd + 1 and y:select(1, 1) or y
  end

  function Pad:extra_repr()
    local r = '{' .. table.concat(self.padding, ', ') .. '}'
    if self.value ~= nil and fixed == nil then r = r .. ', value ' .. tostring(self.value) end
    return r
  end

  return Pad
end
