-- The classic PyTorch example in lunet: a small CNN, a dummy dataset,
-- DataParallel over all devices when there is more than one, SGD, 10 epochs.
--   luajit examples/seed_cnn.lua [epochs]   (LUNET_CPU_DEVICES=2 for two devices)
-- README.md shows this file as it is (spec/readme_spec.lua checks that).
local lunet = require 'lunet'
local nn, optim, data = lunet.nn, lunet.optim, lunet.data

local model = nn.Sequential {
  nn.Conv2d(3, 16, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
  nn.Flatten(), nn.Linear(16 * 16 * 16, 10),
}
local dataset = data.Synthetic {n = 100, shape = {3, 32, 32}, classes = 10, seed = 0}
local loader = data.DataLoader(dataset, {batch_size = 16, shuffle = true})
local devices = lunet.devices()                 -- GPUs if any, else CPU devices
if #devices > 1 then model = lunet.parallel.DataParallel(model, {devices = devices}) end
model:to(devices[1])
local criterion, opt = nn.CrossEntropyLoss(), optim.SGD(model:parameters(), {lr = 0.001})
for epoch = 1, tonumber(arg[1]) or 10 do          -- epochs: the first argument, or 10
  local running = 0
  for inputs, labels in loader do
    opt:zero_grad()
    local loss = criterion(model(inputs), labels)
    loss:backward()
    opt:step()
    running = running + loss:item()
  end
  print(('Epoch %d, Loss: %.4f'):format(epoch, running / #loader))
end
