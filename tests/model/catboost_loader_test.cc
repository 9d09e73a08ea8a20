// CatBoost JSON loader: the golden CatBoost cases against CatBoost's own predictions, leaf indices,
// ShapValues and ShapInteractionValues (one-hot categorical cases included, their category names
// against X.csv's codes); hand-written oblivious trees for the border, NaN, scale, one-hot and CTR
// rules; content dispatch beside XGBoost JSON; refused models (CTRs over combinations, CTR types
// Grove does not compute) and malformed files naming the position.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "core/common/thread_pool.h"
#include "core/io/csv.h"
#include "core/model/catboost_hash.h"
#include "core/model/category_codes.h"
#include "core/model/forest.h"
#include "core/model/loader.h"
#include "tests/testing/corpus.h"
#include "tests/testing/library_checks.h"
#include "tests/testing/predict_reference.h"

namespace grove {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr float kNanF = std::numeric_limits<float>::quiet_NaN();

const fs::path kGolden = fs::path(GROVE_SOURCE_DIR) / "tests" / "golden";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(CatboostLoaderTest, GoldenCasesMatchCatboost) {
  const std::vector<std::string> dirs = testing::GoldenCaseDirs("cb_");
  ASSERT_GE(dirs.size(), 4u) << "tests/golden/cb_* (scripts/make_golden_corpus.py)";
  ThreadPool pool(2);
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    absl::StatusOr<testing::CorpusCase> c = testing::LoadCorpusCase(dir);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->library, "catboost");
    ASSERT_TRUE(absl::EndsWith(c->model_path, "catboost.json"));
    absl::StatusOr<ForestPtr> loaded = LoadModelFile(c->model_path);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const Forest& f = **loaded;
    EXPECT_EQ(f.format, ModelFormat::kCatboostJson);
    EXPECT_EQ(f.num_features, c->num_features);
    EXPECT_EQ(f.num_outputs, c->num_outputs);
    EXPECT_EQ(f.library_version, (*c->meta)["library_version"].get<std::string>());
    EXPECT_EQ(static_cast<int>(f.trees.size()), (*c->meta)["num_trees"].get<int>());
    const std::string objective = (*c->meta)["objective"].get<std::string>();
    EXPECT_EQ(f.objective.name, objective);
    EXPECT_EQ(f.objective.link, objective == "Logloss"      ? Link::kSigmoid
                                : objective == "MultiClass" ? Link::kSoftmax
                                                            : Link::kIdentity);
    const std::vector<float> rows = testing::GroveRows(*c, f);
    // Predictions, leaf indices, ShapValues and ShapInteractionValues (the feature block; the
    // generator lays the bias out as Grove does: scripts/make_golden_corpus.py).
    ASSERT_TRUE(c->contribs.has_value());
    ASSERT_TRUE(c->interactions.has_value());
    testing::ExpectCaseMatchesLibrary(*c, f, rows, &pool);

    // margin_range.csv: CatBoost's predict(ntree_start, ntree_end), bias included.
    const json& range = (*c->meta)["outputs"]["margin_range"];
    absl::StatusOr<CsvMatrix<double>> want_range =
        ReadCsvDoubles((fs::path(dir) / "margin_range.csv").string());
    ASSERT_TRUE(want_range.ok()) << want_range.status();
    const std::vector<float> got_range = ReferencePrediction(
        f, rows,
        Kind(OutputKind::kMargin, range["iteration_begin"].get<int>(),
             range["iteration_end"].get<int>()),
        &pool);
    testing::RefMatrix range_ref{want_range->values, want_range->rows, want_range->cols};
    const testing::ErrorReport e =
        testing::MaxRelError(absl::Span<const float>(got_range), range_ref);
    EXPECT_LE(e.max_error, testing::kCorpusTolerance) << "margin_range " << e.ToString();
  }
}

