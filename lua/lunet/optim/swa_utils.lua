-- lunet.optim.swa_utils, as torch.optim.swa_utils (1.13): stochastic weight averaging.
--   local swa_model = optim.swa_utils.AveragedModel(model)
--   local swa_sched = optim.swa_utils.SWALR(opt, {swa_lr = 0.05})
--   ... after each epoch past the start of SWA:
--   swa_model:update_parameters(model); swa_sched:step()
--   ... at the end:
--   optim.swa_utils.update_bn(loader, swa_model)   -- BatchNorm statistics of the averaged weights
--   swa_model(x)                                   -- forward of the averaged copy
local lunet = require 'lunet'
local core = require 'lunet.core'
local options = require 'lunet.options'
local Module = require 'lunet.nn.Module'
local BatchNorm = require 'lunet.nn.BatchNorm'
local is_table, typename = core.is_table, core.typename
local is_tensor = lunet.is_tensor

local M = {SWALR = require('lunet.optim.lr_scheduler').SWALR}

local function is_module(m) return is_table(m) and rawget(m, '_params') ~= nil and m.forward ~= nil end

-- ---- AveragedModel ---------------------------------------------------------------------

-- AveragedModel(model[, {avg_fn = f, use_buffers = false, device = d}]): a deep
-- copy of model (the `module` child) and an int64 buffer n_averaged.
-- avg_fn(averaged, current, n) returns the new average of a param (n: how
-- many were averaged so far, a number); the default is the running mean
-- averaged + (current - averaged) / (n + 1). use_buffers averages the
-- floating-point buffers too (others, as num_batches_tracked, are copied).
local AveragedModel = Module:extend('AveragedModel')
local OPTS = {avg_fn = 'function', use_buffers = 'boolean', device = true}

local function mean_avg(avg, p, n) return avg + (p - avg) / (n + 1) end

function AveragedModel:__init(model, opts)
  if not is_module(model) then
    options.fail('AveragedModel', 'model must be an nn.Module, got ' .. typename(model))
  end
  opts = options.check('AveragedModel', opts, OPTS) or {}
  local copy = model:clone()
  if opts.device ~= nil then copy:to(opts.device) end
  self:add_module('module', copy)
  self:register_buffer('n_averaged', lunet.zeros({}, {dtype = 'int64', device = opts.device}))
  rawset(self, 'avg_fn', opts.avg_fn or mean_avg)
  rawset(self, 'use_buffers', opts.use_buffers == true)
end

function AveragedModel:forward(...) return self.module(...) end

local function tensors_of(m, use_buffers)
  local out = m:parameters()
  if use_buffers then for _, b in ipairs(m:buffers()) do out[#out + 1] = b end end
  return out
end

-- update_parameters(model): fold model's current params into the average.
function AveragedModel:update_parameters(model)
  local fn = 'AveragedModel:update_parameters'
  if not is_module(model) then options.fail(fn, 'model must be an nn.Module, got ' .. typename(model)) end
  local mine, theirs = tensors_of(self.module, self.use_buffers), tensors_of(model, self.use_buffers)
  if #mine ~= #theirs then
    options.fail(fn, ('model has %d %s, the averaged model %d'):format(#theirs,
      self.use_buffers and 'params and buffers' or 'params', #mine))
  end
  for i, a in ipairs(mine) do
    if a:numel() ~= theirs[i]:numel() then
      options.fail(fn, ('tensor %d of model has %d elements, the averaged one %d'):format(i, theirs[i]:numel(), a:numel()))
    end
  end
  local n = self.n_averaged:item()
  lunet.no_grad(function()
    for i, a in ipairs(mine) do
      local p = theirs[i]:detach():to(a.device)
      if n == 0 or not a:is_floating_point() then a:copy_(p:reshape(a:size()))
      else
        local v = self.avg_fn(a:detach(), p:reshape(a:size()):to(a.dtype), n)
        if not is_tensor(v) then options.fail(fn, 'avg_fn must return a tensor, got ' .. typename(v)) end
        a:copy_(v)
      end
    end
    self.n_averaged:add_(1)
  end)
end

function AveragedModel:extra_repr() return 'n_averaged ' .. self.n_averaged:item() end

M.AveragedModel = AveragedModel

-- ---- update_bn -------------------------------------------------------------------------

local function is_batchnorm(m)
  local c = getmetatable(m)
  while c do
    if c == BatchNorm then return true end
    c = rawget(c, 'super')
  end
  return false
end

-- the first input of a batch: a tensor, or the first of a list {x, y}
local function input_of(b)
  if is_tensor(b) then return b end
  if is_table(b) then return b[1] end
  return b
end

-- loader's iter method, when it has one (a DataLoader is a userdata)
local function iter_of(loader)
  if type(loader) ~= 'table' and type(loader) ~= 'userdata' then return nil end
  local ok, it = pcall(function() return loader.iter end)
  return ok and type(it) == 'function' and it or nil
end

-- each input of loader, which is a DataLoader (its iter()), a list of batches or an iterator function
local function each_input(loader, f)
  if type(loader) == 'function' then
    for x in loader do f(input_of(x)) end
  elseif iter_of(loader) then
    for x in loader:iter() do f(input_of(x)) end
  elseif is_table(loader) then
    for _, b in ipairs(loader) do f(input_of(b)) end
  else
    options.fail('update_bn', 'loader must be a DataLoader, a list of batches or an iterator function, got ' .. typename(loader))
  end
end

-- update_bn(loader, model[, device]): recomputes the running statistics of
-- every BatchNorm of model from one pass over loader: each is reset, then
-- takes the cumulative average over the batches (PyTorch's momentum None);
-- momenta and the train/eval mode are restored after.
function M.update_bn(loader, model, device)
  if not is_module(model) then options.fail('update_bn', 'model must be an nn.Module, got ' .. typename(model)) end
  if not (type(loader) == 'function' or is_table(loader) or iter_of(loader)) then
    options.fail('update_bn', 'loader must be a DataLoader, a list of batches or an iterator function, got ' .. typename(loader))
  end
  local bns, momenta = {}, {}
  for _, m in ipairs(model:modules()) do
    if is_batchnorm(m) and m.running_mean ~= nil then
      bns[#bns + 1], momenta[#bns + 1] = m, m.momentum or false
    end
  end
  if #bns == 0 then return end
  local was_training = model.training
  model:train()
  for _, m in ipairs(bns) do
    m.running_mean:fill_(0); m.running_var:fill_(1); m.num_batches_tracked:fill_(0)
    rawset(m, 'momentum', nil)
  end
  local ok, err = pcall(lunet.no_grad, function()
    each_input(loader, function(x)
      if device ~= nil and is_tensor(x) then x = x:to(device) end
      model(x)
    end)
  end)
  -- (momenta and mode come back even when a batch failed)
  for i, m in ipairs(bns) do rawset(m, 'momentum', momenta[i] or nil) end
  model:train(was_training)
  if not ok then error(err, 0) end
end

return M
