// The Servable: every operation of every model shape answers what the engines' references do,
// whichever way its engines are built (at load or on first use, CPU or GPU), and its errors say
// what is missing.
#include "core/servable/servable.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/interventional/interventional.h"
#include "core/model/loader.h"
#include "core/predict/predict.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/coalition_games.h"
#include "tests/testing/random_forest.h"
#include "tests/testing/saabas_reference.h"

namespace grove {
namespace {

using ::testing::HasSubstr;

std::string Golden(const std::string& name) {
  return absl::StrCat(GROVE_SOURCE_DIR, "/tests/golden/", name);
}

ForestPtr LoadGolden(const std::string& file) {
  absl::StatusOr<ForestPtr> f = LoadModelFile(Golden(file));
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? *f : nullptr;
}

std::shared_ptr<const Background> BackgroundOf(const Forest& forest, int64_t rows) {
  auto bg = std::make_shared<Background>();
  bg->rows = rows;
  bg->cols = forest.num_features;
  bg->values = testing::MakeRandomRows(forest, rows, /*seed=*/11);
  return bg;
}

EngineOptions Options(EngineBuild build, Device device = Device::kAuto) {
  EngineOptions o;
  o.build = build;
  o.device = device;
  return o;
}

// What the CPU references give for `op` over `rows` (the oracle of every operation).
std::vector<float> Reference(const Forest& forest, const Background* bg, Operation op,
                             const RunParams& p, const std::vector<float>& rows, int64_t width) {
  const int64_t n = static_cast<int64_t>(rows.size()) / forest.num_features;
  std::vector<float> out(n * width);
  const RowsView view = MakeRowsView(rows.data(), n, forest.num_features);
  const MatrixView<float> m = MakeMatrixView(out.data(), n, width);
  absl::Status s;
  switch (op) {
    case Operation::kPredict: {
      PredictOptions o;
      o.kind = p.kind;
      o.iteration_begin = p.iteration_begin;
      o.iteration_end = p.iteration_end;
      s = PredictCpu(forest, view, o, m, nullptr);
      break;
    }
    case Operation::kExplain:
    case Operation::kInteractions: {
      ExplainOptions o;
      o.interactions = op == Operation::kInteractions;
      o.iteration_begin = p.iteration_begin;
      o.iteration_end = p.iteration_end;
      s = ExplainCpuReference(forest, view, o, m, nullptr);
      break;
    }
    case Operation::kBanzhaf:
    case Operation::kBanzhafInteractions: {
      // The definition over every feature subset (the golden models have at most 6 features).
      for (int64_t r = 0; r < n; ++r) {
        const std::vector<double> game = testing::PathDependentGame(
            forest, rows.data() + r * forest.num_features, p.iteration_begin, p.iteration_end);
        const std::vector<double> want =
            op == Operation::kBanzhaf
                ? testing::BanzhafOfGame(game, forest.num_features, forest.num_outputs)
                : testing::BanzhafInteractionsOfGame(game, forest.num_features,
                                                     forest.num_outputs);
        std::copy(want.begin(), want.end(), out.begin() + r * width);
      }
      break;
    }
    case Operation::kSaabas: {
      for (int64_t r = 0; r < n; ++r) {
        const std::vector<double> want = testing::SaabasByDefinition(
            forest, rows.data() + r * forest.num_features, p.iteration_begin, p.iteration_end,
            p.groups.get());
        std::copy(want.begin(), want.end(), out.begin() + r * width);
      }
      break;
    }
    case Operation::kInterventional:
    case Operation::kInterventionalInteractions:
    case Operation::kInterventionalBanzhaf:
    case Operation::kInterventionalBanzhafInteractions: {
      InterventionalOptions o;
      o.output_space = p.output_space;
      o.interactions = op == Operation::kInterventionalInteractions ||
                       op == Operation::kInterventionalBanzhafInteractions;
      if (op == Operation::kInterventionalBanzhaf ||
          op == Operation::kInterventionalBanzhafInteractions) {
        o.attribution = Attribution::kBanzhaf;
      }
      o.iteration_begin = p.iteration_begin;
      o.iteration_end = p.iteration_end;
      s = ExplainInterventionalCpu(forest, bg->view(), view, o, m, nullptr);
      break;
    }
  }
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = 1e-4 * std::max(1.0, std::fabs(double{want[i]}));
    ASSERT_NEAR(got[i], want[i], tol) << what << " at " << i;
  }
}

// Every operation of every model, both build modes: the conformance table of the Servable.
TEST(ServableTest, EveryOperationAnswersWhatTheReferenceDoes) {
  ThreadPool pool(2);
  const std::vector<std::string> models = {"xgb_regression/model.json",
                                           "xgb_multiclass3/model.json",
                                           "lgb_zero_as_missing/model.txt",
                                           "xgb_categorical/model.json"};
  for (const std::string& file : models) {
    ForestPtr forest = LoadGolden(file);
    ASSERT_NE(forest, nullptr);
    std::shared_ptr<const Background> bg = BackgroundOf(*forest, 5);
    const std::vector<float> rows = testing::MakeRandomRows(*forest, 7, /*seed=*/3);
    for (EngineBuild build : {EngineBuild::kAtLoad, EngineBuild::kOnFirstUse}) {
      absl::StatusOr<ServablePtr> servable = BuildServable(forest, bg, Options(build), &pool);
      ASSERT_TRUE(servable.ok()) << file << ": " << servable.status();
      EXPECT_EQ((*servable)->background_rows(), 5);
      for (int i = 0; i < kNumOperations; ++i) {
        const Operation op = static_cast<Operation>(i);
        RunParams p;
        if (op == Operation::kPredict) p.kind = OutputKind::kMargin;
        const int64_t width = (*servable)->Width(op, p);
        const std::string what = absl::StrCat(file, " ", OperationName(op), " build ",
                                              static_cast<int>(build));
        ASSERT_TRUE((*servable)->Available(op).ok()) << what << ": " << (*servable)->Available(op);
        std::vector<float> out(7 * width);
        RunInfo info;
        ASSERT_TRUE((*servable)
                        ->Run(op, p, MakeRowsView(rows.data(), 7, forest->num_features),
                              MakeMatrixView(out.data(), 7, width), &info)
                        .ok())
            << what;
        EXPECT_FALSE(info.device.empty()) << what;
        ExpectClose(out, Reference(*forest, bg.get(), op, p, rows, width), what);
        EXPECT_THAT((*servable)->Describe(op), ::testing::Not(HasSubstr("unavailable"))) << what;
      }
    }
  }
}

TEST(ServableTest, OperationNamesRoundTrip) {
  for (int i = 0; i < kNumOperations; ++i) {
    const Operation op = static_cast<Operation>(i);
    absl::StatusOr<Operation> parsed = ParseOperation(OperationName(op));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, op);
  }
  absl::StatusOr<Operation> unknown = ParseOperation("shapley");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("interventional_banzhaf_interactions"));
}