// A depth-2 oblivious tree over 3 features: splits[0] on feature 2 (border 0.5, NaN goes right),
// splits[1] on feature 0 (border -1, NaN goes left); leaf index = bit 0 (splits[0]) + 2 * bit 1.
json TinyModel() {
  return json::parse(R"({
    "features_info": {"float_features": [
      {"borders": [-1], "feature_id": "a", "feature_index": 0, "flat_feature_index": 0,
       "has_nans": true, "nan_value_treatment": "AsFalse"},
      {"borders": [], "feature_id": "b", "feature_index": 1, "flat_feature_index": 1,
       "has_nans": false, "nan_value_treatment": "AsIs"},
      {"borders": [0.5], "feature_id": "c", "feature_index": 2, "flat_feature_index": 2,
       "has_nans": true, "nan_value_treatment": "AsTrue"}]},
    "model_info": {"params": {"loss_function": {"type": "RMSE", "params": {}}},
                   "catboost_version_info": "Branch: tags/v1.2.10\n"},
    "oblivious_trees": [{
      "leaf_values": [1, 2, 4, 8], "leaf_weights": [10, 20, 30, 40],
      "splits": [{"border": 0.5, "float_feature_index": 2, "split_index": 0,
                  "split_type": "FloatFeature"},
                 {"border": -1, "float_feature_index": 0, "split_index": 1,
                  "split_type": "FloatFeature"}]}],
    "scale_and_bias": [2, [0.25]]})");
}

absl::StatusOr<ForestPtr> Load(const json& model) {
  return LoadModelBytes(model.dump(), "tiny.json");
}

