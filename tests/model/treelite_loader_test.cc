// Treelite checkpoint loader: the golden tl_* cases (checkpoints Treelite wrote from XGBoost,
// LightGBM and scikit-learn models) against each library's own predictions, leaf nodes and SHAP
// values; hand-written checkpoints for every comparison operator, categorical lists, leaf-vector
// layouts, averaging and base scores; refused models and malformed files naming the position.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "core/common/thread_pool.h"
#include "core/model/forest.h"
#include "core/model/loader.h"
#include "tests/testing/corpus.h"
#include "tests/testing/library_checks.h"
#include "tests/testing/predict_reference.h"

namespace grove {
namespace {

namespace fs = std::filesystem;

constexpr float kNanF = std::numeric_limits<float>::quiet_NaN();
TEST(TreeliteLoaderTest, GoldenCasesMatchTheLibraries) {
  const std::vector<std::string> dirs = testing::GoldenCaseDirs("tl_");
  ASSERT_GE(dirs.size(), 11u) << "tests/golden/tl_* (scripts/make_treelite_corpus.py)";
  ThreadPool pool(2);
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    absl::StatusOr<testing::CorpusCase> c = testing::LoadCorpusCase(dir);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->library, "treelite");
    ASSERT_TRUE(absl::EndsWith(c->model_path, "checkpoint.tl"));
    absl::StatusOr<ForestPtr> loaded = LoadModelFile(c->model_path);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const Forest& f = **loaded;
    EXPECT_EQ(f.format, ModelFormat::kTreeliteCheckpoint);
    EXPECT_EQ(f.num_features, c->num_features);
    EXPECT_EQ(f.num_outputs, c->num_outputs);
    EXPECT_EQ(f.library_version,
              "treelite " + (*c->meta)["treelite_version"].get<std::string>());
    EXPECT_EQ(static_cast<int>(f.trees.size()), (*c->meta)["num_trees"].get<int>());
    testing::ExpectCaseMatchesLibrary(*c, f, testing::GroveRows(*c, f), &pool);
  }
}

// ---------------------------------------------------------------------------------------------
// Hand-written checkpoints: the v4 layout (Treelite's docs/serialization/v4.rst), written here
// field by field so that every rule is tested on a tree whose answer is known.

class Bytes {
 public:
  template <typename T>
  Bytes& Put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    s_.append(b, sizeof(T));
    return *this;
  }
  template <typename T>
  Bytes& Array(const std::vector<T>& v) {
    Put<uint64_t>(v.size());
    for (const T& x : v) Put<T>(x);
    return *this;
  }
  Bytes& Str(const std::string& v) {
    Put<uint64_t>(v.size());
    s_ += v;
    return *this;
  }
  const std::string& str() const { return s_; }

 private:
  std::string s_;
};

// One tree of a float64 checkpoint.
struct TreeSpec {
  std::vector<int8_t> node_type;
  std::vector<int32_t> cleft, cright, split_index;
  std::vector<uint8_t> default_left;
  std::vector<double> leaf_value, threshold;
  std::vector<int8_t> cmp;
  std::vector<uint8_t> category_list_right_child;
  std::vector<double> leaf_vector;
  std::vector<uint64_t> leaf_vector_begin, leaf_vector_end;
  std::vector<uint32_t> category_list;
  std::vector<uint64_t> category_list_begin, category_list_end;
  std::vector<uint64_t> data_count;
  std::vector<uint8_t> data_count_present;
  std::vector<double> sum_hess;
  std::vector<uint8_t> sum_hess_present;
};

struct ModelSpec {
  int32_t major = 4;
  int32_t num_feature = 2;
  uint8_t task_type = 1;  // regressor
  bool average = false;
  int32_t num_target = 1;
  std::vector<int32_t> num_class{1};
  std::vector<int32_t> leaf_vector_shape{1, 1};
  std::vector<int32_t> target_id, class_id;
  std::string postprocessor = "identity";
  float sigmoid_alpha = 1;
  std::vector<double> base_scores{0.0};
  std::vector<TreeSpec> trees;
};

