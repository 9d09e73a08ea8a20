// LightGBM text model (model.txt, format versions v3 and v4) -> Forest.
//
// The text is scanned once as string_views (no copies, no streams); numbers go through
// std::from_chars, which is exact for the 17-digit doubles LightGBM writes. Nothing is sized from a
// count written in the file before the data backing it has been seen, so a lying header cannot make
// the loader allocate or read beyond the input. Structure (cycles, unreachable nodes, depth) is left
// to BuildForest.
//
// Mapping (see core/model/forest.h): LightGBM internal node i -> node i, leaf j -> node
// (num_leaves - 1) + j, root 0; leaf_id = j; cover = internal_count / leaf_count; tree t has group
// t % num_tree_per_iteration and iteration t / num_tree_per_iteration; base margin 0 (LightGBM folds
// the initial score into the first trees).

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/model/forest.h"
#include "simdjson.h"
#include "core/model/lightgbm_threshold.h"
#include "core/model/loader.h"

namespace grove {
namespace {

using lightgbm_internal::LightgbmNumericThreshold;

// Largest tree accepted: keeps 2 * num_leaves - 1 node indices inside int32.
constexpr int64_t kMaxLeaves = int64_t{1} << 30;
constexpr int64_t kMaxIndex = std::numeric_limits<uint32_t>::max();

// decision_type bits.
constexpr int64_t kCategoricalMask = 1;
constexpr int64_t kDefaultLeftMask = 2;
constexpr int kMissingNone = 0, kMissingZero = 1, kMissingNan = 2;

bool StartsWith(absl::string_view s, absl::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

absl::string_view Trim(absl::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls fn(token) for every token separated by runs of spaces/tabs; false as soon as fn is.
template <typename Fn>
bool ForEachToken(absl::string_view s, Fn&& fn) {
  const char* p = s.data();
  const char* const end = p + s.size();
  for (;;) {
    while (p < end && (*p == ' ' || *p == '\t')) ++p;
    if (p == end) return true;
    const char* begin = p;
    while (p < end && *p != ' ' && *p != '\t') ++p;
    if (!fn(absl::string_view(begin, static_cast<size_t>(p - begin)))) return false;
  }
}

bool ParseNumber(absl::string_view tok, double* out) {
  const char* b = tok.data();
  const char* e = b + tok.size();
  if (b != e && *b == '+') ++b;  // from_chars refuses a leading '+'
  if (b == e || *b == '+') return false;
  auto [p, ec] = std::from_chars(b, e, *out);
  return ec == std::errc() && p == e;
}

bool ParseNumber(absl::string_view tok, int64_t* out) {
  const char* b = tok.data();
  const char* e = b + tok.size();
  if (b != e && *b == '+') ++b;
  if (b == e || *b == '+') return false;
  auto [p, ec] = std::from_chars(b, e, *out);
  return ec == std::errc() && p == e;
}

// Where a value came from: its text and the offset of its line, for messages.
struct Field {
  absl::string_view value;
  size_t offset = 0;
  bool present = false;
};

// Tree block keys the loader reads (others -- split_gain, leaf_weight, internal_value,
// internal_weight, shrinkage, ... -- are skipped without being parsed).
enum TreeKey {
  kNumLeaves, kNumCat, kSplitFeature, kThreshold, kDecisionType, kLeftChild, kRightChild,
  kLeafValue, kLeafCount, kInternalCount, kCatBoundaries, kCatThreshold, kIsLinear, kLeafConst,
  kNumFeatures, kLeafFeatures, kLeafCoeff, kNumTreeKeys
};
constexpr absl::string_view kTreeKeyNames[kNumTreeKeys] = {
    "num_leaves", "num_cat", "split_feature", "threshold", "decision_type", "left_child",
    "right_child", "leaf_value", "leaf_count", "internal_count", "cat_boundaries",
    "cat_threshold", "is_linear", "leaf_const", "num_features", "leaf_features", "leaf_coeff"};

int TreeKeyOf(absl::string_view key) {
  for (int k = 0; k < kNumTreeKeys; ++k) {
    if (kTreeKeyNames[k] == key) return k;
  }
  return -1;
}

// The categories of a model trained on a pandas DataFrame: after the trees, LightGBM's Python
// package writes the parameters (among them "[categorical_feature: 0,2]", the categorical
// columns) and "pandas_categorical:" with each of those columns' categories in column order, as
// JSON (null for a model trained without a DataFrame). Into `forest->categories` when both are
// there and agree; nothing otherwise (categorical columns given by name cannot be placed). An
// entry that is not a list of strings or numbers is INVALID_ARGUMENT naming `source`.
absl::Status ReadPandasCategorical(absl::string_view tail, const std::string& source,
                                   Forest* forest) {
  auto line_after = [&](absl::string_view key) -> absl::string_view {
    const size_t at = tail.rfind(key);
    if (at == absl::string_view::npos || (at > 0 && tail[at - 1] != '\n')) return {};
    absl::string_view rest = tail.substr(at + key.size());
    return rest.substr(0, rest.find('\n'));
  };
  absl::string_view columns_text = line_after("[categorical_feature: ");
  absl::string_view lists_text = line_after("pandas_categorical:");
  while (!lists_text.empty() && (lists_text.back() == '\r' || lists_text.back() == ' ')) {
    lists_text.remove_suffix(1);
  }
  if (columns_text.empty() || lists_text.empty() || lists_text == "null") return absl::OkStatus();
  if (columns_text.back() == ']') columns_text.remove_suffix(1);
  std::vector<int> columns;
  for (absl::string_view rest = columns_text; !rest.empty();) {
    const size_t comma = rest.find(',');
    const absl::string_view token = rest.substr(0, comma);
    int column = -1;
    const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), column);
    if (ec != std::errc() || end != token.data() + token.size() || column < 0 ||
        column >= forest->num_features) {
      return absl::OkStatus();  // named or unknown columns: the lists cannot be placed
    }
    columns.push_back(column);
    rest = comma == absl::string_view::npos ? absl::string_view() : rest.substr(comma + 1);
  }
  auto invalid = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": pandas_categorical: ", what));
  };
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(lists_text.data(), lists_text.size()).get(root) != simdjson::SUCCESS ||
      !root.is_array()) {
    return invalid("not a JSON list of lists");
  }
  simdjson::dom::array lists = root.get_array();
  if (lists.size() != columns.size()) return absl::OkStatus();
  std::vector<FeatureCategories> categories(static_cast<size_t>(forest->num_features));
  size_t index = 0;
  for (simdjson::dom::element list : lists) {
    if (!list.is_array()) return invalid(absl::StrCat("entry ", index, " is not a list"));
    FeatureCategories& c = categories[static_cast<size_t>(columns[index])];
    for (simdjson::dom::element v : list.get_array()) {
      if (c.size() >= kMaxCategoriesPerFeature) {
        return invalid(absl::StrCat("entry ", index, " holds more than ",
                                    kMaxCategoriesPerFeature, " categories"));
      }
      if (v.is_string() && c.numbers.empty()) {
        const std::string_view text = v.get_string().value_unsafe();
        c.strings.emplace_back(text);
      } else if (v.is_number() && c.strings.empty()) {
        c.numbers.push_back(v.get_double().value_unsafe());
      } else {
        return invalid(absl::StrCat("entry ", index,
                                    " is not a list of strings or of numbers"));
      }
    }
    ++index;
  }
  forest->categories = std::move(categories);
  return absl::OkStatus();
}

