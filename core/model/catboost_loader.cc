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
//  * CTR splits ({"split_type": "OnlineCtr", "split_index": k, "border": b}: true when the CTR's
//    value > b). Splits are numbered over the model's borders: the float features' borders, then
//    the one-hot values, then features_info.ctrs[].borders in order; k names one CTR border (the
//    split's border and ctr_target_border_idx must agree with it). A CTR over one categorical
//    feature is a function of the category (core/model/catboost_ctr.h), so the feature's categories
//    are its one-hot values followed by the categories its CTR tables hold (recovered from the
//    table keys: CatboostCategoryOfCtrKey, core/model/catboost_hash.h), and the split becomes a
//    categorical split of that feature whose set is the codes whose value exceeds b; the code
//    hashes.size() (every category no table holds) is in the set when the prior-only value exceeds
//    b. In-set goes right; NaN goes left, as for one-hot splits. CTRs over several features
//    (max_ctr_complexity above 1) and CTR types whose values Grove does not compute are refused
//    (UNIMPLEMENTED) naming the split, as are text and embedding features.
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/model/catboost_ctr.h"
#include "core/model/catboost_hash.h"
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

// One table of ctr_data: the numbers of each category's record, by the category's hash.
struct CtrTable {
  int width = 0;  // numbers per record
  double counter_denominator = 0;
  std::vector<uint32_t> hashes;                     // by record
  std::vector<double> numbers;                      // records, `width` numbers each
  absl::flat_hash_map<uint32_t, uint32_t> records;  // category hash -> record index
};

// One entry of features_info.ctrs.
struct CtrFeature {
  int64_t cat = -1;     // its categorical feature (cat_feature_index) when it has one
  std::string refused;  // why its splits are refused (combinations, other types); empty if not
  CatboostCtr ctr;
  const CtrTable* table = nullptr;
  std::vector<float> values;  // by code of its feature (the last: no table holds the category)
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
  // features_info.ctrs and the tables of ctr_data they use; adds each table's categories to its
  // feature's (cat_values_), so it runs before AssignCategories.
  absl::Status ReadCtrs(object features_info, object top);
  absl::Status ReadCtrTable(element table, const std::string& at, CatboostCtrType type,
                            CtrTable* out);
  absl::Status AssignCategories();
  absl::Status ReadCtrSplit(object split, const std::string& at, Node* node);
  // `words` zero words appended to Forest::category_bits (bounded by kMaxOneHotWords): the first.
  absl::StatusOr<uint32_t> AddCategorySet(const std::string& at, uint32_t words);

  Forest& f_;
  size_t input_bytes_;
  double scale_ = 1.0;
  bool outputs_known_ = false;
  std::vector<FloatFeature> float_features_;  // by float_feature_index
  std::vector<std::string> cat_names_;        // by cat_feature_index: "name" or "index N"
  std::vector<int32_t> cat_flat_;
  // By cat_feature_index: the hashes one-hot splits test (`values`), then the categories its CTR
  // tables hold, and each one's code (the first position of the hash).
  std::vector<std::vector<uint32_t>> cat_values_;
  std::vector<absl::flat_hash_map<uint32_t, uint32_t>> cat_codes_;
  // The bitset of each (cat_feature_index, code) already in Forest::category_bits: its first word.
  absl::flat_hash_map<std::pair<int64_t, uint32_t>, uint32_t> onehot_sets_;
  std::vector<double> weights_;
  // Split numbering (split_index): float borders, then one-hot values, then CTR borders.
  int64_t float_borders_ = 0;
  int64_t onehot_values_ = 0;
  std::vector<CtrFeature> ctrs_;
  std::vector<std::pair<int32_t, float>> ctr_borders_;  // (ctrs_ index, border) per CTR border
  // By identifier; CtrFeature::table points into it (a node map: stable addresses).
  absl::node_hash_map<std::string, CtrTable> ctr_tables_;
  // The set of each CTR border already in Forest::category_bits: its first word.
  absl::flat_hash_map<int64_t, uint32_t> ctr_sets_;
  size_t ctr_values_ = 0;  // CtrFeature::values computed, all CTRs together
};

