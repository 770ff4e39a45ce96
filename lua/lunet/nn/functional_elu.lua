-- lunet.nn.functional_elu: elu(x, alpha, scale, input_scale), the one kernel
-- behind F.elu, F.celu and F.selu (torch's elu kernel: scale x where x > 0,
-- else alpha scale (exp(input_scale x) - 1)) and its gradient as one node
-- (formulas/act_loss.lua's elu; create_graph: lunet.autograd.double).
local A = require 'lunet.autograd'
local C = require('lunet.core').C
local wrap = require('lunet.tensor').wrap

local record = A.recorder('elu')

return function(x, alpha, scale, input_scale)
  local r = wrap(C.ln_unary_p(C.LN_ELU, x.p, alpha, scale, input_scale))
  record(r, x, alpha, scale, input_scale)
  return r
end
