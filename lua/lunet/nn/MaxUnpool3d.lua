-- nn.MaxUnpool3d(kernel_size[, stride = kernel_size[, padding = 0]]): the inverse of
-- nn.MaxPool3d with return_indices, zeros where no maximum came from, as torch's
return require('lunet.nn.maxunpool')(3)
