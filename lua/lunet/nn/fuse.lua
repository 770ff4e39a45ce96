-- lunet.nn.fuse: runs a container's children in order, fusing the runs of
-- them that have a faster equivalent. It is the one place that knows which
-- layer types fuse; a container that applies its children one after the
-- other (nn.Sequential) calls fuse.forward(self, x) and knows none of them.
-- Every rule gives the same values as the modules run one by one:
-- * Conv2d -> BatchNorm2d (eval) [-> ReLU] runs as one fused kernel
--   (Conv2d:forward_fused): the batch norm folded into the convolution, the
--   relu a post-op.
-- * Two or more nn.BasicBlocks in a row (or one after such a Conv2d ->
--   BatchNorm2d -> ReLU stem), in eval mode with no gradient recorded, run
--   as one call that keeps the activations in oneDNN's blocked layout
--   between the blocks (F.basic_blocks_eval).
-- * BatchNorm -> ReLU runs as one pass (BatchNorm:forward_relu,
--   F.batch_norm_relu) when BatchNorm.fusable says that is the same.
-- * ReLU -> MaxPool2d runs as MaxPool2d -> ReLU: relu is monotone, so
--   max(relu(x)) = relu(max(x)) value for value (NaN included: both keep
--   it), and the gradient reaches the same element (the first maximum; none
--   when the maximum is <= 0), while the relu passes touch a quarter of the
--   elements (LeNet-5: ~7% of a training step).
-- A module with its own forward (an instance field) or of a subclass is
-- never fused: it runs as written.
local F = require 'lunet.nn.functional'
local BatchNorm = require 'lunet.nn.BatchNorm'
local A = require 'lunet.autograd'

local M = {}

-- (loaded on first use: these modules load nn.Sequential, which loads this)
local Conv2d, ReLU, BasicBlock, MaxPool2d
local MAXB = 16   -- blocks per fused chain

local function grad_needed(x, conv, bn)
  return A.is_grad_enabled() and (A.needs(x) or A.needs(conv.weight) or A.needs(conv.bias) or A.needs(bn.weight)
    or A.needs(bn.bias))
end

local function plain(m, cls) return getmetatable(m) == cls and rawget(m, 'forward') == nil end

-- fuse.forward(container, x): container's children (its _children names,
-- in order) applied to x. The chain of blocks' parts is kept in a table of
-- the container's (_block_run), reused from call to call.
function M.forward(self, x)
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
      if plain(self[names[i + 2]], ReLU) and type(m.padding) ~= 'string' then s = 3 end
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
      local relu = i + 1 < n and plain(self[names[i + 2]], ReLU)
      x = m:forward_fused(x, bn, nil, relu)
      i = i + (relu and 3 or 2)
    elseif bn and plain(bn, ReLU) and BatchNorm.fusable(m) then
      x = m:forward_relu(x)   -- BatchNorm -> ReLU in one pass (F.batch_norm_relu)
      i = i + 2
    elseif bn and plain(m, ReLU) and plain(bn, MaxPool2d) then
      x = m:forward(bn:forward(x))
      i = i + 2
    else
      x = m:forward(x)
      i = i + 1
    end
  end
  return x
end

return M
