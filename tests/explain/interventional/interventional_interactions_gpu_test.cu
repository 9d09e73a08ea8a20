// GPU interventional interaction values (interventional_interactions_gpu.cuh) and Banzhaf values
// against the CPU reference on seeded random forests and the corpus, run-to-run bitwise identity,
// the device-level entry with a caller-owned workspace, refusals, and the engine's choice. Label
// gpu: every test skips cleanly when no CUDA device is visible.
#include <cuda_runtime.h>

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/interventional/interventional_gpu.h"
#include "core/explain/interventional/interventional_interactions.h"
#include "core/explain/interventional_engine.h"
#include "core/gpu/device_set.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"
#include "tests/testing/gpu_skip.h"
#include "tests/testing/interventional_reference.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

using testing::ExpectNearReference;
using testing::InterventionalReference;
using testing::WithLink;

constexpr double kTolerance = 1e-5;  // x max(1, |value|)

struct Engine {
  std::unique_ptr<InterventionalGpu> gpu;
  LinearizedLayoutPtr linearized;
};

Engine MakeGpu(ForestPtr f, const std::vector<float>& bg) {
  const testing::InterventionalLayouts l = testing::BuildInterventionalLayouts(*f, bg, nullptr);
  if (l.il == nullptr) return {};
  absl::StatusOr<std::unique_ptr<InterventionalGpu>> g =
      InterventionalGpu::Create(f, l.layout, l.il);
  EXPECT_TRUE(g.ok()) << g.status();
  return {g.ok() ? std::move(*g) : nullptr, testing::BuildLinearized(*f, l, bg)};
}

absl::StatusOr<std::vector<float>> GpuOrStatus(InterventionalGpu& gpu, const Forest& f,
                                               const std::vector<float>& rows,
                                               const InterventionalOptions& o) {
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  const int64_t width = ExplainWidth(f, o.interactions);
  std::vector<float> out(n * width, std::nanf(""));  // poisoned: every entry must be written
  absl::Status s = gpu.Explain(MakeRowsView(rows.data(), n, f.num_features), o,
                               MakeMatrixView(out.data(), n, width));
  if (!s.ok()) return s;
  return out;
}

// The GPU against the reference (and against itself, bit for bit, on a second run).
void ExpectGpuLikeTheReference(InterventionalGpu& gpu, const Forest& f,
                               const std::vector<float>& rows, const std::vector<float>& bg,
                               const InterventionalOptions& o, const std::string& what) {
  absl::StatusOr<std::vector<float>> got = GpuOrStatus(gpu, f, rows, o);
  ASSERT_TRUE(got.ok()) << what << ": " << got.status();
  ExpectNearReference(*got, InterventionalReference(f, rows, bg, o), kTolerance, what);
  absl::StatusOr<std::vector<float>> again = GpuOrStatus(gpu, f, rows, o);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *got) << what << ": run to run";
}

TEST(InterventionalInteractionsGpuTest, RandomForestsMatchTheReference) {
  SKIP_WITHOUT_GPU();
  for (const RandomForestOptions& o : testing::InterventionalForestOptions()) {
    ForestPtr f = MakeRandomForest(o);
    const std::vector<float> rows = MakeRandomRows(*f, 21, o.seed + 10);  // not a multiple of 8
    const std::vector<float> bg = MakeRandomRows(*f, 100, o.seed + 20);
    Engine e = MakeGpu(f, bg);
    ASSERT_NE(e.gpu, nullptr);
    for (const InterventionalOptions& io : testing::InteractionCases()) {
      ExpectGpuLikeTheReference(*e.gpu, *f, rows, bg, io,
                                absl::StrCat("seed ", o.seed, " ", testing::Describe(io)));
    }
  }
}

