-- lunet.trainer_state.check(trainer, state, loader, where): is `state` (a
-- Trainer:state_dict(), typically from a checkpoint) one this trainer can
-- resume from? Checked before anything is restored, so a checkpoint whose
-- crc32 is valid but whose state has the wrong types or shapes (written by
-- another model or optimizer, or edited) fails at resume, naming the entry
-- ("optimizer.state.2.exp_avg has shape {3,4}, the param {4,3}"), instead of
-- an epoch later inside a step.
local lunet = require 'lunet'
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)

local M = {}
local is_tensor = lunet.is_tensor

local function shape_str(t) return '{' .. table.concat(t:size(), ',') .. '}' end
local function is_int(v) return type(v) == 'number' and v == v and v % 1 == 0 end
local function kind(v) return is_tensor(v) and 'a tensor' or ('a ' .. type(v)) end

-- optimizer state tensors by name, and those a step needs once `step` is set
local tensor_keys = { momentum_buffer = true, exp_avg = true, exp_avg_sq = true, max_exp_avg_sq = true,
                      square_avg = true, grad_avg = true }
local needs = { Adam = { 'exp_avg', 'exp_avg_sq' }, AdamW = { 'exp_avg', 'exp_avg_sq' }, RMSprop = { 'square_avg' } }

