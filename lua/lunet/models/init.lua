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

-- the constructors' names, sorted (torchvision.models.list_models([module]):
-- lunet.models has its classification models alone)
function M.list_models(module)
  if module ~= nil and module ~= M then
    require('lunet.options').fail('models.list_models', 'module must be lunet.models (torchvision.models\' '
      .. 'classifiers; lunet has no detection, segmentation, video, quantization or optical_flow models), got '
      .. type(module))
  end
  local out = {}
  for n in pairs(FAMILY) do out[#out + 1] = n end
  table.sort(out)
  return out
end

-- torchvision 0.14's registry API (torchvision.models.get_model and kin).
-- Names are case-insensitive, as torchvision's (it lowercases them).
local options = require 'lunet.options'

-- the error for a name lunet.models lacks: its near matches, found with the
-- options' "did you mean" helper (the best, then the next best, ...)
local function unknown_model(fname, name)
  local left, near = {}, {}
  for n in pairs(FAMILY) do left[n] = true end
  for _ = 1, 3 do
    local s = options.suggest(name, left)
    if not s then break end
    near[#near + 1] = "'" .. s .. "'"
    left[s] = nil
  end
  local hint = #near > 0 and ('did you mean ' .. table.concat(near, ', ') .. '?')
    or ('lunet.models.list_models() names its %d models: torchvision\'s CNN classifiers'):format(#M.list_models())
  options.fail(fname, ("unknown model '%s' (%s)"):format(name, hint))
end

local function model_name(fname, name)
  if type(name) ~= 'string' then
    options.fail(fname, 'name must be a string (e.g. \'resnet18\'), got ' .. type(name))
  end
  local key = name:lower()
  if not FAMILY[key] then unknown_model(fname, name) end
  return key
end

-- the constructor called name (torchvision.models.get_model_builder)
function M.get_model_builder(name)
  return M[model_name('models.get_model_builder', name)]
end

-- the model called name built with opts (torchvision.models.get_model(name, **config))
function M.get_model(name, opts, ...)
  if select('#', ...) > 0 then options.fail('models.get_model', 'expected a name and one options table, got more arguments') end
  return M[model_name('models.get_model', name)](opts)
end

-- torchvision's weight enums describe files it downloads: lunet downloads
-- nothing, so these say how to get the weights instead
local HOW = "lunet downloads no weights; convert torchvision's where PyTorch is installed with "
  .. '/usr/bin/python3 tools/torchvision_to_safetensors.py %s %s.safetensors --weights %s, then '
  .. "model:load_state_dict(lunet.load('%s.safetensors')) (README: Models)"

function M.get_model_weights(name)
  if type(name) == 'function' then   -- torchvision also takes the builder
    for n in pairs(FAMILY) do if M[n] == name then name = n end end
  end
  local key = model_name('models.get_model_weights', name)
  options.fail('models.get_model_weights', HOW:format(key, key, 'DEFAULT', key))
end

-- name: 'ResNet50_Weights.IMAGENET1K_V2' (the enum's name lowercased is the model's)
function M.get_weight(name)
  local fname = 'models.get_weight'
  local enum, value
  if type(name) == 'string' then enum, value = name:match('^([%w_]+)_Weights%.([%w_]+)$') end
  if not enum then
    options.fail(fname, "name must be a string such as 'ResNet50_Weights.IMAGENET1K_V2', got "
      .. (type(name) == 'string' and "'" .. name .. "'" or type(name)))
  end
  local key = model_name(fname, enum:lower())
  options.fail(fname, ('no weights %s: ' .. HOW):format(name, key, key, value, key))
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
