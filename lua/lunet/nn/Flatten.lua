-- nn.Flatten([start_dim = 2, end_dim = -1]): keeps the batch dim
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'

local Flatten = Module:extend('nn.Flatten')

function Flatten:__init(s, e) self.start_dim, self.end_dim = s or 2, e or -1 end

function Flatten:forward(x) return F.flatten(x, self.start_dim, self.end_dim) end

function Flatten:extra_repr()
  if self.start_dim ~= 2 or self.end_dim ~= -1 then return ('%d..%d'):format(self.start_dim, self.end_dim) end
end

return Flatten
