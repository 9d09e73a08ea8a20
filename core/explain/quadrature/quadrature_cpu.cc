// Quadrature SHAP: Gauss-Legendre rules, per-model preprocessing and the CPU strategy.
// See core/explain/quadrature/quadrature.h for the contract and docs/quadrature.md for the derivation.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/thread_pool.h"
#include "core/explain/quadrature/quadrature.h"
#include "core/explain/quadrature/quadrature_pairs.h"
#include "core/explain/quadrature/quadrature_tree.h"
#include "core/model/traverse.h"

namespace grove {

GaussLegendreRule GaussLegendre01(int points) {
  GaussLegendreRule rule;
  if (points < 1) points = 1;
  const int q = points;
  rule.nodes.resize(q);
  rule.weights.resize(q);
  constexpr double kPi = 3.14159265358979323846;
  // Roots of P_q on [-1, 1] are symmetric; compute the upper half (x > 0 or the middle one) by
  // Newton iteration from the classical cosine guess, then mirror them.
  // P_q(x) and P_q'(x) by the recurrence P_0 = 1, P_1 = x, (k + 1) P_{k+1} = (2k + 1) x P_k - k P_{k-1}
  // and P_q'(x) = q (x P_q - P_{q-1}) / (x^2 - 1) (roots are never at +-1).
  const auto legendre = [q](double x, double* value, double* derivative) {
    double p0 = 1, p1 = x;
    for (int k = 1; k < q; ++k) {
      const double p2 = ((2.0 * k + 1.0) * x * p1 - k * p0) / (k + 1.0);
      p0 = p1;
      p1 = p2;
    }
    *value = p1;
    *derivative = q * (x * p1 - p0) / (x * x - 1.0);
  };
  for (int i = 0; i < (q + 1) / 2; ++i) {
    double x = std::cos(kPi * (i + 0.75) / (q + 0.5));
    double value = 0, derivative = 1;
    for (int iter = 0; iter < 100; ++iter) {
      legendre(x, &value, &derivative);
      const double dx = value / derivative;
      x -= dx;
      if (std::abs(dx) <= 1e-15) break;
    }
    legendre(x, &value, &derivative);
    // Weight on [-1, 1]: 2 / ((1 - x^2) P_q'(x)^2); on [0, 1] half of it, at t = (1 -+ x) / 2.
    const double weight = 1.0 / ((1.0 - x * x) * derivative * derivative);
    rule.nodes[i] = 0.5 * (1.0 - x);
    rule.weights[i] = weight;
    rule.nodes[q - 1 - i] = 0.5 * (1.0 + x);
    rule.weights[q - 1 - i] = weight;
  }
  return rule;
}

GaussLegendreRule AttributionRule(Attribution attribution, int points) {
  if (attribution == Attribution::kShapley) return GaussLegendre01(points);
  GaussLegendreRule rule;
  rule.nodes = {0.5};
  rule.weights = {1.0};
  return rule;
}

// ---------------------------------------------------------------------------------------------
// Preprocessing.

std::vector<double> QuadratureModel::Bias(int iteration_begin, int iteration_end) const {
  std::vector<double> bias(forest->base_margin.begin(), forest->base_margin.end());
  bias.resize(num_outputs, 0.0);
  for (int t = 0; t < static_cast<int>(forest->trees.size()); ++t) {
    if (!forest->TreeInRange(t, iteration_begin, iteration_end)) continue;
    for (int k = 0; k < num_outputs; ++k) bias[k] += tree_expected[t * num_outputs + k];
  }
  return bias;
}

std::string QuadratureModel::Describe() const {
  std::string buckets_text;
  for (const QuadratureBucketRange& b : buckets) {
    absl::StrAppend(&buckets_text, buckets_text.empty() ? "" : ",",
                    b.capacity == 0 ? std::string("long") : absl::StrCat("<=", b.capacity), ":",
                    b.end - b.begin, "(Q<=", b.max_q, ")");
  }
  const std::string trees_text =
      tree_program == nullptr
          ? std::string("none")
          : absl::StrFormat(
                "%d trees, %d edges, %d conditioned steps, %d SHAP / %d interaction tree groups, "
                "%.1f MB",
                tree_program->trees.size(), tree_program->edges.size(),
                tree_program->steps.size(), QuadratureTreeShapGroups(*tree_program),
                QuadratureTreeInteractionGroups(*tree_program), tree_program->Bytes() / 1e6);
  const std::string pairs_text =
      pair_program == nullptr
          ? std::string("none")
          : absl::StrFormat("%d groups, %d pairs, %d output units, %d cells, %.1f MB",
                            pair_program->groups.size(), pair_program->pairs.size(),
                            pair_program->output_splits.size() - 1,
                            pair_program->unit_cells.size(), pair_program->Bytes() / 1e6);
  return absl::StrFormat(
      "quadrature paths=%d elements=%d max_unique=%d max_points=%d buckets=[%s] "
      "fixed_point=2^%d tree_program=%s pair_program=%s build=%.3fs",
      paths.size(), elements.size(), max_unique, max_q, buckets_text,
      static_cast<int>(std::lround(std::log2(fixed_point_scale))), trees_text, pairs_text,
      build_seconds);
}

absl::StatusOr<QuadratureModelPtr> BuildQuadratureModel(ForestPtr forest, PathLayoutPtr layout,
                                                        Attribution attribution) {
  if (forest == nullptr || layout == nullptr) {
    return absl::InvalidArgumentError("BuildQuadratureModel: no forest or path layout");
  }
  if (layout->num_features != forest->num_features || layout->num_outputs != forest->num_outputs) {
    return absl::InvalidArgumentError("BuildQuadratureModel: path layout of another forest");
  }
  const auto start = std::chrono::steady_clock::now();
  auto model = std::make_shared<QuadratureModel>();
  model->forest = forest;
  model->layout = layout;
  model->num_features = forest->num_features;
  model->num_outputs = forest->num_outputs;
  model->attribution = attribution;
  model->tree_expected.assign(forest->trees.size() * static_cast<size_t>(forest->num_outputs), 0.0);

  // Order: bucket 4, 8, 16, 32, then long paths; stable within a bucket (layout order).
  const auto bucket_rank = [](int capacity) { return capacity == 0 ? 1000 : capacity; };
  std::vector<uint32_t> order;
  order.reserve(layout->paths.size());
  double bound = 0;
  for (uint32_t p = 0; p < layout->paths.size(); ++p) {
    const PathInfo& info = layout->paths[p];
    const int n = info.length - 1;
    // Expected value: sum over leaves of value * product of every zero fraction on the path.
    double zero_product = 1;
    for (int i = 0; i < info.length; ++i) {
      zero_product *= layout->elements[info.element_begin + i].zero_fraction;
    }
    for (int k = 0; k < info.width; ++k) {
      const double v = layout->values[info.value_begin + k];
      model->tree_expected[static_cast<size_t>(info.tree) * forest->num_outputs + info.group + k] +=
          v * zero_product;
      // Per path and output, |phi_i| <= |v|, |phi_ij| <= |v| / 2 and the path's diagonal part is
      // at most |v| (1 + (n - 1) / 2): every partial sum is bounded by the sum of these.
      bound += std::abs(v) * (1.0 + 0.5 * n);
    }
    if (n == 0) {
      ++model->skipped_paths;
      continue;
    }
    order.push_back(p);
  }
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return bucket_rank(QuadratureBucket(layout->paths[a].length - 1)) <
           bucket_rank(QuadratureBucket(layout->paths[b].length - 1));
  });

  model->paths.reserve(order.size());
  for (uint32_t p : order) {
    const PathInfo& info = layout->paths[p];
    QuadraturePath path;
    path.n = static_cast<uint16_t>(info.length - 1);
    path.q = static_cast<uint16_t>(AttributionPoints(attribution, path.n));
    path.element_begin = static_cast<uint32_t>(model->elements.size());
    path.value_begin = info.value_begin;
    path.width = info.width;
    path.capacity = static_cast<uint16_t>(QuadratureBucket(path.n));
    path.group = info.group;
    path.iteration = info.iteration;
    path.tree = info.tree;
    for (int i = 1; i < info.length; ++i) {
      model->elements.push_back(layout->elements[info.element_begin + i]);
    }
    model->max_unique = std::max<int>(model->max_unique, path.n);
    model->max_q = std::max<int>(model->max_q, path.q);
    if (model->buckets.empty() || model->buckets.back().capacity != path.capacity) {
      QuadratureBucketRange range;
      range.capacity = path.capacity;
      range.begin = range.end = static_cast<uint32_t>(model->paths.size());
      model->buckets.push_back(range);
    }
    model->buckets.back().end += 1;
    model->buckets.back().max_q = std::max<int>(model->buckets.back().max_q, path.q);
    model->paths.push_back(path);
  }

  // Rules for every point count up to max_q, concatenated: rule q starts at rule_offsets[q].
  model->rule_offsets.assign(model->max_q + 1, 0);
  for (int q = 1; q <= model->max_q; ++q) {
    model->rule_offsets[q] = static_cast<uint32_t>(model->rule_nodes.size());
    GaussLegendreRule rule = AttributionRule(attribution, q);
    model->rule_nodes.insert(model->rule_nodes.end(), rule.nodes.begin(), rule.nodes.end());
    model->rule_weights.insert(model->rule_weights.end(), rule.weights.begin(), rule.weights.end());
  }
  for (QuadraturePath& path : model->paths) path.rule_begin = model->rule_offsets[path.q];

  if (!std::isfinite(bound)) {
    return absl::InvalidArgumentError("BuildQuadratureModel: leaf values overflow double");
  }
  model->contribution_bound = bound;
  // scale = 2^e with bound * scale <= 2^61: sums of up to 4 such bounds still fit in int64.
  const int e = bound > 0 ? static_cast<int>(std::floor(61.0 - std::log2(bound))) : 61;
  model->fixed_point_scale = std::ldexp(1.0, std::clamp(e, -1000, 1000));
  model->tree_program = BuildQuadratureTreeProgram(*forest, attribution);
  model->pair_program = BuildQuadraturePairProgram(*model);
  model->build_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return QuadratureModelPtr(std::move(model));
}

