#include "core/predict/tahoe/tahoe_level.h"

#include <cstddef>
#include <cstdint>
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

// Appends tree `root` (depth-first node index) breadth-first to `out`; returns its root's index in
// `out`. `queue` is scratch.
absl::StatusOr<uint32_t> AppendTree(const std::vector<TahoeNode8>& dfs, const Packing& p,
                                    uint32_t root, std::vector<TahoeNode8>& out,
                                    std::vector<uint32_t>& queue) {
  const size_t first = out.size();
  queue.assign(1, root);
  // Node i of the tree (queue order) goes to out[first + i]; a split's children are queued
  // together, so they land side by side at its pair offset.
  for (size_t i = 0; i < queue.size(); ++i) {
    const uint32_t idx = queue[i];
    TahoeNode8 n = dfs[idx];
    const uint32_t flags = p.Flags(n.word);
    if ((flags & tahoe_bits::kLeaf) == 0) {
      const uint32_t distant = p.Distant(n.word);
      const bool hot_right = (flags & tahoe_bits::kHotRight) != 0;
      const uint32_t left = hot_right ? idx + distant : idx + 1;
      const uint32_t right = hot_right ? idx + 1 : idx + distant;
      const uint64_t offset = queue.size() - i;  // the pair's first slot, relative to this node
      if (offset >= (uint64_t{1} << (32 - p.dshift))) {
        return absl::InvalidArgumentError(
            absl::StrCat("tahoe level layout: a child offset of ", offset,
                         " nodes does not fit the packed node"));
      }
      queue.push_back(right);
      queue.push_back(left);
      const uint32_t kept = flags & ~tahoe_bits::kHotRight;
      n.word = (n.word & p.fmask) | (kept << p.fbits) | (static_cast<uint32_t>(offset) << p.dshift);
    }
    out.push_back(n);
  }
  if (first + queue.size() > UINT32_MAX) {
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
  std::vector<uint32_t> queue;
  for (const TahoeTree& t : tf.trees()) {
    absl::StatusOr<uint32_t> root = AppendTree(tf.nodes8(), p, t.root, layout.nodes, queue);
    if (!root.ok()) return root.status();
    if (uint64_t{base} + *root > UINT32_MAX) {
      return absl::InvalidArgumentError("tahoe level layout: node indices past 32 bits");
    }
    layout.roots.push_back(base + *root);
  }
  return layout;
}

}  // namespace grove
