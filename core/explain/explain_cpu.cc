// CPU reference explainer: exact path-dependent TreeSHAP (Lundberg et al.; Algorithm 1 of the
// GPUTreeShap paper) in double precision, and SHAP interaction values by conditioning on each
// feature present / absent -- the same recursion XGBoost's CPU predictor runs (treeshap.cc), so
// that the GPU engines have an independent, readable oracle.
//
// Conventions (those of XGBoost pred_contribs / pred_interactions and LightGBM pred_contrib):
//  * "hot" child: the one the row takes per GoesLeft (missing values, categorical and LightGBM
//    rules included); "cold": the other. Zero fractions are child cover / node cover.
//  * Bias (column F of each output block): base_margin[k] + sum over trees in range of
//    weight * (cover-weighted mean leaf value of the tree), so that each block sums to the margin.
//    No averaging for LightGBM average_output (its pred_contrib sums to the raw score).
//  * The tree weight (dart) multiplies every leaf value. A vector-leaf tree gives output k its
//    k-th leaf value; a scalar tree contributes to its group only.
//  * Interactions, per output: M[i][j] (i != j) = (phi_j | i present - phi_j | i absent) / 2,
//    M[i][i] = phi_i - sum_{j != i} M[i][j], M[F][F] = bias, M[i][F] = M[F][i] = 0.
//    A tree only conditions on the features it splits on, and the conditioned recursion skips
//    subtrees that cannot reach a split on the conditioned feature (their contributions are the
//    same with the feature present or absent, so they cancel): O(T L D^3) per row, not O(T L D^2 F).
//  * Zero covers: a fraction c_child / c_node with c_node == 0 is taken as 0 (no division by zero,
//    deterministic). The expected value uses the same fractions, so additivity still holds exactly:
//    such a subtree has no weight in the expectation, and the features on the row's path through it
//    share its whole output. A child whose path weights are all zero (zero and one fractions both
//    0) contributes exactly nothing and is skipped, which also keeps UNWIND from dividing by zero.
//    XGBoost and LightGBM divide by the zero cover and return NaN there.
//  * Groups: the players are `player[feature]` instead of the features; everything above holds
//    with "feature" read as "player" (two features of one group on a path are a repeated player).
//  * Banzhaf: a leaf's game is v(S) = value * prod over its path's players e of (e in S ? o_e :
//    z_e) (players off the path are null), so player i's Banzhaf value is value * (o_i - z_i) *
//    prod over the path's other players of (o_e + z_e) / 2, and the Banzhaf interaction index of
//    i and j is value * (o_i - z_i) (o_j - z_j) * prod over the others of (o_e + z_e) / 2: closed
//    forms at each leaf, no subset weights needed.
#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/thread_pool.h"
#include "core/explain/cover_fraction.h"
#include "core/explain/explain.h"
#include "core/model/traverse.h"

