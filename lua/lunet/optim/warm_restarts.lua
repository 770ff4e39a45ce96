-- lunet.optim.CosineAnnealingWarmRestarts (SGDR), as torch's: cosine
-- annealing from the initial lr to eta_min over T_0 steps, then a restart;
-- each period T_mult times the one before.
--   local sched = optim.CosineAnnealingWarmRestarts(opt, {T_0 = 10, T_mult = 2, eta_min = 1e-5})
--   sched:step()                          -- after each epoch, or
--   sched:step(epoch + i / iters)         -- after each batch: a fractional epoch
local typename = require('lunet.core').typename

return function(M, S)
  local name = 'CosineAnnealingWarmRestarts'
  local fail = S.fail
  S.define(name, {T_0 = 'number', T_mult = 'number', eta_min = 'number'}, {'T_0', 'T_mult', 'eta_min'})

  local c = S.class(name, 'T_0', function(self, o)
    local T_0, T_mult = o.T_0, o.T_mult or 1
    if not (T_0 > 0 and T_0 % 1 == 0) then fail(name, 'T_0 must be a positive integer, got ' .. tostring(T_0)) end
    if not (T_mult >= 1 and T_mult % 1 == 0) then fail(name, 'T_mult must be an integer >= 1, got ' .. tostring(T_mult)) end
    self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, o.eta_min or 0
    self.T_cur = o.last_epoch or -1
  end, function(self)
    local emin = self.eta_min
    return S.group_lrs(self, function(_, b)
      return emin + (b - emin) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
    end)
  end)

  -- step() or step(epoch), epoch >= 0 and possibly fractional
  function c:step(epoch)
    if epoch == nil and self.last_epoch < 0 then epoch = 0 end
    if epoch == nil then
      epoch = self.last_epoch + 1
      self.T_cur = self.T_cur + 1
      if self.T_cur >= self.T_i then
        self.T_cur = self.T_cur - self.T_i
        self.T_i = self.T_i * self.T_mult
      end
    else
      if type(epoch) ~= 'number' then fail(name .. ':step', 'epoch must be a number, got ' .. typename(epoch)) end
      if not (epoch >= 0) then fail(name .. ':step', 'expected a non-negative epoch, got ' .. tostring(epoch)) end
      local T_0, T_mult = self.T_0, self.T_mult
      if epoch >= T_0 then
        if T_mult == 1 then
          self.T_cur = epoch % T_0
        else
          -- (log(x) / log(base), as Python's math.log(x, base))
          local n = math.floor(math.log(epoch / T_0 * (T_mult - 1) + 1) / math.log(T_mult))
          self.T_cur = epoch - T_0 * (T_mult ^ n - 1) / (T_mult - 1)
          self.T_i = T_0 * T_mult ^ n
        end
      else
        self.T_i, self.T_cur = T_0, epoch
      end
    end
    self.last_epoch = math.floor(epoch)
    self._step_count = self._step_count + 1
    local lrs, last = self:get_lr(), {}
    for i, g in ipairs(self.optimizer.param_groups) do g.lr = lrs[i]; last[i] = lrs[i] end
    self._last_lr = last
  end

  function c:__tostring()
    return ('%s(T_0=%d, T_mult=%d, T_cur=%g, T_i=%g, lr=%s)'):format(name, self.T_0, self.T_mult, self.T_cur, self.T_i,
      table.concat(self._last_lr or {}, ', '))
  end
end
