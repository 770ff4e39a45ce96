-- lunet.data.CIFAR100{root=..., train=true, label_mode='fine'}: the binary
-- version's train.bin / test.bin (gzip or plain; under root or
-- root/cifar-100-binary) as an image TensorDataset: x uint8 (N,3,32,32), y
-- int64 fine labels 1..100 (torchvision's targets + 1), or with label_mode =
-- 'coarse' the 20 superclasses 1..20 (torchvision gives fine labels only;
-- Keras names this option label_mode). Both label tensors stay on the
-- dataset as fine_labels and coarse_labels. torchvision reads the python
-- (pickle) version instead: same images and labels, other files. PyTorch's
-- positional (root[, train]) works too; lunet never downloads.
local ffi = require 'ffi'
local core = require 'lunet.core'
local typename = core.typename
local T = require 'lunet.tensor'
local TensorDataset = require 'lunet.data.TensorDataset'
local serialize = require 'lunet.serialize'
local options = require 'lunet.options'
local cifar10 = require 'lunet.data.CIFAR10'
local C = core.C

local M = {}

-- CIFAR-100 binary files -> images uint8 (N,3,32,32), fine and coarse labels int64 (1-based)
function M.read_cifar100(paths)
  local n, cpaths = cifar10.c_paths('read_cifar100', paths)
  local pi, pc, pf = ffi.new('ln_tensor *[1]'), ffi.new('ln_tensor *[1]'), ffi.new('ln_tensor *[1]')
  if C.ln_cifar100_read(n, cpaths, pi, pc, pf) ~= 0 then core.raise() end
  return T.wrap(pi[0]), T.wrap(pf[0]):add_(1), T.wrap(pc[0]):add_(1)
end

local FINE = { 'apple', 'aquarium_fish', 'baby', 'bear', 'beaver', 'bed', 'bee', 'beetle', 'bicycle', 'bottle',
  'bowl', 'boy', 'bridge', 'bus', 'butterfly', 'camel', 'can', 'castle', 'caterpillar', 'cattle', 'chair',
  'chimpanzee', 'clock', 'cloud', 'cockroach', 'couch', 'crab', 'crocodile', 'cup', 'dinosaur', 'dolphin',
  'elephant', 'flatfish', 'forest', 'fox', 'girl', 'hamster', 'house', 'kangaroo', 'keyboard', 'lamp',
  'lawn_mower', 'leopard', 'lion', 'lizard', 'lobster', 'man', 'maple_tree', 'motorcycle', 'mountain', 'mouse',
  'mushroom', 'oak_tree', 'orange', 'orchid', 'otter', 'palm_tree', 'pear', 'pickup_truck', 'pine_tree', 'plain',
  'plate', 'poppy', 'porcupine', 'possum', 'rabbit', 'raccoon', 'ray', 'road', 'rocket', 'rose', 'sea', 'seal',
  'shark', 'shrew', 'skunk', 'skyscraper', 'snail', 'snake', 'spider', 'squirrel', 'streetcar', 'sunflower',
  'sweet_pepper', 'table', 'tank', 'telephone', 'television', 'tiger', 'tractor', 'train', 'trout', 'tulip',
  'turtle', 'wardrobe', 'whale', 'willow_tree', 'wolf', 'woman', 'worm' }
local COARSE = { 'aquatic_mammals', 'fish', 'flowers', 'food_containers', 'fruit_and_vegetables',
  'household_electrical_devices', 'household_furniture', 'insects', 'large_carnivores',
  'large_man-made_outdoor_things', 'large_natural_outdoor_scenes', 'large_omnivores_and_herbivores',
  'medium_mammals', 'non-insect_invertebrates', 'people', 'reptiles', 'small_mammals', 'trees', 'vehicles_1',
  'vehicles_2' }

local CIFAR100 = TensorDataset:extend('CIFAR100')
CIFAR100.default_root = 'data/cifar-100-binary'
CIFAR100.classes = FINE
CIFAR100.coarse_classes = COARSE

local OPTS = { root = true, train = 'boolean', transform = 'table|function', label_mode = 'string',
  download = 'boolean' }
local POSITIONAL = { 'root', 'train' }

function CIFAR100:__init(...)
  local opts = options.check('CIFAR100', options.positional('CIFAR100', POSITIONAL, ...), OPTS) or {}
  if opts.download then
    options.fail('CIFAR100', 'lunet does not download datasets (download = true); get the binary version ' ..
      '(cifar-100-binary.tar.gz) from https://www.cs.toronto.edu/~kriz/cifar.html, unpack it and pass ' ..
      "root = the folder that holds cifar-100-binary (default root: '" .. CIFAR100.default_root .. "')")
  end
  local mode = opts.label_mode or 'fine'
  options.one_of('CIFAR100', 'label_mode', mode, { 'fine', 'coarse' })
  local root = opts.root or CIFAR100.default_root
  if type(root) ~= 'string' then error('CIFAR100: root must be a string, got ' .. typename(root), 3) end
  serialize.no_nul('CIFAR100', 'root', root, 3)
  local train = opts.train ~= false
  local path = cifar10.locate('CIFAR100', root, 'cifar-100-binary', train and 'train.bin' or 'test.bin')
  local ok, images, fine, coarse = pcall(M.read_cifar100, path)
  if not ok then error(images, 3) end
  TensorDataset.__init(self, images, mode == 'fine' and fine or coarse, { image = true, transform = opts.transform })
  self.root, self.train, self.label_mode = root, train, mode
  self.fine_labels, self.coarse_labels = fine, coarse
  if mode == 'coarse' then self.classes = COARSE end
end

function CIFAR100:__tostring()
  return ('CIFAR100(%s, %s labels, %d samples, root %s)'):format(self.train and 'train' or 'test', self.label_mode,
    self:__len(), self.root)
end

M.CIFAR100 = CIFAR100
return M
