/* special.h -- the special functions libm lacks, as PyTorch 1.13 computes
 * them (aten/src/ATen/native/Math.h): digamma, trigamma (polygamma(1)) and
 * erfinv, in double, for the CPU kernels (c/cpu/elementwise.c) and the CUDA
 * ones (c/cuda/elementwise.cu: LN_SPECIAL_FN is __host__ __device__ there). */
#ifndef LN_SPECIAL_H
#define LN_SPECIAL_H
#include <math.h>

#ifdef __CUDACC__
#define LN_SPECIAL_FN static __host__ __device__ inline
#else
#define LN_SPECIAL_FN static inline
#endif

#define LN_PI_D 3.14159265358979323846

/* psi(x): 0 -> -+inf (copysign(inf, -x)), negative integers -> NaN, x < 0 by
 * reflection, then recurrence up to 10 and the asymptotic series */
LN_SPECIAL_FN double ln_digamma(double x) {
  const double PSI_10 = 2.25175258906672110764;
  if (x == 0) return copysign(INFINITY, -x);
  double result = 0;
  if (x < 0) {
    if (x == trunc(x)) return NAN;
    double r = x - trunc(x);   /* (tan(pi r): more accurate than tan(pi x)) */
    result = -LN_PI_D / tan(LN_PI_D * r);
    x = 1 - x;
  }
  while (x < 10) { result -= 1 / x; x += 1; }
  if (x == 10) return result + PSI_10;
  double y = 0;
  if (x < 1.0e17) {
    const double z = 1.0 / (x * x);
    const double A[] = {8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
                        -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
                        8.33333333333333333333E-2};
    double p = A[0];
    for (int i = 1; i < 7; i++) p = p * z + A[i];
    y = z * p;
  }
  return result + log(x) - 0.5 / x - y;
}

/* psi'(x) */
LN_SPECIAL_FN double ln_trigamma(double x) {
  double sign = 1, result = 0;
  if (x < 0.5) {
    sign = -1;
    const double s = sin(LN_PI_D * x);
    result -= (LN_PI_D * LN_PI_D) / (s * s);
    x = 1 - x;
  }
  for (int i = 0; i < 6; ++i) { result += 1 / (x * x); x += 1; }
  const double ixx = 1 / (x * x);
  result += (1 + 1 / (2 * x) + ixx * (1. / 6 - ixx * (1. / 30 - ixx * (1. / 42)))) / x;
  return sign * result;
}

/* erf^-1(y): a rational first guess, then two Newton steps */
LN_SPECIAL_FN double ln_erfinv(double y) {
  const double a[4] = {0.886226899, -1.645349621, 0.914624893, -0.140543331};
  const double b[4] = {-2.118377725, 1.442710462, -0.329097515, 0.012229801};
  const double c[4] = {-1.970840454, -1.624906493, 3.429567803, 1.641345311};
  const double d[2] = {3.543889200, 1.637067800};
  const double ya = fabs(y);
  if (!(ya <= 1.0)) return NAN;
  if (ya == 1.0) return copysign(INFINITY, y);
  double x, z, num, dem;
  if (ya <= 0.7) {
    z = y * y;
    num = ((a[3] * z + a[2]) * z + a[1]) * z + a[0];
    dem = (((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + 1.0;
    x = y * num / dem;
  } else {
    z = sqrt(-log((1.0 - ya) / 2.0));
    num = ((c[3] * z + c[2]) * z + c[1]) * z + c[0];
    dem = (d[1] * z + d[0]) * z + 1.0;
    x = copysign(num, y) / dem;
  }
  const double k = 2.0 / sqrt(LN_PI_D);
  x = x - (erf(x) - y) / (k * exp(-x * x));
  x = x - (erf(x) - y) / (k * exp(-x * x));
  return x;
}

#endif