// Every method, attribution and interactions maps to its operation, or is refused saying why:
// Saabas attributions are path-dependent values only.
TEST(ServableTest, ExplainOperationOfEveryCombination) {
  for (ExplainMethod method : {ExplainMethod::kPathDependent, ExplainMethod::kInterventional}) {
    for (Attribution attribution : kAttributions) {
      for (bool interactions : {false, true}) {
        const absl::StatusOr<Operation> op =
            ExplainOperationOf(method, attribution, interactions);
        const std::string what = absl::StrCat(ExplainMethodName(method), " ",
                                              AttributionName(attribution), " ", interactions);
        if (attribution != Attribution::kSaabas) {
          ASSERT_TRUE(op.ok()) << what << ": " << op.status();
          EXPECT_NE(*op, Operation::kSaabas) << what;
          continue;
        }
        if (method == ExplainMethod::kPathDependent && !interactions) {
          ASSERT_TRUE(op.ok()) << what << ": " << op.status();
          EXPECT_EQ(*op, Operation::kSaabas);
          continue;
        }
        EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument) << what;
        EXPECT_THAT(op.status().message(),
                    HasSubstr(interactions && method == ExplainMethod::kPathDependent
                                  ? "no interaction values"
                                  : "path-dependent only"))
            << what;
      }
    }
  }
}