TEST(InterventionalInteractionsGpuTest, CorpusMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  if (testing::CorpusCaseDirs().empty()) GTEST_SKIP() << "no corpus found";
  int compared = 0;
  // 80 + 10 rows: the repository's golden cases (100 rows) take part where ../shared/testdata is
  // absent, as on the GPU machine.
  for (const auto& k : testing::InterventionalCorpus(80, 10)) {
    absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(*k.forest);
    ASSERT_TRUE(l.ok());
    if (!(*l)->long_paths.empty()) continue;  // served by the CPU strategies
    Engine e = MakeGpu(k.forest, k.background);
    ASSERT_NE(e.gpu, nullptr) << k.c.name;
    InterventionalOptions io;
    io.interactions = true;
    ExpectGpuLikeTheReference(*e.gpu, *k.forest, k.rows, k.background, io, k.c.name);
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

// The identity link's probability space: the margin's values over the average divisor.
TEST(InterventionalInteractionsGpuTest, IdentityLinkProbability) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = MakeRandomForest({.seed = 9});
  const std::vector<float> rows = MakeRandomRows(*f, 12, 1), bg = MakeRandomRows(*f, 30, 2);
  Engine e = MakeGpu(f, bg);
  ASSERT_NE(e.gpu, nullptr);
  InterventionalOptions io;
  io.interactions = true;
  io.output_space = OutputSpace::kProbability;
  ExpectGpuLikeTheReference(*e.gpu, *f, rows, bg, io, "identity link");
}

TEST(InterventionalInteractionsGpuTest, RunToRunBitwiseIdenticalOnAWideForest) {
  SKIP_WITHOUT_GPU();
  ForestPtr f =
      MakeRandomForest({.num_trees = 60, .max_depth = 8, .num_features = 30, .num_outputs = 3});
  const std::vector<float> rows = MakeRandomRows(*f, 200, 1);
  const std::vector<float> bg = MakeRandomRows(*f, 1000, 2);
  Engine e = MakeGpu(f, bg);
  ASSERT_NE(e.gpu, nullptr);
  InterventionalOptions io;
  io.interactions = true;
  absl::StatusOr<std::vector<float>> first = GpuOrStatus(*e.gpu, *f, rows, io);
  ASSERT_TRUE(first.ok()) << first.status();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*GpuOrStatus(*e.gpu, *f, rows, io), *first) << "run " << i;
  const std::vector<float> head(rows.begin(), rows.begin() + 10 * f->num_features);
  const std::vector<float> want = InterventionalReference(*f, head, bg, io);
  ExpectNearReference(std::vector<float>(first->begin(), first->begin() + want.size()), want,
                      kTolerance, "wide forest, 10 rows");
}

// The exact probability space's interaction values (a warp per row, interventional_exact.h step
// 5): seeded forests with every link the space allows, Shapley and Banzhaf, against the reference
// (or its refusal of a pair over the limit), bit for bit run to run.
TEST(InterventionalInteractionsGpuTest, ExactProbabilityMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  int compared = 0;
  for (const RandomForestOptions& o : testing::InterventionalForestOptions()) {
    for (Link link : testing::ProbabilityLinks(o, OutputSpace::kProbability)) {
      ForestPtr f = WithLink(*MakeRandomForest(o), link);
      const std::vector<float> rows = MakeRandomRows(*f, 37, o.seed + 10);
      const std::vector<float> bg = MakeRandomRows(*f, 12, o.seed + 20);
      Engine e = MakeGpu(f, bg);
      ASSERT_NE(e.gpu, nullptr);
      ASSERT_TRUE(e.gpu->EnableLinearized(e.linearized).ok());
      for (Attribution attribution : {Attribution::kShapley, Attribution::kBanzhaf}) {
        InterventionalOptions io;
        io.interactions = true;
        io.output_space = OutputSpace::kProbability;
        io.attribution = attribution;
        const std::string what =
            absl::StrCat("seed ", o.seed, " ", LinkName(link), " ", testing::Describe(io));
        absl::StatusOr<std::vector<float>> got = GpuOrStatus(*e.gpu, *f, rows, io);
        if (!testing::ExpectLikeTheReference(got, *f, rows, bg, io, kTolerance, what)) continue;
        ++compared;
        EXPECT_EQ(*GpuOrStatus(*e.gpu, *f, rows, io), *got) << what << ": run to run";
      }
    }
  }
  EXPECT_GT(compared, 6);
}

// Banzhaf values (not interactions) on the GPU: every output space's kernels with Banzhaf's table.
TEST(InterventionalInteractionsGpuTest, BanzhafValuesInEveryOutputSpace) {
  SKIP_WITHOUT_GPU();
  for (const RandomForestOptions& o : testing::InterventionalForestOptions()) {
    for (OutputSpace space : {OutputSpace::kMargin, OutputSpace::kProbabilityLinearized,
                              OutputSpace::kProbability}) {
      const Link link = space == OutputSpace::kMargin ? Link::kIdentity
                                                      : testing::ProbabilityLinks(o, space)[0];
      ForestPtr f = WithLink(*MakeRandomForest(o), link);
      const std::vector<float> rows = MakeRandomRows(*f, 13, o.seed + 10);
      const std::vector<float> bg = MakeRandomRows(*f, 20, o.seed + 20);
      Engine e = MakeGpu(f, bg);
      ASSERT_NE(e.gpu, nullptr);
      ASSERT_TRUE(e.gpu->EnableLinearized(e.linearized).ok());
      InterventionalOptions io;
      io.attribution = Attribution::kBanzhaf;
      io.output_space = space;
      const std::string what = absl::StrCat("seed ", o.seed, " ", OutputSpaceName(space));
      absl::StatusOr<std::vector<float>> got = GpuOrStatus(*e.gpu, *f, rows, io);
      testing::ExpectLikeTheReference(got, *f, rows, bg, io, kTolerance, what);
    }
  }
}

