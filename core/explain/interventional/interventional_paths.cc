// Background preprocessing into per-path masks, and the CPU twin of the GPU kernel
// (see interventional_paths.h).
#include "core/explain/interventional/interventional_paths.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/interventional/interventional_exact.h"
#include "core/model/forest.h"
#include "core/model/traverse.h"

namespace grove {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<double> WeightTable(Attribution attribution) {
  constexpr int kSide = kInterventionalWeightSide;
  std::vector<double> w(kSide * kSide, 0.0);
  for (int a = 1; a < kSide; ++a) {
    for (int b = 0; b < kSide; ++b) w[a * kSide + b] = AttributionWeight(attribution, a, b);
  }
  return w;
}

// Per binned path: the distinct masks of the background rows, ascending, with their counts.
void GroupMasks(const PathLayout& layout, RowsView background, ThreadPool* pool,
                std::vector<std::vector<std::pair<uint32_t, uint32_t>>>* groups) {
  groups->assign(layout.paths.size(), {});
  ParallelFor(pool, static_cast<int64_t>(layout.paths.size()), 64, [&](int64_t begin, int64_t end) {
    std::vector<uint32_t> masks(background.rows);
    for (int64_t p = begin; p < end; ++p) {
      const PathInfo& info = layout.paths[p];
      if (info.length > kWarpLanes) continue;
      const PathElement* elements = layout.elements.data() + info.element_begin;
      for (int64_t j = 0; j < background.rows; ++j) {
        masks[j] = RowPathMask(elements, info.length, layout.category_bits.data(),
                               background.Row(j));
      }
      std::sort(masks.begin(), masks.end());
      auto& out = (*groups)[p];
      for (uint32_t m : masks) {
        if (out.empty() || out.back().first != m) out.emplace_back(m, 0);
        ++out.back().second;
      }
    }
  });
}

std::vector<double> TreeMeans(const Forest& forest, RowsView background) {
  const int k = forest.num_outputs;
  std::vector<double> means(forest.trees.size() * k, 0.0);
  for (size_t t = 0; t < forest.trees.size(); ++t) {
    const Tree& tree = forest.trees[t];
    const Node* nodes = forest.TreeNodes(static_cast<int>(t));
    const int first = tree.leaf_width == 1 ? tree.group : 0;
    for (int64_t j = 0; j < background.rows; ++j) {
      const Node& leaf = nodes[TraverseTree(nodes, forest.category_bits.data(), background.Row(j))];
      for (int b = 0; b < tree.leaf_width; ++b) {
        means[t * k + first + b] += tree.weight * forest.leaf_values[leaf.payload + b];
      }
    }
  }
  for (double& m : means) m /= background.rows;
  return means;
}

// Adds one row's contributions of path `info` to phi (num_outputs x f1). One pass over the
// path's masks: a reachable mask's weights W(|S_x|, |S_z|) and W(|S_z|, |S_x|) go to the players
// of S_x and of S_z, each player's coefficient summed in mask order, the terms MaskCoefficient
// gives per player (a pass per player would test every mask once per element).
void AddPath(const PathLayout& layout, const InterventionalLayout& il, const double* weights,
             uint32_t path, const float* row, int64_t f1, double* phi) {
  const PathInfo& info = layout.paths[path];
  const PathElement* elements = layout.elements.data() + info.element_begin;
  const uint32_t x = RowPathMask(elements, info.length, layout.category_bits.data(), row);
  const uint32_t full = FullMask(info.length);
  const double scale = 1.0 / il.background_rows;
  const int32_t* player_of = PlayerMap(layout);
  const uint32_t players = PlayerMask(elements, info.length);
  double coefficient[32] = {};
  for (uint32_t m = il.mask_begin[path]; m < il.mask_begin[path + 1]; ++m) {
    const uint32_t z = il.masks[m];
    if ((x | z) != full) continue;
    const uint32_t from_x = x & ~z;
    const uint32_t from_z = z & ~x;
    const int a = PopCount32(from_x);
    const int b = PopCount32(from_z);
    const double count = il.counts[m];
    const double to_x = weights[a * kInterventionalWeightSide + b];
    const double to_z = -weights[b * kInterventionalWeightSide + a];
    for (uint32_t bits = from_x & players; bits != 0; bits &= bits - 1) {
      coefficient[LowestBit(bits)] += count * to_x;
    }
    for (uint32_t bits = from_z & players; bits != 0; bits &= bits - 1) {
      coefficient[LowestBit(bits)] += count * to_z;
    }
  }
  for (uint32_t bits = players; bits != 0; bits &= bits - 1) {
    const int j = LowestBit(bits);
    if (coefficient[j] == 0) continue;
    for (int k = 0; k < info.width; ++k) {
      phi[(info.group + k) * f1 + PlayerColumn(player_of, elements[j])] +=
          scale * coefficient[j] * layout.values[info.value_begin + k];
    }
  }
}

// Linearized: adds one row's contributions of path `info` to phi, each background row of a mask
// weighted by its pair's factor (rho[k * N + j], output k, background row j) instead of counted.
// As AddPath, one pass over the masks per output: a reachable mask's rows' factors summed once.
void AddPathLinearized(const PathLayout& layout, const InterventionalLayout& il,
                       const double* weights, const LinearizedLayout& ll, uint32_t path,
                       const float* row,
                       const double* rho, int64_t f1, double* phi) {
  const PathInfo& info = layout.paths[path];
  const PathElement* elements = layout.elements.data() + info.element_begin;
  const uint32_t x = RowPathMask(elements, info.length, layout.category_bits.data(), row);
  const uint32_t full = FullMask(info.length);
  const int64_t n = ll.background_rows;
  const uint16_t* path_rows = ll.mask_rows.data() + static_cast<int64_t>(path) * n;
  const int32_t* player_of = PlayerMap(layout);
  const uint32_t players = PlayerMask(elements, info.length);
  for (int k = 0; k < info.width; ++k) {
    const double* rho_k = rho + (info.group + k) * n;
    double coefficient[32] = {};
    const uint16_t* rows_of_mask = path_rows;
    for (uint32_t m = il.mask_begin[path]; m < il.mask_begin[path + 1]; ++m) {
      const uint32_t z = il.masks[m];
      const uint32_t from_x = x & ~z;
      const uint32_t from_z = z & ~x;
      if ((x | z) == full && ((from_x | from_z) & players) != 0) {
        const int a = PopCount32(from_x);
        const int b = PopCount32(from_z);
        double weight = 0;
        for (uint32_t i = 0; i < il.counts[m]; ++i) weight += rho_k[rows_of_mask[i]];
        const double to_x = weights[a * kInterventionalWeightSide + b];
        const double to_z = -weights[b * kInterventionalWeightSide + a];
        for (uint32_t bits = from_x & players; bits != 0; bits &= bits - 1) {
          if (to_x != 0) coefficient[LowestBit(bits)] += weight * to_x;
        }
        for (uint32_t bits = from_z & players; bits != 0; bits &= bits - 1) {
          if (to_z != 0) coefficient[LowestBit(bits)] += weight * to_z;
        }
      }
      rows_of_mask += il.counts[m];
    }
    for (uint32_t bits = players; bits != 0; bits &= bits - 1) {
      const int j = LowestBit(bits);
      phi[(info.group + k) * f1 + PlayerColumn(player_of, elements[j])] +=
          coefficient[j] / n * layout.values[info.value_begin + k];
    }
  }
}

// Margins of the background rows over `trees` (rows x outputs), as the reference computes them.
std::vector<double> BackgroundMargins(const Forest& forest, const std::vector<int32_t>& trees,
                                      const LinearizedLayout& ll) {
  const int k = forest.num_outputs;
  std::vector<double> m(ll.background_rows * k, 0.0);
  for (int64_t j = 0; j < ll.background_rows; ++j) {
    AddInterventionalMargin(forest, trees, ll.background.data() + j * forest.num_features,
                            m.data() + j * k);
  }
  return m;
}

// The exact space's per-call arguments, host pointers.
ExactArgs HostExactArgs(const Forest& forest, const PathLayout& layout,
                        const InterventionalLayout& il, const IterationRange& range,
                        Attribution attribution = Attribution::kShapley) {
  ExactArgs a = ExactCallArgs(forest, layout, range.begin, range.end);
  a.player_of = PlayerMap(layout);
  a.elements = layout.elements.data();
  a.paths = layout.paths.data();
  a.values = layout.values.data();
  a.category_bits = layout.category_bits.data();
  a.base_margin = forest.base_margin.data();
  a.weights = il.Weights(attribution);
  return a;
}

// Every background row's mask per path (row-major), from the layouts.
std::vector<uint32_t> BackgroundRowMasks(const InterventionalLayout& il,
                                         const LinearizedLayout& ll, int64_t num_paths) {
  std::vector<uint32_t> z(ll.background_rows * num_paths, 0);
  for (int64_t p = 0; p < num_paths; ++p) {
    ScatterPathMasks(p, num_paths, ll.background_rows, il.mask_begin.data(), il.masks.data(),
                     il.counts.data(), ll.mask_rows.data(), z.data());
  }
  return z;
}

// Bias of the exact space: the mean over the background of the link of its margin (as the GPU's
// kernels: margins by paths, rows in order).
std::vector<double> ExactBias(const ExactArgs& a, const std::vector<uint32_t>& z, int64_t n) {
  std::vector<double> bias(a.num_outputs, 0.0), m(a.num_outputs);
  for (int64_t j = 0; j < n; ++j) {
    ExactMarginFromMasks(a, z.data() + j * a.num_paths, m.data());
    TransformRow(a.transform, m.data(), m.data());
    for (int k = 0; k < a.num_outputs; ++k) bias[k] += m[k];
  }
  for (double& b : bias) b /= static_cast<double>(n);
  return bias;
}

// OutputSpace::kProbability with a non-identity link: ExplainExactRow per row, one thread each
// (with `interactions`, interaction values).
absl::Status ExplainExactCpu(const Forest& forest, const PathLayout& layout,
                             const InterventionalLayout& il, const LinearizedLayout& ll,
                             const IterationRange& range, Attribution attribution,
                             bool interactions, RowsView rows, MatrixView<float> out,
                             ThreadPool* pool) {
  const ExactArgs a = HostExactArgs(forest, layout, il, range, attribution);
  const std::vector<uint32_t> z = BackgroundRowMasks(il, ll, a.num_paths);
  const int64_t n = ll.background_rows;
  const std::shared_ptr<const std::vector<double>> cached =
      ExactBiasFor(forest, layout, il, ll, range.begin, range.end);
  const std::vector<double>& bias = *cached;
  const int64_t f1 = a.num_players + 1;
  const ExactScratchSizes sizes =
      ExactScratchSizesFor(a.num_paths, a.num_players, a.num_outputs, 1);
  std::mutex mu;
  int64_t failed_row = rows.rows;  // the first failing row wins, as in the reference
  absl::Status failure;
  ParallelFor(pool, rows.rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<uint32_t> x_masks(sizes.x_masks);
    std::vector<int32_t> slot_of(sizes.slot_of, -1), slot_feature(sizes.slot_feature);
    std::vector<double> partial(sizes.partial, 0.0), table(sizes.table, 0.0);
    const ExactScratch s{x_masks.data(), slot_of.data(), slot_feature.data(), partial.data(),
                         table.data()};
    std::vector<double> phi(a.num_outputs * f1);
    std::vector<double> inter(interactions ? a.num_outputs * f1 * f1 : 0);
    double* inter_out = interactions ? inter.data() : nullptr;
    for (int64_t r = begin; r < end; ++r) {
      std::fill(phi.begin(), phi.end(), 0.0);
      std::fill(inter.begin(), inter.end(), 0.0);
      int d = 0;
      const int64_t j = ExplainExactRow(SerialTeam(), a, s, rows.Row(r), z.data(), n, phi.data(),
                                        &d, inter_out);
      if (j >= 0) {
        std::lock_guard<std::mutex> lock(mu);
        if (r < failed_row) {
          failed_row = r;
          failure = ExactPairTooWideError(r, j, d);
        }
        return;
      }
      StoreExplainedRow(bias, f1, phi.data(), inter_out, out.Row(r));
    }
  });
  return failure;
}

}  // namespace

