-- lunet.data.FashionMNIST{root=..., train=true}, lunet.data.MNIST{...} and
-- KMNIST{...} (EMNIST: lunet/data/EMNIST.lua): the IDX files (gzip or plain;
-- under root, or torchvision's root/<Name>/raw) as an image TensorDataset: x uint8
-- (N,1,28,28), y int64 labels 1..10. Samples and batches come out as float32
-- in [0,1]. Debian's dataset-fashion-mnist installs the files at the default
-- root. The decoded files are cached (weakly) so several datasets share them.
-- PyTorch's positional (root[, train]) works too; lunet never downloads
-- (download = true is an error saying where the files come from).
local core = require 'lunet.core'
local typename = core.typename
local T = require 'lunet.tensor'
local TensorDataset = require 'lunet.data.TensorDataset'
local serialize = require 'lunet.serialize'
local options = require 'lunet.options'
local C = core.C

local M = {}

-- IDX file -> tensor (uint8 for ubyte files); errors name the file.
function M.read_idx(path)
  if type(path) ~= 'string' then error('read_idx: path must be a string', 2) end
  serialize.no_nul('read_idx', 'the path', path, 2)
  return T.wrap(C.ln_idx_read(path))
end

local exists = serialize.exists   -- (io.open would wait on a FIFO)

-- root/name(.gz), else torchvision's root/<sub>/raw/name(.gz)
local function find(fn, root, sub, name)
  root = root:gsub('/+$', '')
  for _, dir in ipairs({ root, root .. '/' .. sub .. '/raw' }) do
    local base = dir .. '/' .. name
    if exists(base .. '.gz') then return base .. '.gz' end
    if exists(base) then return base end
  end
  error(('%s: cannot find %s.gz (or %s) under %s or %s/%s/raw; pass root = the folder that holds the IDX files')
    :format(fn, name, name, root, root, sub), 4)
end

local cache = setmetatable({}, { __mode = 'v' })

local function load(fn, root, iname, lname)
  local ipath = find(fn, root, fn, iname)
  local lpath = find(fn, root, fn, lname)
  local key = ipath .. '\0' .. lpath
  local hit = cache[key]
  if hit then return hit.x, hit.y end
  local images, labels = M.read_idx(ipath), M.read_idx(lpath)
  if images.dtype ~= 'uint8' or images:dim() ~= 3 then
    error(('%s: %s holds a %d-d %s array, expected uint8 images (N,H,W)'):format(fn, ipath, images:dim(), images.dtype), 3)
  end
  if labels.dtype ~= 'uint8' or labels:dim() ~= 1 then
    error(('%s: %s holds a %d-d %s array, expected uint8 labels (N)'):format(fn, lpath, labels:dim(), labels.dtype), 3)
  end
  if labels:size(1) ~= images:size(1) then
    error(('%s: %s has %d images but %s has %d labels'):format(fn, ipath, images:size(1), lpath, labels:size(1)), 3)
  end
  local x = images:view(images:size(1), 1, images:size(2), images:size(3))
  local y = labels:long() + 1       -- Lua class labels are 1-based
  cache[key] = { x = x, y = y }
  return x, y
end

-- the MNIST files' names: {train, test} prefixes
local function mnist_files(opts, train)
  local split = train and 'train' or 't10k'
  return split .. '-images-idx3-ubyte', split .. '-labels-idx1-ubyte'
end

local OPTS = { root = true, train = 'boolean', transform = 'table|function', download = 'boolean' }
local POSITIONAL = { 'root', 'train' }

-- A dataset class of IDX files; spec (EMNIST's): opts/positional (extra
-- options), files(opts, train) -> image and label file names, init(self, opts)
function M.maker(name, default_root, classes, source, spec)
  spec = spec or {}
  local cls = TensorDataset:extend(name)
  cls.default_root = default_root
  cls.classes = classes
  local known, positional, files = spec.opts or OPTS, spec.positional or POSITIONAL, spec.files or mnist_files
  function cls:__init(...)
    local opts = options.check(name, options.positional(name, positional, ...), known) or {}
    if opts.download then
      options.fail(name, ('lunet does not download datasets (download = true); %s; then pass root = their folder')
        :format(source))
    end
    if spec.init then spec.init(self, opts) end
    local root = opts.root or default_root
    if type(root) ~= 'string' then error(('%s: root must be a string, got %s'):format(name, typename(root)), 3) end
    serialize.no_nul(name, 'root', root, 3)
    local train = opts.train ~= false
    local x, y = load(name, root, files(opts, train))
    TensorDataset.__init(self, x, y, { image = true, transform = opts.transform })
    self.root, self.train = root, train
  end
  function cls:__tostring()
    return ('%s(%s%s, %d samples, root %s)'):format(name, self.split and self.split .. ', ' or '',
      self.train and 'train' or 'test', self:__len(), self.root)
  end
  return cls
end
local maker = M.maker

M.FashionMNIST = maker('FashionMNIST', '/usr/share/datasets/fashion-mnist',
  { 'T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot' },
  'on Debian `apt-get install dataset-fashion-mnist` puts the four IDX files in /usr/share/datasets/fashion-mnist ' ..
  '(the default root); elsewhere get them from https://github.com/zalandoresearch/fashion-mnist (data/fashion)')
M.MNIST = maker('MNIST', '/usr/share/datasets/mnist',
  { '0', '1', '2', '3', '4', '5', '6', '7', '8', '9' },
  'get the four IDX files (train-images-idx3-ubyte.gz, ...) from http://yann.lecun.com/exdb/mnist/ ' ..
  '(the default root is /usr/share/datasets/mnist)')

M.KMNIST = maker('KMNIST', 'data',
  { 'o', 'ki', 'su', 'tsu', 'na', 'ha', 'ma', 'ya', 're', 'wo' },
  'get the four IDX files (train-images-idx3-ubyte.gz, ...) from http://codh.rois.ac.jp/kmnist/ ' ..
  "(the default root is 'data', searched as torchvision's data/KMNIST/raw too)")

return M
