-- lunet.autograd.functional: torch.autograd.functional on lunet.autograd.grad:
-- vjp, jvp, jacobian, hessian, hvp, vhp. inputs is a tensor or a list of
-- tensors; a function of several inputs gets them as arguments. As torch's,
-- a result mirrors its arguments: a tensor for a tensor, a list for a list
-- (jacobian of several outputs and inputs: J[i][j] = d out_i / d in_j). The
-- inputs are detached copies, so the caller's tensors keep no graph.
-- Made of grad calls: jvp is the double-vjp trick, jacobian one vjp per
-- output element (vectorize = true is not implemented: an error).
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local options = require 'lunet.options'
local is_table, is_tensor, typename = core.is_table, T.is_tensor, core.typename
local same_shape = require('lunet.autograd.graph').same_shape

local F = {}

local function A() return require 'lunet.autograd' end

-- inputs as a list of detached tensors that require grad, and whether they were given as a tensor
local function prepare(fn, inputs, what)
  local single = is_tensor(inputs)
  local list = single and { inputs } or inputs
  if not is_table(list) or #list == 0 then
    error(('autograd.functional.%s: %s must be a tensor or a non-empty list of tensors, got %s'):format(fn,
      what or 'inputs', typename(inputs)), 3)
  end
  local out = {}
  for i = 1, #list do
    if not is_tensor(list[i]) then
      error(('autograd.functional.%s: %s[%d] is a %s, not a tensor'):format(fn, what or 'inputs', i, typename(list[i])), 3)
    end
    out[i] = list[i]:detach():requires_grad_(true)
  end
  return out, single
end