// ---------------------------------------------------------------------------------------------
// CPU strategy.

namespace {

// Most segments one (row, unit of outputs) of pair-kernel interactions is cut into.
constexpr int kMaxPairSegments = 16;
// Most per-pair sums (doubles) a call holds for its segments: 64 MB.
constexpr int64_t kMaxPairValues = int64_t{1} << 23;

// Per-thread scratch for one path.
struct PathScratch {
  std::vector<double> z, d, work;
  std::vector<int32_t> feature;
  void Reserve(int n) {
    const size_t len = std::max(n, 32);
    z.resize(len);
    d.resize(len);
    feature.resize(len);
    work.resize(5 * len);
  }
};

template <int N, typename Sink>
void RunShap(const double* z, const double* d, const int32_t* feature, int n, const double* t,
             const double* w, int q, const double* values, int width, double* work, Sink& sink) {
  QuadraturePathShap<N, double>(z, d, feature, n, t, w, q, values, width, work, sink);
}

// Calls fn(std::integral_constant<int, N>) with the compile-time length N of a path's register
// bucket (0: run-time length).
template <typename Fn>
void WithCapacity(int capacity, Fn&& fn) {
  switch (capacity) {
    case 4: fn(std::integral_constant<int, 4>{}); break;
    case 8: fn(std::integral_constant<int, 8>{}); break;
    case 16: fn(std::integral_constant<int, 16>{}); break;
    case 32: fn(std::integral_constant<int, 32>{}); break;
    default: fn(std::integral_constant<int, 0>{}); break;
  }
}

}  // namespace

