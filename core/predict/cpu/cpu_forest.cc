#include "core/predict/cpu/cpu_forest.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/model/typical_rows.h"
#include "core/predict/cpu/cpu_infer.h"
#include "core/predict/cpu/cpu_walk.h"
#include "core/predict/cpu/cpu_walk_avx2.h"
#include "core/predict/cpu/cpu_walk_simd.h"

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

// Words a categorical split's set needs: one past its highest word with a listed category (a
// value past it is outside the set, as CategoryInSet has it for every set size).
int SetWords(const Forest& f, const Node& n) {
  for (uint32_t w = n.aux; w > 0; --w) {
    if (f.category_bits[n.payload + w - 1] != 0) return static_cast<int>(w);
  }
  return 0;
}

// The sets the vector walks decide: the model's rule (that of its first set of at most
// kMaxCategoryWords words) and the stride, the fewest words (a power of two, at least 2) that
// hold every set of that rule that fits kMaxCategoryWords, halved while the table of those that
// then fit exceeds kMaxCategoryTableBytes, then the fewest that hold those. Stride 0: none.
void ChooseCategorySets(const Forest& f, bool* truncate, int* stride) {
  *stride = 0;
  std::vector<int> words;  // of every set of the rule that fits kMaxCategoryWords
  for (const Node& n : f.nodes) {
    if (n.is_leaf() || !n.is_categorical()) continue;
    const int w = SetWords(f, n);
    if (w > kMaxCategoryWords) continue;
    const bool t = (n.flags & kNodeCategoryTruncate) != 0;
    if (words.empty()) *truncate = t;
    if (t == *truncate) words.push_back(w);
  }
  if (words.empty()) return;
  int s = 2;
  for (int w : words) {
    while (s < w) s *= 2;
  }
  for (; s >= 2; s /= 2) {
    int64_t sets = 0;
    for (int w : words) sets += w <= s;
    if (sets * s * static_cast<int64_t>(sizeof(uint32_t)) <= kMaxCategoryTableBytes) break;
  }
  if (s < 2) return;
  int widest = 0;
  for (int w : words) {
    if (w <= s) widest = std::max(widest, w);
  }
  *stride = 2;
  while (*stride < widest) *stride *= 2;
}

float BitsAsFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The CpuNode order of a tree: per position, its Forest node (relative), each split's children
// adjacent (the walks compute the right child as the left one's neighbour). Breadth-first, or for
// a tree walked in its nodes below the complete layout (`clustered`), in clusters of a pair and
// its children's pairs (six nodes, 96 bytes) laid out depth first, each grandchild's cluster after
// its parent's: two levels of a path then lie within 96 bytes, where breadth-first puts every
// level of the deep part of a tree on a line of its own.
void NodeOrder(const Node* src, bool clustered, std::vector<int32_t>* order,
               std::vector<int32_t>* stack) {
  order->assign(1, 0);
  if (!clustered) {
    for (size_t q = 0; q < order->size(); ++q) {
      const Node& node = src[(*order)[q]];
      if (node.is_leaf()) continue;
      order->push_back(node.left);
      order->push_back(node.right);
    }
    return;
  }
  stack->clear();
  if (!src[0].is_leaf()) stack->push_back(0);
  while (!stack->empty()) {
    const Node& split = src[stack->back()];
    stack->pop_back();
    order->push_back(split.left);
    order->push_back(split.right);
    int32_t grandchildren[4];
    int count = 0;
    for (const int32_t c : {split.left, split.right}) {
      if (src[c].is_leaf()) continue;
      order->push_back(src[c].left);
      order->push_back(src[c].right);
      for (const int32_t g : {src[c].left, src[c].right}) {
        if (!src[g].is_leaf()) grandchildren[count++] = g;
      }
    }
    // Pushed last to first: the leftmost grandchild's cluster comes next.
    for (int i = count - 1; i >= 0; --i) stack->push_back(grandchildren[i]);
  }
}

