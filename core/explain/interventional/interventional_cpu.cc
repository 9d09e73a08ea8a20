// CPU reference for interventional SHAP values (see interventional.h): one recursive walk per
// (row, background row, tree), written for clarity; the GPU engine's path/bitmask formulation is
// checked against it.
#include <algorithm>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/interventional/interventional.h"
#include "core/model/transform.h"
#include "core/model/traverse.h"

namespace grove {

absl::Status CheckBackground(const Forest& forest, RowsView background) {
  if (background.rows < 1 || background.cols != forest.num_features ||
      background.stride < background.cols || background.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the background data set is ", background.rows, " x ", background.cols,
        "; interventional SHAP needs at least one row of the model's ", forest.num_features,
        " features"));
  }
  return absl::OkStatus();
}

absl::Status CheckInterventionalCall(const Forest& forest, RowsView rows,
                                     const InterventionalOptions& options, MatrixView<float> out) {
  absl::StatusOr<IterationRange> range =
      CheckExplainCall(forest, rows, options.interactions, options.iteration_begin,
                       options.iteration_end, out, options.groups);
  if (!range.ok()) return range.status();
  return CheckOutputSpace(forest, options.output_space);
}

bool IsExactSpace(const Forest& forest, OutputSpace space) {
  return space == OutputSpace::kProbability && forest.objective.link != Link::kIdentity;
}

absl::Status ExactPairTooWideError(int64_t row, int64_t background_row, int d) {
  return absl::InvalidArgumentError(absl::StrCat(
      "row ", row, ", background row ", background_row, ": the exact probability space needs all 2^",
      d, " hybrids of the pair (the trees send them different ways on ", d, " features; at most ",
      kMaxExactDifferingFeatures, " are enumerated); explain the margin or use "
      "probability_linearized"));
}

namespace {

enum class Side : uint8_t { kNone, kX, kZ };

// The walk of one tree for one (x, z) pair. At a split where x and z part, the hybrid takes the
// feature from x or from z; the choice holds for every later split on that feature, so a feature
// is branched on at most once per path (repeated features handled by `side_`). With groups the
// players are the groups: `player` maps a split's feature to its group, which keeps its side.
class PairWalker {
 public:
  // `player`: per feature, its player (null: the feature); `num_players` of them.
  PairWalker(const Forest& forest, const int32_t* player, int num_players)
      : forest_(forest), player_(player), side_(num_players, Side::kNone) {}

  // Calls visitor.Leaf(leaf node, *this) for every leaf some hybrid of x and z reaches.
  template <typename Visitor>
  void Walk(int32_t tree, const float* x, const float* z, Visitor& visitor) {
    nodes_ = forest_.TreeNodes(tree);
    x_ = x;
    z_ = z;
    Visit(0, visitor);
  }
  // Players with a side on the current path, in the order they were branched on.
  const std::vector<int32_t>& features() const { return features_; }
  bool FromX(int32_t feature) const { return side_[feature] == Side::kX; }
  int num_from_x() const { return from_x_; }
  int num_from_z() const { return static_cast<int>(features_.size()) - from_x_; }

 private:
  template <typename Visitor>
  void Visit(int32_t i, Visitor& visitor) {
    const Node& n = nodes_[i];
    if (n.is_leaf()) {
      visitor.Leaf(n, *this);
      return;
    }
    const int32_t to_x = NextNode(n, forest_.category_bits.data(), x_);
    const int32_t to_z = NextNode(n, forest_.category_bits.data(), z_);
    const int32_t p = player_ != nullptr ? player_[n.feature] : n.feature;
    const Side side = side_[p];
    if (to_x == to_z || side == Side::kX) return Visit(to_x, visitor);
    if (side == Side::kZ) return Visit(to_z, visitor);
    features_.push_back(p);
    side_[p] = Side::kX;
    ++from_x_;
    Visit(to_x, visitor);
    --from_x_;
    side_[p] = Side::kZ;
    Visit(to_z, visitor);
    side_[p] = Side::kNone;
    features_.pop_back();
  }

