// CatBoost JSON models (model.save_model(path, format="json"), CatBoost 0.x to 1.2) into a Forest.
//
// Mapping (see core/model/forest.h and docs/formats.md):
//  * An oblivious tree of depth d applies splits[j] at every node of level j's bit: CatBoost's leaf
//    index has bit j set when splits[j] is true (value > border). The tree becomes a complete binary
//    tree whose root tests splits[d - 1] and whose last level tests splits[0], nodes in breadth-first
//    order (children of n at 2n + 1 and 2n + 2), so that the leaves lie in CatBoost's leaf-index
//    order; Node::leaf_id is that index. This order is also the one CatBoost's ShapValues uses.
//  * CatBoost compares float32 `value > border` (true goes right); Grove's `x < threshold` goes left,
//    so threshold = the float just above the border. NaN goes right when the feature's
//    nan_value_treatment is AsTrue (nan_mode Max), left otherwise (AsFalse: nan_mode Min; AsIs: NaN
//    compares false).
//  * leaf_values holds num_outputs values per leaf, leaf-major; leaf_weights (the training weight
//    per leaf) are the covers, internal covers their sums. scale_and_bias = [scale, [bias per
//    output]]: leaf values are multiplied by scale, the bias is the base margin.
//  * Non-symmetric trees (grow_policy Depthwise / Lossguide) are nested {"split", "left", "right"} /
//    {"value", "weight"} objects: nodes in depth-first order (left first), leaves numbered in that
//    order.
//  * One-hot categorical splits ({"split_type": "OneHotFeature", "cat_feature_index": i, "value":
//    h}: true when the hash of the row's category is h) test the hashes that
//    features_info.categorical_features[i].values lists. That feature gets categories of the hashed
//    kind (FeatureCategories::hashes = values, code j <-> values[j]: core/model/forest.h), and the
//    split becomes a categorical split whose set is {the code of h}, in-set going right (true, as
//    a float split's true). NaN (only a code given as a number can be NaN: CatBoost refuses a
//    missing category) goes left, the "not equal" side, as an unseen category does.
//  * CTR splits need CatBoost's target statistics over hashed categories: refused
//    (UNIMPLEMENTED), as are text and embedding features.
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/model/loader.h"

namespace grove {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Deepest oblivious tree accepted (CatBoost's own limit is 16): 2^d leaves must be in the file.
constexpr int kMaxObliviousDepth = 24;
constexpr int64_t kMaxOutputs = int64_t{1} << 20;

struct LossInfo {
  std::string_view name;
  Link link;
};
// CatBoost's prediction of each loss (predict(), predict_proba() for classifiers) from the margin.
constexpr LossInfo kLosses[] = {
    {"RMSE", Link::kIdentity},     {"MAE", Link::kIdentity},      {"Quantile", Link::kIdentity},
    {"MAPE", Link::kIdentity},     {"Huber", Link::kIdentity},    {"Expectile", Link::kIdentity},
    {"Logloss", Link::kSigmoid},   {"CrossEntropy", Link::kSigmoid},
    {"MultiClass", Link::kSoftmax},
};

std::string SupportedLosses() {
  std::vector<std::string> names;
  for (const LossInfo& l : kLosses) names.emplace_back(l.name);
  return absl::StrJoin(names, ", ");
}

struct FloatFeature {
  int32_t flat_index = -1;
  bool nan_goes_right = false;
};

class CatboostReader {
 public:
  CatboostReader(Forest* forest, size_t input_bytes) : f_(*forest), input_bytes_(input_bytes) {}
  absl::Status Read(element root);

 private:
  std::string Where() const { return f_.source.empty() ? std::string("<memory>") : f_.source; }
  absl::Status Fail(std::string_view at, std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(), at.empty() ? "" : ": ", Av(at), ": ", Av(what)));
  }
  absl::Status Unimplemented(std::string_view at, std::string_view what) const {
    return absl::UnimplementedError(
        absl::StrCat(Where(), at.empty() ? "" : ": ", Av(at), ": ", Av(what)));
  }

