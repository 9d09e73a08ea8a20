// XGBoost JSON and UBJSON models (XGBoost 1.0 to 3.4) into a Forest.
//
// One extraction path (XgbReader) reads the model semantics over a small "reference" interface that
// two adapters implement: JsonRef over a simdjson DOM element and UbjRef over a ubjson::Value. The
// reference interface:
//   bool is_object() / is_array() / is_string(); bool Find(key, Ref*) (object member);
//   size_t size() (array length); bool ForEach(f(const Ref&) -> bool) (array elements);
//   bool ForEachScalar(f(const Scalar&) -> bool) (array elements as scalars, the fast path for the
//   per-node arrays); Scalar AsScalar().
//
// Format notes (see /work/shared/testdata/README.md and the fixtures in tests/model/data):
//  * A node is a leaf iff left_children[i] == -1. Scalar leaves hold their value in
//    split_conditions[i]; vector leaves (size_leaf_vector K > 1) in leaf_weights[right_children[i]*K]
//    (3.x: the right child of a leaf is its index into leaf_weights) or, in 2.x files without
//    leaf_weights, in base_weights[i*K].
//  * Pruned trees keep deleted nodes in their arrays, unreachable from the root (and XGBoost 1.0 does
//    not even count them in num_deleted). Only nodes reachable from the root are kept; Node::leaf_id
//    stays the XGBoost node id.
//  * Categorical splits (split_type 1): the listed categories go right.
#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/model/loader.h"
#include "core/model/ubjson.h"

