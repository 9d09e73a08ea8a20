// The one in-memory representation of a tree ensemble that every engine reads.
//
// A Forest is immutable once built (ForestBuilder::Build validates it) and is shared between threads
// as std::shared_ptr<const Forest>; all methods are const and thread-safe. Engines derive their own
// layouts from it (GPU path layouts, Tahoe adaptive forests) once, at model load.
//
// Routing rules are normalised at load time so that one decision function (core/model/decision.h)
// serves XGBoost and LightGBM exactly:
//  * numeric splits: after missing-value handling, `x < threshold` goes left. XGBoost thresholds are
//    float32 and compare `<` directly. LightGBM compares the double `x <= t`; for float inputs that is
//    `x < next_float_up(largest_float_not_above(t))`, which the loader stores.
//  * missing values: NaN takes the node's default direction, except with kNanAsZero (LightGBM missing
//    type None: NaN is compared as 0.0); with kMissingZero (LightGBM missing type Zero), |x| <= 1e-35
//    also takes the default direction.
//  * categorical splits: a bitset of categories that go to the "in-set" side (right for XGBoost, left
//    for LightGBM: kCategoryInSetGoesLeft). NaN takes the default direction; a value that is not a valid
//    category (negative, beyond the bitset) goes to the other side.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace grove {

enum class ModelFormat : uint8_t {
  kXgboostJson,
  kXgboostUbjson,
  kLightgbmText,
  kCatboostJson,
  kTreeliteCheckpoint,
};
const char* ModelFormatName(ModelFormat format);

// Node flags (Node::flags).
enum NodeFlag : uint16_t {
  kNodeLeaf = 1u << 0,
  kNodeDefaultLeft = 1u << 1,  // missing values take the left child
  kNodeCategorical = 1u << 2,  // categorical split over Forest::category_bits
  kNodeCategoryInSetGoesLeft = 1u << 3,  // LightGBM: listed categories go left (XGBoost: right)
  kNodeMissingZero = 1u << 4,  // LightGBM missing type Zero: |x| <= 1e-35 is missing too
  kNodeNanAsZero = 1u << 5,    // LightGBM missing type None: NaN is compared as 0.0
  kNodeCategoryTruncate = 1u << 6,  // LightGBM: category = (int)x, so (-1, 0) is category 0
};

// LightGBM's kZeroThreshold: values this close to zero count as zero for missing type Zero.
inline constexpr float kZeroThreshold = 1e-35f;
// Deepest tree the builder accepts (root at depth 0). Deeper trees are refused, not truncated.
inline constexpr int kMaxTreeDepth = 1024;

// One tree node. Child and node indices are relative to the tree's first node.
struct Node {
  int32_t left = -1;      // left child, -1 for a leaf
  int32_t right = -1;     // right child, -1 for a leaf
  int32_t feature = -1;   // split feature, -1 for a leaf
  float threshold = 0;    // numeric split: x < threshold goes left (after missing-value handling)
  // Categorical split: first word of its bitset in Forest::category_bits.
  // Leaf: first of its Tree::leaf_width values in Forest::leaf_values.
  uint32_t payload = 0;
  // Categorical split: number of 32-bit words in its bitset.
  // Leaf: 1 + index into Forest::linear_leaves for a LightGBM linear leaf, 0 otherwise.
  uint32_t aux = 0;
  double cover = 0;       // sum of hessians (XGBoost) or count of training rows (LightGBM)
  int32_t leaf_id = -1;   // leaf: the library's own leaf index (XGBoost node id, LightGBM leaf index)
  uint16_t flags = 0;
  uint16_t reserved = 0;

  bool is_leaf() const { return flags & kNodeLeaf; }
  bool is_categorical() const { return flags & kNodeCategorical; }
  bool default_left() const { return flags & kNodeDefaultLeft; }
};
static_assert(sizeof(Node) == 40, "Node layout changed: update loaders and engines");

struct Tree {
  uint32_t node_begin = 0;  // first node in Forest::nodes; the root
  uint32_t num_nodes = 0;
  int32_t group = 0;        // output group of a scalar-leaf tree (leaf_width == 1)
  int32_t leaf_width = 1;   // values per leaf: 1, or num_outputs for vector-leaf trees
  int32_t iteration = 0;    // boosting round the tree belongs to
  int32_t depth = 0;        // longest root-to-leaf edge count (computed by the builder)
  int32_t num_leaves = 0;   // computed by the builder
  double weight = 1.0;      // multiplies every leaf value (XGBoost dart weight_drop)
};

// LightGBM linear-tree leaf: value = constant + sum(coeff[i] * x[feature[i]]); if any of those
// features is NaN, the leaf's plain value (Forest::leaf_values) is used instead.
struct LinearLeaf {
  double constant = 0;
  uint32_t begin = 0;  // first term in Forest::linear_features / linear_coeffs
  uint32_t count = 0;
};

// Link from margin to the transformed prediction.
enum class Link : uint8_t {
  kIdentity,
  kSigmoid,      // 1 / (1 + exp(-alpha * m)), per output
  kSoftmax,      // over the outputs of a row
  kExp,          // poisson, gamma, tweedie, cox
  kLog1pExp,     // LightGBM cross_entropy_lambda
  kSignedSquare, // LightGBM reg_sqrt: sign(m) * m^2
  kHinge,        // XGBoost binary:hinge: m > 0 ? 1 : 0
  kArgmax,       // XGBoost multi:softmax: index of the largest margin (one column)
};
const char* LinkName(Link link);

