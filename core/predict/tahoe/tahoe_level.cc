#include "core/predict/tahoe/tahoe_level.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace grove {
namespace {

struct Packing {
  uint32_t fbits, fmask, dshift;
  uint32_t Flags(uint32_t word) const {
    return (word >> fbits) & ((1u << tahoe_bits::kNumFlags) - 1u);
  }
  uint32_t Distant(uint32_t word) const { return word >> dshift; }
};

// The children of split `idx` (depth-first index).
struct Children {
  uint32_t left, right;
};
Children ChildrenOf(const std::vector<TahoeNode8>& dfs, const Packing& p, uint32_t idx) {
  const uint32_t distant = p.Distant(dfs[idx].word);
  const bool hot_right = (p.Flags(dfs[idx].word) & tahoe_bits::kHotRight) != 0;
  return hot_right ? Children{idx + distant, idx + 1} : Children{idx + 1, idx + distant};
}
bool IsSplit(const std::vector<TahoeNode8>& dfs, const Packing& p, uint32_t idx) {
  return (p.Flags(dfs[idx].word) & tahoe_bits::kLeaf) == 0;
}

// The cover (Node::cover) of every split of the Tahoe tree at `root`, keyed by its depth-first
// index, from the model's tree `tree` walked alongside (the Tahoe tree keeps the model's left and
// right). Empty when the two shapes differ or a cover is not a finite number >= 0: the layout then
// keeps plain breadth-first order.
std::vector<std::pair<uint32_t, double>> SplitCovers(const std::vector<TahoeNode8>& dfs,
                                                     const Packing& p, uint32_t root,
                                                     const Node* tree) {
  std::vector<std::pair<uint32_t, double>> covers;
  std::vector<std::pair<uint32_t, int32_t>> stack{{root, 0}};
  while (!stack.empty()) {
    const auto [idx, node] = stack.back();
    stack.pop_back();
    const Node& n = tree[node];
    if (IsSplit(dfs, p, idx) != !n.is_leaf() || !(n.cover >= 0) || !std::isfinite(n.cover)) {
      return {};
    }
    if (n.is_leaf()) continue;
    covers.push_back({idx, n.cover});
    const Children c = ChildrenOf(dfs, p, idx);
    stack.push_back({c.left, n.left});
    stack.push_back({c.right, n.right});
  }
  std::sort(covers.begin(), covers.end());
  return covers;
}

// Appends tree `root` (depth-first node index) to `out` depth by depth; returns its root's index
// in `out`. The pairs of one depth follow the covers of their parents, largest first (ties and
// trees without covers: the parents' order), so that the pairs most rows reach share lines.
absl::StatusOr<uint32_t> AppendTree(const std::vector<TahoeNode8>& dfs, const Packing& p,
                                    uint32_t root, const Node* tree, std::vector<TahoeNode8>& out) {
  const size_t first = out.size();
  const std::vector<std::pair<uint32_t, double>> covers = SplitCovers(dfs, p, root, tree);
  const auto cover = [&](uint32_t idx) {
    const auto it = std::lower_bound(covers.begin(), covers.end(), std::make_pair(idx, -1.0));
    return it != covers.end() && it->first == idx ? it->second : 0.0;
  };
  // One depth: depth-first indices and their positions in `out`; its splits with their covers.
  struct Split {
    double cover;
    uint32_t idx;
    size_t at;
  };
  std::vector<std::pair<uint32_t, size_t>> depth{{root, first}}, next;
  std::vector<Split> splits;
  out.push_back(dfs[root]);
  while (!depth.empty()) {
    splits.clear();
    for (const auto& [idx, at] : depth) {
      if (IsSplit(dfs, p, idx)) splits.push_back({cover(idx), idx, at});
    }
    std::stable_sort(splits.begin(), splits.end(),
                     [](const Split& a, const Split& b) { return a.cover > b.cover; });
    next.clear();
    for (const Split& s : splits) {
      const Children c = ChildrenOf(dfs, p, s.idx);
      const uint64_t offset = out.size() - s.at;  // the pair's first slot, relative to the split
      if (offset >= (uint64_t{1} << (32 - p.dshift))) {
        return absl::InvalidArgumentError(
            absl::StrCat("tahoe level layout: a child offset of ", offset,
                         " nodes does not fit the packed node"));
      }
      TahoeNode8& n = out[s.at];
      const uint32_t kept = p.Flags(n.word) & ~tahoe_bits::kHotRight;
      n.word = (n.word & p.fmask) | (kept << p.fbits) | (static_cast<uint32_t>(offset) << p.dshift);
      next.push_back({c.right, out.size()});
      out.push_back(dfs[c.right]);
      next.push_back({c.left, out.size()});
      out.push_back(dfs[c.left]);
    }
    depth.swap(next);
  }
  if (out.size() > UINT32_MAX) {
    return absl::InvalidArgumentError("tahoe level layout: more nodes than 32-bit indices reach");
  }
  return static_cast<uint32_t>(first);
}

}  // namespace

absl::StatusOr<TahoeLevelLayout> BuildTahoeLevelLayout(const TahoeForest& tf, uint32_t base) {
  if (!tf.fixed_walk()) {
    return absl::FailedPreconditionError(
        "tahoe level layout: the forest does not take the fixed walk (8-byte nodes, no "
        "missing-zero rule, no linear leaves)");
  }
  const uint32_t fbits = tf.HostView().feature_bits;
  const Packing p{fbits, (1u << fbits) - 1u, fbits + tahoe_bits::kNumFlags};
  TahoeLevelLayout layout;
  layout.nodes.reserve(tf.nodes8().size());
  layout.roots.reserve(tf.trees().size());
  for (const TahoeTree& t : tf.trees()) {
    absl::StatusOr<uint32_t> root =
        AppendTree(tf.nodes8(), p, t.root, tf.forest().TreeNodes(static_cast<int>(t.orig)),
                   layout.nodes);
    if (!root.ok()) return root.status();
    if (uint64_t{base} + *root > UINT32_MAX) {
      return absl::InvalidArgumentError("tahoe level layout: node indices past 32 bits");
    }
    layout.roots.push_back(base + *root);
  }
  return layout;
}

}  // namespace grove