// A stump on feature 0: node 0 tests `x op t` (true: node 1, leaf 10; false: node 2, leaf 20).
TreeSpec Stump(int8_t op, double t, bool default_left) {
  TreeSpec s;
  s.node_type = {1, 0, 0};
  s.cleft = {1, -1, -1};
  s.cright = {2, -1, -1};
  s.split_index = {0, -1, -1};
  s.default_left = {default_left, 0, 0};
  s.leaf_value = {0, 10, 20};
  s.threshold = {t, 0, 0};
  s.cmp = {op, 0, 0};
  s.category_list_right_child = {0, 0, 0};
  s.leaf_vector_begin = s.leaf_vector_end = {0, 0, 0};
  s.category_list_begin = s.category_list_end = {0, 0, 0};
  s.data_count = {30, 10, 20};
  s.data_count_present = {1, 1, 1};
  return s;
}

std::string Serialize(const ModelSpec& m) {
  Bytes b;
  b.Put<int32_t>(m.major).Put<int32_t>(8).Put<int32_t>(1).Put<uint8_t>(3).Put<uint8_t>(3);
  b.Put<uint64_t>(m.trees.size());
  b.Put<int32_t>(m.num_feature).Put<uint8_t>(m.task_type).Put<uint8_t>(m.average);
  b.Put<int32_t>(m.num_target).Array(m.num_class).Array(m.leaf_vector_shape);
  std::vector<int32_t> target_id = m.target_id, class_id = m.class_id;
  if (target_id.empty()) target_id.assign(m.trees.size(), 0);
  if (class_id.empty()) class_id.assign(m.trees.size(), 0);
  b.Array(target_id).Array(class_id).Str(m.postprocessor);
  b.Put<float>(m.sigmoid_alpha).Put<float>(1.0f).Array(m.base_scores).Str("{}").Put<int32_t>(0);
  for (const TreeSpec& t : m.trees) {
    b.Put<int32_t>(static_cast<int32_t>(t.node_type.size()))
        .Put<uint8_t>(!t.category_list.empty());
    b.Array(t.node_type).Array(t.cleft).Array(t.cright).Array(t.split_index);
    b.Array(t.default_left).Array(t.leaf_value).Array(t.threshold).Array(t.cmp);
    b.Array(t.category_list_right_child).Array(t.leaf_vector).Array(t.leaf_vector_begin);
    b.Array(t.leaf_vector_end).Array(t.category_list).Array(t.category_list_begin);
    b.Array(t.category_list_end).Array(t.data_count).Array(t.data_count_present);
    b.Array(t.sum_hess).Array(t.sum_hess_present);
    b.Array(std::vector<double>{}).Array(std::vector<uint8_t>{});  // gain
    b.Put<int32_t>(0).Put<int32_t>(0);
  }
  return b.str();
}

absl::StatusOr<ForestPtr> Load(const ModelSpec& m) {
  return LoadModelBytes(Serialize(m), "hand.tl");
}

std::vector<float> Margins(const Forest& f, const std::vector<float>& rows) {
  return ReferencePrediction(f, rows, Kind(OutputKind::kMargin));
}

TEST(TreeliteLoaderTest, EveryOperatorRoutesAsTheDoubleComparison) {
  // A double threshold between floats, and one that is a float, for each operator; rows at and
  // around it, and NaN (default direction).
  const double between = 0.1;  // not a float
  const float below = std::nextafter(static_cast<float>(between), -1.0f);
  for (double t : {between, 0.5}) {
    std::vector<float> xs = {static_cast<float>(t), std::nextafter(static_cast<float>(t), -1.0f),
                             std::nextafter(static_cast<float>(t), 2.0f), below, -3.0f, 3.0f,
                             kNanF};
    for (int8_t op : {2, 3, 4, 5}) {
      for (bool default_left : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "t " << t << " op " << int{op} << " default_left "
                                          << default_left);
        ModelSpec m;
        m.trees = {Stump(op, t, default_left)};
        absl::StatusOr<ForestPtr> f = Load(m);
        ASSERT_TRUE(f.ok()) << f.status();
        std::vector<float> rows;
        for (float x : xs) rows.insert(rows.end(), {x, 0.0f});
        const std::vector<float> got = Margins(**f, rows);
        for (size_t i = 0; i < xs.size(); ++i) {
          const double x = xs[i];
          bool left;
          if (std::isnan(x)) {
            left = default_left;
          } else {
            left = op == 2 ? x < t : op == 3 ? x <= t : op == 4 ? x > t : x >= t;
          }
          EXPECT_EQ(got[i], left ? 10.0f : 20.0f) << "x " << x;
        }
        // The leaf output is Treelite's node id whichever way the children were stored.
        const std::vector<float> leaf = ReferencePrediction(**f, rows, Kind(OutputKind::kLeaf));
        EXPECT_EQ(leaf[0], got[0] == 10.0f ? 1.0f : 2.0f);
      }
    }
  }
}

