-- lunet.data.CIFAR10{root=..., train=true}: the binary version's batches
-- (data_batch_1..5.bin for train, test_batch.bin for test; gzip or plain;
-- under root or root/cifar-10-batches-bin) as an image TensorDataset: x uint8
-- (N,3,32,32), y int64 labels 1..10. PyTorch's positional (root[, train])
-- works too; lunet never downloads (download = true is an error saying where
-- the files come from).
local ffi = require 'ffi'
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local TensorDataset = require 'lunet.data.TensorDataset'
local serialize = require 'lunet.serialize'
local options = require 'lunet.options'
local C = core.C

local M = {}

-- c_paths(fn, paths): a path or a list of paths as (n, const char *[n]) for
-- the C readers (CIFAR-10's and CIFAR-100's); errors at fn's caller
function M.c_paths(fn, paths)
  if type(paths) == 'string' then paths = { paths } end
  if not is_table(paths) or #paths == 0 then error(fn .. ': expected a path or a list of paths', 3) end
  local cpaths = ffi.new('const char *[?]', #paths)
  for i, p in ipairs(paths) do
    if type(p) ~= 'string' then error(('%s: path %d is not a string'):format(fn, i), 3) end
    serialize.no_nul(fn, ('path %d'):format(i), p, 3)
    cpaths[i - 1] = p
  end
  return #paths, cpaths
end

-- CIFAR-10 binary files -> images uint8 (N,3,32,32), labels int64 1..10
function M.read_cifar10(paths)
  local n, cpaths = M.c_paths('read_cifar10', paths)
  local pi, pl = ffi.new('ln_tensor *[1]'), ffi.new('ln_tensor *[1]')
  if C.ln_cifar10_read(n, cpaths, pi, pl) ~= 0 then core.raise() end
  local images, labels = T.wrap(pi[0]), T.wrap(pl[0])
  return images, labels:add_(1)
end

local exists = serialize.exists   -- (io.open would wait on a FIFO)

-- root/name or root/sub/name, plain or .gz (also CIFAR100's)
function M.locate(fn, root, sub, name)
  root = root:gsub('/+$', '')
  for _, dir in ipairs({ root, root .. '/' .. sub }) do
    for _, suffix in ipairs({ '', '.gz' }) do
      local p = dir .. '/' .. name .. suffix
      if exists(p) then return p end
    end
  end
  error(('%s: cannot find %s under %s (or %s/%s); pass root = the folder of the binary version')
    :format(fn, name, root, root, sub), 4)
end
local function locate(root, name) return M.locate('CIFAR10', root, 'cifar-10-batches-bin', name) end

local CIFAR10 = TensorDataset:extend('CIFAR10')
CIFAR10.default_root = 'data/cifar-10-batches-bin'
CIFAR10.classes = { 'airplane', 'automobile', 'bird', 'cat', 'deer', 'dog', 'frog', 'horse', 'ship', 'truck' }

local OPTS = { root = true, train = 'boolean', transform = 'table|function', files = 'table', download = 'boolean' }
local POSITIONAL = { 'root', 'train' }

function CIFAR10:__init(...)
  local opts = options.check('CIFAR10', options.positional('CIFAR10', POSITIONAL, ...), OPTS) or {}
  if opts.download then
    options.fail('CIFAR10', 'lunet does not download datasets (download = true); get the binary version ' ..
      '(cifar-10-binary.tar.gz) from https://www.cs.toronto.edu/~kriz/cifar.html, unpack it and pass ' ..
      "root = the folder that holds cifar-10-batches-bin (default root: '" .. CIFAR10.default_root .. "')")
  end
  local root = opts.root or CIFAR10.default_root
  if type(root) ~= 'string' then error('CIFAR10: root must be a string, got ' .. typename(root), 3) end
  serialize.no_nul('CIFAR10', 'root', root, 3)
  local train = opts.train ~= false
  local names = train and { 'data_batch_1.bin', 'data_batch_2.bin', 'data_batch_3.bin', 'data_batch_4.bin',
    'data_batch_5.bin' } or { 'test_batch.bin' }
  if opts.files then names = opts.files end
  local paths = {}
  for i, n in ipairs(names) do
    if type(n) ~= 'string' then error(('CIFAR10: files[%d] must be a string, got %s'):format(i, typename(n)), 3) end
    serialize.no_nul('CIFAR10', ('files[%d]'):format(i), n, 3)
    paths[i] = locate(root, n)
  end
  local ok, images, labels = pcall(M.read_cifar10, paths)
  if not ok then error(images, 3) end
  TensorDataset.__init(self, images, labels, { image = true, transform = opts.transform })
  self.root, self.train = root, train
end

function CIFAR10:__tostring()
  return ('CIFAR10(%s, %d samples, root %s)'):format(self.train and 'train' or 'test', self:__len(), self.root)
end

M.CIFAR10 = CIFAR10
return M
