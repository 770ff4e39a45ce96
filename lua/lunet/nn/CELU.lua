-- nn.CELU([alpha = 1[, inplace = false]]) or nn.CELU{alpha, inplace}: x if x > 0
-- else alpha (exp(x / alpha) - 1); inplace overwrites the input and returns it
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local CELU = Module:extend('nn.CELU')

local OPTS, POSITIONAL = { alpha = 'number', inplace = 'boolean' }, { 'alpha', 'inplace' }

function CELU:__init(...)
  local o = options.check('nn.CELU', options.positional('nn.CELU', POSITIONAL, ...), OPTS) or {}
  self.alpha, self.inplace = o.alpha or 1, o.inplace == true
  if self.alpha == 0 then options.fail('nn.CELU', 'alpha cannot be 0') end
end

function CELU:forward(x) return F.celu(x, self.alpha, self.inplace) end

function CELU:extra_repr() return 'alpha ' .. self.alpha .. (self.inplace and ', inplace' or '') end

return CELU
