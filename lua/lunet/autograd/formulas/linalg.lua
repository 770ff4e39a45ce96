-- lunet.autograd.formulas.linalg: matrix products: matmul, bmm, addmm.
local T = require 'lunet.tensor'
local S = require 'lunet.autograd.mode'
local G = require 'lunet.autograd.graph'
local sum_to, node, edge, attach, saved, needs, bshape =
  G.sum_to, G.node, G.edge, G.attach, G.saved, G.needs, G.bshape

return function(def, unary)
  -- ---- matrix products ---------------------------------------------------------------------

  local function mT(x) return x:transpose(-1, -2) end

  def('matmul', 'pair', { backward = function(n, g)
    local a, b = n.a, n.b
    local ga, gb
    local na, nb = a.p.ndim, b.p.ndim
    if na == 1 and nb == 1 then
      if n[1] then ga = g * b end
      if n[2] then gb = g * a end
      return ga, gb
    end
    local a2 = na == 1 and a:unsqueeze(1) or a
    local b2 = nb == 1 and b:unsqueeze(2) or b
    local g2 = g
    if na == 1 then g2 = g2:unsqueeze(g2.p.ndim) end
    if nb == 1 then g2 = g2:unsqueeze(g2.p.ndim + 1) end
    local mm = S.raw.matmul
    if n[1] then ga = sum_to(mm(g2, mT(b2)), a2:size()):reshape(a:size()) end
    if n[2] then gb = sum_to(mm(mT(a2), g2), b2:size()):reshape(b:size()) end
    return ga, gb
  end })

  def('bmm', 'pair', { backward = function(n, g)
    local ga, gb
    if n[1] then ga = S.raw.bmm(g, mT(n.b)) end
    if n[2] then gb = S.raw.bmm(mT(n.a), g) end
    return ga, gb
  end })

  -- addmm(c, a, b, {beta, alpha}) = beta c + alpha a b
  local function addmm_bw(n, g)
    local gc, ga, gb
    local beta, alpha = n.beta, n.alpha
    if n[1] then gc = sum_to(beta == 1 and g or g * beta, n.sc) end
    local ga_ = alpha == 1 and g or g * alpha
    if n[2] then ga = ga_:matmul(n.b:t()) end
    -- gb = a^T ga_, computed as (ga_^T a)^T: nn.Linear passes w:t() as b,
    -- so the transposed view's backward hands the weight a contiguous
    -- (out, in) gradient (as PyTorch's grad_output^T input), not a strided
    -- one that every accumulation into .grad would walk across
    if n[3] then gb = ga_:t():matmul(n.a):t() end
    return gc, ga, gb
  end
  def('addmm', 'custom', { backward = addmm_bw, make = function(orig)
    return function(c, a, b, opts)
      if not S.grad_enabled or not (needs(c) or needs(a) or needs(b)) then return orig(c, a, b, opts) end
      local r = orig(c, a, b, opts)
      local n = node(addmm_bw, 'addmm', edge(c), edge(a), edge(b))
      n.a, n.b, n.sc = saved(a), saved(b), bshape(c, r)
      n.beta, n.alpha = opts and opts.beta or 1, opts and opts.alpha or 1
      return attach(r, n)
    end
  end })

  -- lunet.tensor_fused (composed of recorded ops): entries that make their in-place forms differentiable
  for _, name in ipairs({ 'baddbmm', 'addbmm', 'addmv', 'addr' }) do
    def(name, 'custom', { make = function(orig) return orig end })
  end
end
