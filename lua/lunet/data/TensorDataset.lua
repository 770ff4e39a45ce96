-- lunet.data.TensorDataset(x[, y][, opts]): samples are the rows of tensors.
-- ds:get(i) returns x's row i and y's row i (a number when y is 1-D).
-- A 4-D uint8 x is an image set (opts.image defaults to that): its samples
-- come out as float32 in [0,1] (C,H,W), and the DataLoader assembles its
-- batches in C (threads, transforms). opts.transform applies to ds:get (its
-- random choices keyed by seed 0, epoch 0 and the index) and is the
-- DataLoader's default transform.
local ffi = require 'ffi'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local Dataset = require 'lunet.data.Dataset'
local transforms = require 'lunet.data.transforms'
local options = require 'lunet.options'
local C = core.C

local TensorDataset = Dataset:extend('TensorDataset')

local function as_tensor(fn, v, what)
  if T.is_tensor(v) then return v end
  if is_table(v) then return require('lunet').tensor(v, { dtype = 'int64' }) end
  error(('%s: %s must be a tensor, got %s'):format(fn, what, typename(v)), 4)
end

local OPTS = { image = 'boolean', transform = 'table|function' }

function TensorDataset:__init(x, y, opts)
  local fn = self.__name
  if is_table(y) and opts == nil and y[1] == nil then opts, y = y, nil end
  opts = options.check(fn, opts, OPTS) or {}
  x = as_tensor(fn, x, 'x')
  if x:dim() < 1 then error(fn .. ': x needs a first (sample) dim', 3) end
  if x.device ~= 'cpu:0' then x = x:to('cpu:0') end
  self.x = x:contiguous()
  if y ~= nil then
    y = as_tensor(fn, y, 'y')
    if y:dim() < 1 or y:size(1) ~= x:size(1) then
      error(('%s: x has %d samples but y has %s'):format(fn, x:size(1), y:dim() > 0 and y:size(1) or 'none'), 3)
    end
    if y.device ~= 'cpu:0' then y = y:to('cpu:0') end
    self.y = y:contiguous()
  end
  if opts.image == nil then self.image = x.dtype == 'uint8' and x:dim() == 4
  else self.image = opts.image and true or false end
  if self.image and (x:dim() ~= 4 or (x.dtype ~= 'uint8' and x.dtype ~= 'float32')) then
    error(fn .. ': image data must be a uint8 or float32 (N,C,H,W) tensor', 3)
  end
  if opts.transform ~= nil then transforms.compile(opts.transform, x.dtype) end  -- check now
  self.transform = opts.transform
end

function TensorDataset:__len() return self.x:size(1) end

local idx_buf = ffi.new('int64_t[1]')
local shape_buf = ffi.new('int64_t[8]')
local dt_buf = ffi.new('int[1]')

-- A transformed image sample through the batch assembler (one row).
local function image_row(self, i)
  local tf = transforms.compile(self.transform, self.x.dtype)
  idx_buf[0] = i - 1
  local nd = C.ln_batch_shape(self.x.p, tf, 1, shape_buf, dt_buf)
  if nd < 0 then core.raise() end
  local out = T.wrap(C.ln_empty(nd, shape_buf, dt_buf[0], 0))
  if C.ln_batch_gather(out.p, nil, self.x.p, nil, idx_buf, nil, 1, tf, 0, 0) ~= 0 then core.raise() end
  return out:select(1, 1)
end

function TensorDataset:get(i)
  local n = self.x:size(1)
  if type(i) ~= 'number' or i % 1 ~= 0 or i < 1 or i > n then
    error(('%s:get: index %s out of range 1..%d'):format(self.__name, tostring(i), n), 2)
  end
  local x = (self.image or self.transform) and image_row(self, i) or self.x:select(1, i)
  local y = self.y
  if y == nil then return x end
  if y:dim() == 1 then return x, y:select(1, i):item() end
  return x, y:select(1, i)
end

function TensorDataset:__tostring()
  local s = ('%s(%d samples, x %s {%s}'):format(self.__name, self:__len(), self.x.dtype,
    table.concat(self.x:size(), ','))
  if self.y then s = s .. (', y %s {%s}'):format(self.y.dtype, table.concat(self.y:size(), ',')) end
  return s .. ')'
end

return TensorDataset