  const Forest& forest_;
  const int32_t* player_;
  const Node* nodes_ = nullptr;
  const float* x_ = nullptr;
  const float* z_ = nullptr;
  std::vector<Side> side_;
  std::vector<int32_t> features_;
  int from_x_ = 0;
};

// Trees in the call's range and what the transform needs.
struct CallPlan {
  std::vector<int32_t> trees;
  TransformParams transform;
};

// Adds the margin of `row` over the plan's trees (base margin included) to `margin[k]`.
void AddMargin(const Forest& forest, const CallPlan& plan, const float* row, double* margin) {
  AddInterventionalMargin(forest, plan.trees, row, margin);
}

// Visitor: scale * the pair's margin Shapley values added to phi (num_outputs x f1) and, when
// `inter` is set, their Shapley interaction values to inter (num_outputs x f1 x f1, off-diagonal).
struct MarginVisitor {
  const Forest& forest;
  Attribution attribution = Attribution::kShapley;
  int32_t tree = 0;
  double scale = 1.0;
  double* phi = nullptr;
  int64_t f1 = 0;
  double* inter = nullptr;

  void Leaf(const Node& leaf, const PairWalker& w) const {
    if (w.features().empty()) return;  // x and z reach it alike: no feature gets a share
    const Tree& t = forest.trees[tree];
    const int a = w.num_from_x();
    const int b = w.num_from_z();
    const double wx = a > 0 ? AttributionWeight(attribution, a, b) : 0.0;
    const double wz = b > 0 ? -AttributionWeight(attribution, b, a) : 0.0;
    const int first = t.leaf_width == 1 ? t.group : 0;
    for (int k = 0; k < t.leaf_width; ++k) {
      const double v = scale * t.weight * forest.leaf_values[leaf.payload + k];
      double* out = phi + (first + k) * f1;
      for (int32_t f : w.features()) out[f] += v * (w.FromX(f) ? wx : wz);
      if (inter != nullptr) AddPairs(w, v, inter + (first + k) * f1 * f1);
    }
  }

  // The leaf's game is v * [S holds the a features from x and none of the b from z]. Its
  // interaction index (half of Grabisch's, split between M[i][j] and M[j][i] as in
  // pred_interactions) is nonzero at one coalition only: v (a-2)! b! / (2 (a+b-1)!) for two
  // x-features, v a! (b-2)! / (2 (a+b-1)!) for two z-features, -v (a-1)! (b-1)! / (2 (a+b-1)!)
  // for one of each; in weights, W(a-1, b) / 2, W(b-1, a) / 2, -W(a, b-1) / 2. Banzhaf's index is
  // the same coalition's 1 / 2^(a+b-2): the same expressions in its weights.
  void AddPairs(const PairWalker& w, double v, double* m) const {
    const int a = w.num_from_x();
    const int b = w.num_from_z();
    const double both_x = a > 1 ? v * AttributionWeight(attribution, a - 1, b) / 2 : 0.0;
    const double both_z = b > 1 ? v * AttributionWeight(attribution, b - 1, a) / 2 : 0.0;
    const double mixed = a > 0 && b > 0 ? -v * AttributionWeight(attribution, a, b - 1) / 2 : 0.0;
    const std::vector<int32_t>& fs = w.features();
    for (size_t p = 0; p < fs.size(); ++p) {
      for (size_t q = p + 1; q < fs.size(); ++q) {
        const bool xp = w.FromX(fs[p]), xq = w.FromX(fs[q]);
        const double c = xp && xq ? both_x : (!xp && !xq ? both_z : mixed);
        m[fs[p] * f1 + fs[q]] += c;
        m[fs[q] * f1 + fs[p]] += c;
      }
    }
  }
};

// One reached leaf of one pair, for the exact transformed game: the hybrid reaches it iff every
// feature of `from_x` is taken from x and every feature of `from_z` from z (bits are slots).
struct LeafTerm {
  uint32_t from_x = 0;
  uint32_t from_z = 0;
  int32_t tree = 0;
  uint32_t payload = 0;
};

// Visitor: collects the pair's leaf terms, numbering the features it branches on (slots).
struct TermVisitor {
  std::vector<int32_t>* slot_of;        // per feature, -1 when not yet numbered
  std::vector<int32_t>* slot_features;  // per slot, the feature
  std::vector<LeafTerm>* terms;
  int32_t tree = 0;

