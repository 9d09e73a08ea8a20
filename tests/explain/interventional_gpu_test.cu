// GPU interventional SHAP (core/explain/interventional_gpu.h) against the CPU reference on seeded
// random forests and every corpus case, iteration ranges, run-to-run bitwise identity, the
// device-level entry with a caller-owned workspace, and refusals. Label gpu: every test skips
// cleanly when no CUDA device is visible.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/interventional_engine.h"
#include "core/explain/interventional_gpu.h"
#include "core/gpu/device_set.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"
#include "tests/testing/interventional_reference.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

using testing::ExpectNearReference;
using testing::InterventionalReference;
using testing::WithLink;

constexpr double kTolerance = 1e-5;  // x max(1, |value|)

#define SKIP_WITHOUT_GPU()                                                    \
  do {                                                                        \
    if (gpu::VisibleGpuCount() == 0) GTEST_SKIP() << "no CUDA device visible"; \
  } while (0)

std::unique_ptr<InterventionalGpu> MakeGpu(ForestPtr f, const std::vector<float>& bg) {
  absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(*f);
  EXPECT_TRUE(l.ok()) << l.status();
  absl::StatusOr<InterventionalLayoutPtr> il = BuildInterventionalLayout(
      *f, **l, MakeRowsView(bg.data(), bg.size() / f->num_features, f->num_features), nullptr);
  EXPECT_TRUE(il.ok()) << il.status();
  absl::StatusOr<std::unique_ptr<InterventionalGpu>> g = InterventionalGpu::Create(f, *l, *il);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? std::move(*g) : nullptr;
}