TEST(CatboostLoaderTest, ObliviousTreeRulesByHand) {
  absl::StatusOr<ForestPtr> loaded = Load(TinyModel());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Forest& f = **loaded;
  EXPECT_EQ(f.format, ModelFormat::kCatboostJson);
  EXPECT_EQ(f.num_features, 3);
  EXPECT_EQ(f.feature_names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(f.library_version, "1.2.10");
  ASSERT_EQ(f.trees.size(), 1u);
  EXPECT_EQ(f.trees[0].num_nodes, 7u);
  EXPECT_EQ(f.max_depth, 2);
  // Covers: leaves' weights, internal nodes their sums (root: all 100).
  EXPECT_EQ(f.TreeNodes(0)[0].cover, 100.0);
  const float up = std::nextafter(0.5f, 1.0f);
  const float above_minus_one = std::nextafter(-1.0f, 0.0f);
  struct Row {
    float a, c;
    int leaf;
  };
  // value > border is true (right): a border value itself goes left; NaN per its treatment.
  const Row cases[] = {{-2, 0, 0},       {-2, 0.5f, 0},     {-2, up, 1},  {-1, 0.5f, 0},
                       {above_minus_one, 0.5f, 2}, {0, 1, 3}, {kNanF, 1, 1}, {0, kNanF, 3},
                       {kNanF, kNanF, 1}};
  std::vector<float> rows;
  for (const Row& r : cases) rows.insert(rows.end(), {r.a, 7.0f, r.c});
  const std::vector<float> leaf = ReferencePrediction(f, rows, Kind(OutputKind::kLeaf));
  const std::vector<float> margin = ReferencePrediction(f, rows, Kind(OutputKind::kMargin));
  const double values[] = {1, 2, 4, 8};
  for (size_t i = 0; i < std::size(cases); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(leaf[i], cases[i].leaf);
    EXPECT_FLOAT_EQ(margin[i], 2 * values[cases[i].leaf] + 0.25);  // scale * leaf + bias
  }
}

TEST(CatboostLoaderTest, DispatchByContent) {
  // XGBoost JSON is still XGBoost's, whatever its file name.
  const std::string xgb = ReadFile(kGolden / "xgb_regression" / "model.json");
  absl::StatusOr<ForestPtr> x = LoadModelBytes(xgb, "catboost.json");
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_EQ((*x)->format, ModelFormat::kXgboostJson);
  // "version" before "learner" (a hand-made XGBoost file) is not CatBoost's either.
  json reordered = json::parse(xgb);
  x = LoadModelBytes(std::string(R"({"version": [3, 2, 0], "learner": )") +
                         reordered["learner"].dump() + "}",
                     "m.json");
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_EQ((*x)->format, ModelFormat::kXgboostJson);
  // CatBoost JSON under any name, with a byte order mark and whitespace.
  json tiny = TinyModel();
  std::string text = "\xEF\xBB\xBF  " + tiny.dump(1);
  absl::StatusOr<ForestPtr> c = LoadModelBytes(text, "model.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->format, ModelFormat::kCatboostJson);
  // A CatBoost model loaded as XGBoost's says it is not one (and the reverse).
  EXPECT_TRUE(absl::StrContains(LoadXgboostJson(text, "m.json").status().message(), "learner"));
  EXPECT_TRUE(absl::StrContains(LoadCatboostJson(xgb, "m.json").status().message(),
                                "not a CatBoost model"));
}

TEST(CatboostLoaderTest, NativeCbmIsRefusedNamingJson) {
  for (const auto& [bytes, name] : {std::pair<std::string, std::string>{"CBM1\x10\0\0\0", "m.bin"},
                                    {"\x01\x02", "model.cbm"}}) {
    absl::StatusOr<ForestPtr> r = LoadModelBytes(bytes, name);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(r.status().message(), "format=\"json\"")) << r.status();
  }
}

// TinyModel with a one-hot categorical feature "city" at column 3 (values: the hashes of "paris",
// "brest" and the empty name) and a second tree whose splits[0] is city == "brest" (leaf bit 0) and
// splits[1] TinyModel's a > -1 (leaf bit 1).
json OneHotModel() {
  json m = TinyModel();
  m["features_info"]["categorical_features"] = json::array({json{
      {"feature_id", "city"},
      {"feature_index", 0},
      {"flat_feature_index", 3},
      {"values", json::array({static_cast<int32_t>(CatboostCategoryHash("paris")),
                              static_cast<int32_t>(CatboostCategoryHash("brest")),
                              static_cast<int32_t>(CatboostCategoryHash(""))})}}});
  json tree = m["oblivious_trees"][0];
  tree["splits"][0] = json{{"cat_feature_index", 0},
                           {"split_index", 2},
                           {"split_type", "OneHotFeature"},
                           {"value", static_cast<int32_t>(CatboostCategoryHash("brest"))}};
  tree["leaf_values"] = json::array({0, 0, 8, 100});
  m["oblivious_trees"].push_back(tree);
  return m;
}

TEST(CatboostLoaderTest, OneHotSplitsTestTheHashOfTheName) {
  absl::StatusOr<ForestPtr> loaded = Load(OneHotModel());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Forest& f = **loaded;
  EXPECT_EQ(f.num_features, 4);
  EXPECT_TRUE(f.has_categorical);
  ASSERT_EQ(f.categories.size(), 4u);
  EXPECT_TRUE(f.categories[0].empty());
  EXPECT_EQ(f.categories[3].hashes,
            (std::vector<uint32_t>{CatboostCategoryHash("paris"), CatboostCategoryHash("brest"),
                                   CatboostCategoryHash("")}));
  absl::StatusOr<CategoryCodes> city = CategoryCodesFor(f, 3);
  ASSERT_TRUE(city.ok()) << city.status();
  EXPECT_EQ(*city->Code("paris"), 0.0f);
  EXPECT_EQ(*city->Code("brest"), 1.0f);
  EXPECT_EQ(*city->Code(""), 2.0f);  // a category like any other, not missing
  EXPECT_EQ(*city->Code("tokyo"), 3.0f);  // unseen: a code in no split's set
  EXPECT_EQ(*city->Code("Brest"), 3.0f);
  EXPECT_EQ(city->Find("42"), 3);  // digits are a name too (CatBoost hashes str(42))
  // Tree 1's leaf bit 0 is city == "brest"; a = 0 sets bit 1 in both trees. NaN (a code given as a
  // number) goes the "not equal" way, as a code past the values does.
  const float codes[] = {0, 1, 2, 3, 7, kNanF};
  const float want[] = {2 * 4 + 2 * 8 + 0.25f, 2 * 4 + 2 * 100 + 0.25f, 2 * 4 + 2 * 8 + 0.25f,
                        2 * 4 + 2 * 8 + 0.25f, 2 * 4 + 2 * 8 + 0.25f,   2 * 4 + 2 * 8 + 0.25f};
  std::vector<float> rows;
  for (float code : codes) rows.insert(rows.end(), {0.0f, 0.0f, 0.0f, code});
  const std::vector<float> margin = ReferencePrediction(f, rows, Kind(OutputKind::kMargin));
  for (size_t i = 0; i < std::size(codes); ++i) EXPECT_FLOAT_EQ(margin[i], want[i]) << i;
}

TEST(CatboostLoaderTest, GoldenCategoryNamesAreTheCodesOfXCsv) {
  // X_names.csv (pandas.to_csv of the frame CatBoost predicted) through CategoryCodes gives the
  // codes of X.csv, unseen names included: what the corpus tests then feed every engine.
  int cases = 0;
  std::vector<std::string> dirs = testing::GoldenCaseDirs("cb_onehot_");
  for (std::string& dir : testing::GoldenCaseDirs("cb_ctr_")) dirs.push_back(std::move(dir));
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    absl::StatusOr<testing::CorpusModel> m = testing::LoadCorpusModel(dir);
    ASSERT_TRUE(m.ok()) << m.status();
    std::ifstream names(fs::path(dir) / "X_names.csv");
    std::string line;
    ASSERT_TRUE(std::getline(names, line));  // the header
    int64_t unseen = 0;
    for (int64_t r = 0; std::getline(names, line); ++r) {
      ASSERT_LT(r, m->c.rows);
      const std::vector<std::string> cells = absl::StrSplit(line, ',');
      ASSERT_EQ(static_cast<int>(cells.size()), m->c.num_features);
      for (int col : (*m->c.meta)["categorical_features"].get<std::vector<int>>()) {
        absl::StatusOr<CategoryCodes> coder = CategoryCodesFor(*m->forest, col);
        ASSERT_TRUE(coder.ok()) << coder.status();
        absl::StatusOr<float> code = coder->Code(cells[static_cast<size_t>(col)]);
        ASSERT_TRUE(code.ok()) << code.status();
        EXPECT_EQ(*code, m->c.X[static_cast<size_t>(r * m->c.num_features + col)])
            << "row " << r << " '" << cells[static_cast<size_t>(col)] << "'";
        unseen += *code == static_cast<float>(coder->size());
      }
    }
    EXPECT_GT(unseen, 0) << "the test rows hold unseen categories";
    ++cases;
  }
  EXPECT_EQ(cases, 5);
}

