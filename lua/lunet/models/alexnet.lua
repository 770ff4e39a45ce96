-- lunet.models.alexnet as torchvision 0.14's (features, avgpool, classifier;
-- same state_dict keys). Options: num_classes = 1000, dropout = 0.5.
-- Initialisation: the layers' own (PyTorch's defaults), as torchvision.
local nn = require 'lunet.nn'
local common = require 'lunet.models.common'
local eager = require 'lunet.nn.eager'

local M = {}

local AlexNet = eager.own(nn.Module:extend('models.AlexNet'))
M.AlexNet = AlexNet

local OPTS = common.opts { num_classes = 'number', dropout = 'number' }

function AlexNet:__init(opts, fname)
  fname = fname or 'models.AlexNet'
  opts = common.check(fname, opts, OPTS)
  local num_classes = common.positive_int(fname, 'num_classes', opts.num_classes, 1000)
  local p = common.number_in(fname, 'dropout', opts.dropout, 0.5, 0, 1)
  self:add_module('features', nn.Sequential {
    nn.Conv2d(3, 64, 11, { stride = 4, padding = 2 }), nn.ReLU(true), nn.MaxPool2d(3, { stride = 2 }),
    nn.Conv2d(64, 192, 5, { padding = 2 }), nn.ReLU(true), nn.MaxPool2d(3, { stride = 2 }),
    nn.Conv2d(192, 384, 3, { padding = 1 }), nn.ReLU(true),
    nn.Conv2d(384, 256, 3, { padding = 1 }), nn.ReLU(true),
    nn.Conv2d(256, 256, 3, { padding = 1 }), nn.ReLU(true), nn.MaxPool2d(3, { stride = 2 }),
  })
  self:add_module('avgpool', nn.AdaptiveAvgPool2d({ 6, 6 }))
  self:add_module('classifier', nn.Sequential {
    nn.Dropout(p), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(true),
    nn.Dropout(p), nn.Linear(4096, 4096), nn.ReLU(true),
    nn.Linear(4096, num_classes),
  })
end

AlexNet.forward = require('lunet.models.ops').pooled_forward

function M.alexnet(opts, ...)
  common.check('models.alexnet', opts, OPTS, select('#', ...))
  return AlexNet(opts, 'models.alexnet')
end

return M
