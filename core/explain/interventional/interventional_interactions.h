// Interventional interaction values (Shapley or Banzhaf interaction index, margin space) in the
// bitmask path form of interventional_paths.h, written once as GROVE_HD code for the CPU twin
// (ExplainInterventionalInteractionsPathsCpu, one path element at a time) and the GPU kernel
// (interventional_interactions_gpu.cuh, a path element per lane). The CPU reference
// (interventional_cpu.cc, a tree walk per pair) is the independent oracle.
//
// ## One (row x, background row z) pair, one path
// The path's leaf value v counts for the hybrids x_S z_S̄ with S ⊇ S_x and S ∩ S_z = ∅
// (S_x = X & ~Z, S_z = Z & ~X; reachable iff (X | Z) == full). Its game
// v [S_x ⊆ S, S ∩ S_z = ∅] has, with a = |S_x|, b = |S_z| and W the attribution's weight (AttributionWeight), the values
//   i in S_x: v W(a, b)          i in S_z: -v W(b, a)
// and an interaction index nonzero at one coalition only, of which M[i][j] = M[j][i] hold half:
//   i, j in S_x: v W(a-1, b) / 2    i, j in S_z: v W(b-1, a) / 2    mixed: -v W(a, b-1) / 2
// (the CPU reference's MarginVisitor::AddPairs derives them).
//
// ## Why one row's sums over the background factor
// Reachability needs Z ⊇ full & ~X, so S_z = full & ~X is the same for every background mask of
// the row: b is fixed and only S_x = X & ~Z varies. Summed over the path's distinct background
// masks (count c each), the coefficients of element i are then
//   phi      sum of c W(a, b) (i in S_x) or -c W(b, a) (i not in X);
//   shared   i in X: sum over masks with i in S_x of -c W(a, b-1) / 2 -- its coefficient with every
//            element outside X; i not in X: sum of c W(b-1, a) / 2 -- with every other element
//            outside X;
//   with_x   i in X only: per element j in X, the sum over masks with i, j in S_x of
//            c W(a-1, b) / 2.
// An element outside X pairs with an element j in X through j's `shared` (the index is symmetric).
// So a lane keeps two scalars and one row of with_x per row, and the work per (row, path, mask) is
// a few integer ops per lane plus |S_x| additions for the lanes in S_x.
//
// Determinism: each lane sums its masks in ascending order; the engines add the per-path sums in
// fixed point (integer addition commutes) or in path order.
#pragma once

#include <cstdint>

#include "core/common/hd.h"
#include "core/common/rows.h"
#include "core/explain/interventional/interventional.h"
#include "core/explain/interventional/interventional_exact.h"
#include "core/explain/interventional/interventional_paths.h"
#include "core/explain/paths.h"

namespace grove {

// One path element's sums for one row (see above). with_x lives beside it: one double per
// element of the path (kWarpLanes at most), indexed by the other element's position.
struct InteractionLane {
  double phi = 0;
  double shared = 0;
};

// Adds background mask `z` (held by `count` rows, scaled by the caller) to element `rel` (>= 1) of
// a path whose full mask is `full`, for a row whose mask is `x`. `weights`: the attribution's
// table (InterventionalLayout::Weights; row a, column b: W(a, b), 0 for a = 0).
GROVE_HD void AddInteractionMask(uint32_t x, uint32_t z, uint32_t full, int rel, double count,
                                 const double* weights, InteractionLane* lane, double* with_x) {
  if ((x | z) != full) return;
  const uint32_t bit = 1u << rel;
  const uint32_t from_x = x & ~z;
  const uint32_t from_z = full & ~x;  // == z & ~x for every reachable z
  const int a = PopCount32(from_x);
  const int b = PopCount32(from_z);
  constexpr int kSide = kInterventionalWeightSide;
  if (from_x & bit) {
    lane->phi += count * weights[a * kSide + b];
    if (b >= 1) lane->shared -= count * weights[a * kSide + b - 1] / 2;
    if (a >= 2) {
      const double w = count * weights[(a - 1) * kSide + b] / 2;
      for (uint32_t bits = from_x & ~bit; bits != 0; bits &= bits - 1) with_x[LowestBit(bits)] += w;
    }
  } else if (from_z & bit) {
    lane->phi -= count * weights[b * kSide + a];
    if (b >= 2) lane->shared += count * weights[(b - 1) * kSide + a] / 2;
  }
}

// The summed coefficient of the pair (i, j) of distinct path elements (both >= 1) for row mask
// `x`: lane_i and with_x_i are element i's sums, lane_j element j's.
GROVE_HD double InteractionPairCoefficient(uint32_t x, int i, int j, const InteractionLane& lane_i,
                                           const double* with_x_i, const InteractionLane& lane_j) {
  const bool xi = (x >> i) & 1u, xj = (x >> j) & 1u;
  if (xi && xj) return with_x_i[j];
  if (xi || !xj) return lane_i.shared;  // i in X with j outside, or both outside
  return lane_j.shared;                 // i outside X, j in X: the symmetric entry
}

// CPU twin of the GPU interactions kernel: interaction values of `rows` (rows x
// ExplainWidth(forest, true), the reference's layout and diagonal) from the layouts, in double,
// multi-threaded over rows on `pool` (may be null). options.interactions must be set; every
// attribution; OutputSpace::kMargin, or kProbability of an identity link (the margin's values over
// the average divisor); models without long paths. FAILED_PRECONDITION otherwise, other checks as
// ExplainInterventionalCpu. Feature groups as ExplainInterventionalPathsCpu (a grouped layout; its
// null members add nothing). Deterministic.
absl::Status ExplainInterventionalInteractionsPathsCpu(const Forest& forest,
                                                       const PathLayout& layout,
                                                       const InterventionalLayout& il,
                                                       RowsView rows,
                                                       const InterventionalOptions& options,
                                                       MatrixView<float> out, ThreadPool* pool);

// Whether this CPU twin and the GPU interactions kernel compute `options` for `forest`:
// interactions in the margin space or an identity link's probability space.
bool PathFormExplainsInteractions(const Forest& forest, const InterventionalOptions& options);

// Whether some path form computes `options`' interaction values: the above, or the exact
// probability space (interventional_exact.h: ExplainInterventionalPathsCpu and the GPU's exact
// kernel, with the linearized layout). Not the linearized space.
bool PathFormsExplainInteractions(const Forest& forest, const InterventionalOptions& options);

}  // namespace grove
