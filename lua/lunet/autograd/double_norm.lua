-- lunet.autograd.double_norm: the differentiable backwards (create_graph,
-- see lunet.autograd.double) of batch_norm and its fused forms
-- batch_norm_relu and batch_norm_add_relu, whose plain backwards are C
-- kernels. As PyTorch's batchnorm_double_backward: in training the batch's
-- mean and 1/std are functions of x, recomputed here from the live x (eps
-- saved as x4) so that the second derivative goes through them; in eval
-- they are the running statistics, constants. n.a is x, n.b the weight (or
-- nil), n.r the output of the fused forms (its sign masks g), x1, x2 the
-- saved mean and 1/std, x3 training (1/0).

-- x's dims but the channels' (2), and the shape {1, C, 1, ...} that
-- broadcasts a per-channel vector over x
local function dims_of(x)
  local nd, dims, shape = x:dim(), {}, {}
  for d = 1, nd do
    shape[d] = d == 2 and x:size(2) or 1
    if d ~= 2 then dims[#dims + 1] = d end
  end
  return dims, shape
end

-- gx, gw, gb of batch norm for the output gradient g (recorded ops)
local function bn_double(n, g)
  local x, w = n.a, n.b
  local dims, shape = dims_of(x)
  local mean, invstd
  if n.x3 == 1 then
    mean = x:mean(dims, true)
    local d = x - mean
    invstd = ((d * d):mean(dims, true) + n.x4):rsqrt()
  else
    mean, invstd = n.x1:reshape(shape), n.x2:reshape(shape)
  end
  local xhat = (x - mean) * invstd
  local gx, gw, gb
  if n[1] then
    local scale = invstd
    if w then scale = scale * w:reshape(shape) end
    if n.x3 == 1 then
      gx = (g - g:mean(dims, true) - xhat * (g * xhat):mean(dims, true)) * scale
    else
      gx = g * scale
    end
  end
  if n[2] then gw = (g * xhat):sum(dims) end
  if n[3] then gb = g:sum(dims) end
  return gx, gw, gb
end

return function(DOUBLE)
  DOUBLE.batch_norm = bn_double
  -- relu(batch_norm(...)): g where the output is positive
  DOUBLE.batch_norm_relu = function(n, g) return bn_double(n, g * n.r:gt(0):to(g.dtype)) end
  -- relu(batch_norm(x) + residual): the residual gets the masked g too
  DOUBLE.batch_norm_add_relu = function(n, g)
    local gm = g * n.r:gt(0):to(g.dtype)
    local gx, gw, gb = bn_double(n, gm)
    return { gx or false, gw or false, gb or false, n[4] and gm or false }
  end
end
