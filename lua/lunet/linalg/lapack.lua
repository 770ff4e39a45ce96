-- lunet.linalg.lapack: what the linalg functions share: the LAPACK routines
-- of the OpenBLAS liblunet links (s* for float32, d* for float64, as torch
-- runs float32 in float32), the input checks, and batches of column-major
-- matrices: a (..., m, n) tensor is copied to a fresh contiguous (..., n, m)
-- one, whose each matrix is LAPACK's column-major A; results come back the
-- same way (the transposed view of LAPACK's output).
local ffi = require 'ffi'
local core = require 'lunet.core'
local options = require 'lunet.options'
local T = require 'lunet.tensor'
local raise, typename, is_tensor = options.raise, core.typename, T.is_tensor

local M = {}

pcall(ffi.cdef, [[
  void sgetrf_(const int *m, const int *n, float *a, const int *lda, int *ipiv, int *info);
  void dgetrf_(const int *m, const int *n, double *a, const int *lda, int *ipiv, int *info);
  void sgetrs_(const char *tr, const int *n, const int *nrhs, const float *a, const int *lda, const int *ipiv,
               float *b, const int *ldb, int *info, size_t);
  void dgetrs_(const char *tr, const int *n, const int *nrhs, const double *a, const int *lda, const int *ipiv,
               double *b, const int *ldb, int *info, size_t);
  void spotrf_(const char *uplo, const int *n, float *a, const int *lda, int *info, size_t);
  void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t);
  void sgeqrf_(const int *m, const int *n, float *a, const int *lda, float *tau, float *work, const int *lwork, int *info);
  void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau, double *work, const int *lwork, int *info);
  void sorgqr_(const int *m, const int *n, const int *k, float *a, const int *lda, const float *tau, float *work,
               const int *lwork, int *info);
  void dorgqr_(const int *m, const int *n, const int *k, double *a, const int *lda, const double *tau, double *work,
               const int *lwork, int *info);
  void ssyevd_(const char *jobz, const char *uplo, const int *n, float *a, const int *lda, float *w, float *work,
               const int *lwork, int *iwork, const int *liwork, int *info, size_t, size_t);
  void dsyevd_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda, double *w, double *work,
               const int *lwork, int *iwork, const int *liwork, int *info, size_t, size_t);
  void sgesdd_(const char *jobz, const int *m, const int *n, float *a, const int *lda, float *s, float *u,
               const int *ldu, float *vt, const int *ldvt, float *work, const int *lwork, int *iwork, int *info, size_t);
  void dgesdd_(const char *jobz, const int *m, const int *n, double *a, const int *lda, double *s, double *u,
               const int *ldu, double *vt, const int *ldvt, double *work, const int *lwork, int *iwork, int *info, size_t);
]])

local C = core.C
local routines = {}
-- the routine `name` (getrf, potrf, ...) for a dtype
function M.routine(fn, dtype, name)
  local key = (dtype == 'float32' and 's' or 'd') .. name .. '_'
  local f = routines[key]
  if f then return f end
  local ok, r = pcall(function() return C[key] end)
  if not ok then raise(('%s: needs LAPACK (%s), which the BLAS liblunet links lacks'):format(fn, key)) end
  routines[key] = r
  return r
end

function M.ctype(dtype) return dtype == 'float32' and 'float' or 'double' end

-- A must be a float32/float64 CPU tensor of at least `nd` dims (2: a batch
-- of matrices; square: the last two equal)
function M.check(fn, A, what, square, nd)
  what, nd = what or 'A', nd or 2
  if not is_tensor(A) then raise(('%s: %s must be a tensor, got %s'):format(fn, what, typename(A))) end
  local dt = A.dtype
  if dt ~= 'float32' and dt ~= 'float64' then
    raise(('%s: %s must be float32 or float64, got %s'):format(fn, what, dt))
  end
  if A.device:sub(1, 3) ~= 'cpu' then
    raise(('%s: %s has no kernel for %s (LAPACK runs on the CPU: move %s there with :to(\'cpu\'))')
      :format(fn, A.device, fn, what))
  end
  local d = A:dim()
  if d < nd then
    raise(('%s: %s must have at least %d dimensions, got %d'):format(fn, what, nd, d))
  end
  if square and A:size(-1) ~= A:size(-2) then
    raise(('%s: %s must be a batch of square matrices, but they are %d by %d'):format(fn, what, A:size(-2), A:size(-1)))
  end
  return A
end

-- the batch shape (a table) of a (..., m, n) tensor and its element count
function M.batch(A)
  local s, b = A:size(), {}
  local count = 1
  for i = 1, #s - 2 do b[i] = s[i]; count = count * s[i] end
  return b, count
end

-- a fresh contiguous (..., n, m) copy of A: its matrices column-major
function M.colmajor(A)
  return A:detach():transpose(-1, -2):clone()
end

-- base pointer of a contiguous CPU tensor, typed
function M.ptr(t)
  return ffi.cast(M.ctype(t.dtype) .. '*', t:data_ptr())
end

M.int1 = function(v) return ffi.new('int[1]', v or 0) end

-- the optimal workspace size a LAPACK query (lwork = -1) wrote into w[0]
function M.lwork(w) return math.max(1, math.floor(tonumber(w[0]) + 0.5)) end

-- which batch element (0-based, as torch counts) failed, for messages
function M.where(count, i)
  if count <= 1 then return '' end
  return (' (batch element %d)'):format(i)
end

-- autograd: r (a result) gets a node of backward bw over the inputs a[, b]
-- when one needs a gradient; fields (a table) go into the node, tensors
-- among them saved (an in-place change to them is refused at backward).
-- live (field -> 1 or 2: that input, 0: r, or the node of another result
-- of the same call) says what each saved tensor is, so that create_graph
-- runs bw on them "live" and the gradient it gives is differentiable
-- (lunet.autograd.double); `as` names r in a live table the results share.
local AG = require 'lunet.autograd'
function M.record(r, bw, name, fields, a, b, live, as)
  if not (AG.is_grad_enabled() and (AG.needs(a) or AG.needs(b))) then return r end
  local n = AG.node(bw, name, AG.edge(a), AG.edge(b))
  for k, v in pairs(fields) do n[k] = AG.saved(v) end
  n.live = live
  if as then live[as] = n end
  return AG.attach(r, n)
end
M.sum_to = AG.sum_to
function M.records(a) return AG.is_grad_enabled() and AG.needs(a) end

-- a new (shape) tensor of A's dtype, on the CPU
local factory = require 'lunet.factory'
function M.empty(shape, dtype) return factory.empty(shape, { dtype = dtype }) end

function M.eye(n, dtype) return factory.eye(n, { dtype = dtype }) end
function M.mT(x) return x:transpose(-1, -2) end

return M