// What one work item of ExplainQuadratureCpu writes to: the per-path scratch of every kernel and
// the double accumulators of its rows (up to 49 MB a row for the interactions of a 785-feature,
// 10-class model). Kept for the call's later items (and, with a caller's pool, for later calls),
// so that a row pays neither an allocation nor the page faults and zeroing of fresh memory.
struct QuadratureCpuWorkspace {
  PathScratch path;
  QuadratureTreeScratch tree;
  QuadraturePairScratch pairs;
  std::vector<double> acc;

  int64_t Bytes() const;
};

namespace {

template <typename T>
int64_t CapacityBytes(const std::vector<T>& v) {
  return static_cast<int64_t>(v.capacity() * sizeof(T));
}

// A call's workspaces: one per work item in flight, at most one per thread, every one kept for
// the call's later items whatever its size; taken first from the caller's pool (`kept`, may be
// null) and given back to it when the call ends (it keeps what its bound allows).
class CallWorkspaces {
 public:
  explicit CallWorkspaces(QuadratureCpuWorkspaces* kept) : kept_(kept) {}
  ~CallWorkspaces() {
    if (kept_ == nullptr) return;
    for (std::unique_ptr<QuadratureCpuWorkspace>& w : mine_.TakeAll()) kept_->Give(std::move(w));
  }
  CallWorkspaces(const CallWorkspaces&) = delete;
  CallWorkspaces& operator=(const CallWorkspaces&) = delete;

  std::unique_ptr<QuadratureCpuWorkspace> Take() {
    if (std::unique_ptr<QuadratureCpuWorkspace> w = mine_.Take()) return w;
    return kept_ != nullptr ? kept_->Take() : std::make_unique<QuadratureCpuWorkspace>();
  }
  void Give(std::unique_ptr<QuadratureCpuWorkspace> w) { mine_.Give(std::move(w)); }

 private:
  QuadratureCpuWorkspaces* const kept_;
  FreeList<QuadratureCpuWorkspace> mine_;  // unbounded: the call's own
};

}  // namespace

int64_t QuadratureCpuWorkspace::Bytes() const {
  // The object itself counts too: a workspace a call took but never used is not free to keep.
  int64_t b = static_cast<int64_t>(sizeof(QuadratureCpuWorkspace)) + CapacityBytes(path.z) +
              CapacityBytes(path.d) + CapacityBytes(path.work) + CapacityBytes(path.feature) +
              CapacityBytes(acc);
  for (const auto* v : {&tree.stack, &tree.decisions, &tree.accumulators,
                        &tree.group_accumulators, &tree.interaction_accumulators}) {
    b += CapacityBytes(*v);
  }
  b += CapacityBytes(tree.edge_columns) + CapacityBytes(tree.columns);
  for (const auto* v : {&pairs.z, &pairs.d, &pairs.factors, &pairs.prefix, &pairs.suffix,
                        &pairs.sums, &pairs.pairs, &pairs.local, &pairs.cells}) {
    b += CapacityBytes(*v);
  }
  return b;
}

QuadratureCpuWorkspaces::QuadratureCpuWorkspaces(int64_t retain_bytes)
    : kept_(std::max<int64_t>(0, retain_bytes)) {}

QuadratureCpuWorkspaces::~QuadratureCpuWorkspaces() = default;

std::unique_ptr<QuadratureCpuWorkspace> QuadratureCpuWorkspaces::Take() {
  if (std::unique_ptr<QuadratureCpuWorkspace> w = kept_.Take()) return w;
  return std::make_unique<QuadratureCpuWorkspace>();
}

void QuadratureCpuWorkspaces::Give(std::unique_ptr<QuadratureCpuWorkspace> w) {
  kept_.Give(std::move(w));
}

int64_t QuadratureCpuWorkspaces::RetainedBytes() const { return kept_.KeptBytes(); }

int QuadratureCpuWorkspaces::RetainedCount() const { return kept_.KeptCount(); }

int QuadraturePairUnitsPerRow(const QuadratureModel& model) {
  const bool pairs_only =
      model.tree_program == nullptr || !QuadratureTreeServesInteractions(*model.tree_program);
  if (!pairs_only || model.pair_program == nullptr) return 0;
  return static_cast<int>(model.pair_program->output_splits.size()) - 1;
}

