-- nn.MultiheadAttention(embed_dim, num_heads[, {dropout = 0, bias = true, add_bias_kv = false,
-- add_zero_attn = false, kdim, vdim, batch_first = false, dtype, device}]):
--   out, weights = mha(query, key, value[, {key_padding_mask, need_weights = true, attn_mask,
--                                           average_attn_weights = true}])
-- PyTorch 1.13's composed path (F.multi_head_attention_forward): query (L, N, E), key (S, N, kdim),
-- value (S, N, vdim), or (N, L, E)... with batch_first, or unbatched (L, E); out like query,
-- weights (N, L, S) averaged over heads, (N, num_heads, L, S) otherwise, nil without
-- need_weights. Masks: bool (true = not allowed) or float (added to the scores);
-- key_padding_mask (N, S) ((S) unbatched), attn_mask (L, S) or (N*num_heads, L, S). A query that
-- may attend to nothing gets NaN, as torch's composed path (its eval fast path gives 0 there).
-- Parameters have torch's names (in_proj_weight or q/k/v_proj_weight, in_proj_bias,
-- out_proj.weight/bias, bias_k, bias_v), so torch's state_dicts load.
-- Composed of linear, bmm, softmax and dropout (every backend); a fused attention kernel
-- would save the (N*H, L, S) score tensor's round trips.
local lunet = require 'lunet'
local Module = require 'lunet.nn.Module'
local Linear = require 'lunet.nn.Linear'
local F = require 'lunet.nn.functional'
local init = require 'lunet.nn.initializers'
local options = require 'lunet.options'
local attention = require 'lunet.nn.attention'

local MHA = Module:extend('nn.MultiheadAttention')
local FN = 'nn.MultiheadAttention'

local OPTS = { dropout = 'number', bias = 'boolean', add_bias_kv = 'boolean', add_zero_attn = 'boolean',
  kdim = 'number', vdim = 'number', batch_first = 'boolean', dtype = true, device = true }
local POSITIONAL = { 'dropout', 'bias', 'add_bias_kv', 'add_zero_attn', 'kdim', 'vdim', 'batch_first' }

local function need_size(name, v, least)
  if type(v) ~= 'number' or not (v % 1 == 0 and v >= least and v < 2 ^ 53) then
    options.fail(FN, ('%s must be an integer >= %d, got %s'):format(name, least, tostring(v)))
  end
end

function MHA:__init(embed_dim, num_heads, ...)
  need_size('embed_dim', embed_dim, 1)
  need_size('num_heads', num_heads, 1)
  if embed_dim % num_heads ~= 0 then
    options.fail(FN, ('embed_dim must be divisible by num_heads, got %d and %d'):format(embed_dim, num_heads))
  end
  local opts = options.check(FN, options.positional(FN, POSITIONAL, ...), OPTS) or {}
  local p = opts.dropout or 0
  if not (p >= 0 and p <= 1) then options.fail(FN, 'dropout must be a number in [0, 1], got ' .. tostring(p)) end
  if opts.kdim ~= nil then need_size('kdim', opts.kdim, 1) end
  if opts.vdim ~= nil then need_size('vdim', opts.vdim, 1) end
  self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim / num_heads
  self.kdim, self.vdim = opts.kdim or embed_dim, opts.vdim or embed_dim
  self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
  self.dropout, self.batch_first, self.add_zero_attn = p, opts.batch_first == true, opts.add_zero_attn == true
  local o = { dtype = opts.dtype, device = opts.device }
  if self._qkv_same_embed_dim then
    self:register_parameter('in_proj_weight', lunet.empty({ 3 * embed_dim, embed_dim }, o))
  else
    self:register_parameter('q_proj_weight', lunet.empty({ embed_dim, embed_dim }, o))
    self:register_parameter('k_proj_weight', lunet.empty({ embed_dim, self.kdim }, o))
    self:register_parameter('v_proj_weight', lunet.empty({ embed_dim, self.vdim }, o))
  end
  if opts.bias ~= false then self:register_parameter('in_proj_bias', lunet.empty({ 3 * embed_dim }, o)) end
  if opts.add_bias_kv then
    self:register_parameter('bias_k', lunet.empty({ 1, 1, embed_dim }, o))
    self:register_parameter('bias_v', lunet.empty({ 1, 1, embed_dim }, o))
  end
  self.out_proj = Linear(embed_dim, embed_dim, { bias = opts.bias ~= false, dtype = opts.dtype, device = opts.device })
  self:reset_parameters()
end

-- torch's _reset_parameters: xavier_uniform_ projections, zero biases, xavier_normal_ bias_k/v
-- (out_proj.weight keeps Linear's default init, as torch's)
function MHA:reset_parameters()
  lunet.no_grad(function()
    for _, n in ipairs({ 'in_proj_weight', 'q_proj_weight', 'k_proj_weight', 'v_proj_weight' }) do
      if self[n] then init.xavier_uniform_(self[n]) end
    end
    if self.in_proj_bias then self.in_proj_bias:fill_(0); self.out_proj.bias:fill_(0) end
    if self.bias_k then init.xavier_normal_(self.bias_k); init.xavier_normal_(self.bias_v) end
  end)
end

local CALL = { key_padding_mask = 'tensor', need_weights = 'boolean', attn_mask = 'tensor',
  average_attn_weights = 'boolean' }
local NO_OPTS = {}

function MHA:forward(query, key, value, opts)
  opts = options.check(FN, opts, CALL) or NO_OPTS
  return attention.mha_forward(FN, self, query, key, value, opts)
end

function MHA:extra_repr()
  local r = ('%d, heads %d'):format(self.embed_dim, self.num_heads)
  if not self._qkv_same_embed_dim then r = r .. (', kdim %d, vdim %d'):format(self.kdim, self.vdim) end
  if self.dropout ~= 0 then r = r .. ', dropout ' .. self.dropout end
  if not self.in_proj_bias then r = r .. ', no bias' end
  if self.bias_k then r = r .. ', add_bias_kv' end
  if self.add_zero_attn then r = r .. ', add_zero_attn' end
  if self.batch_first then r = r .. ', batch_first' end
  return r
end

return MHA
