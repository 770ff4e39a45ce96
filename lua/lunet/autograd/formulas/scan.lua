-- lunet.autograd.formulas.scan: cumsum and cumprod (lunet.tensor_scan), as
-- PyTorch 1.13's derivatives. A dtype option is a recorded cast before the
-- scan (t:to(dtype), whose backward casts the gradient back), as PyTorch
-- casts before it; a result of an integer dtype records nothing.
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local S = require 'lunet.autograd.mode'
local G = require 'lunet.autograd.graph'
local scan_args = require('lunet.tensor_scan').args
local is_tensor = T.is_tensor
local node, edge, attach, saved = G.node, G.edge, G.attach, G.saved

local FLOAT = { [0] = true, [1] = true, [6] = true, [7] = true }   -- float32, float64, float16, bfloat16

-- sum_{k >= i} g_k along dim d: the cumulative sum of the reversed gradient, reversed
local function rev_cumsum(g, d) return g:flip(d):cumsum(d):flip(d) end

return function(def)
  -- n.d: the scanned dim, 1-based (0 for a 0-d input)
  local function cumsum_bw(n, g)
    if n.d == 0 then return g end
    return rev_cumsum(g, n.d)
  end

  -- d out_k / d x_i = prod_{j <= k, j ~= i} x_j (k >= i). Where x_i is no
  -- zero that is out_k / x_i, so grad_i = sum_{k >= i} g_k out_k / x_i; this
  -- holds before a row's first zero z too (out_k is 0 from z on). At z,
  -- grad_z = sum_{k >= z} g_k c_k with c the cumulative product of the row
  -- with x_z as 1 (0 from the second zero on); after z every term has the
  -- factor x_z = 0. (PyTorch's cumprod_backward: the same cases.)
  local function cumprod_bw(n, g)
    local x, out, d = n.a, n.r, n.d
    if d == 0 or x:size(d) <= 1 then return g end   -- (d out / d x = 1, as PyTorch gives g)
    local zero = x:eq(0)
    if not zero:any():item() then return rev_cumsum(out * g, d) / x end
    local nz = zero:cumsum(d)                   -- zeros at or before each position
    local before = nz:eq(0)                     -- before the row's first zero
    local first = zero:logical_and(nz:eq(1))    -- the row's first zero
    local at_before = rev_cumsum(out * g, d) / x:where(before, 1)   -- (no division by a zero)
    local c = x:where(first:logical_not(), 1):cumprod(d)
    local at_first = (g * c):where(nz:ge(1), 0):sum(d, true):expand(x:size())
    return at_before:where(before, at_first:where(first, 0))
  end

  local function recorder(name, bw, save)
    def(name, 'custom', { backward = bw, make = function(orig)
      return function(a, dim, opts)
        if not S.grad_enabled or not is_tensor(a) or a.p.grad_flag == 0 then return orig(a, dim, opts) end
        local cd, dt = scan_args(name, a, dim, opts)
        if dt >= 0 and not FLOAT[dt] then return orig(a, dim, opts) end   -- (an integer result has no gradient)
        local x = a
        if dt >= 0 and dt ~= a.p.dtype_id then x = a:to(core.dtypes[dt]) end
        local r = orig(x, cd + 1)
        local n = node(bw, name, edge(x))
        n.d = a.p.ndim == 0 and 0 or cd + 1
        if save then n.a, n.r = saved(x), saved(r) end
        return attach(r, n)
      end
    end })
  end
  recorder('cumsum', cumsum_bw, false)
  recorder('cumprod', cumprod_bw, true)
end