// TinyModel with a categorical feature "city" at column 3 whose categories are known only through
// two CTR tables: a Borders CTR (prior 1/1, shift -0.5, scale 2; borders 0.5 and 0.9: split_index 2
// and 3) and a Counter CTR (scale 15, counter_denominator 10; border 3: split_index 4). Tree 1
// tests the 0.9 and the Counter borders, tree 2 the 0.5 border.
json CtrModel() {
  auto key = [](const char* name) {
    return std::to_string(CatboostCtrKey(CatboostCategoryHash(name)));
  };
  const json element = json::array({json{{"cat_feature_index", 0},
                                          {"combination_element", "cat_feature_value"}}});
  json m = TinyModel();
  m["features_info"]["categorical_features"] =
      json::array({json{{"feature_id", "city"}, {"feature_index", 0}, {"flat_feature_index", 3}}});
  m["features_info"]["ctrs"] = json::array(
      {json{{"borders", {0.5, 0.9}}, {"ctr_type", "Borders"}, {"elements", element},
            {"identifier", "B"}, {"prior_denomerator", 1}, {"prior_numerator", 1},
            {"scale", 2}, {"shift", -0.5}, {"target_border_idx", 0}},
       json{{"borders", {3}}, {"ctr_type", "Counter"}, {"elements", element},
            {"identifier", "C"}, {"prior_denomerator", 1}, {"prior_numerator", 0},
            {"scale", 15}, {"shift", 0}, {"target_border_idx", 0}}});
  // Records: Borders [class 0, class 1] counts, Counter [count]; 2^64 - 1 is an empty slot.
  m["ctr_data"] = json{
      {"B", {{"counter_denominator", 0}, {"hash_stride", 3},
             {"hash_map", {key("paris"), 9, 1, key("brest"), 1, 9, "18446744073709551615", 5, 5}}}},
      {"C", {{"counter_denominator", 10}, {"hash_stride", 2},
             {"hash_map", {key("paris"), 10, key("brest"), 4, key("lyon"), 1}}}}};
  auto ctr_split = [](int index, double border) {
    return json{{"border", border}, {"ctr_target_border_idx", 0}, {"split_index", index},
                {"split_type", "OnlineCtr"}};
  };
  m["oblivious_trees"].push_back(json{{"leaf_values", {0, 1, 10, 100}},
                                      {"leaf_weights", {1, 1, 1, 1}},
                                      {"splits", {ctr_split(3, 0.9), ctr_split(4, 3)}}});
  m["oblivious_trees"].push_back(json{
      {"leaf_values", {0, 1000}}, {"leaf_weights", {1, 1}}, {"splits", {ctr_split(2, 0.5)}}});
  return m;
}