  absl::Status ReadFeatures(object features_info);
  absl::Status ReadObjective(element root);
  absl::Status ReadScaleAndBias(element root);
  // Fills `node` (feature, threshold or category set, default direction) from a split object at
  // `at`.
  absl::Status ReadSplit(element split, const std::string& at, Node* node);
  absl::Status ReadOneHotSplit(object split, const std::string& at, Node* node);
  absl::Status ReadLeafValues(element values, const std::string& at, size_t count,
                              size_t* first);
  absl::Status ReadObliviousTree(element tree, int t);
  absl::Status ReadNonSymmetricTree(element tree, int t);
  absl::Status AddTree(int t, uint32_t node_begin);
  std::string CategoricalName(int64_t cat_index) const;

  Forest& f_;
  size_t input_bytes_;
  double scale_ = 1.0;
  bool outputs_known_ = false;
  std::vector<FloatFeature> float_features_;  // by float_feature_index
  std::vector<std::string> cat_names_;        // by cat_feature_index: "name" or "index N"
  std::vector<int32_t> cat_flat_;
  // By cat_feature_index: the hashes one-hot splits test (`values`) and each one's code (the first
  // position of the hash).
  std::vector<std::vector<uint32_t>> cat_values_;
  std::vector<absl::flat_hash_map<uint32_t, uint32_t>> cat_codes_;
  // The bitset of each (cat_feature_index, code) already in Forest::category_bits: its first word.
  absl::flat_hash_map<std::pair<int64_t, uint32_t>, uint32_t> onehot_sets_;
  std::vector<double> weights_;
};

// Words of one-hot category bitsets a model may need: a set {code} takes code / 32 + 1 words, one
// per distinct (feature, code), so a crafted file with many values could otherwise ask for far more
// memory than its size.
constexpr size_t kMaxOneHotWords = size_t{1} << 24;

