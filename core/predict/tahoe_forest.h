// Tahoe adaptive forest format (Xie et al., EuroSys'21, §4): the layout every GPU prediction strategy
// reads, built once per model on the host.
//
// What it does to a Forest:
//  * probability-based node rearrangement (§4.1): each tree is laid out depth-first with the more
//    probable child (larger cover) adjacent to its parent (node + 1) and the other one `distant`
//    nodes further, so the hot path of a tree is contiguous and a warp walking one tree touches few
//    cache lines / shared-memory words;
//  * similarity-based tree rearrangement (§4.2): trees are tokenised into windows of `token_nodes`
//    nodes along root-to-leaf paths weighted by node probability, SimHashed to `hash_bits`, cut into
//    `lsh_chunks` LSH chunks; trees with the most chunk collisions are placed next to each other
//    (within each output group), and trees are assigned to thread groups balanced by expected work;
//  * compact packed nodes (§4.3): 8 bytes with the feature index in as few bits as the model needs,
//    16 bytes only when a tree is too large for the packed offsets;
//  * routing rules identical to the CPU reference: numeric splits call NumericGoesLeft and
//    categorical splits CategoricalGoesLeft from core/model/decision.h. LightGBM's NaN-as-zero is
//    resolved at build time into the node's NaN direction (exactly equivalent).
//
// Leaves carry the tree weight already multiplied in: inline float32 values when that rounding is
// provably far below the tolerance (always for XGBoost gbtree), otherwise indices into a double
// table (dart weights, LightGBM doubles, vector and linear leaves).
//
// A TahoeForest is immutable after Build and thread-safe to share. TahoeForestView is a by-value
// bundle of raw pointers (host or device) passed into kernels; the GROVE_HD functions below are the
// per-row logic shared by the GPU kernels and the host evaluator (TahoePredictHost).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/hd.h"
#include "core/common/rows.h"
#include "core/model/decision.h"
#include "core/model/forest.h"
#include "core/model/transform.h"
#include "core/predict/predict.h"

