-- nn.EmbeddingBag(num_embeddings, embedding_dim[, {mode = 'mean', max_norm, norm_type = 2,
-- scale_grad_by_freq = false, sparse = false, include_last_offset = false, padding_idx,
-- _weight, dtype, device}]): sums, averages or maxes bags of embeddings without
-- building the (entries, dim) block of each, as torch.nn.EmbeddingBag.
-- forward(input[, offsets[, per_sample_weights]]): input 2-d (B, N), B bags
-- of N indices, or 1-d with offsets (1-based: offsets[1] == 1; see
-- F.embedding_bag); per_sample_weights (input's shape) weighs each entry,
-- mode 'sum' only. Indices and padding_idx are 1-based, as nn.Embedding's
-- (whose checks and weight init it shares). Returns (B, embedding_dim).
-- nn.EmbeddingBag.from_pretrained(weights[, {freeze = true, mode, ...}]).
local lunet = require 'lunet'
local Module = require 'lunet.nn.Module'
local Embedding = require 'lunet.nn.Embedding'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local EmbeddingBag = Module:extend('nn.EmbeddingBag')

local OPTS = { mode = 'string', max_norm = 'number', norm_type = 'number', scale_grad_by_freq = 'boolean',
  sparse = 'boolean', include_last_offset = 'boolean', padding_idx = 'number', _weight = 'tensor',
  dtype = true, device = true }
-- (torch's order: max_norm, norm_type, scale_grad_by_freq, mode, sparse, _weight, include_last_offset, padding_idx)
local POSITIONAL = { 'max_norm', 'norm_type', 'scale_grad_by_freq', 'mode', 'sparse', '_weight', 'include_last_offset',
  'padding_idx' }
local MODES = { 'sum', 'mean', 'max' }

function EmbeddingBag:__init(num_embeddings, embedding_dim, ...)
  local name = 'nn.EmbeddingBag'
  local opts = options.check(name, options.positional(name, POSITIONAL, ...), OPTS) or {}
  options.one_of(name, 'mode', opts.mode, MODES)
  if opts.mode == 'max' and opts.scale_grad_by_freq then
    options.fail(name, "mode 'max' does not support scale_grad_by_freq")
  end
  Embedding._setup(self, name, num_embeddings, embedding_dim, opts)
  self.mode, self.include_last_offset = opts.mode or 'mean', opts.include_last_offset or false
end

EmbeddingBag.reset_parameters = Embedding.reset_parameters

function EmbeddingBag:forward(input, offsets, per_sample_weights)
  -- (self carries the options; per_sample_weights goes in a table of its own)
  local o = self
  if per_sample_weights ~= nil then
    o = { mode = self.mode, include_last_offset = self.include_last_offset, padding_idx = self.padding_idx,
      max_norm = self.max_norm, norm_type = self.norm_type, scale_grad_by_freq = self.scale_grad_by_freq,
      per_sample_weights = per_sample_weights }
    if not lunet.is_tensor(per_sample_weights) then
      options.fail('nn.EmbeddingBag', 'per_sample_weights must be a tensor or nil, got ' .. type(per_sample_weights))
    end
  end
  if offsets ~= nil and not lunet.is_tensor(offsets) then
    options.fail('nn.EmbeddingBag', 'offsets must be a tensor or nil, got ' .. type(offsets))
  end
  return F._internal.emb.embedding_bag('nn.EmbeddingBag', input, self.weight, offsets, o)
end

local PRE_OPTS = { freeze = 'boolean', mode = 'string', max_norm = 'number', norm_type = 'number',
  scale_grad_by_freq = 'boolean', sparse = 'boolean', include_last_offset = 'boolean', padding_idx = 'number' }
function EmbeddingBag.from_pretrained(embeddings, opts)
  return Embedding._from_pretrained(EmbeddingBag, 'nn.EmbeddingBag.from_pretrained', PRE_OPTS, embeddings, opts)
end

function EmbeddingBag:extra_repr()
  local r = Embedding.extra_repr(self) .. ", mode '" .. self.mode .. "'"
  if self.include_last_offset then r = r .. ', include_last_offset' end
  return r
end

return EmbeddingBag
