-- lunet.tensor_einsum: lunet.einsum(equation, a, b, ...) (or the operands as
-- one list) and lunet.tensordot(a, b, dims), as torch.einsum / tensordot.
-- einsum: letters name dims ('ij,jk->ik'); '...' stands for the dims no
-- letter names (broadcast across operands, aligned from the right); a
-- letter twice in one operand takes that diagonal ('ii->i'); letters absent
-- from the output are summed. Without '->' the output is the ellipsis dims,
-- then the letters used once, in ASCII order (as PyTorch). Size-1 dims
-- broadcast. The work: each operand's diagonals and its letters used
-- nowhere else summed first, then operands contracted left to right, each
-- pair as one bmm of {batch, kept, summed} x {batch, summed, kept}. All of it
-- is recorded ops (diagonal, sum, permute, reshape, expand, bmm), so it is
-- differentiable and runs wherever those have kernels.
-- tensordot(a, b, dims): dims a number n (a's last n dims with b's first n)
-- or {{a's dims}, {b's dims}} (1-based), contracted by one matmul.
local core = require 'lunet.core'
local raise = require('lunet.options').raise
local is_table, typename = core.is_table, core.typename
local T = require 'lunet.tensor'
local Tensor, is_tensor = T.Tensor, T.is_tensor

local M = {}
local ELL = '.'   -- (ellipsis dims get labels '.1', '.2', ...: no letter)