-- every mismatch at once, in Module:load_state_dict's words (which would
-- refuse the same, but after the checks that run before it)
local function check_model(bad, model, sd)
  if not is_table(sd) then return bad('model', 'is ' .. kind(sd) .. ', expected a table of tensors') end
  local own = model:state_dict()
  local missing, unexpected, shapes, types = {}, {}, {}, {}
  for k, t in pairs(own) do
    local v = sd[k]
    if v == nil then missing[#missing + 1] = k
    elseif not is_tensor(v) then types[#types + 1] = ('%s is %s'):format(k, kind(v))
    elseif shape_str(v) ~= shape_str(t) then
      shapes[#shapes + 1] = ('%s: checkpoint has shape %s, model has %s'):format(k, shape_str(v), shape_str(t))
    end
  end
  for k in pairs(sd) do if own[k] == nil then unexpected[#unexpected + 1] = tostring(k) end end
  local msgs = {}
  for _, l in ipairs({ { 'missing keys: ', missing, ', ' }, { 'unexpected keys: ', unexpected, ', ' },
                       { 'size mismatch: ', shapes, '; ' }, { 'not tensors: ', types, '; ' } }) do
    table.sort(l[2])
    if #l[2] > 0 then msgs[#msgs + 1] = l[1] .. table.concat(l[2], l[3]) end
  end
  if #msgs > 0 then bad('model:', 'load_state_dict: ' .. table.concat(msgs, '; ')) end
end

-- a saved value must have the type of this trainer's (a list: its entries
-- that of the live list's first, whatever their number)
local function same_type(bad, name, v, live)
  if type(v) ~= type(live) then return bad(name, ('is %s, expected %s'):format(kind(v), kind(live))) end
  if is_table(live) and live[1] ~= nil then
    for i, x in ipairs(v) do same_type(bad, ('%s.%d'):format(name, i), x, live[1]) end
  end
end

local function check_optimizer(bad, opt, sd)
  if not is_table(sd) then return bad('optimizer', 'is ' .. kind(sd) .. ', expected a table') end
  if not is_table(sd.param_groups) then bad('optimizer.param_groups', 'is ' .. kind(sd.param_groups) .. ', expected a list') end
  if not is_table(sd.state) then bad('optimizer.state', 'is ' .. kind(sd.state) .. ', expected a table') end
  if #sd.param_groups ~= #opt.param_groups then
    bad('optimizer.param_groups', ('has %d groups, the optimizer %d'):format(#sd.param_groups, #opt.param_groups))
  end
  local params = {}   -- saved number -> this optimizer's param
  for gi, group in ipairs(opt.param_groups) do
    local g, name = sd.param_groups[gi], 'optimizer.param_groups.' .. gi
    if not is_table(g) then bad(name, 'is ' .. kind(g) .. ', expected a table') end
    if not is_table(g.params) or #g.params ~= #group.params then
      bad(name .. '.params', ('has %s params, the optimizer %d'):format(
        is_table(g.params) and #g.params or kind(g.params), #group.params))
    end
    local merged = {}
    for k, v in pairs(group) do merged[k] = v end
    for k, v in pairs(g) do
      if k ~= 'params' then
        if group[k] ~= nil then same_type(bad, name .. '.' .. tostring(k), v, group[k]) end
        merged[k] = v
      end
    end
    local ok, err = true, nil
    if opt.check then ok, err = pcall(opt.check, opt, name, merged) end   -- the optimizer's own option checks
    if not ok then bad(name .. ':', (tostring(err):gsub('^[^:\n]*:%d+: ', ''):gsub('^' .. name:gsub('%p', '%%%0') .. ': ', ''))) end
    for j, p in ipairs(group.params) do
      local n = g.params[j]
      if not is_int(n) or params[n] then bad(('%s.params.%d'):format(name, j), 'is not a distinct param number') end
      params[n] = p
    end
  end
  for n, st in pairs(sd.state) do
    local name = 'optimizer.state.' .. tostring(n)
    local p = params[n]
    if p == nil then bad(name, 'belongs to no param of the optimizer') end
    if not is_table(st) then bad(name, 'is ' .. kind(st) .. ', expected a table') end
    for k, v in pairs(st) do
      local e = name .. '.' .. tostring(k)
      if is_tensor(v) then
        if shape_str(v) ~= shape_str(p) then bad(e, ('has shape %s, the param %s'):format(shape_str(v), shape_str(p))) end
        if v.dtype ~= 'float32' and v.dtype ~= 'float64' then bad(e, 'is ' .. v.dtype .. ', expected float32 or float64') end
      elseif tensor_keys[k] then bad(e, 'is ' .. kind(v) .. ', expected a tensor')
      elseif k == 'step' then
        if not is_int(v) or v < 0 then bad(e, ('is %s, expected a non-negative integer'):format(tostring(v))) end
      elseif type(v) ~= 'number' and type(v) ~= 'boolean' then bad(e, 'is ' .. kind(v) .. ', expected a tensor or a number')
      end
    end
    if st.step ~= nil then
      for _, k in ipairs(needs[opt.name] or {}) do
        if st[k] == nil then bad(name .. '.' .. k, 'is missing (the state has a step)') end
      end
    end
  end
end

local function check_value(bad, name, v, live)
  if live == nil then return end
  if v == nil then return bad(name, 'is missing') end
  same_type(bad, name, v, live)
end

-- state.loader as DataLoader:load_state_dict takes it
local function check_loader(bad, loader, st)
  if not is_table(st) then return bad('loader', 'is ' .. kind(st) .. ', expected a table') end
  if loader.convert_state and is_int(st.position) then   -- (taken with another number of ranks)
    local ok, c = pcall(loader.convert_state, loader, st)
    if not ok then bad('loader', (tostring(c):gsub('^[^:\n]*:%d+: ', ''))) end
    st = c
  end
  for _, k in ipairs({ 'epoch', 'position', 'seed' }) do
    if not is_int(st[k]) or st[k] < 0 then bad('loader.' .. k, ('is %s, expected a non-negative integer'):format(tostring(st[k]))) end
  end
  if st.batch_size ~= nil and st.batch_size ~= loader.batch_size then
    bad('loader.batch_size', ('is %s, the loader has %s'):format(tostring(st.batch_size), tostring(loader.batch_size)))
  end
  if st.num_samples ~= nil and st.num_samples ~= loader.n then
    bad('loader.num_samples', ('is %s, the loader has %s'):format(tostring(st.num_samples), tostring(loader.n)))
  end
  if st.position > #loader then
    bad('loader.position', ('is %d, past the %d batches of an epoch'):format(st.position, #loader))
  end
end

function M.check(trainer, state, loader, where)
  local function bad(entry, msg) error(('%s: %s %s'):format(where, entry, msg), 0) end
  if not is_table(state) then
    bad('the state', 'is ' .. kind(state) .. ', expected a table from Trainer:state_dict() (model, optimizer, rng, ...)')
  end
  check_model(bad, trainer.model, state.model)
  for _, k in ipairs({ 'epoch', 'step' }) do
    local v = state[k]
    if not is_int(v) or v < 0 then bad(k, ('is %s, expected a non-negative integer'):format(v == nil and 'missing' or tostring(v))) end
  end
  check_optimizer(bad, trainer.optimizer, state.optimizer)
  if not is_table(state.rng) then bad('rng', 'is ' .. kind(state.rng) .. ', expected {seed =, offset =}') end
  for _, k in ipairs({ 'seed', 'offset' }) do
    local v = state.rng[k]
    if not is_int(v) or v < 0 or v >= 2 ^ 64 then bad('rng.' .. k, ('is %s, expected a non-negative integer'):format(tostring(v))) end
  end
  if trainer.scheduler and state.scheduler ~= nil then
    local live = trainer.scheduler:state_dict()
    if not is_table(state.scheduler) then bad('scheduler', 'is ' .. kind(state.scheduler) .. ', expected a table') end
    for k, v in pairs(live) do check_value(bad, 'scheduler.' .. tostring(k), state.scheduler[k], v) end
    if state.scheduler.name ~= live.name then
      bad('scheduler.name', ('is %s, the scheduler is %s'):format(tostring(state.scheduler.name), tostring(live.name)))
    end
  end
  if loader and state.loader ~= nil and loader.load_state_dict then check_loader(bad, loader, state.loader) end
  if state.history ~= nil and not is_table(state.history) then bad('history', 'is ' .. kind(state.history) .. ', expected a list') end
  for i, rec in ipairs(state.history or {}) do
    if not is_table(rec) then bad('history.' .. i, 'is ' .. kind(rec) .. ', expected a table') end
  end
  if state.running ~= nil then
    if not is_table(state.running) then bad('running', 'is ' .. kind(state.running) .. ', expected a table') end
    for _, k in ipairs({ 'loss', 'correct', 'topk', 'seen', 'steps' }) do
      local v = state.running[k]
      if type(v) ~= 'number' then bad('running.' .. k, 'is ' .. kind(v) .. ', expected a number') end
    end
  end
end

return M
