// Quadrature SHAP on the GPU (label gpu; every test skips cleanly without a device): both
// precisions against the double CPU reference on seeded random forests up to depth 30 with extreme
// covers and on the library corpus, run-to-run identity, iteration ranges, the strategy's
// calibration. The float / double errors are printed: they are the measurement that picks the
// default precision (docs/quadrature.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/explain_engine.h"
#include "core/explain/paths.h"
#include "core/explain/quadrature/quadrature.h"
#include "core/gpu/device_set.h"
#include "core/model/loader.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"
#include "tests/testing/explain_reference.h"
#include "tests/testing/gpu_skip.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

constexpr double kTolerance = 1e-5;

QuadratureModelPtr Build(ForestPtr f) {
  absl::StatusOr<PathLayoutPtr> layout = BuildPathLayout(*f);
  EXPECT_TRUE(layout.ok()) << layout.status();
  if (!layout.ok()) return nullptr;
  absl::StatusOr<QuadratureModelPtr> model = BuildQuadratureModel(f, *layout);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

std::vector<double> Margins(const Forest& f, const std::vector<float>& shap, int64_t rows) {
  const int64_t f1 = f.num_features + 1;
  std::vector<double> m(rows * f.num_outputs, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int k = 0; k < f.num_outputs; ++k) {
      for (int64_t c = 0; c < f1; ++c) {
        m[r * f.num_outputs + k] += shap[r * f.num_outputs * f1 + k * f1 + c];
      }
    }
  }
  return m;
}

double MaxError(const Forest& f, const std::vector<float>& got, const std::vector<float>& want,
                const std::vector<double>& margins, int64_t rows, bool interactions) {
  const int64_t width = ExplainWidth(f, interactions);
  const int64_t block = width / f.num_outputs;
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < width; ++c) {
      const double g = got[r * width + c];
      const double scale = std::max(1.0, std::abs(margins[r * f.num_outputs + c / block]));
      worst = std::max(worst, std::isfinite(g) ? std::abs(g - want[r * width + c]) / scale
                                               : INFINITY);
    }
  }
  return worst;
}

struct Errors {
  double shap[2] = {0, 0};  // [float, double]
  double inter[2] = {0, 0};
  std::string chosen;       // precision the strategy chose at load
  double chosen_error = 0;  // its error (SHAP and interactions)
};

// Runs both precisions on `rows` rows (interactions on the first `irows`), checks run-to-run
// identity, returns the errors.
Errors Check(ForestPtr f, const std::vector<float>& x, int64_t rows, int64_t irows,
             ThreadPool* pool, const ExplainOptions& base = {}) {
  Errors e;
  QuadratureModelPtr model = Build(f);
  if (model == nullptr) return e;
  ExplainOptions so = base, io = base;
  so.interactions = false;
  io.interactions = true;
  const std::vector<float> ref = ReferenceExplanation(*f, x, so, pool, rows);
  const std::vector<double> margins = Margins(*f, ref, rows);
  const std::vector<float> iref = ReferenceExplanation(*f, x, io, pool, irows);
  for (QuadraturePrecision p : {QuadraturePrecision::kFloat, QuadraturePrecision::kDouble}) {
    const int pi = p == QuadraturePrecision::kDouble ? 1 : 0;
    absl::StatusOr<std::unique_ptr<QuadratureGpuExplainer>> gpu =
        QuadratureGpuExplainer::Create(model, 0, p);
    EXPECT_TRUE(gpu.ok()) << gpu.status();
    if (!gpu.ok()) return e;
    for (bool interactions : {false, true}) {
      const int64_t n = interactions ? irows : rows;
      const int64_t width = ExplainWidth(*f, interactions);
      std::vector<float> out(n * width, -777.0f), again(n * width, 123.0f);
      const ExplainOptions& o = interactions ? io : so;
      absl::Status s = (*gpu)->Explain(MakeRowsView(x.data(), n, f->num_features), o,
                                       MakeMatrixView(out.data(), n, width));
      EXPECT_TRUE(s.ok()) << s;
      absl::Status s2 = (*gpu)->Explain(MakeRowsView(x.data(), n, f->num_features), o,
                                        MakeMatrixView(again.data(), n, width));
      EXPECT_TRUE(s2.ok()) << s2;
      EXPECT_EQ(0, std::memcmp(out.data(), again.data(), out.size() * sizeof(float)))
          << "not bit-identical run to run";
      const double err = MaxError(*f, out, interactions ? iref : ref, margins, n, interactions);
      (interactions ? e.inter : e.shap)[pi] = err;
    }
  }
  // The strategy as the engine makes it: precision chosen by measurement at load.
  QuadratureStrategyOptions strategy_options;
  strategy_options.calibrate = false;
  absl::StatusOr<std::unique_ptr<QuadratureStrategy>> strategy =
      MakeQuadratureGpuStrategy(model, strategy_options);
  EXPECT_TRUE(strategy.ok()) << strategy.status();
  if (!strategy.ok()) return e;
  e.chosen = (*strategy)->Precision();
  const int ci = e.chosen == "float" ? 0 : 1;
  e.chosen_error = std::max(e.shap[ci], e.inter[ci]);
  return e;
}

