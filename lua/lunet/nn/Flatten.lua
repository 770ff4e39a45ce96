-- nn.Flatten([start_dim = 2, end_dim = -1]) or nn.Flatten{start_dim = 2, end_dim = -1}:
-- keeps the batch dim (dims are 1-based)
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Flatten = Module:extend('nn.Flatten')

local OPTS, POSITIONAL = { start_dim = 'number', end_dim = 'number' }, { 'start_dim', 'end_dim' }

function Flatten:__init(...)
  local o = options.check('nn.Flatten', options.positional('nn.Flatten', POSITIONAL, ...), OPTS) or {}
  self.start_dim, self.end_dim = o.start_dim or 2, o.end_dim or -1
end

function Flatten:forward(x) return F.flatten(x, self.start_dim, self.end_dim) end

function Flatten:extra_repr()
  if self.start_dim ~= 2 or self.end_dim ~= -1 then return ('%d..%d'):format(self.start_dim, self.end_dim) end
end

return Flatten
