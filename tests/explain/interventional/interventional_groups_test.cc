// Interventional values of feature groups on the path form (paths_cpu: a grouped layout, the
// background's masks folded per group) against the CPU reference and against the game over groups
// tabulated by brute force (tests/testing/coalition_games.h), in every output space the path form
// serves (the tabulated games of small forests: groups_test.cc, every strategy); the engine's
// choice of strategy for groups; singletons, determinism and refusals.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/interventional/interventional.h"
#include "core/explain/interventional/interventional_interactions.h"
#include "core/explain/interventional/interventional_paths.h"
#include "core/explain/interventional_engine.h"
#include "core/explain/paths.h"
#include "core/model/feature_groups.h"
#include "gtest/gtest.h"
#include "tests/testing/coalition_games.h"
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

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

std::unique_ptr<InterventionalEngine> MakeEngine(ForestPtr f, const std::vector<float>& bg,
                                                 const std::string& strategy, ThreadPool* pool) {
  return testing::MakeInterventionalEngine(std::move(f), bg, strategy, /*use_gpu=*/false, pool);
}

// Every seeded forest of the interventional tests (numeric and categorical splits, LightGBM rules,
// NaNs in rows and background, multi-output and vector leaves, paths of up to 31 features), two
// groupings each, every space and attribution: paths_cpu serves the groups and gives the
// reference's values (or its refusal of a pair differing on too many groups).
TEST(InterventionalGroupsTest, PathsCpuMatchesTheReference) {
  ThreadPool pool(2);
  int compared = 0;
  for (const RandomForestOptions& ro : testing::InterventionalForestOptions()) {
    ForestPtr base = MakeRandomForest(ro);
    const std::vector<float> rows = MakeRandomRows(*base, 5, ro.seed + 10);
    const std::vector<float> bg = MakeRandomRows(*base, 9, ro.seed + 20);
    for (Link link : testing::AllLinks(ro)) {
      ForestPtr f = link == Link::kIdentity ? base : WithLink(*base, link);
      std::unique_ptr<InterventionalEngine> engine = MakeEngine(f, bg, "paths_cpu", &pool);
      ASSERT_NE(engine, nullptr);
      for (uint64_t seed : {ro.seed, ro.seed + 100}) {
        FeatureGroupsPtr groups = RandomFeatureGroups(f->num_features, seed);
        for (const testing::SpaceCase& sc : PathFormSpaceCases(link)) {
          for (Attribution attribution : {Attribution::kShapley, Attribution::kBanzhaf}) {
            InterventionalOptions o;
            o.groups = groups.get();
            o.output_space = sc.space;
            o.interactions = sc.interactions;
            o.attribution = attribution;
            RunInfo info;
            const Result got = ExplainWithEngine(*engine, *f, rows, o, &info);
            const std::string what = absl::StrCat("seed ", ro.seed, " groups ", seed, " link ",
                                                  static_cast<int>(link), " ", Describe(o));
            EXPECT_EQ(info.strategy, "interventional_paths_cpu") << what << " " << got.status();
            compared += testing::ExpectLikeTheReference(got, *f, rows, bg, o, 1e-5, what);
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 100);
}

// Hand-built trees for the cases a grouped path must get right: a feature split on twice on one
// path (merged into one element), two members of a group on one path (one player, the second a
// null member), a group none of whose members a tree splits on (0 from that tree), a categorical
// member and NaNs in rows and background; against the game over groups.
TEST(InterventionalGroupsTest, RepeatedFeaturesAndAbsentGroups) {
  HandForest h(/*num_features=*/5);
  // Tree 0: x0 < 0.5 -> (x2 < 0.5 -> (x0 < 0.25 -> 1 | 2) | 3) | (x1 < 0.5 -> 4 | 5).
  h.AddTree({h.Split(0, 0.5f, 1, 2, 20), h.Split(2, 0.5f, 3, 4, 12), h.Split(1, 0.5f, 5, 6, 8),
             h.Split(0, 0.25f, 7, 8, 6), h.Leaf(3.0, 6), h.Leaf(4.0, 3), h.Leaf(5.0, 5),
             h.Leaf(1.0, 2), h.Leaf(2.0, 4)});
  // Tree 1: x3 not in categories {1, 2} -> (x1 < 0.5 -> -1 | 0.5) | 2.
  h.AddTree({h.CategoricalSplit(3, {1, 2}, 1, 2, 20), h.Split(1, 0.5f, 3, 4, 11),
             h.Leaf(2.0, 9), h.Leaf(-1.0, 5), h.Leaf(0.5, 6)});
  ForestPtr f = h.Build();
  // {0, 2} on tree 0's left paths, {1, 3} across both trees, {4} in no tree at all.
  std::vector<GroupSpec> spec = {{"a", {FeatureRef{0, ""}, FeatureRef{2, ""}}},
                                 {"b", {FeatureRef{1, ""}, FeatureRef{3, ""}}}};
  absl::StatusOr<FeatureGroupsPtr> groups = ResolveFeatureGroups(spec, 5, {});
  ASSERT_TRUE(groups.ok()) << groups.status();
  ASSERT_EQ((*groups)->num_groups(), 3);
  const std::vector<float> rows = {0.1f, 0.7f, 0.2f, 1.0f, 9.0f,   //
                                   0.3f, kNan, 0.9f, 5.0f, 0.0f,   //
                                   0.7f, 0.2f, kNan, 2.0f, 1.0f,   //
                                   kNan, 0.1f, 0.1f, kNan, 3.0f};
  const std::vector<float> bg = {0.2f, 0.1f, 0.8f, 2.0f, 0.0f,  //
                                 0.9f, 0.9f, 0.1f, 0.0f, 1.0f,  //
                                 kNan, 0.4f, 0.3f, 1.0f, 2.0f};
  ThreadPool pool(2);
  std::unique_ptr<InterventionalEngine> engine = MakeEngine(f, bg, "paths_cpu", &pool);
  ASSERT_NE(engine, nullptr);
  for (Attribution attribution : {Attribution::kShapley, Attribution::kBanzhaf}) {
    for (bool interactions : {false, true}) {
      InterventionalOptions o;
      o.groups = groups->get();
      o.attribution = attribution;
      o.interactions = interactions;
      const Result got = ExplainWithEngine(*engine, *f, rows, o, nullptr);
      ASSERT_TRUE(got.ok()) << got.status();
      const int64_t width = ExplainWidth(*f, interactions, groups->get());
      for (int64_t r = 0; r < 4; ++r) {
        const std::vector<double> want = testing::ValuesOfGame(
            testing::InterventionalGame(*f, rows.data() + r * 5, bg.data(), 3,
                                        OutputSpace::kMargin, groups->get()),
            3, 1, attribution, interactions);
        const std::string what = absl::StrCat(Describe(o), " row ", r);
        ExpectNearReference(
            std::vector<float>(got->begin() + r * width, got->begin() + (r + 1) * width),
            std::vector<float>(want.begin(), want.end()), 1e-6, what);
        // The group in no tree gets nothing.
        if (!interactions) EXPECT_EQ((*got)[r * width + 2], 0.0f) << what;
      }
    }
  }
}

// The players' mask of a grouped path: a run's leader matches iff all of it does, members are
// always set.
TEST(InterventionalGroupsTest, FoldGroupMembers) {
  // Elements: root, a, a', b, c, c', c'' (members at bits 2, 5, 6).
  const uint32_t members = 0b1100100;
  EXPECT_EQ(FoldGroupMembers(0b1111111, members), 0b1111111u);
  EXPECT_EQ(FoldGroupMembers(0b0000001, members), 0b1100101u);  // no leader matched
  EXPECT_EQ(FoldGroupMembers(0b1111011, members), 0b1111101u);  // a' fails: a does not match
  EXPECT_EQ(FoldGroupMembers(0b0011011, members), 0b1101101u);  // a' and c', c'' fail
  EXPECT_EQ(FoldGroupMembers(0b1011111, members), 0b1101111u);  // c' fails: c does not match
  EXPECT_EQ(FoldGroupMembers(0b0011011, 0), 0b0011011u);        // a layout of the features
}

// A grouping of singletons is the features' explanation, bit for bit; calls with the same
// grouping reuse its forms, with the same results.
TEST(InterventionalGroupsTest, SingletonsAreTheFeaturesAndRepeatBitForBit) {
  ForestPtr f = WithLink(*MakeRandomForest({.num_features = 7, .categorical_fraction = 0.2,
                                            .seed = 11}),
                         Link::kSigmoid);
  ThreadPool pool(3);
  std::unique_ptr<InterventionalEngine> engine =
      MakeEngine(f, MakeRandomRows(*f, 6, 4), "auto", &pool);
  ASSERT_NE(engine, nullptr);
  testing::ExpectSingletonsAreTheFeatures(*engine, *f, MakeRandomRows(*f, 8, 3), Link::kSigmoid,
                                          "interventional_paths_cpu");
}

// Rows on 1 or 3 threads: the same bits.
TEST(InterventionalGroupsTest, DeterministicOverThreads) {
  ForestPtr f = MakeRandomForest({.num_trees = 20, .num_features = 9, .seed = 13});
  const FeatureGroupsPtr groups = RandomFeatureGroups(9, 13);
  const std::vector<float> rows = MakeRandomRows(*f, 64, 6);
  const std::vector<float> bg = MakeRandomRows(*f, 12, 7);
  ThreadPool pool(3);
  std::unique_ptr<InterventionalEngine> one = MakeEngine(f, bg, "paths_cpu", nullptr);
  std::unique_ptr<InterventionalEngine> three = MakeEngine(f, bg, "paths_cpu", &pool);
  ASSERT_NE(one, nullptr);
  ASSERT_NE(three, nullptr);
  for (bool interactions : {false, true}) {
    InterventionalOptions o;
    o.groups = groups.get();
    o.interactions = interactions;
    const Result a = ExplainWithEngine(*one, *f, rows, o, nullptr);
    const Result b = ExplainWithEngine(*three, *f, rows, o, nullptr);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, *b) << Describe(o);
  }
}

// The choice for groups: "auto" takes the path form wherever it serves the request; the linearized
// space's interaction values stay the reference's, forced or not (a forced strategy hands groups
// it does not serve to the reference), and the features' are refused by a forced paths_cpu as
// before.
TEST(InterventionalGroupsTest, TheEngineServesGroupsOnThePathForm) {
  ForestPtr f = WithLink(*MakeRandomForest({.num_features = 8, .seed = 17}), Link::kSigmoid);
  const FeatureGroupsPtr groups = RandomFeatureGroups(8, 17);
  const std::vector<float> rows = MakeRandomRows(*f, 3, 1);
  const std::vector<float> bg = MakeRandomRows(*f, 7, 2);
  ThreadPool pool(2);
  for (const char* strategy : {"auto", "paths_cpu"}) {
    std::unique_ptr<InterventionalEngine> e = MakeEngine(f, bg, strategy, &pool);
    ASSERT_NE(e, nullptr);
    InterventionalOptions o;
    o.groups = groups.get();
    for (OutputSpace space : {OutputSpace::kMargin, OutputSpace::kProbabilityLinearized,
                              OutputSpace::kProbability}) {
      o.output_space = space;
      RunInfo info;
      ASSERT_TRUE(ExplainWithEngine(*e, *f, rows, o, &info).ok());
      EXPECT_EQ(info.strategy, "interventional_paths_cpu") << strategy << " " << Describe(o);
    }
    o.output_space = OutputSpace::kProbabilityLinearized;
    o.interactions = true;
    RunInfo info;
    const Result got = ExplainWithEngine(*e, *f, rows, o, &info);
    EXPECT_EQ(info.strategy, "interventional_reference") << strategy;
    testing::ExpectLikeTheReference(got, *f, rows, bg, o, 1e-6, strategy);
    o.groups = nullptr;
    const Result features = ExplainWithEngine(*e, *f, rows, o, &info);
    EXPECT_EQ(features.status().code(), std::string(strategy) == "auto"
                                            ? absl::StatusCode::kOk
                                            : absl::StatusCode::kFailedPrecondition);
  }
}

// A layout explains its own players: the path form refuses a call whose groups are not its
// layout's (the features on a grouped layout, another grouping, groups on the features').
TEST(InterventionalGroupsTest, ALayoutOfOtherPlayersIsRefused) {
  ForestPtr f = MakeRandomForest({.num_features = 6, .seed = 19});
  const FeatureGroupsPtr groups = RandomFeatureGroups(6, 19);
  const FeatureGroupsPtr other = RandomFeatureGroups(6, 20);
  ASSERT_NE(groups->Key(), other->Key());
  const std::vector<float> rows = MakeRandomRows(*f, 2, 1);
  const std::vector<float> bg = MakeRandomRows(*f, 4, 2);
  PathLayoutOptions lo;
  lo.groups = groups.get();
  absl::StatusOr<PathLayoutPtr> grouped = BuildPathLayout(*f, lo);
  absl::StatusOr<PathLayoutPtr> features = BuildPathLayout(*f);
  ASSERT_TRUE(grouped.ok() && features.ok());
  const RowsView bg_view = MakeRowsView(bg.data(), 4, 6);
  for (const auto& [layout, call_groups] :
       std::vector<std::pair<PathLayoutPtr, const FeatureGroups*>>{
           {*grouped, nullptr}, {*grouped, other.get()}, {*features, groups.get()}}) {
    absl::StatusOr<InterventionalLayoutPtr> il =
        BuildInterventionalLayout(*f, *layout, bg_view, nullptr);
    ASSERT_TRUE(il.ok());
    for (bool interactions : {false, true}) {
      InterventionalOptions o;
      o.groups = call_groups;
      o.interactions = interactions;
      const int64_t width = ExplainWidth(*f, interactions, call_groups);
      std::vector<float> out(2 * width);
      const RowsView view = MakeRowsView(rows.data(), 2, 6);
      const MatrixView<float> out_view = MakeMatrixView(out.data(), 2, width);
      const absl::Status s =
          interactions
              ? ExplainInterventionalInteractionsPathsCpu(*f, *layout, **il, view, o, out_view,
                                                          nullptr)
              : ExplainInterventionalPathsCpu(*f, *layout, **il, view, o, out_view, nullptr);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    }
  }
}

}  // namespace
}  // namespace grove