TEST(QuadratureGpuTest, RandomForestsBothPrecisions) {
  SKIP_WITHOUT_GPU();
  ThreadPool pool(4);
  struct Case {
    const char* name;
    RandomForestOptions o;
  };
  std::vector<Case> cases;
  uint64_t seed = 500;
  for (int depth : {1, 3, 6, 10, 16, 20, 30}) {
    Case c{"extreme"};
    c.o.max_depth = depth;
    c.o.num_trees = depth >= 16 ? 8 : 30;
    c.o.num_features = depth >= 16 ? 40 : 12;
    c.o.leaf_probability = depth >= 16 ? 0.38 : 0.2;
    c.o.extreme_cover_probability = 0.3;
    c.o.categorical_fraction = 0.2;
    c.o.seed = ++seed;
    cases.push_back(c);
  }
  Case lgb{"lightgbm_multiclass"};
  lgb.o.max_depth = 9;
  lgb.o.num_outputs = 3;
  lgb.o.num_trees = 30;
  lgb.o.lightgbm_rules = true;
  lgb.o.categorical_fraction = 0.3;
  lgb.o.seed = 17;
  cases.push_back(lgb);
  Case vec{"vector_leaves"};
  vec.o.max_depth = 8;
  vec.o.num_outputs = 4;
  vec.o.vector_leaves = true;
  vec.o.num_trees = 10;
  vec.o.extreme_cover_probability = 0.2;
  vec.o.seed = 19;
  cases.push_back(vec);
  Case many{"many_trees"};
  many.o.max_depth = 6;
  many.o.num_trees = 1000;
  many.o.num_features = 30;
  many.o.seed = 23;
  cases.push_back(many);
  double worst_float = 0, worst_double = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrFormat("%s depth %d", c.name, c.o.max_depth));
    ForestPtr f = MakeRandomForest(c.o);
    const int64_t rows = 300;  // more than two row tiles
    const std::vector<float> x = MakeRandomRows(*f, rows, c.o.seed * 3, 0.1);
    const Errors e = Check(f, x, rows, c.o.max_depth >= 16 ? 3 : 12, &pool);
    std::printf("  %-20s depth %2d  SHAP err float %.2e double %.2e   interactions err float "
                "%.2e double %.2e   chosen %s\n",
                c.name, c.o.max_depth, e.shap[0], e.shap[1], e.inter[0], e.inter[1],
                e.chosen.c_str());
    EXPECT_LE(e.shap[1], kTolerance);
    EXPECT_LE(e.inter[1], kTolerance);
    EXPECT_LE(e.chosen_error, kTolerance) << "the precision chosen at load misses the tolerance";
    worst_float = std::max({worst_float, e.shap[0], e.inter[0]});
    worst_double = std::max({worst_double, e.shap[1], e.inter[1]});
  }
  std::printf("  worst: float %.2e, double %.2e (tolerance %.0e)\n", worst_float, worst_double,
              kTolerance);
}

TEST(QuadratureGpuTest, CorpusBothPrecisions) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::string> dirs = testing::CorpusCaseDirs();
  if (dirs.empty()) GTEST_SKIP() << "no corpus found";
  ThreadPool pool(4);
  double worst_float = 0, worst_double = 0;
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    absl::StatusOr<testing::CorpusModel> m = testing::LoadCorpusModel(dir);
    ASSERT_TRUE(m.ok()) << m.status();
    const testing::CorpusCase& c = m->c;
    const ForestPtr& f = m->forest;
    if (!CheckExplainable(*f).ok()) continue;
    const Errors e = Check(f, c.X, c.rows, std::min<int64_t>(c.rows, 20), &pool);
    std::printf("  %-32s SHAP err float %.2e double %.2e   interactions err float %.2e double "
                "%.2e   chosen %s\n",
                c.name.c_str(), e.shap[0], e.shap[1], e.inter[0], e.inter[1], e.chosen.c_str());
    EXPECT_LE(e.shap[1], kTolerance);
    EXPECT_LE(e.inter[1], kTolerance);
    EXPECT_LE(e.chosen_error, kTolerance) << "the precision chosen at load misses the tolerance";
    worst_float = std::max({worst_float, e.shap[0], e.inter[0]});
    worst_double = std::max({worst_double, e.shap[1], e.inter[1]});
  }
  std::printf("  corpus worst: float %.2e, double %.2e\n", worst_float, worst_double);
}

