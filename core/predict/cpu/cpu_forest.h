// CpuForest: a Forest's inference-only layout for the CPU prediction engine, built once at load.
//
// What it holds and why:
//  * CpuNode (cpu_node.h): split feature, threshold and child in 16 bytes, children adjacent,
//    breadth-first (clustered for trees deeper than the complete layout), so the top levels of a
//    tree share a few cache lines and a walk is branch-free;
//  * per node, the leaf's value already multiplied by its tree's weight (double, the product the
//    reference forms per row) and the index of the Forest node it came from (leaf ids, vector and
//    linear leaves, and the general decision read the Forest itself);
//  * per tree: where its nodes start, its depth, output group and whether it needs the general
//    decision or the Forest's leaf values.
// Ownership: holds a ForestPtr (the Forest stays alive as long as this). Immutable after Build;
// thread-safe to share.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/forest.h"
#include "core/predict/cpu/cpu_node.h"
#include "core/predict/cpu/cpu_row_layout.h"

namespace grove::cpu {

struct CpuTree {
  uint32_t node_begin = 0;  // first node in CpuForest::nodes()
  int32_t depth = 0;        // levels a walk needs to reach every leaf
  int32_t group = 0;        // output of a scalar-leaf tree
  bool general = false;     // some split needs the general decision (kCpuGeneral, not kCpuCategory)
  bool categorical = false; // some split is a categorical set the vector walks decide (kCpuCategory)
  bool scalar = true;       // one plain value per leaf: CpuForest::leaf_value holds it
  bool continues = false;   // deeper than its complete layout (dense): rows go on below it
  int32_t dense = -1;       // its block of the complete layout (CpuForest::dense_nodes), or -1
  int32_t bitvector = -1;   // its entry of the bitvector layout (CpuForest::bitvector_trees), or -1
  int32_t row = -1;         // its slot in the row layout (CpuForest::row_nodes), or -1
  // In model order, the first tree from this one on that is not fused (scalar leaves, no
  // general split), and the first that does not continue this one's run of row layout slots
  // (consecutive slots, or none): where a walk over consecutive trees ends without a scan.
  int32_t fused_end = 0;
  int32_t row_end = 0;
};

// A node of the complete layout of a tree's top levels: position p's children are 2p + 1 and
// 2p + 2, so a walk computes the child instead of loading it. Built for trees of scalar leaves and
// no general split: each tree padded to the model's dense_depth() levels; a leaf above the last
// level routes anywhere (every position below it holds its value). A tree deeper than
// kDenseMaxDepth (leaf-wise trees: most rows end in the top levels, a few go on for tens) has its
// top dense_depth() levels there, and a position of the last level where its path goes on names
// the CpuNode the walk continues from (CpuForest::dense_next).
struct DenseNode {
  float threshold = 0;  // as CpuNode's: for a categorical split its set's index, as bits
  // The split feature in bits 0..28 (the layout is built for models of at most 2^29 features);
  // bit 31: a missing value goes left (CpuNode's kCpuNanLeft); bit 30: a categorical split
  // (kCpuCategory); bit 29: kCpuOutsideLeft.
  int32_t feature = 0;
};
inline constexpr uint32_t kDenseNanLeft = 1u << 31;
inline constexpr uint32_t kDenseCategory = 1u << 30;
inline constexpr uint32_t kDenseOutsideLeft = 1u << 29;
inline constexpr uint32_t kDenseFeatureBits = kDenseOutsideLeft - 1;
static_assert(sizeof(DenseNode) == 8, "DenseNode is two gather lanes' worth");
inline constexpr int kDenseMaxDepth = 10;
// Words of a categorical set the vector walks decide at most (CpuForest::category_stride: sets
// listing categories up to 4,095), and the bytes of their table at most: past either, a set takes
// the general decision in the scalar walk.
inline constexpr int kMaxCategoryWords = 128;
inline constexpr int64_t kMaxCategoryTableBytes = int64_t{64} << 20;
// Levels of the complete layout at least, where some tree is deeper than kDenseMaxDepth.
inline constexpr int kDenseTopLevels = 7;
static_assert(kDenseMaxDepth <= kRowMaxDepth, "the row layout holds the complete layout");

// The bitvector layout (QuickScorer's idea, evaluated sixteen rows to a vector): a tree of at
// most kBitvectorMaxLeaves leaves, numbered left to right, is its splits in any order, each with
// the mask of the leaves a row keeps when it goes right (every leaf of the split's left subtree
// cleared). A row's leaf is the lowest bit left after ANDing the masks of the splits it goes
// right at: the leaves left of its own all lie in the left subtree of a split on its path where
// it went right, and its own is in no cleared subtree. Every split is one compare of a column of
// the block, none depends on another, and no node is gathered.
// Trees of at most 32 leaves keep 32-bit masks (sixteen rows to a vector), larger ones 64-bit
// masks (eight rows to a vector).
inline constexpr int kBitvectorMaxLeaves = 64;
// Splits of the bitvector layout that cost about one level of the complete layout's walk: a split
// is a load, a compare and a masked AND per sixteen rows, a level of the complete layout gathers
// the row values (and below the top levels, the nodes). A tree the complete layout holds keeps it
// unless it has fewer than this many splits per level of that layout (docs/benchmarks/
// prediction-cpu.md has the timings the value comes from).
inline constexpr int kBitvectorSplitsPerLevel = 6;
struct BitvectorNode {
  float threshold = 0;   // x < threshold goes left
  int32_t feature = 0;   // index in CpuForest::bitvector_features
  uint64_t mask = 0;     // the leaves kept by a row that goes right
};
struct BitvectorTree {
  // Its splits: [begin, nan_right) send a missing value left, [nan_right, end) right.
  int32_t begin = 0, nan_right = 0, end = 0;
  int32_t values = 0;  // its leaves' values in CpuForest::bitvector_values, left to right
  bool wide = false;   // more than 32 leaves: 64-bit masks
};

struct CpuForestOptions {
  // Rows walked together per block (1 .. kMaxBlockRows of cpu_walk.h); 0: as many as keep a
  // block's rows in L1 (DefaultBlockRows), or for the complete-layout walk where its layout
  // exceeds a core's L2, LargeLayoutBlockRows; for the bitvector walk, which reads the block's
  // rows once, at least kMaxLanes.
  int block_rows = 0;
  // The walk of groups without general splits: the scalar one, the AVX-512 one (cpu_walk_simd.h;
  // scalar where the processor lacks it), or kAuto: whichever runs this model faster on typical
  // rows, timed at Build (tens of milliseconds for large models).
  // kDense: the AVX-512 walk over the complete layout of the trees it fits (DenseNode; a deeper
  // tree's top levels, the node walk below them for the rows that go on).
  // kBitvector: the bitvector layout for trees of at most kBitvectorMaxLeaves leaves (but the
  // complete layout for those it holds at fewer levels than a sixth of their splits), the
  // complete layout for other trees it fits, the AVX-512 node walk for the rest.
  // kDenseAvx2: the AVX2 walk over the complete layout (cpu_walk_avx2.h) of the trees it holds
  // whole without a categorical split, the scalar walk for the rest; scalar where the processor
  // lacks AVX2. kAuto times it against the scalar walk where AVX-512 is absent; never chosen
  // where AVX-512 is present (the walks above are), so it is forced there for tests and benches.
  enum class Walk { kAuto, kScalar, kSimd, kDense, kBitvector, kDenseAvx2 };
  Walk walk = Walk::kAuto;
};

// The walks' names (auto, scalar, simd, dense, bitvector, dense_avx2): one table for flags and
// logs. ParseWalk: INVALID_ARGUMENT for a name not in it.
const char* WalkName(CpuForestOptions::Walk walk);
absl::StatusOr<CpuForestOptions::Walk> ParseWalk(const std::string& name);

// Rows per block for rows of `num_features` values: as many as keep a block's values within half
// of a 48 KiB L1 data cache (the walk gathers from them at random), a multiple of 16 from 16 to
// 64.
int DefaultBlockRows(int num_features);

// Rows per block of the complete-layout walk where its layout exceeds a core's L2: the layout
// then comes from L3 once per block, so the block is as large as its rows can be while they stay
// in L2 beside the tree chunk walked over them (800 KB of them, a multiple of 16 from 16 to
// kMaxBlockRows).
int LargeLayoutBlockRows(int num_features);

class CpuForest {
 public:
  // The layout of `forest` (validated by BuildForest). RESOURCE_EXHAUSTED when the forest has more
  // than 2^31 nodes; INVALID_ARGUMENT for block_rows outside [0, 64]. The AVX-512 walk needs
  // fewer than 2^30 nodes (larger forests walk scalar), as does the AVX2 walk.
  static absl::StatusOr<std::shared_ptr<const CpuForest>> Build(ForestPtr forest,
                                                                const CpuForestOptions& options = {});

