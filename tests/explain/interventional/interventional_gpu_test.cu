// GPU interventional SHAP (core/explain/interventional/interventional_gpu.h) against the CPU reference on seeded
// random forests and every corpus case, in every output space, iteration ranges, run-to-run
// bitwise identity, the device-level entry with a caller-owned workspace, and refusals. Label gpu:
// every test skips cleanly when no CUDA device is visible.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/interventional/interventional_gpu.h"
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
  // 80 + 20 rows: the repository's golden cases (100 rows) take part where ../shared/testdata is
  // absent, as on the GPU machine.
  int compared = 0;
  for (const auto& k : testing::InterventionalCorpus(80, 20)) {
    absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(*k.forest);
    ASSERT_TRUE(l.ok());
    if (!(*l)->long_paths.empty()) continue;  // served by the CPU strategies
    std::unique_ptr<InterventionalGpu> gpu = MakeGpu(k.forest, k.background);
    ASSERT_NE(gpu, nullptr) << k.c.name;
    ExpectNearReference(Gpu(*gpu, *k.forest, k.rows),
                        InterventionalReference(*k.forest, k.rows, k.background), kTolerance,
                        k.c.name);
    ++compared;
  }
  EXPECT_GT(compared, 0);
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

// The GPU in `io`'s space against the reference: the same values (and the same values on a second
// run, bit for bit), or the same refusal. Returns whether values were compared.
bool ExpectGpuLikeTheReference(InterventionalGpu& gpu, const Forest& f,
                               const std::vector<float>& rows, const std::vector<float>& bg,
                               const InterventionalOptions& io, const std::string& what) {
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  const int64_t width = ExplainWidth(f, false);
  std::vector<float> got(n * width), again(n * width);
  const RowsView rv = MakeRowsView(rows.data(), n, f.num_features);
  const absl::Status s = gpu.Explain(rv, io, MakeMatrixView(got.data(), n, width));
  if (!testing::ExpectLikeTheReference(s.ok() ? absl::StatusOr<std::vector<float>>(got) : s, f,
                                       rows, bg, io, kTolerance, what)) {
    return false;
  }
  EXPECT_TRUE(gpu.Explain(rv, io, MakeMatrixView(again.data(), n, width)).ok());
  EXPECT_EQ(again, got) << what << ": run to run";
  return true;
}

// A probability space on the GPU against the reference: seeded forests with every link the space
// allows (testing::ProbabilityLinks; refused before EnableLinearized), two iteration ranges, then
// every corpus case whose link allows it; each compared twice (run-to-run identity). Pairs over
// the exact space's limit are refused as the reference refuses them.
void ExpectSpaceLikeTheReference(OutputSpace space, int64_t background_rows) {
  InterventionalOptions io;
  io.output_space = space;
  int compared = 0;
  for (const RandomForestOptions& o : testing::InterventionalForestOptions()) {
    for (Link link : testing::ProbabilityLinks(o, space)) {
      ForestPtr f = WithLink(*MakeRandomForest(o), link);
      const std::vector<float> rows = MakeRandomRows(*f, 37, o.seed + 10);  // not a multiple of 8
      const std::vector<float> bg = MakeRandomRows(*f, background_rows, o.seed + 20);
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
        compared += ExpectGpuLikeTheReference(
            *gpu, *f, rows, bg, io,
            absl::StrCat("seed ", o.seed, " link ", static_cast<int>(link), " begin ", begin));
      }
    }
  }
  EXPECT_GT(compared, 12);
  // The library corpus (../shared/testdata): the repository's golden cases are too short for a
  // 100-row background, so without it there is nothing to compare.
  const std::vector<testing::InterventionalCorpusCase> corpus = testing::InterventionalCorpus(100, 20);
  if (corpus.empty()) return;
  io = {};
  io.output_space = space;
  compared = 0;
  for (const auto& k : corpus) {
    absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(*k.forest);
    ASSERT_TRUE(l.ok());
    if (!(*l)->long_paths.empty() || !CheckOutputSpace(*k.forest, space).ok()) continue;
    std::unique_ptr<InterventionalGpu> gpu = MakeGpu(k.forest, k.background);
    ASSERT_NE(gpu, nullptr) << k.c.name;
    EnableLinearized(*gpu, *k.forest, k.background);
    compared += ExpectGpuLikeTheReference(*gpu, *k.forest, k.rows, k.background, io, k.c.name);
  }
  EXPECT_GT(compared, 5);
}

// shap's model_output="probability" (probability_linearized).
TEST(InterventionalGpuTest, LinearizedMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  ExpectSpaceLikeTheReference(OutputSpace::kProbabilityLinearized, 100);
}

// The exact probability space (interventional_exact.h, a warp per row).
TEST(InterventionalGpuTest, ExactMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  ExpectSpaceLikeTheReference(OutputSpace::kProbability, 20);
}