absl::Status CatboostReader::ReadFeatures(object features_info) {
  // Every kind of feature takes a column of the input (flat_feature_index).
  int64_t num_features = 0;
  std::vector<std::pair<int64_t, std::string>> names;
  auto flat_index = [&](object feature, const std::string& at, int64_t* out) -> absl::Status {
    if (feature["flat_feature_index"].get_int64().get(*out) != simdjson::SUCCESS) {
      return Fail(at, "no integer \"flat_feature_index\"");
    }
    if (*out < 0 || *out >= std::numeric_limits<int32_t>::max() ||
        static_cast<uint64_t>(*out) > input_bytes_) {
      return Fail(at, absl::StrCat("flat_feature_index ", *out, " outside [0, 2^31)"));
    }
    num_features = std::max(num_features, *out + 1);
    std::string_view id;
    if (feature["feature_id"].get_string().get(id) == simdjson::SUCCESS && !id.empty()) {
      names.emplace_back(*out, std::string(id));
    }
    return absl::OkStatus();
  };
  for (const char* kind : {"float_features", "categorical_features", "text_features",
                           "embedding_features"}) {
    element list_element;
    if (features_info[kind].get(list_element) != simdjson::SUCCESS) continue;
    array list;
    if (list_element.get_array().get(list) != simdjson::SUCCESS) {
      return Fail(absl::StrCat("features_info.", kind), "not an array");
    }
    size_t i = 0;
    for (element e : list) {
      const std::string at = absl::StrCat("features_info.", kind, "[", i++, "]");
      object feature;
      if (e.get_object().get(feature) != simdjson::SUCCESS) return Fail(at, "not an object");
      int64_t flat = 0;
      if (absl::Status s = flat_index(feature, at, &flat); !s.ok()) return s;
      const std::string_view k = kind;
      if (k == "float_features") {
        int64_t index = 0;
        if (feature["feature_index"].get_int64().get(index) != simdjson::SUCCESS) {
          index = static_cast<int64_t>(float_features_.size());
        }
        if (index != static_cast<int64_t>(float_features_.size())) {
          return Fail(at, absl::StrCat("feature_index ", index, " out of order (expected ",
                                       float_features_.size(), ")"));
        }
        FloatFeature ff;
        ff.flat_index = static_cast<int32_t>(flat);
        std::string_view nan = "AsIs";
        if (element v; feature["nan_value_treatment"].get(v) == simdjson::SUCCESS &&
                       v.get_string().get(nan) != simdjson::SUCCESS) {
          return Fail(at, "nan_value_treatment is not a string");
        }
        if (nan == "AsTrue") {
          ff.nan_goes_right = true;
        } else if (nan != "AsFalse" && nan != "AsIs") {
          return Fail(at, absl::StrCat("unknown nan_value_treatment \"", Av(nan),
                                       "\" (AsIs, AsFalse or AsTrue)"));
        }
        float_features_.push_back(ff);
      } else if (k == "categorical_features") {
        std::string_view id;
        if (feature["feature_id"].get_string().get(id) != simdjson::SUCCESS || id.empty()) {
          cat_names_.push_back(absl::StrCat("at column ", flat));
        } else {
          cat_names_.push_back(absl::StrCat("\"", Av(id), "\" (column ", flat, ")"));
        }
        cat_flat_.push_back(static_cast<int32_t>(flat));
        std::vector<uint32_t>& values = cat_values_.emplace_back();
        absl::flat_hash_map<uint32_t, uint32_t>& codes = cat_codes_.emplace_back();
        element list_of_values;
        if (feature["values"].get(list_of_values) == simdjson::SUCCESS) {
          array hashes;
          if (list_of_values.get_array().get(hashes) != simdjson::SUCCESS) {
            return Fail(at + ".values", "not an array");
          }
          if (hashes.size() > kMaxCategoriesPerFeature) {
            return Fail(at + ".values", absl::StrCat(hashes.size(), " one-hot values; at most ",
                                                     kMaxCategoriesPerFeature));
          }
          values.reserve(hashes.size());
          size_t j = 0;
          for (element h : hashes) {
            int64_t v = 0;
            if (h.get_int64().get(v) != simdjson::SUCCESS ||
                v < std::numeric_limits<int32_t>::min() ||
                v > std::numeric_limits<int32_t>::max()) {
              return Fail(absl::StrCat(at, ".values[", j, "]"), "not a 32-bit integer hash");
            }
            const uint32_t hash = static_cast<uint32_t>(static_cast<int32_t>(v));
            codes.try_emplace(hash, static_cast<uint32_t>(values.size()));
            values.push_back(hash);
            ++j;
          }
        }
      }
    }
  }
  if (num_features == 0) return Fail("features_info", "the model has no features");
  f_.num_features = static_cast<int>(num_features);
  for (size_t c = 0; c < cat_values_.size(); ++c) {
    if (cat_values_[c].empty()) continue;
    f_.categories.resize(static_cast<size_t>(num_features));
    FeatureCategories& categories = f_.categories[static_cast<size_t>(cat_flat_[c])];
    if (!categories.empty()) {
      return Fail(absl::StrCat("features_info.categorical_features[", c, "]"),
                  absl::StrCat("flat_feature_index ", cat_flat_[c],
                               " is already another categorical feature's"));
    }
    categories.hashes = cat_values_[c];
  }
  if (!names.empty()) {
    f_.feature_names.assign(static_cast<size_t>(num_features), std::string());
    for (auto& [index, name] : names) f_.feature_names[index] = std::move(name);
  }
  return absl::OkStatus();
}