  void Leaf(const Node& leaf, const PairWalker& w) const {
    LeafTerm term{0, 0, tree, leaf.payload};
    for (int32_t f : w.features()) {
      int32_t& slot = (*slot_of)[f];
      if (slot < 0) {
        slot = static_cast<int32_t>(slot_features->size());
        slot_features->push_back(f);
      }
      // Slots past 31 are only counted: the pair is refused before its terms are used.
      if (slot >= 32) continue;
      (w.FromX(f) ? term.from_x : term.from_z) |= 1u << slot;
    }
    terms->push_back(term);
  }
};

// Per-thread state of one call.
class RowExplainer {
 public:
  RowExplainer(const Forest& forest, const CallPlan& plan, RowsView background,
               const std::vector<double>& background_margins, OutputSpace space,
               Attribution attribution, const FeatureGroups* groups)
      : forest_(forest),
        plan_(plan),
        background_(background),
        background_margins_(background_margins),
        space_(space),
        attribution_(attribution),
        k_(forest.num_outputs),
        f1_(NumPlayers(forest.num_features, groups) + 1),
        linear_link_(forest.objective.link == Link::kIdentity),
        walker_(forest, groups != nullptr ? groups->group_of.data() : nullptr,
                NumPlayers(forest.num_features, groups)),
        slot_of_(NumPlayers(forest.num_features, groups), -1) {}

  // Feature columns of one row's output (num_outputs x f1, bias columns left at 0), averaged over
  // the background, and with `inter` (num_outputs x f1 x f1) the off-diagonal interaction values.
  absl::Status Explain(int64_t row_index, const float* x, double* phi, double* inter) {
    std::fill(phi, phi + k_ * f1_, 0.0);
    inter_ = inter;
    if (inter_ != nullptr) std::fill(inter_, inter_ + k_ * f1_ * f1_, 0.0);
    const double scale = 1.0 / background_.rows;
    std::vector<double> x_margin(k_, 0.0);
    if (space_ == OutputSpace::kProbabilityLinearized) AddMargin(forest_, plan_, x, x_margin.data());
    for (int64_t j = 0; j < background_.rows; ++j) {
      const float* z = background_.Row(j);
      switch (space_) {
        case OutputSpace::kMargin:
          AddPairMargin(x, z, scale, phi, inter_);
          break;
        case OutputSpace::kProbabilityLinearized:
          AddPairLinearized(x, z, x_margin.data(), background_margins_.data() + j * k_, scale, phi);
          break;
        case OutputSpace::kProbability:
          if (linear_link_) {  // the link is m / divisor: the margin values, scaled
            AddPairMargin(x, z, scale / plan_.transform.average_divisor, phi, inter_);
            break;
          }
          if (absl::Status s = AddPairExact(row_index, j, x, z, scale, phi); !s.ok()) return s;
          break;
      }
    }
    return absl::OkStatus();
  }

 private:
  void AddPairMargin(const float* x, const float* z, double scale, double* phi, double* inter) {
    MarginVisitor visitor{forest_, attribution_, 0, scale, phi, f1_, inter};
    for (int32_t t : plan_.trees) {
      visitor.tree = t;
      walker_.Walk(t, x, z, visitor);
    }
  }

  // shap's rule: the pair's margin values times LinearizedFactor.
  void AddPairLinearized(const float* x, const float* z, const double* mx, const double* mz,
                         double scale, double* phi) {
    pair_.assign(k_ * f1_, 0.0);
    pair_inter_.assign(inter_ != nullptr ? k_ * f1_ * f1_ : 0, 0.0);
    AddPairMargin(x, z, 1.0, pair_.data(), inter_ != nullptr ? pair_inter_.data() : nullptr);
    for (int k = 0; k < k_; ++k) {
      const double factor = LinearizedFactor(plan_.transform, mx[k], mz[k]);
      for (int64_t c = 0; c < f1_; ++c) phi[k * f1_ + c] += scale * factor * pair_[k * f1_ + c];
      if (inter_ == nullptr) continue;
      const int64_t block = f1_ * f1_;
      for (int64_t c = 0; c < block; ++c) {
        inter_[k * block + c] += scale * factor * pair_inter_[k * block + c];
      }
    }
  }

