// Macros that let per-row, per-tree logic be written once and compiled by both g++ and nvcc.
#pragma once

#if defined(__CUDACC__)
#define GROVE_HD __host__ __device__ __forceinline__
#define GROVE_HD_NOINLINE __host__ __device__
#else
#define GROVE_HD inline
#define GROVE_HD_NOINLINE
#endif
