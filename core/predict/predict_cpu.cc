// CPU reference predictor: the per-row loop over trees that every GPU strategy is checked against
// (and itself checked against an independent recursive evaluation, tests/predict). Exactness over
// speed: margins are accumulated in double, in the model's tree order, and rounded to float once.
// Trees are walked a few at a time in lockstep only so that their memory loads overlap.
#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/thread_pool.h"
#include "core/model/transform.h"
#include "core/predict/predict.h"
#include "core/model/traverse.h"

namespace grove {

namespace {

// Trees walked together per row (PredictCpu): enough independent node loads in flight to hide
// most of a cache miss each, few enough that the lanes stay in registers.
constexpr size_t kWalkLanes = 8;

// The leaves `row` reaches in trees tree_ids[0, lanes) (lanes <= kWalkLanes), walked in lockstep
// one level per round, so that their node loads -- a dependent chain within each tree -- overlap.
inline void WalkLockstep(const ForestView& view, const int32_t* tree_ids, int lanes,
                         const float* row, const Node** leaves) {
  int32_t at[kWalkLanes];
  for (int j = 0; j < lanes; ++j) {
    leaves[j] = view.TreeNodes(tree_ids[j]);
    at[j] = 0;
  }
  for (bool moved = true; moved;) {
    moved = false;
    for (int j = 0; j < lanes; ++j) {
      const Node& n = leaves[j][at[j]];
      if (IsLeafNode(n)) continue;
      at[j] = NextNode(n, view.category_bits, row);
      moved = true;
    }
  }
  for (int j = 0; j < lanes; ++j) leaves[j] += at[j];
}

int64_t TreesInRange(const Forest& forest, int begin, int end) {
  int64_t n = 0;
  for (int t = 0; t < static_cast<int>(forest.trees.size()); ++t) n += forest.TreeInRange(t, begin, end);
  return n;
}

}  // namespace

int64_t PredictWidth(const Forest& forest, const PredictOptions& options) {
  switch (options.kind) {
    case OutputKind::kMargin: return forest.num_outputs;
    case OutputKind::kPrediction: return forest.PredictionWidth();
    case OutputKind::kLeaf:
      return TreesInRange(forest, options.iteration_begin, options.iteration_end);
  }
  return 0;
}

absl::Status CheckPredictCall(const Forest& forest, RowsView rows, const PredictOptions& options,
                              MatrixView<float> out, IterationRange* range) {
  if (rows.cols != forest.num_features) {
    return absl::InvalidArgumentError(absl::StrCat("rows have ", rows.cols, " columns; the model has ",
                                                   forest.num_features, " features"));
  }
  if (rows.rows < 0 || rows.stride < rows.cols || (rows.rows > 0 && rows.data == nullptr)) {
    return absl::InvalidArgumentError("malformed rows view");
  }
  if (absl::Status s = ResolveIterationRange(forest, options.iteration_begin,
                                             options.iteration_end, range);
      !s.ok()) {
    return s;
  }
  const int64_t width = PredictWidth(forest, options);
  if (out.rows != rows.rows || out.cols != width || out.stride < out.cols ||
      (out.rows > 0 && out.data == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("output is ", out.rows, " x ", out.cols, "; expected ", rows.rows, " x ", width,
                     " for ", OutputKindName(options.kind)));
  }
  return absl::OkStatus();
}

absl::Status PredictCpu(const Forest& forest, RowsView rows, const PredictOptions& options,
                        MatrixView<float> out, ThreadPool* pool) {
  IterationRange range;
  if (absl::Status s = CheckPredictCall(forest, rows, options, out, &range); !s.ok()) return s;
  if (rows.rows == 0) return absl::OkStatus();

  std::vector<int32_t> trees;
  for (int t = 0; t < static_cast<int>(forest.trees.size()); ++t) {
    if (forest.TreeInRange(t, range.begin, range.end)) trees.push_back(t);
  }
  const ForestView view = MakeForestView(forest);
  const TransformParams transform = MakeTransformParams(forest, range.size());
  const int num_outputs = forest.num_outputs;
  const OutputKind kind = options.kind;

  auto work = [&](int64_t begin, int64_t end) {
    std::vector<double> margin(num_outputs);
    const Node* leaves[kWalkLanes];
    for (int64_t r = begin; r < end; ++r) {
      const float* row = rows.Row(r);
      float* o = out.Row(r);
      for (int k = 0; k < num_outputs; ++k) margin[k] = forest.base_margin[k];
      for (size_t t0 = 0; t0 < trees.size(); t0 += kWalkLanes) {
        const int lanes = static_cast<int>(std::min(kWalkLanes, trees.size() - t0));
        WalkLockstep(view, trees.data() + t0, lanes, row, leaves);
        // Leaves in tree order: the same sum, bit for bit, as walking the trees one by one.
        for (int j = 0; j < lanes; ++j) {
          if (kind == OutputKind::kLeaf) {
            o[t0 + j] = static_cast<float>(leaves[j]->leaf_id);
            continue;
          }
          const Tree& tree = view.trees[trees[t0 + j]];
          if (tree.leaf_width == 1) {
            margin[tree.group] += tree.weight * LeafValue(view, *leaves[j], 0, row);
          } else {
            for (int k = 0; k < tree.leaf_width; ++k) {
              margin[k] += tree.weight * LeafValue(view, *leaves[j], k, row);
            }
          }
        }
      }
      if (kind == OutputKind::kMargin) {
        for (int k = 0; k < num_outputs; ++k) o[k] = static_cast<float>(margin[k]);
      } else if (kind == OutputKind::kPrediction) {
        TransformRow(transform, margin.data(), o);
      }
    }
  };
  // Rows are independent and each is computed by one thread in a fixed order: deterministic.
  ParallelFor(pool, rows.rows, PredictCpuGrain(forest), work);
  return absl::OkStatus();
}

int64_t PredictCpuGrain(const Forest& forest) { return forest.trees.size() >= 1000 ? 4 : 32; }

}  // namespace grove