class Parser {
 public:
  Parser(absl::string_view text, std::string source) : text_(text) {
    forest_.format = ModelFormat::kLightgbmText;
    forest_.source = std::move(source);
  }

  absl::StatusOr<ForestPtr> Run();

 private:
  struct Line {
    absl::string_view text;
    size_t offset = 0;
  };

  // Next line without its '\n' (and '\r'); false at the end of the text.
  bool NextLine(Line* line) {
    if (has_pending_) {
      *line = pending_;
      has_pending_ = false;
      return true;
    }
    if (pos_ >= text_.size()) return false;
    const char* begin = text_.data() + pos_;
    const void* nl = std::memchr(begin, '\n', text_.size() - pos_);
    size_t len = nl ? static_cast<size_t>(static_cast<const char*>(nl) - begin)
                    : text_.size() - pos_;
    line->offset = pos_;
    pos_ += len + (nl ? 1 : 0);
    if (len > 0 && begin[len - 1] == '\r') --len;
    line->text = absl::string_view(begin, len);
    return true;
  }
  void Unread(const Line& line) {
    pending_ = line;
    has_pending_ = true;
  }

  // INVALID_ARGUMENT "<source>: tree T <where>: <what> (line L)"; kNoLine leaves the line out.
  static constexpr size_t kNoLine = static_cast<size_t>(-1);
  absl::Status Error(size_t offset, int tree, absl::string_view where, absl::string_view what) const {
    std::string msg = forest_.source.empty() ? std::string("<memory>") : forest_.source;
    if (tree >= 0) absl::StrAppend(&msg, ": tree ", tree);
    if (!where.empty()) absl::StrAppend(&msg, tree >= 0 ? " " : ": ", where);
    absl::StrAppend(&msg, ": ", what);
    if (offset != kNoLine) {
      // Counted only on this error path, so that scanning never tracks line numbers.
      const size_t clamped = std::min(offset, text_.size());
      absl::StrAppend(&msg, " (line ", 1 + std::count(text_.begin(), text_.begin() + clamped, '\n'),
                      ")");
    }
    return absl::InvalidArgumentError(msg);
  }

