#include "core/predict/cpu/cpu_forest.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace grove::cpu {
namespace {

// Where a missing value goes at a numeric split without the Zero missing type.
bool NanGoesLeft(const Node& n) {
  if (n.flags & kNodeNanAsZero) return 0.0f < n.threshold;
  return n.flags & kNodeDefaultLeft;
}

bool NeedsGeneralDecision(const Node& n) {
  return (n.flags & (kNodeCategorical | kNodeMissingZero)) != 0;
}

}  // namespace

int DefaultBlockRows(int num_features) {
  const int64_t fit = (24 << 10) / (4 * std::max<int64_t>(1, num_features));
  return static_cast<int>(std::clamp<int64_t>(fit, 16, 64));
}

absl::StatusOr<std::shared_ptr<const CpuForest>> CpuForest::Build(ForestPtr forest,
                                                                  const CpuForestOptions& options) {
  if (forest == nullptr) return absl::InvalidArgumentError("CpuForest::Build: no forest");
  if (options.block_rows < 0 || options.block_rows > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_rows must be in [0, 64] (0: the default); got ", options.block_rows));
  }
  const Forest& f = *forest;
  if (f.nodes.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the CPU engine indexes nodes with 32 bits; the model has ", f.nodes.size()));
  }
  auto out = std::shared_ptr<CpuForest>(new CpuForest(std::move(forest)));
  out->block_rows_ = options.block_rows > 0 ? options.block_rows : DefaultBlockRows(f.num_features);
  out->nodes_.resize(f.nodes.size());
  out->leaf_values_.assign(f.nodes.size(), 0.0);
  out->forest_nodes_.resize(f.nodes.size());
  out->trees_.resize(f.trees.size());
  out->iterations_.resize(f.trees.size());
  out->tree_ids_.resize(f.trees.size());
  for (size_t t = 0; t < f.trees.size(); ++t) out->tree_ids_[t] = static_cast<int32_t>(t);

  std::vector<int32_t> order;  // breadth-first: Forest node index (relative) per position
  std::vector<int32_t> position;  // relative Forest node index -> position
  for (size_t t = 0; t < f.trees.size(); ++t) {
    const Tree& tree = f.trees[t];
    const Node* src = f.nodes.data() + tree.node_begin;
    const int32_t n = static_cast<int32_t>(tree.num_nodes);
    // Breadth-first with each split's children pushed together: siblings end up adjacent.
    order.assign(1, 0);
    order.reserve(n);
    for (size_t q = 0; q < order.size(); ++q) {
      const Node& node = src[order[q]];
      if (node.is_leaf()) continue;
      order.push_back(node.left);
      order.push_back(node.right);
    }
    position.assign(n, -1);
    for (int32_t p = 0; p < n; ++p) position[order[p]] = p;

    CpuTree& ct = out->trees_[t];
    ct.node_begin = tree.node_begin;  // same node count per tree: the same offsets
    ct.depth = tree.depth;
    ct.group = tree.group;
    ct.scalar = tree.leaf_width == 1;
    for (int32_t p = 0; p < n; ++p) {
      const int32_t src_index = order[p];
      const Node& node = src[src_index];
      const int64_t abs = static_cast<int64_t>(tree.node_begin) + p;
      CpuNode& dst = out->nodes_[abs];
      out->forest_nodes_[abs] = static_cast<int32_t>(tree.node_begin) + src_index;
      if (node.is_leaf()) {
        dst.threshold = std::numeric_limits<float>::quiet_NaN();
        dst.feature = 0;
        dst.left = p - 1;
        dst.bits = kCpuLeaf;
        if (node.aux != 0) ct.scalar = false;  // a linear leaf: computed from the row
        if (ct.scalar) out->leaf_values_[abs] = tree.weight * f.leaf_values[node.payload];
        continue;
      }
      dst.threshold = node.threshold;
      dst.feature = node.feature;
      dst.left = position[node.left];
      // Children are pushed together, so the right one follows the left one.
      if (position[node.right] != dst.left + 1) {
        return absl::InternalError(absl::StrCat("CpuForest: tree ", t, " node ", src_index,
                                                ": children not adjacent after reordering"));
      }
      if (NeedsGeneralDecision(node)) {
        dst.bits = kCpuGeneral;
        ct.general = true;
      } else {
        dst.bits = NanGoesLeft(node) ? kCpuNanLeft : 0;
      }
    }
    out->iterations_[t] = tree.iteration;
    if (t > 0 && tree.iteration < out->iterations_[t - 1]) out->iterations_sorted_ = false;
  }
  return std::shared_ptr<const CpuForest>(std::move(out));
}

void CpuForest::TreeSpan(int begin, int end, int32_t* first, int32_t* last) const {
  *first = static_cast<int32_t>(std::lower_bound(iterations_.begin(), iterations_.end(), begin) -
                                iterations_.begin());
  *last = static_cast<int32_t>(std::lower_bound(iterations_.begin(), iterations_.end(), end) -
                               iterations_.begin());
}

int64_t CpuForest::MemoryBytes() const {
  return static_cast<int64_t>(nodes_.size() * sizeof(CpuNode) +
                              leaf_values_.size() * sizeof(double) +
                              forest_nodes_.size() * sizeof(int32_t) +
                              trees_.size() * sizeof(CpuTree) + iterations_.size() * sizeof(int32_t) +
                              tree_ids_.size() * sizeof(int32_t));
}

}  // namespace grove::cpu