std::string CatboostReader::CategoricalName(int64_t cat_index) const {
  if (cat_index >= 0 && static_cast<size_t>(cat_index) < cat_names_.size()) {
    return absl::StrCat("categorical feature ", cat_names_[cat_index]);
  }
  return absl::StrCat("categorical feature ", cat_index);
}

absl::Status CatboostReader::ReadObjective(element root) {
  std::string_view type;
  if (root.at_pointer("/model_info/params/loss_function/type").get_string().get(type) !=
      simdjson::SUCCESS) {
    return Fail("model_info.params.loss_function.type",
                "missing: the loss decides the prediction transform, and no default is safe");
  }
  f_.objective.name = std::string(type);
  for (const LossInfo& l : kLosses) {
    if (l.name == type) {
      f_.objective.link = l.link;
      return absl::OkStatus();
    }
  }
  return Unimplemented("model_info.params.loss_function.type",
                       absl::StrCat("CatBoost loss \"", Av(type),
                                    "\" is not supported (its prediction transform is not "
                                    "known to Grove); supported: ", SupportedLosses()));
}

absl::Status CatboostReader::ReadScaleAndBias(element root) {
  f_.base_margin.clear();
  element sb;
  if (root["scale_and_bias"].get(sb) != simdjson::SUCCESS) return absl::OkStatus();
  array parts;
  if (sb.get_array().get(parts) != simdjson::SUCCESS || parts.size() != 2) {
    return Fail("scale_and_bias", "not a [scale, bias] array");
  }
  if (parts.at(0).get_double().get(scale_) != simdjson::SUCCESS || !std::isfinite(scale_)) {
    return Fail("scale_and_bias[0]", "scale is not a finite number");
  }
  element bias = parts.at(1).value_unsafe();
  double b = 0;
  if (bias.get_double().get(b) == simdjson::SUCCESS) {  // older files: one bias
    f_.base_margin.push_back(b);
    return absl::OkStatus();
  }
  array biases;
  if (bias.get_array().get(biases) != simdjson::SUCCESS || biases.size() == 0) {
    return Fail("scale_and_bias[1]", "bias is neither a number nor a non-empty array");
  }
  size_t i = 0;
  for (element e : biases) {
    if (e.get_double().get(b) != simdjson::SUCCESS) {
      return Fail(absl::StrCat("scale_and_bias[1][", i, "]"), "not a number");
    }
    f_.base_margin.push_back(b);
    ++i;
  }
  outputs_known_ = true;
  return absl::OkStatus();
}

absl::Status CatboostReader::ReadOneHotSplit(object s, const std::string& at, Node* node) {
  int64_t cat = -1;
  if (s["cat_feature_index"].get_int64().get(cat) != simdjson::SUCCESS) {
    return Fail(at, "one-hot split without an integer \"cat_feature_index\"");
  }
  if (cat < 0 || static_cast<size_t>(cat) >= cat_values_.size()) {
    return Fail(at, absl::StrCat("cat_feature_index ", cat, " outside the ", cat_values_.size(),
                                 " categorical features"));
  }
  int64_t value = 0;
  if (s["value"].get_int64().get(value) != simdjson::SUCCESS ||
      value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max()) {
    return Fail(at, absl::StrCat("one-hot split on ", CategoricalName(cat),
                                 " without a 32-bit integer \"value\" (a category hash)"));
  }
  const uint32_t hash = static_cast<uint32_t>(static_cast<int32_t>(value));
  const auto code = cat_codes_[static_cast<size_t>(cat)].find(hash);
  if (code == cat_codes_[static_cast<size_t>(cat)].end()) {
    return Fail(at, absl::StrCat("one-hot split on ", CategoricalName(cat), ": value ", value,
                                 " is not one of the feature's ",
                                 cat_values_[static_cast<size_t>(cat)].size(),
                                 " values (features_info.categorical_features[", cat,
                                 "].values)"));
  }
  const uint32_t words = code->second / 32 + 1;
  auto [set, added] = onehot_sets_.try_emplace(std::make_pair(cat, code->second),
                                               static_cast<uint32_t>(f_.category_bits.size()));
  if (added) {
    if (f_.category_bits.size() + words > kMaxOneHotWords) {
      return Fail(at, absl::StrCat("the one-hot splits' category sets need more than ",
                                   kMaxOneHotWords, " words"));
    }
    f_.category_bits.resize(f_.category_bits.size() + words, 0u);
    f_.category_bits[set->second + code->second / 32] = 1u << (code->second % 32);
  }
  node->feature = cat_flat_[static_cast<size_t>(cat)];
  node->payload = set->second;
  node->aux = words;
  // Equal goes right (true); NaN, a code given as a number, goes the "not equal" way.
  node->flags = kNodeCategorical | kNodeDefaultLeft;
  return absl::OkStatus();
}