  // Not copied: row_nodes() is an offset into its own allocation.
  CpuForest(const CpuForest&) = delete;
  CpuForest& operator=(const CpuForest&) = delete;

  const Forest& forest() const { return *forest_; }
  const CpuNode* nodes() const { return nodes_.data(); }
  const CpuTree* trees() const { return trees_.data(); }
  // The sets of the categorical splits the vector walks decide (kCpuCategory): set p is the
  // categories 0 .. category_limit() - 1 that go left, category_stride() words from
  // p x category_stride() (category c in bit c % 32 of its word c / 32); nullptr when the model
  // has none. The stride is a power of two from 2 (categories 0..63) to kMaxCategoryWords, the
  // fewest that hold every such set. category_truncate(): the rule of every such split,
  // LightGBM's (int)x (a value in (-1, 0) is category 0) when true, XGBoost's (every negative
  // value invalid) when false.
  const uint32_t* category_words() const {
    return category_words_.empty() ? nullptr : category_words_.data();
  }
  int category_stride() const { return category_stride_; }
  int category_limit() const { return 32 * category_stride_; }
  bool category_truncate() const { return category_truncate_; }
  int32_t num_trees() const { return static_cast<int32_t>(trees_.size()); }
  // Tree weight x leaf value of a scalar tree's leaf at CpuForest node `i` (absolute index).
  double leaf_value(int64_t i) const { return leaf_values_[i]; }
  const double* leaf_values() const { return leaf_values_.data(); }
  // Absolute index in Forest::nodes of CpuForest node `i`.
  int32_t forest_node(int64_t i) const { return forest_nodes_[i]; }
  // True when tree t's iteration is never below tree t - 1's, so that a range of boosting rounds
  // is a contiguous run of trees (TreeSpan).
  bool iterations_sorted() const { return iterations_sorted_; }
  // 0, 1, ..., num_trees() - 1: a tree list for TreeSpan's runs.
  const int32_t* tree_ids() const { return tree_ids_.data(); }
  // Trees [first, last) of a contiguous range of rounds [begin, end) when iterations_sorted().
  void TreeSpan(int begin, int end, int32_t* first, int32_t* last) const;
  int64_t MemoryBytes() const;
  // "cpu (avx512 walk, 64 rows per block, 0.7 MB)": what the engine runs, for logs and metadata.
  std::string Describe() const;
  // Rows per block of a batch (CpuForestOptions::block_rows, resolved).
  int block_rows() const { return block_rows_; }
  // Single-threaded seconds a row takes through the walk as built, timed at Build on typical rows
  // held in cache: what a batch's split between threads weighs against a hand-off's cost.
  double row_seconds() const { return row_seconds_; }
  // Whether groups without general splits take the AVX-512 walk (CpuForestOptions::walk,
  // resolved), whether blocks take the AVX2 walk (kDenseAvx2) instead, and whether the fused
  // walk (either) takes the complete layout where a tree has one.
  bool simd_walk() const {
    return walk_ != CpuForestOptions::Walk::kScalar &&
           walk_ != CpuForestOptions::Walk::kDenseAvx2;
  }
  bool avx2_walk() const { return walk_ == CpuForestOptions::Walk::kDenseAvx2; }
  bool dense_walk() const {
    return walk_ == CpuForestOptions::Walk::kDense ||
           walk_ == CpuForestOptions::Walk::kBitvector ||
           walk_ == CpuForestOptions::Walk::kDenseAvx2;
  }
  bool bitvector_walk() const { return walk_ == CpuForestOptions::Walk::kBitvector; }
  // The bitvector layout (BitvectorNode): per tree that has it (CpuTree::bitvector), its entry;
  // the splits, the leaf values (tree weight included) and the features the splits read, in
  // the order a block's columns are laid out for the walk.
  const BitvectorTree* bitvector_trees() const { return bitvector_.trees.data(); }
  const BitvectorNode* bitvector_nodes() const { return bitvector_.nodes.data(); }
  const double* bitvector_values() const { return bitvector_.values.data(); }
  const std::vector<int32_t>& bitvector_features() const { return bitvector_.features; }
  // The complete layout: levels of every dense tree, its nodes ((2^depth - 1) per tree block) and
  // leaf values (2^depth per block, tree weight included; 0 where the path goes on).
  int dense_depth() const { return dense_.depth; }
  const DenseNode* dense_nodes() const { return dense_.nodes.data(); }
  const double* dense_values() const { return dense_.values.data(); }
  // dense_values() as floats where every one of them is a float exactly (a gather of sixteen
  // instead of two of eight, the same sums), else nullptr.
  const float* dense_values32() const {
    return dense_.values32.empty() ? nullptr : dense_.values32.data();
  }
  // Per position of the last level (2^depth per block, as dense_values), -1 where it holds the
  // row's leaf, else the byte offset in its tree (CpuNode::left's unit) of the CpuNode a row there
  // goes on from; nullptr when no tree continues (CpuTree::continues).
  const int32_t* dense_next() const { return dense_.next.empty() ? nullptr : dense_.next.data(); }
  // The row layout, for one row walked across trees (WalkAndAddRowSimd): the complete layout of
  // the same trees (row_depth() levels), kRowBlockTrees consecutive trees to a block, its nodes
  // where row_geometry() says (the top levels interleaved position by position for vector
  // loads, the deeper ones tree by tree in line-sized subtrees) from a 64-byte aligned
  // row_nodes(); the leaf at position q of the last level of the tree in slot s (CpuTree::row) is
  // row_values()[((s / 16) * 2^depth + q) * 16 + s % 16]. Built with the AVX-512 walks
  // (simd_walk()) for runs of at least kRowBlockTrees consecutive trees of the complete layout;
  // row_depth() 0 when no tree has it.
  int row_depth() const { return row_.depth; }
  const RowGeometry& row_geometry() const { return row_geometry_; }
  const DenseNode* row_nodes() const { return row_.nodes.data() + row_nodes_offset_; }
  const double* row_values() const { return row_.values.data(); }

