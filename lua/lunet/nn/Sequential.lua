-- nn.Sequential{m1, m2, ...} or nn.Sequential(m1, m2, ...): applies its
-- modules in order. Children are named '0', '1', ... as in PyTorch (so
-- state_dict keys match), while seq[1] is the first module, as in Lua.
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local BatchNorm = require 'lunet.nn.BatchNorm'

local Sequential = Module:extend('nn.Sequential')

-- seq[i] is the i-th module (1-based); other keys are fields and methods
Sequential.__index = function(self, k)
  if type(k) == 'number' then
    local names = rawget(self, '_children')
    return names and names[k] and rawget(self, names[k])
  end
  return Sequential[k]
end

function Sequential:__init(first, ...)
  local list = first
  if type(first) ~= 'table' then
    if first ~= nil then error(('nn.Sequential: expected modules (or a list of them), got %s'):format(type(first)), 3) end
  end
  if first == nil or first._params then list = { first, ... } end
  for i = 1, table.maxn(list) do
    if list[i] == nil then error(('nn.Sequential: module %d is nil'):format(i), 3) end
    self:add(list[i])
  end
end

-- add(module[, name])
function Sequential:add(m, name)
  if type(m) ~= 'table' or not m._params then
    error(('nn.Sequential: add expects an nn.Module, got %s'):format(type(m)), 2)
  end
  self:add_module(name or tostring(#self._children), m)
  return self
end

function Sequential:get(i) return self[self._children[i]] end
function Sequential:size() return #self._children end

-- Conv2d -> BatchNorm2d (eval) [-> ReLU] runs as one fused kernel
-- (Conv2d:forward_fused): the batch norm folded into the convolution, the
-- relu a post-op; same results as calling the three modules in turn.
-- Two or more nn.BasicBlocks in a row, in eval mode with no gradient
-- recorded, run as one call that keeps the activations in oneDNN's blocked
-- layout between the blocks (F.basic_blocks_eval).
-- ReLU -> MaxPool2d runs as MaxPool2d -> ReLU: relu is monotone, so
-- max(relu(x)) = relu(max(x)) value for value (NaN included: both keep
-- it), and the gradient reaches the same element (the first maximum; none
-- when the maximum is <= 0), while the relu passes touch a quarter of the
-- elements (LeNet-5: ~7% of a training step).
local Conv2d, ReLU, BasicBlock, MaxPool2d
local MAXB = 16
local A = require 'lunet.autograd'
local function grad_needed(x, conv, bn)
  return A.is_grad_enabled() and (A.needs(x) or A.needs(conv.weight) or A.needs(conv.bias) or A.needs(bn.weight)
    or A.needs(bn.bias))
end
function Sequential:forward(x)
  Conv2d = Conv2d or require 'lunet.nn.Conv2d'
  ReLU = ReLU or require 'lunet.nn.ReLU'
  BasicBlock = BasicBlock or require 'lunet.nn.BasicBlock'
  MaxPool2d = MaxPool2d or require 'lunet.nn.MaxPool2d'
  local names = self._children
  local i, n = 1, #names
  while i <= n do
    local m = self[names[i]]
    local bn = i < n and self[names[i + 1]]
    -- a stem: Conv2d -> BatchNorm2d -> ReLU right before the blocks
    local s = 0
    if bn and i + 3 <= n and Conv2d.fusable(m, bn) and not grad_needed(x, m, bn) then
      local r = self[names[i + 2]]
      if getmetatable(r) == ReLU and rawget(r, 'forward') == nil and type(m.padding) ~= 'string' then s = 3 end
    end
    -- the fusable blocks from i + s on, their parts kept in a reused table
    local run = 0
    local blocks = rawget(self, '_block_run')
    if bn and getmetatable(self[names[i + s]]) == BasicBlock then
      if not blocks then blocks = {}; rawset(self, '_block_run', blocks) end
      while i + s + run <= n and run < MAXB do
        local b = blocks[run + 1] or {}
        blocks[run + 1] = b
        b[1], b[2], b[3], b[4], b[5], b[6] = BasicBlock.eval_parts(self[names[i + s + run]], x)
        if not b[1] then break end
        run = run + 1
      end
    end
    if run >= 2 or (run >= 1 and s > 0) then
      if s > 0 then x = F.basic_blocks_eval(x, blocks, run, m, bn) else x = F.basic_blocks_eval(x, blocks, run) end
      i = i + s + run
    elseif bn and Conv2d.fusable(m, bn) then
      local r = i + 1 < n and self[names[i + 2]]
      local relu = r and getmetatable(r) == ReLU and rawget(r, 'forward') == nil
      x = m:forward_fused(x, bn, nil, relu)
      i = i + (relu and 3 or 2)
    elseif bn and getmetatable(bn) == ReLU and rawget(bn, 'forward') == nil and BatchNorm.fusable(m) then
      x = m:forward_relu(x)   -- BatchNorm -> ReLU in one pass (F.batch_norm_relu)
      i = i + 2
    elseif bn and getmetatable(m) == ReLU and getmetatable(bn) == MaxPool2d and rawget(m, 'forward') == nil
      and rawget(bn, 'forward') == nil then
      x = m:forward(bn:forward(x))
      i = i + 2
    else
      x = m:forward(x)
      i = i + 1
    end
  end
  return x
end

return Sequential