namespace grove {

// Five flag bits of a packed node. kDefaultLeft and kMissingZero coincide with decision_bits so a
// numeric node's flags go to NumericGoesLeft unchanged (bit 3, kHotRight, is ignored there).
namespace tahoe_bits {
inline constexpr uint32_t kLeaf = 1u << 0;
inline constexpr uint32_t kDefaultLeft = 1u << 1;  // NaN direction (LightGBM NaN-as-zero resolved)
inline constexpr uint32_t kCategorical = 1u << 2;  // split: value indexes TahoeForest::cat_splits
inline constexpr uint32_t kHotRight = 1u << 3;     // split: the adjacent child is the right child
inline constexpr uint32_t kMissingZero = 1u << 4;
inline constexpr int kNumFlags = 5;
// Leaves reuse the split-only bits.
inline constexpr uint32_t kLeafTable = kCategorical;  // value indexes leaf_table (else: float bits)
inline constexpr uint32_t kLeafLinear = kHotRight;    // value indexes linear_leaves
static_assert(kDefaultLeft == decision_bits::kDefaultLeft);
static_assert(kMissingZero == decision_bits::kMissingZero);
}  // namespace tahoe_bits

// 8-byte node: `word` = feature | flags << feature_bits | distant << (feature_bits + 5), where
// feature_bits is the fewest bits that index features 0..num_features (TahoeForestView::
// feature_bits): a leaf's feature is the padding feature num_features (see TahoeWalkFixed).
struct alignas(8) TahoeNode8 {
  uint32_t value;  // split: float threshold bits or cat_splits index; leaf: see tahoe_bits
  uint32_t word;
};
static_assert(sizeof(TahoeNode8) == 8, "TahoeNode8 must stay 8 bytes");

// 16-byte node for models whose trees or feature counts do not fit the packed word.
struct alignas(16) TahoeNode16 {
  uint32_t value;
  uint32_t feature;
  uint32_t flags;
  uint32_t distant;  // offset from this node to its distant child (0 for a leaf)
};
static_assert(sizeof(TahoeNode16) == 16, "TahoeNode16 must stay 16 bytes");

struct TahoeTree {
  uint32_t root;       // index of the root in the node array
  uint32_t orig;       // index of the tree in the model (leaf-output column)
  int32_t group;       // output group of a scalar-leaf tree; -1 for vector leaves (num_outputs values)
  int32_t iteration;   // boosting round
};
static_assert(sizeof(TahoeTree) == 16, "TahoeTree must stay 16 bytes");

struct TahoeCatSplit {
  uint32_t offset;     // first word in cat_bits
  uint32_t num_words;
  uint32_t flags;      // decision_bits for CategoricalGoesLeft
  uint32_t pad = 0;
};

struct TahoeLinearLeaf {
  double constant;
  double plain;        // the leaf's plain value (used when a feature is NaN)
  double weight;       // tree weight
  uint32_t begin;      // terms in linear_features / linear_coeffs
  uint32_t count;
};

// A decoded node.
struct TahoeDecoded {
  uint32_t value;
  uint32_t feature;
  uint32_t flags;
  uint32_t distant;
};

// Raw pointers to a TahoeForest's arrays, host or device; passed by value into kernels.
struct TahoeForestView {
  const void* nodes = nullptr;  // TahoeNode8 or TahoeNode16 (node_bytes)
  const TahoeTree* trees = nullptr;  // in the Tahoe order
  const TahoeCatSplit* cat_splits = nullptr;
  const uint32_t* cat_bits = nullptr;
  const double* leaf_table = nullptr;
  const TahoeLinearLeaf* linear_leaves = nullptr;
  const int32_t* linear_features = nullptr;
  const double* linear_coeffs = nullptr;
  const int32_t* leaf_ids = nullptr;   // per node: the library's leaf id (-1 for splits)
  const double* base_margin = nullptr; // num_outputs
  int32_t num_trees = 0;
  int32_t num_nodes = 0;
  int32_t num_features = 0;
  int32_t num_outputs = 1;
  uint32_t feature_bits = 1;           // TahoeNode8 only
  // > 0: fixed walks take exactly this many steps (the forest's deepest leaf, TahoeForest::
  // fixed_steps) instead of testing for leaves every kTahoeFixedUnroll steps.
  int32_t fixed_steps = 0;
};

GROVE_HD float TahoeBitsToFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// The value of the padding feature (TahoeWalkFixed, TahoeLaneLayout).
GROVE_HD float TahoeNan() { return TahoeBitsToFloat(0x7fc00000u); }

// One wide load per node (a plain struct copy may become two 32-bit loads). `Pair`: an 8-byte node
// of two 32-bit words.
template <typename Pair>
GROVE_HD Pair TahoeLoadPair(const Pair* p) {
  static_assert(sizeof(Pair) == 8 && alignof(Pair) == 8);
#if defined(__CUDA_ARCH__)
  const uint2 v = *reinterpret_cast<const uint2*>(p);
  return Pair{v.x, v.y};
#else
  return *p;
#endif
}
GROVE_HD TahoeNode8 TahoeLoad(const TahoeNode8* p) { return TahoeLoadPair(p); }
GROVE_HD TahoeNode16 TahoeLoad(const TahoeNode16* p) {
#if defined(__CUDA_ARCH__)
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  return TahoeNode16{v.x, v.y, v.z, v.w};
#else
  return *p;
#endif
}

GROVE_HD TahoeDecoded TahoeDecode(const TahoeNode8& n, uint32_t feature_bits) {
  TahoeDecoded d;
  d.value = n.value;
  d.feature = n.word & ((1u << feature_bits) - 1u);
  d.flags = (n.word >> feature_bits) & ((1u << tahoe_bits::kNumFlags) - 1u);
  d.distant = n.word >> (feature_bits + tahoe_bits::kNumFlags);
  return d;
}

GROVE_HD TahoeDecoded TahoeDecode(const TahoeNode16& n, uint32_t /*feature_bits*/) {
  return TahoeDecoded{n.value, n.feature, n.flags, n.distant};
}

// Does `row` go from split `d` to its adjacent child (node + 1)? Same rules as the CPU reference.
GROVE_HD bool TahoeGoesAdjacent(const TahoeDecoded& d, const TahoeCatSplit* cat_splits,
                                const uint32_t* cat_bits, float x) {
  bool left;
  if (d.flags & tahoe_bits::kCategorical) {
    const TahoeCatSplit& c = cat_splits[d.value];
    left = CategoricalGoesLeft(static_cast<uint16_t>(c.flags), cat_bits + c.offset, c.num_words, x);
  } else {
    left = NumericGoesLeft(static_cast<uint16_t>(d.flags), TahoeBitsToFloat(d.value), x);
  }
  return left != ((d.flags & tahoe_bits::kHotRight) != 0);
}

// Index (into `nodes`) of the leaf that `row` reaches from `idx`; the decoded leaf goes to `leaf`.
// `row[f]` gives feature f.
template <typename Node, typename Row>
GROVE_HD uint32_t TahoeTraverse(const Node* nodes, uint32_t idx, const Row& row,
                                const TahoeForestView& f, TahoeDecoded& leaf) {
  for (;;) {
    const TahoeDecoded d = TahoeDecode(TahoeLoad(nodes + idx), f.feature_bits);
    if (d.flags & tahoe_bits::kLeaf) {
      leaf = d;
      return idx;
    }
    idx += TahoeGoesAdjacent(d, f.cat_splits, f.cat_bits, row[d.feature]) ? 1u : d.distant;
  }
}

// The same walk for "simple" forests (TahoeForest::simple(): numeric splits only, no missing-zero
// rule), which covers most XGBoost models: NaN takes the default direction, else x < threshold goes
// left -- exactly NumericGoesLeft for such nodes -- with the decode masks hoisted out of the loop.
// About half the instructions per node of TahoeTraverse.
template <typename Node, typename Row>
GROVE_HD uint32_t TahoeTraverseSimple(const Node* nodes, uint32_t idx, const Row& row,
                                      const TahoeForestView& f, TahoeDecoded& leaf) {
  for (;;) {
    const TahoeDecoded d = TahoeDecode(TahoeLoad(nodes + idx), f.feature_bits);
    if (d.flags & tahoe_bits::kLeaf) {
      leaf = d;
      return idx;
    }
    const float x = row[d.feature];
    const bool left = IsNan(x) ? (d.flags & tahoe_bits::kDefaultLeft) != 0
                               : x < TahoeBitsToFloat(d.value);
    idx += left != ((d.flags & tahoe_bits::kHotRight) != 0) ? 1u : d.distant;
  }
}

// TahoeNode8 specialisation: masks and shifts computed once per tree.
template <typename Row>
GROVE_HD uint32_t TahoeTraverseSimple(const TahoeNode8* nodes, uint32_t idx, const Row& row,
                                      const TahoeForestView& f, TahoeDecoded& leaf) {
  const uint32_t fb = f.feature_bits;
  const uint32_t fmask = (1u << fb) - 1u;
  const uint32_t leaf_bit = tahoe_bits::kLeaf << fb;
  const uint32_t default_left_bit = tahoe_bits::kDefaultLeft << fb;
  const uint32_t hot_right_bit = tahoe_bits::kHotRight << fb;
  const uint32_t dshift = fb + tahoe_bits::kNumFlags;
  for (;;) {
    const TahoeNode8 n = TahoeLoad(nodes + idx);
    if (n.word & leaf_bit) {
      leaf = TahoeDecode(n, fb);
      return idx;
    }
    const float x = row[n.word & fmask];
    const bool left = IsNan(x) ? (n.word & default_left_bit) != 0 : x < TahoeBitsToFloat(n.value);
    idx += left != ((n.word & hot_right_bit) != 0) ? 1u : (n.word >> dshift);
  }
}

// Walks of a tree, from the most general to the cheapest per node (TahoeAccumulateTrees' kWalk):
//  * kGeneric: every split kind (TahoeTraverse);
//  * kSimple: TahoeForest::simple() forests (TahoeTraverseSimple);
//  * kFixed: TahoeForest::fixed_walk() forests with rows padded by a NaN column (TahoeWalkFixed).
enum TahoeWalk : int { kTahoeWalkGeneric = 0, kTahoeWalkSimple = 1, kTahoeWalkFixed = 2 };

// Steps TahoeWalkFixed takes between two tests of whether every lane has reached its leaf.
inline constexpr int kTahoeFixedUnroll = 4;

// Branch-free walk for TahoeForest::fixed_walk() forests. Every leaf names the padding feature
// `num_features` (whose value is NaN in every row the caller passes) and has no flag that a split
// reads, so at a leaf the comparison fails, NaN does not go left, and the walk adds the leaf's
// distant offset, 0: leaves loop to themselves. The walk can therefore take kTahoeFixedUnroll steps
// between leaf tests with no test or branch per node, and on the GPU one test serves the warp
// (lanes loop until all of them are at a leaf; extra steps are no-ops). Routing is TahoeTraverseSimple's
// (NaN takes the default direction, else x < threshold goes left). `row[num_features]` must be NaN.
// Returns the leaf's index; its node goes to `leaf`.
// The packed word's fields for a forest's feature_bits, computed once per tree; Step is one fixed
// step (a leaf steps to itself).
struct TahoeFixedStep {
  uint32_t fmask, leaf_bit, default_left_bit, hot_right_bit, dshift;
  GROVE_HD explicit TahoeFixedStep(uint32_t feature_bits)
      : fmask((1u << feature_bits) - 1u),
        leaf_bit(tahoe_bits::kLeaf << feature_bits),
        default_left_bit(tahoe_bits::kDefaultLeft << feature_bits),
        hot_right_bit(tahoe_bits::kHotRight << feature_bits),
        dshift(feature_bits + tahoe_bits::kNumFlags) {}
  template <typename Row>
  GROVE_HD uint32_t Offset(const TahoeNode8& n, const Row& row) const {
    const float x = row[n.word & fmask];
    const bool left = x < TahoeBitsToFloat(n.value) || (IsNan(x) && (n.word & default_left_bit) != 0);
    return left != ((n.word & hot_right_bit) != 0) ? 1u : (n.word >> dshift);
  }
};

// `steps` > 0: exactly that many steps (at least the tree's depth: a shallower leaf steps to itself),
// with no test between them; 0: until every lane is at a leaf, tested every kTahoeFixedUnroll steps.
template <typename Row>
GROVE_HD uint32_t TahoeWalkFixed(const TahoeNode8* nodes, uint32_t idx, const Row& row,
                                 uint32_t feature_bits, TahoeNode8& leaf, int steps = 0) {
  const TahoeFixedStep step(feature_bits);
  TahoeNode8 n = TahoeLoad(nodes + idx);
#if defined(__CUDA_ARCH__)
#pragma unroll 4
#endif
  for (int s = 0; s < steps; ++s) {
    idx += step.Offset(n, row);
    n = TahoeLoad(nodes + idx);
  }
  for (; steps == 0;) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int s = 0; s < kTahoeFixedUnroll; ++s) {
      idx += step.Offset(n, row);
      n = TahoeLoad(nodes + idx);
    }
    const bool done = (n.word & step.leaf_bit) != 0;
#if defined(__CUDA_ARCH__)
    if (__all_sync(__activemask(), done)) break;
#else
    if (done) break;
#endif
  }
  leaf = n;
  return idx;
}

