-- nn.PReLU([num_parameters = 1[, init = 0.25]][, {dtype, device}]): x where
-- x > 0, else a x, a a learned parameter `weight` of num_parameters values:
-- one for all, or one per channel (dim 2 of the input)
local lunet = require 'lunet'
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local PReLU = Module:extend('nn.PReLU')

local OPTS = { num_parameters = 'number', init = 'number', dtype = true, device = true }
local POSITIONAL = { 'num_parameters', 'init' }

function PReLU:__init(...)
  local o = options.check('nn.PReLU', options.positional('nn.PReLU', POSITIONAL, ...), OPTS) or {}
  local n, init = o.num_parameters or 1, o.init or 0.25
  if not (n % 1 == 0 and n >= 1) then
    options.fail('nn.PReLU', 'num_parameters must be an integer >= 1, got ' .. tostring(n))
  end
  self.n_weights, self.init_value = n, init   -- (num_parameters is Module's count)
  self:register_parameter('weight', lunet.full({ n }, init, { dtype = o.dtype, device = o.device }))
end

function PReLU:reset_parameters()
  lunet.no_grad(function() self.weight:fill_(self.init_value) end)
end

function PReLU:forward(x) return F.prelu(x, self.weight) end

function PReLU:extra_repr() return 'num_parameters ' .. self.n_weights end

return PReLU