namespace grove {
namespace {

// One element of the unique path m of Algorithm 1.
struct PathElement {
  int32_t feature = -1;  // d
  double zero = 0;       // z: fraction of the cover flowing this way when the feature is absent
  double one = 0;        // o: 1 if the row goes this way when the feature is present, else 0
  double pweight = 0;    // w: weight of the subsets of each size
};

// EXTEND: adds (feature, zero, one) as element `unique_depth` of the path (elements
// 0..unique_depth-1 already there) and updates the subset weights.
void ExtendPath(PathElement* path, int unique_depth, double zero, double one, int32_t feature) {
  path[unique_depth].feature = feature;
  path[unique_depth].zero = zero;
  path[unique_depth].one = one;
  path[unique_depth].pweight = unique_depth == 0 ? 1.0 : 0.0;
  for (int i = unique_depth - 1; i >= 0; --i) {
    path[i + 1].pweight += one * path[i].pweight * (i + 1) / (unique_depth + 1);
    path[i].pweight = zero * path[i].pweight * (unique_depth - i) / (unique_depth + 1);
  }
}

// UNWIND: removes element `path_index` from a path of unique_depth + 1 elements.
void UnwindPath(PathElement* path, int unique_depth, int path_index) {
  const double one = path[path_index].one;
  const double zero = path[path_index].zero;
  double next_one_portion = path[unique_depth].pweight;
  for (int i = unique_depth - 1; i >= 0; --i) {
    if (one != 0) {
      const double tmp = path[i].pweight;
      path[i].pweight = next_one_portion * (unique_depth + 1) / ((i + 1) * one);
      next_one_portion = tmp - path[i].pweight * zero * (unique_depth - i) / (unique_depth + 1);
    } else {
      // zero != 0 here: elements with zero == one == 0 are never put on a path (see Recurse).
      path[i].pweight = (path[i].pweight * (unique_depth + 1)) / (zero * (unique_depth - i));
    }
  }
  for (int i = path_index; i < unique_depth; ++i) {
    path[i].feature = path[i + 1].feature;
    path[i].zero = path[i + 1].zero;
    path[i].one = path[i + 1].one;
  }
}

// sum(UNWIND(m, path_index).w) without modifying the path.
double UnwoundPathSum(const PathElement* path, int unique_depth, int path_index) {
  const double one = path[path_index].one;
  const double zero = path[path_index].zero;
  double next_one_portion = path[unique_depth].pweight;
  double total = 0;
  for (int i = unique_depth - 1; i >= 0; --i) {
    if (one != 0) {
      const double tmp = next_one_portion * (unique_depth + 1) / ((i + 1) * one);
      total += tmp;
      next_one_portion = path[i].pweight - tmp * zero * (unique_depth - i) / (unique_depth + 1);
    } else {
      total += path[i].pweight / zero * (unique_depth + 1) / (unique_depth - i);
    }
  }
  return total;
}

// Read-only facts about one tree in range, shared by all rows of a call.
struct TreeInfo {
  int32_t tree = 0;
  int32_t first_block = 0;  // output block of the tree's first leaf value
  std::vector<double> expected;  // per leaf value: cover-weighted mean over the leaves
  // Interactions only. Subtree of node n = preorder positions [pre_begin[n], pre_end[n]).
  std::vector<int32_t> features;  // distinct split features, ascending
  std::vector<std::vector<int32_t>> split_positions;  // per features[i]: its splits' preorder positions, sorted
  std::vector<int32_t> pre_begin, pre_end;
};

void ExpectedValue(const Node* nodes, const double* leaf_values, int width, int32_t i, double weight,
                   double* acc) {
  const Node& n = nodes[i];
  if (n.is_leaf()) {
    for (int b = 0; b < width; ++b) acc[b] += weight * leaf_values[n.payload + b];
    return;
  }
  const double wl = CoverFraction(nodes[n.left].cover, n.cover);
  const double wr = CoverFraction(nodes[n.right].cover, n.cover);
  if (wl != 0) ExpectedValue(nodes, leaf_values, width, n.left, weight * wl, acc);
  if (wr != 0) ExpectedValue(nodes, leaf_values, width, n.right, weight * wr, acc);
}

void Preorder(const Node* nodes, int32_t i, int32_t* counter, TreeInfo* info,
              std::vector<std::pair<int32_t, int32_t>>* splits) {
  info->pre_begin[i] = (*counter)++;
  const Node& n = nodes[i];
  if (!n.is_leaf()) {
    splits->emplace_back(n.feature, info->pre_begin[i]);
    Preorder(nodes, n.left, counter, info, splits);
    Preorder(nodes, n.right, counter, info, splits);
  }
  info->pre_end[i] = *counter;
}

// `player`: per feature, its player (null: the feature itself).
TreeInfo MakeTreeInfo(const Forest& forest, int32_t t, bool interactions, const int32_t* player) {
  TreeInfo info;
  const Tree& tree = forest.trees[t];
  const Node* nodes = forest.TreeNodes(t);
  info.tree = t;
  info.first_block = tree.leaf_width == 1 ? tree.group : 0;
  info.expected.assign(tree.leaf_width, 0.0);
  ExpectedValue(nodes, forest.leaf_values.data(), tree.leaf_width, 0, 1.0, info.expected.data());
  if (interactions) {
    info.pre_begin.assign(tree.num_nodes, 0);
    info.pre_end.assign(tree.num_nodes, 0);
    std::vector<std::pair<int32_t, int32_t>> splits;  // (feature, preorder position)
    int32_t counter = 0;
    Preorder(nodes, 0, &counter, &info, &splits);
    if (player != nullptr) {
      for (auto& split : splits) split.first = player[split.first];
    }
    std::sort(splits.begin(), splits.end());
    for (const auto& [feature, position] : splits) {
      if (info.features.empty() || info.features.back() != feature) {
        info.features.push_back(feature);
        info.split_positions.emplace_back();
      }
      info.split_positions.back().push_back(position);
    }
  }
  return info;
}

// The recursion of Algorithm 1 over one tree for one row, with XGBoost's conditioning extension:
// condition = 0 computes SHAP values; +1 / -1 computes them with `condition_feature` fixed present /
// absent (it is never put on the path).
class TreeShapRecursion {
 public:
  TreeShapRecursion(const Forest& forest, const TreeInfo& info, const float* row,
                    PathElement* path_buffer, const int32_t* player)
      : nodes_(forest.TreeNodes(info.tree)),
        category_bits_(forest.category_bits.data()),
        leaf_values_(forest.leaf_values.data()),
        width_(forest.trees[info.tree].leaf_width),
        info_(info),
        row_(row),
        path_buffer_(path_buffer),
        player_(player) {}