TEST(CatboostLoaderTest, CtrSplitsAreCategoricalSplitsOfTheirFeature) {
  absl::StatusOr<ForestPtr> loaded = Load(CtrModel());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Forest& f = **loaded;
  ASSERT_EQ(f.categories.size(), 4u);
  // The tables' categories, Borders' first (its empty slot skipped), then Counter's new one.
  EXPECT_EQ(f.categories[3].hashes,
            (std::vector<uint32_t>{CatboostCategoryHash("paris"), CatboostCategoryHash("brest"),
                                   CatboostCategoryHash("lyon")}));
  absl::StatusOr<CategoryCodes> city = CategoryCodesFor(f, 3);
  ASSERT_TRUE(city.ok()) << city.status();
  // Borders values ((class-1 count + 1) / (total + 1) - 0.5) * 2: paris -0.64, brest 0.82, lyon
  // and unseen (prior only) 1. Counter values count / 11 * 15: paris 13.6, brest 5.5, lyon 1.4,
  // unseen 0. Tree 0 (a = c = 0) gives 4; tree 1's bit 0 is Borders > 0.9, bit 1 Counter > 3;
  // tree 2's bit is Borders > 0.5. NaN goes left at every CTR split.
  struct Case {
    const char* name;
    float tree1, tree2;
  };
  const Case cases[] = {{"paris", 10, 0}, {"brest", 10, 1000}, {"lyon", 1, 1000},
                        {"tokyo", 1, 1000}, {"", 1, 1000}};
  std::vector<float> rows;
  for (const Case& c : cases) {
    absl::StatusOr<float> code = city->Code(c.name);
    ASSERT_TRUE(code.ok()) << code.status();
    rows.insert(rows.end(), {0.0f, 0.0f, 0.0f, *code});
  }
  rows.insert(rows.end(), {0.0f, 0.0f, 0.0f, kNanF});
  const std::vector<float> margin = ReferencePrediction(f, rows, Kind(OutputKind::kMargin));
  for (size_t i = 0; i < std::size(cases); ++i) {
    EXPECT_FLOAT_EQ(margin[i], 2 * (4 + cases[i].tree1 + cases[i].tree2) + 0.25f)
        << cases[i].name;
  }
  EXPECT_FLOAT_EQ(margin[std::size(cases)], 2 * 4 + 0.25f);
}

TEST(CatboostLoaderTest, OneHotAndCtrSplitsOnOneFeatureShareItsCodes) {
  // CatBoost gives a feature one-hot or CTR splits by its number of categories; a file with both
  // on one feature loads too: the one-hot values come first, then the tables' other categories.
  json m = CtrModel();
  m["features_info"]["categorical_features"][0]["values"] = json::array(
      {static_cast<int32_t>(CatboostCategoryHash("rome")),
       static_cast<int32_t>(CatboostCategoryHash("brest"))});
  // Split indices: 2 float borders, 2 one-hot values (2, 3), then the CTR borders (4, 5, 6).
  for (size_t t = 1; t <= 2; ++t) {
    for (json& split : m["oblivious_trees"][t]["splits"]) {
      split["split_index"] = split["split_index"].get<int>() + 2;
    }
  }
  m["oblivious_trees"].push_back(json{
      {"leaf_values", {0, 10000}},
      {"leaf_weights", {1, 1}},
      {"splits", {json{{"cat_feature_index", 0},
                       {"split_index", 2},
                       {"split_type", "OneHotFeature"},
                       {"value", static_cast<int32_t>(CatboostCategoryHash("rome"))}}}}});
  absl::StatusOr<ForestPtr> loaded = Load(m);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Forest& f = **loaded;
  EXPECT_EQ(f.categories[3].hashes,
            (std::vector<uint32_t>{CatboostCategoryHash("rome"), CatboostCategoryHash("brest"),
                                   CatboostCategoryHash("paris"), CatboostCategoryHash("lyon")}));
  absl::StatusOr<CategoryCodes> city = CategoryCodesFor(f, 3);
  ASSERT_TRUE(city.ok()) << city.status();
  // As in CtrSplitsAreCategoricalSplitsOfTheirFeature; rome is in no table (prior-only values) and
  // is the one-hot split's value.
  struct Case {
    const char* name;
    float trees;
  };
  const Case cases[] = {{"paris", 10}, {"brest", 1010}, {"lyon", 1001}, {"rome", 11001},
                        {"tokyo", 1001}};
  std::vector<float> rows;
  for (const Case& c : cases) rows.insert(rows.end(), {0.0f, 0.0f, 0.0f, *city->Code(c.name)});
  const std::vector<float> margin = ReferencePrediction(f, rows, Kind(OutputKind::kMargin));
  for (size_t i = 0; i < std::size(cases); ++i) {
    EXPECT_FLOAT_EQ(margin[i], 2 * (4 + cases[i].trees) + 0.25f) << cases[i].name;
  }
}

