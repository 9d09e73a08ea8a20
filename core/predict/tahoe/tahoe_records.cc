#include "core/predict/tahoe/tahoe_records.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace grove {
namespace {

namespace rb = tahoe_record_bits;

// The depth-first nodes' fields (TahoeNode8's packing for the forest's feature_bits).
struct Packing {
  uint32_t fbits, fmask, dshift;
  uint32_t Flags(uint32_t word) const {
    return (word >> fbits) & ((1u << tahoe_bits::kNumFlags) - 1u);
  }
  uint32_t Feature(uint32_t word) const { return word & fmask; }
  uint32_t Distant(uint32_t word) const { return word >> dshift; }
};

// The value a leaf position holds: float bits, or with `table` its index in `leaves` (appended).
uint32_t LeafValue(const TahoeNode8& n, const Packing& p, const std::vector<double>& leaf_table,
                   bool table, std::vector<double>& leaves) {
  const bool in_table = (p.Flags(n.word) & tahoe_bits::kLeafTable) != 0;
  if (!table) return n.value;
  leaves.push_back(in_table ? leaf_table[n.value] : static_cast<double>(TahoeBitsToFloat(n.value)));
  return static_cast<uint32_t>(leaves.size() - 1);
}

// Records of a tree of depth `depth`: its heap of K = ceil(depth / 2) levels and its 4^K leaf
// positions four a record.
int64_t RecordsOfTree(int depth) {
  const int levels = (depth + 1) / 2;
  const int64_t heap = ((int64_t{1} << (2 * levels)) - 1) / 3;
  return heap + ((int64_t{1} << (2 * levels)) + 3) / 4;
}

}  // namespace

