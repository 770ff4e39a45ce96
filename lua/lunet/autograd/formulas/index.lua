-- lunet.autograd.formulas.index: scatter_add, diagonal, and the indexing
-- ops of lunet.tensor_scatter that are composed of recorded ops (their
-- entries only make the in-place forms index_add_, scatter_, ...
-- differentiable: autograd.inplace runs the out-of-place op on a clone).
local T = require 'lunet.tensor'
local S = require 'lunet.autograd.mode'
local G = require 'lunet.autograd.graph'
local is_tensor = T.is_tensor
local zeros_as, node, edge, attach, needs, saved = G.zeros_as, G.node, G.edge, G.attach, G.needs, G.saved

return function(def)
  -- r = a:scatter_add(dim, index, src): a's gradient passes, src's is g gathered at index
  local function scatter_add_bw(n, g)
    local ga, gs
    if n[1] then ga = g end
    if n[2] then gs = g:gather(n.dim, n.index) end
    return ga, gs
  end
  def('scatter_add', 'custom', { backward = scatter_add_bw, make = function(orig)
    return function(a, dim, index, src)
      if not S.grad_enabled or not (needs(a) or needs(src)) then return orig(a, dim, index, src) end
      local r = S.no_grad(orig, a, dim, index, src)   -- (its checks first; then index is valid)
      if is_tensor(index) then index = saved(index:detach()) end   -- (a table of 1-based indices as it is)
      local n = node(scatter_add_bw, 'scatter_add', edge(a), edge(src))
      n.dim, n.index = dim, index
      return attach(r, n)
    end
  end })

  -- t:diagonal(offset, dim1, dim2), a view: g written onto the diagonal of zeros
  def('diagonal', 'view', { view = true, args = true, backward = function(n, g)
    local z = zeros_as(n.shape, g)
    S.raw.diagonal(z, n.x1, n.x2, n.x3):copy_(g)
    return z
  end })

  -- t:unfold(dim, size, step), a view whose windows may overlap: g summed
  -- into zeros at the flat positions each element came from
  def('unfold', 'view', { view = true, args = true, backward = function(n, g)
    local numel = 1
    for _, d in ipairs(n.shape) do numel = numel * d end
    local z = zeros_as({ numel }, g)
    if g:numel() == 0 then return z:reshape(n.shape) end
    local pos = require('lunet.factory').arange(numel, { dtype = 'int64', device = g.device }):reshape(n.shape)
    pos = S.raw.unfold(pos, n.x1, n.x2, n.x3):reshape({ g:numel() }):add(1)
    return z:index_add(1, pos, g:reshape({ g:numel() })):reshape(n.shape)
  end })

  -- composed of recorded ops: recorded as they are
  for _, name in ipairs({ 'index_add', 'index_copy', 'index_fill', 'scatter' }) do
    def(name, 'custom', { make = function(orig) return orig end })
  end
end
