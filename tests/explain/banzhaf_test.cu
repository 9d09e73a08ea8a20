// Banzhaf values on the GPU (label gpu; every test skips cleanly without a device): the quadrature
// kernels over a QuadratureModel built with Banzhaf's rule (one evaluation at t = 1/2) against the
// CPU strategy over the same model, and against the definition over every feature subset, in both
// precisions; results bit-identical run to run. The kernels are those of SHAP values: only the
// model's rule differs.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/explain/explain.h"
#include "core/explain/paths.h"
#include "core/explain/quadrature/banzhaf_engine.h"
#include "core/explain/quadrature/quadrature.h"
#include "core/gpu/device_set.h"
#include "gtest/gtest.h"
#include "tests/testing/coalition_games.h"
#include "tests/testing/gpu_skip.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

std::vector<float> RunGpu(const QuadratureGpuExplainer& gpu, const Forest& f,
                       const std::vector<float>& rows, bool interactions) {
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  const int64_t width = ExplainWidth(f, interactions);
  std::vector<float> out(n * width, std::nanf(""));
  ExplainOptions o;
  o.interactions = interactions;
  const absl::Status s = gpu.Explain(MakeRowsView(rows.data(), n, f.num_features), o,
                                     MakeMatrixView(out.data(), n, width));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(BanzhafGpuTest, MatchesTheCpuAndTheDefinition) {
  SKIP_WITHOUT_GPU();
  struct Case {
    int seed, features, depth, outputs;
    bool vector_leaves;
    double categorical;
    bool lightgbm;
  };
  for (const Case& c : {Case{1, 5, 5, 1, false, 0.0, false}, Case{2, 6, 8, 2, false, 0.3, true},
                        Case{3, 6, 6, 3, true, 0.2, false}, Case{4, 7, 7, 1, false, 0.4, true}}) {
    RandomForestOptions ro;
    ro.seed = c.seed;
    ro.num_trees = 8;
    ro.num_features = c.features;
    ro.max_depth = c.depth;
    ro.num_outputs = c.outputs;
    ro.vector_leaves = c.vector_leaves;
    ro.categorical_fraction = c.categorical;
    ro.lightgbm_rules = c.lightgbm;
    ForestPtr f = MakeRandomForest(ro);
    absl::StatusOr<PathLayoutPtr> layout = BuildPathLayout(*f);
    ASSERT_TRUE(layout.ok()) << layout.status();
    absl::StatusOr<QuadratureModelPtr> model =
        BuildQuadratureModel(f, *layout, Attribution::kBanzhaf);
    ASSERT_TRUE(model.ok()) << model.status();
    const int64_t n = 64;
    const std::vector<float> rows = MakeRandomRows(*f, n, c.seed + 50, 0.15);
    for (QuadraturePrecision precision : {QuadraturePrecision::kDouble, QuadraturePrecision::kFloat}) {
      absl::StatusOr<std::unique_ptr<QuadratureGpuExplainer>> gpu =
          QuadratureGpuExplainer::Create(*model, 0, precision);
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      const double tol = precision == QuadraturePrecision::kDouble ? 1e-6 : 1e-4;
      for (bool interactions : {false, true}) {
        const std::vector<float> got = RunGpu(**gpu, *f, rows, interactions);
        const std::vector<float> again = RunGpu(**gpu, *f, rows, interactions);
        EXPECT_EQ(std::memcmp(got.data(), again.data(), got.size() * sizeof(float)), 0)
            << "not bit-identical run to run";
        const int64_t width = ExplainWidth(*f, interactions);
        std::vector<float> cpu(n * width);
        ExplainOptions o;
        o.interactions = interactions;
        ASSERT_TRUE(ExplainQuadratureCpu(**model, MakeRowsView(rows.data(), n, f->num_features),
                                         o, MakeMatrixView(cpu.data(), n, width), nullptr)
                        .ok());
        for (int64_t r = 0; r < n; ++r) {
          const std::vector<double> game =
              testing::PathDependentGame(*f, rows.data() + r * f->num_features);
          const std::vector<double> want =
              interactions
                  ? testing::BanzhafInteractionsOfGame(game, f->num_features, f->num_outputs)
                  : testing::BanzhafOfGame(game, f->num_features, f->num_outputs);
          for (int64_t col = 0; col < width; ++col) {
            const double scale = std::max(1.0, std::abs(want[col]));
            ASSERT_NEAR(got[r * width + col], cpu[r * width + col], tol * scale)
                << "seed " << c.seed << " row " << r << " col " << col;
            ASSERT_NEAR(got[r * width + col], want[col], tol * scale)
                << "seed " << c.seed << " row " << r << " col " << col;
          }
        }
      }
    }
  }
}

// The engine picks the GPU for large batches where one is visible, and answers alike.
TEST(BanzhafGpuTest, EngineAnswersAlikeOnEitherDevice) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = MakeRandomForest({.num_trees = 20, .max_depth = 8, .num_features = 8, .seed = 9});
  absl::StatusOr<PathLayoutPtr> layout = BuildPathLayout(*f);
  ASSERT_TRUE(layout.ok());
  BanzhafEngineOptions gpu_options, cpu_options;
  cpu_options.use_gpu = false;
  auto gpu = BanzhafEngine::Create(f, *layout, gpu_options, nullptr);
  auto cpu = BanzhafEngine::Create(f, *layout, cpu_options, nullptr);
  ASSERT_TRUE(gpu.ok() && cpu.ok());
  const int64_t n = 4096;
  const std::vector<float> rows = MakeRandomRows(*f, n, 3, 0.1);
  const int64_t width = ExplainWidth(*f, false);
  std::vector<float> a(n * width), b(n * width);
  RunInfo info;
  ASSERT_TRUE((*gpu)->Explain(MakeRowsView(rows.data(), n, 8), {},
                              MakeMatrixView(a.data(), n, width), &info).ok());
  ASSERT_TRUE((*cpu)->Explain(MakeRowsView(rows.data(), n, 8), {},
                              MakeMatrixView(b.data(), n, width), nullptr).ok());
  EXPECT_EQ(info.strategy, "banzhaf_quadrature_gpu");
  for (int64_t i = 0; i < n * width; ++i) {
    ASSERT_NEAR(a[i], b[i], 1e-5 * std::max(1.0f, std::abs(b[i]))) << i;
  }
}

}  // namespace
}  // namespace grove