TEST(TreeliteLoaderTest, CategoricalListsAndTheirSide) {
  for (bool right : {false, true}) {
    SCOPED_TRACE(right);
    TreeSpec s = Stump(0, 0, /*default_left=*/true);
    s.node_type[0] = 2;
    s.category_list = {1, 3, 40};
    s.category_list_begin = {0, 3, 3};
    s.category_list_end = {3, 3, 3};
    s.category_list_right_child[0] = right;
    ModelSpec m;
    m.trees = {s};
    absl::StatusOr<ForestPtr> f = Load(m);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_TRUE((*f)->has_categorical);
    // Matched: 1, 3, 3.7 (truncated), 40. Not matched: 0, 2, -1, -0.5 (negative), 1e9. NaN: left.
    const std::vector<float> xs = {1, 3, 3.7f, 40, 0, 2, -1, -0.5f, 1e9f, kNanF};
    const std::vector<bool> matched = {true, true, true, true, false, false, false, false, false};
    std::vector<float> rows;
    for (float x : xs) rows.insert(rows.end(), {x, 0.0f});
    const std::vector<float> got = Margins(**f, rows);
    for (size_t i = 0; i < matched.size(); ++i) {
      const bool left = matched[i] != right;
      EXPECT_EQ(got[i], left ? 10.0f : 20.0f) << "x " << xs[i];
    }
    EXPECT_EQ(got.back(), 10.0f);
  }
}

TEST(TreeliteLoaderTest, AveragedLeafVectorsBaseScoresAndSoftmax) {
  // A 3-class random forest of two vector-leaf trees: outputs are averaged, then base scores added.
  ModelSpec m;
  m.task_type = 2;
  m.average = true;
  m.num_class = {3};
  m.leaf_vector_shape = {1, 3};
  m.target_id = {0, 0};
  m.class_id = {-1, -1};
  m.postprocessor = "softmax";
  m.base_scores = {0.5, 0, -0.5};
  for (int t = 0; t < 2; ++t) {
    TreeSpec s = Stump(3, 0.0, false);
    s.leaf_vector = {1, 2, 3, 4 + t, 5, 6};
    s.leaf_vector_begin = {0, 0, 3};
    s.leaf_vector_end = {0, 3, 6};
    m.trees.push_back(s);
  }
  absl::StatusOr<ForestPtr> f = Load(m);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->num_outputs, 3);
  EXPECT_EQ((*f)->objective.link, Link::kSoftmax);
  EXPECT_EQ((*f)->num_iterations, 2);
  const std::vector<float> got = Margins(**f, {1.0f, 0.0f, -1.0f, 0.0f});
  const std::vector<float> want = {4.5f + 0.5f, 5, 6 - 0.5f, 1 + 0.5f, 2, 3 - 0.5f};
  EXPECT_LE(MaxRelativeError(got, want), 1e-7);
}

