-- Option handling shared by lunet.models' constructors: torchvision's
-- keywords (weights, pretrained, progress) and its _ovewrite_named_param.
local options = require 'lunet.options'
local core = require 'lunet.core'

local M = {}
M.fail = options.fail

-- the family's options plus torchvision's weights / pretrained / progress
function M.opts(t)
  t.weights, t.pretrained, t.progress = true, true, 'boolean'
  return t
end

M.NO_WEIGHTS = 'pretrained weights are not downloaded (lunet has no network access); build the model '
  .. 'without them and load torchvision\'s weights converted to safetensors: '
  .. "model:load_state_dict(lunet.load('model.safetensors')) (README: lunet.models)"

-- the checked options (a table, never nil); nextra: arguments after opts
function M.check(fname, opts, known, nextra)
  if nextra and nextra > 0 then options.fail(fname, 'expected one options table, got more arguments') end
  if opts ~= nil and not core.is_table(opts) then
    options.fail(fname, 'expected an options table (e.g. {num_classes = 10}), got ' .. core.typename(opts))
  end
  if opts and opts[1] ~= nil then options.fail(fname, 'options are named (e.g. {num_classes = 10})') end
  opts = options.check(fname, opts, known) or {}
  if (opts.weights ~= nil and opts.weights ~= false) or (opts.pretrained ~= nil and opts.pretrained ~= false) then
    options.fail(fname, M.NO_WEIGHTS)
  end
  return opts
end

-- v (default when nil) as an integer >= 1, else an error naming what
function M.positive_int(fname, what, v, default)
  if v == nil then return default end
  if type(v) ~= 'number' or v % 1 ~= 0 or v < 1 then
    options.fail(fname, ('%s must be an integer >= 1, got %s'):format(what, tostring(v)))
  end
  return v
end

-- v (default when nil) as a number in [lo, hi]
function M.number_in(fname, what, v, default, lo, hi)
  if v == nil then return default end
  if type(v) ~= 'number' or not (v >= lo and v <= hi) then
    options.fail(fname, ('%s must be a number in [%s, %s], got %s'):format(what, lo, hi, tostring(v)))
  end
  return v
end

-- a copy of opts with the values the architecture fixes (torchvision raises
-- when a different one is given: resnext50_32x4d{groups = 8})
function M.fix(fname, opts, fixed)
  if not fixed then return opts end
  local out = {}
  for k, v in pairs(opts) do out[k] = v end
  for k, v in pairs(fixed) do
    if opts[k] ~= nil and opts[k] ~= v then
      options.fail(fname, ('%s is fixed to %s for this model, got %s'):format(k, tostring(v), tostring(opts[k])))
    end
    out[k] = v
  end
  return out
end

return M
