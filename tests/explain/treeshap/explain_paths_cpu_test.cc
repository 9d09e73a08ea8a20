// CPU path-based TreeSHAP (core/explain/treeshap/explain_paths_cpu.h) against the CPU reference
// (ExplainCpuReference, Algorithm 1 in double) on every corpus case and on seeded random forests
// (depths 1-20, 1-1000 trees, NaNs, categorical splits, LightGBM rules, multi-output, vector
// leaves, extreme covers), SHAP values and interactions; plus the ExplainEngine strategy seam.
#include "core/explain/treeshap/explain_paths_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/explain_engine.h"
#include "core/model/loader.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"
#include "tests/testing/explain_reference.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

constexpr double kTolerance = 1e-5;  // x max(1, |margin|), the accuracy bound

std::vector<float> RunPaths(const PathLayout& l, const std::vector<float>& rows, bool interactions,
                            ThreadPool* pool, int begin = 0, int end = 0) {
  const int64_t n = static_cast<int64_t>(rows.size()) / l.num_features;
  const int64_t f1 = l.num_features + 1;
  const int64_t width = l.num_outputs * (interactions ? f1 * f1 : f1);
  std::vector<float> out(n * width, -12345.0f);
  ExplainOptions o;
  o.interactions = interactions;
  o.iteration_begin = begin;
  o.iteration_end = end;
  absl::Status s = ExplainPathsCpu(l, MakeRowsView(rows.data(), n, l.num_features), o,
                                   MakeMatrixView(out.data(), n, width), pool);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

PathLayoutPtr Layout(const Forest& f) {
  absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(f);
  EXPECT_TRUE(l.ok()) << l.status();
  return l.ok() ? *l : nullptr;
}

struct RandomCase {
  int depth;
  int trees;
  int outputs;
  bool vector_leaves;
  double categorical;
  bool lightgbm;
  double extreme;
  int shap_rows;
  int interaction_rows;
  uint64_t seed;
};

class PathsCpuRandomTest : public ::testing::TestWithParam<RandomCase> {};

TEST_P(PathsCpuRandomTest, MatchesTheReference) {
  const RandomCase c = GetParam();
  RandomForestOptions o;
  o.max_depth = c.depth;
  o.num_trees = c.trees;
  o.num_outputs = c.outputs;
  o.vector_leaves = c.vector_leaves;
  o.categorical_fraction = c.categorical;
  o.lightgbm_rules = c.lightgbm;
  o.extreme_cover_probability = c.extreme;
  o.num_features = 12;
  o.seed = c.seed;
  ForestPtr f = MakeRandomForest(o);
  PathLayoutPtr l = Layout(*f);
  ASSERT_NE(l, nullptr);
  ThreadPool pool(2);
  const std::vector<float> rows = MakeRandomRows(*f, c.shap_rows, c.seed + 100, 0.15);
  const std::vector<float> ref = ReferenceExplanation(*f, rows, false, &pool);
  const std::vector<float> got = RunPaths(*l, rows, false, &pool);
  EXPECT_LE(MaxMarginError(got, ref, c.shap_rows, f->num_outputs), kTolerance);
  if (c.interaction_rows > 0) {
    const std::vector<float> irows(rows.begin(), rows.begin() + c.interaction_rows * f->num_features);
    const std::vector<float> iref = ReferenceExplanation(*f, irows, true, &pool);
    const std::vector<float> igot = RunPaths(*l, irows, true, &pool);
    EXPECT_LE(MaxMarginError(igot, iref, c.interaction_rows, f->num_outputs), kTolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Forests, PathsCpuRandomTest,
    ::testing::Values(
        // depth, trees, outputs, vector, categorical, lightgbm, extreme, shap rows, int rows, seed
        RandomCase{1, 1, 1, false, 0.0, false, 0.0, 50, 10, 1},
        RandomCase{2, 10, 1, false, 0.3, false, 0.0, 50, 10, 2},
        RandomCase{3, 1000, 1, false, 0.0, false, 0.0, 20, 3, 3},
        RandomCase{6, 50, 3, false, 0.3, true, 0.1, 40, 8, 4},
        RandomCase{6, 20, 3, true, 0.2, false, 0.0, 40, 8, 5},
        RandomCase{10, 20, 1, false, 0.2, true, 0.2, 30, 5, 6},
        RandomCase{14, 5, 2, false, 0.3, false, 0.0, 20, 3, 7},
        RandomCase{20, 3, 1, false, 0.2, true, 0.1, 20, 2, 8},
        RandomCase{20, 2, 1, false, 0.0, false, 0.0, 20, 2, 9}));

TEST(PathsCpuTest, IterationRanges) {
  ForestPtr f = MakeRandomForest({.num_trees = 30, .max_depth = 5, .num_outputs = 3, .seed = 31});
  PathLayoutPtr l = Layout(*f);
  const std::vector<float> rows = MakeRandomRows(*f, 10, 3);
  for (auto [b, e] : {std::pair{0, 0}, std::pair{2, 5}, std::pair{9, 10}, std::pair{0, 4}}) {
    for (bool inter : {false, true}) {
      EXPECT_LE(MaxMarginError(RunPaths(*l, rows, inter, nullptr, b, e),
                               ReferenceExplanation(*f, rows, inter, nullptr, b, e), 10, f->num_outputs),
                kTolerance)
          << b << " " << e << " " << inter;
    }
  }
  std::vector<float> out(10 * ExplainWidth(*f, false));
  ExplainOptions bad;
  bad.iteration_begin = 5;
  bad.iteration_end = 3;
  EXPECT_FALSE(ExplainPathsCpu(*l, MakeRowsView(rows.data(), 10, f->num_features), bad,
                               MakeMatrixView(out.data(), 10, ExplainWidth(*f, false)), nullptr)
                   .ok());
}

TEST(PathsCpuTest, LongPathsAreExact) {
  RandomForestOptions o;
  o.num_trees = 2;
  o.max_depth = 45;
  o.num_features = 200;
  o.leaf_probability = 0.6;
  o.seed = 5;
  ForestPtr f = MakeRandomForest(o);
  PathLayoutPtr l = Layout(*f);
  ASSERT_GT(l->long_paths.size(), 0u);
  const std::vector<float> rows = MakeRandomRows(*f, 10, 4, 0.05);
  EXPECT_LE(MaxMarginError(RunPaths(*l, rows, false, nullptr), ReferenceExplanation(*f, rows, false, nullptr),
                           10, 1),
            kTolerance);
  EXPECT_LE(MaxMarginError(RunPaths(*l, rows, true, nullptr), ReferenceExplanation(*f, rows, true, nullptr),
                           10, 1),
            kTolerance);
}

// Interaction values reuse each thread's accumulator between calls, which every call leaves all
// zeros: calls on one thread over models of other shapes, players and ranges keep the reference's
// values, and a call repeated gives the same bits.
TEST(PathsCpuTest, InteractionAccumulatorIsZeroBetweenCalls) {
  ForestPtr a = MakeRandomForest({.num_trees = 12, .max_depth = 5, .num_outputs = 3, .seed = 51});
  ForestPtr b = MakeRandomForest({.num_trees = 6, .max_depth = 6, .num_features = 40, .seed = 52});
  PathLayoutPtr la = Layout(*a), lb = Layout(*b);
  const std::vector<float> ra = MakeRandomRows(*a, 6, 6), rb = MakeRandomRows(*b, 6, 7);
  const std::vector<float> first = RunPaths(*la, ra, true, nullptr);
  EXPECT_LE(MaxMarginError(RunPaths(*lb, rb, true, nullptr),
                           ReferenceExplanation(*b, rb, true, nullptr), 6, b->num_outputs),
            kTolerance);
  EXPECT_LE(MaxMarginError(RunPaths(*la, ra, true, nullptr, 1, 3),
                           ReferenceExplanation(*a, ra, true, nullptr, 1, 3), 6, a->num_outputs),
            kTolerance);
  const std::vector<float> again = RunPaths(*la, ra, true, nullptr);
  EXPECT_LE(MaxMarginError(again, ReferenceExplanation(*a, ra, true, nullptr), 6, a->num_outputs),
            kTolerance);
  EXPECT_EQ(0, std::memcmp(first.data(), again.data(), first.size() * sizeof(float)));
}

// An accumulator past the kept bound (100 outputs x 291^2 doubles: 68 MB) lives for its call only:
// two calls of it and a small call after keep the reference's values.
TEST(PathsCpuTest, LargeInteractionAccumulatorIsReleasedAndRebuilt) {
  ForestPtr big = MakeRandomForest(
      {.num_trees = 100, .max_depth = 3, .num_features = 290, .num_outputs = 100, .seed = 53});
  ForestPtr small = MakeRandomForest({.num_trees = 12, .max_depth = 5, .num_outputs = 3, .seed = 54});
  PathLayoutPtr lb = Layout(*big), ls = Layout(*small);
  const std::vector<float> rb = MakeRandomRows(*big, 2, 8), rs = MakeRandomRows(*small, 4, 9);
  const std::vector<float> want = ReferenceExplanation(*big, rb, true, nullptr);
  for (int call = 0; call < 2; ++call) {
    EXPECT_LE(MaxMarginError(RunPaths(*lb, rb, true, nullptr), want, 2, big->num_outputs),
              kTolerance)
        << "call " << call;
  }
  EXPECT_LE(MaxMarginError(RunPaths(*ls, rs, true, nullptr),
                           ReferenceExplanation(*small, rs, true, nullptr), 4, small->num_outputs),
            kTolerance);
}

TEST(PathsCpuTest, DeterministicAcrossThreadCounts) {
  ForestPtr f = MakeRandomForest({.num_trees = 40, .max_depth = 8, .seed = 41});
  PathLayoutPtr l = Layout(*f);
  const std::vector<float> rows = MakeRandomRows(*f, 64, 5);
  ThreadPool pool(3);
  const std::vector<float> a = RunPaths(*l, rows, false, nullptr);
  const std::vector<float> b = RunPaths(*l, rows, false, &pool);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

TEST(PathsCpuTest, EveryCorpusCaseMatchesTheReference) {
  const std::vector<std::string> dirs = testing::CorpusCaseDirs();
  if (dirs.empty()) GTEST_SKIP() << "no corpus found";
  ThreadPool pool(2);
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    absl::StatusOr<testing::CorpusCase> c = testing::LoadCorpusCase(dir);
    ASSERT_TRUE(c.ok()) << c.status();
    absl::StatusOr<ForestPtr> f = LoadModelFile(c->model_path);
    ASSERT_TRUE(f.ok()) << f.status();
    if (!CheckExplainable(**f).ok()) continue;
    PathLayoutPtr l = Layout(**f);
    ASSERT_NE(l, nullptr);
    const int64_t n = std::min<int64_t>(c->rows, 100);
    const std::vector<float> rows(c->X.begin(), c->X.begin() + n * c->num_features);
    const double shap = MaxMarginError(RunPaths(*l, rows, false, &pool),
                                       ReferenceExplanation(**f, rows, false, &pool), n, (*f)->num_outputs);
    const int64_t ni = std::min<int64_t>(n, 5);
    const std::vector<float> irows(rows.begin(), rows.begin() + ni * c->num_features);
    const double inter = MaxMarginError(RunPaths(*l, irows, true, &pool),
                                        ReferenceExplanation(**f, irows, true, &pool), ni, (*f)->num_outputs);
    EXPECT_LE(shap, kTolerance);
    EXPECT_LE(inter, kTolerance);
    std::printf("%s: paths %lld bins %lld util %.3f; shap err %.3g, interactions err %.3g\n",
                c->name.c_str(), static_cast<long long>(l->stats.num_paths),
                static_cast<long long>(l->stats.num_bins), l->stats.utilisation, shap, inter);
  }
}

// The engine seam: strategy overrides, RunInfo, refusals.
TEST(ExplainEngineTest, StrategiesAndOverrides) {
  ForestPtr f = MakeRandomForest({.num_trees = 10, .max_depth = 5, .num_outputs = 2, .seed = 51});
  ThreadPool pool(2);
  const std::vector<float> rows = MakeRandomRows(*f, 8, 6);
  const std::vector<float> ref = ReferenceExplanation(*f, rows, false, nullptr);
  const int64_t width = ExplainWidth(*f, false);
  for (const std::string& name : {"auto", "cpu", "treeshap_cpu", "reference", "cpu_reference"}) {
    SCOPED_TRACE(name);
    ExplainEngineOptions eo;
    eo.strategy = name;
    eo.use_gpu = false;
    absl::StatusOr<std::unique_ptr<ExplainEngine>> e = ExplainEngine::Create(f, eo, &pool);
    ASSERT_TRUE(e.ok()) << e.status();
    std::vector<float> out(8 * width);
    RunInfo info;
    ASSERT_TRUE((*e)->Explain(MakeRowsView(rows.data(), 8, f->num_features), {},
                              MakeMatrixView(out.data(), 8, width), &info)
                    .ok());
    EXPECT_EQ(info.device, "cpu");
    EXPECT_FALSE(info.strategy.empty());
    if (name == std::string("reference") || name == std::string("cpu_reference")) {
      EXPECT_EQ(info.strategy, "reference");
    }
    if (name == std::string("treeshap_cpu")) EXPECT_EQ(info.strategy, "treeshap_cpu");
    if (name == std::string("auto")) EXPECT_NE(info.reason.find("predicted"), std::string::npos);
    EXPECT_LE(MaxMarginError(out, ref, 8, f->num_outputs), kTolerance);
    EXPECT_FALSE((*e)->Describe().empty());
  }
  ExplainEngineOptions bogus;
  bogus.strategy = "bogus";
  EXPECT_EQ(ExplainEngine::Create(f, bogus, &pool).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A GPU strategy without a GPU: refused at creation, never silently replaced.
  if (!ExplainEngine::Create(f, {}, &pool).ok()) FAIL();
  ExplainEngineOptions gpu;
  gpu.strategy = "treeshap_gpu";
  gpu.use_gpu = false;
  EXPECT_FALSE(ExplainEngine::Create(f, gpu, &pool).ok());
  // The engine exposes its layout for `grove inspect`.
  absl::StatusOr<std::unique_ptr<ExplainEngine>> e = ExplainEngine::Create(f, {}, &pool);
  ASSERT_TRUE(e.ok());
  ASSERT_NE((*e)->layout(), nullptr);
  EXPECT_NE((*e)->layout()->stats.Describe().find("bins"), std::string::npos);
}

}  // namespace
}  // namespace grove
