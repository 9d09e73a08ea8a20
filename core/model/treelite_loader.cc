// Treelite checkpoints (serialization format v4: treelite.Model.serialize / serialize_bytes,
// Treelite 4.x; the `checkpoint.tl` that nvForest and Triton's FIL backend read) into a Forest.
//
// The format is a flat little-endian sequence: scalars as their bytes, arrays and strings as a
// uint64 element count followed by the elements (docs/serialization/v4.rst in Treelite). Every
// count is checked against the bytes left before anything is allocated, so that a short file cannot
// demand more memory than its own size.
//
// Mapping (see core/model/forest.h and docs/formats.md):
//  * A test node sends a row to its left child when `x op threshold` holds. Grove routes `x < t`
//    left with a float t: `<` and `<=` become the float threshold that decides every float row as
//    the double comparison does; `>` and `>=` are the negations of `<=` and `<`, so the children
//    (and the default direction) are swapped. `==` has no such form and is refused.
//  * NaN takes the default child. A categorical test matches when x, truncated to an integer, is in
//    the node's category list (negative values and values above 2^24, which no float row can hold
//    exactly, never match); category_list_right_child says which child a match takes.
//  * Outputs are laid out [target][class] (num_target * max(num_class) margins per row). A tree
//    with a class and a target adds its scalar to that output; a tree with target_id or class_id
//    -1 has a leaf vector, spread over every output it covers (zeros elsewhere).
//  * average_tree_output divides every output by the number of trees that write it: the leaf
//    values are divided at load, so that margins, SHAP values and every engine agree. base_scores
//    are then added, as Treelite does.
//  * Covers: sum_hess (XGBoost's hessians, scikit-learn's weighted sample counts, which shap uses)
//    where present, data_count (LightGBM, HistGradientBoosting) otherwise; a node with neither is
//    refused, since path-dependent SHAP needs them.
//  * A tree's iteration is the number of earlier trees writing the same outputs, so that XGBoost's
//    one-tree-per-class rounds keep their boosting round.
#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/model/lightgbm_threshold.h"
#include "core/model/loader.h"

namespace grove {
namespace {

static_assert(std::endian::native == std::endian::little,
              "Treelite checkpoints are little-endian; this loader reads them in place");

absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Treelite's enums (v4).
enum TypeInfo : uint8_t { kTypeInvalid = 0, kTypeUInt32 = 1, kTypeFloat32 = 2, kTypeFloat64 = 3 };
enum TaskType : uint8_t {
  kBinaryClf = 0,
  kRegressor = 1,
  kMultiClf = 2,
  kLearningToRank = 3,
  kIsolationForest = 4
};
enum NodeType : int8_t { kLeafNode = 0, kNumericalTest = 1, kCategoricalTest = 2 };
enum Operator : int8_t { kOpNone = 0, kOpEq = 1, kOpLt = 2, kOpLe = 3, kOpGt = 4, kOpGe = 5 };

// Outputs per row and per leaf vector (num_target * max(num_class)).
constexpr int64_t kMaxOutputs = int64_t{1} << 20;
// Largest category a float row can name exactly (Treelite: above it nothing matches).
constexpr uint32_t kMaxCategory = uint32_t{1} << 24;
// Smallest bytes one serialized tree takes (num_nodes, has_categorical_split, 22 array counts, two
// optional-field counts), bounding num_tree by the input size before anything is reserved.
constexpr uint64_t kMinTreeBytes = 4 + 1 + 22 * 8 + 4 + 4;

struct LinkInfo {
  std::string_view name;
  Link link;
};
// Treelite's postprocessors that Grove's links compute exactly. exponential_standard_ratio
// (isolation forests: 2^(-x / ratio_c)) has no Grove link and is refused.
constexpr LinkInfo kPostprocessors[] = {
    {"identity", Link::kIdentity},
    {"identity_multiclass", Link::kIdentity},
    {"sigmoid", Link::kSigmoid},
    {"multiclass_ova", Link::kSigmoid},
    {"softmax", Link::kSoftmax},
    {"exponential", Link::kExp},
    {"logarithm_one_plus_exp", Link::kLog1pExp},
    {"signed_square", Link::kSignedSquare},
    {"hinge", Link::kHinge},
};

std::string SupportedPostprocessors() {
  std::string names;
  for (const LinkInfo& p : kPostprocessors) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", Av(p.name));
  }
  return names;
}

// The float threshold that reproduces `(double)x < t` as `x < result` for every non-NaN float x:
// the smallest float not below t.
float LessThanThreshold(double t) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (t > static_cast<double>(FLT_MAX)) return kInf;
  if (t < -static_cast<double>(FLT_MAX)) {
    return t == -std::numeric_limits<double>::infinity() ? -kInf : -FLT_MAX;
  }
  float f = static_cast<float>(t);
  if (static_cast<double>(f) < t) f = std::nextafter(f, kInf);
  return f;
}

