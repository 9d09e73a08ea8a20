// The record layout (core/predict/tahoe/tahoe_records.h): a split and its two children in one
// 16-byte record, each tree a complete 4-ary heap of records with its leaf positions after it. TahoeSumRecords' sums are bit-identical to TahoeSumFixedRoots' on the depth-first
// nodes (seeded random forests with NaNs, early leaves and single-leaf trees, depths 0 to 16, one,
// two and four rows at a time, with and without the NaN test; LightGBM rules; every corpus model
// that qualifies); the heaps have the sizes the header states; forests that do not qualify are
// refused with FAILED_PRECONDITION and a reason.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/model/loader.h"
#include "core/predict/tahoe/tahoe_forest.h"
#include "core/predict/tahoe/tahoe_records.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

constexpr int64_t kBudget = int64_t{1} << 30;

// Sums of kRows rows starting at row r0 over every tree: the record walk against
// TahoeSumFixedRoots on the depth-first nodes, bit for bit.
template <int kRows>
void CheckSums(const TahoeForest& tf, const TahoeRecordLayout& layout,
               const std::vector<float>& rows, int64_t r0, const std::string& what) {
  const TahoeForestView v = tf.HostView();
  const int F = tf.forest().num_features;
  std::vector<uint32_t> dfs_roots;
  for (const TahoeTree& t : tf.trees()) dfs_roots.push_back(t.root);
  const uint32_t T = static_cast<uint32_t>(dfs_roots.size());
  TahoeNanPaddedRow<TahoePlainRow> padded[kRows];
  TahoePlainRow plain[kRows];
  bool has_nan = false;
  for (int j = 0; j < kRows; ++j) {
    plain[j] = TahoePlainRow{rows.data() + (r0 + j) * F};
    padded[j] = {plain[j], static_cast<uint32_t>(F)};
    for (int c = 0; c < F; ++c) has_nan |= std::isnan(rows[(r0 + j) * F + c]);
  }
  const double* leaves = layout.leaves.empty() ? nullptr : layout.leaves.data();
  double want[kRows], got[kRows];
  TahoeSumFixedRoots<false, kRows>(v, tf.nodes8().data(), dfs_roots.data(), 0, T, padded, want);
  TahoeSumRecords<false, kRows>(layout.records.data(), leaves, layout.roots.data(), 0, T, plain,
                                got);
  for (int j = 0; j < kRows; ++j) {
    ASSERT_EQ(want[j], got[j]) << what << " row " << r0 + j << " of " << kRows;
  }
  if (!has_nan) {
    TahoeSumRecords<true, kRows>(layout.records.data(), leaves, layout.roots.data(), 0, T, plain,
                                 got);
    for (int j = 0; j < kRows; ++j) {
      ASSERT_EQ(want[j], got[j]) << what << " (NaN-free walk) row " << r0 + j;
    }
  }
  // A range of trees (the walk of one tree group or part) adds the same leaves.
  if (T >= 3) {
    TahoeSumFixedRoots<false, kRows>(v, tf.nodes8().data(), dfs_roots.data(), 1, T - 1, padded,
                                     want);
    TahoeSumRecords<false, kRows>(layout.records.data(), leaves, layout.roots.data(), 1, T - 1,
                                  plain, got);
    for (int j = 0; j < kRows; ++j) ASSERT_EQ(want[j], got[j]) << what << " trees 1..T-1";
  }
}

void CheckForest(const TahoeForest& tf, const std::vector<float>& rows, int64_t n,
                 const std::string& what) {
  absl::StatusOr<TahoeRecordLayout> layout = BuildTahoeRecordLayout(tf, kBudget);
  ASSERT_TRUE(layout.ok()) << what << ": " << layout.status();
  ASSERT_EQ(layout->roots.size(), tf.trees().size());
  for (int64_t r = 0; r < n; ++r) CheckSums<1>(tf, *layout, rows, r, what);
  for (int64_t r = 0; r + 2 <= n; r += 2) CheckSums<2>(tf, *layout, rows, r, what);
  for (int64_t r = 0; r + 4 <= n; r += 4) CheckSums<4>(tf, *layout, rows, r, what);
}

TEST(TahoeRecordsTest, RandomForestsGiveTheSameSums) {
  int checked = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    for (bool lightgbm : {false, true}) {
      RandomForestOptions o;
      o.seed = seed;
      o.num_trees = 20;
      o.max_depth = static_cast<int>(seed * 5 % 17);  // 0 .. 16, odd and even
      o.num_features = 1 + static_cast<int>(seed * 7 % 40);
      o.leaf_probability = 0.25;
      o.lightgbm_rules = lightgbm;
      o.missing_zero = false;  // the missing-zero rule leaves the fixed walk
      ForestPtr f = MakeRandomForest(o);
      const std::vector<float> rows = MakeRandomRows(*f, 48, seed + 31, seed % 2 ? 0.2 : 0.0);
      absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
      ASSERT_TRUE(tf.ok()) << tf.status();
      if (!(*tf)->fixed_walk()) continue;  // LightGBM's NaN-as-zero splits keep some forests off
      CheckForest(**tf, rows, 48,
                  "seed " + std::to_string(seed) + (lightgbm ? " lightgbm" : " xgboost"));
      ++checked;
    }
  }
  EXPECT_GE(checked, 15);
}