absl::StatusOr<TahoeRecordLayout> BuildTahoeRecordLayout(const TahoeForest& tf, int64_t max_bytes) {
  if (!tf.fixed_walk() || tf.categorical()) {
    return absl::FailedPreconditionError(
        "tahoe record layout: the forest does not take the numeric fixed walk (8-byte nodes, no "
        "categorical split, no missing-zero rule, no linear leaves)");
  }
  const TahoeForestView view = tf.HostView();
  const uint32_t fbits = view.feature_bits;
  const Packing p{fbits, (1u << fbits) - 1u, fbits + tahoe_bits::kNumFlags};
  const std::vector<TahoeNode8>& nodes = tf.nodes8();
  const auto is_leaf = [&](uint32_t i) {
    return (p.Flags(nodes[i].word) & tahoe_bits::kLeaf) != 0;
  };
  // A split's children (depth-first indices): the adjacent one and the distant one.
  const auto left_of = [&](uint32_t i) {
    const bool hot_right = (p.Flags(nodes[i].word) & tahoe_bits::kHotRight) != 0;
    return hot_right ? i + p.Distant(nodes[i].word) : i + 1;
  };
  const auto right_of = [&](uint32_t i) {
    const bool hot_right = (p.Flags(nodes[i].word) & tahoe_bits::kHotRight) != 0;
    return hot_right ? i + 1 : i + p.Distant(nodes[i].word);
  };
  bool table = false;
  for (const TahoeNode8& n : nodes) {
    const uint32_t flags = p.Flags(n.word);
    if ((flags & tahoe_bits::kLeaf) != 0) {
      table = table || (flags & tahoe_bits::kLeafTable) != 0;
    } else if (p.Feature(n.word) >= static_cast<uint32_t>(rb::kMaxFeatures)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "tahoe record layout: a split on feature ", p.Feature(n.word), " (records hold ",
          rb::kMaxFeatures, " features)"));
    }
  }
  // Each tree's depth (its deepest leaf), and the layout's size, before any record is written.
  std::vector<int> depths(tf.trees().size(), 0);
  int64_t total = 0;
  for (size_t t = 0; t < depths.size(); ++t) {
    std::vector<std::pair<uint32_t, int>> stack{{tf.trees()[t].root, 0}};
    while (!stack.empty()) {
      const auto [i, d] = stack.back();
      stack.pop_back();
      depths[t] = std::max(depths[t], d);
      if (is_leaf(i)) continue;
      stack.push_back({left_of(i), d + 1});
      stack.push_back({right_of(i), d + 1});
    }
    const int levels = (depths[t] + 1) / 2;
    if (levels > rb::kMaxLevels) {
      return absl::FailedPreconditionError(absl::StrCat(
          "tahoe record layout: a tree of depth ", depths[t], " (records hold depth ",
          2 * rb::kMaxLevels, ")"));
    }
    total += RecordsOfTree(depths[t]) * static_cast<int64_t>(sizeof(TahoeRecord));
    if (total > max_bytes) {
      return absl::FailedPreconditionError(absl::StrCat(
          "tahoe record layout: complete heaps of the trees take more than ", max_bytes,
          " bytes (trees of depth up to ", depths[t], ")"));
    }
  }
  TahoeRecordLayout layout;
  layout.records.assign(static_cast<size_t>(total / sizeof(TahoeRecord)), TahoeRecord{{0, 0, 0}, 0});
  layout.roots.reserve(depths.size());
  size_t first = 0;
  for (size_t t = 0; t < depths.size(); ++t) {
    const int levels = (depths[t] + 1) / 2;
    const uint32_t heap = static_cast<uint32_t>(((uint64_t{1} << (2 * levels)) - 1) / 3);
    if (first >= (size_t{1} << (32 - rb::kLevelBits))) {
      return absl::FailedPreconditionError(
          "tahoe record layout: more records than a root word indexes");
    }
    layout.roots.push_back(static_cast<uint32_t>(first << rb::kLevelBits) |
                           static_cast<uint32_t>(levels));
    TahoeRecord* recs = layout.records.data() + first;
    uint32_t* leaf = reinterpret_cast<uint32_t*>(recs + heap);
    // Depth-first over the even-depth nodes: (node, heap position, heap level).
    struct Item {
      uint32_t node;
      uint64_t pos;
      int level;
    };
    std::vector<Item> stack{{tf.trees()[t].root, 0, 0}};
    // A leaf whose subtree's first position is `pos` at heap level `level` and spans `span`
    // positions of that level: every leaf position below them holds its value.
    const auto fill = [&](uint32_t node, uint64_t pos, int level, uint64_t span) {
      const uint32_t v = LeafValue(nodes[node], p, tf.leaf_table(), table, layout.leaves);
      const int m = levels - level;
      const uint64_t count = uint64_t{1} << (2 * m);
      const uint64_t begin = (pos << (2 * m)) + (count - 1) / 3 - heap;
      std::fill(leaf + begin, leaf + begin + span * count, v);
    };
    while (!stack.empty()) {
      const Item it = stack.back();
      stack.pop_back();
      if (is_leaf(it.node)) {
        fill(it.node, it.pos, it.level, 1);
        continue;
      }
      TahoeRecord& r = recs[it.pos];
      const uint32_t slot_nodes[3] = {it.node, left_of(it.node), right_of(it.node)};
      for (int s = 0; s < 3; ++s) {
        const uint32_t n = slot_nodes[s];
        if (s > 0 && is_leaf(n)) {
          // A zero split in this slot, over two positions that both hold the leaf.
          fill(n, 4 * it.pos + 2 * s - 1, it.level + 1, 2);
          continue;
        }
        r.value[s] = nodes[n].value;
        r.word |= p.Feature(nodes[n].word) << (rb::kFeatureBits * s);
        if ((p.Flags(nodes[n].word) & tahoe_bits::kDefaultLeft) != 0) {
          r.word |= 1u << (rb::kDefaultLeftShift + s);
        }
        if (s > 0) {  // the child's children: grandchild positions 4 pos + 2s - 1 and 4 pos + 2s
          stack.push_back({left_of(n), 4 * it.pos + 2 * s - 1, it.level + 1});
          stack.push_back({right_of(n), 4 * it.pos + 2 * s, it.level + 1});
        }
      }
    }
    first += static_cast<size_t>(RecordsOfTree(depths[t]));
  }
  if (layout.leaves.size() > UINT32_MAX) {
    return absl::FailedPreconditionError("tahoe record layout: more leaves than 32-bit indices");
  }
  return layout;
}

}  // namespace grove
