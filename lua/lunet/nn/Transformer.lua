-- nn.Transformer([{d_model = 512, nhead = 8, num_encoder_layers = 6, num_decoder_layers = 6,
-- dim_feedforward = 2048, dropout = 0.1, activation = 'relu', custom_encoder, custom_decoder,
-- layer_norm_eps = 1e-5, batch_first = false, norm_first = false, dtype, device}])
-- (torch's positional order too): an nn.TransformerEncoder and nn.TransformerDecoder, each
-- ending in a LayerNorm, every parameter of 2 or more dims xavier_uniform_, as PyTorch 1.13:
--   y = model(src, tgt[, {src_mask, tgt_mask, memory_mask, src_key_padding_mask,
--                         tgt_key_padding_mask, memory_key_padding_mask}])
-- nn.Transformer.generate_square_subsequent_mask(n): the float (n, n) causal mask, -inf
-- above the diagonal and 0 elsewhere.
local lunet = require 'lunet'
local Module = require 'lunet.nn.Module'
local options = require 'lunet.options'
local init = require 'lunet.nn.initializers'

local Transformer = Module:extend('nn.Transformer')
local FN = 'nn.Transformer'

local OPTS = { d_model = 'number', nhead = 'number', num_encoder_layers = 'number', num_decoder_layers = 'number',
  dim_feedforward = 'number', dropout = 'number', activation = 'string|function|table', custom_encoder = 'table',
  custom_decoder = 'table', layer_norm_eps = 'number', batch_first = 'boolean', norm_first = 'boolean',
  dtype = true, device = true }
local POSITIONAL = { 'd_model', 'nhead', 'num_encoder_layers', 'num_decoder_layers', 'dim_feedforward', 'dropout',
  'activation', 'custom_encoder', 'custom_decoder', 'layer_norm_eps', 'batch_first', 'norm_first' }

function Transformer:__init(...)
  local nn = require 'lunet.nn'
  local o = options.check(FN, options.positional(FN, POSITIONAL, ...), OPTS) or {}
  local d, h = o.d_model or 512, o.nhead or 8
  local lo = { dim_feedforward = o.dim_feedforward, dropout = o.dropout, activation = o.activation,
    layer_norm_eps = o.layer_norm_eps, batch_first = o.batch_first, norm_first = o.norm_first,
    dtype = o.dtype, device = o.device }
  local ln = { eps = o.layer_norm_eps, dtype = o.dtype, device = o.device }
  self.encoder = o.custom_encoder or nn.TransformerEncoder(nn.TransformerEncoderLayer(d, h, lo),
    o.num_encoder_layers or 6, nn.LayerNorm(d, ln))
  self.decoder = o.custom_decoder or nn.TransformerDecoder(nn.TransformerDecoderLayer(d, h, lo),
    o.num_decoder_layers or 6, nn.LayerNorm(d, ln))
  self:reset_parameters()
  self.d_model, self.nhead, self.batch_first = d, h, o.batch_first == true
end

-- torch's _reset_parameters (custom encoders and decoders included)
function Transformer:reset_parameters()
  lunet.no_grad(function()
    for _, p in ipairs(self:parameters()) do if p:dim() > 1 then init.xavier_uniform_(p) end end
  end)
end

local CALL = { src_mask = 'tensor', tgt_mask = 'tensor', memory_mask = 'tensor', src_key_padding_mask = 'tensor',
  tgt_key_padding_mask = 'tensor', memory_key_padding_mask = 'tensor' }
local NO_OPTS = {}

function Transformer:forward(src, tgt, opts)
  opts = options.check(FN, opts, CALL) or NO_OPTS
  if not (lunet.is_tensor(src) and lunet.is_tensor(tgt)) then options.fail(FN, 'src and tgt must be tensors') end
  local bdim = self.batch_first and 1 or 2
  if src:dim() == 3 and (tgt:dim() ~= 3 or src:size(bdim) ~= tgt:size(bdim)) then
    options.fail(FN, 'the batch number of src and tgt must be equal')
  end
  if src:size(-1) ~= self.d_model or tgt:size(-1) ~= self.d_model then
    options.fail(FN, ('the feature number of src and tgt must be equal to d_model (%d)'):format(self.d_model))
  end
  local memory = self.encoder(src, { mask = opts.src_mask, src_key_padding_mask = opts.src_key_padding_mask })
  return self.decoder(tgt, memory, { tgt_mask = opts.tgt_mask, memory_mask = opts.memory_mask,
    tgt_key_padding_mask = opts.tgt_key_padding_mask, memory_key_padding_mask = opts.memory_key_padding_mask })
end

function Transformer.generate_square_subsequent_mask(n, opts)
  if type(n) ~= 'number' or not (n % 1 == 0 and n >= 0) then
    options.fail('nn.Transformer.generate_square_subsequent_mask', 'n must be an integer >= 0, got ' .. tostring(n))
  end
  opts = options.check('nn.Transformer.generate_square_subsequent_mask', opts, { device = true, dtype = true })
  return lunet.full({ n, n }, -math.huge, opts):triu(1)
end

function Transformer:extra_repr() return ('d_model %d, nhead %d%s'):format(self.d_model, self.nhead,
  self.batch_first and ', batch_first' or '') end

return Transformer
