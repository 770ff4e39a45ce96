-- nn.NLLLoss2d([{weight, reduction, ignore_index}]): torch's deprecated name of
-- nn.NLLLoss for (N, C, H, W) log-probabilities and (N, H, W) targets (1..C)
return require('lunet.nn.NLLLoss'):extend('nn.NLLLoss2d')
