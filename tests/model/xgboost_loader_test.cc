// XGBoost JSON / UBJSON loader: the library corpus (every XGBoost case of /work/shared/testdata and
// the multi-version fixtures in tests/model/data), hand-written models for every format variant, and
// malformed inputs (each must give an error, none may crash).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "core/model/decision.h"
#include "core/model/loader.h"
#include "tests/testing/corpus.h"
#include "tests/testing/naive_predict.h"

namespace grove {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// ---------------------------------------------------------------------------------------------
// A UBJSON writer with XGBoost's layout: keys and string lengths as 'L' int64, arrays of floats as
// `[$d#L` float32, arrays of integers as `[$l#L` int32 (or `$L`), arrays of booleans as `[$U#L`,
// other arrays as counted untyped `[#L`.

void PutBigEndian(std::string* out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void PutLength(std::string* out, uint64_t n) {
  out->push_back('L');
  PutBigEndian(out, n, 8);
}

void PutFloat32(std::string* out, double d) {
  const float f = static_cast<float>(d);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  PutBigEndian(out, bits, 4);
}

void WriteUbj(const json& j, std::string* out) {
  switch (j.type()) {
    case json::value_t::object:
      out->push_back('{');
      for (const auto& [key, value] : j.items()) {
        PutLength(out, key.size());
        out->append(key);
        WriteUbj(value, out);
      }
      out->push_back('}');
      break;
    case json::value_t::array: {
      bool all_float = !j.empty(), all_int = !j.empty(), all_bool = !j.empty(), fits32 = true;
      for (const json& e : j) {
        all_float &= e.is_number_float();
        all_int &= e.is_number_integer();
        all_bool &= e.is_boolean();
        if (e.is_number_integer()) {
          const int64_t v = e.get<int64_t>();
          fits32 &= v >= INT32_MIN && v <= INT32_MAX;
        }
      }
      if (all_float) {
        out->append("[$d#");
        PutLength(out, j.size());
        for (const json& e : j) PutFloat32(out, e.get<double>());
      } else if (all_int) {
        out->append(fits32 ? "[$l#" : "[$L#");
        PutLength(out, j.size());
        for (const json& e : j) PutBigEndian(out, static_cast<uint64_t>(e.get<int64_t>()), fits32 ? 4 : 8);
      } else if (all_bool) {
        out->append("[$U#");
        PutLength(out, j.size());
        for (const json& e : j) out->push_back(e.get<bool>() ? 1 : 0);
      } else {
        out->append("[#");
        PutLength(out, j.size());
        for (const json& e : j) WriteUbj(e, out);
      }
      break;
    }
    case json::value_t::string: {
      const std::string& s = j.get_ref<const std::string&>();
      out->push_back('S');
      PutLength(out, s.size());
      out->append(s);
      break;
    }
    case json::value_t::boolean: out->push_back(j.get<bool>() ? 'T' : 'F'); break;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      out->push_back('L');
      PutBigEndian(out, static_cast<uint64_t>(j.get<int64_t>()), 8);
      break;
    case json::value_t::number_float:
      out->push_back('d');
      PutFloat32(out, j.get<double>());
      break;
    default: out->push_back('Z'); break;
  }
}

std::string ToUbj(const json& j) {
  std::string out;
  WriteUbj(j, &out);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Hand-written models.

struct TreeSpec {
  std::vector<int> left, right, feature, default_left;
  std::vector<double> cond;
  std::vector<double> hess;  // default: 1 per node
  std::vector<int> split_type;  // default: all numeric
  std::vector<int> cat_nodes, cat_segments, cat_sizes, categories;
};

json TreeJson(const TreeSpec& s, int id, int num_feature = 3) {
  const size_t n = s.left.size();
  std::vector<int> parents(n, 2147483647);
  for (size_t i = 0; i < n; ++i) {
    for (int c : {s.left[i], s.right[i]}) {
      if (s.left[i] >= 0 && c >= 0 && static_cast<size_t>(c) < n) parents[c] = static_cast<int>(i);
    }
  }
  json t;
  t["base_weights"] = std::vector<double>(n, 0.5);
  t["categories"] = s.categories;
  t["categories_nodes"] = s.cat_nodes;
  t["categories_segments"] = s.cat_segments;
  t["categories_sizes"] = s.cat_sizes;
  t["default_left"] = s.default_left;
  t["id"] = id;
  t["left_children"] = s.left;
  t["loss_changes"] = std::vector<double>(n, 0.5);
  t["parents"] = parents;
  t["right_children"] = s.right;
  t["split_conditions"] = s.cond;
  t["split_indices"] = s.feature;
  t["split_type"] = s.split_type.empty() ? std::vector<int>(n, 0) : s.split_type;
  t["sum_hessian"] = s.hess.empty() ? std::vector<double>(n, 1.0) : s.hess;
  t["tree_param"] = {{"num_deleted", "0"},
                     {"num_feature", std::to_string(num_feature)},
                     {"num_nodes", std::to_string(n)},
                     {"size_leaf_vector", "1"}};
  return t;
}

// Tree 0: x0 < 0.5 (missing left) ? 1.0 : (x1 < -1 (missing right) ? -2.0 : 3.0).
TreeSpec Tree0() {
  TreeSpec s;
  s.left = {1, -1, 3, -1, -1};
  s.right = {2, -1, 4, -1, -1};
  s.feature = {0, 0, 1, 0, 0};
  s.default_left = {1, 0, 0, 0, 0};
  s.cond = {0.5, 1.0, -1.0, -2.0, 3.0};
  s.hess = {10, 4, 6, 3, 3};
  return s;
}

// Tree 1: x2 < 0 (missing right) ? 0.25 : -0.25.
TreeSpec Tree1() {
  TreeSpec s;
  s.left = {1, -1, -1};
  s.right = {2, -1, -1};
  s.feature = {2, 0, 0};
  s.default_left = {0, 0, 0};
  s.cond = {0.0, 0.25, -0.25};
  s.hess = {8, 5, 3};
  return s;
}

// A 3.4-style gbtree model over 3 features.
json ModelJson(const std::vector<TreeSpec>& specs, const std::string& objective = "reg:squarederror",
               json base_score = "[5E-1]", int num_class = 0, int num_target = 1,
               int num_feature = 3) {
  json trees = json::array();
  std::vector<int> tree_info, indptr{0};
  for (size_t i = 0; i < specs.size(); ++i) {
    trees.push_back(TreeJson(specs[i], static_cast<int>(i), num_feature));
    tree_info.push_back(0);
    indptr.push_back(static_cast<int>(i) + 1);
  }
  json model;
  model["cats"] = {{"enc", json::array()},
                   {"feature_segments", std::vector<int>{}},
                   {"sorted_idx", std::vector<int>{}}};
  model["gbtree_model_param"] = {{"num_parallel_tree", "1"},
                                 {"num_trees", std::to_string(specs.size())}};
  model["iteration_indptr"] = indptr;
  model["tree_info"] = tree_info;
  model["trees"] = trees;
  json lmp = {{"boost_from_average", "1"},
              {"num_class", std::to_string(num_class)},
              {"num_feature", std::to_string(num_feature)},
              {"num_target", std::to_string(num_target)}};
  if (!base_score.is_null()) lmp["base_score"] = base_score;
  json doc;
  doc["learner"] = {{"attributes", json::object()},
                    {"feature_names", json::array()},
                    {"feature_types", json::array()},
                    {"gradient_booster", {{"model", model}, {"name", "gbtree"}}},
                    {"learner_model_param", lmp},
                    {"objective", {{"name", objective}}}};
  doc["version"] = {3, 4, 1};
  return doc;
}

json SmallModel() { return ModelJson({Tree0(), Tree1()}); }

absl::StatusOr<ForestPtr> LoadJson(const json& j) { return LoadXgboostJson(j.dump(), "test.json"); }
absl::StatusOr<ForestPtr> LoadUbj(const json& j) { return LoadXgboostUbjson(ToUbj(j), "test.ubj"); }

std::vector<double> Margins(const Forest& f, std::vector<float> row) {
  std::vector<double> m(f.num_outputs);
  testing::NaiveMargins(f, row.data(), m.data());
  return m;
}

double Margin(const Forest& f, std::vector<float> row) { return Margins(f, std::move(row))[0]; }

// Every field of two forests, except the format and the source.
void ExpectSameForest(const Forest& a, const Forest& b) {
  EXPECT_EQ(a.num_features, b.num_features);
  EXPECT_EQ(a.num_outputs, b.num_outputs);
  EXPECT_EQ(a.num_iterations, b.num_iterations);
  ASSERT_EQ(a.trees.size(), b.trees.size());
  for (size_t t = 0; t < a.trees.size(); ++t) {
    const Tree &x = a.trees[t], &y = b.trees[t];
    EXPECT_EQ(x.node_begin, y.node_begin) << t;
    EXPECT_EQ(x.num_nodes, y.num_nodes) << t;
    EXPECT_EQ(x.group, y.group) << t;
    EXPECT_EQ(x.leaf_width, y.leaf_width) << t;
    EXPECT_EQ(x.iteration, y.iteration) << t;
    EXPECT_EQ(x.depth, y.depth) << t;
    EXPECT_EQ(x.num_leaves, y.num_leaves) << t;
    EXPECT_EQ(x.weight, y.weight) << t;
  }
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const Node &x = a.nodes[i], &y = b.nodes[i];
    ASSERT_TRUE(x.left == y.left && x.right == y.right && x.feature == y.feature &&
                std::memcmp(&x.threshold, &y.threshold, sizeof(float)) == 0 &&
                x.payload == y.payload && x.aux == y.aux && x.cover == y.cover &&
                x.leaf_id == y.leaf_id && x.flags == y.flags)
        << "node " << i;
  }
  EXPECT_EQ(a.category_bits, b.category_bits);
  EXPECT_EQ(a.leaf_values, b.leaf_values);
  EXPECT_EQ(a.base_margin, b.base_margin);
  EXPECT_EQ(a.objective.name, b.objective.name);
  EXPECT_EQ(a.objective.link, b.objective.link);
  EXPECT_EQ(a.library_version, b.library_version);
  EXPECT_EQ(a.feature_names, b.feature_names);
  EXPECT_EQ(a.feature_types, b.feature_types);
}

// ---------------------------------------------------------------------------------------------
// The corpus.

std::vector<std::string> XgboostCaseDirs() {
  std::vector<std::string> dirs;
  for (const std::string& d : testing::SharedCaseDirs()) {
    if (fs::exists(fs::path(d) / "model.json")) dirs.push_back(d);
  }
  std::error_code ec;
  const fs::path fixtures = fs::path(GROVE_SOURCE_DIR) / "tests" / "model" / "data";
  std::vector<std::string> local;
  for (const auto& entry : fs::directory_iterator(fixtures, ec)) {
    if (fs::exists(entry.path() / "meta.json")) local.push_back(entry.path().string());
  }
  std::sort(local.begin(), local.end());
  dirs.insert(dirs.end(), local.begin(), local.end());
  return dirs;
}

class XgboostCorpusTest : public ::testing::TestWithParam<std::string> {};

TEST_P(XgboostCorpusTest, JsonAndUbjsonReproduceTheLibrary) {
  absl::StatusOr<testing::CorpusCase> c = testing::LoadCorpusCase(GetParam());
  ASSERT_TRUE(c.ok()) << c.status();
  SCOPED_TRACE(c->name);

  std::vector<ForestPtr> forests;
  for (const char* file : {"model.json", "model.ubj"}) {
    const fs::path path = fs::path(c->dir) / file;
    if (!fs::exists(path)) continue;
    absl::StatusOr<ForestPtr> f = LoadModelFile(path.string());
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ((*f)->format, std::string(file) == "model.json" ? ModelFormat::kXgboostJson
                                                               : ModelFormat::kXgboostUbjson);
    forests.push_back(*f);
  }
  ASSERT_FALSE(forests.empty());
  if (forests.size() == 2) ExpectSameForest(*forests[0], *forests[1]);
  const Forest& f = *forests[0];
  EXPECT_EQ(f.num_features, c->num_features);
  EXPECT_EQ(f.num_outputs, c->num_outputs);
  const json& meta = *c->meta;
  if (meta.contains("num_trees")) EXPECT_EQ(f.trees.size(), meta["num_trees"].get<size_t>());
  if (meta.contains("num_leaves_total")) {
    EXPECT_EQ(f.num_leaves, meta["num_leaves_total"].get<int64_t>());
  }
  if (meta.contains("num_categorical_splits")) {
    EXPECT_EQ(f.has_categorical, meta["num_categorical_splits"].get<int>() > 0);
  }
  if (meta.contains("library_version")) {
    EXPECT_EQ(f.library_version, meta["library_version"].get<std::string>());
  }
  if (meta.contains("objective")) EXPECT_EQ(f.objective.name, meta["objective"].get<std::string>());
  if (meta.contains("feature_names") && !f.feature_names.empty()) {
    EXPECT_EQ(f.feature_names, meta["feature_names"].get<std::vector<std::string>>());
  }
  if (meta.contains("derived_base_margin")) {
    const auto want = meta["derived_base_margin"].get<std::vector<double>>();
    ASSERT_EQ(f.base_margin.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_NEAR(f.base_margin[k], want[k], 1e-5 * std::max(1.0, std::fabs(want[k]))) << k;
    }
  }

  const int F = c->num_features;
  if (c->leaf) {
    ASSERT_EQ(c->leaf->rows, c->rows);
    ASSERT_EQ(c->leaf->cols, static_cast<int64_t>(f.trees.size()));
    int64_t mismatches = 0;
    for (int64_t r = 0; r < c->rows; ++r) {
      for (int t = 0; t < static_cast<int>(f.trees.size()); ++t) {
        const int got = testing::NaiveLeafId(f, t, c->X.data() + r * F);
        if (got != static_cast<int>(c->leaf->At(r, t)) && mismatches++ < 5) {
          ADD_FAILURE() << "row " << r << " tree " << t << ": leaf " << got << ", want "
                        << c->leaf->At(r, t);
        }
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
  if (c->margin) {
    ASSERT_EQ(c->margin->cols, f.num_outputs);
    std::vector<double> margins(static_cast<size_t>(c->rows) * f.num_outputs);
    for (int64_t r = 0; r < c->rows; ++r) {
      testing::NaiveMargins(f, c->X.data() + r * F, margins.data() + r * f.num_outputs);
    }
    const testing::ErrorReport err = testing::MaxRelError(margins, *c->margin);
    EXPECT_LE(err.max_error, 1e-5) << err.ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, XgboostCorpusTest, ::testing::ValuesIn(XgboostCaseDirs()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = fs::path(info.param).filename().string();
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

TEST(XgboostCorpus, SharedCorpusHasEveryXgboostCase) {
  std::vector<std::string> shared;
  for (const std::string& d : testing::SharedCaseDirs()) {
    if (fs::exists(fs::path(d) / "model.json")) shared.push_back(d);
  }
  if (shared.empty()) GTEST_SKIP() << "no shared corpus at " GROVE_SOURCE_DIR "/../shared/testdata";
  EXPECT_GE(shared.size(), 17u);  // 13 synthetic + 4 real XGBoost cases
}

TEST(XgboostCorpus, LargeBenchmarkModelLoads) {
  const std::string path = GROVE_SOURCE_DIR "/../shared/bench-models/adult-large.ubj";
  if (!fs::exists(path)) GTEST_SKIP() << "no " << path;
  absl::StatusOr<ForestPtr> f = LoadModelFile(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->trees.size(), 1000u);
  EXPECT_EQ((*f)->num_leaves, 449297);
  EXPECT_EQ((*f)->max_depth, 16);
  EXPECT_EQ((*f)->objective.link, Link::kSigmoid);
}

// ---------------------------------------------------------------------------------------------
// Hand-written models.

TEST(XgboostLoader, SmallModelJsonAndUbjson) {
  absl::StatusOr<ForestPtr> j = LoadJson(SmallModel());
  ASSERT_TRUE(j.ok()) << j.status();
  absl::StatusOr<ForestPtr> u = LoadUbj(SmallModel());
  ASSERT_TRUE(u.ok()) << u.status();
  ExpectSameForest(**j, **u);
  // nlohmann's own UBJSON encodings: float64 'D', smallest int markers, typed/counted or plain.
  const std::vector<uint8_t> compact = json::to_ubjson(SmallModel(), true, true);
  const std::vector<uint8_t> plain = json::to_ubjson(SmallModel());
  for (const auto& bytes : {compact, plain}) {
    absl::StatusOr<ForestPtr> v = LoadXgboostUbjson(
        std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), "x.ubj");
    ASSERT_TRUE(v.ok()) << v.status();
    ExpectSameForest(**j, **v);
  }

  const Forest& f = **j;
  EXPECT_EQ(f.format, ModelFormat::kXgboostJson);
  EXPECT_EQ(f.source, "test.json");
  EXPECT_EQ(f.library_version, "3.4.1");
  EXPECT_EQ(f.num_features, 3);
  EXPECT_EQ(f.num_outputs, 1);
  EXPECT_EQ(f.num_iterations, 2);
  EXPECT_EQ(f.objective.link, Link::kIdentity);
  EXPECT_EQ(f.base_margin, std::vector<double>{0.5});
  ASSERT_EQ(f.trees.size(), 2u);
  EXPECT_EQ(f.trees[1].node_begin, 5u);
  EXPECT_EQ(f.trees[0].depth, 2);
  EXPECT_EQ(f.trees[0].num_leaves, 3);
  const Node& root = f.nodes[0];
  EXPECT_EQ(root.feature, 0);
  EXPECT_EQ(root.threshold, 0.5f);
  EXPECT_TRUE(root.default_left());
  EXPECT_FALSE(root.is_categorical());
  EXPECT_EQ(root.cover, 10.0);
  EXPECT_EQ(root.left, 1);
  EXPECT_EQ(root.right, 2);
  const Node& leaf = f.nodes[4];
  EXPECT_TRUE(leaf.is_leaf());
  EXPECT_EQ(leaf.leaf_id, 4);
  EXPECT_EQ(f.leaf_values[leaf.payload], 3.0);

  EXPECT_DOUBLE_EQ(Margin(f, {0.4f, 0, 1}), 0.5 + 1.0 - 0.25);
  EXPECT_DOUBLE_EQ(Margin(f, {0.5f, -1, -1}), 0.5 + 3.0 + 0.25);  // equality goes right
  EXPECT_DOUBLE_EQ(Margin(f, {0.6f, -1.5f, 0}), 0.5 - 2.0 - 0.25);
  EXPECT_DOUBLE_EQ(Margin(f, {kNan, -2, kNan}), 0.5 + 1.0 - 0.25);  // default directions
  EXPECT_DOUBLE_EQ(Margin(f, {1, kNan, -1}), 0.5 + 3.0 + 0.25);
}

struct BaseScoreCase {
  json base_score;
  std::string objective;
  int num_class;
  std::vector<double> want;  // margin-space base per output
};

TEST(XgboostLoader, EveryBaseScoreForm) {
  const double logit_quarter = std::log(0.25 / 0.75);
  const double f03 = static_cast<double>(0.3f);
  const std::vector<BaseScoreCase> cases = {
      {"0.5", "reg:squarederror", 0, {0.5}},
      {"5E-1", "reg:squarederror", 0, {0.5}},
      {"[5E-1]", "reg:squarederror", 0, {0.5}},
      {"0.500000", "reg:squarederror", 0, {0.5}},
      {0.5, "reg:squarederror", 0, {0.5}},
      {json::array({0.5}), "reg:squarederror", 0, {0.5}},
      {nullptr, "reg:squarederror", 0, {0.5}},  // absent: XGBoost's default 0.5
      {"[-2.4788206E0]", "reg:squarederror", 0, {static_cast<double>(-2.4788206f)}},
      {"2.5E-1", "binary:logistic", 0, {logit_quarter}},
      {"[2.5E-1]", "reg:logistic", 0, {logit_quarter}},
      {"0.500000", "binary:logistic", 0, {0.0}},
      {"3E-1", "binary:logitraw", 0, {f03}},
      {"3E-1", "binary:hinge", 0, {f03}},
      {"[2E0]", "count:poisson", 0, {std::log(2.0)}},
      {"2", "reg:gamma", 0, {std::log(2.0)}},
      {"2", "reg:tweedie", 0, {std::log(2.0)}},
      {"2", "survival:cox", 0, {std::log(2.0)}},
      {"2", "survival:aft", 0, {std::log(2.0)}},
      {"3E-1", "reg:absoluteerror", 0, {f03}},
      {"3E-1", "rank:ndcg", 0, {f03}},
      {"[1E-1,2E-1,3E-1]", "multi:softprob", 3, {0.1f, 0.2f, f03}},
      {"5E-1", "multi:softprob", 3, {0.5, 0.5, 0.5}},  // a scalar applies to every output
      {"[-1E0, 0,1E0]", "multi:softmax", 3, {-1, 0, 1}},
  };
  for (const BaseScoreCase& c : cases) {
    SCOPED_TRACE(c.base_score.dump() + " " + c.objective);
    const json m = ModelJson({Tree0(), Tree1()}, c.objective, c.base_score, c.num_class);
    for (const auto& f : {LoadJson(m), LoadUbj(m)}) {
      ASSERT_TRUE(f.ok()) << f.status();
      ASSERT_EQ((*f)->base_margin.size(), c.want.size());
      for (size_t k = 0; k < c.want.size(); ++k) {
        EXPECT_NEAR((*f)->base_margin[k], c.want[k], 1e-12) << k;
      }
    }
  }
}

TEST(XgboostLoader, ObjectiveLinks) {
  const std::vector<std::pair<std::string, Link>> cases = {
      {"reg:squarederror", Link::kIdentity}, {"binary:logistic", Link::kSigmoid},
      {"reg:logistic", Link::kSigmoid},      {"binary:logitraw", Link::kIdentity},
      {"binary:hinge", Link::kHinge},        {"count:poisson", Link::kExp},
      {"reg:gamma", Link::kExp},             {"reg:tweedie", Link::kExp},
      {"survival:cox", Link::kExp},          {"survival:aft", Link::kExp},
      {"rank:pairwise", Link::kIdentity},    {"reg:pseudohubererror", Link::kIdentity},
  };
  for (const auto& [objective, link] : cases) {
    absl::StatusOr<ForestPtr> f = LoadJson(ModelJson({Tree0()}, objective, "5E-1"));
    ASSERT_TRUE(f.ok()) << objective << ": " << f.status();
    EXPECT_EQ((*f)->objective.link, link) << objective;
    EXPECT_EQ((*f)->objective.sigmoid_alpha, 1.0);
  }
  for (const auto& [objective, link] :
       std::vector<std::pair<std::string, Link>>{{"multi:softprob", Link::kSoftmax},
                                                 {"multi:softmax", Link::kArgmax}}) {
    absl::StatusOr<ForestPtr> f = LoadJson(ModelJson({Tree0()}, objective, "5E-1", 3));
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ((*f)->objective.link, link);
    EXPECT_EQ((*f)->num_outputs, 3);
  }
  absl::StatusOr<ForestPtr> unknown = LoadJson(ModelJson({Tree0()}, "reg:mystery", "5E-1"));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(unknown.status().message().find("reg:mystery"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("binary:logistic"), std::string::npos);
}

TEST(XgboostLoader, BadBaseScores) {
  const std::vector<std::pair<json, std::string>> cases = {
      {"abc", "reg:squarederror"},
      {"[1E0,2E0]", "reg:squarederror"},  // 2 values for 1 output
      {"[", "reg:squarederror"},
      {"[]", "reg:squarederror"},
      {"[1,,2]", "reg:squarederror"},
      {"1.5", "binary:logistic"},
      {"0", "binary:logistic"},
      {"0", "count:poisson"},
      {"-1", "reg:gamma"},
      {"NaN", "reg:squarederror"},
      {json::object(), "reg:squarederror"},
  };
  for (const auto& [base, objective] : cases) {
    absl::StatusOr<ForestPtr> f = LoadJson(ModelJson({Tree0()}, objective, base));
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument)
        << base.dump() << " " << objective << ": " << f.status();
  }
}

// Dart: 3.4 layout (gbtree + model.weight_drop), 1.0-3.3 layout (dart + gbtree.model + weight_drop
// beside gbtree), and variants with weight_drop inside gbtree / trees directly under gbtree.
TEST(XgboostLoader, DartLayouts) {
  const json base = ModelJson({Tree0(), Tree1()});
  const json& model = base["learner"]["gradient_booster"]["model"];
  std::vector<std::pair<std::string, json>> layouts;
  {
    json doc = base;
    doc["learner"]["gradient_booster"]["model"]["weight_drop"] = {0.5, 2.0};
    layouts.emplace_back("3.4 gbtree", doc);
  }
  {
    json doc = base;
    doc["learner"]["gradient_booster"] = {
        {"name", "dart"},
        {"gbtree", {{"name", "gbtree"}, {"model", model}}},
        {"weight_drop", {0.5, 2.0}}};
    layouts.emplace_back("pre-3.4 dart", doc);
  }
  {
    json doc = base;
    doc["learner"]["gradient_booster"] = {
        {"name", "dart"},
        {"gbtree", {{"name", "gbtree"}, {"model", model}, {"weight_drop", {0.5, 2.0}}}}};
    layouts.emplace_back("dart, weight_drop in gbtree", doc);
  }
  {
    json doc = base;
    json inner = model;
    inner["weight_drop"] = {0.5, 2.0};
    doc["learner"]["gradient_booster"] = {{"name", "dart"}, {"gbtree", inner}};
    layouts.emplace_back("dart, trees directly under gbtree", doc);
  }
  for (const auto& [name, doc] : layouts) {
    SCOPED_TRACE(name);
    for (const auto& f : {LoadJson(doc), LoadUbj(doc)}) {
      ASSERT_TRUE(f.ok()) << f.status();
      ASSERT_EQ((*f)->trees.size(), 2u);
      EXPECT_EQ((*f)->trees[0].weight, 0.5);
      EXPECT_EQ((*f)->trees[1].weight, 2.0);
      EXPECT_DOUBLE_EQ(Margin(**f, {0.4f, 0, 1}), 0.5 + 0.5 * 1.0 - 2.0 * 0.25);
    }
  }
  // Shorter than the trees: the missing weights are 1.
  json shorter = base;
  shorter["learner"]["gradient_booster"]["model"]["weight_drop"] = {0.5};
  absl::StatusOr<ForestPtr> f = LoadJson(shorter);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->trees[0].weight, 0.5);
  EXPECT_EQ((*f)->trees[1].weight, 1.0);
  // Longer than the trees, or not numbers: errors.
  json longer = base;
  longer["learner"]["gradient_booster"]["model"]["weight_drop"] = {0.5, 1.0, 1.0};
  EXPECT_EQ(LoadJson(longer).status().code(), absl::StatusCode::kInvalidArgument);
  json bad = base;
  bad["learner"]["gradient_booster"]["model"]["weight_drop"] = {"x", 1.0};
  EXPECT_EQ(LoadJson(bad).status().code(), absl::StatusCode::kInvalidArgument);
  json missing_gbtree = base;
  missing_gbtree["learner"]["gradient_booster"] = {{"name", "dart"}, {"weight_drop", {1.0}}};
  EXPECT_EQ(LoadJson(missing_gbtree).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(XgboostLoader, LinearAndUnknownBoostersAreRefused) {
  json doc = SmallModel();
  doc["learner"]["gradient_booster"] = {
      {"name", "gblinear"}, {"model", {{"weights", {0.1, 0.2, 0.3, 0.0}}}}};
  for (const auto& f : {LoadJson(doc), LoadUbj(doc)}) {
    EXPECT_EQ(f.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_NE(f.status().message().find("gblinear"), std::string::npos) << f.status();
  }
  doc["learner"]["gradient_booster"]["name"] = "mytrees";
  EXPECT_EQ(LoadJson(doc).status().code(), absl::StatusCode::kUnimplemented);
}

TreeSpec CategoricalTree(std::vector<int> categories, int default_left) {
  TreeSpec s;
  s.left = {1, -1, -1};
  s.right = {2, -1, -1};
  s.feature = {1, 0, 0};
  s.default_left = {default_left, 0, 0};
  s.cond = {1e-45, -1.0, 1.0};
  s.split_type = {1, 0, 0};
  s.cat_nodes = {0};
  s.cat_segments = {0};
  s.cat_sizes = {static_cast<int>(categories.size())};
  s.categories = std::move(categories);
  return s;
}

// Listed categories go right; unlisted, negative, beyond-the-bitset and >= 2^24 values go left;
// fractional values truncate; NaN follows default_left.
TEST(XgboostLoader, CategoricalRoutingAtTheBoundaries) {
  const json doc = ModelJson({CategoricalTree({1, 31, 32, 63}, 1)});
  for (const auto& f : {LoadJson(doc), LoadUbj(doc)}) {
    ASSERT_TRUE(f.ok()) << f.status();
    const Forest& forest = **f;
    EXPECT_TRUE(forest.has_categorical);
    const Node& root = forest.nodes[0];
    EXPECT_TRUE(root.flags & kNodeCategorical);
    EXPECT_FALSE(root.flags & kNodeCategoryInSetGoesLeft);
    EXPECT_FALSE(root.flags & kNodeCategoryTruncate);
    EXPECT_EQ(root.aux, 2u);  // categories up to 63: two words
    EXPECT_EQ(forest.category_bits[root.payload], (1u << 1) | (1u << 31));
    EXPECT_EQ(forest.category_bits[root.payload + 1], (1u << 0) | (1u << 31));
    auto value = [&](float x) { return Margin(forest, {0, x, 0}) - 0.5; };
    for (float x : {1.0f, 31.0f, 32.0f, 63.0f, 1.5f, 31.99f}) EXPECT_EQ(value(x), 1.0) << x;
    for (float x : {0.0f, 0.999f, 2.0f, 30.0f, 33.0f, 62.0f, 64.0f, 1000.0f, 16777216.0f, 3e30f,
                    -0.5f, -1.0f, -32.0f, std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
      EXPECT_EQ(value(x), -1.0) << x;
    }
    EXPECT_EQ(value(kNan), -1.0);  // default_left
  }
  absl::StatusOr<ForestPtr> right = LoadJson(ModelJson({CategoricalTree({1, 31, 32, 63}, 0)}));
  ASSERT_TRUE(right.ok()) << right.status();
  EXPECT_EQ(Margin(**right, {0, kNan, 0}) - 0.5, 1.0);

  // The largest valid category, 2^24 - 1.
  absl::StatusOr<ForestPtr> big = LoadJson(ModelJson({CategoricalTree({16777215}, 0)}));
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ((*big)->nodes[0].aux, 16777216u / 32);
  EXPECT_EQ(Margin(**big, {0, 16777215.0f, 0}) - 0.5, 1.0);
  EXPECT_EQ(Margin(**big, {0, 16777214.0f, 0}) - 0.5, -1.0);

  // Invalid categories in the model are errors.
  for (int bad : {-1, 16777216}) {
    absl::StatusOr<ForestPtr> f = LoadJson(ModelJson({CategoricalTree({2, bad}, 0)}));
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(f.status().message().find("tree 0 node 0"), std::string::npos) << f.status();
  }
}

TEST(XgboostLoader, OneHotSplit) {
  const json doc = ModelJson({CategoricalTree({2}, 0)});
  for (const auto& f : {LoadJson(doc), LoadUbj(doc)}) {
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ((*f)->nodes[0].aux, 1u);
    for (float x = -2; x <= 40; x += 0.5f) {
      EXPECT_EQ(Margin(**f, {0, x, 0}) - 0.5, (x >= 2.0f && x < 3.0f) ? 1.0 : -1.0) << x;
    }
    EXPECT_EQ(Margin(**f, {0, kNan, 0}) - 0.5, 1.0);
  }
}

TEST(XgboostLoader, CategoricalNodeWithoutCategoriesSendsEverythingLeft) {
  TreeSpec s = CategoricalTree({}, 0);
  s.cat_nodes.clear();
  s.cat_segments.clear();
  s.cat_sizes.clear();
  absl::StatusOr<ForestPtr> f = LoadJson(ModelJson({s}));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(Margin(**f, {0, 0, 0}) - 0.5, -1.0);
  EXPECT_EQ(Margin(**f, {0, 5, 0}) - 0.5, -1.0);
  EXPECT_EQ(Margin(**f, {0, kNan, 0}) - 0.5, 1.0);
}

TEST(XgboostLoader, InconsistentCategoryArrays) {
  std::vector<std::function<void(TreeSpec&)>> mutations = {
      [](TreeSpec& s) { s.cat_sizes = {5}; },        // segment beyond the categories
      [](TreeSpec& s) { s.cat_segments = {-1}; },
      [](TreeSpec& s) { s.cat_nodes = {7}; },        // node out of range
      [](TreeSpec& s) { s.cat_nodes = {0, 0}; s.cat_segments = {0, 0}; s.cat_sizes = {1, 1}; },
      [](TreeSpec& s) { s.cat_sizes = {}; },         // lengths differ
      [](TreeSpec& s) { s.split_type = {2, 0, 0}; },
      [](TreeSpec& s) { s.split_type = {1, 0}; },
  };
  for (size_t i = 0; i < mutations.size(); ++i) {
    TreeSpec s = CategoricalTree({1, 2}, 0);
    mutations[i](s);
    absl::StatusOr<ForestPtr> f = LoadJson(ModelJson({s}));
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << i << ": " << f.status();
    EXPECT_NE(f.status().message().find("tree 0"), std::string::npos) << f.status();
  }
}

// Bare NaN / Infinity / -Infinity tokens (XGBoost writes them) load; the same words inside strings
// are left alone.
TEST(XgboostLoader, NonFiniteTokens) {
  json doc = SmallModel();
  doc["learner"]["feature_names"] = {"NaN", "-Infinity", "x \"NaN\" Infinity"};
  std::string text = doc.dump();
  auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  // loss_changes of tree 0 and the threshold of tree 1's root.
  replace("\"loss_changes\":[0.5,0.5,0.5,0.5,0.5]", "\"loss_changes\":[NaN,Infinity,-Infinity, NaN ,0.5]");
  replace("\"split_conditions\":[0.0,0.25,-0.25]", "\"split_conditions\":[-Infinity,0.25,-0.25]");
  absl::StatusOr<ForestPtr> f = LoadXgboostJson(text, "nan.json");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->feature_names,
            (std::vector<std::string>{"NaN", "-Infinity", "x \"NaN\" Infinity"}));
  EXPECT_EQ((*f)->nodes[5].threshold, -std::numeric_limits<float>::infinity());
  EXPECT_DOUBLE_EQ(Margin(**f, {0.4f, 0, -100}), 0.5 + 1.0 - 0.25);  // x < -inf never holds

  // Infinity as a threshold: everything finite goes left.
  std::string inf_text = SmallModel().dump();
  inf_text.replace(inf_text.find("[0.0,0.25,-0.25]"), 16, "[Infinity,0.25,-0.25]");
  f = LoadXgboostJson(inf_text, "inf.json");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_DOUBLE_EQ(Margin(**f, {0.4f, 0, 1e30f}), 0.5 + 1.0 + 0.25);

  // NaN threshold or NaN leaf value: errors naming tree and node.
  std::string nan_threshold = SmallModel().dump();
  nan_threshold.replace(nan_threshold.find("[0.0,0.25,-0.25]"), 16, "[NaN,0.25,-0.25]");
  f = LoadXgboostJson(nan_threshold, "nan.json");
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("nan.json: tree 1 node 0"), std::string::npos) << f.status();
  std::string nan_leaf = SmallModel().dump();
  nan_leaf.replace(nan_leaf.find("[0.0,0.25,-0.25]"), 16, "[0.0,NaN,-0.25]");
  f = LoadXgboostJson(nan_leaf, "nan.json");
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("tree 1 node 1"), std::string::npos) << f.status();
  // The same in UBJSON (binary NaN).
  json nan_doc = SmallModel();
  nan_doc["learner"]["gradient_booster"]["model"]["trees"][0]["split_conditions"][2] =
      std::numeric_limits<double>::quiet_NaN();
  f = LoadUbj(nan_doc);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("tree 0 node 2"), std::string::npos) << f.status();
}

// The layout XGBoost 1.0 wrote: booleans for default_left, base_score "0.500000", no split_type,
// categories, iteration_indptr, num_target or num_parallel_tree, size_leaf_vector "0".
TEST(XgboostLoader, Version1Layout) {
  // Class 0: two Tree0, class 1: Tree1 + Tree0, class 2: two Tree1.
  json doc = ModelJson({Tree0(), Tree1(), Tree1(), Tree0(), Tree0(), Tree1()}, "multi:softprob",
                       "0.500000", 3);
  json& model = doc["learner"]["gradient_booster"]["model"];
  model.erase("iteration_indptr");
  model.erase("cats");
  model["gbtree_model_param"] = {{"num_trees", "6"}, {"size_leaf_vector", "0"}};
  model["tree_info"] = {0, 1, 2, 0, 1, 2};
  for (json& t : model["trees"]) {
    for (const char* key : {"split_type", "categories", "categories_nodes", "categories_segments",
                            "categories_sizes"}) {
      t.erase(key);
    }
    std::vector<bool> dl;
    for (const json& v : t["default_left"]) dl.push_back(v.get<int>() != 0);
    t["default_left"] = dl;
    t["tree_param"] = {{"num_feature", "3"},
                       {"num_nodes", t["tree_param"]["num_nodes"]},
                       {"size_leaf_vector", "0"}};
  }
  doc["learner"]["learner_model_param"] = {
      {"base_score", "0.500000"}, {"num_class", "3"}, {"num_feature", "3"}};
  doc["learner"].erase("feature_names");
  doc["learner"].erase("feature_types");
  doc["version"] = {1, 0, 0};
  for (const auto& f : {LoadJson(doc), LoadUbj(doc)}) {
    ASSERT_TRUE(f.ok()) << f.status();
    const Forest& forest = **f;
    EXPECT_EQ(forest.library_version, "1.0.0");
    EXPECT_EQ(forest.num_outputs, 3);
    EXPECT_EQ(forest.num_iterations, 2);  // 3 trees per round
    for (int t = 0; t < 6; ++t) {
      EXPECT_EQ(forest.trees[t].group, t % 3);
      EXPECT_EQ(forest.trees[t].iteration, t / 3);
    }
    EXPECT_TRUE(forest.nodes[0].default_left());
    const std::vector<double> m = Margins(forest, {0.4f, 0, 1});
    EXPECT_DOUBLE_EQ(m[0], 0.5 + 2 * 1.0);
    EXPECT_DOUBLE_EQ(m[1], 0.5 + 1.0 - 0.25);
    EXPECT_DOUBLE_EQ(m[2], 0.5 - 2 * 0.25);
    EXPECT_TRUE(forest.feature_names.empty());
  }
}

TEST(XgboostLoader, RandomForestIterations) {
  json doc = ModelJson({Tree0(), Tree1(), Tree0(), Tree1()});
  json& model = doc["learner"]["gradient_booster"]["model"];
  model["gbtree_model_param"]["num_parallel_tree"] = "2";
  model.erase("iteration_indptr");
  absl::StatusOr<ForestPtr> f = LoadJson(doc);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->num_iterations, 2);
  EXPECT_EQ((*f)->trees[1].iteration, 0);
  EXPECT_EQ((*f)->trees[2].iteration, 1);
  // iteration_indptr wins when present (and may hold empty rounds).
  model["iteration_indptr"] = {0, 3, 3, 4};
  f = LoadJson(doc);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->trees[2].iteration, 0);
  EXPECT_EQ((*f)->trees[3].iteration, 2);
  EXPECT_EQ((*f)->num_iterations, 3);
}

json VectorLeafModel(bool leaf_weights, std::vector<int> leaf_slots) {
  TreeSpec s;
  s.left = {1, -1, -1};
  s.right = {2, -1, -1};
  s.feature = {0, 0, 0};
  s.default_left = {0, 0, 0};
  s.cond = {0.5, 1e-45, 1e-45};
  json doc = ModelJson({s}, "reg:squarederror", "[1E0,2E0]", 0, 2);
  json& t = doc["learner"]["gradient_booster"]["model"]["trees"][0];
  t["tree_param"]["size_leaf_vector"] = "2";
  if (leaf_weights) {
    t["right_children"] = {2, leaf_slots[0], leaf_slots[1]};  // 3.x: a leaf's right child is its slot
    t["leaf_weights"] = {10.0, 20.0, 30.0, 40.0};
    t["base_weights"] = {0.0, 0.0};
  } else {
    t["base_weights"] = {0.0, 0.0, 10.0, 20.0, 30.0, 40.0};  // 2.x: K values per node
  }
  return doc;
}

TEST(XgboostLoader, VectorLeaves) {
  for (const auto& doc : {VectorLeafModel(true, {0, 1}), VectorLeafModel(false, {})}) {
    for (const auto& f : {LoadJson(doc), LoadUbj(doc)}) {
      ASSERT_TRUE(f.ok()) << f.status();
      EXPECT_TRUE((*f)->has_vector_leaves);
      EXPECT_EQ((*f)->trees[0].leaf_width, 2);
      EXPECT_EQ(Margins(**f, {0, 0, 0}), (std::vector<double>{11, 22}));
      EXPECT_EQ(Margins(**f, {1, 0, 0}), (std::vector<double>{31, 42}));
    }
  }
  absl::StatusOr<ForestPtr> swapped = LoadJson(VectorLeafModel(true, {1, 0}));
  ASSERT_TRUE(swapped.ok()) << swapped.status();
  EXPECT_EQ(Margins(**swapped, {0, 0, 0}), (std::vector<double>{31, 42}));
  EXPECT_EQ(LoadJson(VectorLeafModel(true, {0, 2})).status().code(),
            absl::StatusCode::kInvalidArgument);
  json wrong_width = VectorLeafModel(true, {0, 1});
  wrong_width["learner"]["gradient_booster"]["model"]["trees"][0]["tree_param"]
             ["size_leaf_vector"] = "3";
  EXPECT_EQ(LoadJson(wrong_width).status().code(), absl::StatusCode::kInvalidArgument);
  json short_weights = VectorLeafModel(false, {});
  short_weights["learner"]["gradient_booster"]["model"]["trees"][0]["base_weights"] = {1.0, 2.0};
  EXPECT_EQ(LoadJson(short_weights).status().code(), absl::StatusCode::kInvalidArgument);
}

// Pruning leaves deleted, unreachable nodes in the arrays: they are dropped, leaf ids stay.
TEST(XgboostLoader, UnreachableNodesAreDropped) {
  TreeSpec s;
  s.left = {1, -1, -1, -1, 5, -1, -1};
  s.right = {4, -1, -1, -1, 6, -1, -1};
  s.feature = {0, 2147483647, 2147483647, 0, 1, 0, 0};
  s.default_left = {0, 0, 0, 0, 0, 0, 0};
  s.cond = {0.0, 1.0, 9.0, 9.0, 0.0, 2.0, 3.0};
  absl::StatusOr<ForestPtr> f = LoadJson(ModelJson({s}));
  ASSERT_TRUE(f.ok()) << f.status();
  const Forest& forest = **f;
  EXPECT_EQ(forest.trees[0].num_nodes, 5u);
  EXPECT_EQ(forest.nodes[0].right, 2);  // node 4 renumbered
  EXPECT_EQ(testing::NaiveLeafId(forest, 0, std::vector<float>{1, 1, 0}.data()), 6);
  EXPECT_EQ(testing::NaiveLeafId(forest, 0, std::vector<float>{-1, 1, 0}.data()), 1);
  EXPECT_DOUBLE_EQ(Margin(forest, {1, -1, 0}), 0.5 + 2.0);
}

// ---------------------------------------------------------------------------------------------
// Malformed input: every case is an error, none crashes.

void ExpectInvalid(const json& doc, const std::string& needle = "") {
  for (const auto& f : {LoadJson(doc), LoadUbj(doc)}) {
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << f.status();
    EXPECT_NE(f.status().message().find("test."), std::string::npos) << f.status();
    if (!needle.empty()) {
      EXPECT_NE(f.status().message().find(needle), std::string::npos) << f.status();
    }
  }
}

json& TreeAt(json& doc, int t) { return doc["learner"]["gradient_booster"]["model"]["trees"][t]; }

TEST(XgboostMalformed, WrongTypesAndMissingFields) {
  struct Mutation {
    std::string name;
    std::function<void(json&)> apply;
    std::string needle;
  };
  const std::vector<Mutation> mutations = {
      {"no learner", [](json& d) { d.erase("learner"); }, "learner"},
      {"learner array", [](json& d) { d["learner"] = json::array(); }, "learner"},
      {"no model param", [](json& d) { d["learner"].erase("learner_model_param"); },
       "learner_model_param"},
      {"num_feature text", [](json& d) { d["learner"]["learner_model_param"]["num_feature"] = "abc"; },
       "num_feature"},
      {"num_feature 0", [](json& d) { d["learner"]["learner_model_param"]["num_feature"] = "0"; },
       "num_feature"},
      {"num_feature missing", [](json& d) { d["learner"]["learner_model_param"].erase("num_feature"); },
       "num_feature"},
      {"num_class negative", [](json& d) { d["learner"]["learner_model_param"]["num_class"] = "-2"; },
       "num_class"},
      {"huge num_class",
       [](json& d) { d["learner"]["learner_model_param"]["num_class"] = "2000000000"; }, "outputs"},
      {"no objective", [](json& d) { d["learner"].erase("objective"); }, "objective"},
      {"objective name number", [](json& d) { d["learner"]["objective"]["name"] = 3; }, "objective"},
      {"no booster", [](json& d) { d["learner"].erase("gradient_booster"); }, "gradient_booster"},
      {"booster name missing", [](json& d) { d["learner"]["gradient_booster"].erase("name"); },
       "name"},
      {"trees object",
       [](json& d) { d["learner"]["gradient_booster"]["model"]["trees"] = json::object(); }, "trees"},
      {"trees of numbers",
       [](json& d) { d["learner"]["gradient_booster"]["model"]["trees"] = {1, 2}; }, "tree"},
      {"no trees", [](json& d) { d["learner"]["gradient_booster"]["model"].erase("trees"); },
       "trees"},
      {"empty trees",
       [](json& d) {
         auto& m = d["learner"]["gradient_booster"]["model"];
         m["trees"] = json::array();
         m["tree_info"] = json::array();
         m["iteration_indptr"] = {0};
         m["gbtree_model_param"]["num_trees"] = "0";
       },
       "no trees"},
      {"num_trees mismatch",
       [](json& d) {
         d["learner"]["gradient_booster"]["model"]["gbtree_model_param"]["num_trees"] = "3";
       },
       "num_trees"},
      {"tree_info length",
       [](json& d) { d["learner"]["gradient_booster"]["model"]["tree_info"] = {0}; }, "tree_info"},
      {"tree_info group", [](json& d) { d["learner"]["gradient_booster"]["model"]["tree_info"] = {0, 4}; },
       "tree 1"},
      {"indptr end",
       [](json& d) { d["learner"]["gradient_booster"]["model"]["iteration_indptr"] = {0, 5}; },
       "iteration_indptr"},
      {"indptr decreasing",
       [](json& d) { d["learner"]["gradient_booster"]["model"]["iteration_indptr"] = {0, 2, 1, 2}; },
       "iteration_indptr"},
      {"num_parallel_tree 0",
       [](json& d) {
         d["learner"]["gradient_booster"]["model"]["gbtree_model_param"]["num_parallel_tree"] = "0";
       },
       "num_parallel_tree"},
      {"feature_names numbers", [](json& d) { d["learner"]["feature_names"] = {1, 2, 3}; },
       "feature_names"},
      {"feature_names count", [](json& d) { d["learner"]["feature_names"] = {"a", "b"}; },
       "feature name"},
      {"tree not object", [](json& d) { TreeAt(d, 1) = 7; }, "tree 1"},
      {"tree_param not object", [](json& d) { TreeAt(d, 1)["tree_param"] = "x"; }, "tree 1"},
      {"num_nodes mismatch", [](json& d) { TreeAt(d, 1)["tree_param"]["num_nodes"] = "4"; },
       "tree 1"},
      {"left_children text", [](json& d) { TreeAt(d, 0)["left_children"] = "abc"; }, "tree 0"},
      {"left_children fraction", [](json& d) { TreeAt(d, 0)["left_children"][0] = 1.5; },
       "tree 0"},
      {"left_children huge", [](json& d) { TreeAt(d, 0)["left_children"][0] = 1e12; }, "tree 0"},
      {"left_children missing", [](json& d) { TreeAt(d, 0).erase("left_children"); }, "tree 0"},
      {"empty tree",
       [](json& d) {
         for (const char* k : {"left_children", "right_children", "split_indices",
                               "split_conditions", "default_left", "split_type", "sum_hessian"}) {
           TreeAt(d, 0)[k] = json::array();
         }
         TreeAt(d, 0)["tree_param"]["num_nodes"] = "0";
       },
       "tree 0"},
      {"split_conditions text", [](json& d) { TreeAt(d, 0)["split_conditions"][1] = "x"; }, "tree 0"},
      {"default_left text", [](json& d) { TreeAt(d, 0)["default_left"][1] = "x"; }, "tree 0"},
      {"right shorter", [](json& d) { TreeAt(d, 0)["right_children"].erase(4); }, "tree 0"},
      {"conditions longer", [](json& d) { TreeAt(d, 0)["split_conditions"].push_back(1.0); },
       "tree 0"},
      {"hessian shorter", [](json& d) { TreeAt(d, 0)["sum_hessian"].erase(0); }, "tree 0"},
      {"split_type shorter", [](json& d) { TreeAt(d, 0)["split_type"].erase(0); }, "tree 0"},
      {"child out of range", [](json& d) { TreeAt(d, 0)["left_children"][0] = 99; },
       "tree 0 node 0"},
      {"child negative", [](json& d) { TreeAt(d, 0)["right_children"][2] = -5; }, "tree 0 node 2"},
      {"cycle to root", [](json& d) { TreeAt(d, 0)["left_children"][2] = 0; }, "tree 0 node 2"},
      {"self loop", [](json& d) { TreeAt(d, 0)["right_children"][2] = 2; }, "tree 0 node 2"},
      {"shared child", [](json& d) { TreeAt(d, 0)["right_children"][0] = 1; }, "tree 0 node 0"},
      {"feature out of range", [](json& d) { TreeAt(d, 0)["split_indices"][2] = 3; },
       "tree 0 node 2"},
      {"feature negative", [](json& d) { TreeAt(d, 0)["split_indices"][2] = -1; }, "tree 0 node 2"},
      {"negative cover", [](json& d) { TreeAt(d, 0)["sum_hessian"][3] = -1.0; }, "tree 0 node 3"},
      {"leaf value overflow", [](json& d) { TreeAt(d, 0)["split_conditions"][3] = 1e300; },
       "tree 0 node 3"},
      {"size_leaf_vector negative",
       [](json& d) { TreeAt(d, 0)["tree_param"]["size_leaf_vector"] = "-1"; }, "tree 0"},
  };
  for (const Mutation& m : mutations) {
    SCOPED_TRACE(m.name);
    json doc = SmallModel();
    m.apply(doc);
    ExpectInvalid(doc, m.needle);
  }
}

TEST(XgboostMalformed, NotModels) {
  for (std::string text : {"", " ", "{}", "[]", "null", "3", "\"x\"", "{\"learner\": 1}", "{",
                           "{\"a\":", "nan", "NaN", "[NaN]"}) {
    absl::StatusOr<ForestPtr> f = LoadXgboostJson(text, "x.json");
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(f.status().message().rfind("x.json: ", 0), 0u) << f.status();
  }
  for (std::string bytes : {std::string(""), std::string("{"), std::string("{}"),
                            std::string("[]"), std::string("Z"), std::string("N"),
                            std::string("{}}"), std::string("{}x"), std::string("\x00", 1),
                            std::string("i"), std::string("S"), std::string("[$"),
                            std::string("[$d"), std::string("[$T#i\x05"), std::string("[#i\xff]"),
                            std::string("{i\x01"), std::string("{i\x01" "a"),
                            std::string("{U\x01" "aZ")}) {
    absl::StatusOr<ForestPtr> f = LoadXgboostUbjson(bytes, "x.ubj");
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << bytes.size();
    EXPECT_EQ(f.status().message().rfind("x.ubj: ", 0), 0u) << f.status();
  }
}

TEST(XgboostMalformed, TruncatedAtEveryByte) {
  const std::string text = SmallModel().dump();
  const std::string bytes = ToUbj(SmallModel());
  ASSERT_TRUE(LoadXgboostJson(text, "t.json").ok());
  ASSERT_TRUE(LoadXgboostUbjson(bytes, "t.ubj").ok());
  for (size_t n = 0; n < text.size(); ++n) {
    absl::StatusOr<ForestPtr> f = LoadXgboostJson(std::string_view(text).substr(0, n), "t.json");
    ASSERT_FALSE(f.ok()) << n;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << n;
  }
  for (size_t n = 0; n < bytes.size(); ++n) {
    // A fresh copy of exactly n bytes, so that ASan catches any read past the end.
    const std::string prefix = bytes.substr(0, n);
    absl::StatusOr<ForestPtr> f = LoadXgboostUbjson(prefix, "t.ubj");
    ASSERT_FALSE(f.ok()) << n;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << n;
  }
}

std::string BigEndian64(uint64_t v) {
  std::string out;
  PutBigEndian(&out, v, 8);
  return out;
}

TEST(XgboostMalformed, HugeDeclaredSizes) {
  const uint64_t huge = uint64_t{1} << 62;
  const std::vector<std::string> cases = {
      "[$d#L" + BigEndian64(huge) + "abcd",                         // typed array
      "[$L#L" + BigEndian64(huge / 2),                              // count * size overflows
      "[$D#L" + BigEndian64(std::numeric_limits<uint64_t>::max()),  // negative count
      "[#L" + BigEndian64(huge) + "ZZZ",                            // untyped counted array
      "{#L" + BigEndian64(huge) + "i\x01" "aZ",                     // counted object
      "SL" + BigEndian64(huge) + "abc",                             // string
      "{L" + BigEndian64(huge) + "learner",                         // key
      "[$S#L" + BigEndian64(huge) + "i\x01" "a",                    // typed strings
      "{$d#L" + BigEndian64(huge) + "i\x01" "a",                    // typed object
  };
  for (const std::string& bytes : cases) {
    absl::StatusOr<ForestPtr> f = LoadXgboostUbjson(bytes, "huge.ubj");
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << f.status();
  }
  // A valid model whose tree declares a huge split_conditions array.
  std::string model = ToUbj(SmallModel());
  const std::string key = std::string("split_conditions") + "[$d#L";
  const size_t at = model.find(key);
  ASSERT_NE(at, std::string::npos);
  model.replace(at + key.size(), 8, BigEndian64(huge));
  absl::StatusOr<ForestPtr> f = LoadXgboostUbjson(model, "huge.ubj");
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << f.status();
  EXPECT_NE(f.status().message().find("exceeds the input"), std::string::npos) << f.status();
}

TEST(XgboostMalformed, DeepNesting) {
  const std::string ubj(100000, '[');
  EXPECT_EQ(LoadXgboostUbjson(ubj, "deep.ubj").status().code(),
            absl::StatusCode::kInvalidArgument);
  std::string json_text = "{\"learner\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_EQ(LoadXgboostJson(json_text, "deep.json").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Random byte mutations of a small model: any status is fine, a crash or an out-of-bounds read
// (under the asan preset) is not; a model that loads must be usable.
TEST(XgboostMalformed, RandomMutationsNeverCrash) {
  std::mt19937 rng(12345);
  const std::string text = ModelJson({Tree0(), CategoricalTree({1, 5, 40}, 1)}).dump();
  const std::string bytes = ToUbj(ModelJson({Tree0(), CategoricalTree({1, 5, 40}, 1)}));
  const std::vector<float> row = {0.25f, 5.0f, kNan};
  int loaded = 0;
  for (int round = 0; round < 3000; ++round) {
    for (const bool ubj : {false, true}) {
      std::string input = ubj ? bytes : text;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const size_t at = rng() % input.size();
        switch (rng() % 3) {
          case 0: input[at] = static_cast<char>(rng()); break;
          case 1: input.erase(at, 1 + rng() % 8); break;
          default: input.insert(at, 1, static_cast<char>(rng())); break;
        }
        if (input.empty()) input = "{";
      }
      absl::StatusOr<ForestPtr> f =
          ubj ? LoadXgboostUbjson(input, "m.ubj") : LoadXgboostJson(input, "m.json");
      if (f.ok()) {
        ++loaded;
        std::vector<float> r(static_cast<size_t>((*f)->num_features), 0.5f);
        for (size_t i = 0; i < r.size() && i < row.size(); ++i) r[i] = row[i];
        (void)Margins(**f, r);
      } else {
        EXPECT_TRUE(f.status().code() == absl::StatusCode::kInvalidArgument ||
                    f.status().code() == absl::StatusCode::kUnimplemented)
            << f.status();
      }
    }
  }
  EXPECT_GT(loaded, 0);  // some mutations (inside numbers) keep the model valid
}

}  // namespace
}  // namespace grove