absl::Status CatboostReader::ReadSplit(element split, const std::string& at, Node* node) {
  object s;
  if (split.get_object().get(s) != simdjson::SUCCESS) return Fail(at, "split is not an object");
  std::string_view type = "FloatFeature";
  if (element v; s["split_type"].get(v) == simdjson::SUCCESS &&
                 v.get_string().get(type) != simdjson::SUCCESS) {
    return Fail(at, "split_type is not a string");
  }
  if (type == "OneHotFeature") return ReadOneHotSplit(s, at, node);
  if (type == "OnlineCtr") {
    return Unimplemented(
        at, "split on a CTR (CatBoost's target statistic of categorical features, over hashed "
            "category strings; ctr_data): Grove cannot evaluate it exactly; train without "
            "CTR features (one_hot_max_size at least each categorical feature's number of "
            "categories makes every categorical split one-hot, which Grove evaluates)");
  }
  if (type != "FloatFeature") {
    return Unimplemented(at, absl::StrCat("split type \"", Av(type),
                                          "\" (text, embedding or estimated features) is not "
                                          "supported; Grove reads FloatFeature splits"));
  }
  int64_t index = -1;
  if (s["float_feature_index"].get_int64().get(index) != simdjson::SUCCESS) {
    return Fail(at, "no integer \"float_feature_index\"");
  }
  if (index < 0 || static_cast<size_t>(index) >= float_features_.size()) {
    return Fail(at, absl::StrCat("float_feature_index ", index, " outside the ",
                                 float_features_.size(), " float features"));
  }
  double border = 0;
  if (s["border"].get_double().get(border) != simdjson::SUCCESS) {
    return Fail(at, "no numeric \"border\"");
  }
  const float border32 = static_cast<float>(border);
  if (!std::isfinite(border32)) return Fail(at, "border is not a finite float");
  const FloatFeature& ff = float_features_[index];
  node->feature = ff.flat_index;
  // value > border goes right: for floats, value < next float above the border goes left.
  node->threshold = std::nextafter(border32, std::numeric_limits<float>::infinity());
  node->flags = ff.nan_goes_right ? 0 : kNodeDefaultLeft;
  return absl::OkStatus();
}

// Appends `count` leaf values (times the scale) of `values` to the forest; `*first` is where.
absl::Status CatboostReader::ReadLeafValues(element values, const std::string& at, size_t count,
                                            size_t* first) {
  *first = f_.leaf_values.size();
  double v = 0;
  if (count == 1 && values.get_double().get(v) == simdjson::SUCCESS) {
    f_.leaf_values.push_back(v * scale_);
    return absl::OkStatus();
  }
  array list;
  if (values.get_array().get(list) != simdjson::SUCCESS) return Fail(at, "not a number array");
  if (list.size() != count) {
    return Fail(at, absl::StrCat("has ", list.size(), " values, expected ", count));
  }
  size_t i = 0;
  for (element e : list) {
    if (e.get_double().get(v) != simdjson::SUCCESS) {
      return Fail(absl::StrCat(at, "[", i, "]"), "not a number");
    }
    f_.leaf_values.push_back(v * scale_);
    ++i;
  }
  if (f_.leaf_values.size() > std::numeric_limits<uint32_t>::max()) {
    return Fail(at, "the model has more than 2^32 leaf values");
  }
  return absl::OkStatus();
}