  // Parses every token of `field` into `out`, requiring exactly `expected` of them (-1: any).
  template <typename T>
  absl::Status ParseArray(const Field& field, absl::string_view name, int tree, int64_t expected,
                          std::vector<T>* out) const {
    out->clear();
    if (expected >= 0) {
      out->reserve(static_cast<size_t>(
          std::min<int64_t>(expected, static_cast<int64_t>(field.value.size() / 2 + 1))));
    }
    absl::string_view bad;
    const bool ok = ForEachToken(field.value, [&](absl::string_view tok) {
      T v;
      if (!ParseNumber(tok, &v)) {
        bad = tok;
        return false;
      }
      out->push_back(v);
      return true;
    });
    if (!ok) {
      std::string shown(bad.substr(0, 40));
      return Error(field.offset, tree, "",
                   absl::StrCat(name, " value ", out->size(), " '", shown, "' is not a",
                                std::is_same_v<T, double> ? " number" : "n integer"));
    }
    if (expected >= 0 && static_cast<int64_t>(out->size()) != expected) {
      return Error(field.offset, tree, "",
                   absl::StrCat(name, " has ", out->size(), " values, expected ", expected));
    }
    return absl::OkStatus();
  }

  absl::Status ParseInt(const Field& field, absl::string_view name, int tree, int64_t lo,
                        int64_t hi, int64_t* out) const {
    if (!ParseNumber(Trim(field.value), out) || *out < lo || *out > hi) {
      return Error(field.offset, tree, "",
                   absl::StrCat(name, " '", field.value.substr(0, 40), "' is not an integer in [",
                                lo, ", ", hi, "]"));
    }
    return absl::OkStatus();
  }

  absl::Status ParseHeader(Line* first_tree_line);
  absl::Status ParseObjective(const Field& field, int64_t num_class);
  absl::Status ParseTree(int t, const Line& tree_line);
  absl::Status BuildTree(int t, const Field (&f)[kNumTreeKeys], size_t tree_offset);

  absl::string_view text_;
  size_t pos_ = 0;
  Line pending_;
  bool has_pending_ = false;
  Forest forest_;
  int64_t num_outputs_ = 1;
  int64_t expected_trees_ = -1;  // from tree_sizes, when present
  size_t tree_sizes_offset_ = 0;

  // (feature, double threshold) of every numeric split, for Forest::double_thresholds.
  std::vector<std::pair<int32_t, double>> numeric_thresholds_;

  // Scratch arrays reused by every tree.
  std::vector<double> leaf_value_, threshold_, leaf_const_, leaf_coeff_;
  std::vector<int64_t> split_feature_, decision_type_, left_, right_, leaf_count_,
      internal_count_, cat_boundaries_, cat_threshold_, num_linear_, leaf_features_;
};