// The fields of one serialized tree, as read (before mapping).
template <typename ThresholdT, typename LeafT>
struct RawTree {
  int32_t num_nodes = 0;
  bool has_categorical_split = false;
  std::vector<int8_t> node_type;
  std::vector<int32_t> cleft, cright, split_index;
  std::vector<uint8_t> default_left;
  std::vector<LeafT> leaf_value;
  std::vector<ThresholdT> threshold;
  std::vector<int8_t> cmp;
  std::vector<uint8_t> category_list_right_child;
  std::vector<LeafT> leaf_vector;
  std::vector<uint64_t> leaf_vector_begin, leaf_vector_end;
  std::vector<uint32_t> category_list;
  std::vector<uint64_t> category_list_begin, category_list_end;
  std::vector<uint64_t> data_count;
  std::vector<uint8_t> data_count_present;
  std::vector<double> sum_hess;
  std::vector<uint8_t> sum_hess_present;
  std::vector<double> gain;
  std::vector<uint8_t> gain_present;
};

class TreeliteReader {
 public:
  TreeliteReader(Forest* forest, std::string_view bytes) : f_(*forest), bytes_(bytes) {
    // Category bitsets are sized by category values, not by input bytes: bound their total so that
    // a small malicious file cannot demand gigabytes (64 words per input byte, at least 256 MiB).
    category_word_budget_ = std::max<uint64_t>(uint64_t{1} << 26, uint64_t{64} * bytes.size());
    // A leaf vector of one target's or one class's outputs is spread over every output (zeros
    // elsewhere): bound the values so spread likewise (8 per input byte, at least 256 MiB).
    leaf_value_budget_ = std::max<uint64_t>(uint64_t{1} << 25, uint64_t{8} * bytes.size());
  }

  absl::Status Read();