TEST(QuadratureGpuTest, IterationRange) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = MakeRandomForest({.num_trees = 40, .max_depth = 7, .num_outputs = 2, .seed = 31});
  const std::vector<float> x = MakeRandomRows(*f, 100, 2);
  ExplainOptions range;
  range.iteration_begin = 4;
  range.iteration_end = 13;
  ThreadPool pool(4);
  const Errors e = Check(f, x, 100, 10, &pool, range);
  EXPECT_LE(e.shap[1], kTolerance);
  EXPECT_LE(e.inter[1], kTolerance);
}

// The engine's quadrature_gpu splits large batches across every visible GPU; the answer must be
// bit-identical to one GPU's (on a one-GPU machine this checks the engine adapter end to end).
TEST(QuadratureGpuTest, EveryGpuAnswersExactlyAsOneGpu) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = MakeRandomForest({.num_trees = 60, .max_depth = 8, .seed = 43});
  QuadratureModelPtr model = Build(f);
  ASSERT_NE(model, nullptr);
  absl::StatusOr<std::unique_ptr<QuadratureStrategy>> one = MakeQuadratureGpuStrategy(model);
  ASSERT_TRUE(one.ok()) << one.status();
  ThreadPool pool(2);
  ExplainEngineOptions eo;
  eo.strategy = "quadrature_gpu";
  absl::StatusOr<std::unique_ptr<ExplainEngine>> engine = ExplainEngine::Create(f, eo, &pool);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::printf("  %s (%d visible GPUs)\n", (*engine)->Describe().c_str(),
              gpu::VisibleGpuCount());
  const int64_t rows = 5000;
  const std::vector<float> x = MakeRandomRows(*f, rows, 17);
  for (bool interactions : {false, true}) {
    const int64_t n = interactions ? 1200 : rows;  // > 1024 rows per device on two GPUs
    ExplainOptions eopt;
    eopt.interactions = interactions;
    const int64_t width = ExplainWidth(*f, interactions);
    std::vector<float> a(n * width), b(n * width);
    ASSERT_TRUE((*one)->Run(MakeRowsView(x.data(), n, f->num_features), eopt,
                            MakeMatrixView(a.data(), n, width), nullptr)
                    .ok());
    RunInfo info;
    ASSERT_TRUE((*engine)->Explain(MakeRowsView(x.data(), n, f->num_features), eopt,
                                   MakeMatrixView(b.data(), n, width), &info)
                    .ok());
    EXPECT_EQ(info.strategy, "quadrature_gpu");
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
        << "engine on " << info.device << " differs from one GPU, interactions=" << interactions;
  }
}

TEST(QuadratureGpuTest, StrategyCalibratesAndRuns) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = MakeRandomForest({.num_trees = 100, .max_depth = 8, .seed = 41});
  QuadratureModelPtr model = Build(f);
  ASSERT_NE(model, nullptr);
  absl::StatusOr<std::unique_ptr<QuadratureStrategy>> s = MakeQuadratureGpuStrategy(model);
  ASSERT_TRUE(s.ok()) << s.status();
  std::printf("  %s\n", (*s)->Describe().c_str());
  ExplainOptions shap;
  EXPECT_GT((*s)->EstimateSeconds(100000, shap), (*s)->EstimateSeconds(10, shap));
  const int64_t rows = 50;
  const std::vector<float> x = MakeRandomRows(*f, rows, 9);
  std::vector<float> out(rows * ExplainWidth(*f, false));
  RunInfo info;
  ASSERT_TRUE((*s)->Run(MakeRowsView(x.data(), rows, f->num_features), shap,
                        MakeMatrixView(out.data(), rows, ExplainWidth(*f, false)), &info)
                  .ok());
  EXPECT_EQ(info.strategy, "quadrature_gpu");
  EXPECT_EQ(info.device.rfind("cuda:0", 0), 0u) << info.device;  // "cuda:0" or "cuda:0+1+..."
  // Paths longer than 32 features: the GPU strategy declines cleanly.
  RandomForestOptions deep;
  deep.max_depth = 40;
  deep.num_trees = 1;
  deep.num_features = 60;
  deep.leaf_probability = 0.45;
  deep.seed = 43;
  ForestPtr fd = MakeRandomForest(deep);
  QuadratureModelPtr md = Build(fd);
  ASSERT_NE(md, nullptr);
  if (md->max_unique > 32) {
    EXPECT_EQ(QuadratureGpuModel::Upload(md, 0).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

}  // namespace
}  // namespace grove