// TahoeWalkFixed for two rows through the same tree at once: two independent chains of node and
// feature loads per thread, so a thread keeps twice the loads in flight (latency-bound walks of
// wide or many-output forests run at full occupancy and still wait on L2). Same routing, same leaves.
template <typename Row>
GROVE_HD void TahoeWalkFixed2(const TahoeNode8* nodes, uint32_t root, const Row& row0,
                              const Row& row1, uint32_t feature_bits, TahoeNode8& leaf0,
                              TahoeNode8& leaf1, int steps = 0) {
  const TahoeFixedStep step(feature_bits);
  uint32_t i0 = root, i1 = root;
  TahoeNode8 n0 = TahoeLoad(nodes + root), n1 = n0;
  for (int s = 0; s < steps; ++s) {
    i0 += step.Offset(n0, row0);
    i1 += step.Offset(n1, row1);
    n0 = TahoeLoad(nodes + i0);
    n1 = TahoeLoad(nodes + i1);
  }
  for (; steps == 0;) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int s = 0; s < kTahoeFixedUnroll; ++s) {
      i0 += step.Offset(n0, row0);
      i1 += step.Offset(n1, row1);
      n0 = TahoeLoad(nodes + i0);
      n1 = TahoeLoad(nodes + i1);
    }
    const bool done = (n0.word & n1.word & step.leaf_bit) != 0;
