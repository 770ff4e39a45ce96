-- Fine-tune a torchvision classifier on your own images (PyTorch's transfer
-- learning tutorial): DIR/train/<class>/*.jpg and DIR/val/<class>/*.jpg.
--   luajit examples/finetune.lua --data DIR [--weights resnet18.pth] [--arch resnet18]
--     [--epochs N] [--freeze] [--trivialaugment] [--batch 16] [--lr 0.001]
--     [--schedule step|cosine] [--size 224] [--workers 2] [--out model.safetensors]
--     [--grid val.png] [--onnx model.onnx] [--seed 0]
--   luajit examples/finetune.lua --smoke [--arch NAME]   (CI: a tiny synthetic folder in /tmp)
-- --arch: any of lunet.models.list_models(); --weights: torchvision's file
-- for it (torch.save format, loaded strictly), then the classification head
-- becomes one to the folder's classes, as torchvision users replace it
-- (HEADS below); --freeze trains the new head alone.
local lunet = require 'lunet'
local nn, optim, data, T = lunet.nn, lunet.optim, lunet.data, lunet.data.transforms

local FLAGS = { smoke = true, freeze = true, trivialaugment = true }
local VALUES = { data = 1, weights = 1, arch = 1, epochs = 1, batch = 1, lr = 1, schedule = 1, size = 1,
  workers = 1, seed = 1, out = 1, grid = 1, onnx = 1 }
local args, i = {}, 1
while i <= #arg do
  local k = arg[i]:match('^%-%-([%w_]+)$')
  if FLAGS[k] then args[k], i = true, i + 1
  elseif VALUES[k] and arg[i + 1] then args[k], i = arg[i + 1], i + 2
  else error(('finetune: unknown or incomplete argument %s (see the usage at the top of examples/finetune.lua)'):format(arg[i]), 0) end
end
local function num(k, default, min)   -- a number option, checked
  local v = args[k] == nil and default or tonumber(args[k])
  if not v or v < min then error(('finetune: --%s must be a number >= %g, got %s'):format(k, min, args[k]), 0) end
  return v
end
local smoke = args.smoke
if not smoke and not args.data then error('finetune: --data DIR is required (DIR/train and DIR/val, one folder per class), or --smoke', 0) end
lunet.manual_seed(num('seed', 0, 0))

-- --smoke: 3 classes told apart by colour, 16 training and 4 validation PNGs
-- each, of varied sizes (the transforms bring them to one)
local tmp, cleanup
if smoke then
  tmp = os.tmpname()
  os.remove(tmp)
  -- (removed when the script ends, an error included: lua_close collects it)
  cleanup = newproxy(true)
  getmetatable(cleanup).__gc = function() os.execute(('rm -rf %q'):format(tmp)) end
  local colours = { { 'red', { 0.8, 0.1, 0.1 } }, { 'green', { 0.1, 0.7, 0.2 } }, { 'blue', { 0.1, 0.2, 0.8 } } }
  for _, split in ipairs({ { 'train', 16 }, { 'val', 4 } }) do
    local n = split[2]
    for _, c in ipairs(colours) do
      local rgb, dir = c[2], ('%s/%s/%s'):format(tmp, split[1], c[1])
      assert(os.execute(('mkdir -p %q'):format(dir)) == 0, 'finetune: cannot make ' .. dir)
      for k = 1, n do
        local h, w = 40 + 4 * (k % 3), 44 + 3 * (k % 4)
        local img = lunet.rand(3, h, w):mul(0.3):add_(lunet.tensor(rgb):view(3, 1, 1)):clamp_(0, 1)
        data.write_png(img:mul(255):to('uint8'), ('%s/%03d.png'):format(dir, k))
      end
    end
  end
  args.data, args.out, args.grid, args.onnx = tmp, tmp .. '/best.safetensors', tmp .. '/val.png', tmp .. '/model.onnx'
  print(('smoke: a synthetic ImageFolder in %s (removed at the end)'):format(tmp))
end

-- each family's classification head, as torchvision users replace it for
-- fine-tuning (torch's model.classifier[6] = nn.Linear(4096, n) is
-- classifier[7] here: 1-based); the new one is a Linear from the old one's
-- inputs to the folder's classes (SqueezeNet's: a 1x1 Conv2d(512, n))
local HEADS = {
  { '^resne', 'fc' }, { '^wide_resnet', 'fc' }, { '^regnet', 'fc' }, { '^shufflenet', 'fc' }, { '^googlenet', 'fc' },
  { '^inception', 'fc', 'AuxLogits.fc' },   -- its aux head too (trained with 0.4 of its loss, as the tutorial)
  { '^vgg', 'classifier[7]' }, { '^alexnet', 'classifier[7]' }, { '^squeezenet', 'classifier[2]' },
  { '^mobilenet_v3', 'classifier[4]' }, { '^mobilenet_v2', 'classifier[2]' }, { '^efficientnet', 'classifier[2]' },
  { '^mnasnet', 'classifier[2]' }, { '^convnext', 'classifier[3]' }, { '^densenet', 'classifier' },
}
-- replaces the head at path ('fc', 'classifier[7]', 'AuxLogits.fc') with one
-- to n classes; returns it and its state_dict prefix ('classifier.6.')
local function replace_head(model, path, n)
  local parent, prefix = model, ''
  local up, last = path:match('^(.-)%.?([^.]+)$')
  for field in up:gmatch('[^.]+') do parent, prefix = parent[field], prefix .. field .. '.' end
  local field, k = last:match('^([%w_]+)%[(%d+)%]$')
  if k then parent, prefix, last = parent[field], prefix .. field .. '.', tonumber(k) end
  local old = parent[last]
  local new = old.weight:dim() == 4 and nn.Conv2d(old.weight:size(2), n, 1) or nn.Linear(old.weight:size(2), n)
  parent[last] = new
  return new, prefix .. (k and k - 1 or last) .. '.'
end

local arch = args.arch or 'resnet18'
local ok, why = pcall(lunet.models.get_model_builder, arch)
if not ok then error('finetune: --arch: ' .. tostring(why):gsub('^.-models%.get_model_builder: ', ''), 0) end
local head
for _, h in ipairs(HEADS) do if arch:lower():match(h[1]) then head = h end end
arch = arch:lower()

-- torchvision's 224 (Inception v3: 299, which its aux head needs in train
-- mode); --smoke's 64 but for AlexNet and VGG, whose adaptive pools (6x6,
-- 7x7) export to ONNX only when they divide the features, as torch's
local big = { ['^inception'] = 299, ['^alexnet'] = 224, ['^vgg'] = 224 }
local size = num('size', big[head[1]] and (smoke and big[head[1]] or math.max(224, big[head[1]])) or (smoke and 64 or 224), 8)
local resize = math.floor(size * 256 / 224 + 0.5)   -- Resize(256) before CenterCrop(224), scaled
local mean, std = { 0.485, 0.456, 0.406 }, { 0.229, 0.224, 0.225 }   -- ImageNet's, as the weights expect
local train_tf = { T.RandomResizedCrop(size), T.RandomHorizontalFlip() }
if args.trivialaugment then train_tf[#train_tf + 1] = T.TrivialAugmentWide() end
train_tf[#train_tf + 1] = T.Normalize(mean, std)
local train = data.ImageFolder(args.data .. '/train', { transform = T.Compose(train_tf) })
local val = data.ImageFolder(args.data .. '/val', { transform = T.Compose {
  T.Resize(resize), T.CenterCrop(size), T.Normalize(mean, std) } })
if table.concat(train.classes, '\n') ~= table.concat(val.classes, '\n') then
  error(('finetune: train has classes {%s} but val {%s}'):format(table.concat(train.classes, ', '),
    table.concat(val.classes, ', ')), 0)
end
local workers, batch = num('workers', 2, 0), num('batch', smoke and 8 or 16, 1)
local train_loader = data.DataLoader(train, { batch_size = batch, shuffle = true, seed = 1, workers = workers })
local val_loader = data.DataLoader(val, { batch_size = batch, workers = workers })
print(('%d classes (%s), %d training and %d validation images'):format(#train.classes,
  table.concat(train.classes, ', '), #train, #val))

-- GoogLeNet and Inception as torchvision builds them for its weights: its
-- googlenet file has no aux heads; both take ImageNet-normalised input
local config = {}
if arch == 'googlenet' then config.aux_logits = false end
if head[1] == '^googlenet' or head[1] == '^inception' then config.transform_input = args.weights ~= nil or smoke end
if smoke then   -- stands in for torchvision's file: torch.save's format, the 1000-class head
  -- and, as a trained model's, batch norm statistics that fit the images
  -- (MobileNetV3's and EfficientNet's momentum 0.01 would take ~500 steps)
  local m = lunet.models.get_model(arch, config)
  for _, bn in ipairs(m:modules()) do if bn.track_running_stats then bn.momentum = nil end end
  lunet.no_grad(function() for x in train_loader:iter() do m(x) end end)
  args.weights = ('%s/%s.pth'):format(tmp, arch)
  lunet.save_torch(args.weights, m:state_dict())
end
local model = lunet.models.get_model(arch, config)
local weights = args.weights and lunet.load(args.weights)
if weights then   -- strict: every key, every shape
  model:load_state_dict(weights)
  print(('%s weights from %s'):format(arch, args.weights))
end
-- --freeze: the backbone's weights stay (its batch norms' running stats still
-- follow the data in train mode, as in the tutorial); the new head trains
if args.freeze then model:requires_grad_(false) end
local heads, prefixes = {}, {}
for k = 2, #head do heads[#heads + 1], prefixes[#prefixes + 1] = replace_head(model, head[k], #train.classes) end
local device = lunet.devices()[1]   -- a GPU if any
model:to(device)

local epochs = num('epochs', smoke and 6 or 25, 1)
local params = model:parameters()
if args.freeze then
  params = {}
  for _, h in ipairs(heads) do for _, p in ipairs(h:parameters()) do params[#params + 1] = p end end
end
local opt = optim.SGD(params, { lr = num('lr', smoke and 0.01 or 0.001, 0), momentum = 0.9 })
local schedule = args.schedule or 'step'
local sched
if schedule == 'step' then sched = optim.StepLR(opt, { step_size = 7, gamma = 0.1 })
elseif schedule == 'cosine' then sched = optim.CosineAnnealingLR(opt, { T_max = epochs })
else error(("finetune: --schedule must be 'step' or 'cosine', got '%s'"):format(schedule), 0) end
local criterion = nn.CrossEntropyLoss()

-- accuracy on val, and the first batch's images and predictions (for the grid)
local function evaluate()
  model:eval()
  local correct, seen, first = 0, 0, nil
  lunet.no_grad(function()
    for x, y in val_loader:iter() do
      local pred = model(x:to(device)):argmax(2):to('cpu:0')
      correct = correct + pred:eq(y):sum():item()
      seen = seen + y:size(1)
      first = first or { x, pred }
    end
  end)
  return correct / seen, first
end

local out = args.out or 'finetune.safetensors'
local best, best_epoch, t0 = -1, 0, lunet.clock()
for epoch = 1, epochs do
  model:train()
  local sum, n = 0, 0
  for x, y in train_loader:iter() do
    opt:zero_grad()
    local out, yd = model(x:to(device)), y:to(device)
    -- Inception's aux head in train mode: the tutorial's loss1 + 0.4 * loss2
    local loss = not lunet.is_tensor(out) and criterion(out.logits, yd) + criterion(out.aux_logits, yd) * 0.4 or criterion(out, yd)
    loss:backward()
    opt:step()
    sum, n = sum + loss:item() * y:size(1), n + y:size(1)
  end
  sched:step()
  local acc = evaluate()
  print(('epoch %d/%d  train loss %.4f  val acc %.2f%%'):format(epoch, epochs, sum / n, 100 * acc))
  if acc > best then   -- lunet.save writes a temporary file and renames it: never half a checkpoint
    best, best_epoch = acc, epoch
    lunet.save(out, model:state_dict(), { arch = arch, classes = table.concat(train.classes, '\n') })
  end
end
print(('best val acc %.2f%% (epoch %d), saved to %s (%.0f s)'):format(100 * best, best_epoch, out, lunet.clock() - t0))

-- the best weights back, then a grid of val images and their predictions
model:load_state_dict(lunet.load(out))
local acc, first = evaluate()
local x, pred = first[1]:narrow(1, 1, math.min(8, first[1]:size(1))), first[2]
local unnorm = x:mul(lunet.tensor(std):view(1, 3, 1, 1)):add(lunet.tensor(mean):view(1, 3, 1, 1)):clamp(0, 1)
local grid = args.grid or out:gsub('%.[^./]*$', '') .. '_val.png'
lunet.utils.save_image(unnorm, grid, { nrow = 4 })
local names = {}
for k, c in ipairs(pred:totable()) do if k <= x:size(1) then names[k] = ('%d:%s'):format(c, train.classes[c]) end end
print(('val images: %s (predicted, row by row: %s)'):format(grid, table.concat(names, ' ')))

if args.onnx then
  local sample = x:narrow(1, 1, 1):to(device)
  lunet.onnx.export(model, sample, args.onnx, { dynamic_axes = { input = { 'batch' }, output = { 'batch' } } })
  print(('ONNX: %s'):format(args.onnx))
end

if smoke then   -- the run's files are right, then the folder goes
  local chance = 1 / #train.classes
  local ok, why = acc > chance, ('val acc %.2f%% does not beat chance (%.2f%%)'):format(100 * acc, 100 * chance)
  if ok then
    local img = data.read_image(grid)
    local m = lunet.onnx.load(args.onnx)
    model:eval()
    -- the file's outputs against the model's, relative to the largest logit.
    -- The file's folded batch norms round otherwise than the model (torch's
    -- file has the same weights, bit for bit), and a backbone trained hard
    -- from the stand-in weights (not --freeze: logits ~1e4-1e6) amplifies
    -- float32 rounding to 1e-3-1e-1, in the model's own float32 outputs as
    -- in the file's. Then the file must be as close to the exact outputs
    -- (the model in float64) as the float32 model is, within a factor of 30
    -- (the ratio varies from run to run: up to ~10 seen), the model's error
    -- the worst of 3 runs on inputs rounded differently
    local d, note, d_file, d_model = lunet.no_grad(function()
      local want, got = model(x:to(device)):to('cpu:0'), m(x)
      local s = math.max(1, want:abs():max():item())
      local d = (got - want):abs():max():item() / s
      if d < 1e-4 then return d, '' end
      model:to('float64')   -- (and back: float32 -> float64 -> float32 is exact)
      local exact = model(x:to(device):double()):to('cpu:0')
      model:to('float32')
      local function err(y) return (y:double() - exact):abs():max():item() / s end
      local d_model = err(want)
      for _ = 1, 2 do
        local xr = x * (lunet.randn(x:size()) * 2 ^ -24 + 1)
        d_model = math.max(d_model, err(model(xr:to(device)):to('cpu:0')))
      end
      return d, (': this model amplifies float32 rounding, the file is %.1e from its float64 outputs and'
        .. ' the float32 model %.1e'):format(err(got), d_model), err(got), d_model
    end)
    ok = img:size(1) == 3 and img:size(2) == 2 * (size + 2) + 2 and img:size(3) == 4 * (size + 2) + 2
      and (d < 1e-4 or d_file <= 30 * d_model)
    why = ('the grid is %s (8 images, 4 to a row), the ONNX outputs differ by %g (relative)%s'):format(
      table.concat(img:size(), 'x'), d, note)
    for _, e in ipairs(args.freeze and model:named_parameters() or {}) do   -- the backbone as loaded
      local in_head = false
      for _, p in ipairs(prefixes) do in_head = in_head or e[1]:sub(1, #p) == p end
      if ok and not in_head and not e[2]:to('cpu:0'):equal(weights[e[1]]) then
        ok, why = false, ('--freeze, but %s changed'):format(e[1])
      end
    end
    if ok then print(('smoke: val acc %.2f%% > chance %.2f%%, grid %dx%d, ONNX matches (%.1e%s)%s'):format(
      100 * acc, 100 * chance, img:size(2), img:size(3), d, note, args.freeze and ', backbone unchanged' or '')) end
  end
  if not ok then error('finetune --smoke: ' .. why, 0) end
end
