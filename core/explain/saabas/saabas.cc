#include "core/explain/saabas/saabas.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/common/thread_pool.h"
#include "core/explain/cover_fraction.h"
#include "core/explain/saabas/saabas_walk.h"
#include "core/model/traverse.h"

namespace grove {
namespace {

// Expected values (width each) of node i's subtree into mean[i * width ...], children first.
// Iterative: trees may be kMaxTreeDepth deep.
void FillExpectedValues(const Node* nodes, int32_t num_nodes, const double* leaf_values,
                        int width, double* mean) {
  std::vector<int32_t> order;  // preorder: a parent before its children
  order.reserve(num_nodes);
  std::vector<int32_t> stack = {0};
  while (!stack.empty()) {
    const int32_t i = stack.back();
    stack.pop_back();
    order.push_back(i);
    if (!nodes[i].is_leaf()) {
      stack.push_back(nodes[i].right);
      stack.push_back(nodes[i].left);
    }
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Node& n = nodes[*it];
    double* m = mean + static_cast<int64_t>(*it) * width;
    if (n.is_leaf()) {
      for (int b = 0; b < width; ++b) m[b] = leaf_values[n.payload + b];
      continue;
    }
    const double wl = CoverFraction(nodes[n.left].cover, n.cover);
    const double wr = CoverFraction(nodes[n.right].cover, n.cover);
    for (int b = 0; b < width; ++b) {
      m[b] = wl * mean[static_cast<int64_t>(n.left) * width + b] +
             wr * mean[static_cast<int64_t>(n.right) * width + b];
    }
  }
}

// A block's accumulators stay within about this (L2-sized), and a block has at most
// kMaxBlockRows rows.
constexpr int64_t kBlockBytes = int64_t{512} << 10;
constexpr int64_t kMaxBlockRows = 32;

// One pool thread's accumulators, grown to the largest call it has served.
std::vector<double>& ThreadAccumulators(size_t size) {
  thread_local std::vector<double> phi;
  if (phi.size() < size) phi.resize(size);
  return phi;
}

}  // namespace

int64_t SaabasModel::Bytes() const {
  return static_cast<int64_t>((steps.size() + root_expected.size()) * sizeof(double) +
                              (step_begin.size() + root_begin.size()) * sizeof(int64_t));
}

absl::StatusOr<SaabasModel> BuildSaabasModel(const Forest& forest) {
  if (absl::Status s = CheckExplainable(forest); !s.ok()) return s;
  // A split tree whose root has cover 0 was saved without covers (a LightGBM file without
  // internal_count, a CatBoost one without leaf_weights): every expected value would be 0 and a
  // row's whole leaf value would go to its last split's feature.
  for (size_t t = 0; t < forest.trees.size(); ++t) {
    const Node* nodes = forest.TreeNodes(static_cast<int>(t));
    if (forest.trees[t].num_nodes > 1 && !(nodes[0].cover > 0)) {
      return absl::FailedPreconditionError(absl::StrCat(
          forest.source.empty() ? "<memory>" : forest.source, ": tree ", t,
          " has no node covers (the model file does not record how many training rows reached "
          "each node), which Saabas attributions weigh expected values by"));
    }
  }
  SaabasModel model;
  const size_t num_trees = forest.trees.size();
  model.step_begin.resize(num_trees);
  model.root_begin.resize(num_trees);
  int64_t steps = 0, roots = 0;
  for (size_t t = 0; t < num_trees; ++t) {
    model.step_begin[t] = steps;
    model.root_begin[t] = roots;
    steps += static_cast<int64_t>(forest.trees[t].num_nodes) * forest.trees[t].leaf_width;
    roots += forest.trees[t].leaf_width;
  }
  model.steps.assign(steps, 0.0);
  model.root_expected.assign(roots, 0.0);
  std::vector<double> mean;
  for (size_t t = 0; t < num_trees; ++t) {
    const Tree& tree = forest.trees[t];
    const int width = tree.leaf_width;
    const Node* nodes = forest.TreeNodes(static_cast<int>(t));
    mean.assign(static_cast<size_t>(tree.num_nodes) * width, 0.0);
    FillExpectedValues(nodes, static_cast<int32_t>(tree.num_nodes), forest.leaf_values.data(),
                       width, mean.data());
    double* step = model.steps.data() + model.step_begin[t];
    for (uint32_t i = 0; i < tree.num_nodes; ++i) {
      if (nodes[i].is_leaf()) continue;
      for (int32_t child : {nodes[i].left, nodes[i].right}) {
        for (int b = 0; b < width; ++b) {
          step[static_cast<int64_t>(child) * width + b] =
              tree.weight * (mean[static_cast<int64_t>(child) * width + b] -
                             mean[static_cast<int64_t>(i) * width + b]);
        }
      }
    }
    for (int b = 0; b < width; ++b) {
      model.root_expected[model.root_begin[t] + b] = tree.weight * mean[b];
    }
  }
  return model;
}

SaabasEngine::SaabasEngine(ForestPtr forest, SaabasModel model, ThreadPool* pool)
    : forest_(std::move(forest)), model_(std::move(model)), pool_(pool) {}

absl::StatusOr<std::unique_ptr<SaabasEngine>> SaabasEngine::Create(ForestPtr forest,
                                                                   ThreadPool* pool) {
  if (forest == nullptr) return absl::InvalidArgumentError("SaabasEngine: no model");
  absl::StatusOr<SaabasModel> model = BuildSaabasModel(*forest);
  if (!model.ok()) return model.status();
  return std::unique_ptr<SaabasEngine>(
      new SaabasEngine(std::move(forest), *std::move(model), pool));
}

absl::Status SaabasEngine::Explain(RowsView rows, const ExplainOptions& options,
                                   MatrixView<float> out, RunInfo* info) const {
  const absl::Time start = absl::Now();
  if (options.interactions) {
    return absl::InvalidArgumentError(
        "Saabas attributions have no interaction values: ask for them without interactions");
  }
  const Forest& forest = *forest_;
  absl::StatusOr<IterationRange> range =
      CheckExplainCall(forest, rows, false, options.iteration_begin, options.iteration_end, out,
                       options.groups);
  if (!range.ok()) return range.status();
  const int32_t* player = options.groups != nullptr ? options.groups->group_of.data() : nullptr;
  const int64_t f1 = NumPlayers(forest.num_features, options.groups) + 1;
  const int num_outputs = forest.num_outputs;
  const int32_t num_trees = static_cast<int32_t>(forest.trees.size());
  const uint32_t* category_bits = forest.category_bits.data();

  const int64_t row_width = static_cast<int64_t>(num_outputs) * f1;
  // Rows go through the trees in blocks, so that a tree read from memory serves the whole block
  // (a large forest does not stay in cache from one row to the next); a block's accumulators
  // are kept within about kBlockBytes.
  const int64_t block_rows =
      std::clamp<int64_t>(kBlockBytes / (row_width * static_cast<int64_t>(sizeof(double))), 1,
                          kMaxBlockRows);

  auto work = [&](int64_t begin, int64_t end) {
    // The block's values, then each output's bias (built once per chunk, in tree order as the
    // reference TreeSHAP sums it).
    std::vector<double>& acc =
        ThreadAccumulators(static_cast<size_t>(block_rows * row_width + num_outputs));
    double* phi = acc.data();
    double* bias = acc.data() + block_rows * row_width;
    for (int k = 0; k < num_outputs; ++k) bias[k] = forest.base_margin[k];
    for (int32_t t = 0; t < num_trees; ++t) {
      if (!forest.TreeInRange(t, range->begin, range->end)) continue;
      const Tree& tree = forest.trees[t];
      const int block = tree.leaf_width == 1 ? tree.group : 0;
      for (int b = 0; b < tree.leaf_width; ++b) {
        bias[block + b] += model_.root_expected[model_.root_begin[t] + b];
      }
    }
    for (int64_t first = begin; first < end; first += block_rows) {
      const int64_t n = std::min(block_rows, end - first);
      std::fill(phi, phi + n * row_width, 0.0);
      for (int32_t t = 0; t < num_trees; ++t) {
        if (!forest.TreeInRange(t, range->begin, range->end)) continue;
        const Tree& tree = forest.trees[t];
        const Node* nodes = forest.TreeNodes(t);
        const double* steps = model_.steps.data() + model_.step_begin[t];
        const int64_t offset = (tree.leaf_width == 1 ? tree.group : 0) * f1;
        for (int64_t i = 0; i < n; ++i) {
          AddSaabasTree(nodes, category_bits, steps, tree.leaf_width, player, rows.Row(first + i),
                        phi + i * row_width + offset, f1);
        }
      }
      for (int64_t i = 0; i < n; ++i) {
        double* p = phi + i * row_width;
        float* o = out.Row(first + i);
        for (int k = 0; k < num_outputs; ++k) {
          p[k * f1 + f1 - 1] = bias[k];
          for (int64_t c = 0; c < f1; ++c) o[k * f1 + c] = static_cast<float>(p[k * f1 + c]);
        }
      }
    }
  };
  // Rows are independent and each is computed by one thread in a fixed order: deterministic.
  ParallelFor(pool_, rows.rows, block_rows, work);
  if (info != nullptr) {
    info->device = "cpu";
    info->strategy = "saabas_cpu";
    info->compute_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  }
  return absl::OkStatus();
}

std::string SaabasEngine::Describe() const {
  return absl::StrCat("saabas_cpu: ", forest_->trees.size(), " trees, ", model_.Bytes(),
                      " bytes of expected-value steps, ",
                      pool_ != nullptr ? pool_->num_threads() : 1, " threads");
}

}  // namespace grove