absl::Status CatboostReader::ReadObliviousTree(element tree, int t) {
  const std::string at = absl::StrCat("oblivious_trees[", t, "]");
  array splits;
  if (tree["splits"].get_array().get(splits) != simdjson::SUCCESS) {
    return Fail(at, "no \"splits\" array");
  }
  const size_t depth = splits.size();
  if (depth > kMaxObliviousDepth) {
    return Fail(at, absl::StrCat("depth ", depth, " exceeds ", kMaxObliviousDepth));
  }
  const size_t leaves = size_t{1} << depth;
  element values;
  if (tree["leaf_values"].get(values) != simdjson::SUCCESS) {
    return Fail(at, "no \"leaf_values\"");
  }
  array value_list;
  if (values.get_array().get(value_list) != simdjson::SUCCESS) {
    return Fail(at + ".leaf_values", "not an array");
  }
  if (!outputs_known_) {  // no bias array: the first tree tells the outputs
    if (value_list.size() % leaves != 0 || value_list.size() == 0) {
      return Fail(at + ".leaf_values",
                  absl::StrCat(value_list.size(), " values for ", leaves, " leaves"));
    }
    f_.num_outputs = static_cast<int>(std::min<size_t>(value_list.size() / leaves, kMaxOutputs));
    f_.base_margin.resize(static_cast<size_t>(f_.num_outputs), f_.base_margin.empty()
                                                                   ? 0.0
                                                                   : f_.base_margin.front());
    outputs_known_ = true;
  }
  const size_t width = static_cast<size_t>(f_.num_outputs);
  size_t first = 0;
  if (absl::Status s = ReadLeafValues(values, at + ".leaf_values", leaves * width, &first);
      !s.ok()) {
    return s;
  }
  // Leaf weights (optional): the covers.
  weights_.assign(leaves, 0.0);
  if (element w; tree["leaf_weights"].get(w) == simdjson::SUCCESS) {
    array list;
    if (w.get_array().get(list) != simdjson::SUCCESS || list.size() != leaves) {
      return Fail(at + ".leaf_weights", absl::StrCat("not an array of ", leaves, " numbers"));
    }
    size_t i = 0;
    for (element e : list) {
      if (e.get_double().get(weights_[i]) != simdjson::SUCCESS || !(weights_[i] >= 0) ||
          !std::isfinite(weights_[i])) {
        return Fail(absl::StrCat(at, ".leaf_weights[", i, "]"), "not a finite weight >= 0");
      }
      ++i;
    }
  }
  Node level_nodes[kMaxObliviousDepth];
  size_t j = 0;
  for (element split : splits) {
    if (absl::Status s = ReadSplit(split, absl::StrCat(at, ".splits[", j, "]"), &level_nodes[j]);
        !s.ok()) {
      return s;
    }
    ++j;
  }
  const uint32_t node_begin = static_cast<uint32_t>(f_.nodes.size());
  const size_t internal = leaves - 1;
  if (f_.nodes.size() + internal + leaves > std::numeric_limits<uint32_t>::max()) {
    return Fail(at, "the model has more than 2^32 nodes");
  }
  f_.nodes.resize(f_.nodes.size() + internal + leaves);
  Node* nodes = f_.nodes.data() + node_begin;
  for (size_t p = 0; p < leaves; ++p) {
    Node& leaf = nodes[internal + p];
    leaf.flags = kNodeLeaf;
    leaf.leaf_id = static_cast<int32_t>(p);
    leaf.payload = static_cast<uint32_t>(first + p * width);
    leaf.cover = weights_[p];
  }
  // Level l (root 0) tests splits[depth - 1 - l]; internal nodes from the last one up, so that
  // every node's cover is the sum of its children's.
  for (size_t n = internal; n-- > 0;) {
    size_t level = 0;
    while ((size_t{2} << level) - 1 <= n) ++level;
    Node& node = nodes[n];
    node = level_nodes[depth - 1 - level];
    node.left = static_cast<int32_t>(2 * n + 1);
    node.right = static_cast<int32_t>(2 * n + 2);
    node.cover = nodes[node.left].cover + nodes[node.right].cover;
  }
  return AddTree(t, node_begin);
}

