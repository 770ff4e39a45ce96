-- lunet.nn.transformer_block: what nn.TransformerEncoderLayer and
-- nn.TransformerDecoderLayer share: their construction (options, submodules
-- in torch's order and names), the feed-forward block and the mask check.
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local core = require 'lunet.core'

local M = {}

M.OPTS = { dim_feedforward = 'number', dropout = 'number', activation = 'string|function|table',
  layer_norm_eps = 'number', batch_first = 'boolean', norm_first = 'boolean', dtype = true, device = true }
M.POSITIONAL = { 'dim_feedforward', 'dropout', 'activation', 'layer_norm_eps', 'batch_first', 'norm_first' }

local ACTIVATIONS = { relu = F.relu, gelu = F.gelu }

-- the activation: 'relu' / 'gelu' (F's), a function or an nn.Module (a child, as torch's)
function M.activation(fn, a)
  if a == nil then return F.relu, 'relu' end
  if type(a) == 'string' then
    if not ACTIVATIONS[a] then options.fail(fn, ("activation should be 'relu' or 'gelu', not '%s'"):format(a)) end
    return ACTIVATIONS[a], a
  end
  if type(a) == 'function' or (core.is_table(a) and rawget(a, '_params')) then return a, nil end
  options.fail(fn, 'activation must be a name, a function or an nn.Module, got ' .. core.typename(a))
end

-- nnorm: 3 for the decoder layer (and its multihead_attn, norm3, dropout3), 2 for the encoder's
function M.build(fn, self, d_model, nhead, nnorm, ...)
  local nn = require 'lunet.nn'
  for _, c in ipairs({ { 'd_model', d_model }, { 'nhead', nhead } }) do
    local v = c[2]
    if type(v) ~= 'number' or not (v % 1 == 0 and v >= 1) then
      options.fail(fn, ('%s must be an integer >= 1, got %s'):format(c[1], tostring(v)))
    end
  end
  -- (a module given by position as the activation is a table too, which positional would
  -- take for the options: it goes in by name)
  local args, act_module = { ... }, nil
  local a3 = args[3]
  if core.is_table(a3) and rawget(a3, '_params') then act_module, args[3] = a3, 'relu' end
  local opts = options.positional(fn, M.POSITIONAL, unpack(args, 1, select('#', ...)))
  opts = options.check(fn, opts, M.OPTS) or {}
  if act_module then opts.activation = act_module end
  local ff, p = opts.dim_feedforward or 2048, opts.dropout or 0.1
  if not (ff % 1 == 0 and ff >= 1) then options.fail(fn, 'dim_feedforward must be an integer >= 1, got ' .. ff) end
  if not (p >= 0 and p <= 1) then options.fail(fn, 'dropout must be a number in [0, 1], got ' .. tostring(p)) end
  if d_model % nhead ~= 0 then
    options.fail(fn, ('d_model must be divisible by nhead, got %d and %d'):format(d_model, nhead))
  end
  local act, act_name = M.activation(fn, opts.activation)
  local o = { dtype = opts.dtype, device = opts.device }
  local mha = { dropout = p, batch_first = opts.batch_first, dtype = opts.dtype, device = opts.device }
  self.self_attn = nn.MultiheadAttention(d_model, nhead, mha)
  if nnorm == 3 then self.multihead_attn = nn.MultiheadAttention(d_model, nhead, mha) end
  self.linear1 = nn.Linear(d_model, ff, o)
  self.dropout = nn.Dropout(p)
  self.linear2 = nn.Linear(ff, d_model, o)
  self.norm_first = opts.norm_first == true
  local ln = { eps = opts.layer_norm_eps or 1e-5, dtype = opts.dtype, device = opts.device }
  for i = 1, nnorm do self['norm' .. i] = nn.LayerNorm(d_model, ln) end
  for i = 1, nnorm do self['dropout' .. i] = nn.Dropout(p) end
  self.activation, self.activation_name = act, act_name
  self.d_model, self.nhead, self.batch_first = d_model, nhead, opts.batch_first == true
end

function M.ff(self, x, drop)
  return drop(self.linear2(self.dropout(self.activation(self.linear1(x)))))
end

-- a key padding mask is bool or floating, as torch's check
function M.padding_mask(fn, what, m)
  if m ~= nil and m.dtype ~= 'bool' and not m:is_floating_point() then
    options.fail(fn, ('only bool and floating types of %s are supported, got %s'):format(what, m.dtype))
  end
  return m
end

function M.extra_repr(self)
  local r = ('%d, nhead %d, dim_feedforward %d'):format(self.d_model, self.nhead, self.linear1.out_features)
  if self.dropout.p ~= 0 then r = r .. ', dropout ' .. self.dropout.p end
  r = r .. ', ' .. (self.activation_name or 'custom activation')
  if self.norm1.eps ~= 1e-5 then r = r .. ', layer_norm_eps ' .. self.norm1.eps end
  if self.batch_first then r = r .. ', batch_first' end
  if self.norm_first then r = r .. ', norm_first' end
  return r
end

return M