// Words of one-hot category bitsets a model may need: a set {code} takes code / 32 + 1 words, one
// per distinct (feature, code), so a crafted file with many values could otherwise ask for far more
// memory than its size.
constexpr size_t kMaxOneHotWords = size_t{1} << 24;
// Table numbers read to compute CTR values (a record per category of the CTR's feature, for each
// CTR that a split uses), bounded for the same reason and so that loading stays linear in them.
constexpr size_t kMaxCtrValues = size_t{1} << 25;
// Largest count (and number) a CTR table holds: CatBoost counts in 32 bits.
constexpr double kMaxCtrCount = 4294967295.0;

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
        if (element borders; feature["borders"].get(borders) == simdjson::SUCCESS) {
          array list_of_borders;
          if (borders.get_array().get(list_of_borders) != simdjson::SUCCESS) {
            return Fail(at + ".borders", "not an array");
          }
          float_borders_ += static_cast<int64_t>(list_of_borders.size());
        }
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
          onehot_values_ += static_cast<int64_t>(values.size());
        }
      }
    }
  }
  if (num_features == 0) return Fail("features_info", "the model has no features");
  f_.num_features = static_cast<int>(num_features);
  if (!names.empty()) {
    f_.feature_names.assign(static_cast<size_t>(num_features), std::string());
    for (auto& [index, name] : names) f_.feature_names[index] = std::move(name);
  }
  return absl::OkStatus();
}

