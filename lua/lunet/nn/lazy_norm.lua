-- lunet.nn.lazy_norm(kind, k): the class of nn.LazyBatchNorm<k>d or
-- nn.LazyInstanceNorm<k>d([eps, momentum, affine, track_running_stats][, opts]):
-- the regular norm's arguments but num_features, which the first forward
-- reads off its input's channel dim. As torch 1.13's, a lazy instance norm
-- defaults to affine = true and track_running_stats = true (the regular
-- one: false). See lazy_class.lua.
local options = require 'lunet.options'

local BN_DIMS = { { 2, 3 }, { 4 }, { 5 } }

return function(kind, k)
  local batch = kind == 'BatchNorm'
  local name = ('nn.Lazy%s%dd'):format(kind, k)
  local normalize = not batch and function(args)
    local o = options.positional(name, { 'eps', 'momentum', 'affine', 'track_running_stats' }, unpack(args, 1, args.n)) or {}
    if o.affine == nil then o.affine = true end
    if o.track_running_stats == nil then o.track_running_stats = true end
    return { n = 1, o }
  end
  return require('lunet.nn.lazy_class')({
    name = name, normalize = normalize, regular = require(('lunet.nn.%s%dd'):format(kind, k)),
    field = 'num_features', dims = batch and BN_DIMS[k] or { k + 1, k + 2 }, channel = batch and 2 or -(k + 1),
    keys = { 'weight', 'running_mean' },
    probe = function() return 1 end,
    from_tensor = function(_, _, t) return t:dim() == 1 and t:numel() > 0 and t:size(1) end,
  })
end