#if defined(__CUDA_ARCH__)
    if (__all_sync(__activemask(), done)) break;
#else
    if (done) break;
#endif
  }
  leaf0 = n0;
  leaf1 = n1;
}

// A row accessor with the NaN padding feature TahoeWalkFixed needs (host evaluation).
template <typename Row>
struct TahoeNanPaddedRow {
  Row row;
  uint32_t num_features;
  GROVE_HD float operator[](uint32_t feature) const {
    return feature < num_features ? row[feature] : TahoeNan();
  }
};

// Weighted value of a scalar leaf (CPU reference arithmetic: weight * value in double).
template <typename Row>
GROVE_HD double TahoeLeafScalar(const TahoeForestView& f, const TahoeDecoded& leaf,
                                const Row& row) {
  if (!(leaf.flags & tahoe_bits::kLeafTable)) return static_cast<double>(TahoeBitsToFloat(leaf.value));
  if (leaf.flags & tahoe_bits::kLeafLinear) {
    const TahoeLinearLeaf& l = f.linear_leaves[leaf.value];
    double v = l.constant;
    for (uint32_t i = l.begin; i < l.begin + l.count; ++i) {
      const float x = row[f.linear_features[i]];
      if (IsNan(x)) return l.weight * l.plain;
      v += f.linear_coeffs[i] * static_cast<double>(x);
    }
    return l.weight * v;
  }
  return f.leaf_table[leaf.value];
}

// Per-call parameters of the per-row logic.
struct TahoeRowParams {
  int32_t it_begin = 0;
  int32_t it_end = 0;
  int32_t leaf_col_base = 0;  // leaf output: column = TahoeTree::orig - leaf_col_base
};

// One output: the margin sum stays in a register.
struct TahoeScalarAcc {
  double sum = 0;
  GROVE_HD void Add(int32_t /*group*/, double v) { sum += v; }
  GROVE_HD void AddVector(const double* /*v*/, int /*n*/) {}
  GROVE_HD void Flush() {}
};

// Several outputs: a running sum for the current group, flushed into m[group] (num_outputs doubles
// owned by the calling thread) when the group changes; trees are stored group by group so a thread
// flushes about once per group.
struct TahoeGroupAcc {
  double* m;
  int32_t cur = -1;
  double sum = 0;
  GROVE_HD explicit TahoeGroupAcc(double* margins) : m(margins) {}
  GROVE_HD void Add(int32_t group, double v) {
    if (group != cur) {
      Flush();
      cur = group;
    }
    sum += v;
  }
  GROVE_HD void AddVector(const double* v, int n) {
    for (int k = 0; k < n; ++k) m[k] += v[k];
  }
  GROVE_HD void Flush() {
    if (cur >= 0) m[cur] += sum;
    cur = -1;
    sum = 0;
  }
};