std::shared_ptr<const std::vector<double>> ExactBiasFor(const Forest& forest,
                                                       const PathLayout& layout,
                                                       const InterventionalLayout& il,
                                                       const LinearizedLayout& ll, int begin,
                                                       int end) {
  LinearizedLayout::ExactBiasMemo& memo = *ll.exact_bias;
  const std::pair<int, int> key{begin, end};
  {
    absl::MutexLock lock(&memo.mu);
    for (const auto& [k, bias] : memo.entries) {
      if (k == key) return bias;
    }
  }
  const ExactArgs a = HostExactArgs(forest, layout, il, IterationRange{begin, end});
  auto bias = std::make_shared<const std::vector<double>>(
      ExactBias(a, BackgroundRowMasks(il, ll, a.num_paths), ll.background_rows));
  absl::MutexLock lock(&memo.mu);
  for (const auto& [k, kept] : memo.entries) {
    if (k == key) return kept;  // another call computed it meanwhile
  }
  if (memo.entries.size() < kExactBiasRanges) memo.entries.emplace_back(key, bias);
  return bias;
}

absl::StatusOr<LinearizedLayoutPtr> BuildLinearizedLayout(const PathLayout& layout,
                                                          const InterventionalLayout& il,
                                                          RowsView background, ThreadPool* pool) {
  const int64_t n = background.rows;
  if (n != il.background_rows || n > 65535 || background.cols <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "linearized layout: ", n, " background rows (the layout has ", il.background_rows,
        "; at most 65,535)"));
  }
  auto ll = std::make_shared<LinearizedLayout>();
  ll->background_rows = n;
  ll->background.resize(n * background.cols);
  for (int64_t j = 0; j < n; ++j) {
    std::copy(background.Row(j), background.Row(j) + background.cols,
              ll->background.data() + j * background.cols);
  }
  ll->mask_rows.resize(layout.paths.size() * n);
  ParallelFor(pool, static_cast<int64_t>(layout.paths.size()), 64, [&](int64_t begin, int64_t end) {
    std::vector<std::pair<uint32_t, uint16_t>> keyed(n);
    for (int64_t p = begin; p < end; ++p) {
      const PathInfo& info = layout.paths[p];
      if (info.length > kWarpLanes) continue;
      const PathElement* elements = layout.elements.data() + info.element_begin;
      for (int64_t j = 0; j < n; ++j) {
        keyed[j] = {RowPathMask(elements, info.length, layout.category_bits.data(),
                                background.Row(j)),
                    static_cast<uint16_t>(j)};
      }
      std::sort(keyed.begin(), keyed.end());  // by mask as the layout's, then by row
      for (int64_t j = 0; j < n; ++j) ll->mask_rows[p * n + j] = keyed[j].second;
    }
  });
  return LinearizedLayoutPtr(std::move(ll));
}