absl::Status Parser::ParseHeader(Line* first_tree_line) {
  Field version, num_class, num_tree_per_iteration, max_feature_idx, objective, feature_names,
      tree_sizes, average_output;
  struct Known {
    absl::string_view name;
    Field* field;
  };
  const Known known[] = {{"version", &version},
                         {"num_class", &num_class},
                         {"num_tree_per_iteration", &num_tree_per_iteration},
                         {"max_feature_idx", &max_feature_idx},
                         {"objective", &objective},
                         {"feature_names", &feature_names},
                         {"tree_sizes", &tree_sizes},
                         {"average_output", &average_output}};
  Line line;
  bool found_tree = false;
  while (NextLine(&line)) {
    if (line.text.empty()) continue;
    if (StartsWith(line.text, "Tree=") || line.text == "end of trees") {
      found_tree = true;
      break;
    }
    // "key=value", or a bare flag such as "tree" or "average_output".
    const size_t eq = line.text.find('=');
    const absl::string_view key = eq == absl::string_view::npos ? line.text : line.text.substr(0, eq);
    const absl::string_view value =
        eq == absl::string_view::npos ? absl::string_view() : line.text.substr(eq + 1);
    for (const Known& k : known) {
      if (k.name == key) {
        if (k.field->present) {
          return Error(line.offset, -1, "header", absl::StrCat("duplicate key '", key, "'"));
        }
        *k.field = Field{value, line.offset, true};
      }
    }
  }
  if (!found_tree) {
    return Error(text_.size(), -1, "",
                 text_.empty() ? "empty model text"
                               : "no 'Tree=' block: not a LightGBM text model, or truncated");
  }
  *first_tree_line = line;

  if (!num_class.present) return Error(kNoLine, -1, "header", "missing num_class");
  if (!max_feature_idx.present) return Error(kNoLine, -1, "header", "missing max_feature_idx");
  int64_t n_class = 0, k = 0, max_feature = 0;
  if (absl::Status s = ParseInt(num_class, "num_class", -1, 1, 1 << 20, &n_class); !s.ok()) {
    return s;
  }
  k = n_class;
  if (num_tree_per_iteration.present) {
    if (absl::Status s = ParseInt(num_tree_per_iteration, "num_tree_per_iteration", -1, 1,
                                  1 << 20, &k);
        !s.ok()) {
      return s;
    }
    if (k != n_class) {
      return Error(num_tree_per_iteration.offset, -1, "header",
                   absl::StrCat("num_tree_per_iteration ", k, " differs from num_class ", n_class));
    }
  }
  num_outputs_ = k;
  if (absl::Status s = ParseInt(max_feature_idx, "max_feature_idx", -1, 0,
                                std::numeric_limits<int32_t>::max() - 1, &max_feature);
      !s.ok()) {
    return s;
  }
  forest_.num_features = static_cast<int>(max_feature + 1);
  // LightGBM requires the names; their count also bounds num_features by the size of the text.
  if (!feature_names.present) return Error(kNoLine, -1, "header", "missing feature_names");
  int64_t name_count = 0;
  ForEachToken(feature_names.value, [&](absl::string_view) { return ++name_count, true; });
  if (name_count != forest_.num_features) {
    return Error(feature_names.offset, -1, "header",
                 absl::StrCat("feature_names has ", name_count, " names for max_feature_idx ",
                              max_feature, " (", forest_.num_features, " features)"));
  }
  forest_.feature_names.reserve(static_cast<size_t>(name_count));
  ForEachToken(feature_names.value, [&](absl::string_view name) {
    forest_.feature_names.emplace_back(name);
    return true;
  });
  if (version.present) forest_.library_version = std::string(Trim(version.value));
  forest_.objective.average_output = average_output.present;
  if (objective.present) {
    if (absl::Status s = ParseObjective(objective, n_class); !s.ok()) return s;
  }
  if (tree_sizes.present) {
    int64_t n = 0;
    ForEachToken(tree_sizes.value, [&](absl::string_view) { return ++n, true; });
    expected_trees_ = n;
    tree_sizes_offset_ = tree_sizes.offset;
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseObjective(const Field& field, int64_t num_class) {
  const absl::string_view value = Trim(field.value);
  forest_.objective.name = std::string(value);
  absl::string_view name;
  bool sqrt = false;
  double alpha = 1.0;
  int64_t objective_classes = -1;
  absl::Status status;
  ForEachToken(value, [&](absl::string_view tok) {
    if (name.empty()) {
      name = tok;
    } else if (tok == "sqrt" || tok == "reg_sqrt") {
      sqrt = true;
    } else if (StartsWith(tok, "sigmoid:")) {
      if (!ParseNumber(tok.substr(8), &alpha) || !std::isfinite(alpha) || alpha <= 0) {
        status = Error(field.offset, -1, "objective",
                       absl::StrCat("sigmoid parameter '", tok.substr(8, 40),
                                    "' is not a positive number"));
        return false;
      }
    } else if (StartsWith(tok, "num_class:")) {
      if (!ParseNumber(tok.substr(10), &objective_classes)) {
        status = Error(field.offset, -1, "objective",
                       absl::StrCat("num_class '", tok.substr(10, 40), "' is not an integer"));
        return false;
      }
    }
    // Other parameters (none affect the prediction) are ignored.
    return true;
  });
  if (!status.ok()) return status;
  if (objective_classes >= 0 && objective_classes != num_class) {
    return Error(field.offset, -1, "objective",
                 absl::StrCat("num_class:", objective_classes, " differs from the header's ",
                              num_class));
  }
  Objective& o = forest_.objective;
  o.sigmoid_alpha = 1.0;
  if (name.empty() || name == "custom" || name == "none" || name == "null" || name == "na") {
    o.link = Link::kIdentity;
  } else if (name == "regression" || name == "regression_l2" || name == "l2" ||
             name == "mean_squared_error" || name == "mse" || name == "l2_root" ||
             name == "root_mean_squared_error" || name == "rmse" || name == "regression_l1" ||
             name == "l1" || name == "mean_absolute_error" || name == "mae" || name == "huber" ||
             name == "fair" || name == "quantile" || name == "mape" ||
             name == "mean_absolute_percentage_error") {
    o.link = sqrt ? Link::kSignedSquare : Link::kIdentity;
  } else if (name == "lambdarank" || name == "rank_xendcg" || name == "xendcg" ||
             name == "xe_ndcg" || name == "xe_ndcg_mart" || name == "xendcg_mart") {
    o.link = Link::kIdentity;
  } else if (name == "binary") {
    o.link = Link::kSigmoid;
    o.sigmoid_alpha = alpha;
  } else if (name == "multiclass" || name == "softmax") {
    o.link = Link::kSoftmax;
  } else if (name == "multiclassova" || name == "multiclass_ova" || name == "ova" ||
             name == "ovr") {
    o.link = Link::kSigmoid;
    o.sigmoid_alpha = alpha;
  } else if (name == "cross_entropy" || name == "xentropy") {
    o.link = Link::kSigmoid;  // LightGBM's cross-entropy has no sigmoid parameter
  } else if (name == "cross_entropy_lambda" || name == "xentlambda") {
    o.link = Link::kLog1pExp;
  } else if (name == "poisson" || name == "gamma" || name == "tweedie") {
    o.link = Link::kExp;
  } else {
    return Error(field.offset, -1, "objective",
                 absl::StrCat("unknown LightGBM objective '", name.substr(0, 60), "'"));
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseTree(int t, const Line& tree_line) {
  Field f[kNumTreeKeys];
  Line line;
  while (NextLine(&line)) {
    if (line.text.empty()) break;
    if (StartsWith(line.text, "Tree=") || line.text == "end of trees") {
      Unread(line);
      break;
    }
    const size_t eq = line.text.find('=');
    if (eq == absl::string_view::npos) {
      return Error(line.offset, t, "",
                   absl::StrCat("expected key=value, got '", line.text.substr(0, 40), "'"));
    }
    const int key = TreeKeyOf(line.text.substr(0, eq));
    if (key < 0) continue;
    if (f[key].present) {
      return Error(line.offset, t, "", absl::StrCat("duplicate key '", kTreeKeyNames[key], "'"));
    }
    f[key] = Field{line.text.substr(eq + 1), line.offset, true};
  }
  return BuildTree(t, f, tree_line.offset);
}

absl::Status Parser::BuildTree(int t, const Field (&f)[kNumTreeKeys], size_t tree_offset) {
  for (int key : {kNumLeaves, kNumCat, kLeafValue}) {
    if (!f[key].present) {
      return Error(tree_offset, t, "", absl::StrCat("missing ", kTreeKeyNames[key]));
    }
  }
  int64_t num_leaves = 0, num_cat = 0, is_linear = 0;
  if (absl::Status s = ParseInt(f[kNumLeaves], "num_leaves", t, 1, kMaxLeaves, &num_leaves);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ParseInt(f[kNumCat], "num_cat", t, 0, kMaxLeaves, &num_cat); !s.ok()) {
    return s;
  }
  if (f[kIsLinear].present) {
    if (absl::Status s = ParseInt(f[kIsLinear], "is_linear", t, 0, 1, &is_linear); !s.ok()) {
      return s;
    }
  }
  const int64_t num_internal = num_leaves - 1;
  if (absl::Status s = ParseArray(f[kLeafValue], "leaf_value", t, num_leaves, &leaf_value_);
      !s.ok()) {
    return s;
  }
  for (int64_t j = 0; j < num_leaves; ++j) {
    if (!std::isfinite(leaf_value_[j])) {
      return Error(f[kLeafValue].offset, t, absl::StrCat("leaf ", j), "leaf value is not finite");
    }
  }
  // Data counts (covers) are optional in LightGBM; a 1-leaf tree may write an empty list.
  leaf_count_.clear();
  if (f[kLeafCount].present && (num_leaves > 1 || !Trim(f[kLeafCount].value).empty())) {
    if (absl::Status s = ParseArray(f[kLeafCount], "leaf_count", t, num_leaves, &leaf_count_);
        !s.ok()) {
      return s;
    }
  }
  internal_count_.clear();
  if (num_internal > 0) {
    for (int key : {kSplitFeature, kThreshold, kLeftChild, kRightChild}) {
      if (!f[key].present) {
        return Error(tree_offset, t, "", absl::StrCat("missing ", kTreeKeyNames[key]));
      }
    }
    absl::Status s =
        ParseArray(f[kSplitFeature], "split_feature", t, num_internal, &split_feature_);
    if (s.ok()) s = ParseArray(f[kThreshold], "threshold", t, num_internal, &threshold_);
    if (s.ok()) s = ParseArray(f[kLeftChild], "left_child", t, num_internal, &left_);
    if (s.ok()) s = ParseArray(f[kRightChild], "right_child", t, num_internal, &right_);
    if (!s.ok()) return s;
    // From here num_internal is backed by as many parsed values.
    if (f[kDecisionType].present) {
      s = ParseArray(f[kDecisionType], "decision_type", t, num_internal, &decision_type_);
    } else {
      decision_type_.assign(static_cast<size_t>(num_internal), 0);
    }
    if (s.ok() && f[kInternalCount].present) {
      s = ParseArray(f[kInternalCount], "internal_count", t, num_internal, &internal_count_);
    }
    if (!s.ok()) return s;
  }
  for (const int64_t c : leaf_count_) {
    if (c < 0) return Error(f[kLeafCount].offset, t, "", "negative leaf_count");
  }
  for (const int64_t c : internal_count_) {
    if (c < 0) return Error(f[kInternalCount].offset, t, "", "negative internal_count");
  }

  // Categorical bitsets: words cat_threshold[cat_boundaries[i] .. cat_boundaries[i + 1]).
  cat_boundaries_.clear();
  cat_threshold_.clear();
  if (num_cat > 0) {
    for (int key : {kCatBoundaries, kCatThreshold}) {
      if (!f[key].present) {
        return Error(tree_offset, t, "",
                     absl::StrCat("num_cat is ", num_cat, " but ", kTreeKeyNames[key],
                                  " is missing"));
      }
    }
    absl::Status s =
        ParseArray(f[kCatBoundaries], "cat_boundaries", t, num_cat + 1, &cat_boundaries_);
    if (s.ok()) s = ParseArray(f[kCatThreshold], "cat_threshold", t, -1, &cat_threshold_);
    if (!s.ok()) return s;
    const int64_t words = static_cast<int64_t>(cat_threshold_.size());
    for (int64_t i = 0; i <= num_cat; ++i) {
      const int64_t b = cat_boundaries_[i];
      if (b < 0 || b > words || (i > 0 && b < cat_boundaries_[i - 1])) {
        return Error(f[kCatBoundaries].offset, t, "",
                     absl::StrCat("cat_boundaries value ", i, " (", b,
                                  ") is not a non-decreasing offset into the ", words,
                                  " cat_threshold words"));
      }
    }
    if (cat_boundaries_.back() != words) {
      return Error(f[kCatThreshold].offset, t, "",
                   absl::StrCat("cat_threshold has ", words, " words, cat_boundaries ends at ",
                                cat_boundaries_.back()));
    }
    for (const int64_t w : cat_threshold_) {
      if (w < 0 || w > std::numeric_limits<uint32_t>::max()) {
        return Error(f[kCatThreshold].offset, t, "",
                     absl::StrCat("cat_threshold word ", w, " is not a 32-bit unsigned value"));
      }
    }
  }

  // Linear leaves: value = leaf_const + sum(leaf_coeff * x[leaf_features]).
  int64_t linear_terms = 0;
  if (is_linear) {
    for (int key : {kLeafConst, kNumFeatures}) {
      if (!f[key].present) {
        return Error(tree_offset, t, "",
                     absl::StrCat("linear tree without ", kTreeKeyNames[key]));
      }
    }
    absl::Status s = ParseArray(f[kLeafConst], "leaf_const", t, num_leaves, &leaf_const_);
    if (s.ok()) s = ParseArray(f[kNumFeatures], "num_features", t, num_leaves, &num_linear_);
    if (!s.ok()) return s;
    for (int64_t j = 0; j < num_leaves; ++j) {
      if (num_linear_[j] < 0 || num_linear_[j] > kMaxLeaves) {
        return Error(f[kNumFeatures].offset, t, absl::StrCat("leaf ", j),
                     "num_features is negative or too large");
      }
      if (!std::isfinite(leaf_const_[j])) {
        return Error(f[kLeafConst].offset, t, absl::StrCat("leaf ", j),
                     "leaf_const is not finite");
      }
      linear_terms += num_linear_[j];
    }
    leaf_features_.clear();
    leaf_coeff_.clear();
    if (linear_terms > 0) {
      for (int key : {kLeafFeatures, kLeafCoeff}) {
        if (!f[key].present) {
          return Error(tree_offset, t, "",
                       absl::StrCat("linear tree without ", kTreeKeyNames[key]));
        }
      }
    }
    if (f[kLeafFeatures].present) {
      s = ParseArray(f[kLeafFeatures], "leaf_features", t, linear_terms, &leaf_features_);
    }
    if (s.ok() && f[kLeafCoeff].present) {
      s = ParseArray(f[kLeafCoeff], "leaf_coeff", t, linear_terms, &leaf_coeff_);
    }
    if (!s.ok()) return s;
    for (int64_t i = 0; i < linear_terms; ++i) {
      if (leaf_features_[i] < 0 || leaf_features_[i] >= forest_.num_features) {
        return Error(f[kLeafFeatures].offset, t, "",
                     absl::StrCat("leaf_features value ", i, " (", leaf_features_[i],
                                  ") outside [0, ", forest_.num_features, ")"));
      }
      if (!std::isfinite(leaf_coeff_[i])) {
        return Error(f[kLeafCoeff].offset, t, "",
                     absl::StrCat("leaf_coeff value ", i, " is not finite"));
      }
    }
  }

  // Index space: every offset stored in a Node or LinearLeaf is 32-bit.
  const int64_t num_nodes = 2 * num_leaves - 1;
  if (static_cast<int64_t>(forest_.nodes.size()) + num_nodes > kMaxIndex ||
      static_cast<int64_t>(forest_.leaf_values.size()) + num_leaves > kMaxIndex ||
      static_cast<int64_t>(forest_.category_bits.size()) +
              static_cast<int64_t>(cat_threshold_.size()) + 1 > kMaxIndex ||
      static_cast<int64_t>(forest_.linear_features.size()) + linear_terms > kMaxIndex ||
      static_cast<int64_t>(forest_.linear_leaves.size()) + num_leaves > kMaxIndex - 1) {
    return Error(tree_offset, t, "", "model too large for 32-bit node indices");
  }

  const uint32_t node_begin = static_cast<uint32_t>(forest_.nodes.size());
  const uint32_t leaf_begin = static_cast<uint32_t>(forest_.leaf_values.size());
  const uint32_t bits_begin = static_cast<uint32_t>(forest_.category_bits.size());
  forest_.nodes.resize(forest_.nodes.size() + static_cast<size_t>(num_nodes));
  Node* nodes = forest_.nodes.data() + node_begin;
  forest_.category_bits.insert(forest_.category_bits.end(), cat_threshold_.begin(),
                               cat_threshold_.end());
  int64_t empty_set_word = -1;  // a zero word for categorical splits with an empty bitset

  for (int64_t i = 0; i < num_internal; ++i) {
    Node& node = nodes[i];
    const std::string where = absl::StrCat("node ", i);
    const int64_t feature = split_feature_[i];
    if (feature < 0 || feature >= forest_.num_features) {
      return Error(f[kSplitFeature].offset, t, where,
                   absl::StrCat("split feature ", feature, " outside [0, ",
                                forest_.num_features, ")"));
    }
    node.feature = static_cast<int32_t>(feature);
    int32_t* const child[2] = {&node.left, &node.right};
    const int64_t raw[2] = {left_[i], right_[i]};
    for (int side = 0; side < 2; ++side) {
      const int64_t c = raw[side];
      if (c >= 0) {
        if (c >= num_internal) {
          return Error(f[side == 0 ? kLeftChild : kRightChild].offset, t, where,
                       absl::StrCat(side == 0 ? "left" : "right", " child ", c,
                                    " is not an internal node (< ", num_internal, ")"));
        }
        *child[side] = static_cast<int32_t>(c);
      } else {
        const int64_t leaf = -c - 1;  // ~c without overflow concerns in int64
        if (leaf >= num_leaves) {
          return Error(f[side == 0 ? kLeftChild : kRightChild].offset, t, where,
                       absl::StrCat(side == 0 ? "left" : "right", " child ", c, " names leaf ",
                                    leaf, ", the tree has ", num_leaves));
        }
        *child[side] = static_cast<int32_t>(num_internal + leaf);
      }
    }
    node.cover = internal_count_.empty() ? 0.0 : static_cast<double>(internal_count_[i]);
    const int64_t dt = decision_type_[i];
    if (dt < 0 || dt > 15 || ((dt >> 2) & 3) == 3) {
      return Error(f[kDecisionType].offset, t, where,
                   absl::StrCat("decision_type ", dt, " is not a LightGBM decision type"));
    }
    const double threshold = threshold_[i];
    if (dt & kCategoricalMask) {
      // threshold indexes cat_boundaries; the bitset lists the categories that go left.
      // NaN, negative values and categories beyond the bitset go right (LightGBM 4.x), whatever
      // the missing type and default-left bits say.
      if (!(threshold >= 0) || threshold >= static_cast<double>(num_cat) ||
          threshold != std::floor(threshold)) {
        return Error(f[kThreshold].offset, t, where,
                     absl::StrCat("categorical threshold ", threshold,
                                  " is not a bitset index in [0, ", num_cat, ")"));
      }
      const int64_t idx = static_cast<int64_t>(threshold);
      const int64_t words = cat_boundaries_[idx + 1] - cat_boundaries_[idx];
      if (words > 0) {
        node.payload = bits_begin + static_cast<uint32_t>(cat_boundaries_[idx]);
        node.aux = static_cast<uint32_t>(words);
      } else {
        if (empty_set_word < 0) {
          empty_set_word = static_cast<int64_t>(forest_.category_bits.size());
          forest_.category_bits.push_back(0);
        }
        node.payload = static_cast<uint32_t>(empty_set_word);
        node.aux = 1;
      }
      node.flags = kNodeCategorical | kNodeCategoryInSetGoesLeft | kNodeCategoryTruncate;
    } else {
      if (std::isnan(threshold)) return Error(f[kThreshold].offset, t, where, "threshold is NaN");
      node.threshold = LightgbmNumericThreshold(threshold);
      numeric_thresholds_.emplace_back(node.feature, threshold);
      uint16_t flags = (dt & kDefaultLeftMask) ? kNodeDefaultLeft : 0;
      switch ((dt >> 2) & 3) {
        case kMissingNone: flags |= kNodeNanAsZero; break;
        case kMissingZero: flags |= kNodeMissingZero; break;
        case kMissingNan: break;
      }
      node.flags = flags;
    }
  }

  const uint32_t linear_begin = static_cast<uint32_t>(forest_.linear_leaves.size());
  int64_t term = 0;
  for (int64_t j = 0; j < num_leaves; ++j) {
    Node& node = nodes[num_internal + j];
    node.flags = kNodeLeaf;
    node.payload = leaf_begin + static_cast<uint32_t>(j);
    node.leaf_id = static_cast<int32_t>(j);
    node.cover = leaf_count_.empty() ? 0.0 : static_cast<double>(leaf_count_[j]);
    if (is_linear) {
      LinearLeaf ll;
      ll.constant = leaf_const_[j];
      ll.begin = static_cast<uint32_t>(forest_.linear_features.size() + term);
      ll.count = static_cast<uint32_t>(num_linear_[j]);
      term += num_linear_[j];
      forest_.linear_leaves.push_back(ll);
      node.aux = linear_begin + static_cast<uint32_t>(j) + 1;
    }
  }
  forest_.leaf_values.insert(forest_.leaf_values.end(), leaf_value_.begin(), leaf_value_.end());
  if (is_linear) {
    for (int64_t i = 0; i < linear_terms; ++i) {
      forest_.linear_features.push_back(static_cast<int32_t>(leaf_features_[i]));
      forest_.linear_coeffs.push_back(leaf_coeff_[i]);
    }
  }

  Tree tree;
  tree.node_begin = node_begin;
  tree.num_nodes = static_cast<uint32_t>(num_nodes);
  tree.group = static_cast<int32_t>(t % num_outputs_);
  tree.iteration = static_cast<int32_t>(t / num_outputs_);
  tree.leaf_width = 1;
  forest_.trees.push_back(tree);
  return absl::OkStatus();
}

absl::StatusOr<ForestPtr> Parser::Run() {
  Line line;
  if (absl::Status s = ParseHeader(&line); !s.ok()) return s;
  bool ended = false;
  for (;;) {
    if (line.text == "end of trees") {
      ended = true;
      break;
    }
    if (!StartsWith(line.text, "Tree=")) {
      return Error(line.offset, -1, "",
                   absl::StrCat("expected 'Tree=' or 'end of trees', got '",
                                line.text.substr(0, 40), "'"));
    }
    const int t = static_cast<int>(forest_.trees.size());
    if (t == std::numeric_limits<int32_t>::max()) {
      return Error(line.offset, -1, "", "too many trees");
    }
    if (absl::Status s = ParseTree(t, line); !s.ok()) return s;
    bool more = false;
    while (NextLine(&line)) {
      if (!line.text.empty()) {
        more = true;
        break;
      }
    }
    if (!more) break;
  }
  if (!ended) {
    return Error(text_.size(), -1, "",
                 absl::StrCat("missing 'end of trees' after ", forest_.trees.size(),
                              " trees (truncated file?)"));
  }
  const int64_t num_trees = static_cast<int64_t>(forest_.trees.size());
  if (num_trees == 0) return Error(line.offset, -1, "", "model has no trees");
  if (expected_trees_ >= 0 && expected_trees_ != num_trees) {
    return Error(tree_sizes_offset_, -1, "header",
                 absl::StrCat("tree_sizes lists ", expected_trees_, " trees, the file holds ",
                              num_trees));
  }
  if (num_trees % num_outputs_ != 0) {
    return Error(line.offset, -1, "",
                 absl::StrCat(num_trees, " trees is not a multiple of num_tree_per_iteration ",
                              num_outputs_));
  }
  forest_.num_outputs = static_cast<int>(num_outputs_);
  forest_.base_margin.assign(static_cast<size_t>(num_outputs_), 0.0);
  // Per feature, the distinct double thresholds (a few hundred per feature at most: LightGBM
  // thresholds are bin boundaries).
  std::sort(numeric_thresholds_.begin(), numeric_thresholds_.end());
  numeric_thresholds_.erase(std::unique(numeric_thresholds_.begin(), numeric_thresholds_.end()),
                            numeric_thresholds_.end());
  forest_.double_thresholds.reserve(numeric_thresholds_.size());
  forest_.double_threshold_offsets.assign(static_cast<size_t>(forest_.num_features) + 1, 0);
  for (const auto& [feature, threshold] : numeric_thresholds_) {
    forest_.double_thresholds.push_back(threshold == 0.0 ? 0.0 : threshold);  // -0.0 == 0.0
    ++forest_.double_threshold_offsets[static_cast<size_t>(feature) + 1];
  }
  for (size_t i = 1; i < forest_.double_threshold_offsets.size(); ++i) {
    forest_.double_threshold_offsets[i] += forest_.double_threshold_offsets[i - 1];
  }
  std::vector<std::pair<int32_t, double>>().swap(numeric_thresholds_);
  if (absl::Status s = ReadPandasCategorical(text_.substr(std::min(line.offset, text_.size())),
                                             forest_.source, &forest_);
      !s.ok()) {
    return s;
  }
  return BuildForest(std::move(forest_));
}

}  // namespace

absl::StatusOr<ForestPtr> LoadLightgbmText(std::string_view text, std::string source) {
  // Debian's Abseil predates absl::string_view == std::string_view.
  Parser parser(absl::string_view(text.data(), text.size()), std::move(source));
  return parser.Run();
}

}  // namespace grove
