-- nn.Softshrink([lambd = 0.5]) or nn.Softshrink{lambd = 0.5}: x - lambd where
-- x > lambd, x + lambd where x < -lambd, else 0; lambd >= 0
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Softshrink = Module:extend('nn.Softshrink')

local OPTS, POSITIONAL = { lambd = 'number' }, { 'lambd' }

function Softshrink:__init(...)
  self.lambd = (options.check('nn.Softshrink', options.positional('nn.Softshrink', POSITIONAL, ...), OPTS) or {}).lambd
    or 0.5
  if not (self.lambd >= 0) then options.fail('nn.Softshrink', ('lambd must be >= 0, got %s'):format(self.lambd)) end
end

function Softshrink:forward(x) return F.softshrink(x, self.lambd) end

function Softshrink:extra_repr() return 'lambd ' .. self.lambd end

return Softshrink
