-- lunet.models' registry, as torchvision 0.14's: get_model(name, opts),
-- get_model_builder(name), list_models([module]); get_model_weights and
-- get_weight are named errors saying how to get the weights (no downloads).
local lunet = require 'lunet'
local fx = require 'support.fixtures'
local models = lunet.models

local function keys_shapes(model)
  local out = {}
  for _, e in ipairs(model:named_parameters()) do out[#out + 1] = e[1] .. ' ' .. table.concat(e[2]:size(), 'x') end
  return out
end

describe('lunet.models.get_model / get_model_builder', function()
  it('build the model of that name with its options, as its constructor does', function()
    lunet.manual_seed(7)
    local a = models.get_model('squeezenet1_1', { num_classes = 5 })
    lunet.manual_seed(7)
    local b = models.squeezenet1_1 { num_classes = 5 }
    assert.are.same(keys_shapes(b), keys_shapes(a))
    local sa, sb = a:state_dict(), b:state_dict()
    for k, v in pairs(sb) do assert.is_true(v:equal(sa[k]), k) end
    assert.equal(5, models.get_model('mobilenet_v3_small', { num_classes = 5 }).classifier[4].weight:size(1))
    assert.equal(1000, models.get_model('resnet18').fc.weight:size(1))   -- no options: torchvision's defaults
  end)

  it('take every name list_models gives, case-insensitively (torchvision lowercases)', function()
    for _, n in ipairs(models.list_models()) do
      assert.equal(models[n], models.get_model_builder(n), n)
      assert.equal(models[n], models.get_model_builder(n:upper()), n)
    end
    assert.equal(models.resnet18, models.get_model_builder('ResNet18'))
    assert.equal(3, models.get_model('MobileNet_V3_Small', { num_classes = 3 }).classifier[4].weight:size(1))
  end)

  it('name an unknown model and its near matches', function()
    assert.truthy(fx.err_of(models.get_model, 'resnet19'):find(
      "models.get_model: unknown model 'resnet19' (did you mean 'resnet18', 'resnet34', 'resnet50'?)", 1, true))
    assert.truthy(fx.err_of(models.get_model_builder, 'mobilenet_v3'):find(
      "models.get_model_builder: unknown model 'mobilenet_v3' (did you mean 'mobilenet_v2', 'mobilenet_v3_large', 'mobilenet_v3_small'?)", 1, true))
    assert.truthy(fx.err_of(models.get_model, 'vit_b_16'):find(
      "models.get_model: unknown model 'vit_b_16' (lunet.models.list_models() names its 68 models: torchvision's CNN classifiers)", 1, true))
    for _, v in ipairs({ 3, true, {}, lunet.zeros(1) }) do
      assert.truthy(fx.err_of(models.get_model, v):find("models.get_model: name must be a string (e.g. 'resnet18'), got ", 1, true))
      assert.truthy(fx.err_of(models.get_model_builder, v):find('models.get_model_builder: name must be a string', 1, true))
    end
    assert.truthy(fx.err_of(models.get_model):find('models.get_model: name must be a string', 1, true))
  end)

  it("pass the options to the constructor, which checks them", function()
    assert.truthy(fx.err_of(models.get_model, 'resnet18', { num_class = 2 }):find(
      "models.resnet18: unknown option 'num_class' (did you mean 'num_classes'?)", 1, true))
    assert.truthy(fx.err_of(models.get_model, 'resnet18', { weights = 'DEFAULT' }):find(
      'models.resnet18: pretrained weights are not downloaded', 1, true))
    assert.truthy(fx.err_of(models.get_model, 'alexnet', 10):find('models.alexnet: expected an options table', 1, true))
    assert.truthy(fx.err_of(models.get_model, 'alexnet', {}, {}):find(
      'models.get_model: expected a name and one options table, got more arguments', 1, true))
  end)
end)

describe('lunet.models.list_models', function()
  it("is torchvision's classifier names, sorted, for nil or lunet.models", function()
    local names = models.list_models()
    assert.equal(68, #names)
    local sorted = { unpack(names) }
    table.sort(sorted)
    assert.are.same(sorted, names)
    assert.are.same(names, models.list_models(models))
    for _, n in ipairs({ 'alexnet', 'convnext_tiny', 'efficientnet_v2_s', 'regnet_x_400mf', 'wide_resnet101_2' }) do
      assert.truthy(table.concat(names, ' '):find(n, 1, true), n)
    end
  end)

  it('names a module it has no models of', function()
    assert.truthy(fx.err_of(models.list_models, {}):find(
      'models.list_models: module must be lunet.models', 1, true))
    assert.truthy(fx.err_of(models.list_models, 'detection'):find('got string', 1, true))
  end)
end)

describe('lunet.models.get_model_weights / get_weight', function()
  it('say that nothing is downloaded and how to convert torchvision\'s weights', function()
    local how = "models.get_model_weights: lunet downloads no weights; convert torchvision's where PyTorch is installed with "
      .. '/usr/bin/python3 tools/torchvision_to_safetensors.py resnet50 resnet50.safetensors --weights DEFAULT, then '
      .. "model:load_state_dict(lunet.load('resnet50.safetensors'))"
    assert.truthy(fx.err_of(models.get_model_weights, 'resnet50'):find(how, 1, true))
    assert.truthy(fx.err_of(models.get_model_weights, models.resnet50):find(how, 1, true))   -- or the builder
    assert.truthy(fx.err_of(models.get_model_weights, 'ResNet50'):find(how, 1, true))
    assert.truthy(fx.err_of(models.get_weight, 'ResNeXt50_32X4D_Weights.IMAGENET1K_V2'):find(
      'models.get_weight: no weights ResNeXt50_32X4D_Weights.IMAGENET1K_V2: lunet downloads no weights; '
      .. "convert torchvision's where PyTorch is installed with /usr/bin/python3 tools/torchvision_to_safetensors.py "
      .. 'resnext50_32x4d resnext50_32x4d.safetensors --weights IMAGENET1K_V2', 1, true))
    assert.truthy(fx.err_of(models.get_weight, 'MobileNet_V3_Small_Weights.DEFAULT'):find(
      'tools/torchvision_to_safetensors.py mobilenet_v3_small mobilenet_v3_small.safetensors --weights DEFAULT', 1, true))
  end)

  it('name unknown models and malformed names', function()
    assert.truthy(fx.err_of(models.get_model_weights, 'resnet19'):find(
      "models.get_model_weights: unknown model 'resnet19' (did you mean 'resnet18'", 1, true))
    assert.truthy(fx.err_of(models.get_model_weights, 5):find('models.get_model_weights: name must be a string', 1, true))
    assert.truthy(fx.err_of(models.get_weight, 'ViT_B_16_Weights.DEFAULT'):find(
      "models.get_weight: unknown model 'vit_b_16'", 1, true))
    assert.truthy(fx.err_of(models.get_weight, 'resnet50'):find(
      "models.get_weight: name must be a string such as 'ResNet50_Weights.IMAGENET1K_V2', got 'resnet50'", 1, true))
    assert.truthy(fx.err_of(models.get_weight, nil):find('models.get_weight: name must be a string', 1, true))
  end)
end)