// Walks trees order[i] (or i when order is null) for i in [begin, end) with stride `step`, for one
// row. `nodes` holds the forest's nodes from node index `node_offset` on (a shared-memory part, or
// the whole array with offset 0). Margins go to `acc`; with `leaf_out` the leaf ids go there
// instead.
// kWalk: a TahoeWalk the forest allows (kTahoeWalkFixed: TahoeNode8 nodes, `row` padded).
template <int kWalk = kTahoeWalkGeneric, typename Node, typename Row, typename Acc>
GROVE_HD void TahoeAccumulateTrees(const TahoeForestView& f, const Node* nodes,
                                   uint32_t node_offset, const TahoeTree* trees,
                                   const uint32_t* order, uint32_t begin, uint32_t end,
                                   const TahoeRowParams& p, const Row& row, Acc& acc,
                                   float* leaf_out) {
  for (uint32_t i = begin; i < end; ++i) {
    const TahoeTree t = trees[order != nullptr ? order[i] : i];
    if (t.iteration < p.it_begin || t.iteration >= p.it_end) continue;
    TahoeDecoded d;
    uint32_t leaf;
    if constexpr (kWalk == kTahoeWalkFixed && std::is_same_v<Node, TahoeNode8>) {
      TahoeNode8 n;
      leaf = TahoeWalkFixed(nodes, t.root - node_offset, row, f.feature_bits, n, f.fixed_steps);
      d = TahoeDecode(n, f.feature_bits);
    } else if constexpr (kWalk != kTahoeWalkGeneric) {
      leaf = TahoeTraverseSimple(nodes, t.root - node_offset, row, f, d);
    } else {
      leaf = TahoeTraverse(nodes, t.root - node_offset, row, f, d);
    }
    if (leaf_out != nullptr) {
      leaf_out[t.orig - p.leaf_col_base] = static_cast<float>(f.leaf_ids[leaf + node_offset]);
      continue;
    }
    if (t.group >= 0) {
      acc.Add(t.group, TahoeLeafScalar(f, d, row));
    } else {
      acc.AddVector(f.leaf_table + d.value, f.num_outputs);
    }
  }
  acc.Flush();
}

// Margin sums of two rows over trees order[i] (or i) for i in [begin, end), every tree's leaf
// scalar (no vector leaves), with TahoeWalkFixed2; the one-output sums of TahoeAccumulateTrees.
template <typename Row>
GROVE_HD void TahoeAccumulateFixed2(const TahoeForestView& f, const TahoeNode8* nodes,
                                    const TahoeTree* trees, const uint32_t* order, uint32_t begin,
                                    uint32_t end, const TahoeRowParams& p, const Row& row0,
                                    const Row& row1, double& sum0, double& sum1) {
  for (uint32_t i = begin; i < end; ++i) {
    const TahoeTree t = trees[order != nullptr ? order[i] : i];
    if (t.iteration < p.it_begin || t.iteration >= p.it_end) continue;
    TahoeNode8 n0, n1;
    TahoeWalkFixed2(nodes, t.root, row0, row1, f.feature_bits, n0, n1, f.fixed_steps);
    sum0 += TahoeLeafScalar(f, TahoeDecode(n0, f.feature_bits), row0);
    sum1 += TahoeLeafScalar(f, TahoeDecode(n1, f.feature_bits), row1);
  }
}

// Writes one row's output from its margin sum (base margin not included).
GROVE_HD void TahoeFinalizeScalar(const TahoeForestView& f, const TransformParams& tp,
                                  bool prediction, double sum, float* out_row) {
  const double m = f.base_margin[0] + sum;
  if (!prediction) {
    out_row[0] = static_cast<float>(m);
  } else if (tp.link == Link::kArgmax) {
    out_row[0] = 0.0f;  // TransformRow's argmax of a single output
  } else {
    // TransformRow for one output (softmax needs two or more, which BuildForest enforces).
    const double v = tp.average_divisor != 1.0 ? m / tp.average_divisor : m;
    out_row[0] = static_cast<float>(TransformScalar(tp, v));
  }
}

// `m`: num_outputs margin sums (base margin not included), overwritten with the margins.
GROVE_HD void TahoeFinalizeRow(const TahoeForestView& f, const TransformParams& tp,
                               bool prediction, double* m, float* out_row) {
  for (int k = 0; k < f.num_outputs; ++k) m[k] += f.base_margin[k];
  if (!prediction) {
    for (int k = 0; k < f.num_outputs; ++k) out_row[k] = static_cast<float>(m[k]);
  } else {
    TransformRow(tp, m, out_row);
  }
}

// Row accessors.
struct TahoePlainRow {
  const float* p;
  GROVE_HD float operator[](uint32_t feature) const { return p[feature]; }
};
struct TahoeStridedRow {  // feature-major tile: feature f of this row at p[f * stride]
  const float* p;
  uint32_t stride;
  GROVE_HD float operator[](uint32_t feature) const { return p[feature * stride]; }
};

struct TahoeFormatOptions {
  bool node_rearrangement = true;  // §4.1; off: the left child is always adjacent
  bool tree_rearrangement = true;  // §4.2; off: model order, round-robin assignment
  int token_nodes = 4;             // T_nodes
  int hash_bits = 128;             // L_hash (fixed: 128)
  int lsh_chunks = 64;             // M (divides 128)
  bool force_wide_nodes = false;   // tests: use TahoeNode16 even when TahoeNode8 fits
};

