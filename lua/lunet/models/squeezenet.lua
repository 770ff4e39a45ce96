-- lunet.models' SqueezeNets as torchvision 0.14's: squeezenet1_0 and
-- squeezenet1_1 (Fire modules; features, classifier; same state_dict keys).
-- Options: num_classes = 1000, dropout = 0.5.
local nn = require 'lunet.nn'
local A = require 'lunet.autograd'
local common = require 'lunet.models.common'
local eager = require 'lunet.nn.eager'
local lunet_cat = function(list, dim) return require('lunet').cat(list, dim) end

local M = {}

local Fire = eager.own(nn.Module:extend('models.Fire'))
M.Fire = Fire

function Fire:__init(inplanes, squeeze, e1, e3)
  self.inplanes = inplanes
  self:add_module('squeeze', nn.Conv2d(inplanes, squeeze, 1))
  self:add_module('squeeze_activation', nn.ReLU(true))
  self:add_module('expand1x1', nn.Conv2d(squeeze, e1, 1))
  self:add_module('expand1x1_activation', nn.ReLU(true))
  self:add_module('expand3x3', nn.Conv2d(squeeze, e3, 3, { padding = 1 }))
  self:add_module('expand3x3_activation', nn.ReLU(true))
end

function Fire:forward(x)
  local free = eager.frees(self)
  local s = self.squeeze_activation(self.squeeze(x))
  local a = self.expand1x1_activation(self.expand1x1(s))
  local b = self.expand3x3_activation(self.expand3x3(s))
  local y = lunet_cat({ a, b }, 2)
  -- (lunet.nn.eager: the squeezed map once both expands ran, the expands once concatenated;
  -- the activations are in place: each gives back what its conv made)
  if free then
    eager.consumed(s, y, x)
    eager.consumed(a, y, x)
    eager.consumed(b, y, x)
  end
  return y
end

local SqueezeNet = eager.own(nn.Module:extend('models.SqueezeNet'))
M.SqueezeNet = SqueezeNet

local OPTS = common.opts { num_classes = 'number', dropout = 'number' }

local function pool() return nn.MaxPool2d(3, { stride = 2, ceil_mode = true }) end

-- SqueezeNet(version ('1_0' or '1_1'), opts, fname)
function SqueezeNet:__init(version, opts, fname)
  fname = fname or 'models.SqueezeNet'
  opts = common.check(fname, opts, OPTS)
  local num_classes = common.positive_int(fname, 'num_classes', opts.num_classes, 1000)
  local p = common.number_in(fname, 'dropout', opts.dropout, 0.5, 0, 1)
  if version == '1_0' then
    self:add_module('features', nn.Sequential {
      nn.Conv2d(3, 96, 7, { stride = 2 }), nn.ReLU(true), pool(),
      Fire(96, 16, 64, 64), Fire(128, 16, 64, 64), Fire(128, 32, 128, 128), pool(),
      Fire(256, 32, 128, 128), Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256), pool(),
      Fire(512, 64, 256, 256),
    })
  elseif version == '1_1' then
    self:add_module('features', nn.Sequential {
      nn.Conv2d(3, 64, 3, { stride = 2 }), nn.ReLU(true), pool(),
      Fire(64, 16, 64, 64), Fire(128, 16, 64, 64), pool(),
      Fire(128, 32, 128, 128), Fire(256, 32, 128, 128), pool(),
      Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256), Fire(512, 64, 256, 256),
    })
  else
    common.fail(fname, "version must be '1_0' or '1_1', got " .. tostring(version))
  end
  local final_conv = nn.Conv2d(512, num_classes, 1)
  self:add_module('classifier', nn.Sequential { nn.Dropout(p), final_conv, nn.ReLU(true), nn.AdaptiveAvgPool2d({ 1, 1 }) })
  A.no_grad(function()
    for _, m in ipairs(self:modules()) do
      if getmetatable(m) == nn.Conv2d then
        if m == final_conv then m.weight:normal_(0, 0.01) else nn.init.kaiming_uniform_(m.weight) end
        m.bias:zero_()
      end
    end
  end)
end

-- (lunet.nn.eager: the features' map once the classifier ran; the
-- classifier's output is kept, the result is a view of it)
function SqueezeNet:forward(x)
  local f = self.features(x)
  local c = self.classifier(f)
  if eager.frees(self) then eager.consumed(f, c, x) end
  return c:flatten(2)
end

for _, v in ipairs({ '1_0', '1_1' }) do
  M['squeezenet' .. v] = function(opts, ...)
    local fname = 'models.squeezenet' .. v
    common.check(fname, opts, OPTS, select('#', ...))
    return SqueezeNet(v, opts, fname)
  end
end

return M