std::vector<float> Gpu(InterventionalGpu& gpu, const Forest& f, const std::vector<float>& rows,
                       const InterventionalOptions& o = {}) {
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  const int64_t width = ExplainWidth(f, false);
  std::vector<float> out(n * width, std::nanf(""));  // poisoned: every entry must be written
  absl::Status s = gpu.Explain(MakeRowsView(rows.data(), n, f.num_features), o,
                               MakeMatrixView(out.data(), n, width));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(InterventionalGpuTest, RandomForestsMatchTheReference) {
  SKIP_WITHOUT_GPU();
  for (const RandomForestOptions& o : testing::InterventionalForestOptions()) {
    ForestPtr f = MakeRandomForest(o);
    const std::vector<float> rows = MakeRandomRows(*f, 37, o.seed + 10);  // not a multiple of 8
    const std::vector<float> bg = MakeRandomRows(*f, 100, o.seed + 20);
    std::unique_ptr<InterventionalGpu> gpu = MakeGpu(f, bg);
    ASSERT_NE(gpu, nullptr);
    for (int begin : {0, 1}) {
      InterventionalOptions io;
      io.iteration_begin = begin;
      io.iteration_end = begin == 0 ? 0 : 3;
      ExpectNearReference(Gpu(*gpu, *f, rows, io), InterventionalReference(*f, rows, bg, io),
                          kTolerance, absl::StrCat("seed ", o.seed, " begin ", begin));
    }
  }
}

TEST(InterventionalGpuTest, CorpusMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  if (testing::CorpusCaseDirs().empty()) GTEST_SKIP() << "no corpus found";
  for (const auto& k : testing::InterventionalCorpus(100, 20)) {
    absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(*k.forest);
    ASSERT_TRUE(l.ok());
    if (!(*l)->long_paths.empty()) continue;  // served by the CPU strategies
    std::unique_ptr<InterventionalGpu> gpu = MakeGpu(k.forest, k.background);
    ASSERT_NE(gpu, nullptr) << k.c.name;
    ExpectNearReference(Gpu(*gpu, *k.forest, k.rows),
                        InterventionalReference(*k.forest, k.rows, k.background), kTolerance,
                        k.c.name);
  }
}

void EnableLinearized(InterventionalGpu& gpu, const Forest& f, const std::vector<float>& bg) {
  absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(f);
  ASSERT_TRUE(l.ok());
  const RowsView bv = MakeRowsView(bg.data(), bg.size() / f.num_features, f.num_features);
  absl::StatusOr<InterventionalLayoutPtr> il = BuildInterventionalLayout(f, **l, bv, nullptr);
  ASSERT_TRUE(il.ok());
  absl::StatusOr<LinearizedLayoutPtr> ll = BuildLinearizedLayout(**l, **il, bv, nullptr);
  ASSERT_TRUE(ll.ok()) << ll.status();
  ASSERT_TRUE(gpu.EnableLinearized(*ll).ok());
  EXPECT_TRUE(gpu.linearized_enabled());
}

// shap's model_output="probability" (probability_linearized) on the GPU: random forests with a
// sigmoid and an exp link (multi-output: each output its own), iteration ranges, and every
// corpus case whose link allows it.
TEST(InterventionalGpuTest, LinearizedMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  InterventionalOptions io;
  io.output_space = OutputSpace::kProbabilityLinearized;
  for (const RandomForestOptions& o : testing::InterventionalForestOptions()) {
    for (Link link : {Link::kSigmoid, Link::kExp}) {
      ForestPtr f = WithLink(*MakeRandomForest(o), link);
      const std::vector<float> rows = MakeRandomRows(*f, 37, o.seed + 10);
      const std::vector<float> bg = MakeRandomRows(*f, 100, o.seed + 20);
      std::unique_ptr<InterventionalGpu> gpu = MakeGpu(f, bg);
      ASSERT_NE(gpu, nullptr);
      EXPECT_FALSE(gpu->linearized_enabled());
      std::vector<float> out(37 * ExplainWidth(*f, false));
      EXPECT_EQ(gpu->Explain(MakeRowsView(rows.data(), 37, f->num_features), io,
                             MakeMatrixView(out.data(), 37, ExplainWidth(*f, false)))
                    .code(),
                absl::StatusCode::kFailedPrecondition);
      EnableLinearized(*gpu, *f, bg);
      for (int begin : {0, 1}) {
        io.iteration_begin = begin;
        io.iteration_end = begin == 0 ? 0 : 3;
        const std::vector<float> got = Gpu(*gpu, *f, rows, io);
        ExpectNearReference(got, InterventionalReference(*f, rows, bg, io), kTolerance,
                            absl::StrCat("seed ", o.seed, " link ", static_cast<int>(link),
                                         " begin ", begin));
        EXPECT_EQ(Gpu(*gpu, *f, rows, io), got) << "run to run";
      }
    }
  }
  if (testing::CorpusCaseDirs().empty()) return;
  io = {};
  io.output_space = OutputSpace::kProbabilityLinearized;
  int cases = 0;
  for (const auto& k : testing::InterventionalCorpus(100, 20)) {
    absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(*k.forest);
    ASSERT_TRUE(l.ok());
    if (!(*l)->long_paths.empty() || !CheckOutputSpace(*k.forest, io.output_space).ok()) continue;
    std::unique_ptr<InterventionalGpu> gpu = MakeGpu(k.forest, k.background);
    ASSERT_NE(gpu, nullptr) << k.c.name;
    EnableLinearized(*gpu, *k.forest, k.background);
    ExpectNearReference(Gpu(*gpu, *k.forest, k.rows, io),
                        InterventionalReference(*k.forest, k.rows, k.background, io), kTolerance,
                        k.c.name);
    ++cases;
  }
  EXPECT_GT(cases, 5);
}

TEST(InterventionalGpuTest, RunToRunBitwiseIdentical) {
  SKIP_WITHOUT_GPU();
  RandomForestOptions o;
  o.num_trees = 50;
  o.max_depth = 8;
  o.num_features = 20;
  o.num_outputs = 3;
  ForestPtr f = MakeRandomForest(o);
  const std::vector<float> rows = MakeRandomRows(*f, 300, 1);
  const std::vector<float> bg = MakeRandomRows(*f, 500, 2);
  std::unique_ptr<InterventionalGpu> gpu = MakeGpu(f, bg);
  ASSERT_NE(gpu, nullptr);
  const std::vector<float> first = Gpu(*gpu, *f, rows);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Gpu(*gpu, *f, rows), first) << "run " << i;
}

