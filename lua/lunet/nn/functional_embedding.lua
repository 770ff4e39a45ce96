-- lunet.nn.functional's lookups: embedding and embedding_bag, as PyTorch
-- 1.13's, with Torch7's 1-based indices (and offsets, and padding_idx).
--   F.embedding(input, weight[, padding_idx[, max_norm[, norm_type[, scale_grad_by_freq]]]] or {...})
--   F.embedding_bag(input, weight[, offsets][, {mode = 'mean', per_sample_weights, include_last_offset,
--                   padding_idx, max_norm, norm_type = 2, scale_grad_by_freq}])
-- A bag's rows are summed (weighted by per_sample_weights in mode 'sum'),
-- averaged or maxed; padding_idx's entries leave their bag (an empty bag
-- gives zeros). 2-d input (B, N): B bags of N; 1-d input: the bags start at
-- offsets (1-based: the first is 1; include_last_offset: one more, the last
-- one past the input's end, #input + 1, as CSR's row pointers). Composed of
-- index_select, index_add and index_copy, so differentiable in weight and
-- per_sample_weights. Installed into F by lunet.nn.functional; returns the
-- forms that take the caller's name (nn.Embedding's errors name it).
local T = require 'lunet.tensor'
local A = require 'lunet.autograd'
local factory = require 'lunet.factory'
local options = require 'lunet.options'
local raise, check_options, positional = options.raise, options.check, options.positional
local is_tensor = T.is_tensor

