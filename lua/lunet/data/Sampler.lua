-- lunet.data.Sampler: the order a DataLoader visits a dataset in (torch's
-- torch.utils.data.Sampler). A sampler has a length (#s, the indices per
-- epoch) and draws its order from (seed, epoch) only, so a loader gives the
-- same batches for the same seed and epoch at any worker count:
--
--   s:indices([seed, epoch])   -- a Lua list of 1-based dataset indices
--   for i in s:iter() do ... end  -- one epoch on its own (the next iter(): the next epoch)
--
-- Under a DataLoader the loader's seed and epoch are used, unless the
-- sampler was given its own seed. Built-in samplers also have
-- s:fill(out, seed, epoch), writing the 0-based indices into an int64_t
-- array (the loader's path: no Lua table per epoch). Your own sampler is
-- any object with a length and indices(seed, epoch) returning a list.
local ffi = require 'ffi'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local Dataset = require 'lunet.data.Dataset'
local options = require 'lunet.options'
local len = require('lunet.data.Subset').len

local Sampler = Dataset.class('Sampler')
Sampler.extend = Dataset.extend

-- the seed a sampler with none uses on its own (drawn once, from lunet's generator)
function Sampler:own_seed()
  if self.seed ~= nil then return self.seed end
  if self.drawn_seed == nil then self.drawn_seed = require('lunet').randint(0, 2 ^ 31 - 1, { 1 }):item() end
  return self.drawn_seed
end

function Sampler:indices(seed, epoch)
  if seed ~= nil then options.seed(self.__name .. ':indices', 'seed', seed) end
  local n = self:__len()
  local buf = ffi.new('int64_t[?]', math.max(n, 1))
  self:fill(buf, seed or self:own_seed(), epoch or 1)
  local out = {}
  for k = 1, n do out[k] = tonumber(buf[k - 1]) + 1 end
  return out
end

function Sampler:iter()
  self.iters = (self.iters or 0) + 1
  local list, k = self:indices(nil, self.iters), 0
  return function() k = k + 1; return list[k] end
end

function Sampler:__len() error(self.__name .. ': __len is not implemented', 2) end
function Sampler:__tostring() return ('%s(%d indices)'):format(self.__name, self:__len()) end

-- 0-based int64 copy of a list or 1-D integer tensor of 1-based indices (checked >= 1)
function Sampler.index_array(fname, what, v)
  local n, a
  if T.is_tensor(v) then
    if v:dim() ~= 1 then options.fail(fname, what .. ' must be a 1-d tensor or a list') end
    if v.dtype:match('float') then options.fail(fname, what .. ' must hold integers, got ' .. v.dtype) end
    local buf
    buf, n = v:long():read()
    a = ffi.new('int64_t[?]', math.max(n, 1))
    for k = 0, n - 1 do a[k] = buf[k] - 1 end
  elseif is_table(v) then
    n = #v
    a = ffi.new('int64_t[?]', math.max(n, 1))
    for k = 1, n do
      local i = v[k]
      if type(i) ~= 'number' or i % 1 ~= 0 then
        options.fail(fname, ('%s[%d] must be an integer, got %s'):format(what, k, type(i) == 'number' and tostring(i) or typename(i)))
      end
      a[k - 1] = i - 1
    end
  else
    options.fail(fname, what .. ' must be a list or a tensor of indices, got ' .. typename(v))
  end
  for k = 0, n - 1 do
    if a[k] < 0 then options.fail(fname, ('%s holds %d: indices are 1-based'):format(what, tonumber(a[k]) + 1)) end
  end
  return a, n
end

-- A fixed order (a list or tensor given as sampler), or your own sampler's indices().
local Fixed = Sampler:extend('FixedSampler')
function Fixed:__init(a, n) self.map, self.n = a, n end
function Fixed:__len() return self.n end
function Fixed:fill(out) ffi.copy(out, self.map, self.n * 8) end

local Custom = Sampler:extend('CustomSampler')
function Custom:__init(s) self.inner, self.n = s, len(s) end
function Custom:__len() return self.n end
function Custom:fill(out, seed, epoch)
  local a, n = Sampler.index_array('DataLoader', 'sampler:indices()', self.inner:indices(seed, epoch))
  if n ~= self.n then options.fail('DataLoader', ('sampler:indices() gave %d indices, its length is %d'):format(n, self.n)) end
  ffi.copy(out, a, n * 8)
end
function Custom:__tostring() return tostring(self.inner) end

-- Any sampler a loader or a BatchSampler accepts, as one with fill().
function Sampler.wrap(fname, s)
  if Dataset.is_a(s, Sampler) then return s end
  if T.is_tensor(s) or (is_table(s) and getmetatable(s) == nil) then
    return Fixed(Sampler.index_array(fname, 'sampler', s))
  end
  local ok, f = pcall(function() return s.indices end)
  if (type(s) == 'userdata' or is_table(s)) and ok and type(f) == 'function' then return Custom(s) end
  options.fail(fname, 'sampler must be a data sampler, a list of indices or an object with indices(seed, epoch), got '
    .. typename(s))
end

return Sampler
