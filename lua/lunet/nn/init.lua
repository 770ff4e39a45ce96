-- lunet.nn: layers as modules (nn.Conv2d, nn.Linear, ...), their functional
-- forms (nn.functional / nn.F) and initialisers (nn.init).
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)
local nn = {}

nn.Module = require 'lunet.nn.Module'
nn.functional = require 'lunet.nn.functional'
nn.F = nn.functional
nn.init = require 'lunet.nn.initializers'
nn.utils = require 'lunet.nn.utils'   -- clip_grad_norm_, clip_grad_value_, parameters_to_vector, ...

for _, name in ipairs({
  'Sequential', 'ModuleList', 'Linear', 'Conv2d', 'MaxPool2d', 'AvgPool2d', 'AdaptiveAvgPool2d',
  'BatchNorm1d', 'BatchNorm2d', 'Flatten', 'Identity', 'Dropout',
  'ReLU', 'LeakyReLU', 'ELU', 'GELU', 'Sigmoid', 'Tanh', 'Softmax', 'LogSoftmax',
  'SiLU', 'Hardswish', 'Hardsigmoid', 'ReLU6', 'Softplus', 'Mish', 'PReLU',
  'CrossEntropyLoss', 'NLLLoss', 'MSELoss', 'BCEWithLogitsLoss', 'BasicBlock',
  'L1Loss', 'SmoothL1Loss', 'HuberLoss', 'BCELoss', 'KLDivLoss',
  'LayerNorm', 'GroupNorm', 'Dropout2d', 'Embedding', 'Upsample', 'ZeroPad2d', 'ModuleDict',
  'ConvTranspose2d', 'UpsamplingBilinear2d', 'AdaptiveMaxPool2d', 'PixelShuffle', 'PixelUnshuffle', 'Unflatten',
  'InstanceNorm2d', 'Hardtanh', 'SELU', 'CELU', 'LogSigmoid', 'Softsign', 'Tanhshrink', 'Threshold', 'GLU', 'Softmin',
  'Hardshrink', 'Softshrink', 'CosineSimilarity', 'PairwiseDistance', 'MarginRankingLoss', 'CosineEmbeddingLoss',
  'TripletMarginLoss', 'MultiLabelSoftMarginLoss', 'MultiMarginLoss', 'PoissonNLLLoss', 'GaussianNLLLoss',
  'SoftMarginLoss', 'Conv1d', 'MaxPool1d', 'AvgPool1d', 'AdaptiveAvgPool1d', 'AdaptiveMaxPool1d', 'Bilinear',
  'RNNCell', 'LSTMCell', 'GRUCell', 'RNN', 'LSTM', 'GRU',
  'Conv3d', 'MaxPool3d', 'AvgPool3d', 'AdaptiveAvgPool3d', 'BatchNorm3d',
  'Unfold', 'Fold', 'ReflectionPad1d', 'ReflectionPad2d', 'ReplicationPad1d', 'ReplicationPad2d',
  'ConstantPad1d', 'ConstantPad2d', 'LocalResponseNorm', 'ChannelShuffle',
  'MultiheadAttention', 'TransformerEncoderLayer', 'TransformerDecoderLayer', 'TransformerEncoder',
  'TransformerDecoder', 'Transformer',
  'CTCLoss', 'HingeEmbeddingLoss', 'MultiLabelMarginLoss', 'TripletMarginWithDistanceLoss',
  'ConvTranspose1d', 'ConvTranspose3d', 'AdaptiveMaxPool3d', 'Dropout1d', 'Dropout3d', 'AlphaDropout',
  'FeatureAlphaDropout', 'LPPool1d', 'LPPool2d',
  'EmbeddingBag', 'UpsamplingNearest2d',
  'InstanceNorm1d', 'InstanceNorm3d', 'ParameterList', 'ParameterDict',
  'LazyLinear', 'LazyConv1d', 'LazyConv2d', 'LazyConv3d', 'LazyConvTranspose1d', 'LazyConvTranspose2d',
  'LazyConvTranspose3d', 'LazyBatchNorm1d', 'LazyBatchNorm2d', 'LazyBatchNorm3d', 'LazyInstanceNorm1d',
  'LazyInstanceNorm2d', 'LazyInstanceNorm3d',
  'MaxUnpool1d', 'MaxUnpool2d', 'MaxUnpool3d', 'FractionalMaxPool2d', 'FractionalMaxPool3d', 'RReLU', 'Softmax2d',
  'ConstantPad3d', 'ReflectionPad3d', 'ReplicationPad3d', 'CrossMapLRN2d', 'NLLLoss2d', 'AdaptiveLogSoftmaxWithLoss',
}) do
  nn[name] = require('lunet.nn.' .. name)
end

-- nn.is_module(x): true for any nn.Module instance
function nn.is_module(x) return is_table(x) and rawget(x, '_params') ~= nil end

return nn
