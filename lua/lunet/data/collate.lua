-- lunet.data.collate: batches of datasets defined in Lua (ds:get(i) per
-- sample), stacked into fresh tensors on the calling thread. Numbers become
-- an int64 tensor (float32 if any is fractional); tensors are stacked along a
-- new first dim. A loader's transforms object then runs on the stacked
-- float images in C; a Lua function transform runs on each sample first.
local ffi = require 'ffi'
local core = require 'lunet.core'
local typename = core.typename
local T = require 'lunet.tensor'
local transforms = require 'lunet.data.transforms'
local C = core.C
-- (at the user's line: the loop over the loader, however deep the batch is made)
local raise = require('lunet.options').raise

local M = {}

-- items[1..m] (numbers or same-shaped tensors) -> one tensor (m, ...)
function M.stack(items, m, what)
  local first = items[1]
  local lunet = require 'lunet'
  if type(first) == 'number' or type(first) == 'boolean' then
    local buf, integral = ffi.new('double[?]', m), true
    for k = 1, m do
      local v = items[k]
      if type(v) == 'boolean' then v = v and 1 or 0 end
      if type(v) ~= 'number' then raise(('DataLoader: sample %d %s is %s, sample 1 a number'):format(k, what, typename(v))) end
      buf[k - 1] = v
      if v % 1 ~= 0 then integral = false end
    end
    return lunet.from_buffer(buf, { m }, 'float64'):to(integral and 'int64' or 'float32')
  end
  if not T.is_tensor(first) then
    raise(('DataLoader: a sample %s must be a number or a tensor, got %s'):format(what, typename(first)))
  end
  local size = first:size()
  local shape = { m }
  for d = 1, #size do shape[d + 1] = size[d] end
  local out = lunet.empty(shape, { dtype = first.dtype })
  for k = 1, m do
    local v = items[k]
    if not T.is_tensor(v) or v:dim() ~= #size then
      raise(('DataLoader: sample %d %s does not match sample 1 (shape {%s})'):format(k, what, table.concat(size, ',')))
    end
    for d = 1, #size do
      if v:size(d) ~= size[d] then
        raise(('DataLoader: sample %d %s has shape {%s}, sample 1 {%s}'):format(k, what,
          table.concat(v:size(), ','), table.concat(size, ',')))
      end
    end
    out:select(1, k):copy_(v)
  end
  return out
end

-- torch's default_collate for a list of samples {x, y} (or {x}): the inputs
-- stacked, then the targets stacked.
function M.default_collate(samples)
  if type(samples) ~= 'table' or #samples == 0 then
    raise('default_collate: expected a non-empty list of samples, got ' .. typename(samples))
  end
  local m, xs, ys = #samples, {}, {}
  for k = 1, m do
    local s = samples[k]
    if type(s) ~= 'table' or T.is_tensor(s) then raise(('default_collate: sample %d is %s, not a list {x, y}'):format(k, typename(s))) end
    xs[k], ys[k] = s[1], s[2]
  end
  if ys[1] == nil then return M.stack(xs, m, 'input') end
  return M.stack(xs, m, 'input'), M.stack(ys, m, 'target')
end

-- samples order[first ..] as a list of {x, y} (a table each: only with collate_fn), through collate_fn
local function with_collate_fn(self, first, m)
  local ds, samples = self.source, {}
  for k = 1, m do
    local s = { ds:get(tonumber(self.order[first + k - 1]) + 1) }
    if self.sample_transform then s[1] = self.sample_transform(s[1]) end
    samples[k] = s
  end
  return self.collate_fn(samples)
end

-- Batch b (0-based) of loader `self`: rows self.order[b*B ...] of self.source
-- (a batch_sampler's: self.order[offs[b] .. offs[b+1])).
function M.batch(self, b)
  local B, ds = self.batch_size, self.source
  local first, m
  if self.offs then
    first = tonumber(self.offs[b]); m = tonumber(self.offs[b + 1]) - first
  else
    first = b * B; m = math.min(B, self.n - first)
  end
  if self.collate_fn then return with_collate_fn(self, first, m) end
  local xs, ys, has_y = {}, {}, false
  for k = 1, m do
    local i = tonumber(self.order[first + k - 1]) + 1
    local x, y
    if self.folder_tf ~= nil or ds.get_transformed then x, y = ds:get_transformed(i, self.folder_tf, self.seed, self.epoch)
    else x, y = ds:get(i) end
    if self.sample_transform then x = self.sample_transform(x) end
    xs[k], ys[k] = x, y
    if y ~= nil then has_y = true end
  end
  local x = M.stack(xs, m, 'input')
  if self.transform ~= nil and not self.sample_transform then
    if x:dim() ~= 4 then raise(('DataLoader: transforms need image samples (C,H,W), got %d-d'):format(x:dim() - 1)) end
    local tf = transforms.compile(self.transform, x.dtype)
    local idx = ffi.new('int64_t[?]', m)
    for k = 0, m - 1 do idx[k] = k end
    local shape, dt = ffi.new('int64_t[8]'), ffi.new('int[1]')
    local nd = C.ln_batch_shape(x.p, tf, m, shape, dt)
    if nd < 0 then core.raise() end
    local out = T.wrap(C.ln_empty(nd, shape, dt[0], 0))
    if C.ln_batch_gather(out.p, nil, x.p, nil, idx, self.order + first, m, tf, self.seed, self.epoch) ~= 0 then
      core.raise()
    end
    x = out
  end
  if has_y then return x, M.stack(ys, m, 'target') end
  return x
end

return M
