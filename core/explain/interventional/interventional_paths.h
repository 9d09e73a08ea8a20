// Interventional SHAP over merged paths (PathLayout, core/explain/paths.h) with the background
// preprocessed into bitmasks: the formulation of the fast engines (CPU paths strategy, GPU kernel),
// written once as GROVE_HD code; the CPU reference (interventional.h) is the independent oracle.
//
// ## Why bitmasks
// A path's elements are its distinct features (all splits on one feature merged), so "the hybrid
// x_S z_S̄ reaches the leaf" is: every element is matched by x (feature in S) or by z (not in S).
// With X, Z the bitmasks of the elements that x and z match (bit j = element j; the root element,
// bit 0, matches everything):
//   * the leaf is reachable by some hybrid iff (X | Z) == full;
//   * S_x = X & ~Z must come from x, S_z = Z & ~X from z; elements matched by both are free;
//   * element j in S_x gets value * W(|S_x|, |S_z|), in S_z gets -value * W(|S_z|, |S_x|), with
//     W(a, b) = (a-1)! b! / (a+b)! (InterventionalWeight).
// Feature groups (InterventionalOptions::groups) use the grouped layout of the grouping
// (PathLayoutOptions::groups: a group's elements on a path are one run): a group is one player
// whose bit is the AND of its run's bits, in X and in Z alike, and whose run's other elements
// are null players (FoldGroupMembers); everything below is unchanged, with one output column per
// group (PathLayout::player_of).
// A background row enters only through its Z mask per path, so the background is preprocessed
// once per model into, per path, its distinct Z masks with how many rows have each
// (InterventionalLayout): rows sharing a mask are one work item, which is what makes 1,000
// background rows cheap (a path of L elements has at most 2^(L-1) distinct masks).
//
// ## Floor per work item (row x, path, distinct mask)
// Bytes: 8 (mask + count, the same for every lane of the path: one broadcast load, L1-resident),
// amortised over the rows a warp keeps in registers. Ops per lane: OR/compare, two AND-NOTs, two
// popcounts, one 8 KB weight-table lookup (shared memory) and one FMA into a double register. The
// row's X mask is one warp ballot per (row, bin); the output is one fixed-point atomic per (row,
// element), not per mask. So the GPU's cost is ~10 integer ops per lane per (row, mask), against
// GPUTreeShapInterventional's per (row, background row, path) element loads of both rows.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/common/hd.h"
#include "core/common/rows.h"
#include "core/explain/interventional/interventional.h"
#include "core/explain/paths.h"

