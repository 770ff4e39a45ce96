-- lunet.optim.ConstantLR, PolynomialLR and MultiplicativeLR, as torch's:
--   optim.ConstantLR(opt, {factor = 1/3, total_iters = 5})   -- lr * factor for total_iters steps
--   optim.PolynomialLR(opt, {total_iters = 5, power = 1})    -- lr * (1 - t/total_iters)^power, then 0
--   optim.MultiplicativeLR(opt, {lr_lambda = function(epoch) return 0.95 end})   -- lr *= f(epoch)
-- (MultiplicativeLR's lr_lambda may be a list, one per param group; the
-- functions are not part of state_dict, as in PyTorch.)
local is_table = require('lunet.core').is_table

return function(M, S)
  local fail, group_lrs = S.fail, S.group_lrs
  local function posint(v) return type(v) == 'number' and v >= 1 and v % 1 == 0 end

  S.define('ConstantLR', {factor = 'number', total_iters = 'number'}, {'factor', 'total_iters'})
  S.class('ConstantLR', nil, function(self, o)
    self.factor, self.total_iters = o.factor or 1 / 3, o.total_iters or 5
    -- (0 would make the lr infinite at total_iters, where it is divided back)
    if not (self.factor > 0 and self.factor <= 1) then
      fail('ConstantLR', 'factor must be in (0, 1], got ' .. tostring(self.factor))
    end
    if not posint(self.total_iters) then fail('ConstantLR', 'total_iters must be a positive integer, got ' .. self.total_iters) end
  end, function(self)
    local e = self.last_epoch
    if e == 0 then return group_lrs(self, function(g) return g.lr * self.factor end) end
    if e ~= self.total_iters then return group_lrs(self, function(g) return g.lr end) end
    return group_lrs(self, function(g) return g.lr * (1 / self.factor) end)
  end, function(self)
    local f = self.factor + (self.last_epoch >= self.total_iters and 1 - self.factor or 0)
    return group_lrs(self, function(_, b) return b * f end)
  end)

  S.define('PolynomialLR', {total_iters = 'number', power = 'number'}, {'total_iters', 'power'})
  S.class('PolynomialLR', nil, function(self, o)
    self.total_iters, self.power = o.total_iters or 5, o.power or 1
    if not posint(self.total_iters) then fail('PolynomialLR', 'total_iters must be a positive integer, got ' .. self.total_iters) end
  end, function(self)
    local e, n = self.last_epoch, self.total_iters
    if e == 0 or e > n then return group_lrs(self, function(g) return g.lr end) end
    local decay = ((1 - e / n) / (1 - (e - 1) / n)) ^ self.power
    return group_lrs(self, function(g) return g.lr * decay end)
  end, function(self)
    local n = self.total_iters
    return group_lrs(self, function(_, b) return b * (1 - math.min(n, self.last_epoch) / n) ^ self.power end)
  end)

  S.define('MultiplicativeLR', {lr_lambda = 'function|table'}, {'lr_lambda'})
  S.class('MultiplicativeLR', 'lr_lambda', function(self, o)
    local f, n = o.lr_lambda, #self.optimizer.param_groups
    if is_table(f) and #f ~= n then fail('MultiplicativeLR', ('expected %d lr_lambdas, got %d'):format(n, #f)) end
    local fs = {}
    for i = 1, n do
      fs[i] = is_table(f) and f[i] or f
      if type(fs[i]) ~= 'function' then fail('MultiplicativeLR', 'lr_lambda must be a function or a list of functions') end
    end
    self.lr_lambdas = fs
  end, function(self)
    local e = self.last_epoch
    if e <= 0 then return group_lrs(self, function(g) return g.lr end) end
    return group_lrs(self, function(g, _, i)
      local f = self.lr_lambdas[i](e)
      if type(f) ~= 'number' then
        fail('MultiplicativeLR', ('lr_lambda(%d) returned %s, expected a number'):format(e, tostring(f)))
      end
      return g.lr * f
    end)
  end)
end