  // Adds scale * phi_f (f = feature) of leaf value b to out[b * out_stride + f], b < leaf width.
  // condition != 0: feature_slot indexes info.features for the conditioned feature.
  void Run(double* out, int64_t out_stride, double scale, int condition, int feature_slot) {
    out_ = out;
    out_stride_ = out_stride;
    scale_ = scale;
    condition_ = condition;
    condition_feature_ = condition != 0 ? info_.features[feature_slot] : -1;
    condition_positions_ = condition != 0 ? &info_.split_positions[feature_slot] : nullptr;
    banzhaf_ = false;
    Recurse(0, path_buffer_, 0, 1.0, 1.0, -1, 1.0, false);
  }

  // Banzhaf values (file comment): scale * phi_i added as Run does; with `m` (null: none), half
  // of each interaction index added to m[b * m_stride + i * f1 + j] and m[... + j * f1 + i].
  void RunBanzhaf(double* out, int64_t out_stride, double* m, int64_t m_stride, int64_t f1,
                  double scale) {
    out_ = out;
    out_stride_ = out_stride;
    banzhaf_m_ = m;
    banzhaf_m_stride_ = m_stride;
    banzhaf_f1_ = f1;
    scale_ = scale;
    condition_ = 0;
    condition_feature_ = -1;
    condition_positions_ = nullptr;
    banzhaf_ = true;
    Recurse(0, path_buffer_, 0, 1.0, 1.0, -1, 1.0, false);
  }

 private:
  // Can the subtree of `node` reach a split on the conditioned feature?
  bool SubtreeSplitsOnCondition(int32_t node) const {
    const auto& positions = *condition_positions_;
    auto it = std::lower_bound(positions.begin(), positions.end(), info_.pre_begin[node]);
    return it != positions.end() && *it < info_.pre_end[node];
  }

