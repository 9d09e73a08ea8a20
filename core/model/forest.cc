#include "core/model/forest.h"

#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/utf8.h"
#include "core/model/decision.h"

namespace grove {

static_assert(kNodeDefaultLeft == decision_bits::kDefaultLeft);
static_assert(kNodeCategorical == decision_bits::kCategorical);
static_assert(kNodeCategoryInSetGoesLeft == decision_bits::kCategoryInSetGoesLeft);
static_assert(kNodeMissingZero == decision_bits::kMissingZero);
static_assert(kNodeNanAsZero == decision_bits::kNanAsZero);
static_assert(kNodeCategoryTruncate == decision_bits::kCategoryTruncate);

const char* ModelFormatName(ModelFormat format) {
  switch (format) {
    case ModelFormat::kXgboostJson: return "xgboost-json";
    case ModelFormat::kXgboostUbjson: return "xgboost-ubjson";
    case ModelFormat::kLightgbmText: return "lightgbm-text";
    case ModelFormat::kCatboostJson: return "catboost-json";
    case ModelFormat::kTreeliteCheckpoint: return "treelite-checkpoint";
  }
  return "unknown";
}

const char* LinkName(Link link) {
  switch (link) {
    case Link::kIdentity: return "identity";
    case Link::kSigmoid: return "sigmoid";
    case Link::kSoftmax: return "softmax";
    case Link::kExp: return "exp";
    case Link::kLog1pExp: return "log1p_exp";
    case Link::kSignedSquare: return "signed_square";
    case Link::kHinge: return "hinge";
    case Link::kArgmax: return "argmax";
  }
  return "unknown";
}

int64_t Forest::MemoryBytes() const {
  int64_t category_bytes = 0;
  for (const FeatureCategories& c : categories) {
    category_bytes += static_cast<int64_t>(c.numbers.size() * sizeof(double));
    category_bytes += static_cast<int64_t>(c.hashes.size() * sizeof(uint32_t));
    for (const std::string& s : c.strings) category_bytes += static_cast<int64_t>(s.size());
  }
  return category_bytes +
         static_cast<int64_t>(trees.size() * sizeof(Tree) + nodes.size() * sizeof(Node) +
                              category_bits.size() * sizeof(uint32_t) +
                              leaf_values.size() * sizeof(double) +
                              linear_leaves.size() * sizeof(LinearLeaf) +
                              linear_features.size() * sizeof(int32_t) +
                              linear_coeffs.size() * sizeof(double) +
                              base_margin.size() * sizeof(double) +
                              double_thresholds.size() * sizeof(double) +
                              double_threshold_offsets.size() * sizeof(uint32_t));
}

namespace {

absl::Status Invalid(const Forest& f, int tree, int node, const std::string& what) {
  std::string where = f.source.empty() ? std::string("<memory>") : f.source;
  if (tree >= 0) absl::StrAppend(&where, ": tree ", tree);
  if (node >= 0) absl::StrAppend(&where, " node ", node);
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// Validates one tree's structure with an explicit stack (no recursion: depth is untrusted) and
// fills its depth and leaf count.
absl::Status ValidateTree(Forest& f, int t, std::vector<uint8_t>& seen,
                          std::vector<std::pair<int32_t, int32_t>>& stack) {
  Tree& tree = f.trees[t];
  if (tree.num_nodes == 0) return Invalid(f, t, -1, "tree has no nodes");
  if (static_cast<uint64_t>(tree.node_begin) + tree.num_nodes > f.nodes.size()) {
    return Invalid(f, t, -1, "node range exceeds the node array");
  }
  if (!std::isfinite(tree.weight)) return Invalid(f, t, -1, "tree weight is not finite");
  if (tree.leaf_width != 1 && tree.leaf_width != f.num_outputs) {
    return Invalid(f, t, -1,
                   absl::StrCat("leaf width ", tree.leaf_width, " is neither 1 nor the ",
                                f.num_outputs, " outputs"));
  }
  if (tree.leaf_width == 1 && (tree.group < 0 || tree.group >= f.num_outputs)) {
    return Invalid(f, t, -1,
                   absl::StrCat("output group ", tree.group, " outside [0, ", f.num_outputs, ")"));
  }
  if (tree.iteration < 0) return Invalid(f, t, -1, "negative iteration");
  const Node* nodes = f.nodes.data() + tree.node_begin;
  const int32_t n = static_cast<int32_t>(tree.num_nodes);
  seen.assign(n, 0);
  stack.clear();
  stack.emplace_back(0, 0);
  seen[0] = 1;
  int depth = 0, leaves = 0, visited = 0;
  while (!stack.empty()) {
    auto [i, d] = stack.back();
    stack.pop_back();
    ++visited;
    const Node& node = nodes[i];
    if (d > kMaxTreeDepth) {
      return Invalid(f, t, i, absl::StrCat("tree deeper than ", kMaxTreeDepth, " levels"));
    }
    if (!std::isfinite(node.cover) || node.cover < 0) {
      return Invalid(f, t, i, "cover is negative or not finite");
    }
    if (node.is_leaf()) {
      ++leaves;
      if (d > depth) depth = d;
      if (static_cast<uint64_t>(node.payload) + tree.leaf_width > f.leaf_values.size()) {
        return Invalid(f, t, i, "leaf value index out of range");
      }
      for (int k = 0; k < tree.leaf_width; ++k) {
        if (!std::isfinite(f.leaf_values[node.payload + k])) {
          return Invalid(f, t, i, "leaf value is not finite");
        }
      }
      if (node.aux != 0) {
        if (node.aux - 1 >= f.linear_leaves.size()) {
          return Invalid(f, t, i, "linear leaf index out of range");
        }
        const LinearLeaf& ll = f.linear_leaves[node.aux - 1];
        if (static_cast<uint64_t>(ll.begin) + ll.count > f.linear_features.size() ||
            f.linear_coeffs.size() != f.linear_features.size()) {
          return Invalid(f, t, i, "linear leaf terms out of range");
        }
        if (!std::isfinite(ll.constant)) return Invalid(f, t, i, "linear constant not finite");
        for (uint32_t k = ll.begin; k < ll.begin + ll.count; ++k) {
          if (f.linear_features[k] < 0 || f.linear_features[k] >= f.num_features) {
            return Invalid(f, t, i, "linear leaf feature out of range");
          }
          if (!std::isfinite(f.linear_coeffs[k])) {
            return Invalid(f, t, i, "linear coefficient not finite");
          }
        }
      }
      continue;
    }
    if (node.feature < 0 || node.feature >= f.num_features) {
      return Invalid(f, t, i,
                     absl::StrCat("split feature ", node.feature, " outside [0, ",
                                  f.num_features, ")"));
    }
    if (node.is_categorical()) {
      if (node.aux == 0 ||
          static_cast<uint64_t>(node.payload) + node.aux > f.category_bits.size()) {
        return Invalid(f, t, i, "category bitset out of range");
      }
    } else if (std::isnan(node.threshold)) {
      return Invalid(f, t, i, "threshold is NaN");
    }
    for (int32_t c : {node.left, node.right}) {
      if (c <= 0 || c >= n) {
        return Invalid(f, t, i, absl::StrCat("child ", c, " outside [1, ", n, ")"));
      }
      if (seen[c]) {
        return Invalid(f, t, i, absl::StrCat("child ", c, " is reached twice (cycle or shared node)"));
      }
      seen[c] = 1;
      stack.emplace_back(c, d + 1);
    }
  }
  if (visited != n) {
    return Invalid(f, t, -1,
                   absl::StrCat(n - visited, " of ", n, " nodes are unreachable from the root"));
  }
  tree.depth = depth;
  tree.num_leaves = leaves;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ForestPtr> BuildForest(Forest f) {
  if (f.num_features <= 0) return Invalid(f, -1, -1, "model has no features");
  if (f.num_outputs <= 0) return Invalid(f, -1, -1, "model has no outputs");
  if (f.trees.empty()) return Invalid(f, -1, -1, "model has no trees");
  if (static_cast<int>(f.base_margin.size()) != f.num_outputs) {
    return Invalid(f, -1, -1,
                   absl::StrCat("base margin has ", f.base_margin.size(), " values for ",
                                f.num_outputs, " outputs"));
  }
  for (double b : f.base_margin) {
    if (!std::isfinite(b)) return Invalid(f, -1, -1, "base margin is not finite");
  }
  if (!std::isfinite(f.objective.sigmoid_alpha)) {
    return Invalid(f, -1, -1, "sigmoid parameter is not finite");
  }
  if (f.objective.link == Link::kSoftmax && f.num_outputs < 2) {
    return Invalid(f, -1, -1, "softmax objective with fewer than 2 outputs");
  }
  if (!f.feature_names.empty() && static_cast<int>(f.feature_names.size()) != f.num_features) {
    return Invalid(f, -1, -1, "feature name count differs from num_features");
  }
  if (!f.categories.empty()) {
    if (static_cast<int>(f.categories.size()) != f.num_features) {
      return Invalid(f, -1, -1, absl::StrCat("categories are recorded for ", f.categories.size(),
                                             " features; the model has ", f.num_features));
    }
    for (const FeatureCategories& c : f.categories) {
      if (int{!c.strings.empty()} + int{!c.numbers.empty()} + int{!c.hashes.empty()} > 1) {
        return Invalid(f, -1, -1,
                       "a feature's categories are of more than one kind (strings, numbers, "
                       "hashes)");
      }
      if (c.size() > kMaxCategoriesPerFeature) {
        return Invalid(f, -1, -1, absl::StrCat("a feature records ", c.size(),
                                               " categories; at most ", kMaxCategoriesPerFeature));
      }
    }
  }
  if (!f.double_threshold_offsets.empty() || !f.double_thresholds.empty()) {
    const auto& offsets = f.double_threshold_offsets;
    if (offsets.size() != static_cast<size_t>(f.num_features) + 1 || offsets.front() != 0 ||
        offsets.back() != f.double_thresholds.size()) {
      return Invalid(f, -1, -1, "double threshold offsets do not cover the features");
    }
    for (int feature = 0; feature < f.num_features; ++feature) {
      if (offsets[feature] > offsets[feature + 1]) {
        return Invalid(f, -1, -1, "double threshold offsets are not non-decreasing");
      }
      for (uint32_t i = offsets[feature]; i < offsets[feature + 1]; ++i) {
        if (std::isnan(f.double_thresholds[i]) ||
            (i > offsets[feature] && !(f.double_thresholds[i - 1] < f.double_thresholds[i]))) {
          return Invalid(f, -1, -1, "double thresholds are not sorted, distinct numbers");
        }
      }
    }
  }
  std::vector<uint8_t> seen;
  std::vector<std::pair<int32_t, int32_t>> stack;
  f.max_depth = 0;
  f.num_leaves = 0;
  f.num_iterations = 0;
  f.has_categorical = false;
  f.has_linear_leaves = !f.linear_leaves.empty();
  f.has_vector_leaves = false;
  for (int t = 0; t < static_cast<int>(f.trees.size()); ++t) {
    if (absl::Status s = ValidateTree(f, t, seen, stack); !s.ok()) return s;
    const Tree& tree = f.trees[t];
    if (tree.depth > f.max_depth) f.max_depth = tree.depth;
    f.num_leaves += tree.num_leaves;
    if (tree.iteration + 1 > f.num_iterations) f.num_iterations = tree.iteration + 1;
    if (tree.leaf_width > 1) f.has_vector_leaves = true;
  }
  for (const Node& node : f.nodes) {
    if (!node.is_leaf() && node.is_categorical()) f.has_categorical = true;
  }
  for (std::string& name : f.feature_names) name = EscapeInvalidUtf8(name);
  for (std::string& type : f.feature_types) type = EscapeInvalidUtf8(type);
  for (FeatureCategories& c : f.categories) {
    for (std::string& name : c.strings) name = EscapeInvalidUtf8(name);
  }
  f.objective.name = EscapeInvalidUtf8(f.objective.name);
  f.library_version = EscapeInvalidUtf8(f.library_version);
  return ForestPtr(std::make_shared<const Forest>(std::move(f)));
}

}  // namespace grove