namespace grove {

class Forest;
class ThreadPool;

// Side of the weight table: |S_x|, |S_z| < kWarpLanes (the root element is in neither).
inline constexpr int kInterventionalWeightSide = kWarpLanes;

GROVE_HD int PopCount32(uint32_t v) {
#if defined(__CUDA_ARCH__)
  return __popc(v);
#else
  return __builtin_popcount(v);
#endif
}

// Mask of a path of `length` elements (1 <= length <= 32).
GROVE_HD uint32_t FullMask(int length) {
  return length >= 32 ? 0xffffffffu : (1u << length) - 1u;
}

// Coefficient of element `bit` (a single bit) for row mask `x` and background mask `z` of a path
// whose full mask is `full`: W(|S_x|, |S_z|), -W(|S_z|, |S_x|) or 0. `weights` is the table of
// InterventionalLayout::weights (row a, column b: W(a, b)).
GROVE_HD double MaskCoefficient(uint32_t x, uint32_t z, uint32_t full, uint32_t bit,
                                const double* weights) {
  if ((x | z) != full) return 0.0;
  const uint32_t from_x = x & ~z;
  const uint32_t from_z = z & ~x;
  const int a = PopCount32(from_x);
  const int b = PopCount32(from_z);
  if (from_x & bit) return weights[a * kInterventionalWeightSide + b];
  if (from_z & bit) return -weights[b * kInterventionalWeightSide + a];
  return 0.0;
}

GROVE_HD int LowestBit(uint32_t v) {
#if defined(__CUDA_ARCH__)
  return __ffs(v) - 1;
#else
  return __builtin_ctz(v);
#endif
}

// Index of the highest set bit of v != 0.
GROVE_HD int HighestBit(uint32_t v) {
#if defined(__CUDA_ARCH__)
  return 31 - __clz(v);
#else
  return 31 - __builtin_clz(v);
#endif
}

// The players' mask of a path of a grouped layout (PathLayout::player_of) from its elements' mask:
// `matched` has bit j set where element j matches, `members` where element j is flagged
// kElemGroupMember. A group is one player on the path: its first element (the run's leader) stands
// for it and matches iff every element of the run does, the same rule for a row and for a
// background row, which is the game over groups (group g in S takes all its members from x).
// Members' bits are set in every mask, so that they are in neither S_x nor S_z: null players, which
// change no other player's Shapley or Banzhaf value (or interaction value). Identity when `members`
// is 0 (a layout of the features).
GROVE_HD uint32_t FoldGroupMembers(uint32_t matched, uint32_t members) {
  uint32_t mask = matched | members;
  for (uint32_t failed = members & ~matched; failed != 0; failed &= failed - 1) {
    // The run's leader: the highest element below the member that is no member (the root, bit 0,
    // never is one).
    mask &= ~(1u << HighestBit(~members & ((1u << LowestBit(failed)) - 1u)));
  }
  return mask;
}

// The bitmask X of `row` over the players of a path (bit j = element j matches; in a grouped
// layout folded by FoldGroupMembers).
template <typename Row>
GROVE_HD uint32_t RowPathMask(const PathElement* elements, int length,
                              const uint32_t* category_bits, const Row& row) {
  uint32_t mask = 0, members = 0;
  for (int j = 0; j < length; ++j) {
    const PathElement& e = elements[j];
    const float v = e.feature < 0 ? 0.0f : row[e.feature];
    if (PathElementMatches(e, category_bits, v)) mask |= 1u << j;
    if (e.flags & kElemGroupMember) members |= 1u << j;
  }
  return FoldGroupMembers(mask, members);
}

// The output column of path element `e` (not the root) in a call over `player_of` (a device or
// host copy of PathLayout::player_of; null for a layout of the features).
GROVE_HD int32_t PlayerColumn(const int32_t* player_of, const PathElement& e) {
  return player_of != nullptr ? player_of[e.feature] : e.feature;
}

// PathLayout::player_of as PlayerColumn takes it (null for a layout of the features).
inline const int32_t* PlayerMap(const PathLayout& layout) {
  return layout.player_of.empty() ? nullptr : layout.player_of.data();
}

// OK when `layout`'s players are those of a call with `groups`: the grouped layout of that
// grouping, or with null groups the model's features; INVALID_ARGUMENT naming the mismatch
// otherwise (a layout explains its own players only).
absl::Status CheckLayoutPlayers(const PathLayout& layout, const FeatureGroups* groups);

// Whether element `e` is a player's (not the root, not a group's null member).
GROVE_HD bool IsPlayerElement(const PathElement& e) {
  return !(e.flags & (kElemRoot | kElemGroupMember));
}

// The players' elements of a path of `length` (<= 32) elements: bit j for element j
// (IsPlayerElement; never bit 0, the root).
GROVE_HD uint32_t PlayerMask(const PathElement* elements, int length) {
  uint32_t players = 0;
  for (int j = 1; j < length; ++j) {
    if (IsPlayerElement(elements[j])) players |= 1u << j;
  }
  return players;
}

// One model's background, preprocessed against its PathLayout. Immutable once built; share it
// read-only between threads.
struct InterventionalLayout {
  int64_t background_rows = 0;
  int num_outputs = 1;
  // Per path p (PathLayout::paths order): its distinct background masks are
  // [mask_begin[p], mask_begin[p + 1]) of `masks` / `counts`, masks ascending. Long paths (more
  // than kWarpLanes elements) have none: engines using this layout refuse models that have them.
  std::vector<uint32_t> mask_begin;
  std::vector<uint32_t> masks;
  std::vector<uint32_t> counts;  // background rows with that mask
  // Per tree t and output k: mean over the background of the tree's weighted value for k
  // (tree_means[t * num_outputs + k]); the bias of a call is base margin + the trees in range.
  std::vector<double> tree_means;
  // kInterventionalWeightSide^2: weights[a * side + b] = W(a, b) for a >= 1, 0 for a = 0.
  std::vector<double> weights;
  // The same for Banzhaf values: AttributionWeight(kBanzhaf, a, b) = 1 / 2^(a+b-1).
  std::vector<double> banzhaf_weights;
  double build_seconds = 0;