absl::Status CheckLayoutPlayers(const PathLayout& layout, const FeatureGroups* groups) {
  const bool same = groups == nullptr
                        ? layout.player_of.empty()
                        : layout.num_players == groups->num_groups() &&
                              layout.player_of == groups->group_of;
  if (same) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the path layout's players are ",
      layout.player_of.empty() ? "the model's features"
                               : absl::StrCat(layout.num_players, " feature groups"),
      "; the call asks for ",
      groups == nullptr ? "the features" : absl::StrCat(groups->num_groups(), " feature groups"),
      " (a layout explains its own players only)"));
}

int64_t InterventionalLayout::HostBytes() const {
  return static_cast<int64_t>((mask_begin.size() + masks.size() + counts.size()) * 4 +
                              (tree_means.size() + weights.size() + banzhaf_weights.size()) * 8);
}

absl::StatusOr<InterventionalLayoutPtr> BuildInterventionalLayout(const Forest& forest,
                                                                  const PathLayout& layout,
                                                                  RowsView background,
                                                                  ThreadPool* pool) {
  if (absl::Status s = CheckBackground(forest, background); !s.ok()) return s;
  const double start = Now();
  auto il = std::make_shared<InterventionalLayout>();
  il->background_rows = background.rows;
  il->num_outputs = forest.num_outputs;
  il->weights = WeightTable(Attribution::kShapley);
  il->banzhaf_weights = WeightTable(Attribution::kBanzhaf);
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> groups;
  GroupMasks(layout, background, pool, &groups);
  il->mask_begin.reserve(groups.size() + 1);
  il->mask_begin.push_back(0);
  for (const auto& g : groups) {
    for (const auto& [mask, count] : g) {
      il->masks.push_back(mask);
      il->counts.push_back(count);
    }
    if (il->masks.size() > UINT32_MAX) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the background's path masks exceed 2^32 entries (", background.rows,
          " rows over ", layout.paths.size(), " paths); use a smaller background"));
    }
    il->mask_begin.push_back(static_cast<uint32_t>(il->masks.size()));
  }
  il->tree_means = TreeMeans(forest, background);
  il->build_seconds = Now() - start;
  return InterventionalLayoutPtr(std::move(il));
}

