/* simd.h -- LN_SIMD: hot loops over host memory are compiled for AVX-512,
 * AVX2+FMA and baseline x86-64, and the loader picks one at run time (GCC
 * function multi-versioning). The CPU kernels use it (c/cpu/iter.h), and so
 * does host-memory work above core (the local collectives' reductions). */
#ifndef LN_SIMD_H
#define LN_SIMD_H

#if defined(__x86_64__) && !defined(__clang__) && !defined(LN_NO_CLONES)
#define LN_SIMD __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define LN_SIMD
#endif

#endif