  int64_t HostBytes() const;
  // The weight table of `attribution`.
  const double* Weights(Attribution attribution) const {
    return attribution == Attribution::kBanzhaf ? banzhaf_weights.data() : weights.data();
  }
};

using InterventionalLayoutPtr = std::shared_ptr<const InterventionalLayout>;

// Preprocesses `background` (>= 1 row of forest.num_features columns) for `layout` (built from
// `forest`). Deterministic. Work: background rows x path elements, over `pool` (may be null).
// INVALID_ARGUMENT for a malformed background.
absl::StatusOr<InterventionalLayoutPtr> BuildInterventionalLayout(const Forest& forest,
                                                                  const PathLayout& layout,
                                                                  RowsView background,
                                                                  ThreadPool* pool);

// What the probability spaces need besides InterventionalLayout: kProbabilityLinearized's factor
// depends on each pair's two margins, so a mask's background rows cannot be merged into a count,
// and kProbability needs every background row's own masks; the rows of each mask are kept. Path p's rows, ordered by mask (InterventionalLayout order), are
// mask_rows[p * background_rows ...]: mask m's are the next counts[m] after p's earlier masks'.
// Built on first use (paths x background rows x 2 bytes). Immutable once built, but for the memo
// of the exact space's bias (ExactBiasFor), which is thread-safe.
struct LinearizedLayout {
  int64_t background_rows = 0;
  std::vector<uint16_t> mask_rows;
  std::vector<float> background;  // the background rows (their margins are computed per call)
  int64_t HostBytes() const { return static_cast<int64_t>(mask_rows.size() * 2 + background.size() * 4); }

  // ExactBiasFor's results per iteration range [begin, end) (at most kExactBiasRanges ranges).
  struct ExactBiasMemo {
    absl::Mutex mu;
    std::vector<std::pair<std::pair<int, int>, std::shared_ptr<const std::vector<double>>>>
        entries ABSL_GUARDED_BY(mu);
  };
  std::unique_ptr<ExactBiasMemo> exact_bias = std::make_unique<ExactBiasMemo>();
};
using LinearizedLayoutPtr = std::shared_ptr<const LinearizedLayout>;

// The bias of the exact probability space for iteration range [begin, end) -- the mean over the
// background of the link of its margin -- kept with `ll` once computed (for the first
// kExactBiasRanges ranges asked; others are computed per call). It costs background rows x paths
// path walks, which a call would otherwise pay in full however few rows it explains. `ll` must be
// the linearized layout of `forest`, `layout` and `il`. Thread-safe; the computation runs outside
// the memo's lock (two first calls may both compute; the values are the same).
inline constexpr int kExactBiasRanges = 8;
std::shared_ptr<const std::vector<double>> ExactBiasFor(const Forest& forest,
                                                       const PathLayout& layout,
                                                       const InterventionalLayout& il,
                                                       const LinearizedLayout& ll, int begin,
                                                       int end);

// Background rows at most 65,535 (row indices are 16-bit); INVALID_ARGUMENT otherwise.
absl::StatusOr<LinearizedLayoutPtr> BuildLinearizedLayout(const PathLayout& layout,
                                                          const InterventionalLayout& il,
                                                          RowsView background, ThreadPool* pool);

// The ids of the paths of the trees of rounds [begin, end), in layout order.
std::vector<uint32_t> PathsInRange(const PathLayout& layout, int begin, int end);

// What the margin's values and bias are divided by to give `space`'s where the margin's forms
// compute it: the average divisor of `iterations` rounds for kProbability (an identity link's, as
// the path forms are asked only then), 1 otherwise.
double MarginFormDivisor(const Forest& forest, OutputSpace space, int iterations);

// Bias per output for the trees of iteration range [begin, end) (resolved: end > begin).
std::vector<double> InterventionalBias(const Forest& forest, const InterventionalLayout& il,
                                       int begin, int end);

// CPU twin of the GPU kernel: SHAP values (or Banzhaf values, options.attribution: the same form
// with Banzhaf's weight table) of `rows` from the layouts, in double, multi-threaded over rows. OutputSpace::kMargin; kProbabilityLinearized with `linearized` (each mask's rows
// weighted by their pair's LinearizedFactor instead of counted); kProbability with `linearized`
// (its rows per mask give every background row's masks: interventional_exact.h; an identity link
// needs none: the margin's values over the average divisor). Models without long paths;
// interaction values (rows x ExplainWidth(forest, true)) in the exact space only (the margin's:
// ExplainInterventionalInteractionsPathsCpu); FAILED_PRECONDITION otherwise; other checks as
// ExplainInterventionalCpu, and the exact space's pairs as the reference's
// (ExactPairTooWideError). With options.groups, `layout` is the grouping's grouped layout
// (PathLayoutOptions::groups) and `il` (and `linearized`) were built on it: one column per group;
// CheckLayoutPlayers' error otherwise. Deterministic.
absl::Status ExplainInterventionalPathsCpu(const Forest& forest, const PathLayout& layout,
                                           const InterventionalLayout& il, RowsView rows,
                                           const InterventionalOptions& options,
                                           MatrixView<float> out, ThreadPool* pool,
                                           const LinearizedLayout* linearized = nullptr);

}  // namespace grove