int QuadraturePairSegmentsPerTask(const QuadratureModel& model, int64_t rows, int threads) {
  const int units = QuadraturePairUnitsPerRow(model);
  const int64_t tasks = rows * units;
  int segments = 1;
  if (tasks <= 0 || tasks >= threads) return segments;
  // Segments need the rows' per-pair sums at once.
  const QuadraturePairProgram& pairs = *model.pair_program;
  if (rows * static_cast<int64_t>(pairs.pairs.size()) * pairs.max_width > kMaxPairValues) {
    return segments;
  }
  double best = 1.0;
  for (int s = 2; s <= kMaxPairSegments; ++s) {
    const double cost =
        static_cast<double>((tasks * s + threads - 1) / threads) / s + 0.01 * (s - 1);
    if (cost < best) {
      best = cost;
      segments = s;
    }
  }
  return segments;
}

namespace {

// The outputs of every interaction group summed (the outputs' matrices a block's group entries
// hold: the outputs for a multi-output model, whose groups split them; one per group for one
// output), and in `offsets` (if not null) each group's first, in group order.
int64_t InteractionGroupOutputs(const QuadratureTreeProgram& program,
                                std::vector<int64_t>* offsets) {
  const int groups = QuadratureTreeInteractionGroups(program);
  int64_t total = 0;
  if (offsets != nullptr) offsets->assign(groups, 0);
  for (int g = 0; g < groups; ++g) {
    if (offsets != nullptr) (*offsets)[g] = total;
    const QuadratureTreeGroupSpan span = QuadratureTreeInteractionGroup(program, g);
    total += span.output_end - span.output_begin;
  }
  return total;
}

}  // namespace

QuadratureTreeInteractionTasks QuadratureTreeInteractionTasksFor(
    const QuadratureTreeProgram& program, int64_t rows, int threads) {
  QuadratureTreeInteractionTasks tasks;
  const int64_t blocks = (rows + kQuadratureTreeLanes - 1) / kQuadratureTreeLanes;
  if (blocks <= 0) return tasks;
  threads = std::max(threads, 1);
  const int64_t f1 = program.num_features + 1;
  const int64_t most_ranges = std::max(program.num_features, 1);  // the bias row has none alone
  // Cache: a share's interaction accumulators (its features' rows x every output's columns, a SIMD
  // vector each) within about kQuadratureShareBytes (ranges are cut by work, not rows, so they
  // vary); the conditioned passes scatter into them.
  const int64_t block_bytes = static_cast<int64_t>(program.num_features) * program.num_outputs *
                              f1 * kQuadratureTreeLanes * static_cast<int64_t>(sizeof(double));
  const int fit = static_cast<int>(std::clamp<int64_t>(
      (block_bytes + kQuadratureShareBytes - 1) / kQuadratureShareBytes, 1, most_ranges));
  tasks.ranges = fit;
  if (blocks >= 2 * static_cast<int64_t>(threads)) return tasks;
  // With one interaction group, each block's SHAP pass (for the diagonals) is a task of its own
  // beside its ranges (QuadratureTreeDiagonalFromShap); with several, each (group, range) task
  // runs its group's pass.
  const bool shap_once = QuadratureTreeDiagonalFromShap(program);
  tasks.diagonal_task = shap_once;
  // Threads: the fewest tasks whose rounds x steps come within 5% of the least. A task that runs
  // its trees' SHAP pass repeats it for every range, work that a pool shared with other calls
  // pays for, and no range holds less than its busiest feature's conditioned passes (a matrix row
  // is not cut); group tasks each take about 1/groups of both. A block's own pass task runs beside
  // its ranges: it bounds the call from below.
  const double pass_steps = static_cast<double>(program.edges.size());
  const double shap_steps = shap_once ? 0.0 : pass_steps;
  const double condition_steps = 2.0 * static_cast<double>(program.steps.size());
  const int most = static_cast<int>(std::min<int64_t>(most_ranges, 4 * threads));
  const int groups = QuadratureTreeInteractionGroups(program);
  const int64_t group_outputs = InteractionGroupOutputs(program, nullptr);
  const int64_t group_sum_bytes = blocks * kQuadratureTreeLanes * group_outputs * f1 * f1 *
                                  static_cast<int64_t>(sizeof(double));
  const int most_groups = group_sum_bytes <= kQuadratureGroupSumBytes ? groups : 1;
  // A group task also writes its range's entries (its outputs' matrices) for the merge to add:
  // charged kMergeStepsPerCell steps a cell (lanes of the block's rows).
  constexpr double kMergeStepsPerCell = 4;
  const double cells = static_cast<double>(group_outputs * f1 * f1) / groups;
  auto cost = [&](int g, int s) {
    const double merge = g > 1 ? kMergeStepsPerCell * cells / s : 0.0;
    const double task =
        (shap_steps + condition_steps * QuadratureTreeRangeShare(program, s)) / g + merge;
    if (shap_once) {
      // The block's pass beside its ranges: the work spread over the threads, or the longest
      // task, whichever is longer.
      const double work = static_cast<double>(blocks) * (s * task + pass_steps);
      return std::max(work / threads, std::max(task, pass_steps));
    }
    const int64_t rounds = (blocks * g * s + threads - 1) / threads;
    return static_cast<double>(rounds) * task;
  };
  double least = std::numeric_limits<double>::infinity();
  for (int g : {1, most_groups}) {
    for (int s = 1; s <= most; ++s) least = std::min(least, cost(g, s));
  }
  int64_t fewest = std::numeric_limits<int64_t>::max();
  for (int g : {1, most_groups}) {
    for (int s = 1; s <= most; ++s) {
      if (cost(g, s) <= 1.05 * least && int64_t{g} * s < fewest) {
        fewest = int64_t{g} * s;
        tasks.group_tasks = g;
        tasks.ranges = std::max(s, fit);
      }
    }
  }
  return tasks;
}