namespace grove {
namespace {

// ---------------------------------------------------------------------------------------------
// Scalars shared by both formats.

// Debian's Abseil has its own absl::string_view: convert for StrCat.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

struct Scalar {
  enum Kind : uint8_t { kInt, kUint, kDouble, kBool, kString, kOther };
  Kind kind = kOther;
  int64_t i = 0;  // kInt, kBool (0/1)
  uint64_t u = 0;
  double d = 0;
  std::string_view s;
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' ||
                        s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' ||
                        s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// XGBoost writes non-finite floats as NaN / Infinity / -Infinity.
bool SpecialFloat(std::string_view s, double* out) {
  if (s == "NaN" || s == "nan" || s == "-NaN" || s == "-nan") {
    *out = std::numeric_limits<double>::quiet_NaN();
  } else if (s == "Infinity" || s == "inf" || s == "+Infinity") {
    *out = std::numeric_limits<double>::infinity();
  } else if (s == "-Infinity" || s == "-inf") {
    *out = -std::numeric_limits<double>::infinity();
  } else {
    return false;
  }
  return true;
}

bool ParseDoubleText(std::string_view s, double* out) {
  s = Trim(s);
  if (SpecialFloat(s, out)) return true;
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

bool ParseIntText(std::string_view s, int64_t* out) {
  s = Trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// Integer conversion with range checks (T is int32_t or int64_t). Integral doubles and booleans are
// accepted: XGBoost 1.0 wrote some integer arrays through a double-valued writer and default_left as
// booleans.
template <class T>
bool ToInteger(const Scalar& v, T* out) {
  constexpr int64_t kLo = std::numeric_limits<T>::min();
  constexpr int64_t kHi = std::numeric_limits<T>::max();
  switch (v.kind) {
    case Scalar::kInt:
    case Scalar::kBool:
      if (v.i < kLo || v.i > kHi) return false;
      *out = static_cast<T>(v.i);
      return true;
    case Scalar::kUint:
      if (v.u > static_cast<uint64_t>(kHi)) return false;
      *out = static_cast<T>(v.u);
      return true;
    case Scalar::kDouble: {
      // [-2^(b-1), 2^(b-1)) is exactly representable at both ends.
      const double lo = static_cast<double>(kLo);
      if (!(v.d >= lo && v.d < -lo) || v.d != std::trunc(v.d)) return false;
      *out = static_cast<T>(v.d);
      return true;
    }
    default:
      return false;
  }
}

bool ToDouble(const Scalar& v, double* out) {
  switch (v.kind) {
    case Scalar::kDouble: *out = v.d; return true;
    case Scalar::kInt:
    case Scalar::kBool: *out = static_cast<double>(v.i); return true;
    case Scalar::kUint: *out = static_cast<double>(v.u); return true;
    case Scalar::kString: return SpecialFloat(v.s, out);
    default: return false;
  }
}

// XGBoost stores every real model value as float32: round the (decimal) value to float first.
bool ToFloat(const Scalar& v, float* out) {
  double d;
  if (!ToDouble(v, &d)) return false;
  *out = static_cast<float>(d);
  return true;
}

template <class T>
bool Convert(const Scalar& v, T* out) {
  if constexpr (std::is_same_v<T, float>) {
    return ToFloat(v, out);
  } else if constexpr (std::is_same_v<T, double>) {
    return ToDouble(v, out);
  } else {
    return ToInteger<T>(v, out);
  }
}

template <class T>
constexpr const char* TypeWord() {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return "a number";
  } else if constexpr (std::is_same_v<T, int32_t>) {
    return "a 32-bit integer";
  } else {
    return "a 64-bit integer";
  }
}

// ---------------------------------------------------------------------------------------------
// JSON adapter (simdjson DOM).

class JsonRef {
 public:
  JsonRef() = default;
  explicit JsonRef(simdjson::dom::element e) : e_(e) {}

  bool is_object() const { return e_.type() == simdjson::dom::element_type::OBJECT; }
  bool is_array() const { return e_.type() == simdjson::dom::element_type::ARRAY; }
  bool is_string() const { return e_.type() == simdjson::dom::element_type::STRING; }

  bool Find(std::string_view key, JsonRef* out) const {
    simdjson::dom::object object;
    if (e_.get_object().get(object) != simdjson::SUCCESS) return false;
    simdjson::dom::element value;
    if (object.at_key(key).get(value) != simdjson::SUCCESS) return false;
    *out = JsonRef(value);
    return true;
  }

  size_t size() const {
    simdjson::dom::array array;
    if (e_.get_array().get(array) != simdjson::SUCCESS) return 0;
    return array.size();
  }

  template <class F>
  bool ForEach(F&& f) const {
    simdjson::dom::array array;
    if (e_.get_array().get(array) != simdjson::SUCCESS) return false;
    for (simdjson::dom::element e : array) {
      if (!f(JsonRef(e))) return false;
    }
    return true;
  }

  template <class F>
  bool ForEachScalar(F&& f) const {
    simdjson::dom::array array;
    if (e_.get_array().get(array) != simdjson::SUCCESS) return false;
    for (simdjson::dom::element e : array) {
      if (!f(ToScalar(e))) return false;
    }
    return true;
  }

  Scalar AsScalar() const { return ToScalar(e_); }

 private:
  static Scalar ToScalar(simdjson::dom::element e) {
    Scalar s;
    switch (e.type()) {
      case simdjson::dom::element_type::DOUBLE:
        s.kind = Scalar::kDouble;
        s.d = e.get_double().value_unsafe();
        break;
      case simdjson::dom::element_type::INT64:
        s.kind = Scalar::kInt;
        s.i = e.get_int64().value_unsafe();
        break;
      case simdjson::dom::element_type::UINT64:
        s.kind = Scalar::kUint;
        s.u = e.get_uint64().value_unsafe();
        break;
      case simdjson::dom::element_type::BOOL: {
        s.kind = Scalar::kBool;
        s.i = e.get_bool().value_unsafe() ? 1 : 0;
        break;
      }
      case simdjson::dom::element_type::STRING:
        s.kind = Scalar::kString;
        s.s = e.get_string().value_unsafe();
        break;
      default:
        break;
    }
    return s;
  }

  simdjson::dom::element e_;
};

// ---------------------------------------------------------------------------------------------
// UBJSON adapter.

class UbjRef {
 public:
  UbjRef() = default;
  explicit UbjRef(ubjson::Value v) : v_(v) {}

  bool is_object() const { return v_.type() == ubjson::Type::kObject; }
  bool is_array() const { return v_.is_array(); }
  bool is_string() const { return v_.type() == ubjson::Type::kString; }

  bool Find(std::string_view key, UbjRef* out) const {
    ubjson::Value v;
    if (!v_.Find(key, &v)) return false;
    *out = UbjRef(v);
    return true;
  }

  size_t size() const { return v_.is_array() ? v_.size() : 0; }

  template <class F>
  bool ForEach(F&& f) const {
    if (v_.type() == ubjson::Type::kTypedArray) {
      // Elements of a packed array are numbers; expose them one at a time.
      return false;
    }
    if (v_.type() != ubjson::Type::kArray) return false;
    for (size_t i = 0, n = v_.size(); i < n; ++i) {
      if (!f(UbjRef(v_.Element(i)))) return false;
    }
    return true;
  }

  template <class F>
  bool ForEachScalar(F&& f) const {
    if (v_.type() == ubjson::Type::kTypedArray) {
      const char m = v_.typed_marker();
      const uint8_t* data = v_.typed_data();
      const size_t n = v_.size();
      Scalar s;
      if (m == 'd' || m == 'D') {
        s.kind = Scalar::kDouble;
        for (size_t i = 0; i < n; ++i) {
          s.d = ubjson::DecodeDouble(m, data, i);
          if (!f(s)) return false;
        }
      } else {
        s.kind = Scalar::kInt;
        for (size_t i = 0; i < n; ++i) {
          s.i = ubjson::DecodeInt(m, data, i);
          if (!f(s)) return false;
        }
      }
      return true;
    }
    if (v_.type() != ubjson::Type::kArray) return false;
    for (size_t i = 0, n = v_.size(); i < n; ++i) {
      if (!f(ToScalar(v_.Element(i)))) return false;
    }
    return true;
  }

  Scalar AsScalar() const { return ToScalar(v_); }

 private:
  static Scalar ToScalar(ubjson::Value v) {
    Scalar s;
    switch (v.type()) {
      case ubjson::Type::kInt:
        s.kind = Scalar::kInt;
        v.GetInt(&s.i);
        break;
      case ubjson::Type::kFloat:
        s.kind = Scalar::kDouble;
        v.GetDouble(&s.d);
        break;
      case ubjson::Type::kBool: {
        bool b = false;
        v.GetBool(&b);
        s.kind = Scalar::kBool;
        s.i = b;
        break;
      }
      case ubjson::Type::kString:
        s.kind = Scalar::kString;
        v.GetString(&s.s);
        break;
      case ubjson::Type::kHighPrecision: {
        std::string_view text;
        v.GetString(&text);
        if (ParseDoubleText(text, &s.d)) s.kind = Scalar::kDouble;
        break;
      }
      default:
        break;
    }
    return s;
  }

  ubjson::Value v_;
};

// ---------------------------------------------------------------------------------------------
// Objectives.

enum class BaseTransform : uint8_t { kIdentity, kLogit, kLog };

struct ObjectiveInfo {
  std::string_view name;
  Link link;
  BaseTransform base;
};

// base_score is saved in prediction space; its margin is XGBoost's ProbToMargin of the objective
// (checked against XGBoost 3.2 for every entry: logit for the logistic objectives, log for the
// exp-link ones, identity otherwise, binary:logitraw and binary:hinge included).
constexpr ObjectiveInfo kObjectives[] = {
    {"reg:squarederror", Link::kIdentity, BaseTransform::kIdentity},
    {"reg:linear", Link::kIdentity, BaseTransform::kIdentity},  // pre-1.0 name
    {"reg:squaredlogerror", Link::kIdentity, BaseTransform::kIdentity},
    {"reg:pseudohubererror", Link::kIdentity, BaseTransform::kIdentity},
    {"reg:absoluteerror", Link::kIdentity, BaseTransform::kIdentity},
    {"reg:quantileerror", Link::kIdentity, BaseTransform::kIdentity},
    {"reg:logistic", Link::kSigmoid, BaseTransform::kLogit},
    {"binary:logistic", Link::kSigmoid, BaseTransform::kLogit},
    {"binary:logitraw", Link::kIdentity, BaseTransform::kIdentity},
    {"binary:hinge", Link::kHinge, BaseTransform::kIdentity},
    {"count:poisson", Link::kExp, BaseTransform::kLog},
    {"reg:gamma", Link::kExp, BaseTransform::kLog},
    {"reg:tweedie", Link::kExp, BaseTransform::kLog},
    {"survival:cox", Link::kExp, BaseTransform::kLog},
    {"survival:aft", Link::kExp, BaseTransform::kLog},
    {"multi:softprob", Link::kSoftmax, BaseTransform::kIdentity},
    {"multi:softmax", Link::kArgmax, BaseTransform::kIdentity},
    {"rank:pairwise", Link::kIdentity, BaseTransform::kIdentity},
    {"rank:ndcg", Link::kIdentity, BaseTransform::kIdentity},
    {"rank:map", Link::kIdentity, BaseTransform::kIdentity},
};

const ObjectiveInfo* FindObjective(std::string_view name) {
  for (const ObjectiveInfo& o : kObjectives) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

std::string SupportedObjectives() {
  std::vector<std::string> names;
  for (const ObjectiveInfo& o : kObjectives) names.emplace_back(o.name);
  return absl::StrJoin(names, ", ");
}

// Smallest category XGBoost treats as invalid (common::InvalidCat: x >= 2^24 goes left).
constexpr int64_t kMaxCategory = int64_t{1} << 24;

// ---------------------------------------------------------------------------------------------
// The extraction, written once for both formats.

template <class Ref>
class XgbReader {
 public:
  XgbReader(Forest* forest, size_t input_bytes) : f_(*forest), input_bytes_(input_bytes) {
    // Category bitsets are sized by category values, not by input bytes: bound their total so that
    // a small malicious file cannot demand gigabytes (64 words per input byte, at least 256 MiB).
    category_word_budget_ = std::max<uint64_t>(uint64_t{1} << 26, uint64_t{64} * input_bytes);
  }

  absl::Status Read(const Ref& root);

 private:
  absl::Status Fail(int tree, int node, std::string_view what) const {
    std::string where = f_.source.empty() ? std::string("<memory>") : f_.source;
    if (tree >= 0) absl::StrAppend(&where, ": tree ", tree);
    if (node >= 0) absl::StrAppend(&where, " node ", node);
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", Av(what)));
  }
  absl::Status Fail(std::string_view what) const { return Fail(-1, -1, what); }
  absl::Status Unimplemented(std::string_view what) const {
    return absl::UnimplementedError(
        absl::StrCat(f_.source.empty() ? std::string("<memory>") : f_.source, ": ", Av(what)));
  }

  absl::Status Object(const Ref& parent, std::string_view key, std::string_view where, Ref* out,
                      int tree = -1) const {
    if (!parent.Find(key, out)) {
      return Fail(tree, -1, absl::StrCat("missing \"", Av(key), "\" in ", Av(where)));
    }
    if (!out->is_object()) {
      return Fail(tree, -1, absl::StrCat("\"", Av(key), "\" in ", Av(where), " is not an object"));
    }
    return absl::OkStatus();
  }

  // A scalar that may be a number, a numeric string ("10", "5E-1") or a boolean.
  bool ScalarDouble(const Ref& v, double* out) const {
    const Scalar s = v.AsScalar();
    if (s.kind == Scalar::kString) return ParseDoubleText(s.s, out);
    return ToDouble(s, out);
  }
  bool ScalarInt(const Ref& v, int64_t* out) const {
    const Scalar s = v.AsScalar();
    if (s.kind == Scalar::kString) return ParseIntText(s.s, out);
    return ToInteger<int64_t>(s, out);
  }

  // Optional integer member; `*found` tells whether it was there.
  absl::Status IntMember(const Ref& parent, std::string_view key, std::string_view where,
                         int64_t* out, bool* found, int tree = -1) const {
    Ref v;
    *found = parent.Find(key, &v);
    if (!*found) return absl::OkStatus();
    if (!ScalarInt(v, out)) {
      return Fail(tree, -1, absl::StrCat("\"", Av(key), "\" in ", Av(where), " is not an integer"));
    }
    return absl::OkStatus();
  }

  template <class T>
  absl::Status ReadArray(const Ref& v, std::string_view name, int tree, std::vector<T>* out) const {
    out->clear();
    if (!v.is_array()) return Fail(tree, -1, absl::StrCat("\"", Av(name), "\" is not an array"));
    out->reserve(v.size());
    size_t index = 0;
    Scalar bad;
    const bool ok = v.ForEachScalar([&](const Scalar& s) {
      T value;
      if (!Convert<T>(s, &value)) {
        bad = s;
        return false;
      }
      out->push_back(value);
      ++index;
      return true;
    });
    if (!ok) {
      return Fail(tree, -1,
                  absl::StrCat("\"", Av(name), "\"[", index, "] is not ", TypeWord<T>(),
                               bad.kind == Scalar::kInt ? absl::StrCat(" (", bad.i, ")") : ""));
    }
    return absl::OkStatus();
  }

  // Optional array member: absent leaves `out` empty.
  template <class T>
  absl::Status OptionalArray(const Ref& parent, std::string_view key, int tree,
                             std::vector<T>* out, bool* found = nullptr) const {
    Ref v;
    const bool present = parent.Find(key, &v);
    if (found) *found = present;
    if (!present) {
      out->clear();
      return absl::OkStatus();
    }
    return ReadArray(v, key, tree, out);
  }

  template <class T>
  absl::Status RequiredArray(const Ref& parent, std::string_view key, int tree,
                             std::vector<T>* out) const {
    Ref v;
    if (!parent.Find(key, &v)) return Fail(tree, -1, absl::StrCat("missing \"", Av(key), "\""));
    return ReadArray(v, key, tree, out);
  }

  absl::Status ReadStrings(const Ref& parent, std::string_view key,
                           std::vector<std::string>* out) const {
    out->clear();
    Ref v;
    if (!parent.Find(key, &v)) return absl::OkStatus();
    if (!v.is_array()) return Fail(absl::StrCat("\"", Av(key), "\" is not an array"));
    size_t index = 0;
    const bool ok = v.ForEach([&](const Ref& item) {
      const Scalar s = item.AsScalar();
      if (s.kind != Scalar::kString) return false;
      out->emplace_back(s.s);
      ++index;
      return true;
    });
    if (!ok) return Fail(absl::StrCat("\"", Av(key), "\"[", index, "] is not a string"));
    return absl::OkStatus();
  }

  absl::Status ReadBaseScore(const Ref& lmp, std::vector<double>* out) const;
  absl::Status ReadTree(const Ref& tree, int t);

  // The booster model's cats.enc (XGBoost 3.1+, a model trained on a DataFrame with categorical
  // columns): one entry per feature, {"values", "offsets"} for strings (their UTF-8 bytes, cut at
  // the offsets) or {"values"} for numbers; {} or empty lists for a numeric feature. Into
  // f_.categories, left empty when no feature records any.
  absl::Status ReadCategories(const Ref& model) {
    Ref cats, enc;
    if (!model.Find("cats", &cats) || !cats.is_object() || !cats.Find("enc", &enc)) {
      return absl::OkStatus();
    }
    if (!enc.is_array()) return Fail("cats.enc is not an array");
    if (enc.size() == 0) return absl::OkStatus();
    if (enc.size() != static_cast<size_t>(f_.num_features)) {
      return Fail(absl::StrCat("cats.enc has ", enc.size(), " entries for ", f_.num_features,
                               " features"));
    }
    std::vector<FeatureCategories> out;
    std::vector<double> values;
    std::vector<int64_t> offsets;
    absl::Status status;
    bool any = false;
    enc.ForEach([&](const Ref& e) {
      const std::string where = absl::StrCat("cats.enc[", out.size(), "]");
      FeatureCategories c;
      if (e.is_object()) {
        status = OptionalArray(e, "values", -1, &values);
        if (status.ok()) status = OptionalArray(e, "offsets", -1, &offsets);
        if (!status.ok()) return false;
        if (values.size() > kMaxCategoriesPerFeature * 64) {
          status = Fail(absl::StrCat(where, " holds ", values.size(), " values"));
          return false;
        }
        if (!offsets.empty()) {
          if (offsets.front() != 0 || offsets.back() != static_cast<int64_t>(values.size()) ||
              offsets.size() - 1 > kMaxCategoriesPerFeature) {
            status = Fail(absl::StrCat(where, ": offsets must run from 0 to the ", values.size(),
                                       " bytes of its values"));
            return false;
          }
          // Every offset is checked before any is used: the last one bounds the values, so
          // non-decreasing offsets all lie inside them.
          for (size_t i = 0; i + 1 < offsets.size(); ++i) {
            if (offsets[i] > offsets[i + 1]) {
              status = Fail(absl::StrCat(where, ": offsets decrease at ", i));
              return false;
            }
          }
          for (size_t i = 0; i + 1 < offsets.size(); ++i) {
            std::string name;
            for (int64_t b = offsets[i]; b < offsets[i + 1]; ++b) {
              const double v = values[static_cast<size_t>(b)];
              if (!(v >= -128 && v <= 255) || v != std::floor(v)) {
                status = Fail(absl::StrCat(where, ": value ", b, " is not a byte"));
                return false;
              }
              name.push_back(static_cast<char>(static_cast<int>(v)));
            }
            c.strings.push_back(std::move(name));
          }
        } else {
          c.numbers = values;
        }
      }
      any |= !c.empty();
      out.push_back(std::move(c));
      return true;
    });
    if (!status.ok()) return status;
    if (any) f_.categories = std::move(out);
    return absl::OkStatus();
  }

  Forest& f_;
  size_t input_bytes_;
  uint64_t category_word_budget_;

  // Model-level state used by ReadTree.
  std::vector<int32_t> tree_info_;
  std::vector<int64_t> indptr_;
  int64_t num_parallel_tree_ = 1;
  size_t iteration_cursor_ = 0;

  // Per-tree scratch, reused across trees.
  std::vector<int32_t> left_, right_, split_type_, default_left_, cat_nodes_, categories_;
  std::vector<int64_t> split_index_, cat_segments_, cat_sizes_;
  std::vector<float> cond_, hess_, base_weights_, leaf_weights_;
  std::vector<int32_t> new_id_, stack_;
  std::vector<int64_t> cat_of_node_;
};

template <class Ref>
absl::Status XgbReader<Ref>::ReadBaseScore(const Ref& lmp, std::vector<double>* out) const {
  out->clear();
  Ref v;
  if (!lmp.Find("base_score", &v)) {
    out->push_back(0.5);  // XGBoost's default
    return absl::OkStatus();
  }
  auto as_float = [](double d) { return static_cast<double>(static_cast<float>(d)); };
  if (v.is_array()) {
    std::vector<float> values;
    if (absl::Status s = ReadArray(v, "base_score", -1, &values); !s.ok()) return s;
    out->assign(values.begin(), values.end());
  } else {
    const Scalar s = v.AsScalar();
    if (s.kind == Scalar::kString) {
      // "0.5", "5E-1", or a JSON array in a string: "[5E-1]", "[a,b,c]" (3.1+).
      std::string_view text = Trim(s.s);
      if (!text.empty() && text.front() == '[') {
        if (text.back() != ']') return Fail("base_score: unterminated array");
        text = text.substr(1, text.size() - 2);
        while (true) {
          const size_t comma = text.find(',');
          double d;
          if (!ParseDoubleText(text.substr(0, comma), &d)) {
            return Fail(absl::StrCat("base_score: \"", Av(s.s), "\" is not a list of numbers"));
          }
          out->push_back(as_float(d));
          if (comma == std::string_view::npos) break;
          text.remove_prefix(comma + 1);
        }
      } else {
        double d;
        if (!ParseDoubleText(text, &d)) {
          return Fail(absl::StrCat("base_score: \"", Av(s.s), "\" is not a number"));
        }
        out->push_back(as_float(d));
      }
    } else {
      double d;
      if (!ToDouble(s, &d)) return Fail("base_score is not a number");
      out->push_back(as_float(d));
    }
  }
  if (out->empty()) return Fail("base_score is empty");
  return absl::OkStatus();
}

template <class Ref>
absl::Status XgbReader<Ref>::Read(const Ref& root) {
  if (!root.is_object()) return Fail("not an XGBoost model: the document is not an object");
  Ref learner;
  if (!root.Find("learner", &learner) || !learner.is_object()) {
    return Fail("not an XGBoost model: no \"learner\" object");
  }

  // Version [major, minor, patch] (absent in some hand-made files).
  Ref version;
  if (root.Find("version", &version) && version.is_array()) {
    std::vector<int64_t> parts;
    if (ReadArray(version, "version", -1, &parts).ok()) {
      f_.library_version = absl::StrJoin(parts, ".");
    }
  }

  Ref lmp;
  if (absl::Status s = Object(learner, "learner_model_param", "learner", &lmp); !s.ok()) return s;
  int64_t num_feature = 0, num_class = 0, num_target = 1;
  bool found = false;
  if (absl::Status s = IntMember(lmp, "num_feature", "learner_model_param", &num_feature, &found);
      !s.ok()) {
    return s;
  }
  if (!found) return Fail("missing \"num_feature\" in learner_model_param");
  if (num_feature <= 0 || num_feature > std::numeric_limits<int32_t>::max()) {
    return Fail(absl::StrCat("num_feature ", num_feature, " outside [1, 2^31)"));
  }
  if (absl::Status s = IntMember(lmp, "num_class", "learner_model_param", &num_class, &found);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = IntMember(lmp, "num_target", "learner_model_param", &num_target, &found);
      !s.ok()) {
    return s;
  }
  if (num_class < 0 || num_target < 0) return Fail("negative num_class or num_target");
  const int64_t k = num_class > 0 ? num_class : std::max<int64_t>(num_target, 1);
  // Every output needs at least one byte of the file (a tree or a leaf value), which bounds the
  // allocations sized by it.
  if (static_cast<uint64_t>(k) > input_bytes_ || k > std::numeric_limits<int32_t>::max()) {
    return Fail(absl::StrCat(k, " outputs (num_class/num_target) is more than the file can hold"));
  }
  f_.num_features = static_cast<int>(num_feature);
  f_.num_outputs = static_cast<int>(k);

  // Objective.
  Ref objective, objective_name;
  if (absl::Status s = Object(learner, "objective", "learner", &objective); !s.ok()) return s;
  if (!objective.Find("name", &objective_name) || !objective_name.is_string()) {
    return Fail("objective has no \"name\" string");
  }
  f_.objective.name = std::string(objective_name.AsScalar().s);
  const ObjectiveInfo* info = FindObjective(f_.objective.name);
  ObjectiveInfo rank_info{"", Link::kIdentity, BaseTransform::kIdentity};
  if (info == nullptr && f_.objective.name.rfind("rank:", 0) == 0) info = &rank_info;
  if (info == nullptr) {
    return Unimplemented(absl::StrCat("XGBoost objective \"", f_.objective.name,
                                      "\" is not supported (its output transform is unknown); "
                                      "supported: ", SupportedObjectives(), ", rank:*"));
  }
  f_.objective.link = info->link;
  f_.objective.sigmoid_alpha = 1.0;

  // Base score -> base margin.
  std::vector<double> base;
  if (absl::Status s = ReadBaseScore(lmp, &base); !s.ok()) return s;
  if (base.size() != 1 && base.size() != static_cast<size_t>(k)) {
    return Fail(absl::StrCat("base_score has ", base.size(), " values for ", k, " outputs"));
  }
  f_.base_margin.assign(static_cast<size_t>(k), base[0]);
  if (base.size() > 1) f_.base_margin = base;
  for (double& b : f_.base_margin) {
    switch (info->base) {
      case BaseTransform::kIdentity: break;
      case BaseTransform::kLogit:
        if (!(b > 0.0 && b < 1.0)) {
          return Fail(absl::StrCat("base_score ", b, " outside (0, 1) for ", f_.objective.name));
        }
        b = -std::log(1.0 / b - 1.0);
        break;
      case BaseTransform::kLog:
        if (!(b > 0.0)) {
          return Fail(absl::StrCat("base_score ", b, " is not positive for ", f_.objective.name));
        }
        b = std::log(b);
        break;
    }
  }

  // Feature names and types (both optional; an empty list means none).
  if (absl::Status s = ReadStrings(learner, "feature_names", &f_.feature_names); !s.ok()) return s;
  if (absl::Status s = ReadStrings(learner, "feature_types", &f_.feature_types); !s.ok()) return s;

  // Booster layout.
  Ref gb, gb_name;
  if (absl::Status s = Object(learner, "gradient_booster", "learner", &gb); !s.ok()) return s;
  if (!gb.Find("name", &gb_name) || !gb_name.is_string()) {
    return Fail("gradient_booster has no \"name\" string");
  }
  const std::string booster(gb_name.AsScalar().s);
  Ref model, weight_drop;
  bool has_weight_drop = false;
  if (booster == "gbtree") {
    // 3.4 saves dart as gbtree with model.weight_drop; accept it beside "model" too.
    if (absl::Status s = Object(gb, "model", "gradient_booster", &model); !s.ok()) return s;
    has_weight_drop = model.Find("weight_drop", &weight_drop) || gb.Find("weight_drop", &weight_drop);
  } else if (booster == "dart") {
    // 1.0 to 3.3: {"name": "dart", "gbtree": {"name": "gbtree", "model": {...}}, "weight_drop"}.
    Ref inner;
    if (absl::Status s = Object(gb, "gbtree", "the dart gradient_booster", &inner); !s.ok()) {
      return s;
    }
    if (inner.Find("model", &model)) {
      if (!model.is_object()) return Fail("dart gbtree \"model\" is not an object");
    } else {
      model = inner;  // a variant with the trees directly under "gbtree"
    }
    has_weight_drop = gb.Find("weight_drop", &weight_drop) ||
                      inner.Find("weight_drop", &weight_drop) ||
                      model.Find("weight_drop", &weight_drop);
  } else if (booster == "gblinear") {
    return Unimplemented(
        "gblinear (linear booster) models are not tree ensembles; Grove serves gbtree and dart");
  } else {
    return Unimplemented(absl::StrCat("XGBoost booster \"", booster,
                                      "\" is not supported (gbtree and dart are)"));
  }

  if (absl::Status s = ReadCategories(model); !s.ok()) return s;

  Ref trees;
  if (!model.Find("trees", &trees) || !trees.is_array()) {
    return Fail("the booster model has no \"trees\" array");
  }
  const size_t num_trees = trees.size();
  if (num_trees > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Fail("too many trees");
  }

  Ref param;
  if (model.Find("gbtree_model_param", &param)) {
    if (!param.is_object()) return Fail("gbtree_model_param is not an object");
    int64_t declared = 0;
    if (absl::Status s = IntMember(param, "num_trees", "gbtree_model_param", &declared, &found);
        !s.ok()) {
      return s;
    }
    if (found && declared != static_cast<int64_t>(num_trees)) {
      return Fail(absl::StrCat("gbtree_model_param.num_trees is ", declared, " but \"trees\" has ",
                               num_trees));
    }
    if (absl::Status s = IntMember(param, "num_parallel_tree", "gbtree_model_param",
                                   &num_parallel_tree_, &found);
        !s.ok()) {
      return s;
    }
    if (!found) num_parallel_tree_ = 1;
    if (num_parallel_tree_ < 1) {
      return Fail(absl::StrCat("num_parallel_tree ", num_parallel_tree_, " is not positive"));
    }
  }

  if (absl::Status s = OptionalArray(model, "tree_info", -1, &tree_info_, &found); !s.ok()) {
    return s;
  }
  if (found && tree_info_.size() != num_trees) {
    return Fail(absl::StrCat("tree_info has ", tree_info_.size(), " entries for ", num_trees,
                             " trees"));
  }
  if (absl::Status s = OptionalArray(model, "iteration_indptr", -1, &indptr_, &found); !s.ok()) {
    return s;
  }
  if (found) {
    if (indptr_.empty() || indptr_.front() != 0 ||
        indptr_.back() != static_cast<int64_t>(num_trees)) {
      return Fail(absl::StrCat("iteration_indptr must run from 0 to the ", num_trees, " trees"));
    }
    for (size_t i = 1; i < indptr_.size(); ++i) {
      if (indptr_[i] < indptr_[i - 1]) return Fail("iteration_indptr is not non-decreasing");
    }
  }

  std::vector<float> drops;
  if (has_weight_drop) {
    if (absl::Status s = ReadArray(weight_drop, "weight_drop", -1, &drops); !s.ok()) return s;
    if (drops.size() > num_trees) {
      return Fail(absl::StrCat("weight_drop has ", drops.size(), " entries for ", num_trees,
                               " trees"));
    }
  }

  // Reserve from the declared array lengths (already bounded by the input).
  size_t total_nodes = 0;
  trees.ForEach([&](const Ref& tree) {
    Ref left;
    if (tree.Find("left_children", &left)) total_nodes += left.size();
    return true;
  });
  f_.trees.reserve(num_trees);
  f_.nodes.reserve(total_nodes);
  f_.leaf_values.reserve(total_nodes / 2 + num_trees);

  int t = 0;
  absl::Status status;
  const bool all = trees.ForEach([&](const Ref& tree) {
    status = ReadTree(tree, t);
    if (!status.ok()) return false;
    f_.trees.back().weight = t < static_cast<int>(drops.size()) ? drops[t] : 1.0;
    ++t;
    return true;
  });
  if (!status.ok()) return status;
  if (!all) return Fail("\"trees\" is not an array of tree objects");
  return absl::OkStatus();
}

template <class Ref>
absl::Status XgbReader<Ref>::ReadTree(const Ref& tree, int t) {
  if (!tree.is_object()) return Fail(t, -1, "tree is not an object");

  // tree_param: num_nodes (checked), size_leaf_vector (0 or 1: scalar leaves).
  int64_t width = 1, declared_nodes = -1;
  Ref param;
  if (tree.Find("tree_param", &param)) {
    if (!param.is_object()) return Fail(t, -1, "tree_param is not an object");
    bool found = false;
    if (absl::Status s = IntMember(param, "num_nodes", "tree_param", &declared_nodes, &found, t);
        !s.ok()) {
      return s;
    }
    if (!found) declared_nodes = -1;
    if (absl::Status s = IntMember(param, "size_leaf_vector", "tree_param", &width, &found, t);
        !s.ok()) {
      return s;
    }
    if (!found || width == 0) width = 1;
  }
  if (width < 1) return Fail(t, -1, absl::StrCat("size_leaf_vector ", width, " is negative"));
  if (width > 1 && width != f_.num_outputs) {
    return Fail(t, -1, absl::StrCat("size_leaf_vector ", width, " differs from the model's ",
                                    f_.num_outputs, " outputs"));
  }

  if (absl::Status s = RequiredArray(tree, "left_children", t, &left_); !s.ok()) return s;
  if (absl::Status s = RequiredArray(tree, "right_children", t, &right_); !s.ok()) return s;
  if (absl::Status s = RequiredArray(tree, "split_indices", t, &split_index_); !s.ok()) return s;
  if (absl::Status s = RequiredArray(tree, "split_conditions", t, &cond_); !s.ok()) return s;
  if (absl::Status s = RequiredArray(tree, "default_left", t, &default_left_); !s.ok()) return s;
  if (absl::Status s = OptionalArray(tree, "sum_hessian", t, &hess_); !s.ok()) return s;
  if (absl::Status s = OptionalArray(tree, "split_type", t, &split_type_); !s.ok()) return s;
  bool has_leaf_weights = false;
  if (width > 1) {
    if (absl::Status s = OptionalArray(tree, "leaf_weights", t, &leaf_weights_, &has_leaf_weights);
        !s.ok()) {
      return s;
    }
    if (!has_leaf_weights) {
      if (absl::Status s = RequiredArray(tree, "base_weights", t, &base_weights_); !s.ok()) {
        return s;
      }
    }
  }

  const size_t n = left_.size();
  if (n == 0) return Fail(t, -1, "tree has no nodes");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Fail(t, -1, "tree has too many nodes");
  }
  if (declared_nodes >= 0 && static_cast<size_t>(declared_nodes) != n) {
    return Fail(t, -1, absl::StrCat("tree_param.num_nodes is ", declared_nodes, " but ",
                                    "left_children has ", n, " entries"));
  }
  auto check_size = [&](const auto& v, std::string_view name, bool optional) -> absl::Status {
    if (v.size() == n || (optional && v.empty())) return absl::OkStatus();
    return Fail(t, -1, absl::StrCat("\"", Av(name), "\" has ", v.size(), " entries for ", n, " nodes"));
  };
  for (auto [v, name] : {std::pair{&right_, "right_children"}, {&split_type_, "split_type"},
                         {&default_left_, "default_left"}}) {
    if (absl::Status s = check_size(*v, name, v == &split_type_); !s.ok()) return s;
  }
  if (absl::Status s = check_size(split_index_, "split_indices", false); !s.ok()) return s;
  if (absl::Status s = check_size(cond_, "split_conditions", false); !s.ok()) return s;
  if (absl::Status s = check_size(hess_, "sum_hessian", true); !s.ok()) return s;
  size_t num_leaf_slots = 0;
  if (width > 1) {
    if (has_leaf_weights) {
      if (leaf_weights_.size() % static_cast<size_t>(width) != 0) {
        return Fail(t, -1, absl::StrCat("leaf_weights has ", leaf_weights_.size(),
                                        " values, not a multiple of ", width));
      }
      num_leaf_slots = leaf_weights_.size() / static_cast<size_t>(width);
    } else if (base_weights_.size() / static_cast<size_t>(width) != n ||
               base_weights_.size() % static_cast<size_t>(width) != 0) {
      return Fail(t, -1, absl::StrCat("base_weights has ", base_weights_.size(), " values for ",
                                      n, " nodes of ", width, " outputs"));
    }
  }

  // Categorical splits: node -> entry of categories_nodes.
  bool has_categorical = false;
  for (int32_t type : split_type_) {
    if (type == 1) {
      has_categorical = true;
    } else if (type != 0) {
      return Fail(t, -1, absl::StrCat("unknown split_type ", type));
    }
  }
  if (has_categorical) {
    if (absl::Status s = OptionalArray(tree, "categories_nodes", t, &cat_nodes_); !s.ok()) return s;
    if (absl::Status s = OptionalArray(tree, "categories_segments", t, &cat_segments_); !s.ok()) {
      return s;
    }
    if (absl::Status s = OptionalArray(tree, "categories_sizes", t, &cat_sizes_); !s.ok()) return s;
    if (absl::Status s = OptionalArray(tree, "categories", t, &categories_); !s.ok()) return s;
    if (cat_segments_.size() != cat_nodes_.size() || cat_sizes_.size() != cat_nodes_.size()) {
      return Fail(t, -1, absl::StrCat("categories_nodes, categories_segments and categories_sizes "
                                      "have ", cat_nodes_.size(), ", ", cat_segments_.size(),
                                      " and ", cat_sizes_.size(), " entries"));
    }
    cat_of_node_.assign(n, -1);
    for (size_t j = 0; j < cat_nodes_.size(); ++j) {
      const int32_t node = cat_nodes_[j];
      if (node < 0 || static_cast<size_t>(node) >= n) {
        return Fail(t, -1, absl::StrCat("categories_nodes[", j, "] = ", node, " outside [0, ", n,
                                        ")"));
      }
      if (cat_of_node_[node] >= 0) return Fail(t, node, "listed twice in categories_nodes");
      const int64_t begin = cat_segments_[j], size = cat_sizes_[j];
      if (begin < 0 || size < 0 || static_cast<uint64_t>(begin) > categories_.size() ||
          static_cast<uint64_t>(size) > categories_.size() - static_cast<uint64_t>(begin)) {
        return Fail(t, node, absl::StrCat("category segment [", begin, ", +", size,
                                          ") outside the ", categories_.size(), " categories"));
      }
      cat_of_node_[node] = static_cast<int64_t>(j);
    }
  }

  // Walk the nodes reachable from the root (explicit stack: depth is untrusted); catches
  // out-of-range, cyclic and shared children here since the unreachable rest is dropped.
  const int32_t n32 = static_cast<int32_t>(n);
  new_id_.assign(n, -1);
  stack_.clear();
  stack_.push_back(0);
  new_id_[0] = 0;
  size_t reached = 1;
  while (!stack_.empty()) {
    const int32_t i = stack_.back();
    stack_.pop_back();
    if (left_[i] == -1) continue;  // a leaf
    for (int32_t c : {left_[i], right_[i]}) {
      if (c < 0 || c >= n32) {
        return Fail(t, i, absl::StrCat("child ", c, " outside [0, ", n, ")"));
      }
      if (new_id_[c] >= 0) {
        return Fail(t, i, absl::StrCat("child ", c, " is reached twice (cycle or shared node)"));
      }
      new_id_[c] = 0;
      stack_.push_back(c);
      ++reached;
    }
  }
  // Number reachable nodes in node-id order (the identity when nothing was pruned).
  int32_t next = 0;
  for (size_t i = 0; i < n; ++i) {
    if (new_id_[i] >= 0) new_id_[i] = next++;
  }

  Tree out;
  out.node_begin = static_cast<uint32_t>(f_.nodes.size());
  out.num_nodes = static_cast<uint32_t>(reached);
  out.leaf_width = static_cast<int32_t>(width);
  if (width == 1) {
    if (!tree_info_.empty()) {
      out.group = tree_info_[t];
    } else {
      out.group = static_cast<int32_t>((t / num_parallel_tree_) % f_.num_outputs);
    }
  }
  if (!indptr_.empty()) {
    while (iteration_cursor_ + 2 < indptr_.size() &&
           static_cast<int64_t>(t) >= indptr_[iteration_cursor_ + 1]) {
      ++iteration_cursor_;
    }
    out.iteration = static_cast<int32_t>(iteration_cursor_);
  } else {
    const int64_t per_round = num_parallel_tree_ * (width > 1 ? 1 : f_.num_outputs);
    out.iteration = static_cast<int32_t>(std::min<int64_t>(t / per_round,
                                                           std::numeric_limits<int32_t>::max()));
  }
  if (static_cast<uint64_t>(f_.nodes.size()) + reached > std::numeric_limits<uint32_t>::max()) {
    return Fail(t, -1, "the model has more than 2^32 nodes");
  }

  for (int32_t i = 0; i < n32; ++i) {
    if (new_id_[i] < 0) continue;
    Node node;
    node.cover = hess_.empty() ? 0.0 : static_cast<double>(hess_[i]);
    if (left_[i] == -1) {
      node.flags = kNodeLeaf;
      node.leaf_id = i;
      node.payload = static_cast<uint32_t>(f_.leaf_values.size());
      if (width == 1) {
        f_.leaf_values.push_back(static_cast<double>(cond_[i]));
      } else if (has_leaf_weights) {
        const int32_t slot = right_[i];
        if (slot < 0 || static_cast<size_t>(slot) >= num_leaf_slots) {
          return Fail(t, i, absl::StrCat("leaf index ", slot, " (right_children) outside the ",
                                         num_leaf_slots, " leaves of leaf_weights"));
        }
        const float* v = leaf_weights_.data() + static_cast<size_t>(slot) * width;
        f_.leaf_values.insert(f_.leaf_values.end(), v, v + width);
      } else {
        const float* v = base_weights_.data() + static_cast<size_t>(i) * width;
        f_.leaf_values.insert(f_.leaf_values.end(), v, v + width);
      }
      if (f_.leaf_values.size() > std::numeric_limits<uint32_t>::max()) {
        return Fail(t, i, "the model has more than 2^32 leaf values");
      }
    } else {
      const int64_t feature = split_index_[i];
      if (feature < 0 || feature >= f_.num_features) {
        return Fail(t, i, absl::StrCat("split feature ", feature, " outside [0, ",
                                       f_.num_features, ")"));
      }
      node.feature = static_cast<int32_t>(feature);
      node.left = new_id_[left_[i]];
      node.right = new_id_[right_[i]];
      if (default_left_[i] != 0) node.flags |= kNodeDefaultLeft;
      if (!split_type_.empty() && split_type_[i] == 1) {
        node.flags |= kNodeCategorical;
        // The listed categories go right; the bitset covers up to the largest one.
        int64_t begin = 0, size = 0, max_cat = -1;
        if (cat_of_node_[i] >= 0) {
          begin = cat_segments_[cat_of_node_[i]];
          size = cat_sizes_[cat_of_node_[i]];
        }
        for (int64_t j = begin; j < begin + size; ++j) {
          const int64_t c = categories_[j];
          if (c < 0 || c >= kMaxCategory) {
            return Fail(t, i, absl::StrCat("category ", c, " outside [0, 2^24)"));
          }
          max_cat = std::max(max_cat, c);
        }
        const uint64_t words = max_cat < 0 ? 1 : static_cast<uint64_t>(max_cat) / 32 + 1;
        if (f_.category_bits.size() + words > category_word_budget_) {
          return Fail(t, i, "category bitsets exceed the size this file can justify");
        }
        node.payload = static_cast<uint32_t>(f_.category_bits.size());
        node.aux = static_cast<uint32_t>(words);
        f_.category_bits.resize(f_.category_bits.size() + words, 0u);
        uint32_t* bits = f_.category_bits.data() + node.payload;
        for (int64_t j = begin; j < begin + size; ++j) {
          const uint32_t c = static_cast<uint32_t>(categories_[j]);
          bits[c >> 5] |= 1u << (c & 31u);
        }
      } else {
        node.threshold = cond_[i];
      }
    }
    f_.nodes.push_back(node);
  }
  f_.trees.push_back(out);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Bare NaN / Infinity / -Infinity tokens (XGBoost writes them; JSON does not allow them).

// Quick pre-check: no such token unless "NaN" or "Infinity" occurs somewhere.
bool MayHaveNonFiniteTokens(std::string_view text) {
  return text.find("NaN") != std::string_view::npos ||
         text.find("Infinity") != std::string_view::npos;
}

// Copies `text` with every NaN / Infinity / -Infinity outside strings turned into a string, which
// the number reader accepts. Returns false when no token was found outside strings.
bool QuoteNonFiniteTokens(std::string_view text, std::string* out) {
  out->clear();
  bool changed = false;
  bool in_string = false;
  size_t copied = 0;  // text[copied, i) is pending
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // skip the escaped character
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    std::string_view token;
    if (c == 'N' && text.substr(i, 3) == "NaN") {
      token = "NaN";
    } else if (c == 'I' && text.substr(i, 8) == "Infinity") {
      token = "Infinity";
    } else if (c == '-' && text.substr(i, 9) == "-Infinity") {
      token = "-Infinity";
    } else {
      continue;
    }
    if (!changed) out->reserve(text.size() + 64);
    changed = true;
    out->append(text.data() + copied, i - copied);
    out->push_back('"');
    out->append(token);
    out->push_back('"');
    i += token.size() - 1;
    copied = i + 1;
  }
  if (changed) out->append(text.data() + copied, text.size() - copied);
  return changed;
}

std::string SourceName(const std::string& source) {
  return source.empty() ? std::string("<memory>") : source;
}

}  // namespace

absl::StatusOr<ForestPtr> LoadXgboostJson(std::string_view text, std::string source) {
  // A UTF-8 byte order mark (some editors and Windows tools write one) is not JSON: skip it.
  if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::string patched;
  if (MayHaveNonFiniteTokens(text) && QuoteNonFiniteTokens(text, &patched)) text = patched;
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text.data(), text.size());
  if (!patched.empty()) std::string().swap(patched);  // the padded copy is what is parsed
  simdjson::dom::element root;
  if (const simdjson::error_code error = parser.parse(padded).get(root); error) {
    return absl::InvalidArgumentError(absl::StrCat(SourceName(source), ": invalid JSON: ",
                                                   simdjson::error_message(error)));
  }
  Forest forest;
  forest.format = ModelFormat::kXgboostJson;
  forest.source = std::move(source);
  XgbReader<JsonRef> reader(&forest, padded.size());
  if (absl::Status s = reader.Read(JsonRef(root)); !s.ok()) return s;
  return BuildForest(std::move(forest));
}

absl::StatusOr<ForestPtr> LoadXgboostUbjson(std::string_view bytes, std::string source) {
  absl::StatusOr<ubjson::Document> doc = ubjson::Document::Parse(bytes);
  if (!doc.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(SourceName(source), ": invalid UBJSON: ", doc.status().message()));
  }
  Forest forest;
  forest.format = ModelFormat::kXgboostUbjson;
  forest.source = std::move(source);
  XgbReader<UbjRef> reader(&forest, bytes.size());
  if (absl::Status s = reader.Read(UbjRef(doc->root())); !s.ok()) return s;
  return BuildForest(std::move(forest));
}

}  // namespace grove
