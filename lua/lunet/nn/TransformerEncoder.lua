-- nn.TransformerEncoder(encoder_layer, num_layers[, norm]): num_layers deep copies of
-- encoder_layer (as torch's, so they start equal and train apart) in `layers`
-- (state_dict keys layers.0...., as torch's), then the optional norm (an nn.LayerNorm):
--   y = encoder(src[, {mask, src_key_padding_mask}])
local Module = require 'lunet.nn.Module'
local ModuleList = require 'lunet.nn.ModuleList'
local options = require 'lunet.options'
local core = require 'lunet.core'
local block = require 'lunet.nn.transformer_block'

local Encoder = Module:extend('nn.TransformerEncoder')
local FN = 'nn.TransformerEncoder'

-- (PyTorch's options that pick its nested-tensor fast path: accepted, nothing to pick here)
local OPTS = { norm = 'table', enable_nested_tensor = 'boolean', mask_check = 'boolean' }
local POSITIONAL = { 'norm', 'enable_nested_tensor', 'mask_check' }

-- shared by nn.TransformerDecoder: the clones and the norm
function Encoder.build(fn, self, known, positional, layer, num_layers, ...)
  if not (core.is_table(layer) and rawget(layer, '_params')) then
    options.fail(fn, 'expected (layer, num_layers[, norm]): layer must be an nn.Module, got ' .. core.typename(layer))
  end
  if type(num_layers) ~= 'number' or not (num_layers % 1 == 0 and num_layers >= 1) then
    options.fail(fn, 'num_layers must be an integer >= 1, got ' .. tostring(num_layers))
  end
  local n = select('#', ...)
  -- (a module is a table too: a lone norm module is the norm, not an options table)
  local first = ...
  local opts
  if n == 1 and core.is_table(first) and rawget(first, '_params') then opts = { norm = first }
  else opts = options.check(fn, options.positional(fn, positional, ...), known) or {} end
  local norm = opts.norm
  if norm ~= nil and not rawget(norm, '_params') then options.fail(fn, 'norm must be an nn.Module') end
  local list = {}
  for i = 1, num_layers do list[i] = layer:clone() end
  self.layers = ModuleList(list)
  self.num_layers = num_layers
  if norm then self.norm = norm end
end

function Encoder:__init(layer, num_layers, ...)
  Encoder.build(FN, self, OPTS, POSITIONAL, layer, num_layers, ...)
end

local CALL = { mask = 'tensor', src_key_padding_mask = 'tensor' }
local ALIASES = { src_mask = 'mask' }
local NO_OPTS = {}

function Encoder:forward(src, opts)
  opts = options.check(FN, opts, CALL, ALIASES) or NO_OPTS
  local kpm = block.padding_mask(FN, 'src_key_padding_mask', opts.src_key_padding_mask)
  local layer_opts = { src_mask = opts.mask, src_key_padding_mask = kpm }
  local x = src
  for _, layer in self.layers:ipairs() do x = layer(x, layer_opts) end
  if self.norm then x = self.norm(x) end
  return x
end

function Encoder:extra_repr() return self.num_layers .. (self.num_layers == 1 and ' layer' or ' layers') end

return Encoder
