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

  it('removes its folder after an error', function()
    local out, rc = finetune('--smoke --arch vgg11')
    assert.are_not.equal(0, rc, out)
    local dir = out:match('smoke: a synthetic ImageFolder in (%S+) %(removed at the end%)\n')
    assert.truthy(dir, out)
    assert.truthy(out:find("--arch must be a ResNet of lunet.models (its head is fc), got 'vgg11'", 1, true), out)
    assert.is_false(exists(dir), dir .. ' is left behind')
  end)

  it('rejects unknown and bad arguments by name', function()
    for flags, want in pairs({
      [''] = 'finetune: --data DIR is required',
      ['--smoke --bogus'] = 'finetune: unknown or incomplete argument --bogus',
      ['--data'] = 'finetune: unknown or incomplete argument --data',
      ['--smoke --epochs x'] = 'finetune: --epochs must be a number >= 1, got x',
      ['--smoke --arch vgg11'] = "finetune: --arch must be a ResNet of lunet.models (its head is fc), got 'vgg11'",
      ['--smoke --schedule linear'] = "finetune: --schedule must be 'step' or 'cosine', got 'linear'",
      ['--data /nonexistent'] = "ImageFolder: cannot open the folder '/nonexistent/train'",
    }) do
      local out, rc = finetune(flags)
      assert.are_not.equal(0, rc, flags)
      assert.truthy(out:find(want, 1, true), flags .. ': ' .. out)
    end
  end)
end)
