// The CPU engine's walk with AVX-512 gathers: sixteen lanes of WalkGroup (cpu_walk.h) per vector,
// for groups without general splits. The same decisions, so the same leaves: categorical splits of
// sets of up to 4,096 categories (cpu_node.h's kCpuCategory) included, decided in the vector by the
// rule CategoricalGoesLeft states. Chosen per model at load where it measures faster (CpuForest),
// since gathers are fast on some processors and slow on others.
#pragma once

#include <cstdint>

#include "core/predict/cpu/cpu_forest.h"

namespace grove::cpu {

// Rows (or trees) of one vector of these walks: WalkAndAddSimd takes blocks of a multiple of this.
inline constexpr int kSimdRows = 16;

// Whether this processor runs WalkGroupSimd (AVX-512F).
bool HaveSimdWalk();

// Whether some of x[0, n) is NaN, sixteen values at a time; only where HaveSimdWalk().
bool HasNanSimd(const float* x, int64_t n);

// The walks below take tree ids in increasing order (a run of the model's trees, or the trees of
// a range), as the engine's calls list them.

// WalkGroup<kNan, true> with AVX-512: the same contract (lanes = num_trees * num_rows <=
// kMaxLanes, idx[j * num_rows + r]) and the same leaves; only for groups whose trees have no
// general split (CpuTree::general; categorical sets the walks decide are taken), and only where
// HaveSimdWalk().
void WalkGroupSimd(const CpuForest& cf, const int32_t* tree_ids, int num_trees, const float* block,
                   int64_t stride, int num_rows, bool nan, int32_t* idx);

// The whole of a run of trees for a block with AVX-512: rows walked sixteen to a vector, one tree
// at a time, each row's leaf value added to margins[group * num_rows + r] in tree order (the
// reference's sum). Trees with scalar leaves and no general split only; num_rows a multiple of
// 16 (at most kMaxBlockRows) with num_rows * stride < 2^31; only where HaveSimdWalk().
void WalkAndAddSimd(const CpuForest& cf, const int32_t* tree_ids, int num_trees,
                    const float* block, int64_t stride, int num_rows, bool nan, double* margins);

// The same for one row, the vectors running across trees instead of rows: sixteen trees to a
// vector, kRowWalkVectors vectors walked together (a single row's walk is otherwise one chain of
// dependent loads per tree), each tree's leaf value then added to margins[group] in tree order.
// `nan`: some value of the row may be missing. Same trees as WalkAndAddSimd; only where
// HaveSimdWalk().
inline constexpr int kRowWalkVectors = 8;
void WalkAndAddRowSimd(const CpuForest& cf, const int32_t* tree_ids, int num_trees,
                       const float* row, bool nan, double* margins);

}  // namespace grove::cpu
