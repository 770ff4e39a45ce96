-- lunet.data.FashionMNIST{root=..., train=true} and lunet.data.MNIST{...}:
-- the IDX files (gzip or plain) as an image TensorDataset: x uint8
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

-- root/name.gz, else root/name
local function find(fn, root, name)
  local base = root:gsub('/+$', '') .. '/' .. name
  if exists(base .. '.gz') then return base .. '.gz' end
  if exists(base) then return base end
  error(('%s: cannot find %s.gz (or %s) under %s; pass root = the folder that holds the IDX files')
    :format(fn, name, name, root), 4)
end

local cache = setmetatable({}, { __mode = 'v' })

local function load(fn, root, train)
  local split = train and 'train' or 't10k'
  local ipath = find(fn, root, split .. '-images-idx3-ubyte')
  local lpath = find(fn, root, split .. '-labels-idx1-ubyte')
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

local OPTS = { root = true, train = 'boolean', transform = 'table|function', download = 'boolean' }
local POSITIONAL = { 'root', 'train' }

local function maker(name, default_root, classes, source)
  local cls = TensorDataset:extend(name)
  cls.default_root = default_root
  cls.classes = classes
  function cls:__init(...)
    local opts = options.check(name, options.positional(name, POSITIONAL, ...), OPTS) or {}
    if opts.download then
      options.fail(name, ('lunet does not download datasets (download = true); %s; then pass root = their folder')
        :format(source))
    end
    local root = opts.root or default_root
    if type(root) ~= 'string' then error(('%s: root must be a string, got %s'):format(name, typename(root)), 3) end
    serialize.no_nul(name, 'root', root, 3)
    local train = opts.train ~= false
    local x, y = load(name, root, train)
    TensorDataset.__init(self, x, y, { image = true, transform = opts.transform })
    self.root, self.train = root, train
  end
  function cls:__tostring()
    return ('%s(%s, %d samples, root %s)'):format(name, self.train and 'train' or 'test', self:__len(), self.root)
  end
  return cls
end

M.FashionMNIST = maker('FashionMNIST', '/usr/share/datasets/fashion-mnist',
  { 'T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot' },
  'on Debian `apt-get install dataset-fashion-mnist` puts the four IDX files in /usr/share/datasets/fashion-mnist ' ..
  '(the default root); elsewhere get them from https://github.com/zalandoresearch/fashion-mnist (data/fashion)')
M.MNIST = maker('MNIST', '/usr/share/datasets/mnist',
  { '0', '1', '2', '3', '4', '5', '6', '7', '8', '9' },
  'get the four IDX files (train-images-idx3-ubyte.gz, ...) from http://yann.lecun.com/exdb/mnist/ ' ..
  '(the default root is /usr/share/datasets/mnist)')

return M
