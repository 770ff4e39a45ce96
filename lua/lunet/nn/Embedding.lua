-- nn.Embedding(num_embeddings, embedding_dim[, {padding_idx, max_norm, norm_type = 2,
-- scale_grad_by_freq = false, sparse = false, _weight, dtype, device}]): a lookup
-- table; forward(input) takes an int64 tensor of 1-based indices of any shape
-- and returns the rows of weight (num_embeddings x embedding_dim, N(0, 1) as
-- PyTorch), shaped input's shape .. {embedding_dim}. padding_idx (1-based;
-- negative counts from the end) names a row initialised to zeros that gets no
-- gradient. max_norm: each forward first rescales (in place, unrecorded) the
-- looked-up rows whose norm_type-norm exceeds it, as torch. scale_grad_by_freq:
-- a row's gradient is divided by how often its index occurs in the input.
-- PyTorch's positional (num, dim, padding_idx, max_norm, ...) too; sparse =
-- true is refused. nn.Embedding.from_pretrained(weights[, {freeze = true, ...}]).
local lunet = require 'lunet'
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Embedding = Module:extend('nn.Embedding')

local OPTS = { padding_idx = 'number', max_norm = 'number', norm_type = 'number', scale_grad_by_freq = 'boolean',
  sparse = 'boolean', _weight = 'tensor', dtype = true, device = true }
local POSITIONAL = { 'padding_idx', 'max_norm', 'norm_type', 'scale_grad_by_freq', 'sparse', '_weight' }

-- the checks Embedding and EmbeddingBag share: sizes, padding_idx, max_norm, _weight
function Embedding._setup(self, name, num_embeddings, embedding_dim, opts)
  for _, c in ipairs({ { 'num_embeddings', num_embeddings }, { 'embedding_dim', embedding_dim } }) do
    local v = c[2]
    if type(v) ~= 'number' or v % 1 ~= 0 or v < 0 or v >= 2 ^ 53 then
      options.fail(name, ('%s must be an integer >= 0, got %s'):format(c[1], tostring(v)))
    end
  end
  local emb = F._internal.emb
  emb.norm_opts(name, opts)
  local pi = opts.padding_idx
  if pi ~= nil then
    if pi % 1 ~= 0 or pi == 0 or pi > num_embeddings or pi < -num_embeddings then
      options.fail(name, ('padding_idx must be an integer in 1..%d (1-based) or -%d..-1 (from the end), got %s')
        :format(num_embeddings, num_embeddings, tostring(pi)))
    end
    if pi < 0 then pi = num_embeddings + pi + 1 end
  end
  self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, pi
  self.max_norm, self.norm_type, self.scale_grad_by_freq = opts.max_norm, opts.norm_type or 2, opts.scale_grad_by_freq or false
  local w = opts._weight
  if w ~= nil then
    if w:dim() ~= 2 or w:size(1) ~= num_embeddings or w:size(2) ~= embedding_dim then
      options.fail(name, ('_weight must have shape {%d,%d} (num_embeddings, embedding_dim), got {%s}')
        :format(num_embeddings, embedding_dim, table.concat(w:size(), ',')))
    end
    if not w:is_floating_point() then options.fail(name, '_weight must be a floating-point tensor, got ' .. w.dtype) end
    -- (a tensor of its own sharing the storage, as torch's Parameter(_weight))
    self:register_parameter('weight', w:detach())
  else
    self:register_parameter('weight', lunet.empty({ num_embeddings, embedding_dim }, { dtype = opts.dtype, device = opts.device }))
    self:reset_parameters()
  end
end

function Embedding:__init(num_embeddings, embedding_dim, ...)
  local opts = options.check('nn.Embedding', options.positional('nn.Embedding', POSITIONAL, ...), OPTS) or {}
  Embedding._setup(self, 'nn.Embedding', num_embeddings, embedding_dim, opts)
end

function Embedding:reset_parameters()
  lunet.no_grad(function()
    self.weight:normal_(0, 1)
    if self.padding_idx then self.weight:select(1, self.padding_idx):fill_(0) end
  end)
end

-- (self carries the options the lookup reads: padding_idx, max_norm, norm_type, scale_grad_by_freq)
function Embedding:forward(input) return F._internal.embedding('nn.Embedding', input, self.weight, self) end

-- the module over weights (num, dim) as they are (shared, not copied; padding_idx's
-- row kept); freeze (default true): weight.requires_grad = false
local PRE_OPTS = { freeze = 'boolean', padding_idx = 'number', max_norm = 'number', norm_type = 'number',
  scale_grad_by_freq = 'boolean', sparse = 'boolean' }
function Embedding._from_pretrained(cls, name, pre_opts, embeddings, opts)
  if not lunet.is_tensor(embeddings) or embeddings:dim() ~= 2 then
    options.fail(name, 'embeddings must be a 2-d tensor (num_embeddings, embedding_dim), got '
      .. (lunet.is_tensor(embeddings) and (embeddings:dim() .. '-d') or type(embeddings)))
  end
  opts = options.check(name, opts, pre_opts) or {}
  local o = { _weight = embeddings }
  for k, v in pairs(opts) do if k ~= 'freeze' then o[k] = v end end
  local m = cls(embeddings:size(1), embeddings:size(2), o)
  m.weight.requires_grad = opts.freeze == false
  return m
end
function Embedding.from_pretrained(embeddings, opts)
  return Embedding._from_pretrained(Embedding, 'nn.Embedding.from_pretrained', PRE_OPTS, embeddings, opts)
end

function Embedding:extra_repr()
  local r = self.num_embeddings .. ', ' .. self.embedding_dim
  if self.padding_idx then r = r .. ', padding_idx ' .. self.padding_idx end
  if self.max_norm then r = r .. ', max_norm ' .. self.max_norm end
  if self.norm_type ~= 2 then r = r .. ', norm_type ' .. self.norm_type end
  if self.scale_grad_by_freq then r = r .. ', scale_grad_by_freq' end
  return r
end

return Embedding