// Seconds of one single-threaded call over the first `n` of `rows` (1e30 when it fails).
double TimeWalkOnce(const CpuForest& cf, const std::vector<float>& rows, int64_t n,
                    std::vector<float>* out) {
  const Forest& f = cf.forest();
  PredictOptions o;
  o.kind = OutputKind::kMargin;
  out->resize(n * f.num_outputs);
  const auto start = std::chrono::steady_clock::now();
  if (!Predict(cf, MakeRowsView(rows.data(), n, f.num_features), o,
               MakeMatrixView(out->data(), n, f.num_outputs), nullptr)
           .ok()) {
    return 1e30;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Single-threaded seconds per row of `cf` as built, on typical rows: the fastest of a few timings
// of about 50 us, or one timing of a vector of rows where that alone takes longer (at most two
// calls of sixteen rows for a large model).
double RowSeconds(const CpuForest& cf) {
  constexpr double kTargetSeconds = 5e-5;
  constexpr int kTimings = 3;
  std::vector<float> out;
  std::vector<float> rows = TypicalRows(cf.forest(), kSimdRows, /*seed=*/11,
                                        /*max_trees_per_row=*/64);
  TimeWalkOnce(cf, rows, kSimdRows, &out);  // warm-up
  const double first = TimeWalkOnce(cf, rows, kSimdRows, &out);
  if (!(first > 0 && first < kTargetSeconds)) return first / kSimdRows;
  const int64_t max_rows = 16 * std::max<int64_t>(cf.block_rows(), kSimdRows);
  const int64_t n = std::min<int64_t>(
      max_rows, kSimdRows * static_cast<int64_t>(kTargetSeconds / first + 1));
  rows = TypicalRows(cf.forest(), n, /*seed=*/11, /*max_trees_per_row=*/64);
  double best = 1e30;
  for (int i = 0; i < kTimings; ++i) best = std::min(best, TimeWalkOnce(cf, rows, n, &out));
  return best / static_cast<double>(n);
}

}  // namespace

CpuForestOptions::Walk CpuForest::FastestWalk(
    CpuForest* cf, const std::vector<CpuForestOptions::Walk>& candidates) {
  // The walks differ by 10-40% where they differ at all, so each timing must be long enough to
  // be above the clock's and the core's noise (about 0.3 ms of work: a few blocks of a large
  // model, up to 64 blocks of a small one), and the candidates are timed in turns, several
  // rounds, keeping each one's fastest: a sequential, one-shot timing picked different walks
  // for the same model from one load to the next. Bounded by about 60 ms.
  constexpr double kTargetSeconds = 3e-4;
  constexpr int kMinRounds = 3;
  constexpr int kMaxRounds = 9;
  constexpr double kBudgetSeconds = 0.06;
  // Within this fraction of the fastest, a later candidate wins: the later walks keep more loads
  // in flight per row and gain more than a single-threaded timing shows when every core walks.
  constexpr double kTie = 0.03;
  const Forest& f = cf->forest();
  // Each walk is timed with its own block size; the rows of a timing are whole blocks of each.
  int64_t block = std::max(cf->default_block_rows_, cf->dense_block_rows_);
  if (std::find(candidates.begin(), candidates.end(), CpuForestOptions::Walk::kBitvector) !=
      candidates.end()) {
    block = std::max<int64_t>(block, cf->bitvector_block_rows_);
  }
  const int64_t max_rows = std::max<int64_t>(64 * cf->default_block_rows_, 8 * block);
  const std::vector<float> rows = TypicalRows(f, max_rows, /*seed=*/7, /*max_trees_per_row=*/64);
  std::vector<float> out;
  // Rows per timing: enough blocks for kTargetSeconds with the first candidate.
  cf->SetWalk(candidates.front());
  int64_t n = 2 * block;
  TimeWalkOnce(*cf, rows, n, &out);  // warm-up
  const double first = TimeWalkOnce(*cf, rows, n, &out);
  if (first > 0 && first < kTargetSeconds) {
    n = std::min<int64_t>(max_rows, n * static_cast<int64_t>(kTargetSeconds / first + 1));
    n = std::max<int64_t>(block, n / block * block);
  }
  std::vector<double> best(candidates.size(), 1e30);
  const auto begin = std::chrono::steady_clock::now();
  for (int round = 0; round < kMaxRounds; ++round) {
    for (size_t c = 0; c < candidates.size(); ++c) {
      cf->SetWalk(candidates[c]);
      if (round == 0) TimeWalkOnce(*cf, rows, n, &out);  // each walk's warm-up
      best[c] = std::min(best[c], TimeWalkOnce(*cf, rows, n, &out));
    }
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (round + 1 >= kMinRounds && elapsed > kBudgetSeconds) break;
  }
  size_t chosen = 0;
  const double fastest = *std::min_element(best.begin(), best.end());
  for (size_t c = 0; c < candidates.size(); ++c) {
    if (best[c] <= fastest * (1 + kTie)) chosen = c;
  }
  return candidates[chosen];
}

// The complete layout's padded size at most (trees x 2^depth x (8-byte node + 8-byte value)).
constexpr int64_t kMaxDenseLayoutBytes = int64_t{64} << 20;

void CpuForest::BuildDense() {
  // A DenseNode holds its feature in kDenseFeatureBits.
  if (forest_->num_features > static_cast<int32_t>(kDenseFeatureBits) + 1) return;
  int depth = 0;
  int64_t trees = 0;
  bool deep = false;
  for (const CpuTree& t : trees_) {
    if (t.scalar && !t.general && t.depth >= 1) {
      if (t.depth <= kDenseMaxDepth) {
        depth = std::max(depth, t.depth);
      } else {
        deep = true;
      }
      ++trees;
    }
  }
  // A deeper tree takes the top levels: at least kDenseTopLevels, those of the others if more.
  if (deep) depth = std::max(depth, kDenseTopLevels);
  // At most kMaxDenseLayoutBytes of padded layout: beyond, the plain walk stays.
  if (trees == 0 || trees * (int64_t{16} << depth) > kMaxDenseLayoutBytes) return;
  dense_.depth = depth;
  const int64_t inner = (int64_t{1} << depth) - 1;
  const int64_t leaves = int64_t{1} << depth;
  dense_.nodes.assign(trees * inner, DenseNode{});
  dense_.values.assign(trees * leaves, 0.0);
  if (deep) dense_.next.assign(trees * leaves, -1);
  int32_t block = 0;
  struct Item {
    int32_t node;  // CpuForest node, relative to the tree
    int64_t position;
    int level;
  };
  std::vector<Item> stack;
  for (CpuTree& t : trees_) {
    if (!(t.scalar && !t.general && t.depth >= 1)) continue;
    t.dense = block;
    t.continues = t.depth > depth;
    DenseNode* nodes = dense_.nodes.data() + block * inner;
    double* values = dense_.values.data() + block * leaves;
    const CpuNode* src = nodes_.data() + t.node_begin;
    stack.assign(1, Item{0, 0, 0});
    while (!stack.empty()) {
      const Item it = stack.back();
      stack.pop_back();
      const CpuNode& n = src[it.node];
      const bool leaf = (n.bits & kCpuLeaf) != 0;
      if (it.level == depth) {  // the last level holds every leaf's value, or where a path goes on
        if (leaf) {
          values[it.position - inner] = leaf_values_[t.node_begin + it.node];
        } else {
          dense_.next[block * leaves + it.position - inner] =
              it.node * static_cast<int32_t>(sizeof(CpuNode));
        }
        continue;
      }
      if (!leaf) {
        nodes[it.position].threshold = n.threshold;
        const uint32_t flags = ((n.bits & kCpuNanLeft) ? kDenseNanLeft : 0) |
                               ((n.bits & kCpuCategory) ? kDenseCategory : 0) |
                               ((n.bits & kCpuOutsideLeft) ? kDenseOutsideLeft : 0);
        nodes[it.position].feature = static_cast<int32_t>(static_cast<uint32_t>(n.feature) | flags);
      }
      // A leaf above the last level: both sides lead to its value (the node routes anywhere).
      const int32_t left = leaf ? it.node : n.left / static_cast<int32_t>(sizeof(CpuNode));
      const int32_t right = leaf ? it.node : left + 1;
      stack.push_back(Item{left, 2 * it.position + 1, it.level + 1});
      stack.push_back(Item{right, 2 * it.position + 2, it.level + 1});
    }
    ++block;
  }
  // Exact, and no float subnormal (a process that flushes them to zero would read them as 0).
  const bool exact = std::all_of(dense_.values.begin(), dense_.values.end(), [](double v) {
    return static_cast<double>(static_cast<float>(v)) == v &&
           (v == 0 || std::fabs(v) >= std::numeric_limits<float>::min());
  });
  if (exact) dense_.values32.assign(dense_.values.begin(), dense_.values.end());
}

// Complete layouts (nodes and leaf values) above this many bytes, most of a 2 MB L2 that two
// hyperthreads share, take LargeLayoutBlockRows rows per block; row layouts above it keep their
// deep levels in line-sized subtrees.
constexpr size_t kLargeDenseLayoutBytes = size_t{3} << 19;

void CpuForest::BuildRowLayout() {
  if (dense_.depth == 0) return;
  // Only runs of at least a block of consecutive trees take the layout: a block is walked whole
  // for any of its trees, so a short run (trees of a complete layout between deeper ones, as
  // leaf-wise models have) would cost a block's walk per tree; the node walk takes them together.
  const int64_t num_trees = static_cast<int64_t>(trees_.size());
  int32_t slots = 0;
  for (int64_t t0 = 0; t0 < num_trees;) {
    int64_t t1 = t0;
    while (t1 < num_trees && trees_[t1].dense >= 0 && !trees_[t1].continues) ++t1;
    if (t1 - t0 >= kRowBlockTrees) {
      for (int64_t t = t0; t < t1; ++t) trees_[t].row = trees_[t].dense;
      slots = trees_[t1 - 1].dense + 1;
    }
    t0 = t1 + 1;
  }
  if (slots == 0) return;
  // Every level interleaved while the layout stays in a core's L2, where a level's extra index
  // operations would cost more than the lines they save; line-sized subtrees below the top levels
  // where it does not, where the lines read from L3 are the cost.
  const int64_t blocks = (slots + kRowBlockTrees - 1) / kRowBlockTrees;
  const int64_t leaves = int64_t{1} << dense_.depth;
  const int64_t values_bytes = blocks * kRowBlockTrees * leaves * sizeof(double);
  const int64_t interleaved_bytes =
      RowGeometry(dense_.depth, slots, dense_.depth).size() * sizeof(DenseNode) + values_bytes;
  const RowGeometry geometry(
      dense_.depth, slots,
      interleaved_bytes > static_cast<int64_t>(kLargeDenseLayoutBytes) ? kRowTopLevels
                                                                       : dense_.depth);
  // Node and leaf-value indices are int32 lanes of the walk's gathers: the complete layout's cap
  // (trees x 2^depth x 16 bytes) bounds both; padding to whole blocks (< 2x) and line-sized
  // slots (< 1.3x) keep the nodes within four times that count.
  static_assert(kMaxDenseLayoutBytes / 16 * 4 < std::numeric_limits<int32_t>::max(),
                "row layout indices fit int32");
  row_.depth = dense_.depth;
  row_geometry_ = geometry;
  const int64_t inner = leaves - 1;
  // Slots of no tree and the padding stay zero: a walk of them ends somewhere valid and is not
  // kept. Seven nodes more so that the first can sit on a 64-byte line.
  row_.nodes.assign(geometry.size() + 7, DenseNode{});
  row_nodes_offset_ =
      static_cast<int64_t>((64 - reinterpret_cast<uintptr_t>(row_.nodes.data()) % 64) % 64) /
      static_cast<int64_t>(sizeof(DenseNode));
  static_assert(sizeof(DenseNode) == 8 && 64 % sizeof(DenseNode) == 0, "8 nodes to a line");
  DenseNode* nodes = row_.nodes.data() + row_nodes_offset_;
  // operator new aligns to at least 16 bytes, so some offset of 0-7 nodes is on a line (a test
  // checks row_nodes()).
  row_.values.assign(blocks * kRowBlockTrees * leaves, 0.0);
  for (const CpuTree& t : trees_) {
    if (t.row < 0) continue;
    const int64_t block = t.row / kRowBlockTrees, lane = t.row % kRowBlockTrees;
    for (int d = 0; d < dense_.depth; ++d) {
      const int64_t first = (int64_t{1} << d) - 1;
      for (int64_t q = 0; q <= first; ++q) {
        const int64_t at = d < geometry.interleaved() ? geometry.TopNode(t.row, first + q)
                                                      : geometry.DeepNode(t.row, d, q);
        nodes[at] = dense_.nodes[t.dense * inner + first + q];
      }
    }
    for (int64_t q = 0; q < leaves; ++q) {
      row_.values[(block * leaves + q) * kRowBlockTrees + lane] =
          dense_.values[t.dense * leaves + q];
    }
  }
}

int DefaultBlockRows(int num_features) {
  const int64_t fit = (24 << 10) / (4 * std::max<int64_t>(1, num_features));
  // Whole vectors of sixteen rows for the AVX-512 walk.
  return static_cast<int>(std::clamp<int64_t>(fit / 16 * 16, 16, kMaxLanes));
}

int LargeLayoutBlockRows(int num_features) {
  const int64_t fit = (800 << 10) / (4 * std::max<int64_t>(1, num_features));
  return static_cast<int>(std::clamp<int64_t>(fit / 16 * 16, 16, kMaxBlockRows));
}

void CpuForest::SetWalk(CpuForestOptions::Walk walk) {
  walk_ = walk;
  block_rows_ = bitvector_walk() ? bitvector_block_rows_
                : dense_walk()    ? dense_block_rows_
                                  : default_block_rows_;
}

void CpuForest::BuildBitvector() {
  std::vector<int32_t> feature_index(static_cast<size_t>(forest_->num_features), -1);
  std::vector<int32_t> lo, hi;  // per node of a tree: its subtree's leaves [lo, hi)
  std::vector<BitvectorNode> nan_right;
  for (size_t i = 0; i < trees_.size(); ++i) {
    CpuTree& t = trees_[i];
    // A categorical split is not one compare of a column: such trees keep the other walks.
    if (!t.scalar || t.general || t.categorical) continue;
    const CpuNode* src = nodes_.data() + t.node_begin;
    const int32_t n = static_cast<int32_t>(forest_->trees[i].num_nodes);
    // Leaves numbered left to right, each split's subtree's leaves [lo, hi), by a depth-first
    // walk that visits a split again once both children are done.
    int32_t leaves = 0;
    for (int32_t p = 0; p < n; ++p) leaves += (src[p].bits & kCpuLeaf) != 0;
    if (leaves > kBitvectorMaxLeaves) continue;
    // A tree the complete layout holds keeps it where that walk is cheaper: a level of it costs
    // about kBitvectorSplitsPerLevel splits of this one (complete trees of depth 6: the complete
    // layout; LightGBM's 31 leaves padded to depth 10: this one).
    // A tree that goes on below the complete layout takes this one.
    if (t.dense >= 0 && !t.continues && leaves - 1 >= kBitvectorSplitsPerLevel * dense_.depth) {
      continue;
    }
    lo.assign(n, 0);
    hi.assign(n, 0);
    std::vector<std::pair<int32_t, bool>> stack = {{0, false}};
    int32_t next_leaf = 0;
    const int32_t value_begin = static_cast<int32_t>(bitvector_.values.size());
    bitvector_.values.resize(value_begin + leaves);
    while (!stack.empty()) {
      auto [p, children_done] = stack.back();
      stack.pop_back();
      if (src[p].bits & kCpuLeaf) {
        lo[p] = next_leaf;
        hi[p] = next_leaf + 1;
        bitvector_.values[value_begin + next_leaf] = leaf_values_[t.node_begin + p];
        ++next_leaf;
        continue;
      }
      const int32_t left = src[p].left >> kCpuNodeShift;
      if (children_done) {
        lo[p] = lo[left];
        hi[p] = hi[left + 1];
        continue;
      }
      stack.push_back({p, true});
      stack.push_back({left + 1, false});
      stack.push_back({left, false});
    }
    BitvectorTree bt;
    bt.begin = static_cast<int32_t>(bitvector_.nodes.size());
    bt.values = value_begin;
    bt.wide = leaves > 32;
    nan_right.clear();
    for (int32_t p = 0; p < n; ++p) {
      const CpuNode& node = src[p];
      if (node.bits & kCpuLeaf) continue;
      const int32_t left = node.left >> kCpuNodeShift;
      int32_t& column = feature_index[node.feature];
      if (column < 0) {
        column = static_cast<int32_t>(bitvector_.features.size());
        bitvector_.features.push_back(node.feature);
      }
      const int width = hi[left] - lo[left];  // 1 .. leaves - 1 < 64
      const uint64_t cleared = ((uint64_t{1} << width) - 1) << lo[left];
      const BitvectorNode b{node.threshold, column, ~cleared};
      if (node.bits & kCpuNanLeft) {
        bitvector_.nodes.push_back(b);
      } else {
        nan_right.push_back(b);
      }
    }
    bt.nan_right = static_cast<int32_t>(bitvector_.nodes.size());
    bitvector_.nodes.insert(bitvector_.nodes.end(), nan_right.begin(), nan_right.end());
    bt.end = static_cast<int32_t>(bitvector_.nodes.size());
    t.bitvector = static_cast<int32_t>(bitvector_.trees.size());
    bitvector_.trees.push_back(bt);
  }
}

absl::StatusOr<std::shared_ptr<const CpuForest>> CpuForest::Build(ForestPtr forest,
                                                                  const CpuForestOptions& options) {
  if (forest == nullptr) return absl::InvalidArgumentError("CpuForest::Build: no forest");
  if (options.block_rows < 0 || options.block_rows > kMaxBlockRows) {
    return absl::InvalidArgumentError(absl::StrCat("block_rows must be in [0, ", kMaxBlockRows,
                                                   "] (0: the default); got ", options.block_rows));
  }
  const Forest& f = *forest;
  for (const Tree& tree : f.trees) {
    // Byte offsets within a tree are 32-bit.
    if (tree.num_nodes >= (uint32_t{1} << 27)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the CPU engine takes trees of fewer than 2^27 nodes; a tree has ", tree.num_nodes));
    }
  }
  if (f.nodes.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the CPU engine indexes nodes with 32 bits; the model has ", f.nodes.size()));
  }
  auto out = std::shared_ptr<CpuForest>(new CpuForest(std::move(forest)));
  out->nodes_.resize(f.nodes.size());
  out->leaf_values_.assign(f.nodes.size(), 0.0);
  out->forest_nodes_.resize(f.nodes.size());
  out->trees_.resize(f.trees.size());
  out->iterations_.resize(f.trees.size());
  out->tree_ids_.resize(f.trees.size());
  for (size_t t = 0; t < f.trees.size(); ++t) out->tree_ids_[t] = static_cast<int32_t>(t);

  bool category_truncate = false;
  int category_stride = 0;
  ChooseCategorySets(f, &category_truncate, &category_stride);
  out->category_truncate_ = category_truncate;
  out->category_stride_ = std::max(category_stride, 2);
  std::vector<int32_t> order;     // Forest node index (relative) per position (NodeOrder)
  std::vector<int32_t> position;  // relative Forest node index -> position
  std::vector<int32_t> stack;     // NodeOrder's
  for (size_t t = 0; t < f.trees.size(); ++t) {
    const Tree& tree = f.trees[t];
    const Node* src = f.nodes.data() + tree.node_begin;
    const int32_t n = static_cast<int32_t>(tree.num_nodes);
    NodeOrder(src, tree.depth > kDenseMaxDepth, &order, &stack);
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
        dst.left = (p - 1) * static_cast<int32_t>(sizeof(CpuNode));
        dst.bits = kCpuLeaf;
        if (node.aux != 0) ct.scalar = false;  // a linear leaf: computed from the row
        if (ct.scalar) out->leaf_values_[abs] = tree.weight * f.leaf_values[node.payload];
        continue;
      }
      dst.threshold = node.threshold;
      dst.feature = node.feature;
      dst.left = position[node.left] * static_cast<int32_t>(sizeof(CpuNode));
      // Children are pushed together, so the right one follows the left one.
      if (position[node.right] != position[node.left] + 1) {
        return absl::InternalError(absl::StrCat("CpuForest: tree ", t, " node ", src_index,
                                                ": children not adjacent after reordering"));
      }
      const bool truncate = (node.flags & kNodeCategoryTruncate) != 0;
      if (node.is_categorical() && category_stride > 0 && truncate == category_truncate &&
          SetWords(f, node) <= category_stride) {
        // The set as the categories below the limit that go left: the listed ones where they go
        // left, the others where the listed ones go right (a value outside them then goes left
        // too).
        const bool in_set_left = (node.flags & kNodeCategoryInSetGoesLeft) != 0;
        const uint32_t stride = static_cast<uint32_t>(category_stride);
        const size_t index = out->category_words_.size() / stride;
        // The walks address a set's words as index x stride in 32 bits (a word within the table
        // of at most kMaxCategoryTableBytes: never past it).
        for (uint32_t w = 0; w < stride; ++w) {
          const uint32_t listed = w < node.aux ? f.category_bits[node.payload + w] : 0;
          out->category_words_.push_back(in_set_left ? listed : ~listed);
        }
        dst.threshold = BitsAsFloat(static_cast<uint32_t>(index));
        dst.bits = kCpuGeneral | kCpuCategory | (in_set_left ? 0 : kCpuOutsideLeft) |
                   ((node.flags & kNodeDefaultLeft) ? kCpuNanLeft : 0);
        ct.categorical = true;
      } else if (NeedsGeneralDecision(node)) {
        dst.bits = kCpuGeneral;
        ct.general = true;
      } else {
        dst.bits = NanGoesLeft(node) ? kCpuNanLeft : 0;
      }
    }
    out->iterations_[t] = tree.iteration;
    if (t > 0 && tree.iteration < out->iterations_[t - 1]) out->iterations_sorted_ = false;
  }
  std::vector<CpuTree>& trees = out->trees_;
  for (int64_t t = static_cast<int64_t>(trees.size()) - 1; t >= 0; --t) {
    trees[t].fused_end = !(trees[t].scalar && !trees[t].general)      ? static_cast<int32_t>(t)
                         : t + 1 == static_cast<int64_t>(trees.size()) ? static_cast<int32_t>(t + 1)
                                                                       : trees[t + 1].fused_end;
  }
  using Walk = CpuForestOptions::Walk;
  const bool simd_possible = HaveSimdWalk() && f.nodes.size() < (size_t{1} << 30);
  const bool avx2_possible = HaveAvx2Walk() && f.nodes.size() < (size_t{1} << 30);
  // The AVX2 walk's complete layout: where it is forced, or where kAuto may choose it (no
  // AVX-512: kAuto then behaves as before where AVX-512 is present).
  const bool avx2_wanted =
      avx2_possible && (options.walk == Walk::kDenseAvx2 ||
                        (options.walk == Walk::kAuto && !simd_possible));
  if ((simd_possible && options.walk != Walk::kScalar) || avx2_wanted) out->BuildDense();
  if (simd_possible && options.walk != Walk::kScalar && options.walk != Walk::kDenseAvx2) {
    out->BuildBitvector();
  }
  // A complete layout larger than a core's L2 is read from L3 once per block and tree: there,
  // more rows per block cut that traffic per row, which outweighs the block's rows leaving L1.
  out->default_block_rows_ =
      options.block_rows > 0 ? options.block_rows : DefaultBlockRows(f.num_features);
  out->dense_block_rows_ = out->default_block_rows_;
  if (options.block_rows == 0 && out->dense_.block_rule_bytes() > kLargeDenseLayoutBytes) {
    out->dense_block_rows_ = LargeLayoutBlockRows(f.num_features);
  }
  // The bitvector walk reads a block's rows once, to lay out the columns its splits read: its
  // trees' compares then take up to kMaxLanes rows at once whatever the width of a row, which
  // spreads each split's set-up over more rows and keeps more loads in flight.
  out->bitvector_block_rows_ =
      options.block_rows > 0 ? options.block_rows : std::max(out->dense_block_rows_, kMaxLanes);
  const bool dense_possible = simd_possible && out->dense_.depth > 0;
  const bool avx2_dense_possible = avx2_wanted && out->dense_.depth > 0;
  const bool bitvector_possible = simd_possible && !out->bitvector_.trees.empty();
  Walk walk = Walk::kScalar;
  switch (options.walk) {
    case Walk::kScalar: break;
    case Walk::kSimd: walk = simd_possible ? Walk::kSimd : Walk::kScalar; break;
    case Walk::kDense:
      walk = dense_possible ? Walk::kDense : simd_possible ? Walk::kSimd : Walk::kScalar;
      break;
    case Walk::kBitvector:
      walk = bitvector_possible ? Walk::kBitvector
             : dense_possible   ? Walk::kDense
             : simd_possible    ? Walk::kSimd
                                : Walk::kScalar;
      break;
    case Walk::kDenseAvx2: walk = avx2_dense_possible ? Walk::kDenseAvx2 : Walk::kScalar; break;
    case Walk::kAuto:
      if (simd_possible) {
        std::vector<Walk> candidates = {Walk::kScalar, Walk::kSimd};
        if (dense_possible) candidates.push_back(Walk::kDense);
        if (bitvector_possible) candidates.push_back(Walk::kBitvector);
        walk = FastestWalk(out.get(), candidates);
      } else if (avx2_dense_possible &&
                 std::any_of(trees.begin(), trees.end(),
                             [](const CpuTree& t) { return Avx2WalkTakes(t); })) {
        // Not timed where it takes no tree (every tree categorical or deeper than the layout):
        // it would only walk scalar with a larger layout.
        walk = FastestWalk(out.get(), {Walk::kScalar, Walk::kDenseAvx2});
      }
      break;
  }
  out->SetWalk(walk);
  if (out->simd_walk()) out->BuildRowLayout();  // the AVX-512 row walk's
  for (int64_t t = static_cast<int64_t>(trees.size()) - 1; t >= 0; --t) {
    const bool continues = t + 1 < static_cast<int64_t>(trees.size()) &&
                           (trees[t].row < 0 ? trees[t + 1].row < 0
                                             : trees[t + 1].row == trees[t].row + 1);
    trees[t].row_end = continues ? trees[t + 1].row_end : static_cast<int32_t>(t + 1);
  }
  if (!out->dense_walk()) {  // not used by the batch walk: not kept
    out->dense_ = DenseLayout();
    for (CpuTree& t : out->trees_) {
      t.dense = -1;
      t.continues = false;
    }
  }
  if (!out->bitvector_walk()) {
    out->bitvector_ = BitvectorLayout();
    for (CpuTree& t : out->trees_) t.bitvector = -1;
  }
  out->row_seconds_ = RowSeconds(*out);
  return std::shared_ptr<const CpuForest>(std::move(out));
}

