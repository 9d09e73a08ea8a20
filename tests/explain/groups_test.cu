// Feature groups on a GPU machine: the GPU strategies do not compute groups, so the engines'
// automatic choice must send a grouped request to the CPU reference while the GPU strategies keep
// serving ungrouped ones: grouped answers equal the reference's bit for bit, run to run, and the
// ungrouped answer of the same engine is the GPU's, as it was.
#include <string>
#include <vector>

#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/explain_engine.h"
#include "core/explain/interventional/interventional.h"
#include "core/explain/interventional_engine.h"
#include "core/gpu/device_set.h"
#include "gtest/gtest.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

#define REQUIRE_GPU() \
  if (gpu::VisibleGpuCount() == 0) GTEST_SKIP() << "no CUDA device"

FeatureGroupsPtr Groups(int num_features) {
  std::vector<GroupSpec> spec = {{"low", {FeatureRef{0, ""}, FeatureRef{2, ""}}},
                                 {"high", {FeatureRef{num_features - 1, ""},
                                           FeatureRef{num_features - 2, ""}}}};
  absl::StatusOr<FeatureGroupsPtr> g = ResolveFeatureGroups(spec, num_features, {});
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

TEST(FeatureGroupsGpuTest, PathDependentGroupsRunOnTheReference) {
  REQUIRE_GPU();
  testing::RandomForestOptions ro;
  ro.seed = 41;
  ro.num_trees = 30;
  ro.num_features = 9;
  ForestPtr forest = testing::MakeRandomForest(ro);
  ThreadPool pool(4);
  ExplainEngineOptions eo;
  absl::StatusOr<std::unique_ptr<ExplainEngine>> engine = ExplainEngine::Create(forest, eo, &pool);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const FeatureGroupsPtr groups = Groups(9);
  const int64_t n = 300;
  const std::vector<float> rows = testing::MakeRandomRows(*forest, n, 42);
  const RowsView view = MakeRowsView(rows.data(), n, 9);
  for (bool interactions : {false, true}) {
    ExplainOptions o;
    o.groups = groups.get();
    o.interactions = interactions;
    const int64_t width = ExplainWidth(*forest, interactions, groups.get());
    std::vector<float> got(n * width), again(n * width), want(n * width);
    RunInfo info;
    ASSERT_TRUE((*engine)->Explain(view, o, MakeMatrixView(got.data(), n, width), &info).ok());
    EXPECT_EQ(info.strategy, "reference");
    ASSERT_TRUE((*engine)->Explain(view, o, MakeMatrixView(again.data(), n, width), nullptr).ok());
    ASSERT_TRUE(
        ExplainCpuReference(*forest, view, o, MakeMatrixView(want.data(), n, width), &pool).ok());
    EXPECT_EQ(got, want);
    EXPECT_EQ(got, again);
  }
}

TEST(FeatureGroupsGpuTest, InterventionalGroupsRunOnTheReference) {
  REQUIRE_GPU();
  testing::RandomForestOptions ro;
  ro.seed = 43;
  ro.num_trees = 20;
  ro.num_features = 8;
  ForestPtr forest = testing::MakeRandomForest(ro);
  ThreadPool pool(4);
  const std::vector<float> bg = testing::MakeRandomRows(*forest, 16, 44);
  const RowsView bg_view = MakeRowsView(bg.data(), 16, 8);
  absl::StatusOr<std::unique_ptr<InterventionalEngine>> engine =
      InterventionalEngine::Create(forest, nullptr, bg_view, InterventionalEngineOptions{}, &pool);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const FeatureGroupsPtr groups = Groups(8);
  const int64_t n = 200;
  const std::vector<float> rows = testing::MakeRandomRows(*forest, n, 45);
  const RowsView view = MakeRowsView(rows.data(), n, 8);
  InterventionalOptions o;
  o.groups = groups.get();
  const int64_t width = ExplainWidth(*forest, false, groups.get());
  std::vector<float> got(n * width), want(n * width);
  RunInfo info;
  ASSERT_TRUE((*engine)->Explain(view, o, MakeMatrixView(got.data(), n, width), &info).ok());
  EXPECT_EQ(info.strategy, "interventional_reference");
  ASSERT_TRUE(ExplainInterventionalCpu(*forest, bg_view, view, o,
                                       MakeMatrixView(want.data(), n, width), &pool)
                  .ok());
  EXPECT_EQ(got, want);
  // The same engine's ungrouped values still come from its fastest strategy (the GPU's).
  InterventionalOptions plain;
  const int64_t fw = ExplainWidth(*forest, false);
  std::vector<float> values(n * fw);
  ASSERT_TRUE((*engine)->Explain(view, plain, MakeMatrixView(values.data(), n, fw), &info).ok());
  EXPECT_NE(info.strategy, "interventional_reference");
}

}  // namespace
}  // namespace grove