absl::Status CatboostReader::ReadNonSymmetricTree(element tree, int t) {
  const std::string at = absl::StrCat("trees[", t, "]");
  if (!outputs_known_) {
    f_.num_outputs = 1;
    if (f_.base_margin.empty()) f_.base_margin.push_back(0.0);
    outputs_known_ = true;
  }
  const size_t width = static_cast<size_t>(f_.num_outputs);
  const uint32_t node_begin = static_cast<uint32_t>(f_.nodes.size());
  // Depth-first, left first; each stack entry is a JSON node and its Grove node index.
  std::vector<std::pair<element, int32_t>> stack;
  stack.emplace_back(tree, 0);
  f_.nodes.emplace_back();
  int32_t next_leaf = 0;
  int32_t count = 1;
  while (!stack.empty()) {
    auto [e, index] = stack.back();
    stack.pop_back();
    const std::string here = absl::StrCat(at, " node ", index);
    object o;
    if (e.get_object().get(o) != simdjson::SUCCESS) return Fail(here, "not an object");
    Node node;
    element split, value;
    if (o["split"].get(split) == simdjson::SUCCESS) {
      if (absl::Status s = ReadSplit(split, here, &node); !s.ok()) return s;
      element left, right;
      if (o["left"].get(left) != simdjson::SUCCESS || o["right"].get(right) != simdjson::SUCCESS) {
        return Fail(here, "a split without \"left\" and \"right\"");
      }
      if (f_.nodes.size() + 2 > std::numeric_limits<int32_t>::max()) {
        return Fail(here, "too many nodes");
      }
      node.left = count++;
      node.right = count++;
      f_.nodes.resize(f_.nodes.size() + 2);
      stack.emplace_back(right, node.right);
      stack.emplace_back(left, node.left);
    } else if (o["value"].get(value) == simdjson::SUCCESS) {
      size_t first = 0;
      if (absl::Status s = ReadLeafValues(value, here + " value", width, &first); !s.ok()) {
        return s;
      }
      node.flags = kNodeLeaf;
      node.leaf_id = next_leaf++;
      node.payload = static_cast<uint32_t>(first);
      if (element w; o["weight"].get(w) == simdjson::SUCCESS) {
        if (w.get_double().get(node.cover) != simdjson::SUCCESS || !(node.cover >= 0) ||
            !std::isfinite(node.cover)) {
          return Fail(here, "weight is not a finite number >= 0");
        }
      }
    } else {
      return Fail(here, "neither a split nor a leaf (no \"split\" or \"value\")");
    }
    f_.nodes[node_begin + static_cast<uint32_t>(index)] = node;
  }
  // Internal covers: the sum of the children's (children have larger indices).
  Node* nodes = f_.nodes.data() + node_begin;
  for (int32_t n = count; n-- > 0;) {
    if (!nodes[n].is_leaf()) nodes[n].cover = nodes[nodes[n].left].cover + nodes[nodes[n].right].cover;
  }
  return AddTree(t, node_begin);
}

absl::Status CatboostReader::AddTree(int t, uint32_t node_begin) {
  Tree tree;
  tree.node_begin = node_begin;
  tree.num_nodes = static_cast<uint32_t>(f_.nodes.size() - node_begin);
  tree.leaf_width = f_.num_outputs;
  tree.group = 0;
  tree.iteration = t;
  f_.trees.push_back(tree);
  return absl::OkStatus();
}

