-- nn.RNNBase: what nn.RNN, nn.LSTM and nn.GRU share, as PyTorch 1.13's.
-- Options num_layers (1), bias (true), batch_first (false), dropout (0: after
-- each layer but the last, in training only), bidirectional (false), dtype,
-- device. Parameters named as torch's (weight_ih_l0, weight_hh_l0, bias_ih_l0,
-- bias_hh_l0, then the _reverse ones per layer) so a torch state_dict loads.
-- Input (L, N, in), (N, L, in) with batch_first, unbatched (L, in), or a
-- PackedSequence (then the output is one, and h_n holds each sequence's
-- state at its own last step); the state (num_layers * D, N, H), or
-- (num_layers * D, H) unbatched; returns output, h_n (LSTM: output,
-- {h_n, c_n}). LSTM's proj_size P: h is (o * tanh(c)) W_hr^T, of size P.
local lunet = require 'lunet'
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local steps = require 'lunet.nn.rnn_steps'
local PackedSequence = require 'lunet.nn.PackedSequence'
local is_tensor = lunet.is_tensor
local shape = steps.shape

local RNNBase = Module:extend('nn.RNNBase')

RNNBase.OPTS = { num_layers = 'number', bias = 'boolean', batch_first = 'boolean', dropout = 'number',
  bidirectional = 'boolean', proj_size = 'number', dtype = true, device = true }
RNNBase.POSITIONAL = { 'num_layers', 'bias', 'batch_first', 'dropout', 'bidirectional', 'proj_size' }

local function int(v, least) return type(v) == 'number' and v % 1 == 0 and v >= least and v < 2 ^ 31 end

