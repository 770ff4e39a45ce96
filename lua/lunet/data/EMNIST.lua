-- lunet.data.EMNIST(root, split[, {train = true, transform}]) (or
-- EMNIST{root =, split =, ...}): the EMNIST IDX files of one split
-- (emnist-<split>-<train|test>-images-idx3-ubyte(.gz) and -labels-, under root
-- or torchvision's root/EMNIST/raw) as MNIST: x uint8 (N,1,28,28), y int64
-- labels + 1 into classes (as torchvision 0.14's; split 'letters' labels
-- 1..26 are 2..27, classes[1] being its unused 'N/A'). The images stay as
-- stored (transposed, as torchvision leaves them).
local mnist = require 'lunet.data.FashionMNIST'
local options = require 'lunet.options'

local SPLITS = { 'byclass', 'bymerge', 'balanced', 'letters', 'digits', 'mnist' }

local function chars(s) local t = {}; for c in s:gmatch('.') do t[#t + 1] = c end; return t end
local DIGITS, UPPER, LOWER = '0123456789', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'
-- bymerge/balanced: the lowercase letters that look like their capitals merged into them
local MERGED_OUT = LOWER:gsub('[cijklmopsuvwxyz]', '')
local CLASSES = {
  byclass = chars(DIGITS .. UPPER .. LOWER),   -- (torchvision's sorted order: ASCII)
  bymerge = chars(DIGITS .. UPPER .. MERGED_OUT),
  balanced = chars(DIGITS .. UPPER .. MERGED_OUT),
  letters = { 'N/A', unpack(chars(LOWER)) },
  digits = chars(DIGITS),
  mnist = chars(DIGITS),
}

local EMNIST = mnist.maker('EMNIST', 'data', CLASSES.mnist,
  'get gzip.zip from https://biometrics.nist.gov/cs_links/EMNIST/gzip.zip and unpack its emnist-<split>-*.gz files ' ..
  "(the default root is 'data', searched as torchvision's data/EMNIST/raw too)", {
  opts = { root = true, split = 'string', train = 'boolean', transform = 'table|function', download = 'boolean' },
  positional = { 'root', 'split', 'train' },
  init = function(self, opts)
    if opts.split == nil then options.fail('EMNIST', "split is required: one of 'byclass', 'bymerge', " ..
      "'balanced', 'letters', 'digits' or 'mnist'") end
    options.one_of('EMNIST', 'split', opts.split, SPLITS)
    self.split, self.classes = opts.split, CLASSES[opts.split]
  end,
  files = function(opts, train)
    local prefix = ('emnist-%s-%s'):format(opts.split, train and 'train' or 'test')
    return prefix .. '-images-idx3-ubyte', prefix .. '-labels-idx1-ubyte'
  end,
})

return { EMNIST = EMNIST, SPLITS = SPLITS, CLASSES = CLASSES }