std::vector<uint32_t> PathsInRange(const PathLayout& layout, int begin, int end) {
  std::vector<uint32_t> paths;
  for (uint32_t p = 0; p < layout.paths.size(); ++p) {
    const int it = layout.paths[p].iteration;
    if (it >= begin && it < end) paths.push_back(p);
  }
  return paths;
}

double MarginFormDivisor(const Forest& forest, OutputSpace space, int iterations) {
  return space == OutputSpace::kProbability
             ? MakeTransformParams(forest, iterations).average_divisor
             : 1.0;
}

std::vector<double> InterventionalBias(const Forest& forest, const InterventionalLayout& il,
                                       int begin, int end) {
  const int k = forest.num_outputs;
  std::vector<double> bias(forest.base_margin.begin(), forest.base_margin.end());
  for (size_t t = 0; t < forest.trees.size(); ++t) {
    if (!forest.TreeInRange(static_cast<int>(t), begin, end)) continue;
    for (int i = 0; i < k; ++i) bias[i] += il.tree_means[t * k + i];
  }
  return bias;
}

absl::Status ExplainInterventionalPathsCpu(const Forest& forest, const PathLayout& layout,
                                           const InterventionalLayout& il, RowsView rows,
                                           const InterventionalOptions& options,
                                           MatrixView<float> out, ThreadPool* pool,
                                           const LinearizedLayout* linearized) {
  if (absl::Status s = CheckInterventionalCall(forest, rows, options, out); !s.ok()) return s;
  if (absl::Status s = CheckLayoutPlayers(layout, options.groups); !s.ok()) return s;
  const OutputSpace space = options.output_space;
  const bool lin = space == OutputSpace::kProbabilityLinearized;
  // The exact space of an identity link is the margin's values over the average divisor.
  const bool exact = IsExactSpace(forest, space);
  if (((lin || exact) && linearized == nullptr) || (options.interactions && !exact) ||
      !layout.long_paths.empty()) {
    return absl::FailedPreconditionError(
        "the path form of interventional SHAP explains margins (and, with its linearized "
        "layout, both probability spaces, and the exact one's interaction values) of models "
        "whose paths have at most 32 elements; ExplainInterventionalInteractionsPathsCpu the "
        "margin's interaction values");
  }
  IterationRange range;
  (void)ResolveIterationRange(forest, options.iteration_begin, options.iteration_end, &range);
  if (exact) {
    return ExplainExactCpu(forest, layout, il, *linearized, range, options.attribution,
                           options.interactions, rows, out, pool);
  }
  // kProbability with an identity link: the margin values and bias, divided by this.
  const double divisor = MarginFormDivisor(forest, space, range.size());
  const std::vector<uint32_t> paths = PathsInRange(layout, range.begin, range.end);
  std::vector<int32_t> trees;
  for (int32_t t = 0; t < static_cast<int32_t>(forest.trees.size()); ++t) {
    if (forest.TreeInRange(t, range.begin, range.end)) trees.push_back(t);
  }
  const int k = forest.num_outputs;
  const int64_t f1 = layout.num_players + 1;
  const TransformParams transform = MakeTransformParams(forest, range.size());
  std::vector<double> bias = InterventionalBias(forest, il, range.begin, range.end);
  std::vector<double> background_margins;
  if (lin) {  // the bias is the mean of the background's transformed margins
    background_margins = BackgroundMargins(forest, trees, *linearized);
    std::fill(bias.begin(), bias.end(), 0.0);
    for (int64_t j = 0; j < linearized->background_rows; ++j) {
      for (int i = 0; i < k; ++i) {
        bias[i] += TransformScalar(transform, background_margins[j * k + i] /
                                                  transform.average_divisor);
      }
    }
    for (double& b : bias) b /= static_cast<double>(linearized->background_rows);
  }
  if (divisor != 1.0) {
    for (double& b : bias) b /= divisor;
  }
  const double* weights = il.Weights(options.attribution);
  ParallelFor(pool, rows.rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> phi(k * f1), margin(k), rho;
    for (int64_t r = begin; r < end; ++r) {
      std::fill(phi.begin(), phi.end(), 0.0);
      if (!lin) {
        for (uint32_t p : paths) AddPath(layout, il, weights, p, rows.Row(r), f1, phi.data());
        if (divisor != 1.0) {
          for (double& v : phi) v /= divisor;
        }
      } else {
        const int64_t n = linearized->background_rows;
        std::fill(margin.begin(), margin.end(), 0.0);
        AddInterventionalMargin(forest, trees, rows.Row(r), margin.data());
        rho.resize(k * n);
        for (int i = 0; i < k; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            rho[i * n + j] = LinearizedFactor(transform, margin[i], background_margins[j * k + i]);
          }
        }
        for (uint32_t p : paths) {
          AddPathLinearized(layout, il, weights, *linearized, p, rows.Row(r), rho.data(), f1,
                            phi.data());
        }
      }
      StoreExplainedRow(bias, f1, phi.data(), nullptr, out.Row(r));
    }
  });
  return absl::OkStatus();
}

}  // namespace grove
