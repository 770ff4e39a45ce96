-- nn.AdaptiveLogSoftmaxWithLoss(in_features, n_classes, cutoffs[, div_value = 4[,
-- head_bias = false]]) or (..., cutoffs, {div_value, head_bias, dtype, device}):
-- torch's efficient softmax (Grave et al. 2016). The head scores the
-- cutoffs[1] frequent classes and one entry per cluster; cluster i scores
-- classes cutoffs[i]+1..cutoffs[i+1] through in -> in/div^i -> size (no bias).
-- Parameters are torch's (head.weight, tail.0.0.weight, tail.0.1.weight, ...),
-- so a torch state_dict loads. forward(input (N, in) or (in), target (N) or
-- 0-d, classes 1..n_classes) returns output (each target's log-probability)
-- and loss (the mean of -output): torch's named tuple, in its order.
-- log_prob(input): (N, n_classes); predict(input): the likeliest class (int64).
local Module = require 'lunet.nn.Module'
local Linear = require 'lunet.nn.Linear'
local Sequential = require 'lunet.nn.Sequential'
local ModuleList = require 'lunet.nn.ModuleList'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local T = require 'lunet.tensor'
local core = require 'lunet.core'

local NAME = 'nn.AdaptiveLogSoftmaxWithLoss'
local ASM = Module:extend(NAME)

local OPTS, POSITIONAL = { div_value = 'number', head_bias = 'boolean', dtype = true, device = true },
  { 'div_value', 'head_bias' }

local function int(v, lo) return type(v) == 'number' and v % 1 == 0 and v >= lo and v < 2 ^ 53 end

function ASM:__init(in_features, n_classes, cutoffs, ...)
  if not int(in_features, 1) then options.fail(NAME, 'in_features must be an integer >= 1, got ' .. tostring(in_features)) end
  if not int(n_classes, 2) then options.fail(NAME, 'n_classes must be an integer >= 2, got ' .. tostring(n_classes)) end
  local ok = core.is_table(cutoffs) and #cutoffs > 0
  for i = 1, ok and #cutoffs or 0 do
    local c = cutoffs[i]
    ok = ok and int(c, 1) and c <= n_classes - 1 and (i == 1 or c > cutoffs[i - 1])
  end
  if not ok then
    options.fail(NAME, ('cutoffs must be a list of increasing integers in 1..n_classes-1 (%d), got %s'):format(
      n_classes - 1, core.is_table(cutoffs) and '{' .. table.concat(cutoffs, ', ') .. '}' or core.typename(cutoffs)))
  end
  local o = options.check(NAME, options.positional(NAME, POSITIONAL, ...), OPTS) or {}
  local div = o.div_value or 4.0
  if not (div > 0) then options.fail(NAME, 'div_value must be > 0, got ' .. tostring(div)) end
  self.in_features, self.n_classes, self.div_value, self.head_bias = in_features, n_classes, div, o.head_bias == true
  self.cutoffs = {}
  for i, c in ipairs(cutoffs) do self.cutoffs[i] = c end
  self.cutoffs[#cutoffs + 1] = n_classes
  self.shortlist_size, self.n_clusters = cutoffs[1], #cutoffs
  self.head_size = self.shortlist_size + self.n_clusters
  local lo = { dtype = o.dtype, device = o.device }
  self.head = Linear(in_features, self.head_size, { bias = self.head_bias, dtype = lo.dtype, device = lo.device })
  self.tail = ModuleList()
  for i = 1, self.n_clusters do
    local hsz = math.floor(in_features / div ^ i)
    self.tail:append(Sequential(Linear(in_features, hsz, { bias = false, dtype = lo.dtype, device = lo.device }),
      Linear(hsz, self.cutoffs[i + 1] - self.cutoffs[i], { bias = false, dtype = lo.dtype, device = lo.device })))
  end
end

function ASM:reset_parameters()
  self.head:reset_parameters()
  for _, seq in self.tail:ipairs() do seq[1]:reset_parameters(); seq[2]:reset_parameters() end
end

local function need_input(x, dims)
  if not T.is_tensor(x) then options.raise(NAME .. ': input must be a tensor, got ' .. core.typename(x)) end
  if dims and x:dim() ~= dims then
    options.raise(('%s: input must be %d-d here, got %d-d {%s}'):format(NAME, dims, x:dim(), table.concat(x:size(), ',')))
  end
end

function ASM:forward(input, target)
  if not T.is_tensor(target) or target.dtype ~= 'int64' then
    options.raise(NAME .. ': target must be an int64 tensor of classes 1..n_classes, got ' ..
      (T.is_tensor(target) and target.dtype or core.typename(target)))
  end
  local td = target:dim()
  if td > 1 then options.raise(NAME .. ': target must be 0-d or 1-d (one class per row), got ' .. td .. '-d') end
  need_input(input, td + 1)
  local x, t = input, target
  if td == 0 then x, t = input:unsqueeze(1), target:view(1) end
  local B = t:size(1)
  if x:size(1) ~= B then options.raise(('%s: input has %d rows, target %d'):format(NAME, x:size(1), B)) end
  if B > 0 then
    local lo, hi = t:min():item(), t:max():item()
    if lo < 1 or hi > self.n_classes then
      options.raise(('%s: target values must be in 1..%d, got %d..%d'):format(NAME, self.n_classes, lo, hi))
    end
  end
  local head = F.log_softmax(self.head(x), 2)
  -- each row's cluster (0: the shortlist) and its column in the head
  local cluster = t:new_zeros(B)
  for i = 1, self.n_clusters do cluster = cluster + t:gt(self.cutoffs[i]):to('int64') end
  local col = t:where(cluster:eq(0), cluster + self.shortlist_size)
  local output = head:gather(2, col:view(B, 1)):view(B)
  for i = 1, self.n_clusters do
    local rows = cluster:eq(i):nonzero():view(-1)
    if rows:numel() > 0 then
      local lp = F.log_softmax(self.tail[i](x:index_select(1, rows)), 2)
      local rel = t:index_select(1, rows) - self.cutoffs[i]
      output = output:index_add(1, rows, lp:gather(2, rel:view(-1, 1)):view(-1))
    end
  end
  local loss = (-output):mean()
  if td == 0 then output = output:view({}) end
  return output, loss
end

-- (N, n_classes) log-probabilities of x (N, in)
local function full_log_prob(self, x, head_out)
  local head = F.log_softmax(head_out, 2)
  local parts = { head:narrow(2, 1, self.shortlist_size) }
  for i = 1, self.n_clusters do
    parts[i + 1] = F.log_softmax(self.tail[i](x), 2) + head:narrow(2, self.shortlist_size + i, 1)
  end
  return T.Tensor.cat(parts, 2)
end

function ASM:log_prob(input)
  need_input(input)
  local batched = input:dim() > 1
  local x = batched and input or input:unsqueeze(1)
  local out = full_log_prob(self, x, self.head(x))
  return batched and out or out:select(1, 1)
end

-- the likeliest class: the head's when it is a shortlist class (no cluster
-- can beat it), else the argmax over all classes, as torch's
function ASM:predict(input)
  need_input(input)
  local batched = input:dim() > 1
  local x = batched and input or input:unsqueeze(1)
  local head_out = self.head(x)
  local out = head_out:argmax(2)
  local short = out:le(self.shortlist_size)
  if not short:all():item() then out = out:where(short, full_log_prob(self, x, head_out):argmax(2)) end
  return batched and out or out:select(1, 1)
end

function ASM:extra_repr()
  return ('%d -> %d, cutoffs {%s}, div_value %g%s'):format(self.in_features, self.n_classes,
    table.concat(self.cutoffs, ', ', 1, self.n_clusters), self.div_value, self.head_bias and ', head_bias' or '')
end

return ASM