-- one operand's term -> its list of labels (the ellipsis expanded for nd dims)
local function labels_of(fn, term, nd, k, nell)
  local out, letters, ell = {}, 0, false
  local i = 1
  while i <= #term do
    local c = term:sub(i, i)
    if c == '.' then
      if term:sub(i, i + 2) ~= '...' or ell then raise(('%s: operand %d: bad ellipsis in "%s"'):format(fn, k, term)) end
      ell, i = true, i + 3
      out[#out + 1] = ELL
    elseif c:match('%a') then
      letters, i = letters + 1, i + 1
      out[#out + 1] = c
    else
      raise(('%s: invalid subscript "%s" in "%s" (letters a-z, A-Z and ... only)'):format(fn, c, term))
    end
  end
  local ne = nd - letters
  if (not ell and ne ~= 0) or ne < 0 then
    raise(('%s: operand %d has %d dims but the subscripts "%s" name %d'):format(fn, k, nd, term, letters))
  end
  local full = {}
  for _, l in ipairs(out) do
    if l == ELL then
      for e = nell - ne + 1, nell do full[#full + 1] = ELL .. e end
    else
      full[#full + 1] = l
    end
  end
  return full, ell and ne or 0
end

-- sizes of t by label; checks repeated labels agree
local function sizes_into(fn, t, labels, sizes)
  for i, l in ipairs(labels) do
    local s = t:size(i)
    local have = sizes[l]
    if have and have ~= s and have ~= 1 and s ~= 1 then
      raise(('%s: subscript %s has size %d in one operand and %d in another'):format(fn, l:sub(1, 1) == ELL and '...' or l, have, s))
    end
    if not have or have == 1 then sizes[l] = s end
  end
end

-- take t's diagonals until each label is once: -> t, labels
local function undiagonal(fn, t, labels)
  while true do
    local seen, a, b = {}, nil, nil
    for i, l in ipairs(labels) do
      if seen[l] then a, b = seen[l], i; break end
      seen[l] = i
    end
    if not a then return t, labels end
    if t:size(a) ~= t:size(b) then
      raise(('%s: subscript %s repeated in one operand names dims of sizes %d and %d'):format(fn, labels[a], t:size(a), t:size(b)))
    end
    local l = labels[a]
    t = t:diagonal(0, a, b)
    local rest = {}
    for i, x in ipairs(labels) do if i ~= a and i ~= b then rest[#rest + 1] = x end end
    rest[#rest + 1] = l
    labels = rest
  end
end

-- t (labels) summed over the labels keep[l] does not hold
local function sum_unneeded(t, labels, keep)
  local dims, rest = {}, {}
  for i, l in ipairs(labels) do
    if keep[l] then rest[#rest + 1] = l else dims[#dims + 1] = i end
  end
  if #dims == 0 then return t, labels end
  return t:sum(dims), rest
end

local function permuted(t, labels, order)
  local pos, perm = {}, {}
  for i, l in ipairs(labels) do pos[l] = i end
  for i, l in ipairs(order) do perm[i] = pos[l] end
  local id = true
  for i = 1, #perm do id = id and perm[i] == i end
  if id or #perm < 2 then return t end
  return t:permute(perm)
end

-- a (la) and b (lb) contracted over the labels not in keep: -> t, labels
local function contract(a, la, b, lb, keep, sizes)
  local ina, inb = {}, {}
  for _, l in ipairs(la) do ina[l] = true end
  for _, l in ipairs(lb) do inb[l] = true end
  local batch, aonly, summed, bonly = {}, {}, {}, {}
  for _, l in ipairs(la) do
    if inb[l] then
      if keep[l] then batch[#batch + 1] = l else summed[#summed + 1] = l end
    else aonly[#aonly + 1] = l end
  end
  for _, l in ipairs(lb) do if not ina[l] then bonly[#bonly + 1] = l end end
  local function prod(ls) local n = 1; for _, l in ipairs(ls) do n = n * sizes[l] end; return n end
  local function cat(...) local r = {}; for _, ls in ipairs({ ... }) do for _, l in ipairs(ls) do r[#r + 1] = l end end; return r end
  local function expanded(t, labels)
    local want, need = {}, false
    for i, l in ipairs(labels) do want[i] = sizes[l]; need = need or t:size(i) ~= sizes[l] end
    return need and t:expand(want) or t
  end
  local ao, bo = cat(batch, aonly, summed), cat(batch, summed, bonly)
  local A = expanded(permuted(a, la, ao), ao):reshape({ prod(batch), prod(aonly), prod(summed) })
  local B = expanded(permuted(b, lb, bo), bo):reshape({ prod(batch), prod(summed), prod(bonly) })
  local out = cat(batch, aonly, bonly)
  local shape = {}
  for i, l in ipairs(out) do shape[i] = sizes[l] end
  return A:bmm(B):reshape(shape), out
end

function M.einsum(equation, ...)
  local fn = 'einsum'
  if type(equation) ~= 'string' then raise(('%s: equation must be a string, got %s'):format(fn, typename(equation))) end
  local ops = { ... }
  if select('#', ...) == 1 and is_table(ops[1]) and not is_tensor(ops[1]) then ops = ops[1] end
  local eq = equation:gsub('%s', '')
  local lhs, rhs = eq:match('^(.-)%->(.*)$')
  if not lhs then lhs = eq end
  if rhs and rhs:find('->', 1, true) then raise(('%s: more than one "->" in "%s"'):format(fn, equation)) end
  local terms = {}
  for term in (lhs .. ','):gmatch('([^,]*),') do terms[#terms + 1] = term end
  if #terms ~= #ops then raise(('%s: "%s" has %d operands but %d tensors were given'):format(fn, equation, #terms, #ops)) end
  local nell = 0
  for k = 1, #ops do
    if not is_tensor(ops[k]) then raise(('%s: operand %d must be a tensor, got %s'):format(fn, k, typename(ops[k]))) end
    local letters = select(2, terms[k]:gsub('%a', ''))
    if terms[k]:find('...', 1, true) then nell = math.max(nell, ops[k]:dim() - letters) end
  end
  local labels, sizes, count = {}, {}, {}
  for k = 1, #ops do
    labels[k] = labels_of(fn, terms[k], ops[k]:dim(), k, nell)
    sizes_into(fn, ops[k], labels[k], sizes)
    local once = {}
    for _, l in ipairs(labels[k]) do if not once[l] then once[l] = true; count[l] = (count[l] or 0) + 1 end end
  end
  -- the output's labels
  local out = {}
  if rhs then
    local seen, r = {}, rhs:gsub('%.%.%.', '\0')
    for c in r:gmatch('.') do
      if c == '\0' then
        if seen[c] then raise(('%s: more than one ellipsis in the output "%s"'):format(fn, rhs)) end
        seen[c] = true
        for e = 1, nell do out[#out + 1] = ELL .. e end
      elseif c:match('%a') then
        if not sizes[c] then raise(('%s: output subscript %s appears in no operand'):format(fn, c)) end
        if seen[c] then raise(('%s: output subscript %s appears more than once'):format(fn, c)) end
        seen[c] = true
        out[#out + 1] = c
      else
        raise(('%s: invalid subscript "%s" in the output "%s"'):format(fn, c, rhs))
      end
    end
  else
    for e = 1, nell do out[#out + 1] = ELL .. e end
    local ls = {}
    for l, n in pairs(count) do if n == 1 and l:match('^%a$') then ls[#ls + 1] = l end end
    -- (letters used once, and twice in one operand counts once: PyTorch counts every use)
    local uses = {}
    for k = 1, #ops do for _, l in ipairs(labels[k]) do uses[l] = (uses[l] or 0) + 1 end end
    local single = {}
    for _, l in ipairs(ls) do if uses[l] == 1 then single[#single + 1] = l end end
    table.sort(single)
    for _, l in ipairs(single) do out[#out + 1] = l end
  end
  local in_out = {}
  for _, l in ipairs(out) do in_out[l] = true end
  -- each operand: diagonals, then the labels no one else needs summed
  local ts, ls = {}, {}
  for k = 1, #ops do
    ts[k], ls[k] = undiagonal(fn, ops[k], labels[k])
    local keep = {}
    for l in pairs(in_out) do keep[l] = true end
    for j = 1, #ops do if j ~= k then for _, l in ipairs(labels[j]) do keep[l] = true end end end
    ts[k], ls[k] = sum_unneeded(ts[k], ls[k], keep)
  end
  local t, l = ts[1], ls[1]
  for k = 2, #ops do
    local keep = {}
    for x in pairs(in_out) do keep[x] = true end
    for j = k + 1, #ops do for _, x in ipairs(ls[j]) do keep[x] = true end end
    t, l = contract(t, l, ts[k], ls[k], keep, sizes)
  end
  -- size-1 dims of a single operand broadcast to nothing; labels of the output it lacks cannot happen
  local shape = {}
  for i, x in ipairs(out) do shape[i] = sizes[x] end
  t = permuted(t, l, out)
  for i, x in ipairs(out) do if t:size(i) ~= shape[i] then return t:expand(shape) end end
  return t
end

function M.tensordot(a, b, dims)
  local fn = 'tensordot'
  if not is_tensor(a) then raise(('%s: input must be a tensor, got %s'):format(fn, typename(a))) end
  if not is_tensor(b) then raise(('%s: other must be a tensor, got %s'):format(fn, typename(b))) end
  local na, nb = a:dim(), b:dim()
  local da, db = {}, {}
  if dims == nil then dims = 2 end
  if type(dims) == 'number' then
    if dims % 1 ~= 0 or dims < 0 or dims > na or dims > nb then
      raise(('%s: dims must be an integer in 0..%d, got %s'):format(fn, math.min(na, nb), tostring(dims)))
    end
    for i = 1, dims do da[i], db[i] = na - dims + i, i end
  elseif is_table(dims) and is_table(dims[1]) and is_table(dims[2]) and not is_tensor(dims[1]) then
    if #dims[1] ~= #dims[2] then raise(('%s: dims lists must have the same length, got %d and %d'):format(fn, #dims[1], #dims[2])) end
    for i = 1, #dims[1] do
      local x, y = dims[1][i], dims[2][i]
      if type(x) ~= 'number' or x % 1 ~= 0 or type(y) ~= 'number' or y % 1 ~= 0 then raise(fn .. ': dims must be integers') end
      x, y = x < 0 and na + x + 1 or x, y < 0 and nb + y + 1 or y
      if x < 1 or x > na then raise(('%s: dim %d out of range for a %d-d tensor'):format(fn, dims[1][i], na)) end
      if y < 1 or y > nb then raise(('%s: dim %d out of range for a %d-d tensor'):format(fn, dims[2][i], nb)) end
      da[i], db[i] = x, y
    end
  else
    raise(('%s: dims must be a number or {{a\'s dims}, {b\'s dims}}, got %s'):format(fn, typename(dims)))
  end
  local ua, ub, K = {}, {}, 1
  for i = 1, #da do
    if ua[da[i]] or ub[db[i]] then raise(fn .. ': a dim is contracted twice') end
    ua[da[i]], ub[db[i]] = true, true
    if a:size(da[i]) ~= b:size(db[i]) then
      raise(('%s: contracted dims differ in size: dim %d of a is %d, dim %d of b is %d'):format(fn, da[i], a:size(da[i]), db[i], b:size(db[i])))
    end
    K = K * a:size(da[i])
  end
  local pa, pb, shape, Mn, Nn = {}, {}, {}, 1, 1
  for i = 1, na do if not ua[i] then pa[#pa + 1] = i; shape[#shape + 1] = a:size(i); Mn = Mn * a:size(i) end end
  for i = 1, #da do pa[#pa + 1] = da[i]; pb[#pb + 1] = db[i] end
  for i = 1, nb do if not ub[i] then pb[#pb + 1] = i; shape[#shape + 1] = b:size(i); Nn = Nn * b:size(i) end end
  local A = (na > 1 and a:permute(pa) or a):reshape({ Mn, K })
  local B = (nb > 1 and b:permute(pb) or b):reshape({ K, Nn })
  return A:matmul(B):reshape(shape)
end

return M
