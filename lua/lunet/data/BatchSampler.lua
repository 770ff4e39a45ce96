-- lunet.data.BatchSampler(sampler, batch_size, drop_last): a sampler's
-- indices cut into batches of batch_size (the last one shorter, or dropped
-- with drop_last), as torch's. Give it to a DataLoader as batch_sampler =
-- (then without batch_size, shuffle, sampler and drop_last, as torch).
--   for batch in bs:iter() do ... end   -- lists of 1-based indices, an epoch
-- sampler: any a DataLoader takes (a data sampler, a list of indices, an
-- object with indices(seed, epoch)). Your own batch sampler is an object
-- with a length (its batches) and batches(seed, epoch) returning a list of
-- lists of indices; a dataset batched in C also needs its batch_size field
-- (the largest batch: the loader's buffers hold that many rows).
local ffi = require 'ffi'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local Dataset = require 'lunet.data.Dataset'
local Sampler = require 'lunet.data.Sampler'
local options = require 'lunet.options'
local len = require('lunet.data.Subset').len

local BatchSampler = Dataset.class('BatchSampler')

function BatchSampler:__init(sampler, batch_size, drop_last)
  local fn = 'BatchSampler'
  if sampler == nil then error(fn .. ': sampler is nil', 3) end
  self.sampler = Sampler.wrap(fn, sampler)
  if type(batch_size) ~= 'number' or batch_size % 1 ~= 0 or batch_size < 1 then
    error(('%s: batch_size must be a positive integer, got %s'):format(fn, tostring(batch_size)), 3)
  end
  if drop_last ~= nil and type(drop_last) ~= 'boolean' then
    error(fn .. ': drop_last must be a boolean, got ' .. typename(drop_last), 3)
  end
  self.batch_size, self.drop_last = batch_size, drop_last and true or false
  self.num_samples = len(self.sampler)
  self.nb = self.drop_last and math.floor(self.num_samples / batch_size) or math.ceil(self.num_samples / batch_size)
  self.order = ffi.new('int64_t[?]', math.max(self.num_samples, 1))   -- reused every epoch
  self.offs = ffi.new('int64_t[?]', self.nb + 1)
  for b = 0, self.nb do self.offs[b] = math.min(b * batch_size, self.num_samples) end
end

function BatchSampler:__len() return self.nb end

-- This epoch's 0-based order and batch offsets (batch b: order[offs[b] .. offs[b+1])).
function BatchSampler:plan(seed, epoch)
  self.sampler:fill(self.order, seed, epoch)
  return self.order, self.offs, self.nb
end

function BatchSampler:batches(seed, epoch)
  if seed ~= nil then options.seed('BatchSampler:batches', 'seed', seed) end
  local order, offs, nb = self:plan(seed or Sampler.own_seed(self.sampler), epoch or 1)
  local out = {}
  for b = 0, nb - 1 do
    local batch = {}
    for k = tonumber(offs[b]), tonumber(offs[b + 1]) - 1 do batch[#batch + 1] = tonumber(order[k]) + 1 end
    out[b + 1] = batch
  end
  return out
end

function BatchSampler:iter()
  self.iters = (self.iters or 0) + 1
  local list, k = self:batches(nil, self.iters), 0
  return function() k = k + 1; return list[k] end
end

function BatchSampler:__tostring()
  return ('BatchSampler(%d batches of %d, drop_last %s, %s)'):format(self.nb, self.batch_size,
    tostring(self.drop_last), tostring(self.sampler))
end

-- Your own batch sampler (or a fixed list of lists) as one with plan().
local Custom = Dataset.class('CustomBatchSampler')
function Custom:__init(bs)
  self.inner = bs
  if is_table(bs) and getmetatable(bs) == nil then self.fixed, self.nb = bs, #bs else self.nb = len(bs) end
  if self.fixed then   -- (its largest batch sizes the loader's buffers)
    local m = 0
    for _, batch in ipairs(bs) do if is_table(batch) then m = math.max(m, #batch) end end
    self.batch_size = math.max(m, 1)
  elseif type(bs.batch_size) == 'number' then
    self.batch_size = bs.batch_size
  end
  self.offs = ffi.new('int64_t[?]', self.nb + 1)
end
function Custom:__len() return self.nb end
function Custom:plan(seed, epoch)
  local list = self.fixed or self.inner:batches(seed, epoch)
  if not is_table(list) or #list ~= self.nb then
    options.fail('DataLoader', ('batch_sampler:batches() must give a list of %d batches, got %s'):format(
      self.nb, is_table(list) and #list .. ' batches' or typename(list)))
  end
  local n = 0
  for b = 1, self.nb do
    local batch = list[b]
    if not is_table(batch) or #batch == 0 then options.fail('DataLoader', ('batch_sampler: batch %d is not a non-empty list'):format(b)) end
    n = n + #batch
  end
  if not self.order or self.cap < n then self.order, self.cap = ffi.new('int64_t[?]', math.max(n, 1)), n end
  local o, offs = self.order, self.offs
  offs[0] = 0
  for b = 1, self.nb do
    local a, m = Sampler.index_array('DataLoader', ('batch_sampler: batch %d'):format(b), list[b])
    ffi.copy(o + offs[b - 1], a, m * 8)
    offs[b] = offs[b - 1] + m
  end
  return o, offs, self.nb
end
function Custom:__tostring() return tostring(self.inner) end

function BatchSampler.wrap(fname, bs)
  if Dataset.is_a(bs, BatchSampler) then return bs end
  if is_table(bs) and getmetatable(bs) == nil then return Custom(bs) end
  local ok, f = pcall(function() return bs.batches end)
  if (type(bs) == 'userdata' or is_table(bs)) and ok and type(f) == 'function' then return Custom(bs) end
  options.fail(fname, 'batch_sampler must be a data.BatchSampler, a list of lists of indices or an object with batches(seed, epoch), got '
    .. typename(bs))
end

return BatchSampler