absl::Status CatboostReader::Read(element root) {
  object top;
  if (root.get_object().get(top) != simdjson::SUCCESS) {
    return Fail("", "not a CatBoost model: the document is not an object");
  }
  object features_info;
  if (top["features_info"].get_object().get(features_info) != simdjson::SUCCESS) {
    return Fail("", "not a CatBoost model: no \"features_info\" object");
  }
  std::string_view info;
  if (root.at_pointer("/model_info/catboost_version_info").get_string().get(info) ==
      simdjson::SUCCESS) {
    // "... Branch: tags/v1.2.10 ..." names the release.
    const size_t tag = info.find("tags/v");
    if (tag != std::string_view::npos) {
      const std::string_view rest = info.substr(tag + 6);
      f_.library_version = std::string(rest.substr(0, rest.find_first_of(" \n\r\t")));
    }
  }
  if (absl::Status s = ReadFeatures(features_info); !s.ok()) return s;
  if (absl::Status s = ReadObjective(root); !s.ok()) return s;
  if (absl::Status s = ReadScaleAndBias(root); !s.ok()) return s;
  if (outputs_known_) {
    if (f_.base_margin.size() > static_cast<size_t>(kMaxOutputs)) {
      return Fail("scale_and_bias[1]", "more than 2^20 outputs");
    }
    f_.num_outputs = static_cast<int>(f_.base_margin.size());
  }
  const bool multi = f_.objective.link == Link::kSoftmax;
  element oblivious, non_symmetric;
  const bool has_oblivious = top["oblivious_trees"].get(oblivious) == simdjson::SUCCESS;
  const bool has_trees = top["trees"].get(non_symmetric) == simdjson::SUCCESS;
  if (has_oblivious == has_trees) {
    return Fail("", has_oblivious ? "both \"oblivious_trees\" and \"trees\""
                                  : "no \"oblivious_trees\" or \"trees\" array");
  }
  array trees;
  if ((has_oblivious ? oblivious : non_symmetric).get_array().get(trees) != simdjson::SUCCESS) {
    return Fail(has_oblivious ? "oblivious_trees" : "trees", "not an array");
  }
  if (trees.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Fail("", "too many trees");
  }
  int t = 0;
  for (element tree : trees) {
    if (tree.type() != simdjson::dom::element_type::OBJECT) {
      return Fail(absl::StrCat(has_oblivious ? "oblivious_trees[" : "trees[", t, "]"),
                  "not an object");
    }
    absl::Status s = has_oblivious ? ReadObliviousTree(tree, t) : ReadNonSymmetricTree(tree, t);
    if (!s.ok()) return s;
    ++t;
  }
  if (!outputs_known_) {  // no trees: BuildForest says so
    f_.num_outputs = 1;
    f_.base_margin.assign(1, f_.base_margin.empty() ? 0.0 : f_.base_margin.front());
  }
  if (multi != (f_.num_outputs > 1)) {
    return Fail("", absl::StrCat("loss ", f_.objective.name, " with ", f_.num_outputs,
                                 " outputs per leaf"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ForestPtr> LoadCatboostJson(std::string_view text, std::string source) {
  if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text.data(), text.size());
  element root;
  if (const simdjson::error_code error = parser.parse(padded).get(root); error) {
    return absl::InvalidArgumentError(
        absl::StrCat(source.empty() ? std::string("<memory>") : source,
                     ": invalid JSON: ", simdjson::error_message(error)));
  }
  Forest forest;
  forest.format = ModelFormat::kCatboostJson;
  forest.source = std::move(source);
  CatboostReader reader(&forest, padded.size());
  if (absl::Status s = reader.Read(root); !s.ok()) return s;
  return BuildForest(std::move(forest));
}

}  // namespace grove
