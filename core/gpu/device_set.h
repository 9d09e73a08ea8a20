// The GPUs this process may use, shared by every GPU engine. Compiles with or without CUDA.
#pragma once

namespace grove::gpu {

// CUDA devices visible to this process (CUDA_VISIBLE_DEVICES applies); 0 without CUDA, without a
// driver or device, or when the query fails (the failure is cleared from CUDA's per-thread error
// state, so that it does not surface in an unrelated call). Thread-safe.
int VisibleGpuCount();

}  // namespace grove::gpu
