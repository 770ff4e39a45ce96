-- The planner's grid scored again under the cost model as it is now, on
-- the profiles, trials and measured steps bench/pipeline.lua --save wrote:
--   luajit tools/replay_plan.lua FILE [FILE ...] [--rows]
-- (from the repository's root: the cost model is ./lua's)
-- Per file: the candidates whose prediction (the cost model's own; after
-- the recorded trials' calibration) is within 15% of the measured step,
-- among all and among those whose passes agree within 15%, and the cost
-- model's own choice against the measured fastest.
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
local lunet = require 'lunet'
-- (this tree's record module, whichever tree's lua/ the command runs in:
-- `cd other && luajit /this/tools/replay_plan.lua FILE` scores other's cost model)
local record = dofile((arg[0]:gsub('tools/replay_plan%.lua$', '')) .. 'bench/plan_record.lua')

local files, show_rows = {}, false
for _, a in ipairs(arg) do
  if a == '--rows' then show_rows = true else files[#files + 1] = a end
end
if #files == 0 then
  io.stderr:write('usage: luajit tools/replay_plan.lua FILE [FILE ...] [--rows]\n')
  os.exit(2)
end

for _, path in ipairs(files) do
  local n, model_in, cal_in, steady, steady_in, picks, near, sc_count = 0, 0, 0, 0, 0, 0, 0, 0
  local current
  for _, sc in ipairs(record.load(path)) do
    if sc.devices ~= current then lunet.set_cpu_devices(sc.devices); current = sc.devices end
    local r = record.replay(sc)
    sc_count = sc_count + 1
    if r.choice == r.fastest then picks = picks + 1 end
    for _, row in ipairs(r.rows) do
      if row.label == r.choice and row.measured <= 1.05 * r.best then near = near + 1 end
      local em, ec = row.model / row.measured - 1, row.calibrated / row.measured - 1
      n = n + 1
      if math.abs(em) <= 0.15 then model_in = model_in + 1 end
      if math.abs(ec) <= 0.15 then cal_in = cal_in + 1 end
      if row.apart and row.apart <= 0.15 then
        steady = steady + 1
        if math.abs(ec) <= 0.15 then steady_in = steady_in + 1 end
      end
      if show_rows then
        print(('%-8s %d %-6s %-44s meas %8.2f  model %+5.0f%%  calibrated %+5.0f%%'):format(sc.model, sc.devices, sc.limit,
          row.label, row.measured * 1e3, em * 100, ec * 100))
      end
    end
  end
  print(('%s: %d of %d within 15%% after the recorded trials\' calibration (the cost model alone: %d); of the %d whose passes agree: %d; '
    .. 'the cost model\'s own choice the measured fastest in %d of %d scenarios (within 5%%: %d)')
    :format(path, cal_in, n, model_in, steady, steady_in, picks, sc_count, near))
end