-- v as a list matching like (the shapes checked)
local function vector(fn, v, like, single, what)
  if v == nil then
    for i = 1, #like do
      if like[i]:numel() ~= 1 then
        error(('autograd.functional.%s: v can be omitted only when every %s has a single element'):format(fn, what), 3)
      end
    end
    local out = {}
    for i = 1, #like do out[i] = like[i]:detach():clone():fill_(1) end
    return out
  end
  local list = is_tensor(v) and { v } or v
  if not is_table(list) or #list ~= #like then
    error(('autograd.functional.%s: v must be %s matching the %s'):format(fn, single and 'a tensor' or ('a list of ' .. #like .. ' tensors'), what), 3)
  end
  for i = 1, #like do
    local t = list[i]
    if not is_tensor(t) or not same_shape(t, like[i]) then
      error(('autograd.functional.%s: v[%d] must be a tensor of shape %s, as the %s'):format(fn, i, tostring(like[i]:size()), what), 3)
    end
  end
  return list
end

local function call(fn, func, ins)
  if type(func) ~= 'function' then error(('autograd.functional.%s: func must be a function, got %s'):format(fn, typename(func)), 3) end
  local out = func(unpack(ins, 1, #ins))
  local single = is_tensor(out)
  local list = single and { out } or out
  if not is_table(list) then error(('autograd.functional.%s: func must return a tensor or a list of tensors'):format(fn), 3) end
  return list, single
end

-- the gradients of outs (weighted by vs) wrt ins, zeros where unused
local function grads(outs, ins, vs, create)
  local used = {}
  for i = 1, #outs do if outs[i].requires_grad then used[#used + 1] = i end end
  local g = {}
  if #used > 0 then
    local o, v = {}, {}
    for k, i in ipairs(used) do o[k], v[k] = outs[i], vs[i] end
    g = A().grad(o, ins, { grad_outputs = v, create_graph = create, retain_graph = true, allow_unused = true })
  end
  for i = 1, #ins do if g[i] == nil then g[i] = ins[i]:detach():mul(0) end end
  return g
end

local function shaped(list, single) if single then return list[1] end return list end
local function detached(list, create)
  if create then return list end
  local out = {}
  for i = 1, #list do out[i] = list[i]:detach() end
  return out
end

local OPTS = { create_graph = 'boolean', strict = 'boolean' }
local JAC_OPTS = { create_graph = 'boolean', strict = 'boolean', vectorize = 'boolean', strategy = 'string' }
local function check_opts(fn, opts, spec)
  if opts == nil then return {} end
  options.check('autograd.functional.' .. fn, opts, spec)
  if opts.strict then error(('autograd.functional.%s: strict = true is not supported yet'):format(fn), 3) end
  if opts.vectorize then error(('autograd.functional.%s: vectorize = true is not supported yet'):format(fn), 3) end
  if opts.strategy and opts.strategy ~= 'reverse-mode' then
    error(('autograd.functional.%s: strategy must be \'reverse-mode\' (forward-mode is not supported yet)'):format(fn), 3)
  end
  return opts
end

-- vjp(func, inputs, v, opts) -> outputs, v^T J
function F.vjp(func, inputs, v, opts)
  opts = check_opts('vjp', opts, OPTS)
  local ins, single = prepare('vjp', inputs)
  local outs, osingle = call('vjp', func, ins)
  local vs = vector('vjp', v, outs, osingle, 'outputs')
  local g = grads(outs, ins, vs, opts.create_graph)
  return shaped(detached(outs, opts.create_graph), osingle), shaped(detached(g, opts.create_graph), single)
end

-- jvp(func, inputs, v, opts) -> outputs, J v: the vjp with a grad_outputs u
-- that requires grad is linear in u; its vjp with v gives J v
function F.jvp(func, inputs, v, opts)
  opts = check_opts('jvp', opts, OPTS)
  local ins, single = prepare('jvp', inputs)
  local vs = vector('jvp', v, ins, single, 'inputs')
  local outs, osingle = call('jvp', func, ins)
  local us = {}
  for i = 1, #outs do us[i] = outs[i]:detach():mul(0):requires_grad_(true) end
  local g = grads(outs, ins, us, true)
  local gl, vl = {}, {}
  for i = 1, #g do if g[i].requires_grad then gl[#gl + 1], vl[#vl + 1] = g[i], vs[i] end end
  local jv = grads(gl, us, vl, opts.create_graph)
  return shaped(detached(outs, opts.create_graph), osingle), shaped(detached(jv, opts.create_graph), osingle)
end

-- jacobian(func, inputs, opts): J (one output, one input: a tensor of
-- out's shape .. in's shape), a list over the inputs, or a list over the
-- outputs of lists over the inputs
function F.jacobian(func, inputs, opts)
  opts = check_opts('jacobian', opts, JAC_OPTS)
  local ins, single = prepare('jacobian', inputs)
  local outs, osingle = call('jacobian', func, ins)
  local J = {}
  for i, o in ipairs(outs) do
    local m = o:numel()
    local rows = {}
    for j = 1, #ins do rows[j] = {} end
    local flat = o:reshape(-1)
    for k = 1, m do
      local e = flat:detach():mul(0)
      e[k] = 1
      local g = grads({ flat }, ins, { e }, opts.create_graph)
      for j = 1, #ins do rows[j][k] = g[j]:reshape(-1) end
    end
    J[i] = {}
    for j = 1, #ins do
      local shape = {}
      for _, s in ipairs(o:size()) do shape[#shape + 1] = s end
      for _, s in ipairs(ins[j]:size()) do shape[#shape + 1] = s end
      local r
      if m == 0 then r = ins[j]:detach():new_zeros(shape)
      else r = require('lunet').stack(rows[j]):reshape(shape) end
      J[i][j] = opts.create_graph and r or r:detach()
    end
    J[i] = shaped(J[i], single)
  end
  return shaped(J, osingle)
end

-- the scalar output of func, checked
local function scalar(fn, func, ins)
  local outs, osingle = call(fn, func, ins)
  if not osingle or outs[1]:numel() ~= 1 then
    error(('autograd.functional.%s: func must return a single-element tensor'):format(fn), 3)
  end
  return outs[1]
end

-- hessian(func, inputs, opts): the jacobian of the gradient
function F.hessian(func, inputs, opts)
  opts = check_opts('hessian', opts, JAC_OPTS)
  local single = is_tensor(inputs)
  local function gradient(...)
    local ins = { ... }
    local out = scalar('hessian', func, ins)
    local g = grads({ out }, ins, { nil }, true)
    return shaped(g, single)
  end
  return F.jacobian(gradient, inputs, opts)
end

-- vhp(func, inputs, v) -> func's value, v^T H; hvp -> value, H v (the same for a symmetric H)
local function hv(fn, func, inputs, v, opts)
  opts = check_opts(fn, opts, OPTS)
  local ins, single = prepare(fn, inputs)
  local vs = vector(fn, v, ins, single, 'inputs')
  local out = scalar(fn, func, ins)
  local g = grads({ out }, ins, { nil }, true)
  local gl, vl = {}, {}
  for i = 1, #g do if g[i].requires_grad then gl[#gl + 1], vl[#vl + 1] = g[i], vs[i] end end
  local r = grads(gl, ins, vl, opts.create_graph)
  return opts.create_graph and out or out:detach(), shaped(detached(r, opts.create_graph), single)
end
function F.vhp(func, inputs, v, opts) return hv('vhp', func, inputs, v, opts) end
function F.hvp(func, inputs, v, opts) return hv('hvp', func, inputs, v, opts) end

return F
