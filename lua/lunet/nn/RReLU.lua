-- nn.RReLU([lower = 1/8[, upper = 1/3[, inplace = false]]]) or nn.RReLU{lower, upper, inplace}:
-- x where x > 0, else x times a slope drawn uniformly in [lower, upper] per
-- element in training (lunet's RNG), (lower + upper) / 2 in eval, as torch's
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local RReLU = Module:extend('nn.RReLU')

local OPTS, POSITIONAL = { lower = 'number', upper = 'number', inplace = 'boolean' }, { 'lower', 'upper', 'inplace' }

function RReLU:__init(...)
  local o = options.check('nn.RReLU', options.positional('nn.RReLU', POSITIONAL, ...), OPTS) or {}
  self.lower, self.upper, self.inplace = o.lower or 1 / 8, o.upper or 1 / 3, o.inplace == true
  if not (self.lower <= self.upper) then
    options.fail('nn.RReLU', ('lower (%s) must be <= upper (%s)'):format(self.lower, self.upper))
  end
end

function RReLU:forward(x) return F.rrelu(x, self.lower, self.upper, self.training, self.inplace) end

function RReLU:extra_repr()
  return ('lower %g, upper %g%s'):format(self.lower, self.upper, self.inplace and ', inplace' or '')
end

return RReLU
