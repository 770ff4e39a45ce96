-- lunet.data.Synthetic{n=100, shape={3,32,32}, classes=10, seed=0}: random
-- uint8 images and random labels 1..classes, a function of the seed only
-- (like torchvision's FakeData). An image TensorDataset: samples and
-- batches come out as float32 in [0,1]; shape {D} gives float32 vectors.
local core = require 'lunet.core'
local is_table = core.is_table
local TensorDataset = require 'lunet.data.TensorDataset'
local options = require 'lunet.options'
local C = core.C

local Synthetic = TensorDataset:extend('Synthetic')

local OPTS = { n = 'number', shape = 'table', classes = 'number', seed = 'number', transform = 'table|function' }
-- torchvision's FakeData names: size (samples), image_size, num_classes
local ALIASES = { size = 'n', image_size = 'shape', num_classes = 'classes' }

function Synthetic:__init(opts)
  opts = options.check('Synthetic', opts, OPTS, ALIASES) or {}
  local lunet = require 'lunet'
  local n, shape, classes, seed = opts.n or 100, opts.shape or { 3, 32, 32 }, opts.classes or 10, opts.seed or 0
  for _, v in ipairs({ n, classes, seed }) do
    if type(v) ~= 'number' or v % 1 ~= 0 or v < 0 then error('Synthetic: n, classes and seed must be non-negative integers', 3) end
  end
  if classes < 1 then error('Synthetic: classes must be >= 1', 3) end
  if not is_table(shape) or #shape < 1 or #shape > 7 then error('Synthetic: shape must be a list of 1..7 sizes', 3) end
  local full = { n }
  for i, s in ipairs(shape) do full[i + 1] = s end
  -- draw from the global generator under our own seed, then put it back
  local off = require('ffi').new('uint64_t[1]')
  local old_seed = C.ln_rng_get_state(off)
  local old_off = off[0]
  C.ln_manual_seed(seed)
  local ok, x, y = pcall(function()
    local image = #shape == 3
    local x = image and lunet.randint(0, 256, full, { dtype = 'uint8' }) or lunet.randn(full)
    return x, lunet.randint(1, classes + 1, { n })
  end)
  C.ln_rng_set_state(old_seed, old_off)
  if not ok then error('Synthetic: ' .. tostring(x), 3) end
  TensorDataset.__init(self, x, y, { transform = opts.transform })
  self.classes, self.seed = classes, seed
end

function Synthetic:__tostring()
  return ('Synthetic(%d samples, x %s {%s}, %d classes, seed %d)'):format(self:__len(), self.x.dtype,
    table.concat(self.x:size(), ','), self.classes, self.seed)
end

return Synthetic
