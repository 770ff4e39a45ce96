-- lunet.nn.eager: a container frees an intermediate activation as soon as
-- the next layer has consumed it, as PyTorch's reference counting does.
-- Lua frees a tensor only when its collector finds the handle, and a full
-- collection (lunet.tensor triggers one as a device's bytes grow) walks the
-- whole Lua heap: left to it, a small CNN's training spent a sixth of its
-- step collecting, and every step's activations sat in memory until then,
-- cold when their blocks came back. Freed here, a layer's output goes back
-- to the device's cache after its consumer ran and the autograd node that
-- saved it has run its backward (lunet.autograd.engine frees saved tensors
-- then), so the next step reuses warm blocks and collections come rarely.
--
-- Only what no one else can hold is freed: a tensor that a child of the
-- container made (never the container's input), consumed by the next child,
-- where both children are lunet.nn's own classes or lunet.models' blocks
-- (eager.own; their whole subtree too) with no hooks and no forward of
-- their own (a user's module may keep its input or output), the consumer
-- gave back a different tensor, and that
-- tensor is not a view of it (an in-place op on the view rewrites its base's
-- history). Anomaly mode keeps everything. LUNET_EAGER_FREE=0, or
-- eager.enabled = false, leaves all of it to the collector.
local T = require 'lunet.tensor'
local S = require 'lunet.autograd.mode'
local C = require('lunet.core').C
local plain = require('lunet.nn.hooks').plain
local free_now, is_tensor = T.free_now, T.is_tensor

local eager = { enabled = os.getenv('LUNET_EAGER_FREE') ~= '0' }

-- class -> whether it is lunet.nn's own (nn.X loaded from lunet.nn.X)
local own = setmetatable({}, { __mode = 'k' })
local function own_class(cls)
  local b = own[cls]
  if b == nil then
    local name = rawget(cls, '__name')
    local short = type(name) == 'string' and name:match('^nn%.([%w_]+)$')
    local ok, mod = false, nil
    if short then ok, mod = pcall(require, 'lunet.nn.' .. short) end
    b = ok and rawequal(mod, cls) or false
    own[cls] = b
  end
  return b
end

-- eager.own(cls): a class of lunet's own outside lunet.nn (lunet.models'
-- blocks) whose forward keeps neither its input nor its output; its
-- subclasses are not (they may)
function eager.own(cls) own[cls] = true; return cls end

-- m and its whole subtree are lunet.nn's classes (or eager.own's), without
-- hooks or an instance forward (checked at each call: hooks may come at any
-- time)
local function pure(m)
  local cls = getmetatable(m)
  if not cls or not own_class(cls) or not plain(m) then return false end
  local names = rawget(m, '_children')
  if names then
    for i = 1, #names do
      if not pure(m[names[i]]) then return false end
    end
  end
  return true
end
eager.pure = pure

-- whether freeing is on now (not with CUDA devices, as the autograd
-- engine's early freeing: a CPU device's queued work holds its storages,
-- a GPU stream's does not)
function eager.active() return eager.enabled and not S.anomaly_hook and C.ln_cuda_device_count() == 0 end

-- whether module m frees its own intermediates in this forward
function eager.frees(m) return eager.active() and pure(m) end

-- x, an intermediate that pure children made and consumed, is freed unless
-- y (what its consumer gave back) is x itself or a view of it, or x is
-- input (the forward's own input: a child such as nn.Identity, a Dropout in
-- eval or an in-place ReLU gives its input back, so what a child returns
-- may be the caller's tensor)
function eager.consumed(x, y, input)
  if rawequal(x, y) or rawequal(x, input) or not is_tensor(x) or not is_tensor(y) then return end
  local r = rawget(y, '_record')
  if r and rawequal(r.base, x) then return end
  if x.p ~= nil then free_now(x) end
end

-- whether y is x itself or a view of it (what eager.consumed keeps x for):
-- x consumed by two children, one of which gave back x or a view of it, is
-- not freed when the other gives back something else (a model's aux head)
function eager.aliases(y, x)
  if rawequal(x, y) then return true end
  local r = is_tensor(y) and rawget(y, '_record')
  return r and rawequal(r.base, x) or false
end

-- a residual block's tail, once its output y is made: its last
-- intermediate out, and the shortcut's output when a shortcut module made
-- one (without, identity is the block's input: kept); input, the block's
-- input, is never freed (as eager.consumed)
function eager.residual(out, identity, shortcut, y, input)
  eager.consumed(out, y, input)
  if shortcut then eager.consumed(identity, y, input) end
end

return eager
