-- nn.TransformerEncoderLayer(d_model, nhead[, {dim_feedforward = 2048, dropout = 0.1,
-- activation = 'relu' (or 'gelu', a function or a module), layer_norm_eps = 1e-5,
-- batch_first = false, norm_first = false, dtype, device}]) (torch's positional order too):
--   y = layer(src[, {src_mask, src_key_padding_mask}])
-- self-attention then a feed-forward block, each with a residual and a LayerNorm
-- (after the sum, or before the block with norm_first), as PyTorch 1.13's composed path.
-- Submodules have torch's names (self_attn, linear1, dropout, linear2, norm1, norm2,
-- dropout1, dropout2) so torch's state_dicts load.
local Module = require 'lunet.nn.Module'
local options = require 'lunet.options'
local block = require 'lunet.nn.transformer_block'

local Layer = Module:extend('nn.TransformerEncoderLayer')
local FN = 'nn.TransformerEncoderLayer'

local CALL = { src_mask = 'tensor', src_key_padding_mask = 'tensor' }
local NO_OPTS = {}

function Layer:__init(d_model, nhead, ...)
  block.build(FN, self, d_model, nhead, 2, ...)
end

local function sa(self, x, mask, kpm)
  return self.dropout1(self.self_attn(x, x, x, { attn_mask = mask, key_padding_mask = kpm, need_weights = false }))
end

function Layer:forward(src, opts)
  opts = options.check(FN, opts, CALL) or NO_OPTS
  local mask, kpm = opts.src_mask, block.padding_mask(FN, 'src_key_padding_mask', opts.src_key_padding_mask)
  local x = src
  if self.norm_first then
    x = x + sa(self, self.norm1(x), mask, kpm)
    x = x + block.ff(self, self.norm2(x), self.dropout2)
  else
    x = self.norm1(x + sa(self, x, mask, kpm))
    x = self.norm2(x + block.ff(self, x, self.dropout2))
  end
  return x
end

Layer.extra_repr = block.extra_repr

return Layer
