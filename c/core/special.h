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

/* ---- the regularized incomplete gamma functions -----------------------------
 * P(a, x) = gamma(a, x) / Gamma(a) (torch.igamma) and Q = 1 - P (igammac),
 * from the textbook methods: the power series of P for x < a + 1, Lentz's
 * continued fraction for Q above; each of P and Q is computed directly where
 * it is the small one (1 - the other there would lose its digits). The
 * common factor x^a e^-x / Gamma(a + 1) is formed in log space; for a >= 10
 * as exp(a (log1p(u) - u) - stirlerr(a)) / sqrt(2 pi a), u = (x - a) / a, so
 * that a log x, x and lgamma(a), each large, never cancel. Series and
 * fraction take O(sqrt(a)) steps near x ~ a (no uniform asymptotic
 * expansion): accurate to ~1e-13 for a up to 1e4 and beyond, slower as a
 * grows. Edge values as torch 1.13: NaN for a NaN or negative operand and
 * for a = x = 0 or a = x = inf. */

/* log(1 + u) - u; near 0 through s = u / (2 + u): log1p(u) = 2 atanh(s) =
 * 2 (s + s^3/3 + ...), and 2 s - u = -u^2 / (2 + u) */
LN_SPECIAL_FN double ln_log1pmx(double u) {
  if (!(fabs(u) <= 0.5)) return log1p(u) - u;
  const double s = u / (2 + u), s2 = s * s;
  double p = s * s2, sum = 0;
  for (int k = 3; k < 200; k += 2) {
    const double t = p / k;
    sum += t;
    if (fabs(t) <= 1e-17 * fabs(sum)) break;
    p *= s2;
  }
  return -u * u / (2 + u) + 2 * sum;
}

/* lgamma(a + 1) - ((a + 1/2) log a - a + log(2 pi) / 2) for a >= 10: the
 * Stirling series sum B_2k / (2k (2k - 1) a^(2k - 1)) */
LN_SPECIAL_FN double ln_stirlerr(double a) {
  const double c[8] = {1.0 / 12, -1.0 / 360, 1.0 / 1260, -1.0 / 1680, 1.0 / 1188, -691.0 / 360360,
                       1.0 / 156, -3617.0 / 122400};
  const double r = 1 / (a * a);
  double s = 0;
  for (int k = 7; k >= 0; k--) s = s * r + c[k];
  return s / a;
}

/* lgamma(1 + a); for |a| < 0.2 from its Taylor series -euler a + sum
 * (-1)^k zeta(k) a^k / k (lgamma(1 + a) itself rounds 1 + a, relative
 * error eps / a there) */
LN_SPECIAL_FN double ln_lgamma1p(double a) {
  if (!(fabs(a) < 0.2)) return lgamma(1 + a);
  const double z[25] = {0.8224670334241132, -0.40068563438653143, 0.27058080842778454, -0.20738555102867398,
                        0.16955717699740819, -0.14404989676884611, 0.12550966952474304, -0.11133426586956469,
                        0.10009945751278181, -0.090954017145829041, 0.083353840546109004, -0.076932516411352195,
                        0.07143294629536133, -0.066668705882420465, 0.062500955141213038, -0.058823978658684585,
                        0.055555767627403614, -0.052631679379616658, 0.050000047698101693, -0.047619070330142226,
                        0.045454556293204669, -0.043478266053040261, 0.041666669150341208, -0.040000001192140137,
                        0.038461539034675182};
  double s = 0;
  for (int k = 24; k >= 0; k--) s = s * a + z[k];
  return a * (a * s - 0.57721566490153287);
}

/* x^a e^-x / Gamma(a + 1), a > 0, x > 0 */
LN_SPECIAL_FN double ln_igamma_fac(double a, double x) {
  if (a < 10) return exp(a * log(x) - x - ln_lgamma1p(a));
  const double u = (x - a) / a;   /* (far from a, log(x / a): 1 + u would round off x's digits) */
  const double e = fabs(u) <= 0.5 ? a * ln_log1pmx(u) : a * log(x / a) + (a - x);
  return exp(e - ln_stirlerr(a)) / sqrt(2 * LN_PI_D * a);
}

/* the step limit of series and fraction: they need ~10 sqrt(a) near x ~ a */
LN_SPECIAL_FN double ln_igamma_steps(double a) { return 1000 + 20 * sqrt(a); }

/* P by its series x^a e^-x / Gamma(a + 1) * sum x^n / ((a + 1) ... (a + n)) */
LN_SPECIAL_FN double ln_igamma_series(double a, double x) {
  const double f = ln_igamma_fac(a, x);
  if (f == 0) return 0;
  const double lim = ln_igamma_steps(a);
  double t = 1, sum = 1;
  for (double n = 1; n < lim; n++) {
    t *= x / (a + n);
    sum += t;
    if (t <= 1e-17 * sum) break;
  }
  return f * sum;
}

/* Q by the continued fraction Gamma(a, x) = e^-x x^a / (x + 1 - a - 1 (1 - a) /
 * (x + 3 - a - 2 (2 - a) / (x + 5 - a - ...))), modified Lentz; x >= a + 1 */
LN_SPECIAL_FN double ln_igammac_fraction(double a, double x) {
  const double f = ln_igamma_fac(a, x);
  if (f == 0) return 0;
  const double tiny = 1e-300, lim = ln_igamma_steps(a);
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (double i = 1; i < lim; i++) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (fabs(del - 1) <= 1e-16) break;
  }
  return a * f * h;
}

/* Q for a < 1, x < a + 1 (where P is near 1): from gamma(a, x) = sum (-1)^n
 * x^(a + n) / (n! (a + n)), Q = -expm1(r) - e^r a sum_{n >= 1} (-x)^n /
 * (n! (a + n)), r = a log x - lgamma(1 + a) */
LN_SPECIAL_FN double ln_igammac_small_a(double a, double x) {
  double p = 1, s = 0;
  for (int n = 1; n < 200; n++) {
    p *= -x / n;
    const double t = p / (a + n);
    s += t;
    if (fabs(t) <= 1e-17 * fabs(s)) break;
  }
  const double r = a * log(x) - ln_lgamma1p(a);
  return -expm1(r) - exp(r) * a * s;
}

/* the edge cases shared by P and Q: returns 1 and sets *p (P's value) there */
LN_SPECIAL_FN int ln_igamma_edge(double a, double x, double *p) {
  if (isnan(a) || isnan(x) || a < 0 || x < 0) { *p = NAN; return 1; }
  if (a == 0) { *p = x > 0 ? 1 : NAN; return 1; }
  if (x == 0) { *p = 0; return 1; }
  if (isinf(a)) { *p = isinf(x) ? NAN : 0; return 1; }
  if (isinf(x)) { *p = 1; return 1; }
  return 0;
}

LN_SPECIAL_FN double ln_igamma(double a, double x) {
  double p;
  if (ln_igamma_edge(a, x, &p)) return p;
  if (x < a + 1) return ln_igamma_series(a, x);
  return 1 - ln_igammac_fraction(a, x);
}

LN_SPECIAL_FN double ln_igammac(double a, double x) {
  double p;
  if (ln_igamma_edge(a, x, &p)) return 1 - p;
  if (x >= a + 1) return ln_igammac_fraction(a, x);
  if (a < 1) return ln_igammac_small_a(a, x);
  return 1 - ln_igamma_series(a, x);
}

#endif
