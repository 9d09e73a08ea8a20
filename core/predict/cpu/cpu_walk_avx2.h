// The CPU engine's complete-layout walk with AVX2 gathers, for processors without AVX-512: eight
// rows to a vector, the same decisions as WalkGroup (cpu_walk.h), so the same leaves and, each
// row adding its trees' leaf values in tree order, the same sums bit for bit. Chosen per model at
// load where AVX-512 is absent and it measures faster than the scalar walk (CpuForest), or forced
// by CpuForestOptions::Walk::kDenseAvx2.
#pragma once

#include <cstdint>

#include "core/predict/cpu/cpu_forest.h"

namespace grove::cpu {

// Rows of one vector of the AVX2 walk: WalkAndAddDenseAvx2 takes blocks of a multiple of this.
inline constexpr int kAvx2Rows = 8;

// Whether this processor runs the AVX2 walk.
bool HaveAvx2Walk();

// Whether some of x[0, n) is NaN, eight values at a time; only where HaveAvx2Walk().
bool HasNanAvx2(const float* x, int64_t n);

// Whether the AVX2 walk takes tree `t`: a tree whose rows all end in the complete layout
// (dense >= 0, not continuing below it) with no categorical split.
inline bool Avx2WalkTakes(const CpuTree& t) {
  return t.dense >= 0 && !t.continues && !t.categorical;
}

// The whole of a run of trees (each one Avx2WalkTakes, ids increasing) for a block: rows walked
// eight to a vector through the complete layout, several trees' vectors in flight, each row's leaf
// value added to margins[group * num_rows + r] in tree order (the reference's sum). num_rows a
// multiple of kAvx2Rows (at most kMaxBlockRows) with num_rows * stride < 2^31; `nan`: some value of
// the block may be missing. Only where HaveAvx2Walk() and the forest keeps its complete layout.
// Thread-safe (reads `cf` only; writes the callers' margins).
void WalkAndAddDenseAvx2(const CpuForest& cf, const int32_t* tree_ids, int num_trees,
                         const float* block, int64_t stride, int num_rows, bool nan,
                         double* margins);

}  // namespace grove::cpu