TEST(TreeliteLoaderTest, ScalarTreesPerClassAndTarget) {
  // Two targets of two classes; one scalar tree per (target, class), and a tree of every class of
  // target 1 ([1, max_class] leaf vectors), with sigmoid (multiclass_ova).
  ModelSpec m;
  m.task_type = 2;
  m.num_target = 2;
  m.num_class = {2, 2};
  m.leaf_vector_shape = {1, 2};
  m.postprocessor = "multiclass_ova";
  m.base_scores = {0, 0, 0, 0};
  m.target_id = {0, 0, 1, 1, 1};
  m.class_id = {0, 1, 0, 1, -1};
  for (int t = 0; t < 4; ++t) {
    TreeSpec s = Stump(3, 0.0, false);
    s.leaf_value = {0, double(t + 1), double(10 * (t + 1))};
    s.leaf_vector_begin = s.leaf_vector_end = {0, 0, 0};
    m.trees.push_back(s);
  }
  // Leaf vectors are written only for the vector tree.
  for (int t = 0; t < 4; ++t) m.trees[t].leaf_vector.clear();
  TreeSpec v = Stump(3, 0.0, false);
  v.leaf_vector = {100, 200, 300, 400};
  v.leaf_vector_begin = {0, 0, 2};
  v.leaf_vector_end = {0, 2, 4};
  m.trees.push_back(v);
  // Leaf vectors of shape [1, 2] are expected of every tree of this model, so the scalar trees
  // hold theirs in leaf_value: the loader reads a leaf vector only where one is written.
  absl::StatusOr<ForestPtr> f = Load(m);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->num_outputs, 4);
  EXPECT_EQ((*f)->objective.link, Link::kSigmoid);
  const std::vector<float> got = Margins(**f, {-1.0f, 0.0f});
  EXPECT_EQ(got, (std::vector<float>{1, 2, 3 + 100, 4 + 200}));
  // Each tree's round: trees writing the same outputs count up.
  EXPECT_EQ((*f)->num_iterations, 1);
}

TEST(TreeliteLoaderTest, CoversPreferSumHessOverDataCount) {
  ModelSpec m;
  TreeSpec s = Stump(3, 0.0, false);
  s.sum_hess = {3.5, 1.5, 2.0};
  s.sum_hess_present = {1, 1, 1};
  m.trees = {s};
  absl::StatusOr<ForestPtr> f = Load(m);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->TreeNodes(0)[0].cover, 3.5);
  s.sum_hess_present = {0, 0, 1};
  m.trees = {s};
  f = Load(m);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->TreeNodes(0)[0].cover, 30.0);
  EXPECT_EQ((*f)->TreeNodes(0)[2].cover, 2.0);
}

TEST(TreeliteLoaderTest, RefusesWhatItDoesNotServe) {
  struct Case {
    const char* name;
    ModelSpec model;
    absl::StatusCode code;
    const char* says;
  };
  std::vector<Case> cases;
  {
    ModelSpec m;
    m.trees = {Stump(1, 0.5, false)};
    cases.push_back({"==", m, absl::StatusCode::kUnimplemented, "operator =="});
  }
  {
    ModelSpec m;
    m.trees = {Stump(3, 0.5, false)};
    m.major = 3;
    cases.push_back({"v3", m, absl::StatusCode::kUnimplemented, "serialize it again"});
  }
  {
    ModelSpec m;
    m.trees = {Stump(3, 0.5, false)};
    m.task_type = 4;
    cases.push_back({"isolation forest", m, absl::StatusCode::kUnimplemented, "isolation"});
  }
  {
    ModelSpec m;
    m.trees = {Stump(3, 0.5, false)};
    m.postprocessor = "exponential_standard_ratio";
    cases.push_back({"postprocessor", m, absl::StatusCode::kUnimplemented, "supported: identity"});
  }
  {
    ModelSpec m;
    TreeSpec s = Stump(3, 0.5, false);
    s.data_count.clear();
    s.data_count_present.clear();
    m.trees = {s};
    cases.push_back({"no covers", m, absl::StatusCode::kUnimplemented, "node 0: no data_count"});
  }
  {
    ModelSpec m;
    m.num_target = 2;
    m.num_class = {2, 3};
    m.leaf_vector_shape = {2, 3};
    m.base_scores.assign(6, 0.0);
    m.trees = {Stump(3, 0.5, false)};
    cases.push_back({"ragged classes", m, absl::StatusCode::kUnimplemented, "different numbers"});
  }
  {
    ModelSpec m;
    TreeSpec s = Stump(3, 0.5, false);
    s.cleft[0] = 7;
    m.trees = {s};
    cases.push_back({"child", m, absl::StatusCode::kInvalidArgument, "tree 0 node 0: child 7"});
  }
  {
    ModelSpec m;
    TreeSpec s = Stump(3, 0.5, false);
    s.cmp.pop_back();
    m.trees = {s};
    cases.push_back({"short array", m, absl::StatusCode::kInvalidArgument,
                     "tree 0: cmp has 2 entries for 3 nodes"});
  }
  {
    ModelSpec m;
    m.trees = {Stump(3, 0.5, false)};
    m.target_id = {1};
    cases.push_back({"target", m, absl::StatusCode::kInvalidArgument, "target_id 1 outside"});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<ForestPtr> f = Load(c.model);
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), c.code) << f.status();
    EXPECT_TRUE(absl::StrContains(f.status().message(), c.says)) << f.status();
    EXPECT_TRUE(absl::StartsWith(f.status().message(), "hand.tl")) << f.status();
  }
}

