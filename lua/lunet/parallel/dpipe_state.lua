-- The whole training state of a Pipeline across processes
-- (DistributedPipeline.lua), for lunet.fit's checkpoints: every stage's
-- parameters, buffers and optimizer state gathered on one rank (gather), and
-- a whole state cut back to one stage's (stage_state).
--
-- The whole state is the one a single process training the unwrapped model
-- would save: model = the model's state_dict; optimizer = one param group
-- whose params are numbered as model:parameters() lists them (an optimizer
-- built over model:parameters()). So a checkpoint written by a pipeline
-- resumes in one process, over another stage count, and the other way round.
-- Each stage's optimizer must hold one param group (its stage's parameters,
-- in any order: they are matched by identity); its hyper-parameters are
-- taken from the gathering rank's (every rank builds the same optimizer).
-- Optimizer state goes as a small JSON header (the entries' names, dtypes
-- and shapes, and the numbers such as Adam's step) then each tensor, over
-- the pipeline's send/recv.
local lunet = require 'lunet'
local json = require 'lunet.json'
local autograd = require 'lunet.autograd'
local Module = require 'lunet.nn.Module'

local M = {}

local function fail(msg, lvl) error('Pipeline: ' .. msg, lvl + 1) end

-- the model's parameters by identity -> their number in model:parameters()
local function numbering(pipe)
  local index, n = {}, 0
  for i, p in ipairs(pipe.module:parameters()) do index[p], n = i, i end
  return index, n
end

-- this stage's optimizer: its one group, with each param's model-wide number
local function own_group(pipe, opt, lvl)
  if type(opt) ~= 'table' or type(opt.param_groups) ~= 'table' or not opt.state_dict then
    fail('the optimizer must be a lunet.optim optimizer, got ' .. type(opt), lvl + 1)
  end
  if #opt.param_groups ~= 1 then
    fail(('a whole-model checkpoint across processes takes an optimizer of one param group, this one has %d')
      :format(#opt.param_groups), lvl + 1)
  end
  local index = numbering(pipe)
  local nums = {}
  for j, p in ipairs(opt.param_groups[1].params) do
    nums[j] = index[p]
    if not nums[j] then fail(('the optimizer\'s param %d is not a parameter of the model'):format(j), lvl + 1) end
  end
  return nums
end

-- the rank's model and optimizer parts: parameters and buffers into the
-- root's copy of the model (as full_state_dict), optimizer state as
-- {number -> state} with model-wide numbers
local function bytes_tensor(s, dev)
  local list = {}
  for i = 1, #s do list[i] = s:byte(i) end
  return lunet.tensor(list, { dtype = 'uint8', device = dev })
end
local function tensor_string(t)
  local v, parts = t:totable(), {}
  for i = 1, #v, 4096 do parts[#parts + 1] = string.char(unpack(v, i, math.min(i + 4095, #v))) end
  return table.concat(parts)
end

local function send_opt(pipe, sd, nums, root)
  local g, dev = pipe.group, pipe.device
  local entries, numbers, tensors = {}, {}, {}
  for n, st in pairs(sd.state) do
    for k, v in pairs(st) do
      if lunet.is_tensor(v) then
        entries[#entries + 1] = { nums[n], k, v.dtype, v:size() }
        tensors[#tensors + 1] = v
      else numbers[#numbers + 1] = { nums[n], k, v } end
    end
  end
  local head = bytes_tensor(json.encode({ entries = entries, numbers = numbers }), dev)
  g:send(lunet.tensor({ head:numel() }, { dtype = 'float64', device = dev }), root)
  g:send(head, root)
  for _, t in ipairs(tensors) do g:send((t.device ~= dev and t:to(dev) or t):contiguous(), root) end
end

local function recv_opt(pipe, st, state)
  local g, dev = pipe.group, pipe.device
  local len = lunet.empty(1, { dtype = 'float64', device = dev })
  g:recv(len, st)
  local head = lunet.empty(len:item(), { dtype = 'uint8', device = dev })
  g:recv(head, st)
  local h = json.decode(tensor_string(head))
  for _, e in ipairs(h.numbers) do
    state[e[1]] = state[e[1]] or {}
    state[e[1]][e[2]] = e[3]
  end
  for _, e in ipairs(h.entries) do
    local t = lunet.empty(e[4], { dtype = e[3], device = dev })
    g:recv(t, st)
    state[e[1]] = state[e[1]] or {}
    state[e[1]][e[2]] = t
  end
end

-- the model's tensors of stage st sent to the root, which copies them into its own copy of the model
local function move_stage(pipe, st, first, root)
  local g, dev = pipe.group, pipe.device
  for i = first, first + pipe.counts[st] - 1 do
    local m = pipe.all_atoms[i].module
    for _, list in ipairs({ m:named_parameters(), m:named_buffers() }) do
      for _, e in ipairs(list) do
        local t = e[2]
        if pipe.s == st then g:send(t:detach():contiguous(), root)
        else
          local b = lunet.empty(t:size(), { dtype = t.dtype, device = dev })
          g:recv(b, st)
          autograd.no_grad(function() t:copy_(b) end)
        end
      end
    end
  end
end

-- M.gather(pipe, root[, opt, osd]) on every rank of the pipeline's group:
-- the model's state_dict (and, with opt, the whole optimizer state_dict) on
-- stage `root`'s rank, nil on the others. osd: opt:state_dict() if the
-- caller has it already.
function M.gather(pipe, root, opt, osd)
  local nums = opt and own_group(pipe, opt, 2)   -- (every rank checks before any message)
  if opt and not osd then osd = opt:state_dict() end
  local first, state = 1, {}
  for st = 1, pipe.S do
    if st ~= root and (pipe.s == st or pipe.s == root) then
      move_stage(pipe, st, first, root)
      if opt then
        if pipe.s == st then send_opt(pipe, osd, nums, root) else recv_opt(pipe, st, state) end
      end
    end
    first = first + pipe.counts[st]
  end
  if pipe.s ~= root then return nil end
  lunet.synchronize(pipe.device)
  local sd = pipe.module:state_dict()
  if not opt then return sd end
  for n, s in pairs(osd.state) do state[nums[n]] = s end
  local group = {}
  for k, v in pairs(osd.param_groups[1]) do group[k] = v end
  local _, P = numbering(pipe)
  group.params = {}
  for i = 1, P do group.params[i] = i end
  return sd, { state = state, param_groups = { group } }
end

-- M.stage_state(pipe, state, opt) -> a copy of the whole training state
-- `state` holding this stage's part: the model's keys of this stage (and any
-- key the whole model lacks, for the checks to name), and the optimizer
-- state of this stage's params numbered as opt numbers them. A state that
-- does not look like a whole one is returned as it is (the checks name it).
function M.stage_state(pipe, state, opt, lvl)
  if type(state) ~= 'table' then return state end
  local out = {}
  for k, v in pairs(state) do out[k] = v end
  if type(state.model) == 'table' then
    local own, whole, m = Module.state_dict(pipe), pipe.module:state_dict(), {}
    for k, v in pairs(state.model) do
      if own[k] or not whole[k] then m[k] = v end
    end
    out.model = m
  end
  local sd = state.optimizer
  if type(sd) == 'table' and type(sd.param_groups) == 'table' and #sd.param_groups == 1
      and type(sd.param_groups[1]) == 'table' and type(sd.param_groups[1].params) == 'table'
      and type(sd.state) == 'table' then
    local nums = own_group(pipe, opt, lvl + 1)
    local saved = sd.param_groups[1]
    local _, P = numbering(pipe)
    if #saved.params ~= P then
      fail(('the checkpoint\'s optimizer holds %d params, the whole model %d (a whole-model state is needed)')
        :format(#saved.params, P), lvl + 1)
    end
    local group, st = { params = {} }, {}
    for k, v in pairs(saved) do if k ~= 'params' then group[k] = v end end
    for j, n in ipairs(nums) do
      group.params[j] = j
      st[j] = sd.state[saved.params[n]]
    end
    out.optimizer = { param_groups = { group }, state = st }
  end
  return out
end

return M
