-- nn.utils.spectral_norm(module[, opts]) and remove_spectral_norm(module[,
-- name]), as torch 1.13's: the parameter `name` becomes name_orig, with the
-- buffers name_u and name_v (the power iteration's vectors, drawn from
-- randn and normalized); a forward pre-hook sets module[name] = W / sigma,
-- sigma = u . (W v), W the weight as a matrix (its dim `dim` first). In
-- training mode it first runs n_power_iterations steps (without recording)
-- that update u and v in place, then uses clones of them (the next step's
-- update must not change what this forward saved). opts: name ('weight'),
-- n_power_iterations (1), eps (1e-12), dim (1-based: 2 for nn.ConvTranspose*,
-- else 1, as torch's 1 and 0); or torch's positional (name,
-- n_power_iterations, eps, dim). Until the first forward module[name] is
-- the unnormalized weight, as in torch.
local lunet = require 'lunet'
local T = require 'lunet.tensor'
local options = require 'lunet.options'
local wn = require 'lunet.nn.weight_norm'
local fail = options.fail
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename

local M = {}

-- W as a {h, w} matrix, its dim d first
local function as_matrix(w, d)
  if d ~= 1 then
    local order = { d }
    for i = 1, w:dim() do if i ~= d then order[#order + 1] = i end end
    w = w:permute(order)
  end
  return w:reshape(w:size(1), -1)
end

-- x / max(||x||, eps), as F.normalize of a vector
local function normalize(x, eps) return x / x:norm():clamp(eps) end

local function compute(m, e, power)
  local name = e.name
  local w, u, v = m[name .. '_orig'], m[name .. '_u'], m[name .. '_v']
  local mat = as_matrix(w, e.dim)
  if power then
    lunet.no_grad(function()
      for _ = 1, e.n do
        v:copy_(normalize(mat:t():mv(u), e.eps))
        u:copy_(normalize(mat:mv(v), e.eps))
      end
    end)
    u, v = u:clone(), v:clone()
  end
  return w / u:dot(mat:mv(v))
end

local OPTS = { name = 'string', n_power_iterations = 'number', eps = 'number', dim = 'number' }

function M.spectral_norm(module, name, n_power_iterations, eps, dim)
  local fn = 'spectral_norm'
  local reg = wn.hooks_of(fn, module)
  if is_table(name) then
    if n_power_iterations ~= nil or eps ~= nil or dim ~= nil then
      fail(fn, 'give the options as a table or as (name, n_power_iterations, eps, dim), not both')
    end
    local o = options.check(fn, name, OPTS)
    name, n_power_iterations, eps, dim = o.name, o.n_power_iterations, o.eps, o.dim
  end
  name = name == nil and 'weight' or name
  if type(name) == 'string' and reg['spectral_norm:' .. name] then fail(fn, ('cannot register two spectral_norm hooks on the same parameter %s'):format(name)) end
  local w = wn.param(fn, module, name)
  local n = n_power_iterations == nil and 1 or n_power_iterations
  if type(n) ~= 'number' or n % 1 ~= 0 or n <= 0 then
    fail(fn, 'n_power_iterations must be a positive integer, got ' .. (type(n) == 'number' and tostring(n) or typename(n)))
  end
  eps = eps == nil and 1e-12 or eps
  if type(eps) ~= 'number' or not (eps > 0) then fail(fn, 'eps must be a positive number, got ' .. tostring(eps)) end
  local nd = w:dim()
  if dim == nil then dim = tostring(module.__name):match('^nn%.ConvTranspose') and 2 or 1 end
  if type(dim) ~= 'number' or dim % 1 ~= 0 or dim == 0 or dim < -nd or dim > nd then
    fail(fn, ('dim must be an integer in 1..%d (negative: from the end), got %s'):format(nd, tostring(dim)))
  end
  if dim < 0 then dim = nd + 1 + dim end
  local e = { name = name, n = n, eps = eps, dim = dim }
  local u, v = lunet.no_grad(function()
    local mat = as_matrix(w, dim)
    local opt = { dtype = w.dtype, device = w.device }
    return normalize(lunet.randn(mat:size(1), opt), eps), normalize(lunet.randn(mat:size(2), opt), eps)
  end)
  wn.unregister(module, '_params', name)
  module:register_parameter(name .. '_orig', w)
  rawset(module, name, w:detach())
  module:register_buffer(name .. '_u', u)
  module:register_buffer(name .. '_v', v)
  e.handle = module:register_forward_pre_hook(function(m) rawset(m, name, compute(m, e, m.training)) end)
  reg['spectral_norm:' .. name] = e
  return module
end

function M.remove_spectral_norm(module, name)
  local fn = 'remove_spectral_norm'
  local reg = wn.hooks_of(fn, module)
  name = name == nil and 'weight' or name
  if type(name) ~= 'string' then fail(fn, 'name must be a string, got ' .. typename(name)) end
  local e = reg['spectral_norm:' .. name]
  if not e then fail(fn, ("spectral_norm of '%s' not found in %s"):format(name, module.__name or 'the module')) end
  local w = lunet.no_grad(compute, module, e, false)
  e.handle:remove()
  reg['spectral_norm:' .. name] = nil
  wn.unregister(module, '_params', name .. '_orig')
  wn.unregister(module, '_buffers', name .. '_u')
  wn.unregister(module, '_buffers', name .. '_v')
  rawset(module, name, nil)
  module:register_parameter(name, w:detach())
  return module
end

return M
