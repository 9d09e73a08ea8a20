// Feature groups in the CPU references (path-dependent and interventional): the values of the
// game over groups against their definition, the feature game tabulated over every subset, each
// coalition of groups standing for the union of its members (tests/testing/coalition_games.h);
// Shapley and Banzhaf values and interaction values, singletons equal to no groups, determinism.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/explain_engine.h"
#include "core/explain/interventional_engine.h"
#include "core/explain/paths.h"
#include "core/explain/treeshap/explain_paths_cpu.h"
#include "core/explain/interventional/interventional.h"
#include "core/model/feature_groups.h"
#include "gtest/gtest.h"
#include "tests/testing/coalition_games.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

using testing::GroupedGame;
using testing::MakeRandomForest;
using testing::MakeRandomRows;
using testing::RandomForestOptions;
using testing::ValuesOfGame;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

FeatureGroupsPtr RandomGroups(int num_features, uint64_t seed) {
  return testing::RandomFeatureGroups(num_features, seed);
}

std::vector<float> ExplainPathDependent(const Forest& f, const std::vector<float>& rows,
                                        const ExplainOptions& o, ThreadPool* pool) {
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  const int64_t width = ExplainWidth(f, o.interactions, o.groups);
  std::vector<float> out(n * width, kNan);
  absl::Status s = ExplainCpuReference(f, MakeRowsView(rows.data(), n, f.num_features), o,
                                       MakeMatrixView(out.data(), n, width), pool);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

std::vector<float> ExplainInterventional(const Forest& f, const std::vector<float>& rows,
                                         const std::vector<float>& bg,
                                         const InterventionalOptions& o, ThreadPool* pool) {
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  const int64_t width = ExplainWidth(f, o.interactions, o.groups);
  std::vector<float> out(n * width, kNan);
  absl::Status s = ExplainInterventionalCpu(
      f, MakeRowsView(bg.data(), bg.size() / f.num_features, f.num_features),
      MakeRowsView(rows.data(), n, f.num_features), o, MakeMatrixView(out.data(), n, width), pool);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

void ExpectRowNear(const float* got, const std::vector<double>& want, const std::string& what) {
  for (size_t c = 0; c < want.size(); ++c) {
    ASSERT_NEAR(got[c], want[c], 1e-5 * std::max(1.0, std::abs(want[c]))) << what << " col " << c;
  }
}

std::vector<RandomForestOptions> Forests() { return testing::SmallGameForests(); }

TEST(FeatureGroupsExplainTest, PathDependentMatchesTheGameOverGroups) {
  ThreadPool pool(2);
  for (const RandomForestOptions& ro : Forests()) {
    ForestPtr f = MakeRandomForest(ro);
    FeatureGroupsPtr groups = RandomGroups(f->num_features, ro.seed);
    const int G = groups->num_groups();
    const std::vector<float> rows = MakeRandomRows(*f, 6, ro.seed + 50);
    for (Attribution attribution : {Attribution::kShapley, Attribution::kBanzhaf}) {
      for (bool interactions : {false, true}) {
        ExplainOptions o;
        o.groups = groups.get();
        o.attribution = attribution;
        o.interactions = interactions;
        const std::vector<float> got = ExplainPathDependent(*f, rows, o, &pool);
        const int64_t width = ExplainWidth(*f, interactions, groups.get());
        for (int64_t r = 0; r < 6; ++r) {
          const std::vector<double> game = GroupedGame(
              testing::PathDependentGame(*f, rows.data() + r * f->num_features), f->num_outputs,
              *groups);
          const std::string what =
              absl::StrCat("seed ", ro.seed, " ", AttributionName(attribution),
                           interactions ? " interactions" : "", " row ", r);
          ExpectRowNear(got.data() + r * width,
                        ValuesOfGame(game, G, f->num_outputs, attribution, interactions), what);
        }
      }
    }
  }
}

// Every interventional strategy of the CPU (the reference's walk over groups, the path form's
// grouped layout), in the margin and exact probability spaces (softmax for two outputs).
TEST(FeatureGroupsExplainTest, InterventionalMatchesTheGameOverGroups) {
  ThreadPool pool(2);
  for (const RandomForestOptions& ro : Forests()) {
    for (Link link : {Link::kIdentity, ro.num_outputs > 1 ? Link::kSoftmax : Link::kSigmoid}) {
      ForestPtr f = testing::WithLink(*MakeRandomForest(ro), link);
      FeatureGroupsPtr groups = RandomGroups(f->num_features, ro.seed + 7);
      const int G = groups->num_groups(), K = f->num_outputs, F = f->num_features;
      const std::vector<float> rows = MakeRandomRows(*f, 4, ro.seed + 60);
      const std::vector<float> bg = MakeRandomRows(*f, 5, ro.seed + 70);
      const OutputSpace space =
          link == Link::kIdentity ? OutputSpace::kMargin : OutputSpace::kProbability;
      for (const char* strategy : {"reference", "paths_cpu"}) {
        InterventionalEngineOptions eo;
        eo.use_gpu = false;
        eo.strategy = strategy;
        absl::StatusOr<std::unique_ptr<InterventionalEngine>> engine =
            InterventionalEngine::Create(f, nullptr, MakeRowsView(bg.data(), 5, F), eo, &pool);
        ASSERT_TRUE(engine.ok()) << engine.status();
        for (Attribution attribution : {Attribution::kShapley, Attribution::kBanzhaf}) {
          for (bool interactions : {false, true}) {
            InterventionalOptions o;
            o.groups = groups.get();
            o.attribution = attribution;
            o.interactions = interactions;
            o.output_space = space;
            const int64_t width = ExplainWidth(*f, interactions, groups.get());
            std::vector<float> got(4 * width, kNan);
            RunInfo info;
            const absl::Status s = (*engine)->Explain(MakeRowsView(rows.data(), 4, F), o,
                                                      MakeMatrixView(got.data(), 4, width), &info);
            ASSERT_TRUE(s.ok()) << strategy << ": " << s;
            EXPECT_EQ(info.strategy, absl::StrCat("interventional_", strategy));
            for (int64_t r = 0; r < 4; ++r) {
              // v(T) = mean over the background of the pair games, each over groups.
              const std::vector<double> game = testing::InterventionalGame(
                  *f, rows.data() + r * F, bg.data(), 5, space, groups.get());
              const std::string what =
                  absl::StrCat(strategy, " seed ", ro.seed, " ", OutputSpaceName(space), " ",
                               AttributionName(attribution), interactions ? " interactions" : "",
                               " row ", r);
              ExpectRowNear(got.data() + r * width,
                            ValuesOfGame(game, G, K, attribution, interactions), what);
            }
          }
        }
      }
    }
  }
}

// Every feature its own group is the ungrouped explanation, bit for bit (the same recursion).
TEST(FeatureGroupsExplainTest, SingletonsAreTheFeatures) {
  ForestPtr f = MakeRandomForest({.num_features = 7, .categorical_fraction = 0.2, .seed = 11});
  absl::StatusOr<FeatureGroupsPtr> singletons = ResolveFeatureGroups({}, f->num_features, {});
  ASSERT_TRUE(singletons.ok());
  const std::vector<float> rows = MakeRandomRows(*f, 8, 3);
  const std::vector<float> bg = MakeRandomRows(*f, 4, 4);
  for (bool interactions : {false, true}) {
    ExplainOptions plain;
    plain.interactions = interactions;
    ExplainOptions grouped = plain;
    grouped.groups = singletons->get();
    EXPECT_EQ(ExplainPathDependent(*f, rows, plain, nullptr),
              ExplainPathDependent(*f, rows, grouped, nullptr));
    InterventionalOptions iplain;
    iplain.interactions = interactions;
    InterventionalOptions igrouped = iplain;
    igrouped.groups = singletons->get();
    EXPECT_EQ(ExplainInterventional(*f, rows, bg, iplain, nullptr),
              ExplainInterventional(*f, rows, bg, igrouped, nullptr));
  }
}

// One group of every feature takes the whole difference: its value is out(x) - bias.
TEST(FeatureGroupsExplainTest, OneGroupTakesEverything) {
  ForestPtr f = MakeRandomForest({.num_features = 5, .seed = 12});
  GroupSpec all{"all", {}};
  for (int i = 0; i < 5; ++i) all.members.push_back(FeatureRef{i, ""});
  absl::StatusOr<FeatureGroupsPtr> groups = ResolveFeatureGroups({all}, 5, {});
  ASSERT_TRUE(groups.ok());
  const std::vector<float> rows = MakeRandomRows(*f, 4, 5);
  ExplainOptions plain;
  ExplainOptions grouped;
  grouped.groups = groups->get();
  const std::vector<float> features = ExplainPathDependent(*f, rows, plain, nullptr);
  const std::vector<float> group = ExplainPathDependent(*f, rows, grouped, nullptr);
  ASSERT_EQ(group.size(), 4u * 2);
  for (int r = 0; r < 4; ++r) {
    double sum = 0;
    for (int c = 0; c < 5; ++c) sum += features[r * 6 + c];
    EXPECT_NEAR(group[r * 2], sum, 1e-5) << "row " << r;
    EXPECT_EQ(group[r * 2 + 1], features[r * 6 + 5]) << "the bias";
  }
}

TEST(FeatureGroupsExplainTest, DeterministicOverThreads) {
  ForestPtr f = MakeRandomForest({.num_trees = 20, .num_features = 9, .seed = 13});
  FeatureGroupsPtr groups = RandomGroups(9, 13);
  const std::vector<float> rows = MakeRandomRows(*f, 64, 6);
  const std::vector<float> bg = MakeRandomRows(*f, 8, 7);
  ThreadPool pool(3);
  ExplainOptions o;
  o.groups = groups.get();
  o.interactions = true;
  EXPECT_EQ(ExplainPathDependent(*f, rows, o, nullptr), ExplainPathDependent(*f, rows, o, &pool));
  InterventionalOptions io;
  io.groups = groups.get();
  EXPECT_EQ(ExplainInterventional(*f, rows, bg, io, nullptr),
            ExplainInterventional(*f, rows, bg, io, &pool));
}

// The path engine's grouped layouts: each group's elements one player (the first matching iff all
// do, the rest null players) give the reference's group values and interaction values.
TEST(FeatureGroupsExplainTest, GroupedPathLayoutsMatchTheReference) {
  ThreadPool pool(2);
  for (const RandomForestOptions& ro : Forests()) {
    ForestPtr f = MakeRandomForest(ro);
    for (uint64_t seed : {ro.seed, ro.seed + 100}) {
      FeatureGroupsPtr groups = RandomGroups(f->num_features, seed);
      PathLayoutOptions lo;
      lo.groups = groups.get();
      absl::StatusOr<PathLayoutPtr> layout = BuildPathLayout(*f, lo);
      ASSERT_TRUE(layout.ok()) << layout.status();
      EXPECT_EQ((*layout)->num_players, groups->num_groups());
      const std::vector<float> rows = MakeRandomRows(*f, 8, seed + 5);
      for (bool interactions : {false, true}) {
        ExplainOptions o;
        o.groups = groups.get();
        o.interactions = interactions;
        const std::vector<float> want = ExplainPathDependent(*f, rows, o, &pool);
        std::vector<float> got(want.size(), kNan);
        const int64_t width = ExplainWidth(*f, interactions, groups.get());
        absl::Status s =
            ExplainPathsCpu(**layout, MakeRowsView(rows.data(), 8, f->num_features), o,
                            MakeMatrixView(got.data(), 8, width), &pool);
        ASSERT_TRUE(s.ok()) << s;
        for (size_t c = 0; c < want.size(); ++c) {
          ASSERT_NEAR(got[c], want[c], 1e-5 * std::max(1.0f, std::abs(want[c])))
              << "seed " << seed << (interactions ? " interactions" : "") << " col " << c;
        }
      }
      // A grouped layout explains its grouping only.
      ExplainOptions features;
      std::vector<float> out(8 * ExplainWidth(*f, false));
      EXPECT_EQ(ExplainPathsCpu(**layout, MakeRowsView(rows.data(), 8, f->num_features), features,
                                MakeMatrixView(out.data(), 8, ExplainWidth(*f, false)), &pool)
                    .code(),
                absl::StatusCode::kInvalidArgument);
    }
  }
}

// A forced strategy chooses how Shapley values of the features are computed: groups (and Banzhaf
// values) come from the path engine where it is forced (a grouped layout) and from the reference
// otherwise, the reference's numbers. Interventional groups: every strategy serves them.
TEST(FeatureGroupsExplainTest, EveryForcedStrategyServesGroups) {
  RandomForestOptions ro;
  ro.seed = 21;
  ro.num_features = 7;
  ro.num_trees = 12;
  ForestPtr f = MakeRandomForest(ro);
  FeatureGroupsPtr groups = RandomGroups(7, 21);
  const std::vector<float> rows = MakeRandomRows(*f, 5, 3);
  const std::vector<float> bg = MakeRandomRows(*f, 6, 4);
  const RowsView view = MakeRowsView(rows.data(), 5, 7);
  ThreadPool pool(2);
  for (Attribution attribution : {Attribution::kShapley, Attribution::kBanzhaf}) {
    ExplainOptions o;
    o.groups = groups.get();
    o.attribution = attribution;
    const std::vector<float> want = ExplainPathDependent(*f, rows, o, &pool);
    for (const char* forced : {"treeshap_cpu", "quadrature_cpu", "cpu", "reference"}) {
      ExplainEngineOptions eo;
      eo.use_gpu = false;
      eo.measure_costs = false;
      eo.strategy = forced;
      absl::StatusOr<std::unique_ptr<ExplainEngine>> engine = ExplainEngine::Create(f, eo, &pool);
      ASSERT_TRUE(engine.ok()) << forced << ": " << engine.status();
      std::vector<float> got(want.size(), kNan);
      RunInfo info;
      absl::Status s = (*engine)->Explain(view, o, MakeMatrixView(got.data(), 5, got.size() / 5),
                                          &info);
      ASSERT_TRUE(s.ok()) << forced << ": " << s;
      // The path engine computes Shapley values of groups (a grouped layout); the rest are the
      // reference's.
      const bool paths = attribution == Attribution::kShapley &&
                         (std::string(forced) == "treeshap_cpu" || std::string(forced) == "cpu");
      EXPECT_EQ(info.strategy, paths ? "treeshap_cpu" : "reference") << forced;
      if (paths) {
        for (size_t c = 0; c < want.size(); ++c) {
          ASSERT_NEAR(got[c], want[c], 1e-5 * std::max(1.0f, std::abs(want[c]))) << forced << c;
        }
      } else {
        EXPECT_EQ(got, want) << forced << " " << AttributionName(attribution);
      }
    }
  }
  InterventionalOptions io;
  io.groups = groups.get();
  const std::vector<float> want = ExplainInterventional(*f, rows, bg, io, &pool);
  for (const char* forced : {"paths_cpu", "reference"}) {
    InterventionalEngineOptions eo;
    eo.use_gpu = false;
    eo.strategy = forced;
    absl::StatusOr<std::unique_ptr<InterventionalEngine>> engine = InterventionalEngine::Create(
        f, nullptr, MakeRowsView(bg.data(), 6, 7), eo, &pool);
    ASSERT_TRUE(engine.ok()) << forced << ": " << engine.status();
    std::vector<float> got(want.size(), kNan);
    RunInfo info;
    absl::Status s =
        (*engine)->Explain(view, io, MakeMatrixView(got.data(), 5, got.size() / 5), &info);
    ASSERT_TRUE(s.ok()) << forced << ": " << s;
    // The path form computes groups itself (a grouped layout and the background's masks on it).
    EXPECT_EQ(info.strategy, absl::StrCat("interventional_", forced));
    for (size_t c = 0; c < want.size(); ++c) {
      ASSERT_NEAR(got[c], want[c], 1e-5 * std::max(1.0f, std::abs(want[c]))) << forced << c;
    }
  }
}

// An explanation engine on the CPU with static cost estimates.
absl::StatusOr<std::unique_ptr<ExplainEngine>> CpuEngine(const ForestPtr& f, const char* strategy,
                                                         ThreadPool* pool) {
  ExplainEngineOptions eo;
  eo.use_gpu = false;
  eo.measure_costs = false;
  eo.strategy = strategy;
  return ExplainEngine::Create(f, eo, pool);
}

// A model's declared grouping is built when it is pinned (at load), and requests naming other
// groupings never evict it: requests with it build nothing, whatever came in between.
TEST(FeatureGroupsExplainTest, APinnedGroupingIsBuiltOnceAndNeverEvicted) {
  ForestPtr f = MakeRandomForest({.num_trees = 8, .num_features = 9, .seed = 31});
  ThreadPool pool(2);
  absl::StatusOr<std::unique_ptr<ExplainEngine>> engine = CpuEngine(f, "auto", &pool);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const FeatureGroupsPtr declared = RandomGroups(9, 1);
  absl::StatusOr<CachePin> pin = (*engine)->PinGroups(*declared);
  ASSERT_TRUE(pin.ok()) << pin.status();
  EXPECT_EQ((*engine)->grouped_layouts().builds, 1);
  EXPECT_EQ((*engine)->grouped_layouts().pinned, 1);

  const std::vector<float> rows = MakeRandomRows(*f, 3, 2);
  auto explain = [&](const FeatureGroupsPtr& groups) {
    ExplainOptions o;
    o.groups = groups.get();
    const int64_t width = ExplainWidth(*f, false, groups.get());
    std::vector<float> out(3 * width, kNan);
    RunInfo info;
    absl::Status s = (*engine)->Explain(MakeRowsView(rows.data(), 3, 9), o,
                                        MakeMatrixView(out.data(), 3, width), &info);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(info.strategy, "treeshap_cpu");
    return out;
  };
  const std::vector<float> first = explain(declared);
  EXPECT_EQ((*engine)->grouped_layouts().builds, 1);
  // More groupings of requests than the cache keeps.
  const int others = static_cast<int>(kGroupedLayoutsCached) + 3;
  for (int i = 0; i < others; ++i) explain(RandomGroups(9, 100 + i));
  KeyedCacheStats stats = (*engine)->grouped_layouts();
  EXPECT_EQ(stats.builds, 1 + others);
  EXPECT_EQ(stats.pinned, 1);
  EXPECT_EQ(stats.cached, static_cast<int64_t>(kGroupedLayoutsCached));
  // The same grouping resolved again (another object, the same key) is the pinned one.
  EXPECT_EQ(explain(RandomGroups(9, 1)), first);
  EXPECT_EQ((*engine)->grouped_layouts().builds, 1 + others);

  // Released: an ordinary entry; a cache of unpinned entries only.
  pin->reset();
  EXPECT_EQ((*engine)->grouped_layouts().pinned, 0);
  EXPECT_EQ((*engine)->grouped_layouts().cached, static_cast<int64_t>(kGroupedLayoutsCached));
}

// Requests racing on a grouping no one has named yet build its layout once.
TEST(FeatureGroupsExplainTest, ConcurrentRequestsBuildANewGroupingOnce) {
  ForestPtr f =
      MakeRandomForest({.num_trees = 40, .max_depth = 8, .num_features = 12, .seed = 37});
  ThreadPool pool(1);
  absl::StatusOr<std::unique_ptr<ExplainEngine>> engine = CpuEngine(f, "treeshap_cpu", &pool);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::vector<float> rows = MakeRandomRows(*f, 2, 5);
  constexpr int kThreads = 8;
  std::vector<std::vector<float>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread resolves the grouping itself, as each request does.
      const FeatureGroupsPtr groups = RandomGroups(12, 9);
      ExplainOptions o;
      o.groups = groups.get();
      const int64_t width = ExplainWidth(*f, false, groups.get());
      got[t].assign(2 * width, kNan);
      absl::Status s = (*engine)->Explain(MakeRowsView(rows.data(), 2, 12), o,
                                          MakeMatrixView(got[t].data(), 2, width), nullptr);
      EXPECT_TRUE(s.ok()) << s;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ((*engine)->grouped_layouts().builds, 1);
  for (int t = 1; t < kThreads; ++t) EXPECT_EQ(got[t], got[0]);
}

TEST(FeatureGroupsExplainTest, GroupsOfAnotherModelAreRefused) {
  ForestPtr f = MakeRandomForest({.num_features = 4});
  FeatureGroupsPtr groups = RandomGroups(5, 1);
  const std::vector<float> rows = MakeRandomRows(*f, 1, 1);
  std::vector<float> out(ExplainWidth(*f, false, groups.get()));
  ExplainOptions o;
  o.groups = groups.get();
  absl::Status s = ExplainCpuReference(*f, MakeRowsView(rows.data(), 1, 4), o,
                                       MakeMatrixView(out.data(), 1, out.size()), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

}  // namespace
}  // namespace grove
