-- lunet.models: torchvision 0.14's CNN architectures with its module tree
-- and state_dict keys, so its weights load (converted to safetensors).
--   local model = lunet.models.resnet18{num_classes = 10}
-- Each family's file loads on first use; lunet.models.resnet is the file
-- itself (BasicBlock, Bottleneck, ResNet), as torchvision.models.resnet.
local M = {}

-- constructor name -> family file (lua/lunet/models/<family>.lua)
local FAMILY = {}
local FAMILIES = {
  resnet = { 'resnet18', 'resnet34', 'resnet50', 'resnet101', 'resnet152', 'resnext50_32x4d',
    'resnext101_32x8d', 'resnext101_64x4d', 'wide_resnet50_2', 'wide_resnet101_2' },
  vgg = { 'vgg11', 'vgg13', 'vgg16', 'vgg19', 'vgg11_bn', 'vgg13_bn', 'vgg16_bn', 'vgg19_bn' },
  alexnet = { 'alexnet' },
  squeezenet = { 'squeezenet1_0', 'squeezenet1_1' },
  mobilenetv2 = { 'mobilenet_v2' },
  densenet = { 'densenet121', 'densenet161', 'densenet169', 'densenet201' },
  mobilenetv3 = { 'mobilenet_v3_large', 'mobilenet_v3_small' },
  efficientnet = { 'efficientnet_b0', 'efficientnet_b1', 'efficientnet_b2', 'efficientnet_b3', 'efficientnet_b4',
    'efficientnet_b5', 'efficientnet_b6', 'efficientnet_b7', 'efficientnet_v2_s', 'efficientnet_v2_m', 'efficientnet_v2_l' },
  shufflenetv2 = { 'shufflenet_v2_x0_5', 'shufflenet_v2_x1_0', 'shufflenet_v2_x1_5', 'shufflenet_v2_x2_0' },
  mnasnet = { 'mnasnet0_5', 'mnasnet0_75', 'mnasnet1_0', 'mnasnet1_3' },
  googlenet = { 'googlenet' },
  inception = { 'inception_v3' },
  regnet = { 'regnet_y_400mf', 'regnet_y_800mf', 'regnet_y_1_6gf', 'regnet_y_3_2gf', 'regnet_y_8gf', 'regnet_y_16gf',
    'regnet_y_32gf', 'regnet_y_128gf', 'regnet_x_400mf', 'regnet_x_800mf', 'regnet_x_1_6gf', 'regnet_x_3_2gf',
    'regnet_x_8gf', 'regnet_x_16gf', 'regnet_x_32gf' },
  convnext = { 'convnext_tiny', 'convnext_small', 'convnext_base', 'convnext_large' },
}
for family, names in pairs(FAMILIES) do
  for _, n in ipairs(names) do FAMILY[n] = family end
end

-- the constructors' names, sorted (torchvision.models.list_models())
function M.list_models()
  local out = {}
  for n in pairs(FAMILY) do out[#out + 1] = n end
  table.sort(out)
  return out
end

return setmetatable(M, {
  __index = function(self, k)
    local family = FAMILIES[k] and k or FAMILY[k]
    if not family then return nil end
    local mod = require('lunet.models.' .. family)
    rawset(self, family, mod)
    for _, n in ipairs(FAMILIES[family]) do rawset(self, n, mod[n]) end
    return rawget(self, k)
  end,
})
