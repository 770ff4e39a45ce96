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
--   elements.
-- A module with its own forward (an instance field), with hooks or of a
-- subclass is never fused: it is called as written (module(x)).
-- Intermediates between lunet.nn's own children are freed as soon as the
-- next child has consumed them (lunet.nn.eager).
local F = require 'lunet.nn.functional'
local eager = require 'lunet.nn.eager'
local pure = eager.pure
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)
local BatchNorm = require 'lunet.nn.BatchNorm'
local A = require 'lunet.autograd'

local M = {}

-- (loaded on first use: these modules load nn.Sequential, which loads this)
local Conv2d, ReLU, BasicBlock, MaxPool2d
local MAXB = 16   -- blocks per fused chain

-- (whether the layers would record a gradient: then they run one by one)
local function grad_needed(x, conv, bn) return A.records(x, conv.weight, conv.bias, bn.weight, bn.bias) end

local plain_instance = require('lunet.nn.hooks').plain
local function plain(m, cls) return getmetatable(m) == cls and plain_instance(m) end

-- A rule is a function (self, names, i, n, x) -> y, k: when the children
-- from self[names[i]] on start a run it fuses, their output y and how many
-- children k it ran; else nil. fuse.add(starts, rule) registers one for
-- runs whose first child is exactly of a class in starts (a class, or the
-- name of one of lunet.nn's); at each child the rules for its class are
-- tried in order, and a child no rule takes runs its own forward.
local rules, by_class = {}, nil
function M.add(starts, rule)
  rules[#rules + 1] = { starts = starts, run = rule }
  by_class = nil
end

-- a chain of BasicBlocks in eval with no gradient, with the Conv2d ->
-- BatchNorm2d -> ReLU stem right before it if there is one: one call (two
-- or more blocks, or a stem and one); their parts kept in a table of the
-- container's (_block_run), reused from call to call
local function chain(self, names, i, n, x)
  local m, bn = self[names[i]], i < n and self[names[i + 1]]
  if not bn then return nil end
  local s = 0
  if i + 3 <= n and Conv2d.fusable(m, bn) and not grad_needed(x, m, bn) then
    if plain(self[names[i + 2]], ReLU) and type(m.padding) ~= 'string' then s = 3 end
  end
  if getmetatable(self[names[i + s]]) ~= BasicBlock then return nil end
  local blocks = rawget(self, '_block_run')
  if not blocks then blocks = {}; rawset(self, '_block_run', blocks) end
  local run = 0
  while i + s + run <= n and run < MAXB do
    local b = blocks[run + 1] or {}
    blocks[run + 1] = b
    b[1], b[2], b[3], b[4], b[5], b[6] = BasicBlock.eval_parts(self[names[i + s + run]], x)
    if not b[1] then break end
    run = run + 1
  end
  if run >= 2 or (run >= 1 and s > 0) then
    if s > 0 then return F.basic_blocks_eval(x, blocks, run, m, bn), s + run end
    return F.basic_blocks_eval(x, blocks, run), run
  end
  return nil
end

-- Conv2d -> BatchNorm2d [-> ReLU] when Conv2d.fusable says so
local function conv_bn(self, names, i, n, x)
  local m, bn = self[names[i]], i < n and self[names[i + 1]]
  if not (bn and Conv2d.fusable(m, bn)) then return nil end
  local relu = i + 1 < n and plain(self[names[i + 2]], ReLU)
  return m:forward_fused(x, bn, nil, relu), relu and 3 or 2
end

-- BatchNorm -> ReLU in one pass (F.batch_norm_relu)
local function bn_relu(self, names, i, n, x)
  local m, r = self[names[i]], i < n and self[names[i + 1]]
  if not (r and plain(r, ReLU) and BatchNorm.fusable(m)) then return nil end
  return m:forward_relu(x), 2
end

-- ReLU -> MaxPool2d as MaxPool2d -> ReLU (not an inplace ReLU: its input,
-- which may be the caller's tensor, must be overwritten as PyTorch's is)
local function relu_pool(self, names, i, n, x)
  local m, pool = self[names[i]], i < n and self[names[i + 1]]
  if not (pool and plain(m, ReLU) and not m.inplace and plain(pool, MaxPool2d)) then return nil end
  local p = pool:forward(x)
  local y = m:forward(p)
  if eager.active() then eager.consumed(p, y) end
  return y, 2
end

M.add({ 'Conv2d', 'BasicBlock' }, chain)
M.add({ 'Conv2d' }, conv_bn)
M.add({ 'BatchNorm1d', 'BatchNorm2d' }, bn_relu)
M.add({ 'ReLU' }, relu_pool)

-- class -> the rules that may start at a child of that class
local function index_rules()
  by_class = {}
  for _, rule in ipairs(rules) do
    for _, name in ipairs(rule.starts) do
      local cls = is_table(name) and name or require('lunet.nn.' .. name)
      local list = by_class[cls] or {}
      by_class[cls] = list
      list[#list + 1] = rule.run
    end
  end
end

-- fuse.forward(container, x): container's children (its _children names,
-- in order) applied to x, the runs a rule takes fused
function M.forward(self, x)
  Conv2d = Conv2d or require 'lunet.nn.Conv2d'
  ReLU = ReLU or require 'lunet.nn.ReLU'
  BasicBlock = BasicBlock or require 'lunet.nn.BasicBlock'
  MaxPool2d = MaxPool2d or require 'lunet.nn.MaxPool2d'
  if not by_class then index_rules() end
  local names = self._children
  local i, n = 1, #names
  -- owned: x is an intermediate that pure children made (lunet.nn.eager)
  local input, owned, free = x, false, eager.active()
  while i <= n do
    local m = self[names[i]]
    local list, y, k = by_class[getmetatable(m)], nil, nil
    if list then
      for r = 1, #list do
        y, k = list[r](self, names, i, n, x)
        if y ~= nil then break end
      end
    end
    if y == nil then y, k = m(x), 1 end
    if free and not rawequal(y, x) then
      local p = pure(m)
      for j = i + 1, i + k - 1 do p = p and pure(self[names[j]]) end
      if owned and p then eager.consumed(x, y) end
      owned = p and not rawequal(y, input)
    end
    x, i = y, i + k
  end
  return x
end

return M
