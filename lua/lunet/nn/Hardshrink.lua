-- nn.Hardshrink([lambd = 0.5]) or nn.Hardshrink{lambd = 0.5}: x where |x| > lambd, else 0
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Hardshrink = Module:extend('nn.Hardshrink')

local OPTS, POSITIONAL = { lambd = 'number' }, { 'lambd' }

function Hardshrink:__init(...)
  self.lambd = (options.check('nn.Hardshrink', options.positional('nn.Hardshrink', POSITIONAL, ...), OPTS) or {}).lambd
    or 0.5
end

function Hardshrink:forward(x) return F.hardshrink(x, self.lambd) end

function Hardshrink:extra_repr() return 'lambd ' .. self.lambd end

return Hardshrink
