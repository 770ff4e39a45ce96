-- lunet.nn.attention: the forward of nn.MultiheadAttention, PyTorch 1.13's
-- F.multi_head_attention_forward step by step (its composed path), with
-- lunet's 1-based dims. Masks become one additive float mask (bool true ->
-- -inf) broadcast against the (N*H, L, S) scores.
local lunet = require 'lunet'
local F = require 'lunet.nn.functional'
local core = require 'lunet.core'
local options = require 'lunet.options'
local is_tensor, typename = lunet.is_tensor, core.typename

local M = {}

local function shape_str(t) return '{' .. table.concat(t:size(), ', ') .. '}' end

local function need_tensor(fn, v, what)
  if not is_tensor(v) then options.fail(fn, ('%s must be a tensor, got %s'):format(what, typename(v))) end
  if not v:is_floating_point() then options.fail(fn, ('%s must be a floating tensor, got %s'):format(what, v.dtype)) end
end

-- bool (true = masked) or floating mask -> additive mask in dtype
local function additive(fn, what, m, dtype)
  if m.dtype == 'bool' then
    return lunet.zeros(m:size(), { dtype = dtype, device = m.device }):masked_fill(m, -math.huge)
  end
  if not m:is_floating_point() then options.fail(fn, ('%s must be a bool or floating tensor, got %s'):format(what, m.dtype)) end
  return m.dtype == dtype and m or m:to(dtype)
end

