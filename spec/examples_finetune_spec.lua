-- examples/finetune.lua --smoke: a synthetic ImageFolder, a torch.save file
-- of weights loaded strictly, training, the best checkpoint, the val grid and
-- the ONNX export; the script checks its own results and removes its folder.
local shell = require 'shell'
local root, sh = shell.root, shell.sh

local function finetune(flags)
  return sh(('cd %q && luajit examples/finetune.lua %s'):format(root, flags))
end
local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

describe('examples/finetune.lua', function()
  it('--smoke trains on 3 colours, beats chance, writes the grid and ONNX, and cleans up', function()
    local out, rc = finetune('--smoke')
    assert.equal(0, rc, out)
    assert.truthy(out:find('3 classes (blue, green, red), 48 training and 12 validation images\n', 1, true), out)
    local dir = out:match('smoke: a synthetic ImageFolder in (%S+) %(removed at the end%)\n')
    assert.truthy(dir, out)
    assert.truthy(out:find('\nresnet18 weights from ' .. dir .. '/resnet18.pth\n', 1, true), out)
    local _, epochs = out:gsub('\nepoch %d/6  train loss %d+%.%d+  val acc %d+%.%d+%%', '')
    assert.equal(6, epochs, out)
    assert.truthy(out:find('\nbest val acc %d+%.%d+%% %(epoch %d%), saved to ' .. dir .. '/best%.safetensors'), out)
    local preds = out:match('\nval images: ' .. dir .. '/val%.png %(predicted, row by row: ([^)]*)%)\n')
    assert.truthy(preds, out)
    local _, n = preds:gsub('%d:%a+', '')
    assert.equal(8, n, preds)
    assert.truthy(out:find('\nONNX: ' .. dir .. '/model.onnx\n', 1, true), out)
    assert.truthy(out:find('\nsmoke: val acc %d+%.%d+%% > chance 33%.33%%, grid 134x266, ONNX matches'), out)
    assert.is_false(exists(dir), dir .. ' is left behind')
  end)

  it('--freeze trains fc alone (the backbone as loaded), with TrivialAugmentWide and a cosine schedule', function()
    local out, rc = finetune('--smoke --freeze --trivialaugment --schedule cosine --workers 0')
    assert.equal(0, rc, out)
    assert.truthy(out:find('ONNX matches %([^)]*%), backbone unchanged\n'), out)
  end)

  -- torchvision users' head replacements: model.classifier[3] = nn.Linear(1024, n)
  -- (classifier[4] here) and model.fc = nn.Linear(1024, n); --freeze trains that alone
  for arch, head in pairs({ mobilenet_v3_small = 'classifier.3', shufflenet_v2_x0_5 = 'fc' }) do
    it(('--arch %s --freeze replaces its head (%s) and trains it alone'):format(arch, head), function()
      local out, rc = finetune('--smoke --freeze --workers 0 --arch ' .. arch)
      assert.equal(0, rc, out)
      assert.truthy(out:find('\n' .. arch .. ' weights from %S+/' .. arch .. '%.pth\n'), out)
      assert.truthy(out:find('\nsmoke: val acc %d+%.%d+%% > chance 33%.33%%, grid 134x266, ONNX matches %([^)]*%), backbone unchanged\n'), out)
    end)
  end

  it('removes its folder after an error', function()
    local out, rc = finetune('--smoke --arch resnet19')
    assert.are_not.equal(0, rc, out)
    local dir = out:match('smoke: a synthetic ImageFolder in (%S+) %(removed at the end%)\n')
    assert.truthy(dir, out)
    assert.truthy(out:find("finetune: --arch: unknown model 'resnet19' (did you mean 'resnet18', 'resnet34', 'resnet50'?)", 1, true), out)
    assert.is_false(exists(dir), dir .. ' is left behind')
  end)

  it('rejects unknown and bad arguments by name', function()
    for flags, want in pairs({
      [''] = 'finetune: --data DIR is required',
      ['--smoke --bogus'] = 'finetune: unknown or incomplete argument --bogus',
      ['--data'] = 'finetune: unknown or incomplete argument --data',
      ['--smoke --epochs x'] = 'finetune: --epochs must be a number >= 1, got x',
      ['--smoke --arch vit_b_16'] = "finetune: --arch: unknown model 'vit_b_16'",
      ['--smoke --schedule linear'] = "finetune: --schedule must be 'step' or 'cosine', got 'linear'",
      ['--data /nonexistent'] = "ImageFolder: cannot open the folder '/nonexistent/train'",
    }) do
      local out, rc = finetune(flags)
      assert.are_not.equal(0, rc, flags)
      assert.truthy(out:find(want, 1, true), flags .. ': ' .. out)
    end
  end)
end)