 private:
  // A layout of complete trees (the complete layout and the row layout): its levels, nodes and
  // leaf values; empty with depth 0 when not built or not kept.
  struct DenseLayout {
    int depth = 0;
    std::vector<DenseNode> nodes;
    std::vector<double> values;
    std::vector<int32_t> next;  // dense_next(); empty in the row layout
    std::vector<float> values32;  // dense_values32(); empty in the row layout
    size_t bytes() const { return block_rule_bytes() + values32.size() * sizeof(float); }
    // The layout without the float copy of its leaf values: what the rule for large layouts'
    // blocks (kLargeDenseLayoutBytes) was measured on (docs/benchmarks/prediction-cpu.md), so
    // that the float copy moves no model from one block size to the other.
    size_t block_rule_bytes() const {
      return nodes.size() * sizeof(DenseNode) + values.size() * sizeof(double) +
             next.size() * sizeof(int32_t);
    }
  };
  // The bitvector layout (bitvector_trees() and the accessors after it).
  struct BitvectorLayout {
    std::vector<BitvectorTree> trees;
    std::vector<BitvectorNode> nodes;
    std::vector<double> values;
    std::vector<int32_t> features;
    size_t bytes() const {
      return trees.size() * sizeof(BitvectorTree) + nodes.size() * sizeof(BitvectorNode) +
             values.size() * sizeof(double) + features.size() * sizeof(int32_t);
    }
  };