 private:
  std::string Where(int tree, int node) const {
    std::string where = f_.source.empty() ? std::string("<memory>") : f_.source;
    if (tree >= 0) absl::StrAppend(&where, ": tree ", tree);
    if (node >= 0) absl::StrAppend(&where, " node ", node);
    return where;
  }
  absl::Status Fail(int tree, int node, std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(tree, node), ": ", Av(what), " (byte ", pos_, ")"));
  }
  absl::Status Fail(std::string_view what) const { return Fail(-1, -1, what); }
  absl::Status Unimplemented(int tree, int node, std::string_view what) const {
    return absl::UnimplementedError(absl::StrCat(Where(tree, node), ": ", Av(what)));
  }

  template <typename T>
  absl::Status Scalar(std::string_view what, T* out, int tree = -1) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (bytes_.size() - pos_ < sizeof(T)) {
      return Fail(tree, -1, absl::StrCat("the Treelite checkpoint ends inside ", Av(what)));
    }
    std::memcpy(out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }
  // An array: a uint64 count, then the elements. The count is checked against the bytes left.
  template <typename T>
  absl::Status Array(std::string_view what, std::vector<T>* out, int tree = -1) {
    uint64_t count = 0;
    if (absl::Status s = Scalar(what, &count, tree); !s.ok()) return s;
    if (count > (bytes_.size() - pos_) / sizeof(T)) {
      return Fail(tree, -1,
                  absl::StrCat(Av(what), " claims ", count, " elements of ", sizeof(T),
                               " bytes; ", bytes_.size() - pos_, " bytes are left"));
    }
    out->resize(count);
    if (count > 0) std::memcpy(out->data(), bytes_.data() + pos_, count * sizeof(T));
    pos_ += count * sizeof(T);
    return absl::OkStatus();
  }
  absl::Status String(std::string_view what, std::string* out) {
    std::vector<char> chars;
    if (absl::Status s = Array(what, &chars); !s.ok()) return s;
    out->assign(chars.begin(), chars.end());
    return absl::OkStatus();
  }
  // An optional field of a later Treelite version: a name, an element size and count, the bytes.
  absl::Status SkipOptionalField(int tree) {
    std::string name;
    uint64_t elem_size = 0, count = 0;
    if (absl::Status s = String("an optional field's name", &name); !s.ok()) return s;
    if (absl::Status s = Scalar("an optional field's element size", &elem_size, tree); !s.ok()) {
      return s;
    }
    if (absl::Status s = Scalar("an optional field's element count", &count, tree); !s.ok()) {
      return s;
    }
    const uint64_t left = bytes_.size() - pos_;
    if (elem_size != 0 && count > left / elem_size) {
      return Fail(tree, -1, "an optional field is longer than the file");
    }
    pos_ += elem_size * count;
    return absl::OkStatus();
  }
  absl::Status SkipOptionalFields(std::string_view what, int tree) {
    int32_t n = 0;
    if (absl::Status s = Scalar(what, &n, tree); !s.ok()) return s;
    if (n < 0) return Fail(tree, -1, absl::StrCat(Av(what), " is negative"));
    for (int32_t i = 0; i < n; ++i) {
      if (absl::Status s = SkipOptionalField(tree); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status ReadHeader();
  template <typename ThresholdT, typename LeafT>
  absl::Status ReadTrees();
  template <typename ThresholdT, typename LeafT>
  absl::Status ReadRawTree(int t, RawTree<ThresholdT, LeafT>* raw);
  template <typename ThresholdT, typename LeafT>
  absl::Status AddTree(int t, const RawTree<ThresholdT, LeafT>& raw);
  // The outputs a tree writes: a single output (`*single` >= 0) or the vector of every output, with
  // its expected leaf-vector length and the output each element goes to.
  absl::Status TreeOutputs(int t, int* single, std::vector<int32_t>* vector_outputs) const;

  Forest& f_;
  std::string_view bytes_;
  size_t pos_ = 0;
  uint64_t category_word_budget_ = 0;
  uint64_t leaf_value_budget_ = 0;

  uint8_t threshold_type_ = 0, leaf_type_ = 0;
  uint64_t num_tree_ = 0;
  int32_t num_target_ = 1;
  int32_t max_num_class_ = 1;
  std::vector<int32_t> num_class_;
  std::vector<int32_t> leaf_vector_shape_;
  std::vector<int32_t> target_id_, class_id_;
  bool average_ = false;
  // Trees writing each output, for averaging; earlier trees per (target, class), for iterations.
  std::vector<int64_t> trees_per_output_;
  std::map<std::pair<int32_t, int32_t>, int32_t> trees_so_far_;
};

absl::Status TreeliteReader::ReadHeader() {
  int32_t major = 0, minor = 0, patch = 0;
  if (absl::Status s = Scalar("the major version", &major); !s.ok()) return s;
  if (absl::Status s = Scalar("the minor version", &minor); !s.ok()) return s;
  if (absl::Status s = Scalar("the patch version", &patch); !s.ok()) return s;
  if (major == 3) {
    return Unimplemented(-1, -1,
                         absl::StrCat("a Treelite ", major, ".", minor, ".", patch,
                                      " checkpoint (serialization v3), which Grove does not read: "
                                      "load it with Treelite 4 and serialize it again"));
  }
  if (major != 4) {
    return Fail(absl::StrCat("Treelite serialization major version ", major,
                             "; Grove reads version 4"));
  }
  f_.library_version = absl::StrCat("treelite ", major, ".", minor, ".", patch);
  if (absl::Status s = Scalar("the threshold type", &threshold_type_); !s.ok()) return s;
  if (absl::Status s = Scalar("the leaf output type", &leaf_type_); !s.ok()) return s;
  const bool f32 = threshold_type_ == kTypeFloat32 && leaf_type_ == kTypeFloat32;
  const bool f64 = threshold_type_ == kTypeFloat64 && leaf_type_ == kTypeFloat64;
  if (!f32 && !f64) {
    return Fail(absl::StrCat("threshold type ", threshold_type_, " and leaf output type ",
                             leaf_type_, ": Treelite 4 writes float32/float32 (2, 2) or "
                             "float64/float64 (3, 3)"));
  }
  if (absl::Status s = Scalar("the number of trees", &num_tree_); !s.ok()) return s;
  if (num_tree_ == 0) return Fail("the model has no trees");
  if (num_tree_ > (bytes_.size() - pos_) / kMinTreeBytes ||
      num_tree_ > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return Fail(absl::StrCat("num_tree ", num_tree_, " trees cannot fit in the ",
                             bytes_.size() - pos_, " bytes left"));
  }
  int32_t num_feature = 0;
  uint8_t task_type = 0;
  if (absl::Status s = Scalar("num_feature", &num_feature); !s.ok()) return s;
  if (num_feature <= 0) {
    return Fail(absl::StrCat("num_feature ", num_feature, " outside [1, 2^31)"));
  }
  f_.num_features = num_feature;
  if (absl::Status s = Scalar("task_type", &task_type); !s.ok()) return s;
  if (task_type > kIsolationForest) return Fail(absl::StrCat("unknown task_type ", task_type));
  if (task_type == kIsolationForest) {
    return Unimplemented(-1, -1,
                         "an isolation forest (task_type kIsolationForest), whose score "
                         "(exponential_standard_ratio) Grove does not compute");
  }
  uint8_t average = 0;
  if (absl::Status s = Scalar("average_tree_output", &average); !s.ok()) return s;
  if (average > 1) return Fail(absl::StrCat("average_tree_output is ", average, ", not a bool"));
  average_ = average == 1;
  if (absl::Status s = Scalar("num_target", &num_target_); !s.ok()) return s;
  if (num_target_ <= 0 || num_target_ > kMaxOutputs) {
    return Fail(absl::StrCat("num_target ", num_target_, " outside [1, ", kMaxOutputs, "]"));
  }
  if (absl::Status s = Array("num_class", &num_class_); !s.ok()) return s;
  if (num_class_.size() != static_cast<size_t>(num_target_)) {
    return Fail(absl::StrCat("num_class has ", num_class_.size(), " entries for ", num_target_,
                             " targets"));
  }
  max_num_class_ = 0;
  for (int32_t c : num_class_) {
    if (c <= 0 || c > kMaxOutputs) {
      return Fail(absl::StrCat("num_class ", c, " outside [1, ", kMaxOutputs, "]"));
    }
    max_num_class_ = std::max(max_num_class_, c);
  }
  const int64_t outputs = int64_t{num_target_} * max_num_class_;
  if (outputs > kMaxOutputs) {
    return Fail(absl::StrCat(num_target_, " targets of ", max_num_class_,
                             " classes: more than ", kMaxOutputs, " outputs"));
  }
  if (num_target_ > 1 && max_num_class_ > 1) {
    for (int32_t c : num_class_) {
      if (c != max_num_class_) {
        return Unimplemented(-1, -1,
                             "a multi-target classifier whose targets have different numbers "
                             "of classes: Grove's outputs are one flat row, with no padding");
      }
    }
  }
  f_.num_outputs = static_cast<int>(outputs);
  if (absl::Status s = Array("leaf_vector_shape", &leaf_vector_shape_); !s.ok()) return s;
  if (leaf_vector_shape_.size() != 2 ||
      (leaf_vector_shape_[0] != 1 && leaf_vector_shape_[0] != num_target_) ||
      (leaf_vector_shape_[1] != 1 && leaf_vector_shape_[1] != max_num_class_)) {
    return Fail(absl::StrCat("leaf_vector_shape must be [1 or num_target (", num_target_,
                             "), 1 or max(num_class) (", max_num_class_, ")]"));
  }
  if (absl::Status s = Array("target_id", &target_id_); !s.ok()) return s;
  if (absl::Status s = Array("class_id", &class_id_); !s.ok()) return s;
  if (target_id_.size() != num_tree_ || class_id_.size() != num_tree_) {
    return Fail(absl::StrCat("target_id has ", target_id_.size(), " and class_id ",
                             class_id_.size(), " entries for ", num_tree_, " trees"));
  }
  std::string postprocessor;
  if (absl::Status s = String("postprocessor", &postprocessor); !s.ok()) return s;
  float sigmoid_alpha = 1, ratio_c = 1;
  if (absl::Status s = Scalar("sigmoid_alpha", &sigmoid_alpha); !s.ok()) return s;
  if (absl::Status s = Scalar("ratio_c", &ratio_c); !s.ok()) return s;
  const LinkInfo* link = nullptr;
  for (const LinkInfo& p : kPostprocessors) {
    if (p.name == postprocessor) link = &p;
  }
  if (link == nullptr) {
    const std::string shown = postprocessor.substr(0, 64);
    return Unimplemented(-1, -1,
                         absl::StrCat("postprocessor \"", shown,
                                      "\", which Grove does not compute (supported: ",
                                      SupportedPostprocessors(), ")"));
  }
  if (link->link == Link::kSoftmax && num_target_ > 1) {
    return Unimplemented(-1, -1,
                         "softmax over the classes of each of several targets: Grove's softmax "
                         "spans every output of a row");
  }
  f_.objective.name = postprocessor;
  f_.objective.link = link->link;
  f_.objective.sigmoid_alpha = sigmoid_alpha;
  if (link->link == Link::kSigmoid && !(std::isfinite(sigmoid_alpha) && sigmoid_alpha > 0)) {
    return Fail(absl::StrCat("sigmoid_alpha ", sigmoid_alpha, " is not a positive number"));
  }
  if (absl::Status s = Array("base_scores", &f_.base_margin); !s.ok()) return s;
  if (f_.base_margin.size() != static_cast<size_t>(outputs)) {
    return Fail(absl::StrCat("base_scores has ", f_.base_margin.size(), " values for ", outputs,
                             " outputs"));
  }
  std::string attributes;
  if (absl::Status s = String("attributes", &attributes); !s.ok()) return s;
  if (absl::Status s = SkipOptionalFields("the model's optional field count", -1); !s.ok()) {
    return s;
  }

  // Which outputs each tree writes: its target and class must name real ones. Counted by kind
  // (one output, every class of a target, a class of every target, every output) and summed per
  // output after: O(trees + outputs), where spreading each tree would be O(trees x outputs).
  trees_per_output_.assign(static_cast<size_t>(outputs), 0);
  std::vector<int64_t> per_target(static_cast<size_t>(num_target_), 0);
  std::vector<int64_t> per_class(static_cast<size_t>(max_num_class_), 0);
  int64_t every_output = 0;
  for (uint64_t t = 0; t < num_tree_; ++t) {
    const int32_t target = target_id_[t], cls = class_id_[t];
    if (target < -1 || target >= num_target_) {
      return Fail(static_cast<int>(t), -1,
                  absl::StrCat("target_id ", target, " outside [-1, ", num_target_, ")"));
    }
    const int32_t classes = target >= 0 ? num_class_[target] : max_num_class_;
    if (cls < -1 || cls >= classes) {
      return Fail(static_cast<int>(t), -1,
                  absl::StrCat("class_id ", cls, " outside [-1, ", classes, ")"));
    }
    if (target >= 0 && cls >= 0) {
      ++trees_per_output_[static_cast<size_t>(target) * max_num_class_ + cls];
    } else if (target >= 0) {
      ++per_target[static_cast<size_t>(target)];
    } else if (cls >= 0) {
      ++per_class[static_cast<size_t>(cls)];
    } else {
      ++every_output;
    }
  }
  for (int32_t tg = 0; tg < num_target_; ++tg) {
    for (int32_t c = 0; c < num_class_[tg]; ++c) {
      trees_per_output_[static_cast<size_t>(tg) * max_num_class_ + c] +=
          per_target[static_cast<size_t>(tg)] + per_class[static_cast<size_t>(c)] + every_output;
    }
  }
  return absl::OkStatus();
}

absl::Status TreeliteReader::TreeOutputs(int t, int* single,
                                         std::vector<int32_t>* vector_outputs) const {
  const int32_t target = target_id_[t], cls = class_id_[t];
  vector_outputs->clear();
  *single = -1;
  if (target >= 0 && cls >= 0) {
    *single = target * max_num_class_ + cls;
    return absl::OkStatus();
  }
  // Leaf vector shape by kind (Treelite's own check): [num_target, max_class] for -1/-1,
  // [num_target, 1] for a class of every target, [1, max_class] for every class of a target.
  const int32_t rows = target < 0 ? num_target_ : 1;
  const int32_t cols = cls < 0 ? max_num_class_ : 1;
  if (leaf_vector_shape_[0] != rows || leaf_vector_shape_[1] != cols) {
    return Fail(t, -1,
                absl::StrCat("target_id ", target, " and class_id ", cls,
                             " need leaf vectors of shape [", rows, ", ", cols,
                             "]; the model's leaf_vector_shape is [", leaf_vector_shape_[0], ", ",
                             leaf_vector_shape_[1], "]"));
  }
  for (int32_t r = 0; r < rows; ++r) {
    const int32_t tg = target < 0 ? r : target;
    for (int32_t c = 0; c < cols; ++c) {
      const int32_t k = cls < 0 ? c : cls;
      // Padding of a target with fewer classes than max(num_class) writes no output.
      vector_outputs->push_back(k < num_class_[tg] ? tg * max_num_class_ + k : -1);
    }
  }
  return absl::OkStatus();
}

template <typename ThresholdT, typename LeafT>
absl::Status TreeliteReader::ReadRawTree(int t, RawTree<ThresholdT, LeafT>* raw) {
  if (absl::Status s = Scalar("num_nodes", &raw->num_nodes, t); !s.ok()) return s;
  uint8_t has_cat = 0;
  if (absl::Status s = Scalar("has_categorical_split", &has_cat, t); !s.ok()) return s;
  raw->has_categorical_split = has_cat != 0;
  absl::Status s = absl::OkStatus();
  auto array = [&](std::string_view what, auto* out) {
    if (s.ok()) s = Array(what, out, t);
  };
  array("node_type", &raw->node_type);
  array("cleft", &raw->cleft);
  array("cright", &raw->cright);
  array("split_index", &raw->split_index);
  array("default_left", &raw->default_left);
  array("leaf_value", &raw->leaf_value);
  array("threshold", &raw->threshold);
  array("cmp", &raw->cmp);
  array("category_list_right_child", &raw->category_list_right_child);
  array("leaf_vector", &raw->leaf_vector);
  array("leaf_vector_begin", &raw->leaf_vector_begin);
  array("leaf_vector_end", &raw->leaf_vector_end);
  array("category_list", &raw->category_list);
  array("category_list_begin", &raw->category_list_begin);
  array("category_list_end", &raw->category_list_end);
  array("data_count", &raw->data_count);
  array("data_count_present", &raw->data_count_present);
  array("sum_hess", &raw->sum_hess);
  array("sum_hess_present", &raw->sum_hess_present);
  array("gain", &raw->gain);
  array("gain_present", &raw->gain_present);
  if (!s.ok()) return s;
  if (s = SkipOptionalFields("the tree's optional field count", t); !s.ok()) return s;
  if (s = SkipOptionalFields("the nodes' optional field count", t); !s.ok()) return s;

  const size_t n = static_cast<size_t>(raw->num_nodes);
  if (raw->num_nodes <= 0) return Fail(t, -1, absl::StrCat("num_nodes ", raw->num_nodes));
  for (auto [name, size] : {std::pair<const char*, size_t>{"node_type", raw->node_type.size()},
                            {"cleft", raw->cleft.size()},
                            {"cright", raw->cright.size()},
                            {"split_index", raw->split_index.size()},
                            {"default_left", raw->default_left.size()},
                            {"leaf_value", raw->leaf_value.size()},
                            {"threshold", raw->threshold.size()},
                            {"cmp", raw->cmp.size()},
                            {"category_list_right_child", raw->category_list_right_child.size()},
                            {"leaf_vector_begin", raw->leaf_vector_begin.size()},
                            {"leaf_vector_end", raw->leaf_vector_end.size()},
                            {"category_list_begin", raw->category_list_begin.size()},
                            {"category_list_end", raw->category_list_end.size()}}) {
    if (size != n) {
      return Fail(t, -1, absl::StrCat(name, " has ", size, " entries for ", n, " nodes"));
    }
  }
  for (auto [name, values, present] :
       {std::tuple<const char*, size_t, size_t>{"data_count", raw->data_count.size(),
                                                raw->data_count_present.size()},
        {"sum_hess", raw->sum_hess.size(), raw->sum_hess_present.size()},
        {"gain", raw->gain.size(), raw->gain_present.size()}}) {
    if ((values != 0 && values != n) || present != values) {
      return Fail(t, -1,
                  absl::StrCat(name, " has ", values, " values and ", present,
                               " presence flags for ", n, " nodes (both must be 0 or ", n, ")"));
    }
  }
  return absl::OkStatus();
}

template <typename ThresholdT, typename LeafT>
absl::Status TreeliteReader::AddTree(int t, const RawTree<ThresholdT, LeafT>& raw) {
  int single = -1;
  std::vector<int32_t> vector_outputs;
  if (absl::Status s = TreeOutputs(t, &single, &vector_outputs); !s.ok()) return s;
  const int32_t n = raw.num_nodes;
  if (f_.nodes.size() + static_cast<size_t>(n) > std::numeric_limits<uint32_t>::max()) {
    return Fail(t, -1, "more than 2^32 nodes in the model");
  }
  Tree tree;
  tree.node_begin = static_cast<uint32_t>(f_.nodes.size());
  tree.num_nodes = static_cast<uint32_t>(n);
  tree.leaf_width = single >= 0 ? 1 : f_.num_outputs;
  tree.group = single >= 0 ? single : 0;
  tree.iteration = trees_so_far_[{target_id_[t], class_id_[t]}]++;
  f_.nodes.resize(f_.nodes.size() + static_cast<size_t>(n));
  Node* nodes = f_.nodes.data() + tree.node_begin;
  std::vector<uint32_t> bits;
  for (int32_t i = 0; i < n; ++i) {
    Node& node = nodes[i];
    if (!raw.sum_hess.empty() && raw.sum_hess_present[i]) {
      node.cover = raw.sum_hess[i];
    } else if (!raw.data_count.empty() && raw.data_count_present[i]) {
      node.cover = static_cast<double>(raw.data_count[i]);
    } else {
      return Unimplemented(t, i,
                           "no data_count or sum_hess: Grove needs the training counts of every "
                           "node (path-dependent SHAP weighs the paths by them)");
    }
    if (raw.leaf_vector_begin[i] > raw.leaf_vector_end[i] ||
        raw.leaf_vector_end[i] > raw.leaf_vector.size()) {
      return Fail(t, i, "leaf vector range outside leaf_vector");
    }
    if (raw.category_list_begin[i] > raw.category_list_end[i] ||
        raw.category_list_end[i] > raw.category_list.size()) {
      return Fail(t, i, "category list range outside category_list");
    }
    const int8_t type = raw.node_type[i];
    if (type == kLeafNode) {
      node.flags = kNodeLeaf;
      node.leaf_id = i;
      if (f_.leaf_values.size() >= std::numeric_limits<uint32_t>::max()) {
        return Fail(t, i, "more than 2^32 leaf values in the model");
      }
      node.payload = static_cast<uint32_t>(f_.leaf_values.size());
      const uint64_t begin = raw.leaf_vector_begin[i], end = raw.leaf_vector_end[i];
      if (single >= 0) {
        if (end - begin > 1) {
          return Fail(t, i, absl::StrCat("a leaf vector of ", end - begin,
                                         " values in a tree of one output"));
        }
        const double v = end > begin ? raw.leaf_vector[begin] : raw.leaf_value[i];
        f_.leaf_values.push_back(average_ ? v / trees_per_output_[single] : v);
      } else {
        if (end - begin != vector_outputs.size()) {
          return Fail(t, i, absl::StrCat("leaf vector of ", end - begin, " values; target_id ",
                                         target_id_[t], " and class_id ", class_id_[t],
                                         " need ", vector_outputs.size()));
        }
        if (static_cast<uint64_t>(f_.num_outputs) > leaf_value_budget_) {
          return Fail(t, i,
                      "leaf vectors spread over more outputs than the model file can justify");
        }
        leaf_value_budget_ -= static_cast<uint64_t>(f_.num_outputs);
        const size_t first = f_.leaf_values.size();
        f_.leaf_values.resize(first + static_cast<size_t>(f_.num_outputs), 0.0);
        for (size_t j = 0; j < vector_outputs.size(); ++j) {
          const int32_t k = vector_outputs[j];
          if (k < 0) continue;
          const double v = raw.leaf_vector[begin + j];
          f_.leaf_values[first + k] = average_ ? v / trees_per_output_[k] : v;
        }
      }
      continue;
    }
    if (type != kNumericalTest && type != kCategoricalTest) {
      return Fail(t, i, absl::StrCat("unknown node_type ", raw.node_type[i]));
    }
    node.feature = raw.split_index[i];
    node.left = raw.cleft[i];
    node.right = raw.cright[i];
    bool default_left = raw.default_left[i] != 0;
    if (type == kNumericalTest) {
      const double t_value = static_cast<double>(raw.threshold[i]);
      if (std::isnan(t_value)) return Fail(t, i, "threshold is NaN");
      switch (raw.cmp[i]) {
        case kOpLt: node.threshold = LessThanThreshold(t_value); break;
        case kOpLe: node.threshold = lightgbm_internal::LightgbmNumericThreshold(t_value); break;
        case kOpGt:  // x > t goes left: x <= t goes right
          node.threshold = lightgbm_internal::LightgbmNumericThreshold(t_value);
          std::swap(node.left, node.right);
          default_left = !default_left;
          break;
        case kOpGe:  // x >= t goes left: x < t goes right
          node.threshold = LessThanThreshold(t_value);
          std::swap(node.left, node.right);
          default_left = !default_left;
          break;
        case kOpEq:
          return Unimplemented(t, i,
                               "a numerical test with operator ==, which Grove's `x < threshold` "
                               "routing cannot express");
        default:
          return Fail(t, i, absl::StrCat("unknown comparison operator ", raw.cmp[i]));
      }
    } else {
      // Matching categories go right (category_list_right_child) or left.
      node.flags |= kNodeCategorical;
      if (raw.category_list_right_child[i] == 0) node.flags |= kNodeCategoryInSetGoesLeft;
      uint32_t largest = 0;
      bool any = false;
      for (uint64_t j = raw.category_list_begin[i]; j < raw.category_list_end[i]; ++j) {
        const uint32_t c = raw.category_list[j];
        if (c > kMaxCategory) continue;  // no float row names it: it never matches
        largest = std::max(largest, c);
        any = true;
      }
      const uint32_t words = any ? largest / 32 + 1 : 1;
      if (words > category_word_budget_) {
        return Fail(t, i, "category bitsets larger than the model file can justify");
      }
      category_word_budget_ -= words;
      bits.assign(words, 0);
      for (uint64_t j = raw.category_list_begin[i]; j < raw.category_list_end[i]; ++j) {
        const uint32_t c = raw.category_list[j];
        if (c <= kMaxCategory) bits[c >> 5] |= 1u << (c & 31u);
      }
      node.payload = static_cast<uint32_t>(f_.category_bits.size());
      node.aux = words;
      if (f_.category_bits.size() + words > std::numeric_limits<uint32_t>::max()) {
        return Fail(t, i, "more than 2^32 category words in the model");
      }
      f_.category_bits.insert(f_.category_bits.end(), bits.begin(), bits.end());
    }
    if (default_left) node.flags |= kNodeDefaultLeft;
  }
  f_.trees.push_back(tree);
  return absl::OkStatus();
}

template <typename ThresholdT, typename LeafT>
absl::Status TreeliteReader::ReadTrees() {
  f_.trees.reserve(num_tree_);
  RawTree<ThresholdT, LeafT> raw;
  for (int t = 0; t < static_cast<int>(num_tree_); ++t) {
    if (absl::Status s = ReadRawTree(t, &raw); !s.ok()) return s;
    if (absl::Status s = AddTree(t, raw); !s.ok()) return s;
  }
  if (pos_ != bytes_.size()) {
    return Fail(absl::StrCat(bytes_.size() - pos_, " bytes after the last tree"));
  }
  return absl::OkStatus();
}

absl::Status TreeliteReader::Read() {
  if (absl::Status s = ReadHeader(); !s.ok()) return s;
  if (threshold_type_ == kTypeFloat32) return ReadTrees<float, float>();
  return ReadTrees<double, double>();
}

}  // namespace

absl::StatusOr<ForestPtr> LoadTreeliteCheckpoint(std::string_view bytes, std::string source) {
  Forest forest;
  forest.format = ModelFormat::kTreeliteCheckpoint;
  forest.source = std::move(source);
  TreeliteReader reader(&forest, bytes);
  if (absl::Status s = reader.Read(); !s.ok()) return s;
  return BuildForest(std::move(forest));
}

}  // namespace grove