TEST(TreeliteLoaderTest, EveryTruncationIsAnErrorNamingTheByte) {
  ModelSpec m;
  m.trees = {Stump(3, 0.5, false), Stump(2, -0.5, true)};
  const std::string bytes = Serialize(m);
  ASSERT_TRUE(LoadTreeliteCheckpoint(bytes, "hand.tl").ok());
  for (size_t n = 0; n < bytes.size(); ++n) {
    absl::StatusOr<ForestPtr> f = LoadTreeliteCheckpoint(bytes.substr(0, n), "hand.tl");
    ASSERT_FALSE(f.ok()) << n;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << f.status();
    EXPECT_TRUE(absl::StrContains(f.status().message(), "byte ")) << f.status();
  }
  absl::StatusOr<ForestPtr> extra = LoadTreeliteCheckpoint(bytes + "x", "hand.tl");
  ASSERT_FALSE(extra.ok());
  EXPECT_TRUE(absl::StrContains(extra.status().message(), "1 bytes after the last tree"));
  // A count far beyond the file is refused before anything is allocated.
  std::string huge = bytes;
  const uint64_t lots = uint64_t{1} << 60;
  std::memcpy(huge.data() + 14, &lots, sizeof(lots));  // num_tree
  absl::StatusOr<ForestPtr> f = LoadTreeliteCheckpoint(huge, "hand.tl");
  ASSERT_FALSE(f.ok());
  EXPECT_TRUE(absl::StrContains(f.status().message(), "cannot fit")) << f.status();
}

// The fuzzer's hand-made seeds (ModelBuilder models: scripts/make_treelite_corpus.py) load, but
// the one with an == test.
TEST(TreeliteLoaderTest, FuzzSeedsLoadOrAreRefused) {
  const fs::path dir = fs::path(GROVE_SOURCE_DIR) / "tests" / "fuzz" / "seeds" / "treelite";
  int seen = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    SCOPED_TRACE(e.path().string());
    ++seen;
    absl::StatusOr<ForestPtr> f = LoadModelFile(e.path().string());
    if (e.path().filename() == "eq_refused.tl") {
      EXPECT_EQ(f.status().code(), absl::StatusCode::kUnimplemented) << f.status();
    } else {
      EXPECT_TRUE(f.ok()) << f.status();
    }
  }
  EXPECT_EQ(seen, 4);
}

TEST(TreeliteLoaderTest, DispatchedByContentAndExtension) {
  ModelSpec m;
  m.trees = {Stump(3, 0.5, false)};
  absl::StatusOr<ForestPtr> f = LoadModelBytes(Serialize(m), "any-name");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->format, ModelFormat::kTreeliteCheckpoint);
  EXPECT_STREQ(ModelFormatName((*f)->format), "treelite-checkpoint");
  // A file named .tl that is not a checkpoint says what was expected.
  const std::string seven("\x07\0\0\0\x01\0\0\0\x01\0\0\0\x03\x03", 14);
  absl::StatusOr<ForestPtr> junk = LoadModelBytes(seven, "x.tl");
  ASSERT_FALSE(junk.ok());
  EXPECT_TRUE(absl::StrContains(junk.status().message(), "major version")) << junk.status();
}

}  // namespace
}  // namespace grove
