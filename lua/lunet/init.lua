-- lunet: tensors, CNN layers and multi-device training for LuaJIT.
--   local lunet = require 'lunet'
-- Submodules (nn, optim, data, parallel, ...) load on first use.
local ffi = require 'ffi'
local core = require 'lunet.core'
local typename = core.typename
local T = require 'lunet.tensor'
require 'lunet.tensor_math'
require 'lunet.tensor_reduce'
require 'lunet.tensor_sort'
require 'lunet.tensor_order_stats'
require 'lunet.tensor_scan'
require 'lunet.tensor_index'
require 'lunet.tensor_print'
require 'lunet.tensor_compose'
require 'lunet.tensor_select'
require 'lunet.tensor_scatter'
local layout = require 'lunet.tensor_layout'
local einsum = require 'lunet.tensor_einsum'
local bins = require 'lunet.tensor_bins'     -- searchsorted, bucketize, t:histc()
local build = require 'lunet.tensor_build'   -- t:unfold(), logspace, block_diag, combinations, trapezoid, ...
require 'lunet.tensor_fused'                 -- t:baddbmm(), addbmm, addmv, addr
require 'lunet.tensor_special'               -- t:polygamma(n), xlogy, copysign
require 'lunet.linalg.methods'   -- t:det(), t:inverse(), ... (lunet.linalg loads on first use)
local factory = require 'lunet.factory'
local autograd = require 'lunet.autograd'   -- wraps the differentiable methods: keep after the tensor modules
local api = require 'lunet.tensor_api'      -- type_as, index_put_, cummax, rot90, hstack, ...: after autograd (composed)
require 'lunet.tensor_gaps'                  -- t.is_cpu, t:new(), resize_, t['repeat'], svd/qr/..., matrix_exp: after autograd
require 'lunet.tensor_random'                -- bernoulli, exponential_, cauchy_, ..., multinomial
require 'lunet.tensor_gaps_math'             -- kron, cov, diag_embed, *_scatter, frexp, i0, histogram, mode, ...
require 'lunet.tensor_scatter_reduce'        -- scatter_reduce, index_reduce (sum, prod, mean, amax, amin)
require('lunet.tensor_guard').install(T.Tensor)   -- names the method when self is no tensor: keep last
local C = core.C

local lunet = {
  Tensor = T.Tensor,
  version = ffi.string(C.ln_version()),
  C = C,
}

for k, v in pairs(factory) do lunet[k] = v end
-- einsum, tensordot, diag, meshgrid, cdist: functions, not methods
for k, v in pairs(layout) do if not k:match('^_') then lunet[k] = v end end
for k, v in pairs(einsum) do lunet[k] = v end
lunet.searchsorted, lunet.bucketize = bins.searchsorted, bins.bucketize
for k, v in pairs(build) do lunet[k] = v end
for k, v in pairs(api) do lunet[k] = v end   -- hstack, vstack, dstack, column_stack, atleast_1d, ...

function lunet.is_tensor(x) return T.is_tensor(x) end

-- safetensors files: lunet.save(path, {name = t}, meta?), lunet.load(path[, {device=}])
function lunet.save(path, tensors, metadata) return require('lunet.serialize').save(path, tensors, metadata) end
function lunet.load(path, opts) return require('lunet.serialize').load(path, opts) end
-- PyTorch's own files: lunet.load reads them too (lunet/torch_format.lua)
function lunet.save_torch(path, obj) return require('lunet.torch_format').save(path, obj) end

-- autograd: lunet.no_grad(fn, ...), lunet.enable_grad(fn, ...), lunet.set_grad_enabled(on)
lunet.autograd = autograd
lunet.no_grad, lunet.enable_grad = autograd.no_grad, autograd.enable_grad
lunet.set_grad_enabled, lunet.is_grad_enabled = autograd.set_grad_enabled, autograd.is_grad_enabled
-- lunet.detect_anomaly(fn, ...): names the first op giving NaN/Inf (lunet/anomaly.lua)
function lunet.detect_anomaly(fn, ...) return require('lunet.anomaly').detect_anomaly(fn, ...) end
function lunet.set_detect_anomaly(on) return require('lunet.anomaly').set_detect_anomaly(on) end

