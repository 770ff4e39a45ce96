/* dtype.c -- element sizes, names, promotion, half conversions. */
#include "internal.h"
#include <math.h>

static const int dtype_size[LN_NDTYPES] = {4, 8, 4, 8, 1, 1, 2, 2};
static const char *dtype_names[LN_NDTYPES] = {
  "float32", "float64", "int32", "int64", "uint8", "bool", "float16", "bfloat16"};

int ln_dtype_size(int dtype) {
  return (dtype >= 0 && dtype < LN_NDTYPES) ? dtype_size[dtype] : 0;
}
const char *ln_dtype_name(int dtype) {
  return (dtype >= 0 && dtype < LN_NDTYPES) ? dtype_names[dtype] : "invalid";
}

/* rank in the promotion lattice: bool < uint8 < int32 < int64 < f16/bf16 < f32 < f64 */
static int rank(int dt) {
  switch (dt) {
    case LN_BOOL: return 0; case LN_UINT8: return 1; case LN_INT32: return 2;
    case LN_INT64: return 3; case LN_FLOAT16: case LN_BFLOAT16: return 4;
    case LN_FLOAT32: return 5; case LN_FLOAT64: return 6;
  }
  return -1;
}

int ln_promote(int a, int b) {
  if (a == b) return a;
  if ((a == LN_FLOAT16 && b == LN_BFLOAT16) || (a == LN_BFLOAT16 && b == LN_FLOAT16))
    return LN_FLOAT32;
  return rank(a) >= rank(b) ? a : b;
}

int ln_result_dtype(const ln_tensor *a, const ln_tensor *b) {
  return ln_promote(a->dtype_id, b->dtype_id);
}

int ln_result_dtype_scalar(const ln_tensor *a, double s) {
  if (ln_is_float(a->dtype_id)) return a->dtype_id;
  if (s != floor(s) || isinf(s) || isnan(s)) return LN_FLOAT32;
  if (a->dtype_id == LN_BOOL) return LN_INT64;  /* true + 2 is an integer */
  return a->dtype_id;
}

float ln_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
  if (exp == 0) {
    if (man == 0) u = sign;
    else {  /* subnormal: normalise */
      int e = -1;
      do { e++; man <<= 1; } while (!(man & 0x400));
      u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 31) u = sign | 0x7f800000u | (man << 13);
  else u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  float f; memcpy(&f, &u, 4); return f;
}

uint16_t ln_float_to_half(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000;
  int32_t exp = (int32_t)((u >> 23) & 0xff) - 127 + 15;
  uint32_t man = u & 0x7fffff;
  if (((u >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
  if (exp >= 31) return (uint16_t)(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return (uint16_t)sign;
    man |= 0x800000;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t half = sign | ((uint32_t)exp << 10) | (man >> 13);
  uint32_t rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++;
  return (uint16_t)half;
}

double ln_load_as_double(const char *p, int dtype) {
  switch (dtype) {
    case LN_FLOAT32: return *(const float *)p;
    case LN_FLOAT64: return *(const double *)p;
    case LN_INT32: return *(const int32_t *)p;
    case LN_INT64: return (double)*(const int64_t *)p;
    case LN_UINT8: return *(const uint8_t *)p;
    case LN_BOOL: return *(const uint8_t *)p != 0;
    case LN_FLOAT16: return ln_half_to_float(*(const uint16_t *)p);
    case LN_BFLOAT16: return ln_bf16_to_float(*(const uint16_t *)p);
  }
  return 0;
}

void ln_store_from_double(char *p, int dtype, double v) {
  switch (dtype) {
    case LN_FLOAT32: *(float *)p = (float)v; break;
    case LN_FLOAT64: *(double *)p = v; break;
    case LN_INT32: *(int32_t *)p = (int32_t)v; break;
    case LN_INT64: *(int64_t *)p = (int64_t)v; break;
    case LN_UINT8: *(uint8_t *)p = (uint8_t)(int64_t)v; break;
    case LN_BOOL: *(uint8_t *)p = v != 0; break;
    case LN_FLOAT16: *(uint16_t *)p = ln_float_to_half((float)v); break;
    case LN_BFLOAT16: *(uint16_t *)p = ln_float_to_bf16((float)v); break;
  }
}