// A contiguous range of trees (Tahoe order) whose nodes fit a shared-memory budget.
struct TahoePart {
  uint32_t tree_begin, tree_end;
  uint32_t node_begin, node_end;
};

// Trees assigned to G thread groups: group g runs order[offsets[g] .. offsets[g + 1]).
struct TahoeAssignment {
  int groups = 1;
  std::vector<uint32_t> order;    // indices into TahoeForest::trees
  std::vector<uint32_t> offsets;  // groups + 1
};

struct TahoeFormatStats {
  double expected_visits_per_row = 0;  // node loads (splits and leaves) per row over all trees
  double mean_depth = 0;               // expected visits per tree
  int max_depth = 0;
  int feature_bits = 0;
  int node_bytes = 0;
  int64_t format_bytes = 0;            // everything uploaded to a device
  int64_t forest_smem_bytes = 0;       // nodes + trees: what shared_forest puts in shared memory
  bool inline_leaves = true;
  // Paper Table 3 measure: coefficient of variation of expected work per thread group, for
  // round-robin over the model order (FIL) and for the Tahoe assignment, at 32 groups.
  double cv_before = 0;
  double cv_after = 0;
  double build_seconds = 0;
};

class TahoeForest {
 public:
  static absl::StatusOr<std::shared_ptr<const TahoeForest>> Build(
      ForestPtr forest, const TahoeFormatOptions& options = {});

  const Forest& forest() const { return *forest_; }
  const ForestPtr& forest_ptr() const { return forest_; }
  const TahoeFormatOptions& options() const { return options_; }
  const TahoeFormatStats& stats() const { return stats_; }
  int node_bytes() const { return wide_ ? 16 : 8; }
  // Numeric splits only and no missing-zero rule: TahoeTraverseSimple applies.
  bool simple() const { return simple_; }
  // simple(), 8-byte nodes and no linear leaves: TahoeWalkFixed applies (leaves loop to themselves
  // through the padding feature num_features).
  bool fixed_walk() const { return fixed_walk_; }
  // Steps of a fixed walk with no leaf tests: the deepest leaf's depth for shallow fixed-walk forests
  // (up to kMaxFixedSteps, where testing every kTahoeFixedUnroll steps would take up to 3 extra
  // steps per tree); 0 otherwise (deep trees, whose lanes mostly stop well above the deepest leaf).
  static constexpr int kMaxFixedSteps = 12;
  int fixed_steps() const { return fixed_steps_; }
  bool wide() const { return wide_; }

  // Host view (pointers into this object).
  TahoeForestView HostView() const;

  // Arrays (for upload).
  const std::vector<TahoeNode8>& nodes8() const { return nodes8_; }
  const std::vector<TahoeNode16>& nodes16() const { return nodes16_; }
  const std::vector<TahoeTree>& trees() const { return trees_; }
  const std::vector<TahoeCatSplit>& cat_splits() const { return cat_splits_; }
  const std::vector<uint32_t>& cat_bits() const { return cat_bits_; }
  const std::vector<double>& leaf_table() const { return leaf_table_; }
  const std::vector<TahoeLinearLeaf>& linear_leaves() const { return linear_leaves_; }
  const std::vector<int32_t>& linear_features() const { return linear_features_; }
  const std::vector<double>& linear_coeffs() const { return linear_coeffs_; }
  const std::vector<int32_t>& leaf_ids() const { return leaf_ids_; }
  const std::vector<double>& base_margin() const { return forest_->base_margin; }
  // Expected node visits of tree i (Tahoe order) for one row.
  const std::vector<double>& tree_work() const { return tree_work_; }

  // Thread-group assignments for G = 1, 2, 4, ..., kMaxGroups.
  static constexpr int kMaxGroups = 256;
  const TahoeAssignment& Assignment(int groups) const;
  const std::vector<TahoeAssignment>& assignments() const { return assignments_; }
  // Class-aware assignments, for G = 1, 2, ..., kMaxGroups (empty entries where none): group g runs
  // only trees of output group g % K, so a thread of a multi-output forest sums one output in a
  // register. Built when every tree has a scalar leaf, K > 1 and G >= K; entry i is G = 1 << i.
  const std::vector<TahoeAssignment>& class_assignments() const { return class_assignments_; }

  // Splits the trees into contiguous parts whose nodes and tree records fit `max_bytes`
  // (INVALID_ARGUMENT when one tree alone does not).
  absl::StatusOr<std::vector<TahoePart>> SplitIntoParts(int64_t max_bytes) const;

  // Coefficient of variation of per-group expected work for an assignment of trees.
  double AssignmentCv(const TahoeAssignment& a) const;

  // Expected visits per row for trees whose iteration is in [begin, end).
  double ExpectedVisits(int it_begin, int it_end) const;

  // Leaf output: column of tree `orig` is orig - LeafColumnBase(range); false when the trees in the
  // range are not contiguous in the model order.
  bool LeafColumnBase(int it_begin, int it_end, int32_t* base) const;