  // `unique_depth`: where the element for (parent_feature, parent_zero, parent_one) goes; the path
  // of the parent is parent_path[0..unique_depth-1]. `condition_seen`: a split on the conditioned
  // feature lies above.
  void Recurse(int32_t node, PathElement* parent_path, int unique_depth, double parent_zero,
               double parent_one, int32_t parent_feature, double condition_fraction,
               bool condition_seen) {
    if (condition_fraction == 0) return;
    // Conditioned runs: a subtree that never meets the conditioned feature contributes the same
    // with it present or absent; the two runs' contributions cancel, so skip it in both.
    if (condition_ != 0 && !condition_seen && !SubtreeSplitsOnCondition(node)) return;

    PathElement* path = parent_path + unique_depth + 1;
    std::copy(parent_path, parent_path + unique_depth + 1, path);
    if (condition_ == 0 || parent_feature != condition_feature_) {
      ExtendPath(path, unique_depth, parent_zero, parent_one, parent_feature);
    }
    const Node& n = nodes_[node];
    if (n.is_leaf() && banzhaf_) return BanzhafLeaf(n, path, unique_depth);
    if (n.is_leaf()) {
      // Element 0 is the root's placeholder (feature -1); elements 1..unique_depth are features.
      for (int i = 1; i <= unique_depth; ++i) {
        const PathElement& el = path[i];
        const double w = UnwoundPathSum(path, unique_depth, i);
        const double factor = w * (el.one - el.zero) * condition_fraction * scale_;
        double* o = out_ + el.feature;
        for (int b = 0; b < width_; ++b) o[b * out_stride_] += factor * leaf_values_[n.payload + b];
      }
      return;
    }

    const int32_t hot = NextNode(n, category_bits_, row_);
    const int32_t cold = hot == n.left ? n.right : n.left;
    const double hot_zero = CoverFraction(nodes_[hot].cover, n.cover);
    const double cold_zero = CoverFraction(nodes_[cold].cover, n.cover);
    double incoming_zero = 1.0;
    double incoming_one = 1.0;
    // A feature already on the path: undo its element and fold its fractions into this split's
    // (Algorithm 1, lines 12-15), so each feature appears once.
    const int32_t feature = player_ != nullptr ? player_[n.feature] : n.feature;
    int path_index = 1;
    while (path_index <= unique_depth && path[path_index].feature != feature) ++path_index;
    if (path_index <= unique_depth) {
      incoming_zero = path[path_index].zero;
      incoming_one = path[path_index].one;
      UnwindPath(path, unique_depth, path_index);
      unique_depth -= 1;
    }

    double hot_condition = condition_fraction;
    double cold_condition = condition_fraction;
    const bool is_condition = condition_ != 0 && feature == condition_feature_;
    if (is_condition) {
      if (condition_ > 0) {
        cold_condition = 0;  // present: the row's branch only
      } else {
        hot_condition *= hot_zero;  // absent: cover-weighted
        cold_condition *= cold_zero;
      }
      unique_depth -= 1;  // the children do not extend the path with this feature
    }
    const bool seen = condition_seen || is_condition;
    const double hz = hot_zero * incoming_zero;
    const double cz = cold_zero * incoming_zero;
    // Children whose path element would have zero == one == 0 have all subset weights 0.
    if (is_condition || hz != 0 || incoming_one != 0) {
      Recurse(hot, path, unique_depth + 1, hz, incoming_one, feature, hot_condition, seen);
    }
    if (is_condition || cz != 0) {
      Recurse(cold, path, unique_depth + 1, cz, 0.0, feature, cold_condition, seen);
    }
  }

  // The Banzhaf closed forms of one leaf over its path's players path[1..unique_depth].
  void BanzhafLeaf(const Node& leaf, const PathElement* path, int unique_depth) {
    // half[e] = (o_e + z_e) / 2; a product over all but one or two players is taken directly
    // (paths are at most a tree's depth long), not by division, so a zero factor stays exact.
    auto others = [&](int skip_a, int skip_b) {
      double product = 1.0;
      for (int e = 1; e <= unique_depth; ++e) {
        if (e != skip_a && e != skip_b) product *= 0.5 * (path[e].one + path[e].zero);
      }
      return product;
    };
    for (int i = 1; i <= unique_depth; ++i) {
      const PathElement& el = path[i];
      const double di = el.one - el.zero;
      if (di == 0) continue;
      const double factor = di * others(i, -1) * scale_;
      double* o = out_ + el.feature;
      for (int b = 0; b < width_; ++b) o[b * out_stride_] += factor * leaf_values_[leaf.payload + b];
      if (banzhaf_m_ == nullptr) continue;
      for (int j = i + 1; j <= unique_depth; ++j) {
        const double dj = path[j].one - path[j].zero;
        if (dj == 0) continue;
        const double half = 0.5 * di * dj * others(i, j) * scale_;
        const int64_t fi = el.feature, fj = path[j].feature;
        for (int b = 0; b < width_; ++b) {
          double* m = banzhaf_m_ + b * banzhaf_m_stride_;
          const double v = half * leaf_values_[leaf.payload + b];
          m[fi * banzhaf_f1_ + fj] += v;
          m[fj * banzhaf_f1_ + fi] += v;
        }
      }
    }
  }