TEST(ServableTest, PredictRowEqualsABatchOfOne) {
  ForestPtr forest = LoadGolden("xgb_multiclass3/model.json");
  ASSERT_NE(forest, nullptr);
  absl::StatusOr<ServablePtr> s =
      BuildServable(forest, nullptr, Options(EngineBuild::kOnFirstUse), nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  const std::vector<float> rows = testing::MakeRandomRows(*forest, 4, /*seed=*/5);
  RunParams p;
  const int64_t w = (*s)->Width(Operation::kPredict, p);
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<float> one(w), batch(w);
    const float* row = rows.data() + r * forest->num_features;
    ASSERT_TRUE((*s)->PredictRow(row, p, one.data()).ok());
    ASSERT_TRUE((*s)
                    ->Run(Operation::kPredict, p, MakeRowsView(row, 1, forest->num_features),
                          MakeMatrixView(batch.data(), 1, w), nullptr)
                    .ok());
    EXPECT_EQ(one, batch);
  }
}

TEST(ServableTest, UnknownStrategiesAndDevicesFailTheBuild) {
  ForestPtr forest = LoadGolden("xgb_regression/model.json");
  ASSERT_NE(forest, nullptr);
  for (EngineBuild build : {EngineBuild::kAtLoad, EngineBuild::kOnFirstUse}) {
    EngineOptions o = Options(build);
    o.predict_strategy = "warp_drive";
    absl::StatusOr<ServablePtr> s = BuildServable(forest, nullptr, o, nullptr);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.status().message(), HasSubstr("warp_drive"));
    o = Options(build);
    o.explain_strategy = "magic";
    s = BuildServable(forest, nullptr, o, nullptr);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.status().message(), HasSubstr("explanation strategy 'magic'"));
    o = Options(build);
    o.interventional_strategy = "psychic";
    s = BuildServable(forest, nullptr, o, nullptr);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.status().message(), HasSubstr("psychic"));
  }
#if !defined(GROVE_HAVE_CUDA)
  absl::StatusOr<ServablePtr> gpu =
      BuildServable(forest, nullptr, Options(EngineBuild::kAtLoad, Device::kGpu), nullptr);
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(gpu.status().message(), HasSubstr("no CUDA engines"));
#endif
}

TEST(ServableTest, WhatIsMissingIsSaidPerOperation) {
  // Linear leaves: predictions serve, explanations of every kind say why they cannot.
  ForestPtr linear = LoadGolden("lgb_linear_tree/model.txt");
  ASSERT_NE(linear, nullptr);
  absl::StatusOr<ServablePtr> s = BuildServable(linear, BackgroundOf(*linear, 3),
                                                Options(EngineBuild::kAtLoad), nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->Available(Operation::kPredict).ok());
  EXPECT_EQ((*s)->Explainable().code(), absl::StatusCode::kFailedPrecondition);
  for (Operation op : {Operation::kExplain, Operation::kInteractions, Operation::kInterventional,
                       Operation::kInterventionalInteractions, Operation::kBanzhaf,
                       Operation::kBanzhafInteractions, Operation::kInterventionalBanzhaf,
                       Operation::kInterventionalBanzhafInteractions, Operation::kSaabas}) {
    EXPECT_EQ((*s)->Available(op).code(), absl::StatusCode::kFailedPrecondition)
        << OperationName(op);
    EXPECT_THAT((*s)->Describe(op), HasSubstr("unavailable: ")) << OperationName(op);
  }
  // No background: the interventional operations say so, in the caller's words when given.
  ForestPtr forest = LoadGolden("xgb_regression/model.json");
  EngineOptions o = Options(EngineBuild::kOnFirstUse);
  o.no_background_message = "add m/background.csv";
  s = BuildServable(forest, nullptr, o, nullptr);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Available(Operation::kInterventional).message(), "add m/background.csv");
  EXPECT_TRUE((*s)->Available(Operation::kExplain).ok());
}

TEST(ServableTest, WithBackgroundSharesTheEnginesAndChecksTheRows) {
  ForestPtr forest = LoadGolden("xgb_regression/model.json");
  absl::StatusOr<ServablePtr> s =
      BuildServable(forest, nullptr, Options(EngineBuild::kAtLoad), nullptr);
  ASSERT_TRUE(s.ok());
  const std::string predict = (*s)->Describe(Operation::kPredict);
  absl::StatusOr<ServablePtr> with = (*s)->WithBackground(BackgroundOf(*forest, 4));
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ((*with)->background_rows(), 4);
  EXPECT_TRUE((*with)->Available(Operation::kInterventional).ok());
  EXPECT_EQ((*with)->Describe(Operation::kPredict), predict);
  EXPECT_EQ((*s)->background_rows(), 0);  // the original keeps none
  // A background of another width names its file.
  auto bad = std::make_shared<Background>();
  bad->path = "bg.csv";
  bad->rows = 1;
  bad->cols = forest->num_features + 1;
  bad->values.assign(bad->cols, 0.f);
  absl::StatusOr<ServablePtr> refused = (*s)->WithBackground(bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("bg.csv: "));
}