int QuadratureTreeShapGroupTasks(const QuadratureTreeProgram& program, int64_t rows,
                                 int threads) {
  const int groups = QuadratureTreeShapGroups(program);
  const int64_t blocks = (rows + kQuadratureTreeLanes - 1) / kQuadratureTreeLanes;
  if (groups <= 1 || blocks <= 0 || blocks >= threads) return 1;
  const int64_t width = static_cast<int64_t>(program.num_outputs) * (program.num_features + 1);
  const int64_t bytes = blocks * groups * kQuadratureTreeLanes * width *
                        static_cast<int64_t>(sizeof(double));
  return bytes <= kQuadratureGroupSumBytes ? groups : 1;
}

absl::Status ExplainQuadratureCpu(const QuadratureModel& model, RowsView rows,
                                  const ExplainOptions& options, MatrixView<float> out,
                                  ThreadPool* pool, QuadratureCpuWorkspaces* kept,
                                  QuadratureTreeInteractionTasks* ran) {
  if (ran != nullptr) *ran = QuadratureTreeInteractionTasks{};
  const Forest& forest = *model.forest;
  absl::StatusOr<IterationRange> range = CheckExplainCall(
      forest, rows, options.interactions, options.iteration_begin, options.iteration_end, out);
  if (!range.ok()) return range.status();
  const bool interactions = options.interactions;
  const int64_t width = ExplainWidth(forest, interactions);
  if (rows.rows == 0) return absl::OkStatus();

  const int num_features = model.num_features;
  const int num_outputs = model.num_outputs;
  const int64_t f1 = num_features + 1;
  const std::vector<double> bias = model.Bias(range->begin, range->end);
  const PathLayout& layout = *model.layout;
  const uint32_t* category_bits = layout.category_bits.data();

  // The trees the tree program serves are explained by it; every other path runs per path.
  const QuadratureTreeProgram* program = model.tree_program.get();
  if (program != nullptr && interactions && !QuadratureTreeServesInteractions(*program)) {
    program = nullptr;
  }
  std::vector<uint32_t> path_ids;
  path_ids.reserve(model.paths.size());
  for (uint32_t p = 0; p < model.paths.size(); ++p) {
    const QuadraturePath& path = model.paths[p];
    if (path.iteration < range->begin || path.iteration >= range->end) continue;
    if (program != nullptr && program->served[path.tree]) continue;
    path_ids.push_back(p);
  }
  const int64_t chunk = program != nullptr ? QuadratureTreeChunkRows(*program, interactions) : 1;
  CallWorkspaces workspaces(kept);

  if (interactions && program == nullptr) {
    // Every tree by the pair kernel: one task per row and unit of outputs the program sums
    // apart (a class of a multi-class model). A task sums its unit's cells in the kernel's
    // fixed order and writes its outputs' matrices whole. Tasks are claimed one at a time from a
    // counter by one loop per thread, so a batch ends within a task of the average (ParallelFor's
    // chunks, 4 tasks for 20 rows of 10 classes on 16 threads, would leave threads idle for up
    // to 4). With fewer tasks than threads, each (row, unit) is cut further into segments of its
    // groups, which write their pairs' sums to a per-row array; the last segment to finish adds
    // them into the cells in the kernel's order. Either way every cell is the same bits, for
    // every batch and thread count.
    const QuadraturePairProgram& pairs = *model.pair_program;
    const int64_t units = static_cast<int64_t>(pairs.output_splits.size()) - 1;
    const int64_t block_size = f1 * f1;
    const int threads = pool != nullptr ? pool->num_threads() + 1 : 1;
    const int64_t row_units = rows.rows * units;
    const int64_t row_values = static_cast<int64_t>(pairs.pairs.size()) * pairs.max_width;
    const int segments = QuadraturePairSegmentsPerTask(model, rows.rows, threads);
    const int64_t tasks = row_units * segments;
    std::atomic<int64_t> next{0};
    if (segments == 1) {
      ParallelFor(pool, std::min<int64_t>(tasks, threads), 1, [&](int64_t, int64_t) {
        std::unique_ptr<QuadratureCpuWorkspace> workspace = workspaces.Take();
        for (int64_t task; (task = next.fetch_add(1, std::memory_order_relaxed)) < tasks;) {
          const int64_t r = task / units;
          const int unit = static_cast<int>(task % units);
          WriteQuadraturePairInteractions(pairs, model, rows.Row(r), range->begin, range->end,
                                          unit, bias.data(), &workspace->pairs,
                                          out.Row(r) + pairs.output_splits[unit] * block_size);
        }
        workspaces.Give(std::move(workspace));
      });
      return absl::OkStatus();
    }
    std::vector<uint32_t> bounds(units * (segments + 1));
    for (int64_t u = 0; u < units; ++u) {
      QuadraturePairSegments(pairs, static_cast<int>(u), segments,
                             bounds.data() + u * (segments + 1));
    }
    // Not zeroed: a merge reads only the pairs its segments wrote.
    std::unique_ptr<double[]> pair_values(new double[rows.rows * row_values]);
    std::unique_ptr<std::atomic<int>[]> done(new std::atomic<int>[row_units]);
    for (int64_t i = 0; i < row_units; ++i) done[i].store(0, std::memory_order_relaxed);
    ParallelFor(pool, std::min<int64_t>(tasks, threads), 1, [&](int64_t, int64_t) {
      std::unique_ptr<QuadratureCpuWorkspace> workspace = workspaces.Take();
      for (int64_t task; (task = next.fetch_add(1, std::memory_order_relaxed)) < tasks;) {
        const int64_t row_unit = task / segments, segment = task % segments;
        const int64_t r = row_unit / units;
        const int unit = static_cast<int>(row_unit % units);
        const uint32_t* b = bounds.data() + unit * (segments + 1);
        double* values = pair_values.get() + r * row_values;
        SumQuadraturePairSegment(pairs, model, rows.Row(r), range->begin, range->end, unit,
                                 b[segment], b[segment + 1], &workspace->pairs, values);
        // The last segment of a (row, unit) sees every other's writes (acquire-release).
        if (done[row_unit].fetch_add(1, std::memory_order_acq_rel) + 1 == segments) {
          WriteQuadraturePairInteractionsFromPairs(
              pairs, model, range->begin, range->end, unit, values, bias.data(),
              &workspace->pairs, out.Row(r) + pairs.output_splits[unit] * block_size);
        }
      }
      workspaces.Give(std::move(workspace));
    });
    return absl::OkStatus();
  }

  const int threads = pool != nullptr ? pool->num_threads() + 1 : 1;
  const int64_t unit = program != nullptr ? kQuadratureTreeLanes : 1;
  const int64_t units = (rows.rows + unit - 1) / unit;
  const int shap_groups = program != nullptr ? QuadratureTreeShapGroups(*program) : 1;
  const int64_t shap_width = static_cast<int64_t>(num_outputs) * f1;

  // Interactions where the tree program explains every path: each block's matrix rows in ranges,
  // each its own task (QuadratureTreeInteractionTasksFor: ranges whose accumulators stay in
  // cache, and with fewer blocks than threads, ranges and tree groups for the threads). Each
  // matrix row is computed whole by one task: the same bits either way. The ranges hold about
  // equal conditioned work, not equal rows: a few features carry most of a model's splits.
  int64_t splits = 1;
  std::vector<int> bounds{0, static_cast<int>(f1)};
  const int inter_groups = program != nullptr ? QuadratureTreeInteractionGroups(*program) : 1;
  int inter_group_tasks = 1;
  bool diagonal_task = false;
  if (interactions && program != nullptr && path_ids.empty()) {
    const QuadratureTreeInteractionTasks plan =
        QuadratureTreeInteractionTasksFor(*program, rows.rows, threads);
    inter_group_tasks = plan.group_tasks;
    diagonal_task = plan.diagonal_task;
    if (plan.ranges > 1) {
      QuadratureTreeMatrixRowRanges(*program, plan.ranges, &bounds);
      splits = static_cast<int64_t>(bounds.size()) - 1;
    }
    if (ran != nullptr) {
      ran->group_tasks = inter_group_tasks;
      ran->ranges = static_cast<int>(splits);
      ran->diagonal_task = diagonal_task;
    }
  }
  // A one-group program's few rows (diagonal_task): the ranges add off-diagonal entries only and
  // each block's SHAP pass is a task of its own beside them (QuadratureTreeDiagonalFromShap);
  // `work` sets each diagonal from it, the bits the ranges' own passes would give.

  // SHAP values of fewer blocks than threads: each block's tree groups are tasks of their own,
  // summed into group_sums ([block][group][lane][column]); `work` then adds a row's group sums in
  // group order, as AddQuadratureTreeShap does on one thread: the same bits either way.
  const int group_tasks = !interactions && program != nullptr
                              ? QuadratureTreeShapGroupTasks(*program, rows.rows, threads)
                              : 1;
  std::unique_ptr<double[]> group_sums;
  if (group_tasks > 1) {
    // Zeroed by the tasks, each its own sums (in parallel, where they are first touched).
    group_sums.reset(new double[units * group_tasks * unit * width]);
    ParallelFor(pool, units * group_tasks, 1, [&](int64_t first, int64_t last) {
      std::unique_ptr<QuadratureCpuWorkspace> workspace = workspaces.Take();
      for (int64_t task = first; task < last; ++task) {
        const int64_t u = task / group_tasks;
        const int g = static_cast<int>(task % group_tasks);
        const int64_t begin = u * unit;
        const RowsView block{rows.Row(begin), std::min(unit, rows.rows - begin), rows.cols,
                             rows.stride};
        double* sums = group_sums.get() + task * unit * width;
        std::fill(sums, sums + block.rows * width, 0.0);
        AddQuadratureTreeShap(*program, forest.category_bits.data(), block, range->begin,
                              range->end, g, g + 1, &workspace->tree, sums);
      }
      workspaces.Give(std::move(workspace));
    });
  }

  // Group tasks (and a one-group program's ranges beside its diagonal task) write their entries to
  // group_inter ([block][group][range's rows]: a group's outputs' matrices, its ranges side by
  // side, each laid out as `work`'s accumulators for those outputs), which `work` adds in group
  // order; a diagonal task writes its block's SHAP values to block_shap ([block][lane][column]).
  std::vector<int64_t> group_outputs_before;  // per group, the outputs of the groups before it
  std::vector<QuadratureTreeGroupSpan> spans;  // per interaction group
  const bool entry_tasks = inter_group_tasks > 1 || diagonal_task;
  const int64_t block_matrices =
      program != nullptr && entry_tasks
          ? unit * InteractionGroupOutputs(*program, &group_outputs_before) * f1 * f1
          : 0;
  for (int g = 0; entry_tasks && g < inter_groups; ++g) {
    spans.push_back(QuadratureTreeInteractionGroup(*program, g));
  }
  // Group g's entries of block u, for its outputs and the matrix rows from `row_begin`.
  auto group_entries = [&](double* base, int64_t u, int g, int row_begin) {
    const QuadratureTreeGroupSpan& span = spans[g];
    return base + u * block_matrices + unit * group_outputs_before[g] * f1 * f1 +
           unit * (span.output_end - span.output_begin) * row_begin * f1;
  };
  std::unique_ptr<double[]> group_inter, block_shap;
  if (entry_tasks) {
    // Zeroed by the tasks, each its own entries (in parallel, where they are first touched).
    group_inter.reset(new double[units * block_matrices]);
    if (diagonal_task) block_shap.reset(new double[units * unit * shap_width]);
    // Per block: its diagonal task first (the longest), then (group, range) tasks.
    const int64_t per_block = (diagonal_task ? 1 : 0) + inter_group_tasks * splits;
    ParallelFor(pool, units * per_block, 1, [&](int64_t first, int64_t last) {
      std::unique_ptr<QuadratureCpuWorkspace> workspace = workspaces.Take();
      for (int64_t task = first; task < last; ++task) {
        const int64_t u = task / per_block;
        const int64_t begin = u * unit;
        const RowsView block{rows.Row(begin), std::min(unit, rows.rows - begin), rows.cols,
                             rows.stride};
        int64_t t = task % per_block;
        if (diagonal_task && t-- == 0) {
          double* shap = block_shap.get() + u * unit * shap_width;
          std::fill(shap, shap + block.rows * shap_width, 0.0);
          AddQuadratureTreeInteractionShap(*program, forest.category_bits.data(), block,
                                           range->begin, range->end, 0, inter_groups,
                                           &workspace->tree, shap);
          continue;
        }
        const int64_t part = t % splits;
        const int g = static_cast<int>(t / splits);
        const QuadratureTreeGroupSpan& span = spans[g];
        double* entries = group_entries(group_inter.get(), u, g, bounds[part]);
        const int64_t matrix_rows = bounds[part + 1] - bounds[part];
        std::fill(entries,
                  entries + block.rows * (span.output_end - span.output_begin) * matrix_rows * f1,
                  0.0);
        AddQuadratureTreeInteractions(*program, forest.category_bits.data(), block, range->begin,
                                      range->end, g, g + 1, bounds[part], bounds[part + 1],
                                      /*diagonal=*/!diagonal_task, &workspace->tree, entries);
      }
      workspaces.Give(std::move(workspace));
    });
  }

  // Rows [begin, end); interactions: rows [row_begin, row_end) of each output's matrix only,
  // accumulated as [output][row][column] (the whole matrices when the range is all of them).
  auto work = [&](int64_t begin, int64_t end, int row_begin, int row_end) {
    std::unique_ptr<QuadratureCpuWorkspace> workspace = workspaces.Take();
    PathScratch& scratch = workspace->path;
    scratch.Reserve(model.max_unique);
    QuadratureTreeScratch& tree_scratch = workspace->tree;
    QuadraturePairScratch& pair_scratch = workspace->pairs;
    std::vector<double>& acc_rows = workspace->acc;
    const int64_t matrix_rows = row_end - row_begin;
    const int64_t acc_width = interactions ? num_outputs * matrix_rows * f1 : width;
    const size_t acc_size = static_cast<size_t>(std::min(chunk, end - begin) * acc_width);
    if (acc_rows.size() < acc_size) acc_rows.resize(acc_size);
    for (int64_t first = begin; first < end; first += chunk) {
      const int64_t count = std::min(chunk, end - first);
      std::fill(acc_rows.begin(), acc_rows.begin() + count * acc_width, 0.0);
      // Interactions: the pair kernel writes its rows' matrices first (it mirrors each at the
      // end), then the tree program adds its trees. The pair kernel writes whole matrices: its
      // calls are never split by matrix rows.
      if (interactions && !path_ids.empty()) {
        for (int64_t r = first; r < first + count; ++r) {
          AddQuadraturePairInteractions(*model.pair_program, model, rows.Row(r), range->begin,
                                        range->end,
                                        program != nullptr ? program->served.data() : nullptr, 0,
                                        num_outputs, &pair_scratch,
                                        acc_rows.data() + (r - first) * acc_width);
        }
      }
      if (program != nullptr) {
        const RowsView chunk_rows{rows.Row(first), count, rows.cols, rows.stride};
        if (interactions && group_inter != nullptr) {
          for (int g = 0; g < inter_group_tasks; ++g) {
            const QuadratureTreeGroupSpan& span = spans[g];
            const int64_t width_g = (span.output_end - span.output_begin) * matrix_rows * f1;
            for (int64_t r = first; r < first + count; ++r) {
              const double* sums =
                  group_entries(group_inter.get(), r / unit, g, row_begin) + r % unit * width_g;
              double* acc = acc_rows.data() + (r - first) * acc_width +
                            span.output_begin * matrix_rows * f1;
              for (int64_t c = 0; c < width_g; ++c) acc[c] += sums[c];
            }
          }
          if (diagonal_task) {
            // Each diagonal entry of the rows [row_begin, row_end): the block's SHAP value less
            // the row's off-diagonal sum, j in order (AddQuadratureTreeInteractions' diagonal).
            const int64_t feature_end = std::min<int64_t>(row_end, num_features);
            for (int64_t r = first; r < first + count; ++r) {
              const double* shap = block_shap.get() + r * shap_width;
              for (int k = 0; k < num_outputs; ++k) {
                double* matrix =
                    acc_rows.data() + (r - first) * acc_width + k * matrix_rows * f1;
                for (int64_t i = row_begin; i < feature_end; ++i) {
                  double* m_row = matrix + (i - row_begin) * f1;
                  double off_diagonal = 0;
                  for (int64_t j = 0; j < f1; ++j) {
                    if (j != i) off_diagonal += m_row[j];
                  }
                  m_row[i] += shap[k * f1 + i] - off_diagonal;
                }
              }
            }
          }
        } else if (interactions) {
          AddQuadratureTreeInteractions(*program, forest.category_bits.data(), chunk_rows,
                                        range->begin, range->end, 0, inter_groups, row_begin,
                                        row_end, /*diagonal=*/true, &tree_scratch,
                                        acc_rows.data());
        } else if (group_sums != nullptr) {
          for (int g = 0; g < group_tasks; ++g) {
            for (int64_t r = first; r < first + count; ++r) {
              const double* sums =
                  group_sums.get() + ((r / unit * group_tasks + g) * unit + r % unit) * width;
              double* acc = acc_rows.data() + (r - first) * acc_width;
              for (int64_t c = 0; c < width; ++c) acc[c] += sums[c];
            }
          }
        } else {
          AddQuadratureTreeShap(*program, forest.category_bits.data(), chunk_rows, range->begin,
                                range->end, 0, shap_groups, &tree_scratch, acc_rows.data());
        }
      }
      for (int64_t r = first; r < first + count; ++r) {
        const float* row = rows.Row(r);
        double* acc = acc_rows.data() + (r - first) * acc_width;
        if (!interactions) {
          for (uint32_t id : path_ids) {
            const QuadraturePath& path = model.paths[id];
            const int n = path.n;
            const int len = path.capacity > 0 ? path.capacity : n;
            const PathElement* e = model.elements.data() + path.element_begin;
            for (int i = 0; i < len; ++i) {
              if (i < n) {
                const double o =
                    PathElementMatches(e[i], category_bits, row[e[i].feature]) ? 1.0 : 0.0;
                scratch.z[i] = e[i].zero_fraction;
                scratch.d[i] = o - e[i].zero_fraction;
                scratch.feature[i] = e[i].feature;
              } else {
                scratch.z[i] = 1.0;
                scratch.d[i] = 0.0;
                scratch.feature[i] = 0;
              }
            }
            const double* t = model.rule_nodes.data() + path.rule_begin;
            const double* w = model.rule_weights.data() + path.rule_begin;
            const double* values = layout.values.data() + path.value_begin;
            double* block = acc + static_cast<int64_t>(path.group) * f1;
            auto shap_sink = [&](int k, int32_t fi, double value) { block[k * f1 + fi] += value; };
            const double* z = scratch.z.data();
            const double* d = scratch.d.data();
            const int32_t* f = scratch.feature.data();
            double* wk = scratch.work.data();
            WithCapacity(path.capacity, [&](auto capacity) {
              constexpr int N = decltype(capacity)::value;
              RunShap<N>(z, d, f, n, t, w, path.q, values, path.width, wk, shap_sink);
            });
          }
        }
        float* o = out.Row(r);
        if (!interactions) {
          for (int k = 0; k < num_outputs; ++k) acc[k * f1 + num_features] = bias[k];
          for (int64_t c = 0; c < width; ++c) o[c] = static_cast<float>(acc[c]);
          continue;
        }
        for (int k = 0; k < num_outputs; ++k) {
          double* matrix = acc + k * matrix_rows * f1;  // its rows [row_begin, row_end)
          if (num_features >= row_begin && num_features < row_end) {
            matrix[(num_features - row_begin) * f1 + num_features] = bias[k];
          }
          float* o_matrix = o + k * f1 * f1 + row_begin * f1;
          for (int64_t c = 0; c < matrix_rows * f1; ++c) {
            o_matrix[c] = static_cast<float>(matrix[c]);
          }
        }
      }
    }
    workspaces.Give(std::move(workspace));
  };
  // Rows are independent; each is summed in a fixed order: deterministic. Where the tree program
  // runs, threads take whole SIMD blocks (a share of 9 rows would run two blocks).
  ParallelFor(pool, units * splits, 1, [&](int64_t first, int64_t last) {
    if (splits == 1) {
      work(first * unit, std::min(rows.rows, last * unit), 0, static_cast<int>(f1));
      return;
    }
    for (int64_t task = first; task < last; ++task) {
      const int64_t u = task / splits, part = task % splits;
      work(u * unit, std::min(rows.rows, (u + 1) * unit), bounds[part], bounds[part + 1]);
    }
  });
  return absl::OkStatus();
}

}  // namespace grove
