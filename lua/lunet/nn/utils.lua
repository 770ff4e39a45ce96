-- lunet.nn.utils, as torch.nn.utils: gradient clipping (clip_grad_norm_,
-- clip_grad_value_: lunet.optim's), the flat-vector views of a parameter
-- list, parameters_to_vector and vector_to_parameters, weight_norm and
-- spectral_norm (nn/weight_norm.lua, nn/spectral_norm.lua), rnn.pad_sequence.
local lunet = require 'lunet'
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local options = require 'lunet.options'
local fail = options.fail

local utils = {}

utils.clip_grad_norm_ = require 'lunet.optim.clip_grad'
utils.clip_grad_norm = utils.clip_grad_norm_
utils.clip_grad_value_ = require 'lunet.optim.clip_grad_value'
utils.clip_grad_value = utils.clip_grad_value_
local wn, sn = require 'lunet.nn.weight_norm', require 'lunet.nn.spectral_norm'
utils.weight_norm, utils.remove_weight_norm = wn.weight_norm, wn.remove_weight_norm
utils.spectral_norm, utils.remove_spectral_norm = sn.spectral_norm, sn.remove_spectral_norm
utils.prune = require 'lunet.nn.prune'   -- l1_unstructured, ln_structured, global_unstructured, remove, ...
utils.rnn = require 'lunet.nn.rnn_utils'

-- params (a tensor, or a list of them as model:parameters() gives), checked:
-- all tensors, all on one device (torch's _check_param_device)
local function param_list(fn, params)
  if lunet.is_tensor(params) then return { params } end
  if not core.is_table(params) then
    fail(fn, 'parameters must be a tensor or a list of tensors, got ' .. core.typename(params))
  end
  local dev
  for i, p in ipairs(params) do
    if not lunet.is_tensor(p) then fail(fn, ('parameter %d is a %s, expected a tensor'):format(i, core.typename(p))) end
    dev = dev or p.device
    if p.device ~= dev then
      fail(fn, ('found two parameters on different devices (%s and %s, parameter %d); this is not supported')
        :format(dev, p.device, i))
    end
  end
  return params
end

-- parameters_to_vector(params): one 1-d tensor, the params flattened and
-- concatenated in order (differentiable, as torch's cat of views; mixed
-- dtypes promote as cat does)
function utils.parameters_to_vector(params)
  local fn = 'parameters_to_vector'
  params = param_list(fn, params)
  if #params == 0 then fail(fn, 'expected a non-empty list of parameters') end
  local flat = {}
  for i, p in ipairs(params) do flat[i] = p:reshape(p:numel()) end
  return T.Tensor.cat(flat, 1)
end

-- vector_to_parameters(vec, params): the elements of the 1-d vec, in order,
-- copied into the params' data (nothing recorded, as torch's param.data =).
-- Unlike torch, the params keep their own storage and dtype (torch makes them
-- views of vec); as torch, elements of vec past the params' total are ignored.
function utils.vector_to_parameters(vec, params)
  local fn = 'vector_to_parameters'
  if not lunet.is_tensor(vec) then fail(fn, 'vec must be a tensor, got ' .. core.typename(vec)) end
  if vec:dim() ~= 1 then fail(fn, ('vec must be 1-d, got %d-d {%s}'):format(vec:dim(), table.concat(vec:size(), ','))) end
  params = param_list(fn, params)
  local total = 0
  for _, p in ipairs(params) do total = total + p:numel() end
  if total > vec:numel() then
    fail(fn, ('vec has %d elements, the parameters %d'):format(vec:numel(), total))
  end
  lunet.no_grad(function()
    local at = 0
    for _, p in ipairs(params) do
      local n = p:numel()
      if n > 0 then
        p:copy_(vec:narrow(1, at + 1, n):reshape(p:size()))
        at = at + n
      end
    end
  end)
end

return utils
