-- lunet.summary(model, input_or_shape[, {depth = 3, dtypes, device}]), in the
-- spirit of torchinfo.summary: one forward (under no_grad, in eval mode, the
-- modes restored after) with a forward hook on every module, and a printable
-- table of what ran: each call's module (its dotted name in the tree,
-- indented by depth), class, output shape, parameter count (of its subtree)
-- and whether they train; then the totals.
--   print(lunet.summary(model, {1, 3, 32, 32}))
--   local s = lunet.summary(model, x); s.rows[2].params, s.total_params
-- input_or_shape: a tensor, a list of tensors (the forward's arguments), a
-- shape ({1, 3, 32, 32}: randn of it) or a list of shapes; dtypes: one dtype
-- per shape (an integer dtype gives ones: index 1, valid for an embedding).
-- rows: {name, class, depth, output_shape (a list, a list of lists for a
-- list of tensors, or nil), params, trainable ('yes', 'no', 'partial' or
-- '--'), recursive (a module's later call: its parameters count once)},
-- those of depth <= depth, in the order the calls began (the model, depth 0,
-- first). Totals (every module, any depth; a tensor shared counts once):
-- total_params, trainable_params, param_bytes, input_bytes, activation_bytes
-- (the outputs of the calls of modules without children).
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local factory = require 'lunet.factory'
local autograd = require 'lunet.autograd'
local options = require 'lunet.options'
local is_tensor, is_table, typename = T.is_tensor, core.is_table, core.typename
local fail = options.fail

local FN = 'summary'
local OPTS = { depth = 'number', dtypes = 'table', device = true }

local Summary = {}
Summary.__index = Summary
Summary.__name = 'lunet.Summary'

local function count(params)
  local n, trainable, bytes = 0, 0, 0
  for _, p in ipairs(params) do
    n = n + p:numel()
    bytes = bytes + p:numel() * p:element_size()
    if p.requires_grad then trainable = trainable + p:numel() end
  end
  return n, trainable, bytes
end

local function shape_of(out)
  if is_tensor(out) then return out:size() end
  if is_table(out) and out[1] ~= nil then
    local s = {}
    for i, o in ipairs(out) do s[i] = shape_of(o) or {} end
    return s
  end
end

local function bytes_of(out)
  if is_tensor(out) then return out:numel() * out:element_size() end
  local b = 0
  if is_table(out) then for _, o in ipairs(out) do b = b + bytes_of(o) end end
  return b
end

-- the forward's arguments from a tensor, tensors, a shape or shapes
local function inputs_of(x, o)
  if is_tensor(x) then return { x } end
  if not is_table(x) or x[1] == nil then fail(FN, 'input must be a tensor, a list of tensors, a shape or a list of shapes, got ' .. typename(x)) end
  if is_tensor(x[1]) then return x end
  local shapes = type(x[1]) == 'number' and { x } or x
  local out = {}
  for i, s in ipairs(shapes) do
    if not is_table(s) then fail(FN, ('input %d must be a shape (a list of sizes), got %s'):format(i, typename(s))) end
    local dt = o.dtypes and o.dtypes[i]
    local opts = { dtype = dt, device = o.device }
    local ok, t = pcall(factory.empty, s, opts)
    if not ok then fail(FN, ('input %d: %s'):format(i, tostring(t):gsub('^[^:\n]*:%d+: ', ''))) end
    if t:is_floating_point() then t:normal_() else t:fill_(1) end
    out[i] = t
  end
  return out
end

local function summary(model, input, opts)
  if not (is_table(model) and rawget(model, '_params')) then fail(FN, 'model must be an nn.Module, got ' .. typename(model)) end
  local o = options.check(FN, opts, OPTS) or {}
  local depth = o.depth or 3
  if depth % 1 ~= 0 or depth < 0 then fail(FN, 'depth must be an integer >= 0, got ' .. tostring(depth)) end
  local args = inputs_of(input, o)
  -- each module's names in the tree (a module held twice has two) and depth
  local names, mods = {}, {}
  for _, e in ipairs(model:named_modules({ remove_duplicate = false })) do
    local m = e[2]
    if not names[m] then names[m] = {}; mods[#mods + 1] = m end
    table.insert(names[m], e[1])
  end
  local rows, calls, open, activation, handles, modes = {}, {}, {}, 0, {}, {}
  for _, m in ipairs(mods) do
    modes[m] = m.training
    handles[#handles + 1] = m:register_forward_pre_hook(function(mod)
      local k = (calls[mod] or 0) + 1
      calls[mod] = k
      local ns = names[mod]
      local name = ns[math.min(k, #ns)]
      local d = name == '' and 0 or select(2, name:gsub('%.', '')) + 1
      local n, tr = count(mod:parameters())
      local row = { name = name, class = mod.__name, depth = d, params = n, recursive = k > 1 or nil,
        trainable = n == 0 and '--' or tr == n and 'yes' or tr == 0 and 'no' or 'partial' }
      rows[#rows + 1] = row
      local st = open[mod] or {}
      st[#st + 1], open[mod] = row, st
    end)
    handles[#handles + 1] = m:register_forward_hook(function(mod, _, out)
      -- (the row this call began: the last one of this module still open)
      local st = open[mod]
      st[#st].output_shape = shape_of(out)
      st[#st] = nil
      if #mod._children == 0 then activation = activation + bytes_of(out) end
    end)
  end
  model:eval()
  local ok, err = pcall(autograd.no_grad, function() return model(unpack(args)) end)
  for _, h in ipairs(handles) do h:remove() end
  for m, t in pairs(modes) do m.training = t end
  if not ok then fail(FN, 'the forward failed: ' .. tostring(err):gsub('^[^:\n]*:%d+: ', '')) end
  local s = setmetatable({ rows = {}, model = model.__name }, Summary)
  for _, r in ipairs(rows) do
    if r.depth <= depth then s.rows[#s.rows + 1] = r end
  end
  s.total_params, s.trainable_params, s.param_bytes = count(model:parameters())
  s.input_bytes, s.activation_bytes = bytes_of(args), activation
  return s
end

local function group(n) return tostring(n):reverse():gsub('(%d%d%d)', '%1,'):reverse():gsub('^,', '') end
local function shape_str(s)
  if s == nil then return '--' end
  if type(s[1]) == 'table' then
    local p = {}
    for i, x in ipairs(s) do p[i] = shape_str(x) end
    return table.concat(p, ' ')
  end
  return '{' .. table.concat(s, ',') .. '}'
end

function Summary.__tostring(s)
  local cells = { { 'Layer (name: class)', 'Output shape', 'Param #', 'Trainable' } }
  for _, r in ipairs(s.rows) do
    local label = r.depth == 0 and r.class or (r.name .. ': ' .. r.class)
    cells[#cells + 1] = { ('  '):rep(r.depth) .. label, shape_str(r.output_shape),
      r.recursive and '(recursive)' or group(r.params), r.trainable }
  end
  local w = { 0, 0, 0, 0 }
  for _, c in ipairs(cells) do for i = 1, 4 do w[i] = math.max(w[i], #c[i]) end end
  local lines, width = {}, w[1] + w[2] + w[3] + w[4] + 6
  for j, c in ipairs(cells) do
    lines[#lines + 1] = ('%-' .. w[1] .. 's  %-' .. w[2] .. 's  %' .. w[3] .. 's  %s'):format(c[1], c[2], c[3], c[4])
    if j == 1 then lines[#lines + 1] = ('='):rep(width) end
  end
  local function mb(b)
    if b < 1024 then return b .. ' B' end
    if b < 2 ^ 20 then return ('%.2f KB'):format(b / 1024) end
    return ('%.2f MB'):format(b / 2 ^ 20)
  end
  lines[#lines + 1] = ('='):rep(width)
  lines[#lines + 1] = 'Total params: ' .. group(s.total_params)
  lines[#lines + 1] = 'Trainable params: ' .. group(s.trainable_params)
  lines[#lines + 1] = 'Non-trainable params: ' .. group(s.total_params - s.trainable_params)
  lines[#lines + 1] = ('Input size: %s'):format(mb(s.input_bytes))
  lines[#lines + 1] = ('Forward activations size: %s'):format(mb(s.activation_bytes))
  lines[#lines + 1] = ('Params size: %s'):format(mb(s.param_bytes))
  lines[#lines + 1] = ('Estimated total size: %s'):format(mb(s.input_bytes + s.activation_bytes + s.param_bytes))
  return table.concat(lines, '\n')
end

return { summary = summary, Summary = Summary }