TEST(InterventionalInteractionsGpuTest, DeviceEntryWithCallerWorkspaceAndRefusals) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = WithLink(*MakeRandomForest({}), Link::kSigmoid);
  const int64_t n = 40;
  const std::vector<float> rows = MakeRandomRows(*f, n, 3);
  const std::vector<float> bg = MakeRandomRows(*f, 64, 4);
  Engine e = MakeGpu(f, bg);
  ASSERT_NE(e.gpu, nullptr);
  ASSERT_TRUE(e.gpu->EnableLinearized(e.linearized).ok());
  InterventionalOptions io;
  io.interactions = true;
  const int64_t width = ExplainWidth(*f, true);
  const int64_t ws = e.gpu->WorkspaceBytes(n, io);
  EXPECT_GE(ws, n * width * 8);
  float* d_rows = nullptr;
  float* d_out = nullptr;
  void* d_ws = nullptr;
  ASSERT_EQ(cudaMalloc(&d_rows, rows.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out, n * width * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_ws, ws), cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_rows, rows.data(), rows.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(e.gpu->ExplainOnDevice(d_rows, n, io, d_ws, ws - 1, d_out, stream).code(),
            absl::StatusCode::kInvalidArgument);
  InterventionalOptions prob = io;  // linearized interactions: the CPU reference's
  prob.output_space = OutputSpace::kProbabilityLinearized;
  EXPECT_EQ(e.gpu->ExplainOnDevice(d_rows, n, prob, d_ws, ws, d_out, stream).code(),
            absl::StatusCode::kFailedPrecondition);
  prob.output_space = OutputSpace::kProbability;  // exact: a larger workspace
  EXPECT_GT(e.gpu->WorkspaceBytes(n, prob), ws);
  EXPECT_EQ(e.gpu->ExplainOnDevice(d_rows, n, prob, d_ws, ws, d_out, stream).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(e.gpu->ExplainOnDevice(d_rows, n, io, d_ws, ws, d_out, stream).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::vector<float> out(n * width);
  ASSERT_EQ(cudaMemcpy(out.data(), d_out, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ExpectNearReference(out, InterventionalReference(*f, rows, bg, io), kTolerance, "device entry");
  cudaStreamDestroy(stream);
  cudaFree(d_rows);
  cudaFree(d_out);
  cudaFree(d_ws);
}

// "auto" sends margin interaction values (Shapley and Banzhaf) to the GPU, a sigmoid's
// linearized interactions to the reference.
TEST(InterventionalInteractionsGpuTest, EngineRunsMarginInteractionsOnTheGpu) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = WithLink(*MakeRandomForest({}), Link::kSigmoid);
  const int64_t n = 9;
  const std::vector<float> rows = MakeRandomRows(*f, n, 5);
  const std::vector<float> bg = MakeRandomRows(*f, 30, 6);
  ThreadPool pool(2);
  absl::StatusOr<std::unique_ptr<InterventionalEngine>> e = InterventionalEngine::Create(
      f, nullptr, MakeRowsView(bg.data(), 30, f->num_features), {}, &pool);
  ASSERT_TRUE(e.ok()) << e.status();
  const int64_t width = ExplainWidth(*f, true);
  struct Case {
    OutputSpace space;
    Attribution attribution;
    const char* strategy;
  };
  for (const Case& c : {Case{OutputSpace::kMargin, Attribution::kShapley, "interventional_gpu"},
                        Case{OutputSpace::kMargin, Attribution::kBanzhaf, "interventional_gpu"},
                        Case{OutputSpace::kProbabilityLinearized, Attribution::kShapley,
                             "interventional_reference"},
                        // The exact space in calls this small: the CPU path form.
                        Case{OutputSpace::kProbability, Attribution::kShapley,
                             "interventional_paths_cpu"}}) {
    InterventionalOptions o;
    o.interactions = true;
    o.output_space = c.space;
    o.attribution = c.attribution;
    std::vector<float> out(n * width);
    RunInfo info;
    ASSERT_TRUE((*e)->Explain(MakeRowsView(rows.data(), n, f->num_features), o,
                              MakeMatrixView(out.data(), n, width), &info)
                    .ok());
    EXPECT_EQ(info.strategy, c.strategy) << OutputSpaceName(c.space);
    ExpectNearReference(out, InterventionalReference(*f, rows, bg, o), kTolerance,
                        OutputSpaceName(c.space));
  }
}

}  // namespace
}  // namespace grove
