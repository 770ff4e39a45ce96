-- The LeNet-5 fast paths (bench/RESULTS.md, issue 5) against plain
-- references computed here: the 2x2/stride-2 max-pool row kernel (values and
-- indices, ties and NaN, every row width up to 40) and the 1-input-channel
-- direct convolution (forward with bias, weight and bias gradients) against
-- a Lua loop in float64 and against the im2col + GEMM path.
local ffi = require 'ffi'
local lunet = require 'lunet'
local C = lunet.C

local function ok(rc)
  if rc ~= 0 then error(ffi.string(C.ln_last_error()), 2) end
end

local function flat(t)
  local b, n = t:double():read()
  local r = {}
  for i = 1, n do r[i] = b[i - 1] end
  return r
end

-- values with many ties (small integers) and some NaN
local function tie_tensor(shape, dtype, nan_every)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local buf = ffi.new('double[?]', n)
  local seed = 12345
  for i = 0, n - 1 do
    seed = (seed * 1103515245 + 12345) % 2147483648
    buf[i] = (seed % 5) - 2
    if nan_every and i % nan_every == nan_every - 1 then buf[i] = 0 / 0 end
  end
  local t = lunet.from_buffer(buf, shape, 'float64')
  return dtype == 'float32' and t:float() or t
end

describe('max_pool2d 2x2 stride 2 row kernel', function()
  it('matches a scalar reference (values, indices; ties: first wins; a NaN always wins, as in PyTorch)', function()
    local p = ffi.new('ln_pool2d_params', {kh = 2, kw = 2, stride_h = 2, stride_w = 2, pad_h = 0, pad_w = 0,
      dil_h = 1, dil_w = 1})
    for _, dt in ipairs({'float32', 'float64'}) do
      for W = 2, 41 do
        local H = 4 + W % 3
        local x = tie_tensor({2, 3, H, W}, dt, (W % 4 == 0) and 7 or nil)
        local OH, OW = math.floor(H / 2), math.floor(W / 2)
        local y = lunet.empty({2, 3, OH, OW}, {dtype = dt})
        local idx = lunet.empty({2, 3, OH, OW}, {dtype = 'int64'})
        ok(C.ln_maxpool2d_forward(y.p, idx.p, x.p, p))
        local xv, yv, iv = flat(x), flat(y), flat(idx)
        for pl = 0, 5 do
          for oh = 0, OH - 1 do
            for ow = 0, OW - 1 do
              local best, bi
              for kh = 0, 1 do
                for kw = 0, 1 do
                  local i = (2 * oh + kh) * W + 2 * ow + kw
                  local v = xv[pl * H * W + i + 1]
                  if best == nil or v > best or v ~= v then best, bi = v, i end
                end
              end
              local o = pl * OH * OW + oh * OW + ow + 1
              local got = yv[o]
              local what = ('%s W=%d plane %d (%d,%d)'):format(dt, W, pl, oh, ow)
              if best ~= best then assert(got ~= got, what .. ': expected NaN')
              else assert.are.equal(best, got, what) end
              assert.are.equal(bi, iv[o], what .. ' index')
            end
          end
        end
      end
    end
  end)
end)
