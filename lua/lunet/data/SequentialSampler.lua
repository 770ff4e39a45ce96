-- lunet.data.SequentialSampler(ds): indices 1..#ds in order, every epoch.
local Sampler = require 'lunet.data.Sampler'
local len = require('lunet.data.Subset').len

local SequentialSampler = Sampler:extend('SequentialSampler')

function SequentialSampler:__init(ds)
  if ds == nil then error('SequentialSampler: dataset is nil', 3) end
  self.n = len(ds)
end

function SequentialSampler:__len() return self.n end
function SequentialSampler:fill(out) for k = 0, self.n - 1 do out[k] = k end end

return SequentialSampler