TEST(CatboostLoaderTest, CtrKeysAreTheCategoryHashesMultiplied) {
  for (const char* name : {"", "a", "paris", "Lorem ipsum dolor sit amet consectetur"}) {
    const uint32_t hash = CatboostCategoryHash(name);
    EXPECT_EQ(CatboostCategoryOfCtrKey(CatboostCtrKey(hash)), hash) << name;
  }
  // A key CatBoost's golden table holds for "paris" (tests/golden, scripts/make_golden_corpus.py
  // checks every key against the training categories).
  EXPECT_EQ(CatboostCtrKey(CatboostCategoryHash("paris")),
            uint64_t{0x4906ba494954cb65} * uint64_t{0x4906ba494954cb65} *
                static_cast<uint64_t>(static_cast<int64_t>(
                    static_cast<int32_t>(CatboostCategoryHash("paris")))));
  EXPECT_FALSE(CatboostCategoryOfCtrKey(~uint64_t{0}).has_value());  // the empty slot
}

TEST(CatboostLoaderTest, CtrOverACombinationIsUnimplementedNamingTheSplit) {
  const std::string path = (kGolden / "refused" / "cb_ctr_combination.json").string();
  absl::StatusOr<ForestPtr> r = LoadModelFile(path);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), path)) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "a CTR over a combination")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "max_ctr_complexity=1")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "oblivious_trees[")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "].splits[")) << r.status();
}

TEST(CatboostLoaderTest, CtrTypesGroveDoesNotComputeAreUnimplemented) {
  json m = CtrModel();
  m["features_info"]["ctrs"][1]["ctr_type"] = "FloatTargetMeanValue";
  absl::StatusOr<ForestPtr> r = Load(m);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(),
                                "oblivious_trees[1].splits[1]: split on a CTR of type "
                                "\"FloatTargetMeanValue\""))
      << r.status();
}

TEST(CatboostLoaderTest, MalformedCtrsNameThePosition) {
  struct Case {
    const char* what;
    void (*edit)(json&);
    const char* expect;
  };
  const Case cases[] = {
      {"split index past the CTR borders",
       [](json& m) { m["oblivious_trees"][1]["splits"][0]["split_index"] = 5; },
       "oblivious_trees[1].splits[0]: split_index 5 is no CTR border"},
      {"split index of a float border",
       [](json& m) { m["oblivious_trees"][1]["splits"][0]["split_index"] = 1; },
       "split_index 1 is no CTR border"},
      {"border not the CTR's", [](json& m) { m["oblivious_trees"][2]["splits"][0]["border"] = 0.6; },
       "oblivious_trees[2].splits[0]: border 0.6 is not features_info.ctrs[0]'s border"},
      {"target border not the CTR's",
       [](json& m) { m["oblivious_trees"][2]["splits"][0]["ctr_target_border_idx"] = 1; },
       "ctr_target_border_idx 1 is not features_info.ctrs[0]'s"},
      {"records cut short", [](json& m) { m["ctr_data"]["B"]["hash_map"].erase(0); },
       "8 entries, not records of 3"},
      {"negative count", [](json& m) { m["ctr_data"]["C"]["hash_map"][1] = -1; },
       "hash_map[1]: not a count"},
      {"fractional count", [](json& m) { m["ctr_data"]["B"]["hash_map"][2] = 0.5; },
       "hash_map[2]: not a count"},
      {"key not a number", [](json& m) { m["ctr_data"]["C"]["hash_map"][0] = "x"; },
       "hash_map[0]: key is not a 64-bit unsigned integer"},
      {"key twice",
       [](json& m) { m["ctr_data"]["C"]["hash_map"][2] = m["ctr_data"]["C"]["hash_map"][0]; },
       "a key listed twice"},
      {"stride of another type", [](json& m) { m["ctr_data"]["C"]["hash_stride"] = 3; },
       "hash_stride 3 does not fit a Counter CTR"},
      {"table missing", [](json& m) { m["ctr_data"].erase("C"); },
       "features_info.ctrs[1]: its table (ctr_data[identifier]) is missing"},
      {"target class past the classes",
       [](json& m) { m["features_info"]["ctrs"][0]["target_border_idx"] = 1; },
       "target_border_idx 1 outside the table's 2 classes"},
      {"prior denominator 0",
       [](json& m) { m["features_info"]["ctrs"][0]["prior_denomerator"] = 0; },
       "the prior's denominator is not above 0"},
      {"scale not finite as a float", [](json& m) { m["features_info"]["ctrs"][0]["scale"] = 1e39; },
       "scale is not a finite float"},
      {"elements naming no feature",
       [](json& m) { m["features_info"]["ctrs"][0]["elements"][0]["cat_feature_index"] = 4; },
       "a cat_feature_index that is no categorical feature's"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    json m = CtrModel();
    c.edit(m);
    absl::StatusOr<ForestPtr> r = Load(m);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), c.expect)) << r.status();
  }
}

