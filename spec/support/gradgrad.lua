-- Second derivatives against finite differences of the first, as torch's
-- gradgradcheck: require 'support.gradgrad' (the autograd_grad,
-- autograd_grad2 and autograd_linalg2 specs share it).
local lunet = require 'lunet'
local assert = require 'luassert'
local gradcheck = require 'gradcheck'
local A = lunet.autograd

local M = {}

-- inputs -> d sum(f(inputs) * w) / d(inputs) (create_graph; w fixed weights),
-- flattened and concatenated: gradcheck of it checks f's double backward. An
-- input that does not require grad is differentiated through a detached leaf.
function M.gg(f)
  return function(...)
    return A.enable_grad(function(...)
      local ins = {}
      for i, a in ipairs({ ... }) do ins[i] = a.requires_grad and a or a:detach():requires_grad_() end
      local y = f(unpack(ins))
      local w = lunet.linspace(0.5, 1.5, y:numel(), { dtype = 'float64' }):reshape(y:size())
      local g = A.grad(y, ins, { grad_outputs = w, create_graph = true, allow_unused = true })
      local parts = {}
      for i = 1, #ins do if g[i] then parts[#parts + 1] = g[i]:reshape(-1) end end
      return lunet.cat(parts)
    end, ...)
  end
end

-- one case per { name, f, inputs } of cases; `it` is the spec's own (busted's
-- globals are not visible from a required module)
function M.each(it, cases)
  for _, c in ipairs(cases) do
    it(c[1], function()
      local ok, msg = gradcheck(M.gg(c[2]), c[3])
      assert.is_true(ok, msg)
    end)
  end
end

return M
