#include "core/predict/tahoe/tahoe_level.h"

#include <algorithm>
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

// Appends tree `root` (depth-first node index) to `out` depth by depth; returns its root's index
// in `out`. The pairs of one depth follow the covers of their parents (`covers`, per depth-first
// node), largest first (ties, and models without covers: the parents' order), so that the pairs
// most rows reach share lines.
absl::StatusOr<uint32_t> AppendTree(const std::vector<TahoeNode8>& dfs, const Packing& p,
                                    const std::vector<double>& covers, uint32_t root,
                                    std::vector<TahoeNode8>& out) {
  const size_t first = out.size();
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
      if ((p.Flags(dfs[idx].word) & tahoe_bits::kLeaf) == 0) {
        splits.push_back({covers[idx], idx, at});
      }
    }
    std::stable_sort(splits.begin(), splits.end(),
                     [](const Split& a, const Split& b) { return a.cover > b.cover; });
    next.clear();
    for (const Split& s : splits) {
      TahoeNode8& n = out[s.at];
      const uint32_t flags = p.Flags(n.word);
      const uint32_t distant = p.Distant(n.word);
      const bool hot_right = (flags & tahoe_bits::kHotRight) != 0;
      const uint32_t left = hot_right ? s.idx + distant : s.idx + 1;
      const uint32_t right = hot_right ? s.idx + 1 : s.idx + distant;
      const uint64_t offset = out.size() - s.at;  // the pair's first slot, relative to the split
      if (offset >= (uint64_t{1} << (32 - p.dshift))) {
        return absl::InvalidArgumentError(
            absl::StrCat("tahoe level layout: a child offset of ", offset,
                         " nodes does not fit the packed node"));
      }
      const uint32_t kept = flags & ~tahoe_bits::kHotRight;
      n.word = (n.word & p.fmask) | (kept << p.fbits) | (static_cast<uint32_t>(offset) << p.dshift);
      next.push_back({right, out.size()});
      out.push_back(dfs[right]);
      next.push_back({left, out.size()});
      out.push_back(dfs[left]);
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
    absl::StatusOr<uint32_t> root = AppendTree(tf.nodes8(), p, tf.covers(), t.root, layout.nodes);
    if (!root.ok()) return root.status();
    if (uint64_t{base} + *root > UINT32_MAX) {
      return absl::InvalidArgumentError("tahoe level layout: node indices past 32 bits");
    }
    layout.roots.push_back(base + *root);
  }
  return layout;
}

}  // namespace grove