// A pair over kMaxExactDifferingFeatures: refused with the reference's words, the row numbered in
// the whole call; the identity link's probability space needs no linearized layout.
TEST(InterventionalGpuTest, ExactRefusalsAndTheIdentityLink) {
  SKIP_WITHOUT_GPU();
  const int F = kMaxExactDifferingFeatures + 1;
  HandForest h(F);
  h.forest.objective.link = Link::kSigmoid;
  for (int i = 0; i < F; ++i) h.AddTree({h.Split(i, 0.5f, 1, 2, 2), h.Leaf(0.0, 1), h.Leaf(1.0, 1)});
  ForestPtr wide = h.Build();
  const std::vector<float> ones(F, 1.0f), zeros(F, 0.0f);
  std::vector<float> rows;
  for (int r = 0; r < 40; ++r) rows.insert(rows.end(), ones.begin(), ones.end());
  std::vector<float> bg = ones;
  bg.insert(bg.end(), ones.begin(), ones.end());
  bg[F + 3] = 0.0f;
  std::unique_ptr<InterventionalGpu> gpu = MakeGpu(wide, bg);
  ASSERT_NE(gpu, nullptr);
  EnableLinearized(*gpu, *wide, bg);
  InterventionalOptions io;
  io.output_space = OutputSpace::kProbability;
  EXPECT_TRUE(ExpectGpuLikeTheReference(*gpu, *wide, rows, bg, io, "close pairs"));
  std::copy(zeros.begin(), zeros.end(), rows.begin() + 33 * F);  // row 33 differs everywhere
  std::copy(zeros.begin(), zeros.end(), rows.begin() + 35 * F);
  EXPECT_FALSE(ExpectGpuLikeTheReference(*gpu, *wide, rows, bg, io, "row 33"));
  std::vector<float> out(40 * (F + 1));
  const absl::Status s = gpu->Explain(MakeRowsView(rows.data(), 40, F), io,
                                      MakeMatrixView(out.data(), 40, F + 1));
  EXPECT_NE(s.message().find("row 33, background row 0"), std::string::npos) << s;

  RandomForestOptions ro;
  ro.seed = 9;
  ForestPtr f = MakeRandomForest(ro);  // identity link
  const std::vector<float> r = MakeRandomRows(*f, 25, 1), b = MakeRandomRows(*f, 30, 2);
  std::unique_ptr<InterventionalGpu> plain = MakeGpu(f, b);
  ASSERT_NE(plain, nullptr);
  EXPECT_TRUE(ExpectGpuLikeTheReference(*plain, *f, r, b, io, "identity link"));
  EXPECT_FALSE(plain->linearized_enabled());
}

TEST(InterventionalGpuTest, RunToRunBitwiseIdentical) {
  SKIP_WITHOUT_GPU();
  ForestPtr f =
      MakeRandomForest({.num_trees = 50, .max_depth = 8, .num_features = 20, .num_outputs = 3});
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
  prob.output_space = OutputSpace::kProbabilityLinearized;  // before EnableLinearized
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

// The engine's "auto" runs `space` on `strategy` for a call of `n` rows (2 CPU threads), with the
// reference's values.
void ExpectTheEngineRuns(ForestPtr f, OutputSpace space, int64_t n, const std::string& strategy) {
  const std::vector<float> rows = MakeRandomRows(*f, n, 5);
  const std::vector<float> bg = MakeRandomRows(*f, 30, 6);
  ThreadPool pool(2);
  absl::StatusOr<std::unique_ptr<InterventionalEngine>> e = InterventionalEngine::Create(
      f, nullptr, MakeRowsView(bg.data(), 30, f->num_features), {}, &pool);
  ASSERT_TRUE(e.ok()) << e.status();
  const int64_t width = ExplainWidth(*f, false);
  InterventionalOptions o;
  o.output_space = space;
  std::vector<float> out(n * width);
  RunInfo info;
  ASSERT_TRUE((*e)->Explain(MakeRowsView(rows.data(), n, f->num_features), o,
                            MakeMatrixView(out.data(), n, width), &info)
                  .ok());
  EXPECT_EQ(info.strategy, strategy) << OutputSpaceName(space) << ", " << n << " rows";
  EXPECT_EQ(info.device, strategy == "interventional_gpu" ? "cuda:0" : "cpu");
  ExpectNearReference(out, InterventionalReference(*f, rows, bg, o), kTolerance,
                      OutputSpaceName(space));
}

TEST(InterventionalGpuTest, EngineRunsEveryOutputSpaceOnTheGpu) {
  SKIP_WITHOUT_GPU();
  ExpectTheEngineRuns(MakeRandomForest({}), OutputSpace::kMargin, 20, "interventional_gpu");
  ExpectTheEngineRuns(WithLink(*MakeRandomForest({}), Link::kSigmoid),
                      OutputSpace::kProbabilityLinearized, 20, "interventional_gpu");
  // The exact space on the GPU from kExactCpuRowsPerThread rows per CPU thread (2 threads here),
  // on the CPU path form below.
  RandomForestOptions three;
  three.num_outputs = 3;
  ASSERT_FALSE(PrefersCpuForExact(2 * kExactCpuRowsPerThread, 2));
  ASSERT_TRUE(PrefersCpuForExact(2 * kExactCpuRowsPerThread - 1, 2));
  ExpectTheEngineRuns(WithLink(*MakeRandomForest(three), Link::kSoftmax),
                      OutputSpace::kProbability, 2 * kExactCpuRowsPerThread, "interventional_gpu");
  ExpectTheEngineRuns(WithLink(*MakeRandomForest(three), Link::kSoftmax),
                      OutputSpace::kProbability, 4, "interventional_paths_cpu");
}

}  // namespace
}  // namespace grove
