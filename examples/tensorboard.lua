-- Logging a training run to TensorBoard with lunet.utils.tensorboard.
--
--   luajit examples/tensorboard.lua [LOGDIR]        (default runs/tensorboard_example)
--   tensorboard --logdir runs                        (then open http://localhost:6006)
--
-- lunet.fit trains a small classifier on synthetic data one epoch at a time
-- (fit has no per-epoch callback: each call continues the same model and
-- optimizer), and each epoch's loss, accuracy and learning rate go to the
-- writer, with a histogram of the first layer's weights. Then a text note, an
-- image and the run's hyperparameters beside its final metrics.
local lunet = require 'lunet'
local SummaryWriter = require('lunet.utils.tensorboard').SummaryWriter
local nn = lunet.nn

local logdir = arg[1] or 'runs/tensorboard_example'
lunet.manual_seed(0)
local x = lunet.randn(256, 8)
local y = x:narrow(2, 1, 1):reshape(-1):gt(0):long() + 1   -- (1-based classes, as lunet's CrossEntropyLoss)
local loader = lunet.data.DataLoader(lunet.data.TensorDataset(x, y), { batch_size = 32, shuffle = true })
local model = nn.Sequential { nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2) }
local opt = lunet.optim.SGD(model:parameters(), { lr = 0.1 })

local w = SummaryWriter { log_dir = logdir }
local last
for epoch = 1, 5 do
  last = lunet.fit(model, loader, { epochs = 1, optimizer = opt, quiet = true, progress = false })[1]
  w:add_scalar('loss/train', last.train_loss, epoch)
  w:add_scalar('accuracy/train', last.train_acc, epoch)
  w:add_scalars('lr', { sgd = last.lr }, epoch)
  w:add_histogram('fc1.weight', model[model._children[1]].weight, epoch)
end
w:add_text('notes', 'a 2-layer MLP on synthetic data', 5)
w:add_image('input_grid', x:narrow(1, 1, 16):reshape(1, 16, 8):sigmoid(), 5)
w:add_hparams({ lr = 0.1, batch_size = 32, optimizer = 'sgd' },
  { ['hparam/loss'] = last.train_loss, ['hparam/accuracy'] = last.train_acc }, { run_name = 'hparams' })
w:close()
print(('wrote %s: tensorboard --logdir %s'):format(logdir, logdir))
