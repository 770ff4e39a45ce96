-- lunet.data.SubsetRandomSampler(indices[, {seed}]): the given 1-based
-- indices (a list or an integer tensor) in a random order each epoch, keyed
-- by (seed, epoch): the loader's seed unless this sampler has its own.
local core = require 'lunet.core'
local Sampler = require 'lunet.data.Sampler'
local options = require 'lunet.options'
local C = core.C

local SubsetRandomSampler = Sampler:extend('SubsetRandomSampler')

function SubsetRandomSampler:__init(indices, opts)
  opts = options.check('SubsetRandomSampler', opts, { seed = 'number' }) or {}
  self.map, self.n = Sampler.index_array('SubsetRandomSampler', 'indices', indices)
  if opts.seed ~= nil then self.seed = options.seed('SubsetRandomSampler', 'seed', opts.seed) end
end

function SubsetRandomSampler:__len() return self.n end

function SubsetRandomSampler:fill(out, seed, epoch)
  if C.ln_data_permutation(out, self.n, self.seed or seed, epoch) ~= 0 then core.raise() end
  local map = self.map
  for k = 0, self.n - 1 do out[k] = map[out[k]] end
end

return SubsetRandomSampler
