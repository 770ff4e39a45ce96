-- The formula scheme of tools/gen_models_fixtures.py for the lunet.models
-- specs (spec/models_spec.lua and the family specs models_*_spec.lua): the
-- state dict set by position, the input, the keys, and one case checked
-- against its fixture (eval, train in float64, gradients), as models_spec.lua.
local lunet = require 'lunet'
local assert = require 'luassert'
local fx = require 'support.fixtures'

local M = {}

function M.formula_state(model, keys)
  local own, sd = model:state_dict(), {}
  for k0, e in ipairs(keys) do
    local key, k = e[1], k0 - 1
    if key:match('num_batches_tracked$') then sd[key] = own[key]:clone()
    else
      local n = 1
      for _, s in ipairs(e[2]) do n = n * s end
      local a = lunet.arange(n, { dtype = 'float64' }):mul(0.37):add(1.3 * k)
      local v = key:match('running_var$') and a:cos():mul(0.1):add(1) or a:sin():mul(0.05)
      sd[key] = v:float():view(#e[2] > 0 and e[2] or {})
    end
  end
  return sd
end

function M.make_input(size)
  local i = lunet.arange(2 * 3 * size * size, { dtype = 'float64' })
  return (i:mul(0.7):sin() + i:mul(0.031):cos():mul(0.5)):float():view(2, 3, size, size)
end

-- {key, shape} in state_dict order
function M.keys_of(model)
  local out = {}
  for _, e in ipairs(model._state_entries(model, '')) do out[#out + 1] = { e[1], e[2]:size() } end
  return out
end

-- keys, counts (at 10 and 1000 classes), and for cases with a size the
-- outputs and gradients against torchvision's
function M.check_case(models, T, c)
  local opts = { num_classes = 10 }
  for k, v in pairs(c.opts or {}) do opts[k] = v end
  local model = models[c.name](opts)
  assert.are.same(c.keys, M.keys_of(model))
  assert.equal(c.params, model:num_parameters())
  if not c.size then return model end
  model:load_state_dict(M.formula_state(model, c.keys))
  model:eval()
  local out = lunet.no_grad(function() return model(M.make_input(c.size)) end)
  local r = fx.rel(out, T[c.name .. '.eval'])
  assert.is_true(r < 1e-4, c.name .. ' eval ' .. r)
  if c.train ~= 'model' then return model end
  model:to('float64'):train()
  local y = model(M.make_input(c.size):double())
  r = fx.rel(y, T[c.name .. '.train'])
  assert.is_true(r < 1e-6, c.name .. ' train ' .. r)
  if not c.grads then return model end
  if T[c.name .. '.running_mean'] then
    local bn
    for _, m in ipairs(model:modules()) do
      if getmetatable(m) == lunet.nn.BatchNorm2d then bn = m; break end
    end
    assert.is_true(fx.rel(bn.running_mean, T[c.name .. '.running_mean']) < 1e-9)
  end
  y:sum():backward()
  for _, key in ipairs(c.grads) do
    local rg = fx.rel(model:get_parameter(key).grad, T[c.name .. '.d.' .. key])
    assert.is_true(rg < 1e-6, key .. ' ' .. rg)
  end
  for _, e in ipairs(model:named_parameters()) do
    local want = c.grad_sq[e[1]]
    local got = e[2].grad:double():pow(2):sum():item()
    assert.is_true(math.abs(got - want) <= 1e-6 * want + 1e-20, e[1] .. ' ' .. got .. ' vs ' .. want)
  end
  return model
end

return M
