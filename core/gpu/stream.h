// The CUDA stream type for headers that g++ compiles: `CUstream_st*` is what cudaStream_t is, so
// a GPU entry point declared with it takes a cudaStream_t from CUDA code (and nullptr, the legacy
// default stream) without this header including CUDA's.
#pragma once

struct CUstream_st;