TEST(InterventionalGpuTest, DeviceEntryWithCallerWorkspace) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = MakeRandomForest({});
  const std::vector<float> rows = MakeRandomRows(*f, 50, 3);
  const std::vector<float> bg = MakeRandomRows(*f, 64, 4);
  std::unique_ptr<InterventionalGpu> gpu = MakeGpu(f, bg);
  ASSERT_NE(gpu, nullptr);
  const int64_t width = ExplainWidth(*f, false);
  float* d_rows = nullptr;
  float* d_out = nullptr;
  void* d_ws = nullptr;
  const int64_t ws = gpu->WorkspaceBytes(50);
  ASSERT_EQ(cudaMalloc(&d_rows, rows.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out, 50 * width * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_ws, ws), cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_rows, rows.data(), rows.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(gpu->ExplainOnDevice(d_rows, 50, {}, d_ws, ws - 1, d_out, stream).code(),
            absl::StatusCode::kInvalidArgument);
  InterventionalOptions prob;
  prob.output_space = OutputSpace::kProbability;
  EXPECT_EQ(gpu->ExplainOnDevice(d_rows, 50, prob, d_ws, ws, d_out, stream).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(gpu->ExplainOnDevice(d_rows, 50, {}, d_ws, ws, d_out, stream).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::vector<float> out(50 * width);
  ASSERT_EQ(cudaMemcpy(out.data(), d_out, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ExpectNearReference(out, InterventionalReference(*f, rows, bg), kTolerance, "device entry");
  cudaStreamDestroy(stream);
  cudaFree(d_rows);
  cudaFree(d_out);
  cudaFree(d_ws);
}

TEST(InterventionalGpuTest, EngineRunsMarginsOnTheGpu) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = MakeRandomForest({});
  const std::vector<float> rows = MakeRandomRows(*f, 20, 5);
  const std::vector<float> bg = MakeRandomRows(*f, 30, 6);
  ThreadPool pool(2);
  absl::StatusOr<std::unique_ptr<InterventionalEngine>> e = InterventionalEngine::Create(
      f, nullptr, MakeRowsView(bg.data(), 30, f->num_features), {}, &pool);
  ASSERT_TRUE(e.ok()) << e.status();
  const int64_t width = ExplainWidth(*f, false);
  std::vector<float> out(20 * width);
  RunInfo info;
  ASSERT_TRUE((*e)->Explain(MakeRowsView(rows.data(), 20, f->num_features), {},
                            MakeMatrixView(out.data(), 20, width), &info)
                  .ok());
  EXPECT_EQ(info.strategy, "interventional_gpu");
  EXPECT_EQ(info.device, "cuda:0");
  ExpectNearReference(out, InterventionalReference(*f, rows, bg), kTolerance, "engine");
}

TEST(InterventionalGpuTest, EngineRunsLinearizedProbabilitiesOnTheGpu) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = WithLink(*MakeRandomForest({}), Link::kSigmoid);
  const std::vector<float> rows = MakeRandomRows(*f, 20, 5);
  const std::vector<float> bg = MakeRandomRows(*f, 30, 6);
  ThreadPool pool(2);
  absl::StatusOr<std::unique_ptr<InterventionalEngine>> e = InterventionalEngine::Create(
      f, nullptr, MakeRowsView(bg.data(), 30, f->num_features), {}, &pool);
  ASSERT_TRUE(e.ok()) << e.status();
  const int64_t width = ExplainWidth(*f, false);
  InterventionalOptions o;
  o.output_space = OutputSpace::kProbabilityLinearized;
  std::vector<float> out(20 * width);
  RunInfo info;
  ASSERT_TRUE((*e)->Explain(MakeRowsView(rows.data(), 20, f->num_features), o,
                            MakeMatrixView(out.data(), 20, width), &info)
                  .ok());
  EXPECT_EQ(info.strategy, "interventional_gpu");
  ExpectNearReference(out, InterventionalReference(*f, rows, bg, o), kTolerance, "engine");
}

}  // namespace
}  // namespace grove
