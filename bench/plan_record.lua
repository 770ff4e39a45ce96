-- bench/plan_record.lua: the planner grid's scenarios written down
-- (bench/pipeline.lua --save FILE) and scored again under the cost model
-- as it is now (tools/replay_plan.lua): a change to the cost model compared
-- with the one before on the same profiles and the same measured steps,
-- where two grids differ by their measurements' noise as much as by the change.
--
--   record.dump(scenarios) -> Lua source ('return {...}')
--   record.load(path) -> scenarios
--   record.replay(scenario) -> {rows = {label, measured, apart, model, calibrated}, choice, fastest}
local record = {}

-- a value as Lua source: numbers exact, tables nested, keys in order
local function dump(v, out)
  local t = type(v)
  if t == 'number' then
    if v ~= v then out[#out + 1] = '0/0'
    elseif v == math.huge then out[#out + 1] = 'math.huge'
    elseif v == -math.huge then out[#out + 1] = '-math.huge'
    else out[#out + 1] = ('%.17g'):format(v) end
  elseif t == 'string' then out[#out + 1] = ('%q'):format(v)
  elseif t == 'boolean' then out[#out + 1] = tostring(v)
  elseif t == 'table' then
    out[#out + 1] = '{'
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b)
      if type(a) == type(b) then return a < b end
      return type(a) == 'number'
    end)
    for _, k in ipairs(keys) do
      out[#out + 1] = type(k) == 'number' and ('[%.17g]='):format(k) or ('[%q]='):format(k)
      dump(v[k], out)
      out[#out + 1] = ','
    end
    out[#out + 1] = '}'
  else
    error('plan_record.dump: cannot write a ' .. t)
  end
end

function record.dump(scenarios)
  local out = { 'return ' }
  dump(scenarios, out)
  return table.concat(out) .. '\n'
end

function record.load(path)
  local f = assert(loadfile(path))
  setfenv(f, { math = math })
  return f()
end

-- the scenario's plan rebuilt from its stated inputs (no profiling, no
-- trials) on the devices as they are now (lunet.set_cpu_devices(n) first):
-- its candidates by label with the cost model's figures, then calibrated by
-- the trials the recorded plan ran (their measured steps, on the candidates
-- of the same labels; parallel.trial.calibrate)
function record.replay(sc)
  local lunet = require 'lunet'
  local devices = {}
  for d = 1, sc.devices do devices[d] = 'cpu:' .. (d - 1) end
  local p = lunet.parallel.plan(nil, nil, { devices = devices, batch = sc.batch, profile = sc.profile, link = sc.link,
    together = sc.together, gc = sc.gc, memory = sc.memory > 0 and sc.memory or nil, kinds = sc.kinds })
  local by_label = {}
  for _, c in ipairs(p.candidates) do by_label[c.label] = c end
  local model_choice = p.chosen
  for _, rc in ipairs(sc.candidates) do
    local c = by_label[rc.label]
    if c and rc.trial then c.measured, c.calibrates = rc.trial, rc.calibrates end
  end
  lunet.parallel.trial.calibrate(p)
  local rows, fastest, best = {}, nil, math.huge
  for _, rc in ipairs(sc.candidates) do
    local c = by_label[rc.label]
    if c and rc.measured then
      local ps, apart = rc.passes, nil
      if ps and #ps >= 2 then apart = math.max(unpack(ps)) / math.min(unpack(ps)) - 1 end
      rows[#rows + 1] = { label = rc.label, measured = rc.measured, apart = apart, model = c.model_step, calibrated = c.step }
      if rc.measured < best then best, fastest = rc.measured, rc.label end
    end
  end
  return { rows = rows, choice = model_choice.label, fastest = fastest, best = best }
end

return record