-- (called by the subclasses' __init with checked options o)
function RNNBase:_setup(fn, mode, input_size, hidden_size, o)
  if not int(input_size, 0) then options.fail(fn, 'input_size must be an integer >= 0, got ' .. tostring(input_size)) end
  if not int(hidden_size, 1) then options.fail(fn, 'hidden_size must be an integer >= 1, got ' .. tostring(hidden_size)) end
  local L = o.num_layers or 1
  if not int(L, 1) then options.fail(fn, 'num_layers must be an integer >= 1, got ' .. tostring(L)) end
  local p = o.dropout or 0
  if not (p >= 0 and p <= 1) then options.fail(fn, 'dropout must be a number in [0, 1], got ' .. tostring(p)) end
  local P = o.proj_size or 0
  if not int(P, 0) then options.fail(fn, 'proj_size should be a positive integer or zero to disable projections, got ' .. tostring(P)) end
  if P > 0 and mode ~= 'LSTM' then options.fail(fn, 'proj_size argument is only supported for LSTM, not RNN or GRU') end
  if P >= hidden_size then options.fail(fn, ('proj_size has to be smaller than hidden_size, got %d >= %d'):format(P, hidden_size)) end
  self.mode, self.input_size, self.hidden_size, self.num_layers, self.proj_size = mode, input_size, hidden_size, L, P
  local real_H = P > 0 and P or hidden_size   -- (the size of h)
  self.bias, self.batch_first, self.dropout = o.bias ~= false, o.batch_first == true, p
  self.bidirectional = o.bidirectional == true
  local D, G, to = self.bidirectional and 2 or 1, steps.GATES[mode], { dtype = o.dtype, device = o.device }
  for l = 0, L - 1 do
    for d = 0, D - 1 do
      local sfx = 'l' .. l .. (d == 1 and '_reverse' or '')
      local in_l = l == 0 and input_size or real_H * D
      self:register_parameter('weight_ih_' .. sfx, lunet.empty({ G * hidden_size, in_l }, to))
      self:register_parameter('weight_hh_' .. sfx, lunet.empty({ G * hidden_size, real_H }, to))
      if self.bias then
        self:register_parameter('bias_ih_' .. sfx, lunet.empty({ G * hidden_size }, to))
        self:register_parameter('bias_hh_' .. sfx, lunet.empty({ G * hidden_size }, to))
      end
      if P > 0 then self:register_parameter('weight_hr_' .. sfx, lunet.empty({ P, hidden_size }, to)) end
    end
  end
  self:reset_parameters()
end

function RNNBase:reset_parameters()
  local bound = 1 / math.sqrt(self.hidden_size)
  lunet.no_grad(function()
    for _, p in ipairs(self:parameters()) do p:uniform_(-bound, bound) end
  end)
end

-- (torch's cuDNN weight compaction: nothing to do here)
function RNNBase:flatten_parameters() end

-- x as (L, N, in) (a PackedSequence's data (sum(batch_sizes), in)), whether
-- it was unbatched, and the PackedSequence
function RNNBase:_input(x)
  local fn = self.__name
  local packed = PackedSequence.is_packed(x) and x or nil
  if packed then x = packed.data end
  if not is_tensor(x) then
    options.fail(fn, 'input must be a tensor or a PackedSequence, got ' .. type(x))
  end
  if packed and x.ndim ~= 2 then
    options.fail(fn, ('expected a PackedSequence\'s data to be 2-D but received %d-D tensor'):format(x.ndim))
  end
  if x.ndim ~= 2 and x.ndim ~= 3 then
    options.fail(fn, ('expected input to be 2-D or 3-D but received %d-D tensor'):format(x.ndim))
  end
  if x.dtype ~= self.weight_ih_l0.dtype then
    options.fail(fn, ('input is %s but the weights are %s; cast one first'):format(x.dtype, self.weight_ih_l0.dtype))
  end
  if x:size(-1) ~= self.input_size then
    options.fail(fn, ('input has %d features (its last dim), expected input_size %d'):format(x:size(-1), self.input_size))
  end
  if packed then return x, false, packed end
  local unbatched = x.ndim == 2
  if unbatched then x = x:unsqueeze(2) elseif self.batch_first then x = x:transpose(1, 2) end
  if x:size(1) == 0 then options.fail(fn, 'expected sequence length to be larger than 0') end
  return x, unbatched
end

-- the state h0 (or c0) as (num_layers * D, N, H): checked, or zeros
function RNNBase:_state(what, h, x, N, H, unbatched)
  local fn = self.__name
  local LD = self.num_layers * (self.bidirectional and 2 or 1)
  if h == nil then return x:new_zeros(LD, N, H) end
  if not is_tensor(h) then options.fail(fn, what .. ' must be a tensor, got ' .. type(h)) end
  if h.dtype ~= x.dtype then options.fail(fn, ('%s is %s but the input is %s'):format(what, h.dtype, x.dtype)) end
  local want = unbatched and { LD, H } or { LD, N, H }
  local ok = h.ndim == #want
  for i = 1, #want do ok = ok and h:size(i) == want[i] end
  if not ok then
    options.fail(fn, ('%s must have shape {%s} (num_layers * num_directions, %sH), got %s')
      :format(what, table.concat(want, ', '), unbatched and '' or 'N, ', shape(h)))
  end
  return unbatched and h:unsqueeze(2) or h
end

-- one layer in one direction over x (L, N, in_l): the outputs {h_1..h_L} and the last state(s)
function RNNBase:_run(x, sfx, reverse, h, c, bs)
  local step = steps[self.mode]
  local w_hh, b_hh, w_hr = self['weight_hh_' .. sfx], self['bias_hh_' .. sfx], self['weight_hr_' .. sfx]
  local gi = F.linear(x, self['weight_ih_' .. sfx], self['bias_ih_' .. sfx])   -- (every step's at once)
  if bs then return self:_run_packed(gi, reverse, h, c, bs, step, w_hh, b_hh, w_hr) end
  local outs, L = {}, x:size(1)
  for k = 1, L do
    local t = reverse and L + 1 - k or k
    h, c = step(gi:select(1, t), h, w_hh, b_hh, c, w_hr)
    outs[t] = h
  end
  return lunet.stack(outs, 1), h, c
end

-- the same over packed data: step t runs the first bs[t] rows (sequences
-- sorted by length). Forward, a sequence's last state is set aside when it
-- ends; in reverse each one starts from its h0 row at its own last step.
function RNNBase:_run_packed(gi, reverse, h, c, bs, step, w_hh, b_hh, w_hr)
  local T, offs, outs, off = #bs, {}, {}, 1
  for t = 1, T do offs[t], off = off, off + bs[t] end
  if not reverse then
    local done_h, done_c = {}, {}
    for t = 1, T do
      local b, n = bs[t], h:size(1)
      if b < n then
        table.insert(done_h, 1, h:narrow(1, b + 1, n - b)); h = h:narrow(1, 1, b)
        if c then table.insert(done_c, 1, c:narrow(1, b + 1, n - b)); c = c:narrow(1, 1, b) end
      end
      h, c = step(gi:narrow(1, offs[t], b), h, w_hh, b_hh, c, w_hr)
      outs[t] = h
    end
    -- (the rows that ended earlier come later in the sorted batch)
    if #done_h > 0 then
      table.insert(done_h, 1, h); h = lunet.cat(done_h, 1)
      if c then table.insert(done_c, 1, c); c = lunet.cat(done_c, 1) end
    end
  else
    local h0, c0, n = h, c, bs[T]
    h, c = h0:narrow(1, 1, n), c0 and c0:narrow(1, 1, n)
    for t = T, 1, -1 do
      local b = bs[t]
      if b > n then
        h = lunet.cat({ h, h0:narrow(1, n + 1, b - n) }, 1)
        if c then c = lunet.cat({ c, c0:narrow(1, n + 1, b - n) }, 1) end
        n = b
      end
      h, c = step(gi:narrow(1, offs[t], b), h, w_hh, b_hh, c, w_hr)
      outs[t] = h
    end
  end
  return lunet.cat(outs, 1), h, c
end

-- out, h_n, c_n (c_n for LSTM) for x (L, N, in) and states (num_layers * D, N, H)
function RNNBase:_layers(x, h0, c0, bs)
  local D, lstm = self.bidirectional and 2 or 1, self.mode == 'LSTM'
  local hn, cn = {}, {}
  for l = 0, self.num_layers - 1 do
    local outs = {}
    for d = 0, D - 1 do
      local k = l * D + d + 1
      local o, h, c = self:_run(x, 'l' .. l .. (d == 1 and '_reverse' or ''), d == 1, h0:select(1, k),
        lstm and c0:select(1, k) or nil, bs)
      outs[d + 1], hn[k], cn[k] = o, h, c
    end
    x = D == 2 and lunet.cat(outs, -1) or outs[1]
    if self.dropout > 0 and self.training and l < self.num_layers - 1 then x = F.dropout(x, self.dropout, true) end
  end
  return x, lunet.stack(hn, 1), lstm and lunet.stack(cn, 1) or nil
end

-- out, h_n, c_n (c_n for LSTM) for the caller's input and states, in its layout
function RNNBase:_forward(x0, h0, c0)
  local x, unbatched, packed = self:_input(x0)
  local N, lstm = packed and packed._bs[1] or x:size(2), self.mode == 'LSTM'
  h0 = self:_state('h0', h0, x, N, self.proj_size > 0 and self.proj_size or self.hidden_size, unbatched)
  c0 = lstm and self:_state('c0', c0, x, N, self.hidden_size, unbatched) or nil
  local sorted, unsorted = packed and packed.sorted_indices, packed and packed.unsorted_indices
  if sorted then h0, c0 = h0:index_select(2, sorted), c0 and c0:index_select(2, sorted) end
  local out, hn, cn = self:_layers(x, h0, c0, packed and packed._bs)
  if packed then
    out = PackedSequence(out, packed.batch_sizes, sorted, unsorted)
    if unsorted then hn, cn = hn:index_select(2, unsorted), cn and cn:index_select(2, unsorted) end
  elseif unbatched then
    out, hn, cn = out:squeeze(2), hn:squeeze(2), cn and cn:squeeze(2)
  elseif self.batch_first then
    out = out:transpose(1, 2)
  end
  return out, hn, cn
end

function RNNBase:extra_repr()
  local s = ('%d, %d'):format(self.input_size, self.hidden_size)
  if self.proj_size ~= 0 then s = s .. ', proj_size=' .. self.proj_size end
  if self.num_layers ~= 1 then s = s .. ', num_layers=' .. self.num_layers end
  if not self.bias then s = s .. ', bias=False' end
  if self.batch_first then s = s .. ', batch_first=True' end
  if self.dropout ~= 0 then s = s .. ', dropout=' .. self.dropout end
  if self.bidirectional then s = s .. ', bidirectional=True' end
  return s
end

return RNNBase
