-- The benchmark models (bench/cpu.lua), the same as bench/torch_models.py
-- builds in PyTorch:
--   seed28   the classic SimpleCNN on 1x28x28: Conv2d(1,16,3,pad 1)-ReLU-MaxPool2d(2)-Linear(16*14*14,10)
--   seed32   the same on 3x32x32:              Conv2d(3,16,3,pad 1)-ReLU-MaxPool2d(2)-Linear(16*16*16,10)
--   lenet5   1x28x28: conv 6@5x5 pad 2, ReLU, pool 2, conv 16@5x5, ReLU, pool 2, 120, 84, 10
--   resnet8  3x32x32: conv 16 3x3 + BN + ReLU, BasicBlocks 16/32/64 (strides 1/2/2),
--            global average pool, Linear 64->10
-- Each entry: build(nn) -> model, input shape {C,H,W}, and the layer list used
-- to count FLOPs (multiply-adds x 2) per image.
local M = {}

-- FLOPs per image of a conv layer (forward) and a linear layer
local function conv(cin, cout, k, oh, ow) return 2 * cin * cout * k * k * oh * ow end
local function linear(i, o) return 2 * i * o end

M.order = { 'seed28', 'seed32', 'lenet5', 'resnet8' }

M.seed28 = {
  input = { 1, 28, 28 },
  build = function(nn)
    return nn.Sequential { nn.Conv2d(1, 16, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
      nn.Linear(16 * 14 * 14, 10) }
  end,
  -- {forward flops, flops of the layer's input gradient (0 for the first layer)}
  layers = { { conv(1, 16, 3, 28, 28), 0, conv3 = true }, { linear(16 * 14 * 14, 10) } },
}

M.seed32 = {
  input = { 3, 32, 32 },
  build = function(nn)
    return nn.Sequential { nn.Conv2d(3, 16, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
      nn.Linear(16 * 16 * 16, 10) }
  end,
  layers = { { conv(3, 16, 3, 32, 32), 0, conv3 = true }, { linear(16 * 16 * 16, 10) } },
}

M.lenet5 = {
  input = { 1, 28, 28 },
  build = function(nn)
    return nn.Sequential {
      nn.Conv2d(1, 6, 5, { padding = 2 }), nn.ReLU(), nn.MaxPool2d(2),
      nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
      nn.Flatten(),
      nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
      nn.Linear(120, 84), nn.ReLU(),
      nn.Linear(84, 10),
    }
  end,
  layers = { { conv(1, 6, 5, 28, 28), 0 }, { conv(6, 16, 5, 10, 10) }, { linear(400, 120) }, { linear(120, 84) },
    { linear(84, 10) } },
}

M.resnet8 = {
  input = { 3, 32, 32 },
  build = function(nn)
    return nn.Sequential {
      nn.Conv2d(3, 16, 3, { padding = 1, bias = false }), nn.BatchNorm2d(16), nn.ReLU(),
      nn.BasicBlock(16, 16, 1),
      nn.BasicBlock(16, 32, 2),
      nn.BasicBlock(32, 64, 2),
      nn.AdaptiveAvgPool2d(1), nn.Flatten(),
      nn.Linear(64, 10),
    }
  end,
  layers = {
    { conv(3, 16, 3, 32, 32), 0, conv3 = true },
    { conv(16, 16, 3, 32, 32), conv3 = true }, { conv(16, 16, 3, 32, 32), conv3 = true },
    { conv(16, 32, 3, 16, 16), conv3 = true }, { conv(32, 32, 3, 16, 16), conv3 = true }, { conv(16, 32, 1, 16, 16) },
    { conv(32, 64, 3, 8, 8), conv3 = true }, { conv(64, 64, 3, 8, 8), conv3 = true }, { conv(32, 64, 1, 8, 8) },
    { linear(64, 10) },
  },
  -- the 3x3 convolutions of ResNet-8, timed one by one (bench/cpu.lua --layers):
  -- {C, O, H (input), stride}
  conv3x3 = { { 3, 16, 32, 1 }, { 16, 16, 32, 1 }, { 16, 32, 32, 2 }, { 32, 32, 16, 1 }, { 32, 64, 16, 2 },
    { 64, 64, 8, 1 } },
}

-- forward and training FLOPs per image: training = forward + input gradients
-- (not for the first layer: the data needs none) + weight gradients
function M.flops(name)
  local fwd, train = 0, 0
  for _, l in ipairs(M[name].layers) do
    local f = l[1]
    fwd = fwd + f
    train = train + f + (l[2] or f) + f
  end
  return fwd, train
end

return M