absl::Status CatboostReader::AssignCategories() {
  const size_t num_features = static_cast<size_t>(f_.num_features);
  for (size_t c = 0; c < cat_values_.size(); ++c) {
    if (cat_values_[c].empty()) continue;
    f_.categories.resize(num_features);
    FeatureCategories& categories = f_.categories[static_cast<size_t>(cat_flat_[c])];
    if (!categories.empty()) {
      return Fail(absl::StrCat("features_info.categorical_features[", c, "]"),
                  absl::StrCat("flat_feature_index ", cat_flat_[c],
                               " is already another categorical feature's"));
    }
    categories.hashes = cat_values_[c];
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
  const auto key = std::make_pair(cat, code->second);
  auto set = onehot_sets_.find(key);
  if (set == onehot_sets_.end()) {
    absl::StatusOr<uint32_t> first = AddCategorySet(at, words);
    if (!first.ok()) return first.status();
    f_.category_bits[*first + code->second / 32] = 1u << (code->second % 32);
    set = onehot_sets_.emplace(key, *first).first;
  }
  node->feature = cat_flat_[static_cast<size_t>(cat)];
  node->payload = set->second;
  node->aux = words;
  // Equal goes right (true); NaN, a code given as a number, goes the "not equal" way.
  node->flags = kNodeCategorical | kNodeDefaultLeft;
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> CatboostReader::AddCategorySet(const std::string& at, uint32_t words) {
  if (f_.category_bits.size() + words > kMaxOneHotWords) {
    return Fail(at, absl::StrCat("the categorical splits' category sets need more than ",
                                 kMaxOneHotWords, " words"));
  }
  const uint32_t first = static_cast<uint32_t>(f_.category_bits.size());
  f_.category_bits.resize(f_.category_bits.size() + words, 0u);
  return first;
}

absl::Status CatboostReader::ReadCtrTable(element table, const std::string& at,
                                          CatboostCtrType type, CtrTable* out) {
  object t;
  if (table.get_object().get(t) != simdjson::SUCCESS) return Fail(at, "not an object");
  int64_t stride = 0;
  if (t["hash_stride"].get_int64().get(stride) != simdjson::SUCCESS) {
    return Fail(at, "no integer \"hash_stride\"");
  }
  out->width = CatboostCtrRecordWidth(type, stride);
  if (out->width == 0) {
    return Fail(at, absl::StrCat("hash_stride ", stride, " does not fit a ",
                                 CatboostCtrTypeName(type), " CTR"));
  }
  if (element d; t["counter_denominator"].get(d) == simdjson::SUCCESS) {
    if (d.get_double().get(out->counter_denominator) != simdjson::SUCCESS ||
        !(out->counter_denominator >= 0) || out->counter_denominator > kMaxCtrCount) {
      return Fail(at, "counter_denominator is not a number in [0, 2^32)");
    }
  }
  array map;
  if (t["hash_map"].get_array().get(map) != simdjson::SUCCESS) {
    return Fail(at, "no \"hash_map\" array");
  }
  const size_t width = static_cast<size_t>(stride);
  if (map.size() % width != 0) {
    return Fail(at + ".hash_map", absl::StrCat(map.size(), " entries, not records of ", stride));
  }
  if (map.size() / width > kMaxCategoriesPerFeature) {
    return Fail(at + ".hash_map", absl::StrCat("more than ", kMaxCategoriesPerFeature, " records"));
  }
  // BinarizedTargetMeanValue's first number, a sum of binarized targets, is a fraction; every other
  // number is a count.
  const bool first_is_count = type != CatboostCtrType::kBinarizedTargetMeanValue;
  size_t i = 0;
  bool keep = false;
  for (element e : map) {
    const size_t field = i % width;
    const std::string here = absl::StrCat(at, ".hash_map[", i, "]");
    if (field == 0) {
      uint64_t key = 0;
      std::string_view text;
      if (e.get_string().get(text) == simdjson::SUCCESS ? !absl::SimpleAtoi(Av(text), &key)
                                                         : e.get_uint64().get(key) !=
                                                               simdjson::SUCCESS) {
        return Fail(here, "key is not a 64-bit unsigned integer");
      }
      // A key no category has (an empty slot of CatBoost's table) is skipped.
      const std::optional<uint32_t> hash = CatboostCategoryOfCtrKey(key);
      keep = hash.has_value();
      if (keep) {
        if (!out->records.try_emplace(*hash, static_cast<uint32_t>(out->hashes.size())).second) {
          return Fail(here, "a key listed twice");
        }
        out->hashes.push_back(*hash);
      }
    } else {
      double v = 0;
      const bool count = field > 1 || first_is_count;
      if (e.get_double().get(v) != simdjson::SUCCESS || !(v >= 0) || v > kMaxCtrCount ||
          (count && v != std::floor(v))) {
        return Fail(here, count ? "not a count (an integer in [0, 2^32))"
                                : "not a number in [0, 2^32)");
      }
      if (keep) out->numbers.push_back(v);
    }
    ++i;
  }
  return absl::OkStatus();
}

absl::Status CatboostReader::ReadCtrs(object features_info, object top) {
  element list_element;
  if (features_info["ctrs"].get(list_element) != simdjson::SUCCESS) return absl::OkStatus();
  array list;
  if (list_element.get_array().get(list) != simdjson::SUCCESS) {
    return Fail("features_info.ctrs", "not an array");
  }
  object data;
  const bool has_data = top["ctr_data"].get_object().get(data) == simdjson::SUCCESS;
  size_t i = 0;
  for (element e : list) {
    const std::string at = absl::StrCat("features_info.ctrs[", i, "]");
    object c;
    if (e.get_object().get(c) != simdjson::SUCCESS) return Fail(at, "not an object");
    CtrFeature& ctr = ctrs_.emplace_back();
    array borders;
    if (c["borders"].get_array().get(borders) != simdjson::SUCCESS) {
      return Fail(at, "no \"borders\" array");
    }
    for (element b : borders) {
      double border = 0;
      if (b.get_double().get(border) != simdjson::SUCCESS ||
          !std::isfinite(static_cast<float>(border))) {
        return Fail(at + ".borders", "a border that is not a finite float");
      }
      ctr_borders_.emplace_back(static_cast<int32_t>(i), static_cast<float>(border));
    }
    // Finite as floats: CatBoost computes CTR values in float.
    auto number = [&](const char* name, double fallback, float* out) -> absl::Status {
      double v = fallback;
      if (element n;
          c[name].get(n) == simdjson::SUCCESS && n.get_double().get(v) != simdjson::SUCCESS) {
        return Fail(at, absl::StrCat(name, " is not a number"));
      }
      *out = static_cast<float>(v);
      if (!std::isfinite(*out)) return Fail(at, absl::StrCat(name, " is not a finite float"));
      return absl::OkStatus();
    };
    // CatBoost writes "prior_denomerator".
    const char* denominator = c["prior_denomerator"].error() == simdjson::SUCCESS
                                  ? "prior_denomerator"
                                  : "prior_denominator";
    for (const absl::Status& s :
         {number("prior_numerator", 0, &ctr.ctr.prior_numerator),
          number(denominator, 1, &ctr.ctr.prior_denominator), number("shift", 0, &ctr.ctr.shift),
          number("scale", 1, &ctr.ctr.scale)}) {
      if (!s.ok()) return s;
    }
    if (!(ctr.ctr.prior_denominator > 0)) return Fail(at, "the prior's denominator is not above 0");
    int64_t target = 0;
    if (element n; c["target_border_idx"].get(n) == simdjson::SUCCESS &&
                   n.get_int64().get(target) != simdjson::SUCCESS) {
      return Fail(at, "target_border_idx is not an integer");
    }
    if (target < 0 || target > (int64_t{1} << 20)) {
      return Fail(at, absl::StrCat("target_border_idx ", target, " outside [0, 2^20]"));
    }
    ctr.ctr.target_border_idx = static_cast<int32_t>(target);
    // What it is computed from: one categorical feature, or a combination (refused at its splits).
    array elements;
    if (c["elements"].get_array().get(elements) != simdjson::SUCCESS || elements.size() == 0) {
      return Fail(at, "no non-empty \"elements\" array");
    }
    std::vector<std::string> parts;
    for (element el : elements) {
      object o;
      std::string_view kind;
      if (el.get_object().get(o) != simdjson::SUCCESS ||
          o["combination_element"].get_string().get(kind) != simdjson::SUCCESS) {
        return Fail(at + ".elements", "an element without a \"combination_element\" string");
      }
      if (kind != "cat_feature_value") {
        parts.push_back(absl::StrCat("a ", Av(kind), " element"));
        continue;
      }
      int64_t cat = -1;
      if (o["cat_feature_index"].get_int64().get(cat) != simdjson::SUCCESS || cat < 0 ||
          static_cast<size_t>(cat) >= cat_values_.size()) {
        return Fail(at + ".elements", "a cat_feature_index that is no categorical feature's");
      }
      parts.push_back(CategoricalName(cat));
      if (elements.size() == 1) ctr.cat = cat;
    }
    std::string_view type_name;
    if (c["ctr_type"].get_string().get(type_name) != simdjson::SUCCESS) {
      return Fail(at, "no \"ctr_type\" string");
    }
    const std::optional<CatboostCtrType> type = ParseCatboostCtrType(Av(type_name));
    ++i;
    if (ctr.cat < 0) {
      ctr.refused = absl::StrCat(
          "a CTR over a combination (", absl::StrJoin(parts, ", "),
          "): its value is no function of one feature's category, so Grove cannot evaluate it "
          "as a split of one feature; train with max_ctr_complexity=1 (CTRs of single "
          "categorical features, which Grove evaluates exactly)");
      continue;
    }
    if (!type.has_value()) {
      ctr.refused = absl::StrCat("a CTR of type \"", Av(type_name), "\" on ", parts[0],
                                 ": Grove computes the CTR types ", CatboostCtrTypeNames(),
                                 " exactly; train with simple_ctr among them");
      continue;
    }
    ctr.ctr.type = *type;
    std::string_view identifier;
    if (c["identifier"].get_string().get(identifier) != simdjson::SUCCESS) {
      return Fail(at, "no \"identifier\" string (the key of its table in ctr_data)");
    }
    auto found = ctr_tables_.find(Av(identifier));
    if (found == ctr_tables_.end()) {
      element table;
      if (!has_data || data[identifier].get(table) != simdjson::SUCCESS) {
        return Fail(at, "its table (ctr_data[identifier]) is missing");
      }
      CtrTable parsed;
      if (absl::Status s = ReadCtrTable(table, absl::StrCat("ctr_data of ", at), *type, &parsed);
          !s.ok()) {
        return s;
      }
      found = ctr_tables_.emplace(std::string(identifier), std::move(parsed)).first;
      // Its categories join the feature's, after those already there.
      std::vector<uint32_t>& values = cat_values_[static_cast<size_t>(ctr.cat)];
      absl::flat_hash_map<uint32_t, uint32_t>& codes = cat_codes_[static_cast<size_t>(ctr.cat)];
      for (uint32_t hash : found->second.hashes) {
        if (codes.try_emplace(hash, static_cast<uint32_t>(values.size())).second) {
          values.push_back(hash);
        }
      }
      if (values.size() > kMaxCategoriesPerFeature) {
        return Fail(at, absl::StrCat(CategoricalName(ctr.cat), " has more than ",
                                     kMaxCategoriesPerFeature, " categories"));
      }
    }
    ctr.table = &found->second;
    // A table read for another type (a crafted file can share an identifier) must fit this one.
    const int width = ctr.table->width;
    if (CatboostCtrRecordWidth(ctr.ctr.type, width + 1) != width) {
      return Fail(at, "its table's records do not fit its type");
    }
    const bool target_fits = ctr.ctr.type == CatboostCtrType::kBorders   ? target < width - 1
                             : ctr.ctr.type == CatboostCtrType::kBuckets ? target < width
                                                                         : true;
    if (!target_fits) {
      return Fail(at, absl::StrCat("target_border_idx ", target, " outside the table's ", width,
                                   " classes"));
    }
  }
  return absl::OkStatus();
}

absl::Status CatboostReader::ReadCtrSplit(object s, const std::string& at, Node* node) {
  int64_t index = -1;
  if (s["split_index"].get_int64().get(index) != simdjson::SUCCESS) {
    return Fail(at, "CTR split without an integer \"split_index\"");
  }
  const int64_t k = index - float_borders_ - onehot_values_;
  if (k < 0 || k >= static_cast<int64_t>(ctr_borders_.size())) {
    return Fail(at, absl::StrCat("split_index ", index, " is no CTR border (splits are numbered "
                                 "over ", float_borders_, " float borders, ", onehot_values_,
                                 " one-hot values, then ", ctr_borders_.size(), " CTR borders)"));
  }
  const auto [c, border] = ctr_borders_[static_cast<size_t>(k)];
  CtrFeature& ctr = ctrs_[static_cast<size_t>(c)];
  if (!ctr.refused.empty()) return Unimplemented(at, absl::StrCat("split on ", ctr.refused));
  double b = 0;
  if (s["border"].get_double().get(b) == simdjson::SUCCESS && static_cast<float>(b) != border) {
    return Fail(at, absl::StrCat("border ", b, " is not features_info.ctrs[", c,
                                 "]'s border of split_index ", index, " (", border, ")"));
  }
  int64_t target = 0;
  if (s["ctr_target_border_idx"].get_int64().get(target) == simdjson::SUCCESS &&
      target != ctr.ctr.target_border_idx) {
    return Fail(at, absl::StrCat("ctr_target_border_idx ", target, " is not features_info.ctrs[",
                                 c, "]'s (", ctr.ctr.target_border_idx, ")"));
  }
  const size_t cat = static_cast<size_t>(ctr.cat);
  const std::vector<uint32_t>& hashes = cat_values_[cat];
  const size_t codes = hashes.size() + 1;  // the last: every category no table holds
  const uint32_t words = static_cast<uint32_t>((codes + 31) / 32);
  auto set = ctr_sets_.find(k);
  if (set == ctr_sets_.end()) {
    absl::StatusOr<uint32_t> first = AddCategorySet(at, words);
    if (!first.ok()) return first.status();
    if (ctr.values.empty()) {
      const CtrTable& table = *ctr.table;
      // Charged by the numbers read, not the values made: a file could otherwise make many CTRs
      // of one wide table, each reading all of it.
      const size_t cost = codes * std::max<size_t>(1, static_cast<size_t>(table.width));
      if (ctr_values_ + cost > kMaxCtrValues) {
        return Fail(at, absl::StrCat("the CTR splits read more than ", kMaxCtrValues,
                                     " numbers of their tables to compute CTR values"));
      }
      ctr_values_ += cost;
      ctr.values.resize(codes);
      for (size_t code = 0; code < codes; ++code) {
        absl::Span<const double> record;
        if (code < hashes.size()) {
          if (auto r = table.records.find(hashes[code]); r != table.records.end()) {
            record = absl::MakeConstSpan(table.numbers)
                         .subspan(size_t{r->second} * static_cast<size_t>(table.width),
                                  static_cast<size_t>(table.width));
          }
        }
        ctr.values[code] = CatboostCtrValue(ctr.ctr, record, table.counter_denominator);
      }
    }
    for (size_t code = 0; code < codes; ++code) {
      if (ctr.values[code] > border) f_.category_bits[*first + code / 32] |= 1u << (code % 32);
    }
    set = ctr_sets_.emplace(k, *first).first;
  }
  node->feature = cat_flat_[cat];
  node->payload = set->second;
  node->aux = words;
  // Value > border (in the set) goes right, as a float split's true; NaN goes left.
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
  if (type == "OnlineCtr") return ReadCtrSplit(s, at, node);
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
  // A tree of depth 0 (one leaf) has "splits": null.
  element splits_element;
  array splits;
  if (tree["splits"].get(splits_element) != simdjson::SUCCESS ||
      (!splits_element.is_null() && splits_element.get_array().get(splits) != simdjson::SUCCESS)) {
    return Fail(at, "no \"splits\" array");
  }
  const size_t depth = splits_element.is_null() ? 0 : splits.size();
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
  if (depth > 0) {
    for (element split : splits) {
      const std::string where = absl::StrCat(at, ".splits[", j, "]");
      if (absl::Status s = ReadSplit(split, where, &level_nodes[j]); !s.ok()) return s;
      ++j;
    }
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
  if (absl::Status s = ReadCtrs(features_info, top); !s.ok()) return s;
  if (absl::Status s = AssignCategories(); !s.ok()) return s;
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
