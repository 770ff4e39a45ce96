-- lunet.parallel.schedule: pipeline schedules as tables of (stage,
-- micro-batch, F|B|W) per step, built for GPipe, 1F1B, interleaved 1F1B and zero-bubble and checked for
-- completeness and deadlock before they run.
local schedule = require 'lunet.parallel.schedule'

local function find(steps, s, m, k)
  for t, step in ipairs(steps) do
    for _, a in ipairs(step) do if a[1] == s and a[2] == m and a[3] == k then return t end end
  end
end

-- every action once, each after what it needs
local function complete(steps, S, M)
  local n = 0
  for _, step in ipairs(steps) do n = n + #step end
  assert.equal(2 * S * M, n)
  for s = 1, S do
    for m = 1, M do
      local f, b = find(steps, s, m, 'F'), find(steps, s, m, 'B')
      assert.truthy(f and b and f < b)
      if s > 1 then assert.truthy(find(steps, s - 1, m, 'F') < f) end
      if s < S then assert.truthy(find(steps, s + 1, m, 'B') < b) end
    end
  end
end

describe('parallel.schedule', function()
  it('builds GPipe and 1F1B for any stages and chunks, every action once, after what it needs', function()
    for _, kind in ipairs({ 'gpipe', '1f1b' }) do
      for S = 1, 4 do
        for M = 1, 8 do
          local steps = schedule.build(kind, S, M)
          complete(steps, S, M)
          -- GPipe and 1F1B take as many steps: 2 (M + S - 1)
          assert.equal(2 * (M + S - 1), #steps)
        end
      end
    end
  end)

  -- (interleaved: stage s on device (s - 1) % P + 1, each action 1 / V of a device's share of a micro-batch)
  it('builds interleaved 1F1B for 2-4 devices of 2-3 stages, any chunks: each device one action a step, a smaller bubble',
    function()
    for P = 2, 4 do
      for V = 2, 3 do
        local S = P * V
        for M = 1, 9 do
          local steps = schedule.build('interleaved', S, M, P)
          for t, step in ipairs(steps) do
            local busy = {}
            for _, a in ipairs(step) do
              local d = (a[1] - 1) % P + 1
              assert.is_nil(busy[d], ('P=%d V=%d M=%d: device %d runs two actions at step %d'):format(P, V, M, d, t))
              busy[d] = true
            end
          end
          complete(steps, S, M)
          -- Megatron-LM's bubble, 2 (P - 1) steps of 1 / V, from P micro-batches on
          if M >= P then assert.equal(2 * M * V + 2 * (P - 1), #steps) end
          -- in a device's time, shorter than 1F1B's 2 (M + P - 1) from 2 micro-batches on
          if M >= 2 then assert.is_true(#steps / V < 2 * (M + P - 1), ('P=%d V=%d M=%d'):format(P, V, M)) end
        end
      end
    end
    assert.error_matches(function() schedule.build('interleaved', 4, 2, 3) end, 'multiple >= 2 of devices')
    assert.error_matches(function() schedule.build('interleaved', 2, 2, 2) end, 'multiple >= 2 of devices')
    assert.error_matches(function() schedule.build('interleaved', 4, 2) end, 'multiple >= 2 of devices')
  end)

  -- (zero-bubble: each backward split into B, the input's gradient, and W, the weights')
  it('builds zero-bubble ZB-H1: every F, B and W once, after what it needs, at most `stages` in flight, a smaller bubble',
    function()
    for S = 1, 4 do
      for M = 1, 8 do
        local steps = schedule.build('zb', S, M)
        local n, held, most = 0, {}, {}
        for s = 1, S do held[s], most[s] = 0, 0 end
        for _, step in ipairs(steps) do
          n = n + #step
          for _, a in ipairs(step) do
            if a[3] == 'F' then held[a[1]] = held[a[1]] + 1 elseif a[3] == 'W' then held[a[1]] = held[a[1]] - 1 end
            most[a[1]] = math.max(most[a[1]], held[a[1]])
          end
        end
        assert.equal(3 * S * M, n)
        for s = 1, S do
          assert.is_true(most[s] <= S, ('S=%d M=%d: stage %d holds %d'):format(S, M, s, most[s]))
          for m = 1, M do
            local f, b, w = find(steps, s, m, 'F'), find(steps, s, m, 'B'), find(steps, s, m, 'W')
            assert.truthy(f and b and w and f < b and b < w)
            if s > 1 then assert.truthy(find(steps, s - 1, m, 'F') < f) end
            if s < S then assert.truthy(find(steps, s + 1, m, 'B') < b) end
          end
        end
        -- with F, B and W alike, 1F1B's step takes 3 (M + S - 1) of them (its backward is B and W)
        if S > 1 then assert.is_true(#steps < 3 * (M + S - 1), ('S=%d M=%d: %d steps'):format(S, M, #steps)) end
        -- two stages: a bubble of one action (F + B - W), a third of 1F1B's, for even chunks (two for odd)
        if S == 2 and M >= 2 then assert.equal(3 * M + 1 + M % 2, #steps) end
      end
    end
    assert.is_true(schedule.split(schedule.build('zb', 2, 2)))
    assert.is_false(schedule.split(schedule.build('1f1b', 2, 2)))
  end)

  it('frees a zero-bubble stage buffer after W, and checks W actions', function()
    local steps = schedule.build('zb', 2, 4)
    local slot, nslots = schedule.slots(steps, 2, 4)
    -- (a buffer is held from the micro-batch's input to its W: never two at once)
    for s = 1, 2 do
      local owner = {}
      for _, step in ipairs(steps) do
        for _, a in ipairs(step) do
          if a[3] == 'F' and a[1] < 2 then
            local k = slot[a[1] + 1][a[2]]
            assert.is_nil(owner[k], 'buffer taken twice')
            owner[k] = a[2]
          elseif a[3] == 'W' and a[1] == 2 then owner[slot[2][a[2]]] = nil end
        end
      end
    end
    assert.equal(2, nslots[1])
    -- W before its B; a W for some micro-batches only
    assert.error_matches(function()
      schedule.check({ { { 1, 1, 'F' } }, { { 1, 1, 'W' } }, { { 1, 1, 'B' } } }, 1, 1)
    end, 'deadlock: W%(stage 1, micro%-batch 1%) at step 2 needs B%(stage 1, micro%-batch 1%), which runs at step 3')
    assert.error_matches(function()
      schedule.check({ { { 1, 1, 'F' } }, { { 1, 1, 'B' } }, { { 1, 2, 'F' } }, { { 1, 2, 'B' } }, { { 1, 1, 'W' } } }, 1, 2)
    end, 'W%(stage 1, micro%-batch 2%) never runs')
    assert.error_matches(function() schedule.check({ { { 1, 1, 'X' } } }, 1, 1) end, "'F' | 'B' | 'W'")
  end)

  -- (a stage's input buffer is taken when the previous stage sends: one more than it holds activations for)
  it("keeps at most stages - s + 1 micro-batches in flight at stage s with 1F1B, all of them with GPipe", function()
    local S, M = 4, 8
    for _, kind in ipairs({ 'gpipe', '1f1b' }) do
      local steps = schedule.build(kind, S, M)
      local _, nslots = schedule.slots(steps, S, M)
      for s = 1, S do
        if kind == 'gpipe' then assert.equal(M, nslots[s]) else assert.equal(S - s + 1 + (s > 1 and 1 or 0), nslots[s]) end
      end
    end
  end)

  -- spare buffers (what Pipeline uses): no buffer is taken while a micro-batch
  -- holds it, and the one taken was freed at least `spare` backwards before
  it('with spare buffers, never gives a held buffer and reuses the one freed longest ago', function()
    for _, kind in ipairs({ 'gpipe', '1f1b' }) do
      for _, SM in ipairs({ { 2, 8 }, { 3, 5 }, { 4, 8 }, { 2, 1 }, { 4, 2 } }) do
        local S, M = SM[1], SM[2]
        local steps = schedule.build(kind, S, M)
        local _, base = schedule.slots(steps, S, M)
        for _, spare in ipairs({ 1, 2 }) do
          local slot, nslots = schedule.slots(steps, S, M, spare)
          local holder, freed_at, frees = {}, {}, {}
          for s = 1, S do
            assert.equal(math.min(base[s] + spare, M), nslots[s])
            holder[s], freed_at[s], frees[s] = {}, {}, 0
          end
          local function take(s, m)
            local k = slot[s][m]
            assert.truthy(k >= 1 and k <= nslots[s])
            assert.is_nil(holder[s][k])   -- not held by another micro-batch
            -- freed at least `spare` frees ago, when the stage has that many buffers to spare
            if freed_at[s][k] and nslots[s] == base[s] + spare then
              assert.truthy(frees[s] - freed_at[s][k] >= spare)
            end
            holder[s][k] = m
          end
          for _, step in ipairs(steps) do
            for _, a in ipairs(step) do
              local s, m = a[1], a[2]
              if a[3] == 'F' then
                if s == 1 then take(1, m) end
                if s < S then take(s + 1, m) end
              else
                local k = slot[s][m]
                assert.equal(m, holder[s][k])
                holder[s][k] = nil
                frees[s] = frees[s] + 1
                freed_at[s][k] = frees[s]
              end
            end
          end
        end
      end
    end
  end)

  it('rejects schedules that deadlock, miss or repeat an action, or are malformed', function()
    local function rejects(steps, S, M, msg)
      local ok, err = pcall(schedule.check, steps, S, M)
      assert.is_false(ok)
      assert.matches(msg, err, 1, true)
    end
    -- stage 2 runs F1 in the same step as stage 1: it would wait for ever
    rejects({ { { 1, 1, 'F' }, { 2, 1, 'F' } }, { { 2, 1, 'B' } }, { { 1, 1, 'B' } } }, 2, 1,
      'deadlock: F(stage 2, micro-batch 1) at step 1 needs F(stage 1, micro-batch 1), which runs at step 1')
    -- stage 1's backward before stage 2's
    rejects({ { { 1, 1, 'F' } }, { { 2, 1, 'F' } }, { { 1, 1, 'B' } }, { { 2, 1, 'B' } } }, 2, 1,
      'deadlock: B(stage 1, micro-batch 1) at step 3 needs B(stage 2, micro-batch 1), which runs at step 4')
    -- a backward before its own forward
    rejects({ { { 1, 1, 'B' } }, { { 1, 1, 'F' } } }, 1, 1, 'needs F(stage 1, micro-batch 1)')
    rejects({ { { 1, 1, 'F' } } }, 1, 1, 'B(stage 1, micro-batch 1) never runs')
    rejects({ { { 1, 1, 'F' } }, { { 1, 1, 'F' } }, { { 1, 1, 'B' } } }, 1, 1, 'runs twice (steps 1 and 2)')
    rejects({ { { 1, 1, 'F' }, { 1, 2, 'F' } } }, 1, 2, 'step 1: stage 1 runs two actions')
    rejects({ { { 3, 1, 'F' } } }, 2, 1, 'step 1: stage 3 is not in 1..2')
    rejects({ { { 1, 9, 'F' } } }, 1, 2, 'step 1: micro-batch 9 is not in 1..2')
    rejects({ { { 1, 1, 'X' } } }, 1, 1, "an action must be {stage, micro_batch, 'F' | 'B' | 'W'}")
    rejects({ 'F1' }, 1, 1, 'step 1 must be a list of actions')
    rejects(nil, 1, 1, 'expected a list of steps')
    local ok, err = pcall(schedule.build, 'zero', 2, 2)
    assert.is_false(ok)
    assert.matches("unknown schedule 'zero' (gpipe, 1f1b, interleaved, zb)", err, 1, true)
    ok, err = pcall(schedule.build, 'gpipe', 2, 0)
    assert.matches('chunks must be an integer >= 1, got 0', err, 1, true)
  end)

  it('prints a timeline, one row per stage', function()
    assert.equal(table.concat({
      'stage 1 | F1 F2 .  .  B1 B2',
      'stage 2 | .  F1 F2 B1 B2 . ' }, '\n'), schedule.text(schedule.build('gpipe', 2, 2), 2))
    assert.equal(table.concat({
      'stage 1 | F1 F2 .  B1 .  B2',
      'stage 2 | .  F1 B1 F2 B2 . ' }, '\n'), schedule.text(schedule.build('1f1b', 2, 2), 2))
  end)
end)