struct Objective {
  std::string name;      // as written in the model file, e.g. "binary:logistic", "binary sigmoid:1"
  Link link = Link::kIdentity;
  double sigmoid_alpha = 1.0;
  // LightGBM average_output (random forest): the prediction is link(margin / iterations used).
  bool average_output = false;
};

// The categories a categorical feature was trained with, in code order (category i is code i: the
// code the model's categorical splits test), as the model file records them. Strings, numbers or
// hashes, one kind only; empty when the file records none for the feature.
//
// Hashes: a CatBoost categorical feature, whose file holds no names but the hash of each category
// (CatboostCategoryHash, core/model/catboost_hash.h) its one-hot splits test, followed by those its
// CTR tables hold; code i is hashes[i], and a name is mapped by hashing it. A name whose hash is not
// listed gets the code hashes.size() (CategoryCodes): in no one-hot split's set, and in a CTR
// split's set when the CTR's prior-only value exceeds the border.
inline constexpr size_t kMaxCategoriesPerFeature = size_t{1} << 20;
struct FeatureCategories {
  std::vector<std::string> strings;
  std::vector<double> numbers;
  std::vector<uint32_t> hashes;
  bool empty() const { return strings.empty() && numbers.empty() && hashes.empty(); }
  size_t size() const {
    return !strings.empty() ? strings.size() : !numbers.empty() ? numbers.size() : hashes.size();
  }
  bool hashed() const { return !hashes.empty(); }
};

class Forest {
 public:
  // Shape.
  int num_features = 0;
  int num_outputs = 1;     // margins per row (classes, targets)
  int num_iterations = 0;  // boosting rounds (1 + max Tree::iteration)
  std::vector<Tree> trees;
  std::vector<Node> nodes;
  std::vector<uint32_t> category_bits;
  std::vector<double> leaf_values;
  std::vector<LinearLeaf> linear_leaves;
  std::vector<int32_t> linear_features;
  std::vector<double> linear_coeffs;
  std::vector<double> base_margin;  // per output, in margin space
  Objective objective;
  // LightGBM only (empty otherwise): the model's own double thresholds of numeric splits, per
  // feature, sorted and distinct: feature f's are double_thresholds[double_threshold_offsets[f] ..
  // double_threshold_offsets[f + 1]) (num_features + 1 offsets). Node::threshold is their float
  // form, exact for float rows; these let inputs given as doubles be turned into float rows that
  // every split routes as LightGBM routes the doubles (core/model/double_rows.h).
  std::vector<double> double_thresholds;
  std::vector<uint32_t> double_threshold_offsets;

  // Provenance, for errors, `grove inspect` and metadata.
  ModelFormat format = ModelFormat::kXgboostJson;
  std::string source;  // file path or "<memory>"
  std::string library_version;  // e.g. "3.4.1" or "v4"
  std::vector<std::string> feature_names;  // may be empty
  std::vector<std::string> feature_types;  // may be empty
  // Per feature (num_features entries) when the file records categories for any feature (XGBoost
  // 3.1+ models trained on a DataFrame with categorical columns: `cats.enc`; LightGBM models trained
  // on one: `pandas_categorical`; CatBoost one-hot features: hashes); empty otherwise. What callers recode a column of category values
  // (strings, pandas categories) by, as the libraries do before they predict.
  std::vector<FeatureCategories> categories;

  // Derived by the builder.
  int max_depth = 0;
  int64_t num_leaves = 0;
  bool has_categorical = false;
  bool has_linear_leaves = false;
  bool has_vector_leaves = false;

  const Node* TreeNodes(int t) const { return nodes.data() + trees[t].node_begin; }
  // Columns of the transformed prediction (1 for kArgmax, num_outputs otherwise).
  int PredictionWidth() const { return objective.link == Link::kArgmax ? 1 : num_outputs; }
  // Trees whose iteration is in [begin, end); end <= 0 means all iterations.
  bool TreeInRange(int t, int begin, int end) const {
    const int it = trees[t].iteration;
    return it >= begin && (end <= 0 || it < end);
  }
  // Bytes held by the model's arrays.
  int64_t MemoryBytes() const;
};

using ForestPtr = std::shared_ptr<const Forest>;

// Validates a forest assembled by a loader (or a test) and computes its derived fields.
// Every error is INVALID_ARGUMENT with a message naming the source, tree and node.
// Checks: child indices in range, every node reachable exactly once from the root (no cycles, no
// sharing), depth <= kMaxTreeDepth, features in [0, num_features), thresholds not NaN, leaf values,
// covers and weights finite, covers >= 0, category bitsets and leaf payloads in range, groups in
// [0, num_outputs), base_margin of size num_outputs, double thresholds sorted, distinct, not NaN,
// with num_features + 1 non-decreasing offsets (or both empty). Feature names and types, the
// objective name and the library version are made valid UTF-8: a byte outside a valid sequence
// becomes the text \xHH (so every interface shows the same names).
absl::StatusOr<ForestPtr> BuildForest(Forest forest);

}  // namespace grove
