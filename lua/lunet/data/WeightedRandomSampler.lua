-- lunet.data.WeightedRandomSampler(weights, num_samples[, {replacement = true, seed}]):
-- num_samples indices in 1..#weights, index i drawn with probability
-- proportional to weights[i] (a list or a tensor of finite values >= 0), as
-- torch's. Without replacement an index comes at most once (num_samples at
-- most the non-zero weights). Draws are keyed by (seed, epoch).
local ffi = require 'ffi'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local Sampler = require 'lunet.data.Sampler'
local options = require 'lunet.options'
local C = core.C

local WeightedRandomSampler = Sampler:extend('WeightedRandomSampler')
local OPTS = { replacement = 'boolean', seed = 'number' }

function WeightedRandomSampler:__init(weights, num_samples, opts)
  local fn = 'WeightedRandomSampler'
  opts = options.check(fn, opts, OPTS) or {}
  local m, w
  if T.is_tensor(weights) then
    if weights:dim() ~= 1 then error(fn .. ': weights must be 1-d', 3) end
    local buf
    buf, m = weights:double():read()
    w = ffi.new('double[?]', math.max(m, 1))
    ffi.copy(w, buf, m * 8)
  elseif is_table(weights) then
    m = #weights
    w = ffi.new('double[?]', math.max(m, 1))
    for k = 1, m do
      if type(weights[k]) ~= 'number' then error(('%s: weights[%d] is %s, not a number'):format(fn, k, typename(weights[k])), 3) end
      w[k - 1] = weights[k]
    end
  else
    error(fn .. ': weights must be a list or a tensor, got ' .. typename(weights), 3)
  end
  if type(num_samples) ~= 'number' or num_samples % 1 ~= 0 or num_samples < 1 or num_samples >= 2 ^ 40 then
    error(('%s: num_samples must be a positive integer, got %s'):format(fn, tostring(num_samples)), 3)
  end
  local total, positive = 0, 0
  for k = 0, m - 1 do
    local v = w[k]
    if not (v >= 0) or v == math.huge then error(('%s: weights[%d] is %s: weights must be finite and >= 0'):format(fn, k + 1, tostring(v)), 3) end
    total, positive = total + v, positive + (v > 0 and 1 or 0)
  end
  if not (total > 0) or total == math.huge then error(fn .. ': the weights must have a finite, positive sum', 3) end
  self.replacement = opts.replacement ~= false
  if not self.replacement and num_samples > positive then
    error(('%s: cannot draw %d samples without replacement from %d non-zero weights'):format(fn, num_samples, positive), 3)
  end
  self.weights, self.size, self.n = w, m, num_samples
  if opts.seed ~= nil then self.seed = options.seed(fn, 'seed', opts.seed) end
end

function WeightedRandomSampler:__len() return self.n end

function WeightedRandomSampler:fill(out, seed, epoch)
  if C.ln_data_sample(out, self.n, self.size, self.weights, self.replacement and 1 or 0, self.seed or seed, epoch) ~= 0 then
    core.raise()
  end
end

function WeightedRandomSampler:__tostring()
  return ('WeightedRandomSampler(%d of %d weights, replacement %s)'):format(self.n, self.size, tostring(self.replacement))
end

return WeightedRandomSampler