-- one zero column more at the end (a key added by bias_k or add_zero_attn)
local function pad_last(m)
  local size = m:size()
  size[#size] = 1
  return lunet.cat({ m, lunet.zeros(size, { dtype = m.dtype, device = m.device }) }, #size)
end

function M.mha_forward(fn, self, query, key, value, opts)
  need_tensor(fn, query, 'query'); need_tensor(fn, key, 'key'); need_tensor(fn, value, 'value')
  local kpm, am = opts.key_padding_mask, opts.attn_mask
  local qd = query:dim()
  if qd ~= 2 and qd ~= 3 then
    options.fail(fn, ('query must be unbatched 2-d or batched 3-d, got a %d-d tensor'):format(qd))
  end
  local batched = qd == 3
  if key:dim() ~= qd or value:dim() ~= qd then
    options.fail(fn, ('for a %d-d query, key and value must be %d-d, got %d-d and %d-d'):format(qd, qd, key:dim(), value:dim()))
  end
  if kpm and kpm:dim() ~= qd - 1 then
    options.fail(fn, ('key_padding_mask must be %d-d for a %d-d query, got %d-d'):format(qd - 1, qd, kpm:dim()))
  end
  if am and am:dim() ~= 2 and am:dim() ~= 3 then options.fail(fn, ('attn_mask must be 2-d or 3-d, got %d-d'):format(am:dim())) end
  if not batched then
    query, key, value = query:unsqueeze(2), key:unsqueeze(2), value:unsqueeze(2)
    if kpm then kpm = kpm:unsqueeze(1) end
  elseif self.batch_first then
    query, key, value = query:transpose(1, 2), key:transpose(1, 2), value:transpose(1, 2)
  end
  local L, N, E = query:size(1), query:size(2), query:size(3)
  local S, H = key:size(1), self.num_heads
  local hd = E / H
  if E ~= self.embed_dim then options.fail(fn, ('expected query embedding size %d, got %d'):format(self.embed_dim, E)) end
  if key:size(3) ~= self.kdim then options.fail(fn, ('expected key embedding size %d, got %d'):format(self.kdim, key:size(3))) end
  if value:size(3) ~= self.vdim then options.fail(fn, ('expected value embedding size %d, got %d'):format(self.vdim, value:size(3))) end
  if key:size(1) ~= value:size(1) or key:size(2) ~= N or value:size(2) ~= N then
    options.fail(fn, ('key %s and value %s must have the query\'s batch size %d and the same length'):format(
      shape_str(key), shape_str(value), N))
  end
  -- in projection (one matmul when query, key and value are one tensor)
  local b, q, k, v = self.in_proj_bias, nil, nil, nil
  local function part(t, i) return t and t:narrow(1, (i - 1) * E + 1, E) end
  if self._qkv_same_embed_dim then
    local w = self.in_proj_weight
    if rawequal(query, key) and rawequal(key, value) then
      local qkv = F.linear(query, w, b)
      q, k, v = qkv:narrow(3, 1, E), qkv:narrow(3, E + 1, E), qkv:narrow(3, 2 * E + 1, E)
    else
      q, k, v = F.linear(query, part(w, 1), part(b, 1)), F.linear(key, part(w, 2), part(b, 2)), F.linear(value, part(w, 3), part(b, 3))
    end
  else
    q = F.linear(query, self.q_proj_weight, part(b, 1))
    k, v = F.linear(key, self.k_proj_weight, part(b, 2)), F.linear(value, self.v_proj_weight, part(b, 3))
  end
  local dtype = q.dtype
  local mask
  if am then
    local want = am:dim() == 2 and { L, S } or { N * H, L, S }
    if shape_str(am) ~= '{' .. table.concat(want, ', ') .. '}' then
      options.fail(fn, ('the %d-d attn_mask has shape %s, but should be {%s}'):format(am:dim(), shape_str(am), table.concat(want, ', ')))
    end
    mask = additive(fn, 'attn_mask', am, dtype)
    if am:dim() == 2 then mask = mask:unsqueeze(1) end
  end
  if kpm then
    if kpm:size(1) ~= N or kpm:size(2) ~= S then
      options.fail(fn, ('key_padding_mask has shape %s, expected {%s}'):format(
        shape_str(batched and kpm or kpm:squeeze(1)), batched and (N .. ', ' .. S) or tostring(S)))
    end
    kpm = additive(fn, 'key_padding_mask', kpm, dtype)
  end
  if self.bias_k then
    k = lunet.cat({ k, self.bias_k:expand({ 1, N, E }) }, 1)
    v = lunet.cat({ v, self.bias_v:expand({ 1, N, E }) }, 1)
    if mask then mask = pad_last(mask) end
    if kpm then kpm = pad_last(kpm) end
  end
  -- heads: (N*H, len, hd), batch-major as torch's view of (len, N, E)
  q = q:reshape({ L, N * H, hd }):transpose(1, 2)
  k = k:reshape({ k:size(1), N * H, hd }):transpose(1, 2)
  v = v:reshape({ v:size(1), N * H, hd }):transpose(1, 2)
  if self.add_zero_attn then
    local z = lunet.zeros({ N * H, 1, hd }, { dtype = dtype, device = q.device })
    k, v = lunet.cat({ k, z }, 2), lunet.cat({ v, z }, 2)
    if mask then mask = pad_last(mask) end
    if kpm then kpm = pad_last(kpm) end
  end
  local Sk = k:size(2)
  if kpm then
    kpm = kpm:reshape({ N, 1, 1, Sk }):expand({ N, H, 1, Sk }):reshape({ N * H, 1, Sk })
    mask = mask and mask + kpm or kpm
  end
  -- (torch's baddbmm(mask, q / sqrt(hd), k^T))
  local scores = (q / math.sqrt(hd)):bmm(k:transpose(2, 3))
  if mask then scores = scores + mask end
  local w = F.softmax(scores, 3)
  if self.training and self.dropout > 0 then w = F.dropout(w, self.dropout, true) end
  local out = w:bmm(v):transpose(1, 2):reshape({ L * N, E })
  out = F.linear(out, self.out_proj.weight, self.out_proj.bias):reshape({ L, N, E })
  if not batched then out = out:squeeze(2) elseif self.batch_first then out = out:transpose(1, 2) end
  if opts.need_weights == false then return out, nil end
  w = w:reshape({ N, H, L, Sk })
  if opts.average_attn_weights ~= false then w = w:sum(2) / H end
  if not batched then w = w:squeeze(1) end
  return out, w
end

return M
