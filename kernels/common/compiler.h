// Portability macros for code shared by the host executor and the CUDA kernels.
// Headers under kernels/common/ are compiled both by the host C++ compiler (as
// plain C++20) and by nvcc; these macros are the only place that difference is
// spelled out.
#pragma once

#if defined(__CUDACC__)
// Callable from host and device code.
#define CHORUS_HD __host__ __device__
// Small helpers on the data path: force inlining so the per-element functors
// collapse into the surrounding loop on both sides.
#define CHORUS_INLINE __forceinline__
#else
#define CHORUS_HD
#if defined(__GNUC__) || defined(__clang__)
#define CHORUS_INLINE inline __attribute__((always_inline))
#else
#define CHORUS_INLINE inline
#endif
#endif

// Pointer parameters of the block loops that never alias another pointer of
// the same call, so the loops vectorize without run-time overlap checks.
#define CHORUS_RESTRICT __restrict__

// A lambda called per element inside a loop: inlined so the loop body is
// straight-line code (nvcc inlines device lambdas by itself).
#if !defined(__CUDACC__) && (defined(__GNUC__) || defined(__clang__))
#define CHORUS_LAMBDA_INLINE __attribute__((always_inline))
#else
#define CHORUS_LAMBDA_INLINE
#endif

// True while compiling device code (nvcc's device pass).
#if defined(__CUDA_ARCH__)
#define CHORUS_DEVICE_PASS 1
#else
#define CHORUS_DEVICE_PASS 0
#endif
