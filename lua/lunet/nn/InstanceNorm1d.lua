-- nn.InstanceNorm1d(num_features[, {eps = 1e-5, momentum = 0.1, affine = false,
-- track_running_stats = false, dtype, device}]), or PyTorch's positional
-- (num_features, eps, momentum, affine, track_running_stats): input
-- (N, C, L) or (C, L), each sample's channel normalised over L (F.instance_norm).
-- Tracking: buffers running_mean, running_var, num_batches_tracked (as
-- torch's, which never counts it), used in eval mode. (lunet.nn.instancenorm_class)
return require('lunet.nn.instancenorm_class')(1)