  std::string Describe() const;

 private:
  TahoeForest() = default;

  ForestPtr forest_;
  TahoeFormatOptions options_;
  TahoeFormatStats stats_;
  bool wide_ = false;
  bool simple_ = false;
  bool fixed_walk_ = false;
  int fixed_steps_ = 0;
  uint32_t feature_bits_ = 1;
  std::vector<TahoeNode8> nodes8_;
  std::vector<TahoeNode16> nodes16_;
  std::vector<TahoeTree> trees_;
  std::vector<double> tree_work_;
  std::vector<TahoeCatSplit> cat_splits_;
  std::vector<uint32_t> cat_bits_;
  std::vector<double> leaf_table_;
  std::vector<TahoeLinearLeaf> linear_leaves_;
  std::vector<int32_t> linear_features_;
  std::vector<double> linear_coeffs_;
  std::vector<int32_t> leaf_ids_;
  std::vector<TahoeAssignment> assignments_;
  std::vector<TahoeAssignment> class_assignments_;
  bool iterations_sorted_ = true;
  friend class TahoeBuilder;
};

using TahoeForestPtr = std::shared_ptr<const TahoeForest>;

// Lane layout: the format rearranged for a tree-per-lane walk (splitting shared forest on scalar
// forests). With one row per half-warp and one tree per lane, the lanes read different trees, so
// where those trees sit decides the bank conflicts. Shared memory is seen as kTahoeLaneTrees columns
// of 8-byte slots (slot s is in column s % 16: with 8-byte slots column j is bank pair j), in rows of
// 16 slots. Trees go in bundles of 16, lane j of a half-warp walking tree j of each bundle, and the
// layout makes the 16 lanes read 16 different columns at every step, so every node load of the warp
// (both halves walk the same bundle for two rows) takes the two wavefronts of a 64-bit access
// whatever paths the trees take (the row-per-thread walk measured 3.8 on adult-large).
//  * single: tree j of every bundle lives in column j, each node's left child in the next row;
//  * paired (when a tree is taller than a column): lanes j and j + 8 share columns j and j + 8, and
//    a tree's nodes alternate between them by depth: lane j reads column j at even steps and j + 8
//    at odd ones, lane j + 8 the other way round, so a tree may use up to two columns. Each of the
//    pair's two "virtual columns" v = 0, 1 is a sequence of rows whose cell r is in column
//    j + 8 * ((r + v) % 2): a left child is again in the next row of its parent's virtual column.
// Steps are lockstep: a bundle walks `steps` (its deepest tree) steps, a lane at a leaf staying
// there (leaves read the NaN column and step by 0). In the paired layout a lane resting on a leaf
// may then share a column with its partner (a conflict, never a wrong result).
// The left child is always the next row (no hot-child flag), and rows are staged with each feature
// twice (NaN read as -inf and as +inf; a split reads the copy that sends NaN its default way), so a
// step is `x < threshold ? next row : this + delta`, with no NaN test and no flag.
inline constexpr int kTahoeLaneTrees = 16;
inline constexpr int kTahoeLaneUnroll = 4;  // steps per bundle are a multiple of this
static_assert(kTahoeLaneUnroll % 2 == 0, "the walk's unrolled steps keep the step parity");

// word = column | delta << column_bits, delta (signed) = bytes from this slot to the right child
// (0 for a leaf, whose column is the NaN column).
struct alignas(8) TahoeLaneNode {
  uint32_t value;  // split: float threshold bits; leaf: float value bits (weight included)
  uint32_t word;
};
static_assert(sizeof(TahoeLaneNode) == 8, "TahoeLaneNode must stay 8 bytes");

// One tree of a bundle: record b * kTahoeLaneTrees + j of TahoeLaneLayout::bundles.
struct TahoeLaneBundle {
  uint32_t slot_begin;  // the tree's root slot (absolute)
  uint32_t steps;       // deepest tree of the bundle, rounded up to kTahoeLaneUnroll (same for all j)
};

// Bundles [bundle_begin, bundle_end) (records [bundle_begin * 16, bundle_end * 16)) and their slots.
struct TahoeLanePart {
  uint32_t bundle_begin, bundle_end;
  uint32_t slot_begin, slot_end;
};

enum class TahoeLaneMode { kAuto, kSingle, kPaired };  // kAuto: single where every tree fits

struct TahoeLaneLayout {
  std::vector<TahoeLaneNode> slots;
  std::vector<TahoeLaneBundle> bundles;  // kTahoeLaneTrees records per bundle
  std::vector<TahoeLanePart> parts;
  bool paired = false;
  uint32_t column_bits = 1;
  int columns = 1;            // 2 * num_features + 1
  int64_t part_bytes = 0;     // shared memory of the largest part (TahoeLanePartBytes)
  double padding = 0;         // fraction of slots that hold no node
};

