// Feature groups on a GPU machine: path-dependent Shapley values of groups on treeshap_gpu and
// interventional values of groups on interventional_gpu (grouped layouts), which the automatic
// choice picks for groups and features alike.
#include <algorithm>
#include <cmath>
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

// Path-dependent groups on the GPU: treeshap_gpu explains a pinned grouping's layout (each group's
// elements one player; paths.h), in float and double arithmetic, values and interaction values, multi-output
// and categorical forests: the reference's values within the corpus tolerance, bit for bit run to
// run; the same forests' ungrouped answers still the features'.
TEST(FeatureGroupsGpuTest, PathDependentGroupsOnTheGpu) {
  REQUIRE_GPU();
  for (int seed : {41, 47, 53}) {
    testing::RandomForestOptions ro;
    ro.seed = seed;
    ro.num_trees = 30;
    ro.num_features = 9;
    ro.max_depth = seed == 53 ? 12 : 6;
    ro.num_outputs = seed == 47 ? 3 : 1;
    ro.categorical_fraction = seed == 47 ? 0.3 : 0.0;
    ForestPtr forest = testing::MakeRandomForest(ro);
    ThreadPool pool(4);
    const FeatureGroupsPtr groups = Groups(9);
    const int64_t n = 300;
    const std::vector<float> rows = testing::MakeRandomRows(*forest, n, 42);
    const RowsView view = MakeRowsView(rows.data(), n, 9);
    for (TreeShapPrecision precision :
         {TreeShapPrecision::kAuto, TreeShapPrecision::kFloat, TreeShapPrecision::kDouble}) {
      ExplainEngineOptions eo;
      eo.strategy = "treeshap_gpu";
      eo.gpu_precision = precision;
      absl::StatusOr<std::unique_ptr<ExplainEngine>> engine =
          ExplainEngine::Create(forest, eo, &pool);
      ASSERT_TRUE(engine.ok()) << engine.status();
      if (precision == TreeShapPrecision::kAuto) {
        // Not pinned: forced treeshap_gpu hands the grouping to the same algorithm on the CPU.
        ExplainOptions o;
        o.groups = groups.get();
        std::vector<float> out(n * ExplainWidth(*forest, false, groups.get()));
        RunInfo info;
        ASSERT_TRUE((*engine)
                        ->Explain(view, o, MakeMatrixView(out.data(), n, out.size() / n), &info)
                        .ok());
        EXPECT_EQ(info.strategy, "treeshap_cpu");
      }
      // The device copy of a grouping is made when it is pinned (a model's groups.json, at load).
      absl::StatusOr<CachePin> pin = (*engine)->PinGroups(*groups);
      ASSERT_TRUE(pin.ok()) << pin.status();
      for (bool interactions : {false, true}) {
        ExplainOptions o;
        o.groups = groups.get();
        o.interactions = interactions;
        const int64_t width = ExplainWidth(*forest, interactions, groups.get());
        std::vector<float> got(n * width), again(n * width), want(n * width);
        RunInfo info;
        ASSERT_TRUE((*engine)->Explain(view, o, MakeMatrixView(got.data(), n, width), &info).ok());
        EXPECT_EQ(info.strategy, "treeshap_gpu");
        ASSERT_TRUE(
            (*engine)->Explain(view, o, MakeMatrixView(again.data(), n, width), nullptr).ok());
        ASSERT_TRUE(ExplainCpuReference(*forest, view, o, MakeMatrixView(want.data(), n, width),
                                        &pool)
                        .ok());
        EXPECT_EQ(got, again) << "seed " << seed << " precision " << static_cast<int>(precision);
        for (size_t c = 0; c < want.size(); ++c) {
          ASSERT_NEAR(got[c], want[c], 1e-5 * std::max(1.0f, std::abs(want[c])))
              << "seed " << seed << " precision " << static_cast<int>(precision)
              << (interactions ? " interactions" : "")
              << " entry " << c;
        }
      }
    }
    // The automatic choice serves groups too, and the ungrouped explanation is the features'.
    absl::StatusOr<std::unique_ptr<ExplainEngine>> engine =
        ExplainEngine::Create(forest, ExplainEngineOptions{}, &pool);
    ASSERT_TRUE(engine.ok()) << engine.status();
    {
      // A grouping only a request names is explained on the CPU: no device copy is made for it.
      const int64_t device_bytes = (*engine)->DeviceBytes();
      ExplainOptions o;
      o.groups = groups.get();
      const int64_t width = ExplainWidth(*forest, false, groups.get());
      std::vector<float> got(n * width), want(n * width);
      RunInfo info;
      ASSERT_TRUE((*engine)->Explain(view, o, MakeMatrixView(got.data(), n, width), &info).ok());
      // Which CPU strategy is the cheapest (treeshap_cpu or the reference) is the load-time
      // timings' choice on this small forest.
      EXPECT_EQ(info.device, "cpu") << info.strategy;
      EXPECT_NE(info.strategy, "treeshap_gpu");
      EXPECT_EQ((*engine)->DeviceBytes(), device_bytes);
      // Pinned: a device copy, which the choice may now take, with the same values.
      absl::StatusOr<CachePin> pin = (*engine)->PinGroups(*groups);
      ASSERT_TRUE(pin.ok()) << pin.status();
      EXPECT_GT((*engine)->DeviceBytes(), device_bytes);
      ASSERT_TRUE((*engine)->Explain(view, o, MakeMatrixView(want.data(), n, width), &info).ok());
      for (size_t c = 0; c < want.size(); ++c) {
        ASSERT_NEAR(got[c], want[c], 1e-5 * std::max(1.0f, std::abs(want[c]))) << c;
      }
    }
    ExplainOptions plain;
    const int64_t width = ExplainWidth(*forest, false);
    std::vector<float> got(n * width), want(n * width);
    ASSERT_TRUE((*engine)->Explain(view, plain, MakeMatrixView(got.data(), n, width), nullptr).ok());
    ASSERT_TRUE(
        ExplainCpuReference(*forest, view, plain, MakeMatrixView(want.data(), n, width), &pool)
            .ok());
    for (size_t c = 0; c < want.size(); ++c) {
      ASSERT_NEAR(got[c], want[c], 1e-5 * std::max(1.0f, std::abs(want[c]))) << c;
    }
  }
}

TEST(FeatureGroupsGpuTest, InterventionalGroupsRunOnTheGpu) {
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
  std::vector<float> got(n * width), again(n * width), want(n * width);
  RunInfo info;
  ASSERT_TRUE((*engine)->Explain(view, o, MakeMatrixView(got.data(), n, width), &info).ok());
  EXPECT_EQ(info.strategy, "interventional_gpu");
  ASSERT_TRUE((*engine)->Explain(view, o, MakeMatrixView(again.data(), n, width), nullptr).ok());
  EXPECT_EQ(got, again);
  ASSERT_TRUE(ExplainInterventionalCpu(*forest, bg_view, view, o,
                                       MakeMatrixView(want.data(), n, width), &pool)
                  .ok());
  for (size_t c = 0; c < want.size(); ++c) {
    ASSERT_NEAR(got[c], want[c], 1e-5 * std::max(1.0f, std::abs(want[c]))) << c;
  }
  // The same engine's ungrouped values still come from its fastest strategy (the GPU's).
  InterventionalOptions plain;
  const int64_t fw = ExplainWidth(*forest, false);
  std::vector<float> values(n * fw);
  ASSERT_TRUE((*engine)->Explain(view, plain, MakeMatrixView(values.data(), n, fw), &info).ok());
  EXPECT_NE(info.strategy, "interventional_reference");
}

}  // namespace
}  // namespace grove
