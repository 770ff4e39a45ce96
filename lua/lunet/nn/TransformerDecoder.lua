-- nn.TransformerDecoder(decoder_layer, num_layers[, norm]): num_layers deep copies of
-- decoder_layer in `layers` (keys layers.0...., as torch's), then the optional norm:
--   y = decoder(tgt, memory[, {tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask}])
local Module = require 'lunet.nn.Module'
local Encoder = require 'lunet.nn.TransformerEncoder'
local options = require 'lunet.options'

local Decoder = Module:extend('nn.TransformerDecoder')
local FN = 'nn.TransformerDecoder'

function Decoder:__init(layer, num_layers, ...)
  Encoder.build(FN, self, { norm = 'table' }, { 'norm' }, layer, num_layers, ...)
end

local CALL = { tgt_mask = 'tensor', memory_mask = 'tensor', tgt_key_padding_mask = 'tensor',
  memory_key_padding_mask = 'tensor' }
local NO_OPTS = {}

function Decoder:forward(tgt, memory, opts)
  opts = options.check(FN, opts, CALL) or NO_OPTS
  local x = tgt
  for _, layer in self.layers:ipairs() do x = layer(x, memory, opts) end
  if self.norm then x = self.norm(x) end
  return x
end

function Decoder:extra_repr() return self.num_layers .. (self.num_layers == 1 and ' layer' or ' layers') end

return Decoder