  // Exact Shapley values of S -> g(f(x_S z_S̄)) over the d features where the pair's hybrids
  // part: the 2^d hybrid margins from the reached leaves, then the Shapley sums.
  absl::Status AddPairExact(int64_t row_index, int64_t j, const float* x, const float* z,
                            double scale, double* phi) {
    terms_.clear();
    slot_features_.clear();
    TermVisitor visitor{&slot_of_, &slot_features_, &terms_, 0};
    for (int32_t t : plan_.trees) {
      visitor.tree = t;
      walker_.Walk(t, x, z, visitor);
    }
    for (int32_t f : slot_features_) slot_of_[f] = -1;
    const int d = static_cast<int>(slot_features_.size());
    if (d > kMaxExactDifferingFeatures) return ExactPairTooWideError(row_index, j, d);
    HybridOutputs(d);
    AddShapley(d, scale, phi);
    if (inter_ != nullptr) AddInteractions(d, scale);
    return absl::OkStatus();
  }

  // outputs_[S * k + j]: the transformed output j of the hybrid taking slots S from x.
  void HybridOutputs(int d) {
    const uint32_t subsets = 1u << d;
    const uint32_t all = subsets - 1;
    outputs_.assign(static_cast<size_t>(subsets) * k_, 0.0);
    for (uint32_t s = 0; s < subsets; ++s) {
      for (int j = 0; j < k_; ++j) outputs_[s * k_ + j] = forest_.base_margin[j];
    }
    // A term reaches every S with from_x ⊆ S and S ∩ from_z = ∅: the subsets of the free slots.
    for (const LeafTerm& term : terms_) {
      const Tree& tree = forest_.trees[term.tree];
      const int first = tree.leaf_width == 1 ? tree.group : 0;
      const uint32_t free_slots = all & ~(term.from_x | term.from_z);
      for (uint32_t sub = free_slots;; sub = (sub - 1) & free_slots) {
        double* m = outputs_.data() + (term.from_x | sub) * k_ + first;
        for (int j = 0; j < tree.leaf_width; ++j) {
          m[j] += tree.weight * forest_.leaf_values[term.payload + j];
        }
        if (sub == 0) break;
      }
    }
    for (uint32_t s = 0; s < subsets; ++s) {
      TransformRow(plan_.transform, outputs_.data() + s * k_, outputs_.data() + s * k_);
    }
  }

  void AddShapley(int d, double scale, double* phi) {
    const uint32_t subsets = 1u << d;
    for (int i = 0; i < d; ++i) {
      const uint32_t bit = 1u << i;
      double* out = phi + slot_features_[i];
      for (uint32_t s = 0; s < subsets; ++s) {
        if (s & bit) continue;
        const int size = __builtin_popcount(s);
        const double w = scale * AttributionWeight(attribution_, d - size, size);
        for (int j = 0; j < k_; ++j) {
          out[j * f1_] += w * (outputs_[(s | bit) * k_ + j] - outputs_[s * k_ + j]);
        }
      }
    }
  }

  // Shapley interaction values of the pair's 2^d hybrid outputs: for slots i < j,
  // sum over S without them of W(d-1-|S|, |S|) / 2 (S ∪ {i,j} - S ∪ {i} - S ∪ {j} + S).
  void AddInteractions(int d, double scale) {
    const uint32_t subsets = 1u << d;
    for (int i = 0; i < d; ++i) {
      for (int j = i + 1; j < d; ++j) {
        const uint32_t bi = 1u << i, bj = 1u << j;
        const int64_t fi = slot_features_[i], fj = slot_features_[j];
        for (uint32_t s = 0; s < subsets; ++s) {
          if (s & (bi | bj)) continue;
          const int size = __builtin_popcount(s);
          const double w = scale * AttributionWeight(attribution_, d - 1 - size, size) / 2;
          for (int k = 0; k < k_; ++k) {
            const double delta = outputs_[(s | bi | bj) * k_ + k] - outputs_[(s | bi) * k_ + k] -
                                 outputs_[(s | bj) * k_ + k] + outputs_[s * k_ + k];
            double* m = inter_ + k * f1_ * f1_;
            m[fi * f1_ + fj] += w * delta;
            m[fj * f1_ + fi] += w * delta;
          }
        }
      }
    }
  }

