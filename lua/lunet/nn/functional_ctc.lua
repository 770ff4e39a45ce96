-- lunet.nn.functional.ctc_loss(log_probs (T, N, C) or (T, C), targets, input_lengths,
-- target_lengths[, {blank = 1, reduction = 'mean', zero_infinity = false}]) as
-- PyTorch 1.13's, with 1-based class labels (blank 1 where torch's is 0).
-- targets: (N, S) padded, or 1-d, the targets concatenated; the lengths are
-- integer tensors or tables of integers (numbers for (T, C) input).
-- The forward is the log-space alpha recursion over time, vectorised over the
-- batch and the extended label positions; the backward is autograd's through
-- it: the derivative itself, where torch's adds exp(log_probs) (which cancels
-- through the log_softmax that produces log_probs: the logits' gradients agree).
local A = require 'lunet.autograd'
local factory = require 'lunet.factory'
local options = require 'lunet.options'
local T = require 'lunet.tensor'
local Tensor, is_tensor = T.Tensor, T.is_tensor
local raise, check_options, one_of = options.raise, options.check, options.one_of

-- "minus infinity": finite, so that logsumexp over unreachable positions keeps
-- finite gradients (exp(NEG - m) is exactly 0 next to any reachable value)
local NEG = -1e30

return function(F, h)
  local need, need_float, shape_str, reduce = h.need, h.need_float, h.shape_str, h.reduce

  local OPTS = { blank = 'number', reduction = 'string', zero_infinity = 'boolean' }
  local function ctc_opts(fn, o)
    o = check_options(fn, o, OPTS) or {}
    one_of(fn, 'reduction', o.reduction, options.REDUCTIONS)
    local b = o.blank or 1
    if b ~= math.floor(b) then raise(('%s: blank must be an integer, got %s'):format(fn, tostring(b))) end
    return { blank = b, reduction = o.reduction or 'mean', zero_infinity = o.zero_infinity or false }
  end

  local function need_int(fn, t, what)
    if t:is_floating_point() or t.dtype == 'bool' then
      raise(('%s: %s must be an integer tensor, got %s'):format(fn, what, t.dtype))
    end
  end

  -- the lengths as a Lua list of n integers in 0..max
  local function lengths(fn, what, v, n, max, unbatched)
    local list
    if type(v) == 'number' and unbatched then list = { v }
    elseif type(v) == 'table' and not is_tensor(v) then list = v
    elseif is_tensor(v) then
      need_int(fn, v, what)
      if v:dim() > 1 then raise(('%s: %s must be 0-d or 1-d, got %s'):format(fn, what, shape_str(v))) end
      list = v:reshape(-1):totable()
    else
      raise(('%s: %s must be an integer tensor or a table of integers, got %s'):format(fn, what, type(v)))
    end
    if #list ~= n then raise(('%s: %s must hold %d length%s, got %d'):format(fn, what, n, n == 1 and '' or 's', #list)) end
    for i = 1, n do
      local x = tonumber(list[i])
      if type(x) ~= 'number' or x ~= math.floor(x) or x < 0 or x > max then
        raise(('%s: %s[%d] must be an integer in 0..%d, got %s'):format(fn, what, i, max, tostring(list[i])))
      end
      list[i] = x
    end
    return list
  end

  local function ctc_loss(fn, lp, targets, in_len, tg_len, o)
    need_float(fn, lp, 'log_probs'); need(fn, targets, 'targets'); need_int(fn, targets, 'targets')
    local unbatched = lp:dim() == 2
    if lp:dim() ~= 3 and not unbatched then
      raise(('%s: log_probs must be (T, N, C) or (T, C), got %s'):format(fn, shape_str(lp)))
    end
    if unbatched then lp = lp:unsqueeze(2) end
    local Tn, N, C = lp:size(1), lp:size(2), lp:size(3)
    if C < 1 then raise(('%s: log_probs has no classes: %s'):format(fn, shape_str(lp))) end
    if o.blank < 1 or o.blank > C then raise(('%s: blank %d is not a class in 1..%d'):format(fn, o.blank, C)) end
    local il = lengths(fn, 'input_lengths', in_len, N, Tn, unbatched)
    local padded = targets:dim() == 2 or (unbatched and targets:dim() == 1)
    if unbatched and targets:dim() == 1 then targets = targets:unsqueeze(1) end
    if targets:dim() ~= 1 and (targets:dim() ~= 2 or targets:size(1) ~= N) then
      raise(('%s: targets must be (N, S) = (%d, S) or 1-d concatenated, got %s'):format(fn, N, shape_str(targets)))
    end
    local tl = lengths(fn, 'target_lengths', tg_len, N, padded and targets:size(2) or targets:numel(), unbatched)
    local S, offsets, total = 0, {}, 0
    for i = 1, N do S, offsets[i], total = math.max(S, tl[i]), total, total + tl[i] end
    if not padded and total > targets:numel() then
      raise(('%s: targets holds %d labels, target_lengths sum to %d'):format(fn, targets:numel(), total))
    end
    local dev, L = lp.device, 2 * S + 1
    local I = function(t) return factory.tensor(t, { dtype = 'int64', device = dev }) end
    local ext, allow2, last = A.no_grad(function()
      -- the labels (N, S), 1-based, blank beyond each target's length
      local pos = factory.arange(0, S, { dtype = 'int64', device = dev }):reshape(1, S)
      local tlt = I(tl):reshape(N, 1)
      local inside = pos:lt(tlt)
      local t64 = targets:to('int64')
      local lab
      if S == 0 then lab = factory.zeros({ N, 0 }, { dtype = 'int64', device = dev })
      elseif padded then lab = t64:narrow(2, 1, S)
      else lab = t64:reshape(-1):gather(1, (I(offsets):reshape(N, 1) + pos):clamp_max(total - 1)
                                             :reshape(-1) + 1):reshape(N, S) end
      lab = lab:where(inside, o.blank)
      if S > 0 then
        local lo, hi = lab:min():item(), lab:max():item()
        if lo < 1 or hi > C then raise(('%s: targets hold a label %d out of range 1..%d'):format(fn, lo < 1 and lo or hi, C)) end
        if lab:eq(o.blank):logical_and(inside):any():item() then
          raise(('%s: targets hold the blank label %d'):format(fn, o.blank))
        end
      end
      -- the extended labels (N, L): blank, l1, blank, l2, ..., blank
      local ext = Tensor.stack({ lab:new_full({ N, S }, o.blank), lab }, 3):reshape(N, 2 * S)
      ext = Tensor.cat({ ext, lab:new_full({ N, 1 }, o.blank) }, 2)
      -- the skip s-2 -> s: onto a label that differs from the one before it
      local allow2
      if L > 2 then
        local prev2 = Tensor.cat({ ext:new_full({ N, 2 }, 0), ext:narrow(2, 1, L - 2) }, 2)
        allow2 = ext:ne(o.blank):logical_and(ext:ne(prev2))
      end
      -- the last two positions of each extended target (1-based): 2 S_n + 1 and 2 S_n
      local last = Tensor.stack({ 2 * tlt + 1, (2 * tlt):clamp_min(1) }, 2):reshape(N, 2)
      return ext, allow2, last
    end)
    -- the log-probabilities of the extended labels at every step: (T, N, L)
    local lpx = lp:gather(3, ext:reshape(1, N, L):expand(Tn, N, L))
    local neg1, neg2 = lp:new_full({ N, 1 }, NEG), lp:new_full({ N, 2 }, NEG)
    local ilt = I(il):reshape(N, 1)
    local start = factory.arange(1, L + 1, { dtype = 'int64', device = dev }):reshape(1, L):le(2)
    local alpha = lpx:select(1, 1):where(start:logical_and(ilt:gt(0)), NEG)
    for t = 2, Tn do
      local a1 = L > 1 and Tensor.cat({ neg1, alpha:narrow(2, 1, L - 1) }, 2) or neg1
      local a2 = L > 2 and Tensor.cat({ neg2, alpha:narrow(2, 1, L - 2) }, 2):where(allow2, NEG) or neg1:expand(N, L)
      local m = alpha:maximum(a1):maximum(a2):detach()
      local nxt = ((alpha - m):exp() + (a1 - m):exp() + (a2 - m):exp()):log() + m + lpx:select(1, t)
      alpha = nxt:where(ilt:ge(t), alpha)   -- (past its input length a sample keeps its alpha)
    end
    local ends = alpha:gather(2, last)
    ends = Tensor.cat({ ends:narrow(2, 1, 1), ends:narrow(2, 2, 1):where(I(tl):reshape(N, 1):gt(0), NEG) }, 2)
    local loss = -ends:logsumexp(2)
    local possible = loss:lt(-NEG / 2)
    local inf = o.zero_infinity and 0 or math.huge
    loss = loss:where(possible, inf)   -- (an impossible alignment: inf, or 0 with zero_infinity; its gradient 0)
    if o.reduction == 'mean' then loss = loss / I(tl):clamp_min(1):to(loss.dtype) end
    if o.reduction == 'none' and unbatched then return loss:reshape({}) end
    return reduce(loss, o.reduction)
  end

  function F.ctc_loss(log_probs, targets, input_lengths, target_lengths, opts)
    local fn = 'ctc_loss'
    return ctc_loss(fn, log_probs, targets, input_lengths, target_lengths, ctc_opts(fn, opts))
  end

  return { ctc_opts = ctc_opts, ctc_loss = ctc_loss }
end
