-- The whole training state of a Pipeline across processes
-- (DistributedPipeline.lua), for lunet.fit's checkpoints: every stage's
-- parameters, buffers and optimizer state gathered on one rank (gather), and
-- a whole state cut back to one stage's (stage_state).
--
-- The whole state is the one a single process training the unwrapped model
-- would save: model = the model's state_dict; optimizer = the state_dict of
-- an optimizer over the model's parameters, each param group holding its
-- stages' groups' parameters in the model's order (model:parameters()), so
-- that with one group the optimizer is one built over model:parameters().
-- So a checkpoint written by a pipeline resumes in one process, over another
-- stage count, and the other way round. The parameters are matched by
-- identity, and optimizer.model_params lists each group's (their numbers in
-- model:parameters()): every stage's optimizer must have as many groups (the
-- k-th of each makes the whole one's k-th), and the groups' hyper-parameters
-- are the gathering rank's (every rank builds the same optimizer).
-- Optimizer state goes as a small JSON header (the entries' names, dtypes
-- and shapes, and the numbers such as Adam's step) then each tensor, over
-- the pipeline's send/recv.
local lunet = require 'lunet'
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename   -- (tensors are tables)
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

-- this stage's optimizer: each of its params' model-wide number (by the
-- optimizer's numbering: its groups' params in order), and each group's list of them
local function own_groups(pipe, opt, lvl)
  if not is_table(opt) or not is_table(opt.param_groups) or not opt.state_dict then
    fail('the optimizer must be a lunet.optim optimizer, got ' .. typename(opt), lvl + 1)
  end
  local index = numbering(pipe)
  local nums, groups = {}, {}
  for gi, group in ipairs(opt.param_groups) do
    groups[gi] = {}
    for j, p in ipairs(group.params) do
      local g = index[p]
      if not g then fail(('the optimizer\'s param %d of group %d is not a parameter of the model'):format(j, gi), lvl + 1) end
      nums[#nums + 1], groups[gi][j] = g, g
    end
  end
  return nums, groups
end

-- a string as a uint8 tensor on dev, and back
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

-- a stage's optimizer state (sd: its state_dict) sent to the root by
-- model-wide numbers (nums: by sd's), with its groups' lists of them
local function send_opt(pipe, sd, nums, groups, root)
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
  local head = bytes_tensor(json.encode({ entries = entries, numbers = numbers, groups = groups }), dev)
  g:send(lunet.tensor({ head:numel() }, { dtype = 'float64', device = dev }), root)
  g:send(head, root)
  for _, t in ipairs(tensors) do g:send((t.device ~= dev and t:to(dev) or t):contiguous(), root) end
end

-- (the root) stage st's: into state (model-wide number -> state); returns its groups
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
  return h.groups
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
  local nums, groups
  if opt then nums, groups = own_groups(pipe, opt, 2) end   -- (every rank checks before any message)
  if opt and not osd then osd = opt:state_dict() end
  local first, state, members = 1, {}, {}   -- (state and members by model-wide numbers)
  local function add(gs, st)
    if #gs ~= #groups then
      fail(('stage %d\'s optimizer has %d param groups, stage %d\'s %d: a whole-model checkpoint needs as many on '
        .. 'every stage'):format(st, #gs, root, #groups), 3)
    end
    for gi, list in ipairs(gs) do
      members[gi] = members[gi] or {}
      for _, g in ipairs(list) do table.insert(members[gi], g) end
    end
  end
  for st = 1, pipe.S do
    if st ~= root and (pipe.s == st or pipe.s == root) then
      move_stage(pipe, st, first, root)
      if opt then
        if pipe.s == st then send_opt(pipe, osd, nums, groups, root) else add(recv_opt(pipe, st, state), st) end
      end
    end
    first = first + pipe.counts[st]
  end
  if pipe.s ~= root then return nil end
  lunet.synchronize(pipe.device)
  local sd = pipe.module:state_dict()
  if not opt then return sd end
  for n, s in pairs(osd.state) do state[nums[n]] = s end
  add(groups, root)
  local out, pgroups, n = {}, {}, 0
  for gi, list in ipairs(members) do
    table.sort(list)
    local g = { params = {} }
    for k, v in pairs(osd.param_groups[gi]) do if k ~= 'params' then g[k] = v end end
    for j, m in ipairs(list) do
      n = n + 1
      g.params[j], out[n] = n, state[m]
    end
    pgroups[gi] = g
  end
  return sd, { state = out, param_groups = pgroups, model_params = members }
end

-- M.stage_state(pipe, state, opt) -> a copy of the whole training state
-- `state` holding this stage's part: the model's keys of this stage (and any
-- key the whole model lacks, for the checks to name), and the optimizer
-- state of this stage's params numbered as opt numbers them. A state that
-- does not look like a whole one is returned as it is (the checks name it).
function M.stage_state(pipe, state, opt, lvl)
  if not is_table(state) then return state end
  local out = {}
  for k, v in pairs(state) do out[k] = v end
  if is_table(state.model) then
    local own, whole, m = Module.state_dict(pipe), pipe.module:state_dict(), {}
    for k, v in pairs(state.model) do
      if own[k] or not whole[k] then m[k] = v end
    end
    out.model = m
  end
  local sd = state.optimizer
  if is_table(sd) and is_table(sd.param_groups) and is_table(sd.state)
      and is_table(opt) and is_table(opt.param_groups) and #sd.param_groups == #opt.param_groups then
    out.optimizer = M.stage_optimizer(pipe, sd, opt, lvl + 1)
  end
  return out
end

-- the saved whole optimizer state sd (groups as many as opt's, else left to
-- the checks) cut to opt's params
function M.stage_optimizer(pipe, sd, opt, lvl)
  local nums = own_groups(pipe, opt, lvl + 1)
  local _, P = numbering(pipe)
  local where = {}   -- model-wide number -> sd's number
  local mp = sd.model_params
  if is_table(mp) then
    for gi, list in ipairs(mp) do
      local saved = sd.param_groups[gi]
      if not is_table(list) or not is_table(saved) or not is_table(saved.params) or #list ~= #saved.params then
        fail(('the checkpoint\'s optimizer.model_params.%d does not list its group\'s params'):format(gi), lvl + 1)
      end
      for j, g in ipairs(list) do where[g] = saved.params[j] end
    end
  elseif #sd.param_groups == 1 then   -- (one process's optimizer over model:parameters())
    local saved = sd.param_groups[1]
    if not is_table(saved) or not is_table(saved.params) then return sd end
    if #saved.params ~= P then
      fail(('the checkpoint\'s optimizer holds %d params, the whole model %d (a whole-model state is needed)')
        :format(#saved.params, P), lvl + 1)
    end
    for j, n in ipairs(saved.params) do where[j] = n end
  else
    fail(('the checkpoint\'s optimizer has %d param groups but no model_params saying which of the model\'s '
      .. 'parameters they hold (a checkpoint written by one process)'):format(#sd.param_groups), lvl + 1)
  end
  local groups, st, k = {}, {}, 0
  for gi, group in ipairs(opt.param_groups) do
    if not is_table(sd.param_groups[gi]) then return sd end
    local g = { params = {} }
    for key, v in pairs(sd.param_groups[gi]) do if key ~= 'params' then g[key] = v end end
    for j = 1, #group.params do
      k = k + 1
      local n = where[nums[k]]
      if n == nil then
        fail(('the checkpoint\'s optimizer has no place for the model\'s parameter %d (group %d here)'):format(nums[k], gi),
          lvl + 1)
      end
      g.params[j], st[k] = k, sd.state[n]
    end
    groups[gi] = g
  end
  return { param_groups = groups, state = st }
end

return M