-- functional forms of the methods: lunet.add(a, b), lunet.matmul(a, b), ...
setmetatable(lunet, {
  __index = function(self, k)
    local ok, mod = pcall(require, 'lunet.' .. k)
    if ok then rawset(self, k, mod); return mod end
    if not tostring(mod):find("module 'lunet." .. k .. "' not found", 1, true) then error(mod, 2) end
    local m = T.Tensor[k]
    if type(m) == 'function' then
      -- the functional form names itself when its first argument is no
      -- tensor (tables: cat/stack lists; numbers: binary ops like add(2, t))
      local f = function(x, ...)
        local tx = type(x)
        if tx == 'nil' or tx == 'string' or tx == 'boolean' or tx == 'function' or tx == 'userdata' then
          error(('%s: input must be a tensor, got %s'):format(k, tx), 2)
        end
        return m(x, ...)
      end
      rawset(self, k, f)
      return f
    end
    return nil
  end,
})

-- ---- devices ---------------------------------------------------------------------------

function lunet.set_cpu_devices(n)
  if type(n) ~= 'number' or n % 1 ~= 0 then error('set_cpu_devices: count must be an integer', 2) end
  if n < C.ln_cpu_device_count() then
    -- tensors the program dropped may still await the GC (or sit in a JIT
    -- trace's snapshot): collect them before the devices they use go away
    jit.flush()
    collectgarbage()
    collectgarbage()
  end
  if C.ln_set_cpu_devices(n) ~= 0 then core.raise() end
end

-- The devices present: cuda:* when there are GPUs, else cpu:*. With a type
-- ('cpu' or 'cuda'), the devices of that type: devices('cuda') is empty
-- without GPUs, devices('cpu') lists the (virtual) CPU devices.
function lunet.devices(kind)
  local ncuda = C.ln_cuda_device_count()
  if kind == nil then kind = ncuda > 0 and 'cuda' or 'cpu' end
  local n
  if kind == 'cuda' then n = ncuda
  elseif kind == 'cpu' then n = C.ln_cpu_device_count()
  else
    error(("devices: unknown device type %s (expected 'cpu' or 'cuda')"):format(
      type(kind) == 'string' and ("'" .. kind .. "'") or tostring(kind)), 2)
  end
  local list = {}
  for i = 0, n - 1 do list[#list + 1] = kind .. ':' .. i end
  return list
end

-- the CUDA devices: is_available, reason, synchronize, memory_stats, empty_cache
lunet.cuda = require 'lunet.cuda'

-- device_count(): the devices devices() lists; device_count('cuda') is 0 without GPUs
function lunet.device_count(kind)
  if kind ~= nil and kind ~= 'cpu' and kind ~= 'cuda' then
    error(("device_count: unknown device type %s (expected 'cpu' or 'cuda')"):format(
      type(kind) == 'string' and ("'" .. kind .. "'") or tostring(kind)), 2)
  end
  return #lunet.devices(kind)
end

function lunet.synchronize(dev)
  local rc = dev and C.ln_sync(core.device_id('synchronize', dev)) or C.ln_sync_all()
  if rc ~= 0 then error((core.last_error():gsub('^sync: ', 'synchronize: ', 1)), 2) end
end

function lunet.memory_allocated(dev) return tonumber(C.ln_memory_allocated(core.device_id('memory_allocated', dev))) end
function lunet.memory_cached(dev) return tonumber(C.ln_memory_cached(core.device_id('memory_cached', dev))) end
function lunet.max_memory_allocated(dev) return tonumber(C.ln_memory_peak(core.device_id('max_memory_allocated', dev))) end
-- the device's memory limit in bytes (ln_memory_set_limit, LUNET_CPU_MEMORY); 0: none
function lunet.memory_limit(dev) return tonumber(C.ln_memory_limit(core.device_id('memory_limit', dev))) end
-- the peak from now on (as torch.cuda.reset_peak_memory_stats): max_memory_allocated restarts at what is allocated
function lunet.reset_peak_memory_stats(dev)
  if C.ln_memory_reset_peak(core.device_id('reset_peak_memory_stats', dev)) ~= 0 then
    error((core.last_error():gsub('^memory_reset_peak:', 'reset_peak_memory_stats:', 1)), 2)
  end
end
function lunet.empty_cache(dev) C.ln_empty_cache(core.device_id('empty_cache', dev)) end
-- The full collections of Lua's heap that lunet ran by itself so far (a
-- tensor's memory is freed when its handle is collected: lunet collects as
-- devices' bytes grow or near a memory limit): {count = n, seconds = s},
-- the host's time in them. Differences between two calls tell what a
-- training step spends there.
function lunet.collection_stats()
  local c = T.collections
  return { count = c.count, seconds = c.seconds }
end

-- Kernel threads of a device (default cpu:0), as torch.set_num_threads /
-- get_num_threads: virtual devices share the cores (LUNET_CPU_DEVICES=N gives
-- each cores/N); giving one fewer makes devices unequal, as balance = 'auto'
-- expects of real ones. Waits for the device's queued work first.
function lunet.set_num_threads(n, dev)
  if type(n) ~= 'number' or n % 1 ~= 0 or n < 1 or n > 1024 then
    error('set_num_threads: thread count must be an integer in 1..1024, got ' .. tostring(n), 2)
  end
  if C.ln_set_device_threads(core.device_id('set_num_threads', dev), n) ~= 0 then core.raise() end
end
function lunet.get_num_threads(dev) return C.ln_device_threads(core.device_id('get_num_threads', dev)) end

-- Denormal floats flushed to zero in every kernel thread from now on (as
-- torch.set_flush_denormal): arithmetic on them is many times slower, and
-- decaying momentum buffers or dying activations can fill a step with them.
-- Returns true where the CPU supports it (x86), false (and no change) elsewhere.
function lunet.set_flush_denormal(on)
  if type(on) ~= 'boolean' then error('set_flush_denormal: expected a boolean, got ' .. typename(on), 2) end
  return C.ln_set_flush_denormal(on and 1 or 0) == 1
end
function lunet.flush_denormal() return C.ln_flush_denormal() == 1 end

-- Float32 matmul precision, as torch.set_float32_matmul_precision: 'highest'
-- (default), 'high' (the same on CPUs, as torch's) or 'medium': float32
-- convolutions on oneDNN and matmul/linear/bmm round their inputs to bfloat16
-- and accumulate in float32 where the CPU has AVX512_BF16 (elsewhere as
-- highest). The CPU backend owns it (one process-wide setting, device worker
-- threads included); queued work finishes under the old one. Float64 is
-- never affected.
function lunet.set_float32_matmul_precision(p)
  if type(p) ~= 'string' then
    error("set_float32_matmul_precision: expected 'highest', 'high' or 'medium', got " .. typename(p), 2)
  end
  if C.ln_set_float32_matmul_precision(p) ~= 0 then core.raise() end
end
function lunet.get_float32_matmul_precision() return ffi.string(C.ln_float32_matmul_precision()) end

function lunet.set_default_dtype(dt) core.default_dtype = core.dtype_id('set_default_dtype', dt) end
function lunet.get_default_dtype() return core.dtypes[core.default_dtype] end

function lunet.where(cond, a, b) return T.Tensor.where(a, cond, b) end

-- ---- random state, clock, training loop ----------------------------------------------

-- The generator's (seed, offset): save it to resume a run bit for bit.
function lunet.rng_state()
  local off = ffi.new('uint64_t[1]')
  local seed = C.ln_rng_get_state(off)
  return tonumber(seed), tonumber(off[0])
end
function lunet.set_rng_state(seed, offset)
  local options = require 'lunet.options'
  C.ln_rng_set_state(options.seed('set_rng_state', 'seed', seed), options.seed('set_rng_state', 'offset', offset or 0))
end

lunet.clock = require('lunet.util').clock
lunet.reset_jit = require('lunet.util').reset_jit

-- a torchinfo-like table of a model's layers: lunet.summary
function lunet.summary(model, input, opts) return require('lunet.summary').summary(model, input, opts) end
function lunet.fit(model, loader, opts) return require('lunet.fit').fit(model, loader, opts) end
function lunet.Trainer(model, opts) return require('lunet.fit').Trainer(model, opts) end

return lunet
