-- lunet.optim.SWALR (also optim.swa_utils.SWALR), as torch.optim.swa_utils.SWALR:
-- anneals each group's lr to its swa_lr over anneal_epochs steps ('cos' or
-- 'linear'), then holds it there.
--   local swa_sched = optim.swa_utils.SWALR(opt, {swa_lr = 0.05, anneal_epochs = 5, anneal_strategy = 'linear'})
-- swa_lr may be a list, one per param group; each group gets a swa_lr key.
-- The lr is computed, as torch's, from the group's current lr: another
-- scheduler that moved it in between changes where the anneal starts.
local is_table, typename = require('lunet.core').is_table, require('lunet.core').typename

return function(M, S)
  local name = 'SWALR'
  local fail = S.fail
  S.define(name, {swa_lr = 'number|table', anneal_epochs = 'number', anneal_strategy = 'string'},
    {'swa_lr', 'anneal_epochs', 'anneal_strategy'})

  local ANNEAL = {
    linear = function(t) return t end,
    cos = function(t) return (1 - math.cos(math.pi * t)) / 2 end,
  }

  -- the lr a group had before an anneal at alpha gave lr
  local function initial_lr(lr, swa_lr, alpha)
    if alpha == 1 then return swa_lr end
    return (lr - alpha * swa_lr) / (1 - alpha)
  end

  S.class(name, 'swa_lr', function(self, o)
    local groups = self.optimizer.param_groups
    local lrs = o.swa_lr
    if is_table(lrs) then
      if #lrs ~= #groups then
        fail(name, ('swa_lr must have one value per param group: swa_lr has %d, the optimizer %d groups'):format(#lrs, #groups))
      end
    else
      local l = {}
      for i = 1, #groups do l[i] = lrs end
      lrs = l
    end
    for i, v in ipairs(lrs) do
      if type(v) ~= 'number' or v ~= v then fail(name, ('swa_lr[%d] must be a number, got %s'):format(i, typename(v))) end
    end
    local strategy = o.anneal_strategy or 'cos'
    if not ANNEAL[strategy] then
      fail(name, ("anneal_strategy must be 'cos' or 'linear', got %s"):format(tostring(strategy)))
    end
    local epochs = o.anneal_epochs or 10
    if not (epochs >= 0 and epochs % 1 == 0 and epochs < 2 ^ 53) then
      fail(name, 'anneal_epochs must be an integer >= 0, got ' .. tostring(epochs))
    end
    for i, g in ipairs(groups) do g.swa_lr = lrs[i] end
    self.anneal_epochs, self.anneal_strategy = epochs, strategy
  end, function(self)
    local anneal = ANNEAL[self.anneal_strategy]
    local step = self._step_count - 1
    if self.anneal_epochs == 0 then step = math.max(1, step) end
    local span = math.max(1, self.anneal_epochs)
    local prev_alpha = anneal(math.max(0, math.min(1, (step - 1) / span)))
    local alpha = anneal(math.max(0, math.min(1, step / span)))
    return S.group_lrs(self, function(g)
      return g.swa_lr * alpha + initial_lr(g.lr, g.swa_lr, prev_alpha) * (1 - alpha)
    end)
  end)
end
