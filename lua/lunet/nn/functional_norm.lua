-- lunet.nn.functional's normalisation: batch_norm and its fused forms
-- batch_norm_relu and batch_norm_add_relu (C kernels and their autograd
-- recorders), layer_norm, group_norm and instance_norm (compositions of tensor ops).
-- Installed into F by lunet.nn.functional, which hands over its helpers;
-- returns the checks the layers share (norm_shape, need_eps).
local core = require 'lunet.core'
local T = require 'lunet.tensor'
local A = require 'lunet.autograd'
local options = require 'lunet.options'
local C, is_table, typename = core.C, core.is_table, core.typename
local check = T.check
local recorder = A.recorder
local records, node_owned = A.records, T.node_owned
local raise = options.raise

return function(F, h)
  local need, new, new_like, kernel = h.need, h.new, h.new_like, h.kernel

  -- ---- batch norm ---------------------------------------------------------------------------

  local record_bn = { [false] = recorder('batch_norm'), [true] = recorder('batch_norm_relu') }
  local record_bn_add_relu = recorder('batch_norm_add_relu')

  local function batch_norm(fn, relu, res, x, running_mean, running_var, weight, bias, training, momentum, eps)
    need(fn, x, 'input')
    if relu == 'add' then need(fn, res, 'residual') end
    if running_mean ~= nil then need(fn, running_mean, 'running_mean') end
    if running_var ~= nil then need(fn, running_var, 'running_var') end
    if weight ~= nil then need(fn, weight, 'weight') end
    if bias ~= nil then need(fn, bias, 'bias') end
    kernel(fn, relu == 'add' and 'ln_batchnorm_add_relu_forward' or relu and 'ln_batchnorm_relu_forward'
      or 'ln_batchnorm_forward')
    if x.p.ndim < 2 then raise(fn .. ': input must be at least 2-d (N, C, ...)') end
    -- (a negative eps took the square root of a negative variance: NaN; a momentum past 1 diverged)
    if eps ~= nil and (type(eps) ~= 'number' or not (eps >= 0 and eps < math.huge)) then
      raise(('%s: eps must be a finite number >= 0, got %s'):format(fn, tostring(eps)))
    end
    if momentum ~= nil and (type(momentum) ~= 'number' or not (momentum >= 0 and momentum <= 1)) then
      raise(('%s: momentum must be in [0, 1], got %s'):format(fn, tostring(momentum)))
    end
    local Cc = tonumber(x.p.shape[1])
    if not training and (running_mean == nil or running_var == nil) then
      raise(fn .. ': eval mode needs running_mean and running_var')
    end
    if training then
      local count = x:numel() / Cc
      if count <= 1 then
        raise(('%s: expected more than 1 value per channel when training, got input {%s}'):format(fn,
          table.concat(x:size(), ',')))
      end
    end
    local out = new_like(x)
    local mean, invstd = new(x, Cc), new(x, Cc)
    local rm, rv, w, b = running_mean and running_mean.p, running_var and running_var.p, weight and weight.p,
      bias and bias.p
    if relu == 'add' then
      check(C.ln_batchnorm_add_relu_forward(out.p, mean.p, invstd.p, x.p, res.p, w, b, rm, rv, training and 1 or 0,
        momentum or 0.1, eps or 1e-5))
    else
      check((relu and C.ln_batchnorm_relu_forward or C.ln_batchnorm_forward)(out.p, mean.p, invstd.p, x.p, w, b, rm,
        rv, training and 1 or 0, momentum or 0.1, eps or 1e-5))
    end
    -- (eps: the double backward recomputes the batch's 1/std from x)
    -- (the batch's statistics the node's own, freed with it: lunet.nn.eager)
    if records(x, weight, bias, res) then mean, invstd = node_owned(mean), node_owned(invstd) end
    if relu == 'add' then record_bn_add_relu(out, x, weight, bias, res, mean, invstd, training and 1 or 0, eps or 1e-5)
    else record_bn[relu](out, x, weight, bias, mean, invstd, training and 1 or 0, eps or 1e-5) end
    return out
  end

  -- batch_norm(x (N,C[,...]), running_mean, running_var, weight, bias, training, momentum, eps)
  function F.batch_norm(...) return batch_norm('batch_norm', false, nil, ...) end
  -- relu(batch_norm(...)) in one pass each way (same arguments): what
  -- nn.BasicBlock and nn.Sequential run for BatchNorm2d -> ReLU in training
  function F.batch_norm_relu(...) return batch_norm('batch_norm_relu', true, nil, ...) end
  -- relu(batch_norm(x, ...) + residual) in one pass each way:
  -- batch_norm_add_relu(x, residual, running_mean, running_var, weight, bias,
  -- training, momentum, eps); nn.BasicBlock's tail in training
  function F.batch_norm_add_relu(x, residual, ...) return batch_norm('batch_norm_add_relu', 'add', residual, x, ...) end

  -- ---- normalisation over a sample's own values ---------------------------------------------

  -- the shape of normalized_shape (a number or a list of the trailing sizes) as a list
  local function norm_shape(fn, ns)
    if type(ns) == 'number' then ns = { ns } end
    if not is_table(ns) or #ns == 0 or #ns > 8 then
      raise(('%s: normalized_shape must be a number or a list of 1 to 8 sizes, got %s'):format(fn,
        is_table(ns) and #ns .. ' sizes' or typename(ns)))
    end
    for i = 1, #ns do
      local v = ns[i]
      if type(v) ~= 'number' or v % 1 ~= 0 or v < 1 or v >= 2 ^ 53 then
        raise(('%s: normalized_shape must be integers >= 1, got %s'):format(fn, tostring(v)))
      end
    end
    return ns
  end

  local function need_eps(fn, eps)
    if eps == nil then return 1e-5 end
    if type(eps) ~= 'number' or not (eps >= 0 and eps < math.huge) then
      raise(('%s: eps must be a finite number >= 0, got %s'):format(fn, tostring(eps)))
    end
    return eps
  end

  -- x2 (rows, n) -> (x2 - mean) / sqrt(var + eps) along dim 2, var biased (PyTorch's)
  local function normalize_rows(x2, eps, dim)
    local d = x2 - x2:mean(dim, true)
    return d * ((d * d):mean(dim, true) + eps):rsqrt()
  end

  -- layer_norm(x, normalized_shape[, weight[, bias[, eps = 1e-5]]]): normalises
  -- over the trailing dims normalized_shape (mean and biased variance), then
  -- y * weight + bias (each of normalized_shape), as torch.nn.functional.layer_norm
  function F.layer_norm(x, normalized_shape, weight, bias, eps)
    need('layer_norm', x, 'input')
    local ns = norm_shape('layer_norm', normalized_shape)
    eps = need_eps('layer_norm', eps)
    local s, k = x:size(), #ns
    local nd = #s
    local m = 1
    for i = 1, k do
      if s[nd - k + i] ~= ns[i] then
        raise(('layer_norm: input of shape {%s} does not end in normalized_shape {%s}'):format(
          table.concat(s, ','), table.concat(ns, ',')))
      end
      m = m * ns[i]
    end
    local rows = 1
    for i = 1, nd - k do rows = rows * s[i] end
    local y = normalize_rows(x:reshape(rows, m), eps, 2):view(s)
    if weight ~= nil then y = y * need('layer_norm', weight, 'weight') end
    if bias ~= nil then y = y + need('layer_norm', bias, 'bias') end
    return y
  end

  -- group_norm(x (N, C, ...), num_groups[, weight (C)[, bias (C)[, eps = 1e-5]]]):
  -- normalises each sample's C / num_groups channels of a group together (mean and
  -- biased variance), then y * weight + bias per channel, as torch's group_norm
  function F.group_norm(x, num_groups, weight, bias, eps)
    need('group_norm', x, 'input')
    eps = need_eps('group_norm', eps)
    local s = x:size()
    if #s < 2 then raise(('group_norm: input must be (N, C, ...), got %d-d {%s}'):format(#s, table.concat(s, ','))) end
    local G, N, Cn = num_groups, s[1], s[2]
    if type(G) ~= 'number' or G % 1 ~= 0 or G < 1 then
      raise('group_norm: num_groups must be an integer >= 1, got ' .. tostring(G))
    end
    if Cn % G ~= 0 then
      raise(('group_norm: input has %d channels, not divisible by num_groups %d'):format(Cn, G))
    end
    local rest = 1
    for i = 3, #s do rest = rest * s[i] end
    local y = normalize_rows(x:reshape(N, G, Cn / G * rest), eps, 3)
    if weight == nil and bias == nil then return y:view(s) end
    y = y:view(N, Cn, rest)
    if weight ~= nil then y = y * need('group_norm', weight, 'weight'):view(Cn, 1) end
    if bias ~= nil then y = y + need('group_norm', bias, 'bias'):view(Cn, 1) end
    return y:view(s)
  end

  -- instance_norm(x (N, C, ...), running_mean, running_var, weight, bias,
  -- use_input_stats = true, momentum = 0.1, eps = 1e-5), as torch's: each
  -- sample's channel normalised with its own mean and biased variance; with
  -- running stats given (C each) they move towards the instances' mean and
  -- unbiased variance averaged over the batch. use_input_stats false
  -- normalises with the running stats instead.
  function F.instance_norm(x, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)
    need('instance_norm', x, 'input')
    eps = need_eps('instance_norm', eps)
    momentum = momentum == nil and 0.1 or momentum
    if type(momentum) ~= 'number' or not (momentum >= 0 and momentum <= 1) then
      raise('instance_norm: momentum must be a number in [0, 1], got ' .. tostring(momentum))
    end
    local s = x:size()
    if #s < 3 then
      raise(('instance_norm: input must be (N, C, ...) with spatial dims, got %d-d {%s}'):format(#s, table.concat(s, ',')))
    end
    local N, Cn, rest = s[1], s[2], 1
    for i = 3, #s do rest = rest * s[i] end
    for _, t in ipairs({ { running_mean, 'running_mean' }, { running_var, 'running_var' }, { weight, 'weight' }, { bias, 'bias' } }) do
      if t[1] ~= nil and (need('instance_norm', t[1], t[2]):dim() ~= 1 or t[1]:size(1) ~= Cn) then
        raise(('instance_norm: %s must have %d entries (one per channel), got {%s}'):format(t[2], Cn, table.concat(t[1]:size(), ',')))
      end
    end
    local x3 = x:reshape(N, Cn, rest)
    local y
    if use_input_stats ~= false then
      if rest <= 1 then
        raise(('instance_norm: expected more than 1 spatial element when training, got input {%s}'):format(table.concat(s, ',')))
      end
      y = normalize_rows(x3, eps, 3)
      if running_mean ~= nil or running_var ~= nil then
        -- (no gradient through the running statistics' update)
        local xd = x3:detach()
        local d = xd - xd:mean(3, true)
        if running_mean ~= nil then
          running_mean:copy_(running_mean * (1 - momentum) + xd:mean(3):mean(1) * momentum)
        end
        if running_var ~= nil then
          running_var:copy_(running_var * (1 - momentum) + ((d * d):sum(3) / (rest - 1)):mean(1) * momentum)
        end
      end
    else
      if running_mean == nil or running_var == nil then
        raise('instance_norm: use_input_stats false needs running_mean and running_var')
      end
      y = (x3 - running_mean:view(1, Cn, 1)) * (running_var:view(1, Cn, 1) + eps):rsqrt()
    end
    if weight ~= nil then y = y * weight:view(Cn, 1) end
    if bias ~= nil then y = y + bias:view(Cn, 1) end
    return y:view(s)
  end

  return { norm_shape = norm_shape, need_eps = need_eps }
end
