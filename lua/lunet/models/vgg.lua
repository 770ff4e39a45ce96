-- lunet.models' VGGs as torchvision 0.14's: vgg11, vgg13, vgg16, vgg19 and
-- their _bn variants (features, avgpool, classifier; same state_dict keys).
-- Options: num_classes = 1000, init_weights = true, dropout = 0.5.
local nn = require 'lunet.nn'
local A = require 'lunet.autograd'
local common = require 'lunet.models.common'
local eager = require 'lunet.nn.eager'

local M = {}

local VGG = eager.own(nn.Module:extend('models.VGG'))
M.VGG = VGG

local OPTS = common.opts { num_classes = 'number', init_weights = 'boolean', dropout = 'number' }

-- torchvision's cfgs: channels, 'M' for a 2x2 max pool
local CFGS = {
  A = { 64, 'M', 128, 'M', 256, 256, 'M', 512, 512, 'M', 512, 512, 'M' },
  B = { 64, 64, 'M', 128, 128, 'M', 256, 256, 'M', 512, 512, 'M', 512, 512, 'M' },
  D = { 64, 64, 'M', 128, 128, 'M', 256, 256, 256, 'M', 512, 512, 512, 'M', 512, 512, 512, 'M' },
  E = { 64, 64, 'M', 128, 128, 'M', 256, 256, 256, 256, 'M', 512, 512, 512, 512, 'M', 512, 512, 512, 512, 'M' },
}
M.cfgs = CFGS

-- make_layers(cfg, batch_norm): the features Sequential
function M.make_layers(cfg, batch_norm)
  local seq, cin = nn.Sequential(), 3
  for _, v in ipairs(cfg) do
    if v == 'M' then seq:add(nn.MaxPool2d(2, { stride = 2 }))
    else
      seq:add(nn.Conv2d(cin, v, 3, { padding = 1 }))
      if batch_norm then seq:add(nn.BatchNorm2d(v)) end
      seq:add(nn.ReLU(true))
      cin = v
    end
  end
  return seq
end

-- VGG(features, opts, fname)
function VGG:__init(features, opts, fname)
  fname = fname or 'models.VGG'
  opts = common.check(fname, opts, OPTS)
  local num_classes = common.positive_int(fname, 'num_classes', opts.num_classes, 1000)
  local p = common.number_in(fname, 'dropout', opts.dropout, 0.5, 0, 1)
  self:add_module('features', features)
  self:add_module('avgpool', nn.AdaptiveAvgPool2d({ 7, 7 }))
  self:add_module('classifier', nn.Sequential {
    nn.Linear(512 * 7 * 7, 4096), nn.ReLU(true), nn.Dropout(p),
    nn.Linear(4096, 4096), nn.ReLU(true), nn.Dropout(p),
    nn.Linear(4096, num_classes),
  })
  if opts.init_weights ~= false then
    A.no_grad(function()
      for _, m in ipairs(self:modules()) do
        local mt = getmetatable(m)
        if mt == nn.Conv2d then
          nn.init.kaiming_normal_(m.weight, { mode = 'fan_out', nonlinearity = 'relu' })
          if m.bias then m.bias:zero_() end
        elseif mt == nn.Linear then
          m.weight:normal_(0, 0.01)
          m.bias:zero_()
        end
      end
    end)
  end
end

VGG.forward = require('lunet.models.ops').pooled_forward

for name, cfg in pairs({ vgg11 = 'A', vgg13 = 'B', vgg16 = 'D', vgg19 = 'E' }) do
  for _, bn in ipairs({ false, true }) do
    local full = name .. (bn and '_bn' or '')
    M[full] = function(opts, ...)
      local fname = 'models.' .. full
      opts = common.check(fname, opts, OPTS, select('#', ...))
      return VGG(M.make_layers(CFGS[cfg], bn), opts, fname)
    end
  end
end

return M
