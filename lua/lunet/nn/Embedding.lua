-- nn.Embedding(num_embeddings, embedding_dim[, {padding_idx = i, dtype, device}]):
-- a lookup table; forward(input) takes an int64 tensor of 1-based indices of
-- any shape and returns the rows of weight (num_embeddings x embedding_dim,
-- N(0, 1) as PyTorch), shaped input's shape .. {embedding_dim}. padding_idx
-- (1-based; negative counts from the end) names a row initialised to zeros
-- that gets no gradient. PyTorch's positional (num, dim, padding_idx) too.
local lunet = require 'lunet'
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local Embedding = Module:extend('nn.Embedding')

local OPTS = { padding_idx = 'number', dtype = true, device = true }
local POSITIONAL = { 'padding_idx' }

function Embedding:__init(num_embeddings, embedding_dim, ...)
  for _, c in ipairs({ { 'num_embeddings', num_embeddings }, { 'embedding_dim', embedding_dim } }) do
    local v = c[2]
    if type(v) ~= 'number' or v % 1 ~= 0 or v < 0 or v >= 2 ^ 53 then
      options.fail('nn.Embedding', ('%s must be an integer >= 0, got %s'):format(c[1], tostring(v)))
    end
  end
  local opts = options.check('nn.Embedding', options.positional('nn.Embedding', POSITIONAL, ...), OPTS) or {}
  local pi = opts.padding_idx
  if pi ~= nil then
    if pi % 1 ~= 0 or pi == 0 or pi > num_embeddings or pi < -num_embeddings then
      options.fail('nn.Embedding', ('padding_idx must be an integer in 1..%d (1-based) or -%d..-1 (from the end), got %s')
        :format(num_embeddings, num_embeddings, tostring(pi)))
    end
    if pi < 0 then pi = num_embeddings + pi + 1 end
  end
  self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, pi
  self:register_parameter('weight', lunet.empty({ num_embeddings, embedding_dim }, { dtype = opts.dtype, device = opts.device }))
  self:reset_parameters()
end

function Embedding:reset_parameters()
  lunet.no_grad(function()
    self.weight:normal_(0, 1)
    if self.padding_idx then self.weight:select(1, self.padding_idx):fill_(0) end
  end)
end

function Embedding:forward(input) return F._internal.embedding('nn.Embedding', input, self.weight, self.padding_idx) end

function Embedding:extra_repr()
  local r = self.num_embeddings .. ', ' .. self.embedding_dim
  if self.padding_idx then r = r .. ', padding_idx ' .. self.padding_idx end
  return r
end

return Embedding