  const Forest& forest_;
  const CallPlan& plan_;
  RowsView background_;
  const std::vector<double>& background_margins_;
  OutputSpace space_;
  Attribution attribution_;
  int k_;
  int64_t f1_;
  bool linear_link_;
  PairWalker walker_;
  std::vector<double> pair_;
  std::vector<double> pair_inter_;
  double* inter_ = nullptr;  // the current row's interaction values, or null
  std::vector<int32_t> slot_of_;
  std::vector<int32_t> slot_features_;
  std::vector<LeafTerm> terms_;
  std::vector<double> outputs_;
};

// Bias per output: the mean over the background of its margin, or of its transformed margin.
std::vector<double> BackgroundMean(const Forest& forest, const CallPlan& plan,
                                   const std::vector<double>& margins, int64_t n,
                                   OutputSpace space) {
  const int k = forest.num_outputs;
  std::vector<double> mean(k, 0.0), out(k);
  for (int64_t j = 0; j < n; ++j) {
    const double* m = margins.data() + j * k;
    if (space == OutputSpace::kMargin) {
      std::copy(m, m + k, out.begin());
    } else {
      TransformRow(plan.transform, m, out.data());
    }
    for (int i = 0; i < k; ++i) mean[i] += out[i];
  }
  for (double& v : mean) v /= n;
  return mean;
}

}  // namespace

void AddInterventionalMargin(const Forest& forest, const std::vector<int32_t>& trees,
                             const float* row, double* margin) {
  for (int k = 0; k < forest.num_outputs; ++k) margin[k] += forest.base_margin[k];
  for (int32_t t : trees) {
    const Tree& tree = forest.trees[t];
    const Node* nodes = forest.TreeNodes(t);
    const Node& leaf = nodes[TraverseTree(nodes, forest.category_bits.data(), row)];
    const int first = tree.leaf_width == 1 ? tree.group : 0;
    for (int k = 0; k < tree.leaf_width; ++k) {
      margin[first + k] += tree.weight * forest.leaf_values[leaf.payload + k];
    }
  }
}

absl::Status ExplainInterventionalCpu(const Forest& forest, RowsView background, RowsView rows,
                                      const InterventionalOptions& options, MatrixView<float> out,
                                      ThreadPool* pool) {
  if (absl::Status s = CheckBackground(forest, background); !s.ok()) return s;
  if (absl::Status s = CheckInterventionalCall(forest, rows, options, out); !s.ok()) return s;
  IterationRange range;
  (void)ResolveIterationRange(forest, options.iteration_begin, options.iteration_end, &range);
  CallPlan plan;
  for (int32_t t = 0; t < static_cast<int32_t>(forest.trees.size()); ++t) {
    if (forest.TreeInRange(t, range.begin, range.end)) plan.trees.push_back(t);
  }
  plan.transform = MakeTransformParams(forest, range.size());
  const int k = forest.num_outputs;
  const int64_t f1 = NumPlayers(forest.num_features, options.groups) + 1;
  std::vector<double> background_margins(background.rows * k, 0.0);
  for (int64_t j = 0; j < background.rows; ++j) {
    AddMargin(forest, plan, background.Row(j), background_margins.data() + j * k);
  }
  const std::vector<double> bias =
      BackgroundMean(forest, plan, background_margins, background.rows, options.output_space);

  std::mutex mu;
  int64_t failed_row = rows.rows;  // the first failing row wins, whatever the thread order
  absl::Status failure;
  auto work = [&](int64_t begin, int64_t end) {
    RowExplainer explainer(forest, plan, background, background_margins, options.output_space,
                           options.attribution, options.groups);
    std::vector<double> phi(k * f1);
    std::vector<double> inter(options.interactions ? k * f1 * f1 : 0);
    double* inter_out = options.interactions ? inter.data() : nullptr;
    for (int64_t r = begin; r < end; ++r) {
      if (absl::Status s = explainer.Explain(r, rows.Row(r), phi.data(), inter_out); !s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (r < failed_row) {
          failed_row = r;
          failure = s;
        }
        return;
      }
      StoreExplainedRow(bias, f1, phi.data(), inter_out, out.Row(r));
    }
  };
  // Rows are independent and each is computed by one thread in a fixed order: deterministic.
  ParallelFor(pool, rows.rows, 1, work);
  return failure;
}

}  // namespace grove