TEST(CatboostLoaderTest, TreeWithoutSplitsIsOneLeaf) {
  // CatBoost writes "splits": null for a tree of depth 0.
  json m = TinyModel();
  m["oblivious_trees"].push_back(
      json{{"leaf_values", {5}}, {"leaf_weights", {100}}, {"splits", nullptr}});
  absl::StatusOr<ForestPtr> loaded = Load(m);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ((*loaded)->trees.size(), 2u);
  EXPECT_EQ((*loaded)->trees[1].num_nodes, 1u);
  const std::vector<float> rows = {0, 0, 0};
  EXPECT_FLOAT_EQ(ReferencePrediction(**loaded, rows, Kind(OutputKind::kMargin))[0],
                  2 * (4 + 5) + 0.25f);
}

TEST(CatboostLoaderTest, UnknownLossIsUnimplemented) {
  json m = TinyModel();
  m["model_info"]["params"]["loss_function"]["type"] = "YetiRank";
  absl::StatusOr<ForestPtr> r = Load(m);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "\"YetiRank\"")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "supported: RMSE")) << r.status();
}

TEST(CatboostLoaderTest, MalformedFilesNameThePosition) {
  struct Case {
    const char* what;
    void (*edit)(json&);
    const char* expect;
  };
  const Case cases[] = {
      {"leaf count", [](json& m) { m["oblivious_trees"][0]["leaf_values"].push_back(1); },
       "tiny.json: oblivious_trees[0].leaf_values: has 5 values, expected 4"},
      {"feature index",
       [](json& m) { m["oblivious_trees"][0]["splits"][1]["float_feature_index"] = 3; },
       "oblivious_trees[0].splits[1]: float_feature_index 3 outside the 3 float features"},
      {"border", [](json& m) { m["oblivious_trees"][0]["splits"][0]["border"] = "x"; },
       "oblivious_trees[0].splits[0]: no numeric \"border\""},
      {"huge border", [](json& m) { m["oblivious_trees"][0]["splits"][0]["border"] = 1e300; },
       "oblivious_trees[0].splits[0]: border is not a finite float"},
      {"nan treatment",
       [](json& m) { m["features_info"]["float_features"][2]["nan_value_treatment"] = "Sideways"; },
       "features_info.float_features[2]: unknown nan_value_treatment \"Sideways\""},
      {"leaf weight", [](json& m) { m["oblivious_trees"][0]["leaf_weights"][3] = -1; },
       "oblivious_trees[0].leaf_weights[3]: not a finite weight >= 0"},
      {"leaf value", [](json& m) { m["oblivious_trees"][0]["leaf_values"][2] = true; },
       "oblivious_trees[0].leaf_values[2]: not a number"},
      {"bias count", [](json& m) { m["scale_and_bias"][1].push_back(1); },
       "oblivious_trees[0].leaf_values: has 4 values, expected 8"},
      {"scale", [](json& m) { m["scale_and_bias"][0] = "2"; },
       "scale_and_bias[0]: scale is not a finite number"},
      {"depth",
       [](json& m) {
         for (int i = 0; i < 25; ++i) m["oblivious_trees"][0]["splits"].push_back(m["oblivious_trees"][0]["splits"][0]);
       },
       "oblivious_trees[0]: depth 27 exceeds 24"},
      {"flat index", [](json& m) { m["features_info"]["float_features"][1]["flat_feature_index"] = -2; },
       "features_info.float_features[1]: flat_feature_index -2 outside [0, 2^31)"},
      {"no trees", [](json& m) { m.erase("oblivious_trees"); },
       "no \"oblivious_trees\" or \"trees\" array"},
      {"no loss", [](json& m) { m.erase("model_info"); },
       "model_info.params.loss_function.type: missing"},
      {"one-hot value",
       [](json& m) {
         m = OneHotModel();
         m["oblivious_trees"][1]["splits"][0]["value"] = 12345;
       },
       "oblivious_trees[1].splits[0]: one-hot split on categorical feature \"city\" (column 3): "
       "value 12345 is not one of the feature's 3 values"},
      {"one-hot feature",
       [](json& m) {
         m = OneHotModel();
         m["oblivious_trees"][1]["splits"][0]["cat_feature_index"] = 1;
       },
       "oblivious_trees[1].splits[0]: cat_feature_index 1 outside the 1 categorical features"},
      {"one-hot hash",
       [](json& m) {
         m = OneHotModel();
         m["features_info"]["categorical_features"][0]["values"][1] = 4294967295.0;
       },
       "features_info.categorical_features[0].values[1]: not a 32-bit integer hash"},
      {"one-hot column",
       [](json& m) {
         m = OneHotModel();
         m["features_info"]["categorical_features"].push_back(
             m["features_info"]["categorical_features"][0]);
       },
       "features_info.categorical_features[1]: flat_feature_index 3 is already another "
       "categorical feature's"},
      {"tree node",
       [](json& m) {
         m.erase("oblivious_trees");
         m["trees"] = json::parse(R"([{"split": {"border": 0, "float_feature_index": 0},
                                       "left": {"value": 1}, "right": {"nothing": 2}}])");
       },
       "trees[0] node 2: neither a split nor a leaf"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    json m = TinyModel();
    c.edit(m);
    absl::StatusOr<ForestPtr> r = Load(m);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), c.expect)) << r.status();
  }
  // Truncated text is invalid JSON, every prefix refused without a crash.
  const std::string text = ReadFile(kGolden / "cb_multiclass3" / "catboost.json");
  for (size_t cut = 0; cut < text.size(); cut += 997) {
    absl::StatusOr<ForestPtr> r = LoadCatboostJson(text.substr(0, cut), "cut.json");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << cut;
  }
}

