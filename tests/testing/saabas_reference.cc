#include "tests/testing/saabas_reference.h"

#include "core/model/decision.h"

namespace grove::testing {
namespace {

double ExpectedValue(const Forest& f, int t, int32_t i, int b) {
  const Node* nodes = f.TreeNodes(t);
  const Node& n = nodes[i];
  if (n.is_leaf()) return f.leaf_values[n.payload + b];
  if (!(n.cover > 0)) return 0.0;
  return nodes[n.left].cover / n.cover * ExpectedValue(f, t, n.left, b) +
         nodes[n.right].cover / n.cover * ExpectedValue(f, t, n.right, b);
}

}  // namespace

std::vector<double> SaabasByDefinition(const Forest& f, const float* row, int iteration_begin,
                                       int iteration_end, const FeatureGroups* groups) {
  const int players = groups != nullptr ? groups->num_groups() : f.num_features;
  const int64_t f1 = players + 1;
  std::vector<double> out(f.num_outputs * f1, 0.0);
  for (int k = 0; k < f.num_outputs; ++k) out[k * f1 + players] = f.base_margin[k];
  for (int t = 0; t < static_cast<int>(f.trees.size()); ++t) {
    if (!f.TreeInRange(t, iteration_begin, iteration_end)) continue;
    const Tree& tree = f.trees[t];
    for (int b = 0; b < tree.leaf_width; ++b) {
      const int k = tree.leaf_width == 1 ? tree.group : b;
      out[k * f1 + players] += tree.weight * ExpectedValue(f, t, 0, b);
      int32_t i = 0;
      while (!f.TreeNodes(t)[i].is_leaf()) {
        const Node& n = f.TreeNodes(t)[i];
        const int32_t child = GoesLeft(n.flags, n.threshold, n.payload, n.aux,
                                       f.category_bits.data(), row[n.feature])
                                  ? n.left
                                  : n.right;
        const int column = groups != nullptr ? groups->group_of[n.feature] : n.feature;
        out[k * f1 + column] +=
            tree.weight * (ExpectedValue(f, t, child, b) - ExpectedValue(f, t, i, b));
        i = child;
      }
    }
  }
  return out;
}

}  // namespace grove::testing