  const Node* nodes_;
  const uint32_t* category_bits_;
  const double* leaf_values_;
  int width_;
  const TreeInfo& info_;
  const float* row_;
  PathElement* path_buffer_;
  const int32_t* player_;  // per feature, its player; null: the feature
  bool banzhaf_ = false;
  double* banzhaf_m_ = nullptr;
  int64_t banzhaf_m_stride_ = 0;
  int64_t banzhaf_f1_ = 0;
  double* out_ = nullptr;
  int64_t out_stride_ = 0;
  double scale_ = 1.0;
  int condition_ = 0;
  int32_t condition_feature_ = -1;
  const std::vector<int32_t>* condition_positions_ = nullptr;
};

}  // namespace

void StoreExplainedRow(const std::vector<double>& bias, int64_t f1, double* phi,
                       double* interactions, float* out) {
  for (size_t k = 0; k < bias.size(); ++k) {
    if (interactions == nullptr) {
      phi[k * f1 + f1 - 1] = bias[k];
      for (int64_t c = 0; c < f1; ++c) out[k * f1 + c] = static_cast<float>(phi[k * f1 + c]);
      continue;
    }
    double* m = interactions + k * f1 * f1;
    for (int64_t i = 0; i + 1 < f1; ++i) {
      double off_diagonal = 0;
      for (int64_t j = 0; j + 1 < f1; ++j) off_diagonal += j == i ? 0.0 : m[i * f1 + j];
      m[i * f1 + i] = phi[k * f1 + i] - off_diagonal;
    }
    m[f1 * f1 - 1] = bias[k];
    for (int64_t c = 0; c < f1 * f1; ++c) out[k * f1 * f1 + c] = static_cast<float>(m[c]);
  }
}

absl::Status ExplainCpuReference(const Forest& forest, RowsView rows, const ExplainOptions& options,
                                 MatrixView<float> out, ThreadPool* pool) {
  absl::StatusOr<IterationRange> range =
      CheckExplainCall(forest, rows, options.interactions, options.iteration_begin,
                       options.iteration_end, out, options.groups);
  if (!range.ok()) return range.status();
  const bool interactions = options.interactions;
  const bool banzhaf = options.attribution == Attribution::kBanzhaf;
  if (rows.rows == 0) return absl::OkStatus();

  const int32_t* player = options.groups != nullptr ? options.groups->group_of.data() : nullptr;
  const int num_features =
      options.groups != nullptr ? options.groups->num_groups() : forest.num_features;
  const int num_outputs = forest.num_outputs;
  const int64_t f1 = num_features + 1;
  std::vector<TreeInfo> infos;
  std::vector<double> bias(forest.base_margin.begin(), forest.base_margin.end());
  int max_depth = 0;
  for (int32_t t = 0; t < static_cast<int32_t>(forest.trees.size()); ++t) {
    if (!forest.TreeInRange(t, range->begin, range->end)) continue;
    infos.push_back(MakeTreeInfo(forest, t, interactions && !banzhaf, player));
    const TreeInfo& info = infos.back();
    for (size_t b = 0; b < info.expected.size(); ++b) {
      bias[info.first_block + b] += forest.trees[t].weight * info.expected[b];
    }
    max_depth = std::max(max_depth, forest.trees[t].depth);
  }
  // Paths of depth 0..max_depth+1, each copied once per level of the recursion.
  const size_t path_capacity = static_cast<size_t>(max_depth + 2) * (max_depth + 3) / 2 + 1;

  auto work = [&](int64_t begin, int64_t end) {
    std::vector<PathElement> path_buffer(path_capacity);
    std::vector<double> phi(num_outputs * f1);
    std::vector<double> m(interactions ? num_outputs * f1 * f1 : 0);
    for (int64_t r = begin; r < end; ++r) {
      const float* row = rows.Row(r);
      std::fill(phi.begin(), phi.end(), 0.0);
      std::fill(m.begin(), m.end(), 0.0);
      for (const TreeInfo& info : infos) {
        const double weight = forest.trees[info.tree].weight;
        TreeShapRecursion shap(forest, info, row, path_buffer.data(), player);
        if (banzhaf) {
          shap.RunBanzhaf(phi.data() + info.first_block * f1, f1,
                          interactions ? m.data() + info.first_block * f1 * f1 : nullptr, f1 * f1,
                          f1, weight);
          continue;
        }
        shap.Run(phi.data() + info.first_block * f1, f1, weight, 0, -1);
        if (!interactions) continue;
        for (int slot = 0; slot < static_cast<int>(info.features.size()); ++slot) {
          double* m_row = m.data() + info.first_block * f1 * f1 + info.features[slot] * f1;
          shap.Run(m_row, f1 * f1, 0.5 * weight, +1, slot);
          shap.Run(m_row, f1 * f1, -0.5 * weight, -1, slot);
        }
      }
      StoreExplainedRow(bias, f1, phi.data(), interactions ? m.data() : nullptr, out.Row(r));
    }
  };
  // Rows are independent and each is computed by one thread in a fixed order: deterministic.
  ParallelFor(pool, rows.rows, interactions ? 1 : 4, work);
  return absl::OkStatus();
}

}  // namespace grove
