-- lunet.data.RandomSampler(ds[, {replacement = false, num_samples = #ds, seed}]):
-- random indices of ds, as torch's. Without replacement an epoch is a
-- permutation (num_samples past #ds: whole permutations one after another,
-- the last one cut); with replacement num_samples independent uniform draws.
-- The draws are a function of (seed, epoch): the loader's seed unless this
-- sampler has its own.
local core = require 'lunet.core'
local Sampler = require 'lunet.data.Sampler'
local options = require 'lunet.options'
local len = require('lunet.data.Subset').len
local C = core.C

local RandomSampler = Sampler:extend('RandomSampler')
local OPTS = { replacement = 'boolean', num_samples = 'number', seed = 'number' }

function RandomSampler:__init(ds, opts)
  if ds == nil then error('RandomSampler: dataset is nil', 3) end
  opts = options.check('RandomSampler', opts, OPTS) or {}
  self.size = len(ds)
  self.replacement = opts.replacement and true or false
  local n = opts.num_samples
  if n ~= nil and (n % 1 ~= 0 or n < 1 or n >= 2 ^ 40) then
    error(('RandomSampler: num_samples must be a positive integer, got %s'):format(tostring(n)), 3)
  end
  self.n = n or self.size
  if self.size == 0 and self.n > 0 then error('RandomSampler: cannot draw from an empty dataset', 3) end
  if opts.seed ~= nil then self.seed = options.seed('RandomSampler', 'seed', opts.seed) end
end

function RandomSampler:__len() return self.n end

function RandomSampler:fill(out, seed, epoch)
  if C.ln_data_sample(out, self.n, self.size, nil, self.replacement and 1 or 0, self.seed or seed, epoch) ~= 0 then
    core.raise()
  end
end

function RandomSampler:__tostring()
  return ('RandomSampler(%d of %d, replacement %s)'):format(self.n, self.size, tostring(self.replacement))
end

return RandomSampler
