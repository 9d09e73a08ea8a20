#include "core/model/forest_stats.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace grove {
namespace {

std::string Num(double v) { return absl::StrFormat("%.9g", v); }

}  // namespace

void AppendFeatureStats(const std::vector<std::string>& names,
                        const std::vector<std::string>& types, std::vector<Stat>* stats) {
  stats->push_back({"feature_names", "", StatKind::kList, names});
  stats->push_back({"feature_types", "", StatKind::kList, types});
}

std::vector<Stat> ForestStats(const Forest& forest) {
  std::vector<Stat> s;
  auto text = [&](const char* key, std::string v) {
    s.push_back({key, std::move(v), StatKind::kText});
  };
  auto num = [&](const char* key, double v) { s.push_back({key, Num(v), StatKind::kNumber}); };
  auto yes_no = [&](const char* key, bool v) {
    s.push_back({key, v ? "yes" : "no", StatKind::kBool});
  };

  text("format", ModelFormatName(forest.format));
  text("library_version", forest.library_version);
  num("memory_bytes", static_cast<double>(forest.MemoryBytes()));
  num("features", forest.num_features);
  num("outputs", forest.num_outputs);
  num("iterations", forest.num_iterations);
  num("trees", static_cast<double>(forest.trees.size()));
  num("nodes", static_cast<double>(forest.nodes.size()));
  num("leaves", static_cast<double>(forest.num_leaves));
  num("max_depth", forest.max_depth);

  // Mean leaf depth and mean tree depth: how far a row travels, the cost driver of every engine.
  double leaf_depth_sum = 0;
  double tree_depth_sum = 0;
  int64_t leaves = 0;
  int64_t weighted_trees = 0;
  std::vector<std::pair<int32_t, int32_t>> stack;
  for (size_t t = 0; t < forest.trees.size(); ++t) {
    const Tree& tree = forest.trees[t];
    tree_depth_sum += tree.depth;
    weighted_trees += tree.weight != 1.0;
    const Node* nodes = forest.TreeNodes(static_cast<int>(t));
    if (tree.num_nodes == 0) continue;
    stack.assign(1, {0, 0});
    while (!stack.empty()) {
      auto [n, d] = stack.back();
      stack.pop_back();
      if (n < 0 || static_cast<uint32_t>(n) >= tree.num_nodes) continue;
      if (nodes[n].is_leaf()) {
        leaf_depth_sum += d;
        ++leaves;
      } else {
        stack.push_back({nodes[n].left, d + 1});
        stack.push_back({nodes[n].right, d + 1});
      }
    }
  }
  num("mean_tree_depth", forest.trees.empty() ? 0.0 : tree_depth_sum / forest.trees.size());
  num("mean_leaf_depth", leaves == 0 ? 0.0 : leaf_depth_sum / leaves);

  text("objective", forest.objective.name);
  text("link", LinkName(forest.objective.link));
  if (forest.objective.link == Link::kSigmoid && forest.objective.sigmoid_alpha != 1.0) {
    num("sigmoid_alpha", forest.objective.sigmoid_alpha);
  }
  yes_no("average_output", forest.objective.average_output);
  std::string base;
  for (size_t k = 0; k < forest.base_margin.size(); ++k) {
    absl::StrAppend(&base, k ? "," : "", Num(forest.base_margin[k]));
  }
  text("base_margin", base);
  yes_no("categorical_splits", forest.has_categorical);
  yes_no("linear_leaves", forest.has_linear_leaves);
  yes_no("vector_leaves", forest.has_vector_leaves);
  num("weighted_trees", static_cast<double>(weighted_trees));
  AppendFeatureStats(forest.feature_names, forest.feature_types, &s);
  return s;
}

}  // namespace grove