void CpuForest::TreeSpan(int begin, int end, int32_t* first, int32_t* last) const {
  *first = static_cast<int32_t>(std::lower_bound(iterations_.begin(), iterations_.end(), begin) -
                                iterations_.begin());
  *last = static_cast<int32_t>(std::lower_bound(iterations_.begin(), iterations_.end(), end) -
                               iterations_.begin());
}

namespace {
constexpr std::pair<CpuForestOptions::Walk, const char*> kWalkNames[] = {
    {CpuForestOptions::Walk::kAuto, "auto"},   {CpuForestOptions::Walk::kScalar, "scalar"},
    {CpuForestOptions::Walk::kSimd, "simd"},   {CpuForestOptions::Walk::kDense, "dense"},
    {CpuForestOptions::Walk::kBitvector, "bitvector"},
    {CpuForestOptions::Walk::kDenseAvx2, "dense_avx2"}};
}  // namespace

const char* WalkName(CpuForestOptions::Walk walk) {
  for (const auto& [w, name] : kWalkNames) {
    if (w == walk) return name;
  }
  return "unknown";
}

absl::StatusOr<CpuForestOptions::Walk> ParseWalk(const std::string& name) {
  for (const auto& [w, n] : kWalkNames) {
    if (name == n) return w;
  }
  return absl::InvalidArgumentError(
      "unknown CPU walk \"" + name +
      "\" (one of auto, scalar, simd, dense, bitvector, dense_avx2)");
}

std::string CpuForest::Describe() const {
  const char* walk = walk_ == CpuForestOptions::Walk::kDenseAvx2   ? "avx2 complete-tree"
                     : walk_ == CpuForestOptions::Walk::kBitvector ? "avx512 bitvector"
                     : walk_ == CpuForestOptions::Walk::kDense   ? "avx512 complete-tree"
                     : walk_ == CpuForestOptions::Walk::kSimd    ? "avx512"
                                                                 : "scalar";
  return absl::StrFormat("cpu (%s walk, %d rows per block, %.1f MB)", walk, block_rows_,
                         MemoryBytes() / 1e6);
}

int64_t CpuForest::MemoryBytes() const {
  return static_cast<int64_t>(nodes_.size() * sizeof(CpuNode) +
                              leaf_values_.size() * sizeof(double) +
                              forest_nodes_.size() * sizeof(int32_t) +
                              category_words_.size() * sizeof(uint32_t) +
                              trees_.size() * sizeof(CpuTree) + iterations_.size() * sizeof(int32_t) +
                              tree_ids_.size() * sizeof(int32_t) +
                              dense_.bytes() + row_.bytes() + bitvector_.bytes());
}

}  // namespace grove::cpu