TEST(CatboostLoaderTest, NonSymmetricTreeByHand) {
  json m = TinyModel();
  m.erase("oblivious_trees");
  m["trees"] = json::parse(R"([{
      "split": {"border": 0.5, "float_feature_index": 2, "split_type": "FloatFeature"},
      "left": {"value": 1, "weight": 3},
      "right": {"split": {"border": -1, "float_feature_index": 0},
                "left": {"value": 2, "weight": 2}, "right": {"value": 4, "weight": 1}}}])");
  absl::StatusOr<ForestPtr> loaded = Load(m);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Forest& f = **loaded;
  EXPECT_EQ(f.trees[0].num_nodes, 5u);
  EXPECT_EQ(f.TreeNodes(0)[0].cover, 6.0);
  // Leaves numbered depth-first, left first: 0 (c <= 0.5), 1 (c > 0.5, a <= -1), 2.
  const std::vector<float> rows = {0, 0, 0.5f, -1, 0, 0.75f, 0, 0, 0.75f, 0, 0, kNanF};
  const std::vector<float> leaf = ReferencePrediction(f, rows, Kind(OutputKind::kLeaf));
  EXPECT_EQ(leaf, (std::vector<float>{0, 1, 2, 2}));
  const std::vector<float> margin = ReferencePrediction(f, rows, Kind(OutputKind::kMargin));
  EXPECT_EQ(margin, (std::vector<float>{2.25f, 4.25f, 8.25f, 8.25f}));
}

}  // namespace
}  // namespace grove
