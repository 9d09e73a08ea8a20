// InterventionalEngine: the strategy table, the per-call choice, forced strategies and errors.
#include "core/explain/interventional_engine.h"

#include <string>
#include <vector>

#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "gtest/gtest.h"
#include "tests/testing/interventional_reference.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

std::unique_ptr<InterventionalEngine> MakeEngine(ForestPtr f, const std::vector<float>& bg,
                                                 const InterventionalEngineOptions& o,
                                                 ThreadPool* pool) {
  absl::StatusOr<std::unique_ptr<InterventionalEngine>> e = InterventionalEngine::Create(
      f, nullptr, MakeRowsView(bg.data(), bg.size() / f->num_features, f->num_features), o, pool);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

std::unique_ptr<InterventionalEngine> MakeEngine(ForestPtr f, const std::vector<float>& bg,
                                                 const std::string& strategy, ThreadPool* pool) {
  InterventionalEngineOptions o;
  o.strategy = strategy;
  return MakeEngine(std::move(f), bg, o, pool);
}

// Explains `rows` in space `o`, expects the reference's values and returns the run's info.
RunInfo ExplainLikeTheReference(const InterventionalEngine& e, const Forest& f,
                                const std::vector<float>& rows, const std::vector<float>& bg,
                                const InterventionalOptions& o) {
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  const int64_t width = ExplainWidth(f, o.interactions);
  std::vector<float> out(n * width);
  RunInfo info;
  const absl::Status s = e.Explain(MakeRowsView(rows.data(), n, f.num_features), o,
                                   MakeMatrixView(out.data(), n, width), &info);
  EXPECT_TRUE(s.ok()) << s;
  testing::ExpectNearReference(out, testing::InterventionalReference(f, rows, bg, o), 1e-6,
                               OutputSpaceName(o.output_space));
  return info;
}

TEST(InterventionalEngineTest, StrategyNamesRoundTrip) {
  for (int i = 0; i < kNumInterventionalStrategies; ++i) {
    const auto id = static_cast<InterventionalStrategyId>(i);
    EXPECT_EQ(*ParseInterventionalStrategy(InterventionalStrategyName(id)), id);
  }
  EXPECT_EQ(ParseInterventionalStrategy("treeshap_gpu").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// SHAP values of every output space run on the fast form (the exact probability space of a softmax
// model here); interaction values of the margin too (ForcedStrategiesAndErrors).
TEST(InterventionalEngineTest, AutoPicksTheFastFormForEveryOutputSpace) {
  RandomForestOptions ro;
  ro.num_outputs = 2;
  ro.seed = 3;
  Forest copy = *MakeRandomForest(ro);
  copy.objective.link = Link::kSoftmax;
  ForestPtr f = *BuildForest(std::move(copy));
  const std::vector<float> rows = MakeRandomRows(*f, 6, 1);
  const std::vector<float> bg = MakeRandomRows(*f, 10, 2);
  ThreadPool pool(2);
  std::unique_ptr<InterventionalEngine> e = MakeEngine(f, bg, "auto", &pool);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->background_rows(), 10);
  const int64_t width = ExplainWidth(*f, false);
  for (OutputSpace space : {OutputSpace::kMargin, OutputSpace::kProbability}) {  // softmax
    InterventionalOptions o;
    o.output_space = space;
    std::vector<float> out(6 * width);
    RunInfo info;
    ASSERT_TRUE(e->Explain(MakeRowsView(rows.data(), 6, f->num_features), o,
                           MakeMatrixView(out.data(), 6, width), &info)
                    .ok());
    EXPECT_NE(info.strategy, "interventional_reference");
    testing::ExpectNearReference(out, testing::InterventionalReference(*f, rows, bg, o), 1e-6,
                                 OutputSpaceName(space));
  }
}

// probability_linearized: the fast form too (its layout built on the first such request), on a
// sigmoid model.
TEST(InterventionalEngineTest, AutoPicksTheFastFormForLinearizedProbabilities) {
  RandomForestOptions ro;
  ro.seed = 5;
  ForestPtr f = testing::WithLink(*MakeRandomForest(ro), Link::kSigmoid);
  const std::vector<float> rows = MakeRandomRows(*f, 6, 1);
  const std::vector<float> bg = MakeRandomRows(*f, 10, 2);
  ThreadPool pool(2);
  std::unique_ptr<InterventionalEngine> e = MakeEngine(f, bg, "auto", &pool);
  ASSERT_NE(e, nullptr);
  InterventionalOptions o;
  o.output_space = OutputSpace::kProbabilityLinearized;
  for (int call = 0; call < 2; ++call) {
    EXPECT_NE(ExplainLikeTheReference(*e, *f, rows, bg, o).strategy, "interventional_reference");
  }
}

// A linearized layout over the engine's bound: the reference serves both probability spaces, the
// same values.
TEST(InterventionalEngineTest, LinearizedOverItsLayoutBoundRunsOnTheReference) {
  RandomForestOptions ro;
  ro.seed = 6;
  ForestPtr f = testing::WithLink(*MakeRandomForest(ro), Link::kSigmoid);
  const std::vector<float> rows = MakeRandomRows(*f, 4, 1);
  const std::vector<float> bg = MakeRandomRows(*f, 10, 2);
  ThreadPool pool(2);
  InterventionalEngineOptions eo;
  eo.max_linearized_layout_bytes = 16;  // fewer than one path's 10 rows x 2 bytes
  std::unique_ptr<InterventionalEngine> e = MakeEngine(f, bg, eo, &pool);
  ASSERT_NE(e, nullptr);
  InterventionalOptions o;
  o.output_space = OutputSpace::kProbabilityLinearized;
  EXPECT_EQ(ExplainLikeTheReference(*e, *f, rows, bg, o).strategy, "interventional_reference");
  o.output_space = OutputSpace::kProbability;
  EXPECT_EQ(ExplainLikeTheReference(*e, *f, rows, bg, o).strategy, "interventional_reference");
  o.output_space = OutputSpace::kMargin;  // margins keep the fast form
  EXPECT_NE(ExplainLikeTheReference(*e, *f, rows, bg, o).strategy, "interventional_reference");
}

TEST(InterventionalEngineTest, ForcedStrategiesAndErrors) {
  ForestPtr f = MakeDepth2Tree();
  const std::vector<float> bg = {1, 0};
  ThreadPool pool(1);
  std::unique_ptr<InterventionalEngine> paths = MakeEngine(f, bg, "paths_cpu", &pool);
  ASSERT_NE(paths, nullptr);
  EXPECT_EQ(paths->StrategyNames(), std::vector<std::string>{"paths_cpu"});
  std::vector<float> rows = {0, 1}, out(3);
  InterventionalOptions o;
  RunInfo info;
  ASSERT_TRUE(paths->Explain(MakeRowsView(rows.data(), 1, 2), o, MakeMatrixView(out.data(), 1, 3),
                             &info)
                  .ok());
  EXPECT_EQ(out, (std::vector<float>{-2.5f, 1.5f, 3.0f}));
  // The identity link's probability space is its margin space.
  o.output_space = OutputSpace::kProbability;
  ASSERT_TRUE(paths->Explain(MakeRowsView(rows.data(), 1, 2), o, MakeMatrixView(out.data(), 1, 3),
                             nullptr)
                  .ok());
  EXPECT_EQ(out, (std::vector<float>{-2.5f, 1.5f, 3.0f}));
  // Interaction values of the margin: the path form too, the same matrix as the reference's.
  o = {};
  o.interactions = true;
  std::vector<float> matrix(9), reference(9);
  ASSERT_TRUE(paths->Explain(MakeRowsView(rows.data(), 1, 2), o,
                             MakeMatrixView(matrix.data(), 1, 9), nullptr)
                  .ok());
  std::unique_ptr<InterventionalEngine> forced = MakeEngine(f, bg, "reference", &pool);
  ASSERT_NE(forced, nullptr);
  ASSERT_TRUE(forced->Explain(MakeRowsView(rows.data(), 1, 2), o,
                              MakeMatrixView(reference.data(), 1, 9), nullptr)
                  .ok());
  EXPECT_EQ(matrix, reference);
  std::unique_ptr<InterventionalEngine> any = MakeEngine(f, bg, "auto", &pool);
  ASSERT_NE(any, nullptr);
  ASSERT_TRUE(any->Explain(MakeRowsView(rows.data(), 1, 2), o,
                           MakeMatrixView(matrix.data(), 1, 9), &info)
                  .ok());
  EXPECT_NE(info.strategy, "interventional_reference");
  // Rows of the matrix sum to the SHAP values above; the bias sits at [F][F].
  EXPECT_FLOAT_EQ(matrix[0] + matrix[1] + matrix[2], -2.5f);
  EXPECT_FLOAT_EQ(matrix[3] + matrix[4] + matrix[5], 1.5f);
  EXPECT_FLOAT_EQ(matrix[8], 3.0f);
  // Shapes are checked before any strategy runs.
  EXPECT_EQ(paths->Explain(MakeRowsView(rows.data(), 1, 1), {}, MakeMatrixView(out.data(), 1, 3),
                           nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);

  InterventionalEngineOptions bad;
  bad.strategy = "fast";
  EXPECT_EQ(InterventionalEngine::Create(f, nullptr, MakeRowsView(bg.data(), 1, 2), bad, &pool)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InterventionalEngine::Create(f, nullptr, MakeRowsView(bg.data(), 0, 2), {}, &pool)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// Interaction values of the probability spaces of a sigmoid model: the reference only.
TEST(InterventionalEngineTest, ProbabilityInteractionsRunOnTheReference) {
  RandomForestOptions ro;
  ro.seed = 8;
  ForestPtr f = testing::WithLink(*MakeRandomForest(ro), Link::kSigmoid);
  const std::vector<float> rows = MakeRandomRows(*f, 2, 1);
  const std::vector<float> bg = MakeRandomRows(*f, 6, 2);
  ThreadPool pool(2);
  InterventionalOptions o;
  o.interactions = true;
  o.output_space = OutputSpace::kProbabilityLinearized;
  const int64_t width = ExplainWidth(*f, true);
  std::vector<float> out(2 * width);
  std::unique_ptr<InterventionalEngine> paths = MakeEngine(f, bg, "paths_cpu", &pool);
  ASSERT_NE(paths, nullptr);
  absl::Status refused = paths->Explain(MakeRowsView(rows.data(), 2, f->num_features), o,
                                        MakeMatrixView(out.data(), 2, width), nullptr);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("does not explain interaction values"), std::string::npos);
  std::unique_ptr<InterventionalEngine> any = MakeEngine(f, bg, "auto", &pool);
  ASSERT_NE(any, nullptr);
  EXPECT_EQ(ExplainLikeTheReference(*any, *f, rows, bg, o).strategy, "interventional_reference");
}

}  // namespace
}  // namespace grove
