-- lunet.data: datasets, transforms and the batch loader.
--   local data = lunet.data
--   local train = data.FashionMNIST{train = true}
--   local loader = data.DataLoader(train, {batch_size = 64, shuffle = true, workers = 2})
--   for x, y in loader:iter() do ... end      -- x float32 (64,1,28,28), y int64 1..10
local subset = require 'lunet.data.Subset'
local mnist = require 'lunet.data.FashionMNIST'
local cifar = require 'lunet.data.CIFAR10'
local cifar100 = require 'lunet.data.CIFAR100'
local image = require 'lunet.data.image'
local folder = require 'lunet.data.ImageFolder'
local image_write = require 'lunet.data.image_write'

return {
  Dataset = require 'lunet.data.Dataset',
  TensorDataset = require 'lunet.data.TensorDataset',
  Subset = subset.Subset,
  random_split = subset.random_split,
  len = subset.len,
  DataLoader = require 'lunet.data.DataLoader',
  ConcatDataset = require 'lunet.data.ConcatDataset',
  Sampler = require 'lunet.data.Sampler',
  SequentialSampler = require 'lunet.data.SequentialSampler',
  RandomSampler = require 'lunet.data.RandomSampler',
  SubsetRandomSampler = require 'lunet.data.SubsetRandomSampler',
  WeightedRandomSampler = require 'lunet.data.WeightedRandomSampler',
  BatchSampler = require 'lunet.data.BatchSampler',
  default_collate = require('lunet.data.collate').default_collate,
  FashionMNIST = mnist.FashionMNIST,
  MNIST = mnist.MNIST,
  KMNIST = mnist.KMNIST,
  EMNIST = require('lunet.data.EMNIST').EMNIST,
  CIFAR10 = cifar.CIFAR10,
  CIFAR100 = cifar100.CIFAR100,
  Synthetic = require 'lunet.data.Synthetic',
  transforms = require 'lunet.data.transforms',
  read_idx = mnist.read_idx,
  read_cifar10 = cifar.read_cifar10,
  read_cifar100 = cifar100.read_cifar100,
  read_image = image.read_image,
  decode_image = image.decode_image,
  ImageReadMode = image.ImageReadMode,
  encode_png = image_write.encode_png,
  encode_jpeg = image_write.encode_jpeg,
  write_png = image_write.write_png,
  write_jpeg = image_write.write_jpeg,
  ImageFolder = folder.ImageFolder,
  DatasetFolder = folder.DatasetFolder,
  IMG_EXTENSIONS = folder.IMG_EXTENSIONS,
}