  explicit CpuForest(ForestPtr forest) : forest_(std::move(forest)) {}
  // The walk of `candidates` that runs `cf` fastest on typical rows.
  static CpuForestOptions::Walk FastestWalk(CpuForest* cf,
                                            const std::vector<CpuForestOptions::Walk>& candidates);
  void BuildDense();
  void BuildRowLayout();
  void BuildBitvector();
  // Sets the walk and the block size that goes with it (dense_block_rows_ for kDense,
  // bitvector_block_rows_ for kBitvector).
  void SetWalk(CpuForestOptions::Walk walk);

  ForestPtr forest_;
  std::vector<CpuNode> nodes_;
  std::vector<CpuTree> trees_;
  std::vector<double> leaf_values_;    // per node (0 for splits and non-scalar leaves)
  std::vector<int32_t> forest_nodes_;  // per node
  std::vector<uint32_t> category_words_;  // category_words()
  int category_stride_ = 2;
  bool category_truncate_ = false;
  std::vector<int32_t> iterations_;    // per tree
  std::vector<int32_t> tree_ids_;      // 0 .. num_trees - 1
  bool iterations_sorted_ = true;
  int block_rows_ = 64;
  int default_block_rows_ = 64;  // the block size of the node walks
  int dense_block_rows_ = 64;    // the block size of the complete-layout walk
  int bitvector_block_rows_ = 64;  // the block size of the bitvector walk
  double row_seconds_ = 0;
  CpuForestOptions::Walk walk_ = CpuForestOptions::Walk::kScalar;
  DenseLayout dense_;
  DenseLayout row_;
  RowGeometry row_geometry_;
  int64_t row_nodes_offset_ = 0;  // row_.nodes' first node on a 64-byte line
  BitvectorLayout bitvector_;
};

using CpuForestPtr = std::shared_ptr<const CpuForest>;

}  // namespace grove::cpu
