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
//    resolved at build time into the node's NaN direction, and categorical splits are normalised
//    so that listed categories go left, their set in the node when it lists only categories 0..31
//    (tahoe_node.h; both exactly equivalent).
//
// Leaves carry the tree weight already multiplied in: inline float32 values when that rounding is
// provably far below the tolerance (always for XGBoost gbtree), otherwise indices into a double
// table (dart weights, LightGBM doubles, vector and linear leaves).
//
// A TahoeForest is immutable after Build and thread-safe to share. TahoeForestView is a by-value
// bundle of raw pointers (host or device) passed into kernels; the GROVE_HD functions below are the
// per-row logic shared by the GPU kernels and the host evaluator (TahoePredictHost).
//
// The format is split by concept: tahoe_node.h (nodes, view, decode), tahoe_walk.h (the GROVE_HD walks),
// this file (options, the TahoeForest builder and host evaluation), tahoe_lane.h (the lane layout),
// tahoe_level.h (the depth-by-depth copy row chunk walks), tahoe_records.h (the copy row chunk
// walks two depths a load).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/rows.h"
#include "core/model/forest.h"
#include "core/model/transform.h"
#include "core/predict/predict.h"
#include "core/predict/tahoe/tahoe_node.h"
#include "core/predict/tahoe/tahoe_walk.h"

namespace grove {

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
  // No missing-zero rule, 8-byte nodes and no linear leaves: TahoeWalkFixed applies (leaves loop
  // to themselves through the padding feature num_features), with kCat when categorical().
  bool fixed_walk() const { return fixed_walk_; }
  // Some split is categorical (the walks test for them: kTahoeWalkFixedCat, kTahoeWalkGeneric).
  bool categorical() const { return categorical_; }
  // The width of the padded table of category sets (TahoeForestView::cat_words; 0: none). Sets
  // are padded when every categorical split follows one rule and the widest set of the table is
  // at most kMaxPaddedCatWords words (and all of them at most kMaxPaddedCatTotalWords).
  static constexpr uint32_t kMaxPaddedCatWords = 64;
  static constexpr int64_t kMaxPaddedCatTotalWords = int64_t{1} << 24;
  uint32_t cat_words() const { return cat_words_; }
  // Every categorical split's set is in its node or a two-word set of the padded table (one rule,
  // no cat_splits records), and no feature of a categorical split is split numerically: the fixed
  // walk reads each set as 64 bits whose address does not depend on the row
  // (kTahoeWalkFixedCatPairs), and row chunk stages the categorical features as category codes
  // (kTahoeCatCodes).
  bool cat_pairs() const { return cat_pairs_; }
  // cat_pairs forests: bit f of word f / 32 is set when feature f is categorical
  // (TahoeForestView::cat_features); empty otherwise.
  const std::vector<uint32_t>& cat_features() const { return cat_features_; }
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
  // Per node: the model node's cover (Node::cover), whichever side a categorical split's children
  // were renamed to (the level layout's order).
  const std::vector<double>& covers() const { return covers_; }
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
  bool categorical_ = false;
  bool cat_truncate_ = false;  // TahoeForestView::cat_truncate
  uint32_t cat_words_ = 0;     // TahoeForestView::cat_words
  bool cat_pairs_ = false;
  int fixed_steps_ = 0;
  uint32_t feature_bits_ = 1;
  std::vector<TahoeNode8> nodes8_;
  std::vector<TahoeNode16> nodes16_;
  std::vector<TahoeTree> trees_;
  std::vector<double> tree_work_;
  std::vector<TahoeCatSplit> cat_splits_;
  std::vector<uint32_t> cat_bits_;
  std::vector<uint32_t> cat_features_;
  std::vector<double> leaf_table_;
  std::vector<TahoeLinearLeaf> linear_leaves_;
  std::vector<int32_t> linear_features_;
  std::vector<double> linear_coeffs_;
  std::vector<int32_t> leaf_ids_;
  std::vector<double> covers_;
  std::vector<TahoeAssignment> assignments_;
  std::vector<TahoeAssignment> class_assignments_;
  bool iterations_sorted_ = true;
  friend class TahoeBuilder;
};

using TahoeForestPtr = std::shared_ptr<const TahoeForest>;

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
