// The prediction strategy seam on the CPU: the CPU strategy is the reference, and the CPU-only engine
// runs through it; strategy names are parsed once, unknown ones refused with the known ones named.
#include "core/predict/predict_strategy.h"

#include <string>
#include <vector>

#include "core/common/thread_pool.h"
#include "core/predict/predict_engine.h"
#include "gtest/gtest.h"
#include "tests/testing/predict_reference.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

ForestPtr Forest3() {
  testing::RandomForestOptions o;
  o.num_trees = 12;
  o.num_outputs = 3;
  o.num_features = 6;
  o.seed = 21;
  return testing::MakeRandomForest(o);
}

TEST(PredictStrategyTest, CpuStrategyIsTheReference) {
  const ForestPtr f = Forest3();
  ThreadPool pool(2);
  const std::unique_ptr<PredictStrategy> cpu = MakeCpuPredictStrategy(f, &pool);
  EXPECT_EQ(cpu->id(), StrategyId::kCpu);
  EXPECT_STREQ(cpu->name(), "cpu");
  const int64_t n = 300;
  const std::vector<float> x = testing::MakeRandomRows(*f, n, 4);
  PredictOptions o;
  const int64_t width = PredictWidth(*f, o);
  std::vector<float> out(n * width);
  std::string device;
  ASSERT_TRUE(cpu->Run(MakeRowsView(x.data(), n, f->num_features), o, /*groups=*/1,
                       MakeMatrixView(out.data(), n, width), &device)
                  .ok());
  EXPECT_EQ(device, "cpu");
  EXPECT_EQ(out, testing::ReferencePrediction(*f, x, o));
}

TEST(PredictStrategyTest, EnginesParseTheStrategyOnce) {
  const ForestPtr f = Forest3();
  ThreadPool pool(2);
  PredictEngineOptions o;
  o.use_gpu = false;
  o.strategy = "cpu";
  absl::StatusOr<std::unique_ptr<PredictEngine>> e = PredictEngine::Create(f, o, &pool);
  ASSERT_TRUE(e.ok()) << e.status();
  const std::vector<float> x = testing::MakeRandomRows(*f, 10, 5);
  std::vector<float> out(10 * 3);
  RunInfo info;
  ASSERT_TRUE((*e)->Predict(MakeRowsView(x.data(), 10, f->num_features), PredictOptions{},
                            MakeMatrixView(out.data(), 10, 3), &info)
                  .ok());
  EXPECT_EQ(info.strategy, "cpu");
  EXPECT_EQ(info.device, "cpu");
  EXPECT_EQ(info.reason, "override");
  o.strategy = "fastest";
  const absl::Status bad = PredictEngine::Create(f, o, &pool).status();
  EXPECT_TRUE(absl::IsInvalidArgument(bad));
  EXPECT_NE(bad.message().find("row_chunk"), std::string::npos) << bad;
  o.strategy = "row_chunk";  // a GPU strategy without the GPU: refused, not run on the CPU
  EXPECT_TRUE(absl::IsInvalidArgument(PredictEngine::Create(f, o, &pool).status()));
}

TEST(PredictStrategyTest, EnginesAnswerOneRowOnTheCallingThread) {
  const ForestPtr f = Forest3();
  ThreadPool pool(2);
  PredictEngineOptions o;
  o.use_gpu = false;
  absl::StatusOr<std::unique_ptr<PredictEngine>> e = PredictEngine::Create(f, o, &pool);
  ASSERT_TRUE(e.ok()) << e.status();
  const int64_t n = 20;
  const std::vector<float> x = testing::MakeRandomRows(*f, n, 8);
  for (OutputKind kind : {OutputKind::kMargin, OutputKind::kPrediction, OutputKind::kLeaf}) {
    const PredictOptions p = Kind(kind, 1, 3);
    const int64_t width = PredictWidth(*f, p);
    std::vector<float> out(n * width);
    for (int64_t r = 0; r < n; ++r) {
      ASSERT_TRUE((*e)->PredictRow(x.data() + r * f->num_features, p, out.data() + r * width).ok());
    }
    EXPECT_EQ(out, testing::ReferencePrediction(*f, x, p)) << OutputKindName(kind);
  }
  std::vector<float> out(3);
  EXPECT_TRUE(absl::IsInvalidArgument((*e)->PredictRow(x.data(), Kind(OutputKind::kMargin, 4, 2), out.data())));
}

}  // namespace
}  // namespace grove