return function(F, h, shape)
  local need, lookup = h.need, shape.embedding

  local function is_index(t) return t.dtype == 'int64' or t.dtype == 'int32' end
  local function shape_str(t) return '{' .. table.concat(t:size(), ',') .. '}' end

  local function padding_of(fn, pi, num)
    if pi == nil then return nil end
    if type(pi) ~= 'number' or pi % 1 ~= 0 or pi == 0 or pi > num or pi < -num then
      raise(('%s: padding_idx must be an integer in 1..%d or negative from the end, got %s'):format(fn, num, tostring(pi)))
    end
    return pi < 0 and num + pi + 1 or pi
  end

  -- the opts both forms share, checked; nil for the defaults
  local function norm_opts(fn, o)
    if o.max_norm ~= nil and not (o.max_norm >= 0) then
      raise(('%s: max_norm must be a number >= 0, got %s'):format(fn, tostring(o.max_norm)))
    end
    if o.norm_type ~= nil and o.norm_type ~= o.norm_type then raise(fn .. ': norm_type must be a number, got nan') end
    if o.sparse then raise(fn .. ': sparse gradients are not supported (sparse = true); use sparse = false') end
  end

  -- torch.embedding_renorm_: the rows idx names whose norm exceeds max_norm
  -- scaled (in place, not recorded) to max_norm / (norm + 1e-7)
  local function renorm_(weight, idx, max_norm, norm_type)
    if idx:numel() == 0 then return end
    A.no_grad(function()
      local u = idx:reshape({ idx:numel() }):unique()
      local rows = weight:index_select(1, u)
      local n = rows:norm(norm_type or 2, 2, true)
      local scale = (n + 1e-7):reciprocal():mul(max_norm):where(n:gt(max_norm), 1)
      weight:index_copy_(1, u, rows * scale)
    end)
  end

  -- the rows of weight at flat (1-d), renormed first; scale_grad_by_freq: each
  -- row's gradient divided by how often its index occurs in flat
  local function rows_of(fn, flat, weight, o)
    local num = weight:size(1)
    if flat:numel() > 0 then
      local lo, hi = flat:min():item(), flat:max():item()
      if lo < 1 or hi > num then
        raise(('%s: index %d is out of range for %d embeddings (indices are 1-based: 1..%d)')
          :format(fn, lo < 1 and lo or hi, num, num))
      end
    end
    if o.max_norm then renorm_(weight, flat, o.max_norm, o.norm_type) end
    local rows = lookup(fn, flat, weight)
    if o.scale_grad_by_freq and rows.requires_grad then
      local ones = factory.ones(flat:numel(), { dtype = weight.dtype, device = weight.device })
      local freq = factory.zeros(num, { dtype = weight.dtype, device = weight.device }):index_add(1, flat, ones)
      freq = freq:index_select(1, flat):unsqueeze(2)
      rows:register_hook(function(g) return g / freq end)
    end
    return rows
  end

  -- ---- embedding ------------------------------------------------------------------------
  local EMB_OPTS = { padding_idx = 'number', max_norm = 'number', norm_type = 'number',
    scale_grad_by_freq = 'boolean', sparse = 'boolean' }
  local EMB_POSITIONAL = { 'padding_idx', 'max_norm', 'norm_type', 'scale_grad_by_freq', 'sparse' }

  -- embedding(fn, input, weight, o): o's padding_idx already 1-based and positive
  local function embedding(fn, input, weight, o)
    need(fn, input, 'input')
    need(fn, weight, 'weight', 2)
    if not is_index(input) then
      raise(('%s: input must be an int64 (or int32) tensor of 1-based indices, got %s'):format(fn, input.dtype))
    end
    local s = input:size()
    local flat = input:reshape({ input:numel() })
    local out = rows_of(fn, flat, weight, o)
    if o.padding_idx ~= nil then out = out:where(flat:ne(o.padding_idx):unsqueeze(2), out:detach()) end
    s[#s + 1] = weight:size(2)
    return out:view(s)
  end

  function F.embedding(input, weight, ...)
    local fn = 'embedding'
    local o = check_options(fn, positional(fn, EMB_POSITIONAL, ...), EMB_OPTS) or {}
    norm_opts(fn, o)
    if o.padding_idx ~= nil then
      local num = is_tensor(weight) and weight:dim() == 2 and weight:size(1)
      if num then o = { padding_idx = padding_of(fn, o.padding_idx, num), max_norm = o.max_norm,
        norm_type = o.norm_type, scale_grad_by_freq = o.scale_grad_by_freq } end
    end
    return embedding(fn, input, weight, o)
  end

  -- ---- embedding_bag --------------------------------------------------------------------
  local BAG_OPTS = { mode = 'string', per_sample_weights = 'tensor', include_last_offset = 'boolean',
    padding_idx = 'number', max_norm = 'number', norm_type = 'number', scale_grad_by_freq = 'boolean',
    sparse = 'boolean' }
  local MODES = { 'sum', 'mean', 'max' }

  -- the bag (1-based) of each entry of the 1-d input of n entries; the number of bags
  local function bags_of(fn, n, offsets, last)
    need(fn, offsets, 'offsets', 1)
    if not is_index(offsets) then raise(('%s: offsets must be an int64 (or int32) tensor, got %s'):format(fn, offsets.dtype)) end
    local k = offsets:numel()
    if last and k == 0 then raise(fn .. ': include_last_offset needs at least one offset (the end of the last bag)') end
    local off = offsets:to('int64')
    if k > 0 then
      local first = off:narrow(1, 1, 1):item()
      if first ~= 1 then
        raise(('%s: offsets[1] must be 1 (the first bag starts at the first entry; offsets are 1-based), got %d'):format(fn, first))
      end
      if k > 1 and (off:narrow(1, 2, k - 1) - off:narrow(1, 1, k - 1)):min():item() < 0 then
        raise(fn .. ': offsets must be non-decreasing')
      end
      local top = off:narrow(1, k, 1):item()
      if top > n + 1 then
        raise(('%s: offsets[%d] = %d is past the end of the input (%d entries: at most %d)'):format(fn, k, top, n, n + 1))
      end
      -- (as the docs say, CSR's layout; torch 1.13 reads past its buffers when it is less)
      if last and top ~= n + 1 then
        raise(('%s: with include_last_offset the last offset must be the input\'s length + 1 (%d), got %d'):format(fn, n + 1, top))
      end
    end
    -- a 1 at each bag's start (two at an empty bag's), summed along: the bag of each entry
    local marks = factory.zeros(n + 1, { dtype = 'int64', device = offsets.device })
    marks:index_add_(1, off, factory.ones(k, { dtype = 'int64', device = offsets.device }))
    return marks:cumsum(1):narrow(1, 1, n), k, off
  end

  local function embedding_bag(fn, input, weight, offsets, o)
    need(fn, input, 'input')
    need(fn, weight, 'weight', 2)
    if not weight:is_floating_point() then raise(('%s: weight must be a floating-point tensor, got %s'):format(fn, weight.dtype)) end
    if not is_index(input) then
      raise(('%s: input must be an int64 (or int32) tensor of 1-based indices, got %s'):format(fn, input.dtype))
    end
    local mode, psw, dim = o.mode or 'mean', o.per_sample_weights, weight:size(2)
    local topt = { dtype = weight.dtype, device = weight.device }
    if psw ~= nil then
      if mode ~= 'sum' then raise(("%s: per_sample_weights is only supported for mode 'sum', got mode '%s'"):format(fn, mode)) end
      if psw.dtype ~= weight.dtype then
        raise(('%s: per_sample_weights must have weight\'s dtype %s, got %s'):format(fn, weight.dtype, psw.dtype))
      end
      if shape_str(psw) ~= shape_str(input) then
        raise(('%s: per_sample_weights must have the input\'s shape %s, got %s'):format(fn, shape_str(input), shape_str(psw)))
      end
    end
    if mode == 'max' and o.scale_grad_by_freq then raise(fn .. ": mode 'max' does not support scale_grad_by_freq") end
    local flat, bag, nbags, rows_n, starts
    if input:dim() == 2 then
      if offsets ~= nil then raise(fn .. ': offsets must be nil for a 2-d input (each row is a bag)') end
      local B, N = input:size(1), input:size(2)
      flat, nbags, rows_n = input:reshape({ B * N }), B, B
      bag = factory.arange(1, B + 1, { device = input.device }):unsqueeze(2):expand({ B, N }):reshape({ B * N })
      starts = factory.arange(0, B, { device = input.device }):mul(N):add(1)
    elseif input:dim() == 1 then
      if offsets == nil then raise(fn .. ': a 1-d input needs offsets (where each bag starts, 1-based)') end
      flat = input
      bag, rows_n, starts = bags_of(fn, input:numel(), offsets, o.include_last_offset)
      nbags = o.include_last_offset and rows_n - 1 or rows_n
    else
      raise(('%s: input must be 1-d (with offsets) or 2-d (bags of equal size), got %s'):format(fn, shape_str(input)))
    end
    if rows_n == 0 then return factory.zeros({ 0, dim }, topt) end
    local n = flat:numel()
    local rows = rows_of(fn, flat, weight, o)
    local keep = o.padding_idx and flat:ne(o.padding_idx):unsqueeze(2)
    local count   -- the entries of each bag, padding left out
    if mode ~= 'sum' then
      local ones = keep and keep:to(weight.dtype):squeeze(2) or factory.ones(n, topt)
      count = factory.zeros(rows_n, topt):index_add(1, bag, ones):unsqueeze(2)
    end
    local out
    if mode == 'max' then
      -- each bag's rows laid out in a (bags, longest, dim) block padded with -inf
      local len = starts:narrow(1, 2, rows_n - 1):cat(factory.full({ 1 }, n + 1, { dtype = 'int64', device = flat.device }))
        - starts
      local L = math.max(len:max():item(), 0)
      local pos = (bag - 1) * L + factory.arange(1, n + 1, { device = flat.device }) - starts:index_select(1, bag)
      local v = keep and rows:where(keep, -math.huge) or rows
      local block = factory.full({ rows_n * L, dim }, -math.huge, topt)
      if n > 0 then block = block:index_copy(1, pos + 1, v) end
      -- (max: its gradient goes to the first largest, as torch's; amax would share it among ties)
      out = L == 0 and factory.zeros({ rows_n, dim }, topt) or (block:view({ rows_n, L, dim }):max(2))
      out = out:where(count:gt(0), 0)
    else
      local v = rows
      if psw ~= nil then v = v * psw:reshape({ n, 1 }) end
      if keep then v = v:where(keep, 0) end
      out = factory.zeros({ rows_n, dim }, topt):index_add(1, bag, v)
      if mode == 'mean' then out = out / count:clamp_min(1) end
    end
    return nbags == rows_n and out or out:narrow(1, 1, nbags)
  end

  -- opts checked, padding_idx made 1-based and positive against weight
  local function bag_opts(fn, opts, weight)
    local o = check_options(fn, opts, BAG_OPTS) or {}
    options.one_of(fn, 'mode', o.mode, MODES)
    norm_opts(fn, o)
    local r = {}
    for k, v in pairs(o) do r[k] = v end
    if r.padding_idx ~= nil and is_tensor(weight) and weight:dim() == 2 then
      r.padding_idx = padding_of(fn, r.padding_idx, weight:size(1))
    end
    return r
  end

  function F.embedding_bag(input, weight, offsets, opts)
    local fn = 'embedding_bag'
    -- (F.embedding_bag(input, weight, {mode = ...}): no offsets, for a 2-d input)
    if opts == nil and offsets ~= nil and not is_tensor(offsets) and type(offsets) == 'table' then offsets, opts = nil, offsets end
    if offsets ~= nil and not is_tensor(offsets) then raise(fn .. ': offsets must be a tensor or nil, got ' .. type(offsets)) end
    return embedding_bag(fn, input, weight, offsets, bag_opts(fn, opts, weight))
  end

  return { embedding = embedding, embedding_bag = embedding_bag, bag_opts = bag_opts, padding_of = padding_of,
    norm_opts = norm_opts }
end