// Shared memory of a part: its slots, then its bundle records (the kernel puts them right after the
// part's own slots, so the largest part bounds the kernel's memory).
inline int64_t TahoeLanePartBytes(int64_t slots, int64_t bundles) {
  return slots * int64_t{sizeof(TahoeLaneNode)} +
         bundles * kTahoeLaneTrees * int64_t{sizeof(TahoeLaneBundle)};
}

// Whether BuildTahoeLaneLayout applies: fixed_walk(), one output, inline float leaves (so no leaf
// needs the table), finite thresholds.
bool TahoeLaneEligible(const TahoeForest& tf);

// Builds the lane layout with parts of at most `max_part_bytes` (INVALID_ARGUMENT when the forest is
// not eligible or one bundle does not fit). Trees are bundled deepest first, so that a bundle's
// trees take like numbers of steps and the columns grow evenly.
absl::StatusOr<TahoeLaneLayout> BuildTahoeLaneLayout(const TahoeForest& tf, int64_t max_part_bytes,
                                                     TahoeLaneMode mode = TahoeLaneMode::kAuto);

// Stages feature value x into its two lane-layout columns.
GROVE_HD void TahoeLaneStage(float x, float* two_columns) {
  const bool nan = IsNan(x);
  two_columns[0] = nan ? -TahoeBitsToFloat(0x7f800000u) : x;
  two_columns[1] = nan ? TahoeBitsToFloat(0x7f800000u) : x;
}

GROVE_HD TahoeLaneNode TahoeLoad(const TahoeLaneNode* p) { return TahoeLoadPair(p); }

// Bytes from a slot to its left child (the next row of its virtual column) at even and odd steps,
// for lane `lane` (0..15) of a half-warp.
struct TahoeLaneAdvance {
  int32_t even, odd;
};
GROVE_HD TahoeLaneAdvance TahoeLaneAdvanceFor(bool paired, int lane) {
  constexpr int32_t kRow = kTahoeLaneTrees * 8, kHalf = kRow / 2;
  if (!paired) return {kRow, kRow};
  // Lane j (< 8) is in column j at even steps: the next row's cell is half a row further on.
  return lane < kTahoeLaneTrees / 2 ? TahoeLaneAdvance{kRow + kHalf, kRow - kHalf}
                                    : TahoeLaneAdvance{kRow - kHalf, kRow + kHalf};
}

// Where the lane walk reads: host pointers here (the reference); the kernel passes 32-bit
// shared-memory addresses (tahoe_kernels.cuh), so that a feature read is one shift-add and one load.
struct TahoeLaneHostMemory {
  using Addr = const char*;
  GROVE_HD static TahoeLaneNode Node(Addr a) { return TahoeLoad(reinterpret_cast<const TahoeLaneNode*>(a)); }
  GROVE_HD static float Feature(Addr row, uint32_t column) {
    return reinterpret_cast<const float*>(row)[column];
  }
};

// Walks one tree of a bundle for one staged row (`row`: `columns` floats) and returns its leaf value.
// `slot`: the tree's root; `steps` >= the tree's depth and a multiple of kTahoeLaneUnroll.
template <typename Memory = TahoeLaneHostMemory>
GROVE_HD float TahoeLaneWalk(typename Memory::Addr slot, uint32_t steps, typename Memory::Addr row,
                             uint32_t column_bits, TahoeLaneAdvance adv) {
  const uint32_t cmask = (1u << column_bits) - 1u;
  TahoeLaneNode n = Memory::Node(slot);
  for (uint32_t s = 0; s < steps; s += kTahoeLaneUnroll) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int u = 0; u < kTahoeLaneUnroll; ++u) {
      const bool left = Memory::Feature(row, n.word & cmask) < TahoeBitsToFloat(n.value);
      slot += left ? ((u & 1) ? adv.odd : adv.even) : (static_cast<int32_t>(n.word) >> column_bits);
      n = Memory::Node(slot);
    }
  }
  return TahoeBitsToFloat(n.value);
}

// Margin sums (base margin not included) of `rows` through the lane layout, adding the trees of each
// part lane by lane as the kernel does. Host reference for tests.
absl::Status TahoeLaneSumsHost(const TahoeLaneLayout& layout, RowsView rows, std::vector<double>* sums);

// Evaluates the Tahoe format on the host with the same GROVE_HD per-row logic as the kernels
// (tests, and a reference for the format itself). `out` is rows.rows x PredictWidth(). With
// `groups` > 1 the trees are run per thread group of Assignment(groups) and the group sums added in
// group order, as the shared_data kernel does. Single-threaded, deterministic.
absl::Status TahoePredictHost(const TahoeForest& tf, RowsView rows, const PredictOptions& options,
                              MatrixView<float> out, int groups = 1);

// Checks `rows`/`out` shapes and resolves the options like PredictCpu does.
struct TahoeCall {
  TahoeRowParams row_params;
  TransformParams transform;
  OutputKind kind = OutputKind::kMargin;
  int64_t width = 0;
};
absl::StatusOr<TahoeCall> TahoePrepareCall(const TahoeForest& tf, RowsView rows,
                                           const PredictOptions& options, MatrixView<float> out);

}  // namespace grove
