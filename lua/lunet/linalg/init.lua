-- lunet.linalg: torch.linalg (1.13) on float32/float64 CPU tensors,
-- batched over leading dims, differentiable with torch's formulas; LAPACK
-- of the OpenBLAS liblunet links does the factorizations. Results torch
-- gives as named tuples come back as several values in torch's order, as
-- t:sort() gives values, indices:
--   local Q, R = linalg.qr(A)          local L, V = linalg.eigh(A)
--   local U, S, Vh = linalg.svd(A)     local sign, logabsdet = linalg.slogdet(A)
-- Parts: lu (det, slogdet, inv, solve), lu_factor (lu_factor[_ex], lu,
-- lu_unpack, lu_solve), decomp (cholesky, qr, eigh),
-- svd (svd, svdvals, matrix_rank, pinv, lstsq), norms, products.
local linalg = {}
for _, part in ipairs({ 'lu', 'lu_factor', 'decomp', 'svd', 'norms', 'products' }) do
  require('lunet.linalg.' .. part)(linalg)
end
linalg.cross = require('lunet.tensor_layout')._linalg_cross   -- (beside torch.cross, whose default dim differs)
return linalg
