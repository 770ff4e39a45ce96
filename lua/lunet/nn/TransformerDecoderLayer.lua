-- nn.TransformerDecoderLayer(d_model, nhead[, {dim_feedforward = 2048, dropout = 0.1,
-- activation = 'relu' (or 'gelu', a function or a module), layer_norm_eps = 1e-5,
-- batch_first = false, norm_first = false, dtype, device}]) (torch's positional order too):
--   y = layer(tgt, memory[, {tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask}])
-- self-attention on tgt, attention over memory, then a feed-forward block, each with a
-- residual and a LayerNorm (after the sum, or before the block with norm_first), as
-- PyTorch 1.13. Submodules have torch's names (self_attn, multihead_attn, linear1,
-- dropout, linear2, norm1..3, dropout1..3) so torch's state_dicts load.
local Module = require 'lunet.nn.Module'
local options = require 'lunet.options'
local block = require 'lunet.nn.transformer_block'

local Layer = Module:extend('nn.TransformerDecoderLayer')
local FN = 'nn.TransformerDecoderLayer'

local CALL = { tgt_mask = 'tensor', memory_mask = 'tensor', tgt_key_padding_mask = 'tensor',
  memory_key_padding_mask = 'tensor' }
local NO_OPTS = {}

function Layer:__init(d_model, nhead, ...)
  block.build(FN, self, d_model, nhead, 3, ...)
end

local function sa(self, x, mask, kpm)
  return self.dropout1(self.self_attn(x, x, x, { attn_mask = mask, key_padding_mask = kpm, need_weights = false }))
end

local function mha(self, x, mem, mask, kpm)
  return self.dropout2(self.multihead_attn(x, mem, mem, { attn_mask = mask, key_padding_mask = kpm, need_weights = false }))
end

function Layer:forward(tgt, memory, opts)
  opts = options.check(FN, opts, CALL) or NO_OPTS
  local tm, mm = opts.tgt_mask, opts.memory_mask
  local tk = block.padding_mask(FN, 'tgt_key_padding_mask', opts.tgt_key_padding_mask)
  local mk = block.padding_mask(FN, 'memory_key_padding_mask', opts.memory_key_padding_mask)
  local x = tgt
  if self.norm_first then
    x = x + sa(self, self.norm1(x), tm, tk)
    x = x + mha(self, self.norm2(x), memory, mm, mk)
    x = x + block.ff(self, self.norm3(x), self.dropout3)
  else
    x = self.norm1(x + sa(self, x, tm, tk))
    x = self.norm2(x + mha(self, x, memory, mm, mk))
    x = self.norm3(x + block.ff(self, x, self.dropout3))
  end
  return x
end

Layer.extra_repr = block.extra_repr

return Layer