TEST(TahoeRecordsTest, HeapsHaveTheStatedSizes) {
  RandomForestOptions o;
  o.seed = 3;
  o.num_trees = 12;
  o.max_depth = 7;
  o.num_features = 9;
  o.leaf_probability = 0.3;
  ForestPtr f = MakeRandomForest(o);
  absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
  ASSERT_TRUE(tf.ok()) << tf.status();
  absl::StatusOr<TahoeRecordLayout> layout = BuildTahoeRecordLayout(**tf, kBudget);
  ASSERT_TRUE(layout.ok()) << layout.status();
  // Each root word's heap starts where the previous tree's records end: K levels of records, then
  // for an even depth 4^K leaves four a record.
  uint32_t expected_first = 0;
  int deepest = 0;
  for (size_t t = 0; t < layout->roots.size(); ++t) {
    const uint32_t root = layout->roots[t];
    const uint32_t levels = root & ((1u << tahoe_record_bits::kLevelBits) - 1u);
    EXPECT_EQ(root >> tahoe_record_bits::kLevelBits, expected_first) << "tree " << t;
    EXPECT_LE(levels, 4u);  // depth 7 at most: four levels
    deepest = std::max<int>(deepest, static_cast<int>(levels));
    // The tree's records end where the next tree's begin: its heap and its 4^K leaf positions
    // four a record.
    const uint32_t heap = ((1u << (2 * levels)) - 1u) / 3u;
    const uint32_t leaf_records = ((1u << (2 * levels)) + 3u) / 4u;
    const uint32_t next_first = t + 1 < layout->roots.size()
                                    ? layout->roots[t + 1] >> tahoe_record_bits::kLevelBits
                                    : static_cast<uint32_t>(layout->records.size());
    EXPECT_EQ(next_first, expected_first + heap + leaf_records) << "tree " << t;
    expected_first = next_first;
  }
  EXPECT_EQ(deepest, 4);  // the first tree reaches max_depth
  EXPECT_TRUE(layout->leaves.empty() ||
              std::all_of(layout->leaves.begin(), layout->leaves.end(),
                          [](double x) { return std::isfinite(x); }));
}

TEST(TahoeRecordsTest, RefusesWhatRecordsCannotHold) {
  {  // categorical splits
    RandomForestOptions o;
    o.seed = 4;
    o.categorical_fraction = 0.5;
    o.num_features = 12;
    ForestPtr f = MakeRandomForest(o);
    absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
    ASSERT_TRUE(tf.ok()) << tf.status();
    ASSERT_TRUE((*tf)->categorical());
    const absl::Status s = BuildTahoeRecordLayout(**tf, kBudget).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("categorical"), std::string::npos) << s;
  }
  {  // features past 511
    RandomForestOptions o;
    o.seed = 6;
    o.num_features = 2000;
    o.num_trees = 30;
    ForestPtr f = MakeRandomForest(o);
    absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
    ASSERT_TRUE(tf.ok()) << tf.status();
    const absl::Status s = BuildTahoeRecordLayout(**tf, kBudget).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("feature"), std::string::npos) << s;
  }
  {  // a budget the complete heaps do not fit
    RandomForestOptions o;
    o.seed = 7;
    o.max_depth = 12;
    ForestPtr f = MakeRandomForest(o);
    absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
    ASSERT_TRUE(tf.ok()) << tf.status();
    const absl::Status s = BuildTahoeRecordLayout(**tf, 64 << 10).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("bytes"), std::string::npos) << s;
    EXPECT_TRUE(BuildTahoeRecordLayout(**tf, kBudget).ok());
  }
}

TEST(TahoeRecordsTest, CorpusModelsGiveTheSameSums) {
  const std::vector<std::string> dirs = testing::CorpusCaseDirs();
  if (dirs.empty()) GTEST_SKIP() << "no corpus found";
  int checked = 0;
  for (const std::string& dir : dirs) {
    absl::StatusOr<testing::CorpusModel> m = testing::LoadCorpusModel(dir);
    ASSERT_TRUE(m.ok()) << m.status();
    const testing::CorpusCase& c = m->c;
    const ForestPtr& f = m->forest;
    absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
    ASSERT_TRUE(tf.ok()) << tf.status();
    absl::StatusOr<TahoeRecordLayout> layout = BuildTahoeRecordLayout(**tf, kBudget);
    if (!(*tf)->fixed_walk() || (*tf)->categorical()) {
      EXPECT_EQ(layout.status().code(), absl::StatusCode::kFailedPrecondition) << c.name;
      continue;
    }
    if (!layout.ok()) {  // many features or deep sparse trees: refused with a reason
      EXPECT_EQ(layout.status().code(), absl::StatusCode::kFailedPrecondition) << c.name;
      continue;
    }
    const std::vector<float> rows = testing::GroveRows(c, *f);
    CheckForest(**tf, rows, std::min<int64_t>(c.rows, 200), c.name);
    ++checked;
  }
  EXPECT_GT(checked, 0);
  std::printf("%d corpus models checked on the record layout\n", checked);
}

}  // namespace
}  // namespace grove
