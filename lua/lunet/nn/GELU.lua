-- nn.GELU([approximate = 'none' | 'tanh']) or nn.GELU{approximate = 'tanh'}
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local GELU = Module:extend('nn.GELU')

local OPTS, POSITIONAL = { approximate = 'string' }, { 'approximate' }

function GELU:__init(...)
  local a = (options.check('nn.GELU', options.positional('nn.GELU', POSITIONAL, ...), OPTS) or {}).approximate
  if a ~= nil and a ~= 'none' and a ~= 'tanh' then
    options.fail('nn.GELU', "approximate must be 'none' or 'tanh', got '" .. a .. "'")
  end
  self.approximate = a or 'none'
end

function GELU:forward(x) return F.gelu(x, self.approximate) end

function GELU:extra_repr() if self.approximate ~= 'none' then return "approximate '" .. self.approximate .. "'" end end

return GELU
