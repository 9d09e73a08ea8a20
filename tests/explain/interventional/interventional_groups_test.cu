// Interventional values of feature groups on the GPU (interventional_gpu: a grouping's grouped
// layout and background masks, each lane folding its path's group members): the engine's gpu
// strategy against the CPU path form (paths_cpu) and the reference in every output space and
// attribution, values and interaction values, bit for bit from run to run; refusals of other
// players. The kernels accumulate in double (64-bit fixed point) only: there is no float variant.
// Label gpu: every test skips cleanly when no CUDA device is visible.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/interventional/interventional_gpu.h"
#include "core/explain/interventional/interventional_paths.h"
#include "core/explain/interventional_engine.h"
#include "core/explain/paths.h"
#include "core/model/feature_groups.h"
#include "gtest/gtest.h"
#include "tests/testing/coalition_games.h"
#include "tests/testing/gpu_skip.h"
#include "tests/testing/interventional_reference.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

using testing::Describe;
using testing::ExplainWithEngine;
using testing::ExpectNearReference;
using testing::PathFormSpaceCases;
using testing::RandomFeatureGroups;
using testing::WithLink;
using Result = absl::StatusOr<std::vector<float>>;  // an engine's values, or its error

constexpr double kTolerance = 1e-5;  // x max(1, |value|)

std::unique_ptr<InterventionalEngine> MakeEngine(ForestPtr f, const std::vector<float>& bg,
                                                 const std::string& strategy, ThreadPool* pool) {
  return testing::MakeInterventionalEngine(std::move(f), bg, strategy, /*use_gpu=*/true, pool);
}

// Every seeded forest of the interventional tests (NaNs, categorical splits, LightGBM rules,
// multi-output, vector leaves, paths of up to 31 features), two groupings, every space the GPU
// serves, Shapley and Banzhaf: the gpu strategy serves the groups, within the tolerance of
// paths_cpu and of the reference (or the reference's refusal of a too wide exact pair), and the
// same bits on a second call.
TEST(InterventionalGroupsGpuTest, MatchesTheCpuAndRepeatsBitForBit) {
  SKIP_WITHOUT_GPU();
  ThreadPool pool(4);
  int compared = 0;
  for (const RandomForestOptions& ro : testing::InterventionalForestOptions()) {
    ForestPtr base = MakeRandomForest(ro);
    const std::vector<float> rows = MakeRandomRows(*base, 37, ro.seed + 10);  // not a multiple of 8
    const std::vector<float> bg = MakeRandomRows(*base, 40, ro.seed + 20);
    for (Link link : testing::AllLinks(ro)) {
      ForestPtr f = link == Link::kIdentity ? base : WithLink(*base, link);
      std::unique_ptr<InterventionalEngine> gpu = MakeEngine(f, bg, "gpu", &pool);
      std::unique_ptr<InterventionalEngine> cpu = MakeEngine(f, bg, "paths_cpu", &pool);
      ASSERT_NE(gpu, nullptr);
      ASSERT_NE(cpu, nullptr);
      for (uint64_t seed : {ro.seed, ro.seed + 100}) {
        const FeatureGroupsPtr groups = RandomFeatureGroups(f->num_features, seed);
        for (const testing::SpaceCase& sc : PathFormSpaceCases(link)) {
          for (Attribution attribution : {Attribution::kShapley, Attribution::kBanzhaf}) {
            InterventionalOptions o;
            o.groups = groups.get();
            o.output_space = sc.space;
            o.interactions = sc.interactions;
            o.attribution = attribution;
            const std::string what = absl::StrCat("seed ", ro.seed, " groups ", seed, " link ",
                                                  static_cast<int>(link), " ", Describe(o));
            RunInfo info;
            const Result got = ExplainWithEngine(*gpu, *f, rows, o, &info);
            EXPECT_EQ(info.strategy, "interventional_gpu") << what;
            const Result again = ExplainWithEngine(*gpu, *f, rows, o, nullptr);
            const Result twin = ExplainWithEngine(*cpu, *f, rows, o, nullptr);
            ASSERT_EQ(got.status(), twin.status()) << what;
            ASSERT_EQ(again.status(), got.status()) << what;
            if (got.ok()) {
              EXPECT_EQ(*again, *got) << what;
              ExpectNearReference(*got, *twin, kTolerance, what + " against paths_cpu");
            }
            compared += testing::ExpectLikeTheReference(got, *f, rows, bg, o, kTolerance, what);
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 100);
}

// A grouping of singletons is the features' explanation on the GPU, bit for bit (the same
// layout, no group members); and the features' values stay the GPU's after groups were served.
TEST(InterventionalGroupsGpuTest, SingletonsAreTheFeatures) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = WithLink(*MakeRandomForest({.num_trees = 20, .num_features = 9,
                                            .categorical_fraction = 0.2, .seed = 23}),
                         Link::kSigmoid);
  ThreadPool pool(4);
  std::unique_ptr<InterventionalEngine> gpu =
      MakeEngine(f, MakeRandomRows(*f, 30, 4), "gpu", &pool);
  ASSERT_NE(gpu, nullptr);
  testing::ExpectSingletonsAreTheFeatures(*gpu, *f, MakeRandomRows(*f, 100, 3), Link::kSigmoid,
                                          "interventional_gpu");
}

// An engine of a grouped layout explains its grouping only: the features, or another grouping,
// are refused before anything is enqueued.
TEST(InterventionalGroupsGpuTest, OtherPlayersAreRefused) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = MakeRandomForest({.num_features = 8, .seed = 29});
  const FeatureGroupsPtr groups = RandomFeatureGroups(8, 29);
  const FeatureGroupsPtr other = RandomFeatureGroups(8, 30);
  ASSERT_NE(groups->Key(), other->Key());
  const std::vector<float> rows = MakeRandomRows(*f, 4, 1);
  const std::vector<float> bg = MakeRandomRows(*f, 6, 2);
  PathLayoutOptions lo;
  lo.groups = groups.get();
  absl::StatusOr<PathLayoutPtr> layout = BuildPathLayout(*f, lo);
  ASSERT_TRUE(layout.ok()) << layout.status();
  absl::StatusOr<InterventionalLayoutPtr> il =
      BuildInterventionalLayout(*f, **layout, MakeRowsView(bg.data(), 6, 8), nullptr);
  ASSERT_TRUE(il.ok()) << il.status();
  absl::StatusOr<std::unique_ptr<InterventionalGpu>> gpu =
      InterventionalGpu::Create(f, *layout, *il);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  for (const FeatureGroups* call : {static_cast<const FeatureGroups*>(nullptr), other.get()}) {
    InterventionalOptions o;
    o.groups = call;
    const int64_t width = ExplainWidth(*f, false, call);
    std::vector<float> out(4 * width);
    EXPECT_EQ((*gpu)->Explain(MakeRowsView(rows.data(), 4, 8), o,
                              MakeMatrixView(out.data(), 4, width))
                  .code(),
              absl::StatusCode::kInvalidArgument);
  }
  InterventionalOptions o;
  o.groups = groups.get();
  const int64_t width = ExplainWidth(*f, false, groups.get());
  std::vector<float> out(4 * width);
  EXPECT_TRUE((*gpu)->Explain(MakeRowsView(rows.data(), 4, 8), o,
                              MakeMatrixView(out.data(), 4, width))
                  .ok());
}

}  // namespace
}  // namespace grove