// Engines built on first use are built once, whichever threads ask first.
TEST(ServableTest, FirstUseFromManyThreadsBuildsOnceAndAnswersAlike) {
  ForestPtr forest = LoadGolden("xgb_multiclass3/model.json");
  absl::StatusOr<ServablePtr> s =
      BuildServable(forest, BackgroundOf(*forest, 3), Options(EngineBuild::kOnFirstUse), nullptr);
  ASSERT_TRUE(s.ok());
  const std::vector<float> rows = testing::MakeRandomRows(*forest, 3, /*seed=*/9);
  constexpr int kThreads = 8;
  std::vector<std::vector<float>> outs(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const Operation op = t % 2 ? Operation::kExplain : Operation::kInterventional;
      const int64_t w = (*s)->Width(op, RunParams());
      outs[t].resize(3 * w);
      EXPECT_TRUE((*s)
                      ->Run(op, RunParams(), MakeRowsView(rows.data(), 3, forest->num_features),
                            MakeMatrixView(outs[t].data(), 3, w), nullptr)
                      .ok());
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 2; t < kThreads; ++t) EXPECT_EQ(outs[t], outs[t % 2]) << t;
}

}  // namespace
}  // namespace grove

namespace grove {
namespace {

// Groups reach every explanation operation: the widths are the groups', the values the CPU
// references' with the same groups (path-dependent Banzhaf included, which the quadrature
// Banzhaf engine does not compute for groups), whatever strategy is forced.
TEST(ServableTest, GroupsReachEveryExplanationOperation) {
  ForestPtr forest = LoadGolden("xgb_regression/model.json");
  ASSERT_NE(forest, nullptr);
  ThreadPool pool(2);
  std::shared_ptr<const Background> bg = BackgroundOf(*forest, 5);
  absl::StatusOr<ServablePtr> s =
      BuildServable(forest, bg, Options(EngineBuild::kOnFirstUse), &pool);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<FeatureGroupsPtr> groups = ResolveFeatureGroups(
      {GroupSpec{"a", {FeatureRef{0, ""}, FeatureRef{4, ""}}}}, forest->num_features,
      forest->feature_names);
  ASSERT_TRUE(groups.ok()) << groups.status();
  RunParams p;
  p.groups = *groups;
  const int G = (*groups)->num_groups();
  const std::vector<float> rows = testing::MakeRandomRows(*forest, 6, 3);
  const RowsView view = MakeRowsView(rows.data(), 6, forest->num_features);
  for (Operation op : {Operation::kExplain, Operation::kInteractions, Operation::kBanzhaf,
                       Operation::kBanzhafInteractions, Operation::kInterventional,
                       Operation::kInterventionalInteractions,
                       Operation::kInterventionalBanzhaf, Operation::kSaabas}) {
    const bool interactions = op == Operation::kInteractions ||
                              op == Operation::kBanzhafInteractions ||
                              op == Operation::kInterventionalInteractions;
    const int64_t width = (*s)->Width(op, p);
    EXPECT_EQ(width, interactions ? (G + 1) * (G + 1) : G + 1) << OperationName(op);
    std::vector<float> got(6 * width);
    ASSERT_TRUE((*s)->Run(op, p, view, MakeMatrixView(got.data(), 6, width), nullptr).ok())
        << OperationName(op);
    const bool banzhaf = op == Operation::kBanzhaf || op == Operation::kBanzhafInteractions ||
                         op == Operation::kInterventionalBanzhaf;
    std::vector<float> want(got.size());
    absl::Status status;
    if (op == Operation::kSaabas) {
      for (int64_t r = 0; r < 6; ++r) {
        const std::vector<double> row = testing::SaabasByDefinition(
            *forest, rows.data() + r * forest->num_features, 0, 0, groups->get());
        std::copy(row.begin(), row.end(), want.begin() + r * width);
      }
    } else if (op == Operation::kExplain || op == Operation::kInteractions ||
               op == Operation::kBanzhaf || op == Operation::kBanzhafInteractions) {
      ExplainOptions o;
      o.interactions = interactions;
      o.groups = groups->get();
      o.attribution = banzhaf ? Attribution::kBanzhaf : Attribution::kShapley;
      status = ExplainCpuReference(*forest, view, o, MakeMatrixView(want.data(), 6, width),
                                   nullptr);
    } else {
      InterventionalOptions o;
      o.interactions = interactions;
      o.groups = groups->get();
      o.attribution = banzhaf ? Attribution::kBanzhaf : Attribution::kShapley;
      status = ExplainInterventionalCpu(*forest, bg->view(), view, o,
                                        MakeMatrixView(want.data(), 6, width), nullptr);
    }
    ASSERT_TRUE(status.ok()) << status;
    // The path engine (a grouped layout) or the reference, whichever the selector picks: the same
    // values within rounding.
    for (size_t c = 0; c < want.size(); ++c) {
      ASSERT_NEAR(got[c], want[c], 1e-5 * std::max(1.0f, std::abs(want[c])))
          << OperationName(op) << " col " << c;
    }
  }
  EngineOptions forced = Options(EngineBuild::kOnFirstUse, Device::kCpu);
  forced.explain_strategy = "treeshap_cpu";
  absl::StatusOr<ServablePtr> paths = BuildServable(forest, nullptr, forced, &pool);
  ASSERT_TRUE(paths.ok()) << paths.status();
  // A forced strategy serves the groups of a model (its groups.json applies to every explanation):
  // the path engine by a grouped layout; Banzhaf values of groups are the reference's.
  for (Operation op : {Operation::kExplain, Operation::kBanzhaf}) {
    std::vector<float> out(6 * (G + 1)), want(6 * (G + 1));
    RunInfo info;
    const absl::Status served =
        (*paths)->Run(op, p, view, MakeMatrixView(out.data(), 6, G + 1), &info);
    ASSERT_TRUE(served.ok()) << served;
    EXPECT_EQ(info.strategy, op == Operation::kExplain ? "treeshap_cpu" : "reference");
    ExplainOptions o;
    o.groups = groups->get();
    o.attribution = op == Operation::kBanzhaf ? Attribution::kBanzhaf : Attribution::kShapley;
    ASSERT_TRUE(
        ExplainCpuReference(*forest, view, o, MakeMatrixView(want.data(), 6, G + 1), nullptr).ok());
    for (size_t c = 0; c < want.size(); ++c) {
      ASSERT_NEAR(out[c], want[c], 1e-5 * std::max(1.0f, std::abs(want[c])))
          << OperationName(op) << " col " << c;
    }
  }
}

// PinGroups prepares a grouping now, building the explanation engine built on first use, and
// keeps it: requests with that grouping build nothing.
TEST(ServableTest, PinnedGroupsAreBuiltBeforeAnyRequest) {
  ForestPtr forest = LoadGolden("xgb_regression/model.json");
  ASSERT_NE(forest, nullptr);
  ThreadPool pool(2);
  absl::StatusOr<ServablePtr> s =
      BuildServable(forest, nullptr, Options(EngineBuild::kOnFirstUse, Device::kCpu), &pool);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->GroupedLayouts().builds, 0);
  absl::StatusOr<FeatureGroupsPtr> groups = ResolveFeatureGroups(
      {GroupSpec{"a", {FeatureRef{0, ""}, FeatureRef{4, ""}}}}, forest->num_features,
      forest->feature_names);
  ASSERT_TRUE(groups.ok()) << groups.status();
  absl::StatusOr<CachePin> pin = (*s)->PinGroups(**groups);
  ASSERT_TRUE(pin.ok()) << pin.status();
  EXPECT_NE(*pin, nullptr);
  EXPECT_EQ((*s)->GroupedLayouts().builds, 1);
  EXPECT_EQ((*s)->GroupedLayouts().pinned, 1);
  RunParams p;
  p.groups = *groups;
  const std::vector<float> rows = testing::MakeRandomRows(*forest, 2, 3);
  const int64_t width = (*s)->Width(Operation::kExplain, p);
  std::vector<float> out(2 * width);
  ASSERT_TRUE((*s)->Run(Operation::kExplain, p, MakeRowsView(rows.data(), 2, forest->num_features),
                        MakeMatrixView(out.data(), 2, width), nullptr)
                  .ok());
  EXPECT_EQ((*s)->GroupedLayouts().builds, 1);
}

}  // namespace
}  // namespace grove
