// CPU twin of the GPU interactions kernel (see interventional_interactions.h): the same per-element
// sums, one element at a time.
#include "core/explain/interventional/interventional_interactions.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/model/forest.h"
#include "core/model/transform.h"

namespace grove {
namespace {

// Adds one row's contributions of `path` (scaled by 1 / background rows) to phi (outputs x f1)
// and inter (outputs x f1 x f1, off-diagonal).
void AddPathInteractions(const PathLayout& layout, const InterventionalLayout& il,
                         const double* weights, uint32_t path, const float* row, int64_t f1,
                         double* phi, double* inter) {
  const PathInfo& info = layout.paths[path];
  const PathElement* elements = layout.elements.data() + info.element_begin;
  const uint32_t x = RowPathMask(elements, info.length, layout.category_bits.data(), row);
  const uint32_t full = FullMask(info.length);
  InteractionLane lanes[kWarpLanes];
  double with_x[kWarpLanes][kWarpLanes] = {};
  const uint32_t players = PlayerMask(elements, info.length);
  // One pass over the masks: a reachable mask reaches only the players that differ between x
  // and it (AddInteractionMask adds nothing for the others), each element's sums taking the masks
  // in order as a pass per element would.
  for (uint32_t m = il.mask_begin[path]; m < il.mask_begin[path + 1]; ++m) {
    const uint32_t z = il.masks[m];
    if ((x | z) != full) continue;
    for (uint32_t bits = (x ^ z) & players; bits != 0; bits &= bits - 1) {
      const int e = LowestBit(bits);
      AddInteractionMask(x, z, full, e, il.counts[m], weights, &lanes[e], with_x[e]);
    }
  }
  const double scale = 1.0 / static_cast<double>(il.background_rows);
  const int32_t* player_of = PlayerMap(layout);
  for (int k = 0; k < info.width; ++k) {
    const double v = scale * layout.values[info.value_begin + k];
    const int group = info.group + k;
    double* m = inter + group * f1 * f1;
    // A group's null members add nothing (their sums are 0): only players' elements are read.
    for (int i = 1; i < info.length; ++i) {
      if (!IsPlayerElement(elements[i])) continue;
      const int64_t fi = PlayerColumn(player_of, elements[i]);
      phi[group * f1 + fi] += v * lanes[i].phi;
      for (int j = 1; j < info.length; ++j) {
        if (j == i || !IsPlayerElement(elements[j])) continue;
        m[fi * f1 + PlayerColumn(player_of, elements[j])] +=
            v * InteractionPairCoefficient(x, i, j, lanes[i], with_x[i], lanes[j]);
      }
    }
  }
}

}  // namespace

bool PathFormExplainsInteractions(const Forest& forest, const InterventionalOptions& options) {
  return options.interactions && (options.output_space == OutputSpace::kMargin ||
                                  (options.output_space == OutputSpace::kProbability &&
                                   !IsExactSpace(forest, options.output_space)));
}

bool PathFormsExplainInteractions(const Forest& forest, const InterventionalOptions& options) {
  return PathFormExplainsInteractions(forest, options) ||
         (options.interactions && IsExactSpace(forest, options.output_space));
}

absl::Status ExplainInterventionalInteractionsPathsCpu(const Forest& forest,
                                                       const PathLayout& layout,
                                                       const InterventionalLayout& il,
                                                       RowsView rows,
                                                       const InterventionalOptions& options,
                                                       MatrixView<float> out, ThreadPool* pool) {
  if (absl::Status s = CheckInterventionalCall(forest, rows, options, out); !s.ok()) return s;
  if (absl::Status s = CheckLayoutPlayers(layout, options.groups); !s.ok()) return s;
  if (!PathFormExplainsInteractions(forest, options) || !layout.long_paths.empty()) {
    return absl::FailedPreconditionError(
        "the path form of interventional interaction values explains margins (or an identity "
        "link's probabilities) of models whose paths have at most 32 elements");
  }
  IterationRange range;
  (void)ResolveIterationRange(forest, options.iteration_begin, options.iteration_end, &range);
  // An identity link's probability space: the margin's values and bias over this.
  const double divisor = MarginFormDivisor(forest, options.output_space, range.size());
  const std::vector<uint32_t> paths = PathsInRange(layout, range.begin, range.end);
  const int k = forest.num_outputs;
  const int64_t f1 = layout.num_players + 1;
  std::vector<double> bias = InterventionalBias(forest, il, range.begin, range.end);
  for (double& b : bias) b /= divisor;
  const double* weights = il.Weights(options.attribution);
  // Rows are independent and each is computed by one thread, paths in order: deterministic.
  ParallelFor(pool, rows.rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> phi(k * f1), inter(k * f1 * f1);
    for (int64_t r = begin; r < end; ++r) {
      std::fill(phi.begin(), phi.end(), 0.0);
      std::fill(inter.begin(), inter.end(), 0.0);
      for (uint32_t p : paths) {
        AddPathInteractions(layout, il, weights, p, rows.Row(r), f1, phi.data(), inter.data());
      }
      if (divisor != 1.0) {
        for (double& v : phi) v /= divisor;
        for (double& v : inter) v /= divisor;
      }
      StoreExplainedRow(bias, f1, phi.data(), inter.data(), out.Row(r));
    }
  });
  return absl::OkStatus();
}

}  // namespace grove
