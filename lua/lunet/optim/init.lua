-- lunet.optim: optimizers, learning-rate schedulers and gradient clipping,
-- in PyTorch's shapes:
--   local opt = optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9})
--   local sched = optim.StepLR(opt, {step_size = 30})
--   opt:zero_grad(); loss:backward(); optim.clip_grad_norm(params, 1.0); opt:step(); sched:step()
-- zero_grad() zeroes grads in place (PyTorch 1.13's default); zero_grad(true)
-- sets them to nil. Updates are fused C kernels (c/ops/optim.c, c/cpu/optim.c),
-- but Rprop, ASGD and LBFGS, composed from tensor ops. optim.swa_utils holds
-- AveragedModel, SWALR and update_bn (swa_utils.lua).
local Adam = require 'lunet.optim.Adam'
local sched = require 'lunet.optim.lr_scheduler'

local optim = {
  Optimizer = require 'lunet.optim.Optimizer',
  SGD = require 'lunet.optim.SGD',
  Adam = Adam.Adam,
  AdamW = Adam.AdamW,
  RMSprop = require 'lunet.optim.RMSprop',
  Adagrad = require 'lunet.optim.Adagrad',
  Adamax = require 'lunet.optim.Adamax',
  NAdam = require 'lunet.optim.NAdam',
  RAdam = require 'lunet.optim.RAdam',
  Adadelta = require 'lunet.optim.Adadelta',
  Rprop = require 'lunet.optim.Rprop',
  ASGD = require 'lunet.optim.ASGD',
  LBFGS = require 'lunet.optim.LBFGS',
  swa_utils = require 'lunet.optim.swa_utils',
  lr_scheduler = sched,
  clip_grad_norm = require 'lunet.optim.clip_grad',
  clip_grad_value = require 'lunet.optim.clip_grad_value',
}
optim.clip_grad_norm_ = optim.clip_grad_norm
optim.clip_grad_value_ = optim.clip_grad_value
for k, v in pairs(sched) do optim[k] = v end

return optim
