-- lunet.cuda: the CUDA devices. Their backend (c/cuda/, build/liblunet_cuda.so)
-- loads on the first question about them; without a driver, a GPU or the
-- library there are none, and reason() says which.
--   lunet.cuda.is_available()  lunet.cuda.device_count()  lunet.cuda.reason()
--   lunet.cuda.synchronize([dev])  lunet.cuda.memory_stats([dev])  lunet.cuda.empty_cache([dev])
-- Environment: LUNET_CUDA=0 never loads the backend; LUNET_CUDA_LIB names the
-- library (default: liblunet_cuda.so beside liblunet.so); LUNET_CUDA_TF32=1
-- lets cuBLAS and cuDNN use TF32 tensor cores for float32 (exact FP32 otherwise).
local ffi = require 'ffi'
local core = require 'lunet.core'
local C = core.C

local cuda = {}
local CUDA_BASE = 256

function cuda.device_count() return tonumber(C.ln_cuda_device_count()) end
function cuda.is_available() return C.ln_cuda_device_count() > 0 end

-- why there is no CUDA device (nil when there is one): the driver's error,
-- the library that did not load, or no GPU
function cuda.reason()
  if cuda.is_available() then return nil end
  return ffi.string(C.ln_cuda_reason())
end

-- the device ids fn acts on: dev's (it must be a cuda device), else all of them
local function ids(fn, dev)
  local n = cuda.device_count()
  if dev == nil then
    if n == 0 then error(('cuda.%s: no CUDA device (%s)'):format(fn, cuda.reason()), 3) end
    local list = {}
    for i = 0, n - 1 do list[#list + 1] = CUDA_BASE + i end
    return list
  end
  local id = core.device_id('cuda.' .. fn, dev)
  if id < CUDA_BASE or id >= 2 * CUDA_BASE then
    error(('cuda.%s: %s is not a CUDA device'):format(fn, core.device_name(id)), 3)
  end
  return {id}
end

function cuda.synchronize(dev)
  for _, id in ipairs(ids('synchronize', dev)) do
    if C.ln_sync(id) ~= 0 then error((core.last_error():gsub('^sync: ', 'cuda.synchronize: ', 1)), 2) end
  end
end

-- bytes held by live tensors (allocated), kept in the cache for reuse
-- (cached), and the most ever allocated (peak); summed over the devices
-- when dev is nil
function cuda.memory_stats(dev)
  local s = {allocated = 0, cached = 0, peak = 0}
  for _, id in ipairs(ids('memory_stats', dev)) do
    s.allocated = s.allocated + tonumber(C.ln_memory_allocated(id))
    s.cached = s.cached + tonumber(C.ln_memory_cached(id))
    s.peak = s.peak + tonumber(C.ln_memory_peak(id))
  end
  return s
end

-- returns the cached blocks to the driver (live tensors keep theirs)
function cuda.empty_cache(dev)
  for _, id in ipairs(ids('empty_cache', dev)) do
    if C.ln_empty_cache(id) ~= 0 then error('cuda.empty_cache: ' .. core.last_error(), 2) end
  end
end

return cuda
