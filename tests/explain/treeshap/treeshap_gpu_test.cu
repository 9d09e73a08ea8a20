// GPU TreeSHAP (core/explain/treeshap/treeshap_gpu.h) against the CPU reference on every corpus case and on
// seeded random forests, in float and double path arithmetic (both within the corpus tolerance);
// the kernels' float results bit-identical to the CPU emulation of their arithmetic (the one the
// error bound is proved and tested on, tests/explain/treeshap/treeshap_arith_test.cc); the load-time
// float/double choice; run-to-run bitwise identity (also across chunkings), multi-output, long-path
// fallback, the device-level entry, and the engine's choice. Label gpu: every test skips cleanly
// when no CUDA device is visible.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/explain_engine.h"
#include "core/explain/paths.h"
#include "core/explain/treeshap/treeshap_arith.h"
#include "core/explain/treeshap/treeshap_gpu.h"
#include "core/gpu/device_set.h"
#include "core/model/loader.h"
#include "gtest/gtest.h"
#include "core/model/feature_groups.h"
#include "tests/testing/coalition_games.h"
#include "tests/testing/corpus.h"
#include "tests/testing/explain_reference.h"
#include "tests/testing/gpu_skip.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

constexpr double kTolerance = 1e-5;  // x max(1, |margin|)

std::vector<float> Gpu(TreeShapGpu& gpu, const Forest& f, const std::vector<float>& rows,
                       bool interactions) {
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  const int64_t width = ExplainWidth(f, interactions);
  std::vector<float> out(n * width, std::nanf(""));  // poisoned: every entry must be written
  absl::Status s = gpu.Explain(MakeRowsView(rows.data(), n, f.num_features), interactions,
                               MakeMatrixView(out.data(), n, width), nullptr);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

std::unique_ptr<TreeShapGpu> MakeGpu(const PathLayoutPtr& l, const TreeShapGpuOptions& o) {
  absl::StatusOr<std::unique_ptr<TreeShapGpu>> g = TreeShapGpu::Create(l, o);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? std::move(*g) : nullptr;
}

std::unique_ptr<TreeShapGpu> MakeGpu(const Forest& f, TreeShapPrecision precision,
                                     int64_t max_chunk_bytes = int64_t{1} << 30,
                                     int rows_per_warp = 0, bool shared = true,
                                     bool compact = true) {
  absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(f);
  EXPECT_TRUE(l.ok()) << l.status();
  TreeShapGpuOptions o;
  o.precision = precision;
  o.compact_interactions = compact;
  o.max_chunk_bytes = max_chunk_bytes;
  o.rows_per_warp = rows_per_warp;
  o.shared_accumulation = shared;
  return l.ok() ? MakeGpu(*l, o) : nullptr;
}

std::unique_ptr<TreeShapGpu> MakeGpu(const Forest& f, bool double_precision,
                                     int64_t max_chunk_bytes = int64_t{1} << 30,
                                     int rows_per_warp = 0, bool shared = true,
                                     bool compact = true) {
  return MakeGpu(f, double_precision ? TreeShapPrecision::kDouble : TreeShapPrecision::kFloat,
                 max_chunk_bytes, rows_per_warp, shared, compact);
}

TEST(TreeShapGpuTest, EveryCorpusCaseMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::string> dirs = testing::CorpusCaseDirs();
  if (dirs.empty()) GTEST_SKIP() << "no corpus found";
  ThreadPool pool(0);
  double worst[4][2] = {};  // [float, double, double top-down, table][interactions]
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    absl::StatusOr<testing::CorpusCase> c = testing::LoadCorpusCase(dir);
    ASSERT_TRUE(c.ok()) << c.status();
    absl::StatusOr<ForestPtr> f = LoadModelFile(c->model_path);
    ASSERT_TRUE(f.ok()) << f.status();
    if (!CheckExplainable(**f).ok()) continue;
    const int64_t n = c->rows;
    const std::vector<float> rows(c->X.begin(), c->X.begin() + n * c->num_features);
    const int64_t ni = std::min<int64_t>(n, 50);
    const std::vector<float> irows(rows.begin(), rows.begin() + ni * c->num_features);
    const std::vector<float> ref = ReferenceExplanation(**f, rows, false, &pool);
    const std::vector<float> iref = ReferenceExplanation(**f, irows, true, &pool);
    std::string line = c->name;
    const TreeShapPrecision forms[4] = {TreeShapPrecision::kFloat, TreeShapPrecision::kDouble,
                                        TreeShapPrecision::kDoubleTopDown,
                                        TreeShapPrecision::kTable};
    for (int i = 0; i < 4; ++i) {
      std::unique_ptr<TreeShapGpu> gpu = MakeGpu(**f, forms[i]);
      ASSERT_NE(gpu, nullptr);
      const double e = MaxMarginError(Gpu(*gpu, **f, rows, false), ref, n, (*f)->num_outputs);
      const double ei = MaxMarginError(Gpu(*gpu, **f, irows, true), iref, ni, (*f)->num_outputs);
      worst[i][0] = std::max(worst[i][0], e);
      worst[i][1] = std::max(worst[i][1], ei);
      const char* name = TreeShapPrecisionName(forms[i]);
      EXPECT_LE(e, kTolerance) << name << " shap";
      EXPECT_LE(ei, kTolerance) << name << " interactions";
      line += absl::StrCat("  ", name, ": shap ", e, " inter ", ei);
    }
    std::printf("%s\n", line.c_str());
  }
  std::printf("CORPUS WORST err/max(1,|margin|): double shap %.3g inter %.3g | float shap %.3g inter "
              "%.3g | double top-down shap %.3g inter %.3g | table shap %.3g inter %.3g\n",
              worst[1][0], worst[1][1], worst[0][0], worst[0][1], worst[2][0], worst[2][1],
              worst[3][0], worst[3][1]);
}

struct RandomCase {
  int depth, trees, outputs;
  bool vector_leaves;
  double categorical;
  bool lightgbm;
  int features;
  double leaf_probability;
  int shap_rows, interaction_rows;
  uint64_t seed;
};

class TreeShapGpuRandomTest : public ::testing::TestWithParam<RandomCase> {};

TEST_P(TreeShapGpuRandomTest, MatchesTheReference) {
  SKIP_WITHOUT_GPU();
  const RandomCase c = GetParam();
  RandomForestOptions o;
  o.max_depth = c.depth;
  o.num_trees = c.trees;
  o.num_outputs = c.outputs;
  o.vector_leaves = c.vector_leaves;
  o.categorical_fraction = c.categorical;
  o.lightgbm_rules = c.lightgbm;
  o.num_features = c.features;
  o.leaf_probability = c.leaf_probability;
  o.extreme_cover_probability = 0.05;
  o.seed = c.seed;
  ForestPtr f = MakeRandomForest(o);
  ThreadPool pool(0);
  const std::vector<float> rows = MakeRandomRows(*f, c.shap_rows, c.seed + 1, 0.15);
  const std::vector<float> irows(rows.begin(), rows.begin() + c.interaction_rows * f->num_features);
  const std::vector<float> ref = ReferenceExplanation(*f, rows, false, &pool);
  const std::vector<float> iref = ReferenceExplanation(*f, irows, true, &pool);
  for (bool dbl : {true, false}) {
    std::unique_ptr<TreeShapGpu> gpu = MakeGpu(*f, dbl);
    ASSERT_NE(gpu, nullptr);
    const std::vector<float> a = Gpu(*gpu, *f, rows, false);
    const std::vector<float> ia = Gpu(*gpu, *f, irows, true);
    const double e = MaxMarginError(a, ref, c.shap_rows, f->num_outputs);
    const double ei = MaxMarginError(ia, iref, c.interaction_rows, f->num_outputs);
    std::printf("depth %d trees %d %s: shap %.3g inter %.3g\n", c.depth, c.trees,
                dbl ? "double" : "float", e, ei);
    EXPECT_LE(e, kTolerance);
    EXPECT_LE(ei, kTolerance);
    // Run to run: bitwise identical, also with another chunking and rows per warp.
    const std::vector<float> b = Gpu(*gpu, *f, rows, false);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
    std::unique_ptr<TreeShapGpu> other = MakeGpu(*f, dbl, /*max_chunk_bytes=*/4096, 3);
    const std::vector<float> c2 = Gpu(*other, *f, rows, false);
    EXPECT_EQ(0, std::memcmp(a.data(), c2.data(), a.size() * sizeof(float)));
    const std::vector<float> ib = Gpu(*other, *f, irows, true);
    EXPECT_EQ(0, std::memcmp(ia.data(), ib.data(), ia.size() * sizeof(float)));
    // Global-only accumulation: the same integers, so the same bits.
    std::unique_ptr<TreeShapGpu> global = MakeGpu(*f, dbl, int64_t{1} << 30, 0, false);
    const std::vector<float> g1 = Gpu(*global, *f, rows, false);
    EXPECT_EQ(0, std::memcmp(a.data(), g1.data(), a.size() * sizeof(float)));
    const std::vector<float> g2 = Gpu(*global, *f, irows, true);
    EXPECT_EQ(0, std::memcmp(ia.data(), g2.data(), ia.size() * sizeof(float)));
    // Several bins per warp with global atomics, and the former default of 8 rows per warp:
    // the same bits.
    {
      absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(*f);
      ASSERT_TRUE(l.ok()) << l.status();
      TreeShapGpuOptions o;
      o.precision = dbl ? TreeShapPrecision::kDouble : TreeShapPrecision::kFloat;
      o.shared_accumulation = false;
      o.bins_per_warp = 4;
      std::unique_ptr<TreeShapGpu> many = MakeGpu(*l, o);
      ASSERT_NE(many, nullptr);
      const std::vector<float> m1 = Gpu(*many, *f, rows, false);
      EXPECT_EQ(0, std::memcmp(a.data(), m1.data(), a.size() * sizeof(float)));
      o.shared_accumulation = true;
      o.bins_per_warp = 0;
      o.rows_per_warp = 8;
      std::unique_ptr<TreeShapGpu> eight = MakeGpu(*l, o);
      ASSERT_NE(eight, nullptr);
      const std::vector<float> m2 = Gpu(*eight, *f, rows, false);
      EXPECT_EQ(0, std::memcmp(a.data(), m2.data(), a.size() * sizeof(float)));
    }
    // Dense interaction accumulators however wide the model: the same bits.
    std::unique_ptr<TreeShapGpu> dense = MakeGpu(*f, dbl, int64_t{1} << 30, 0, true, false);
    const std::vector<float> d2 = Gpu(*dense, *f, irows, true);
    EXPECT_EQ(0, std::memcmp(ia.data(), d2.data(), ia.size() * sizeof(float)));
  }
}

// A wide model whose paths touch few of its K (F+1)^2 interaction entries accumulates only those
// (TreeShapGpuOptions::compact_interactions): the reference's values, and the dense accumulators'
// bits, in every arithmetic; SHAP values unaffected.
TEST(TreeShapGpuTest, WideModelsAccumulateOnlyTheInteractionsPathsTouch) {
  SKIP_WITHOUT_GPU();
  RandomForestOptions o;
  o.num_features = 300;
  o.max_depth = 4;
  o.num_trees = 30;
  o.num_outputs = 2;
  o.categorical_fraction = 0.2;
  o.seed = 41;
  ForestPtr f = MakeRandomForest(o);
  ThreadPool pool(0);
  const std::vector<float> rows = MakeRandomRows(*f, 24, 42, 0.15);
  const std::vector<float> ref = ReferenceExplanation(*f, rows, true, &pool);
  for (TreeShapPrecision p : {TreeShapPrecision::kAuto, TreeShapPrecision::kDouble,
                              TreeShapPrecision::kFloatTopDown}) {
    std::unique_ptr<TreeShapGpu> compact = MakeGpu(*f, p);
    std::unique_ptr<TreeShapGpu> dense = MakeGpu(*f, p, int64_t{1} << 30, 0, true, false);
    ASSERT_NE(compact, nullptr);
    ASSERT_NE(dense, nullptr);
    EXPECT_NE(compact->Describe().find("interactions compact"), std::string::npos)
        << compact->Describe();
    EXPECT_EQ(dense->Describe().find("interactions compact"), std::string::npos);
    const std::vector<float> a = Gpu(*compact, *f, rows, true);
    const std::vector<float> b = Gpu(*dense, *f, rows, true);
    EXPECT_LE(MaxMarginError(a, ref, 24, f->num_outputs), kTolerance) << TreeShapPrecisionName(p);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
        << TreeShapPrecisionName(p);
    // Another chunking (several chunks of the compact accumulator).
    std::unique_ptr<TreeShapGpu> chunked = MakeGpu(*f, p, /*max_chunk_bytes=*/1 << 20);
    const std::vector<float> c = Gpu(*chunked, *f, rows, true);
    EXPECT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * sizeof(float)))
        << TreeShapPrecisionName(p);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Forests, TreeShapGpuRandomTest,
    ::testing::Values(
        // depth trees outputs vector categorical lightgbm features leaf_p shap int seed
        RandomCase{1, 1, 1, false, 0.0, false, 10, 0.2, 100, 10, 1},
        RandomCase{2, 10, 1, false, 0.3, false, 10, 0.2, 500, 20, 2},
        RandomCase{3, 1000, 1, false, 0.2, true, 20, 0.2, 300, 10, 3},
        RandomCase{6, 100, 4, false, 0.3, true, 12, 0.2, 300, 20, 4},
        RandomCase{6, 30, 3, true, 0.2, false, 12, 0.2, 200, 20, 5},
        RandomCase{8, 200, 1, false, 0.0, false, 30, 0.2, 1000, 10, 6},
        RandomCase{12, 20, 2, false, 0.3, true, 40, 0.3, 200, 10, 7},
        RandomCase{16, 10, 1, false, 0.2, false, 50, 0.4, 200, 5, 8},
        RandomCase{20, 5, 1, false, 0.2, true, 60, 0.45, 100, 5, 9},
        // Deep forests: paths of 16-31 elements, many per bin. Sized so that the CPU reference
        // (interactions are cubic in the path length) takes seconds: 40 trees of depth 24 took 29 s
        // and 20 of depth 30 with leaf probability 0.1 did not finish in 3 minutes on the H100 host.
        RandomCase{24, 10, 1, false, 0.1, false, 80, 0.3, 200, 4, 11},
        RandomCase{28, 4, 2, false, 0.0, true, 120, 0.3, 100, 3, 12},
        // Long paths (> 31 features on one path): CPU fallback added to the GPU result.
        RandomCase{45, 2, 1, false, 0.0, false, 200, 0.6, 50, 3, 10}));

// What the kernels must produce, computed on the CPU: each lane's unwound sum by
// treeshap_arith::EmulatePath in T, its contribution rounded to fixed point exactly as the kernel
// does, the integer sums converted as FinishKernel converts them. SHAP values, binned paths only.
template <typename T, typename Unwind = treeshap_arith::Unwinder<T>>
std::vector<float> EmulatedGpuShap(const PathLayout& l, const std::vector<float>& rows) {
  const std::vector<double> wd = treeshap_arith::ShapleyWeightTable();
  const std::vector<T> weights(wd.begin(), wd.end());
  const std::vector<double> scale = FixedPointScales(l, false);
  const int64_t f1 = l.num_features + 1;
  const int64_t n = static_cast<int64_t>(rows.size()) / l.num_features;
  std::vector<float> out(n * l.num_outputs * f1);
  for (int64_t r = 0; r < n; ++r) {
    const float* row = rows.data() + r * l.num_features;
    std::vector<long long> acc(l.num_outputs * f1, 0);
    treeshap_arith::EmulateRowContributions<T, Unwind>(
        l, row, weights.data(), [&](const PathInfo& p, int feature, double c) {
          for (int w = 0; w < p.width; ++w) {
            const double vs = l.values[p.value_begin + w] * scale[p.group + w];
            acc[(p.group + w) * f1 + feature] += std::llrint(c * vs);
          }
        });
    for (int k = 0; k < l.num_outputs; ++k) {
      for (int64_t c = 0; c < f1; ++c) {
        double v = static_cast<double>(acc[k * f1 + c]) / scale[k];
        if (c == l.num_features) v += l.bias[k];
        out[(r * l.num_outputs + k) * f1 + c] = static_cast<float>(v);
      }
    }
  }
  return out;
}

TEST(TreeShapGpuTest, KernelsComputeExactlyTheEmulatedArithmetic) {
  SKIP_WITHOUT_GPU();
  RandomForestOptions o;
  o.num_trees = 40;
  o.max_depth = 14;
  o.num_outputs = 2;
  o.num_features = 30;
  o.categorical_fraction = 0.2;
  o.extreme_cover_probability = 0.05;
  o.seed = 31;
  ForestPtr f = MakeRandomForest(o);
  absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(*f);
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_TRUE((*l)->long_paths.empty());
  const std::vector<float> rows = MakeRandomRows(*f, 300, 32);
  using treeshap_arith::TopDownUnwinder;
  for (TreeShapPrecision p : {TreeShapPrecision::kFloat, TreeShapPrecision::kDouble,
                              TreeShapPrecision::kFloatTopDown, TreeShapPrecision::kDoubleTopDown}) {
    std::unique_ptr<TreeShapGpu> gpu = MakeGpu(*f, p);
    ASSERT_NE(gpu, nullptr);
    const std::vector<float> got = Gpu(*gpu, *f, rows, false);
    std::vector<float> want;
    switch (p) {
      case TreeShapPrecision::kFloat: want = EmulatedGpuShap<float>(**l, rows); break;
      case TreeShapPrecision::kDouble: want = EmulatedGpuShap<double>(**l, rows); break;
      case TreeShapPrecision::kFloatTopDown:
        want = EmulatedGpuShap<float, TopDownUnwinder<float>>(**l, rows);
        break;
      default: want = EmulatedGpuShap<double, TopDownUnwinder<double>>(**l, rows); break;
    }
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
        << TreeShapPrecisionName(p);
  }
}

TEST(TreeShapGpuTest, AutoPrecisionFollowsTheErrorBound) {
  SKIP_WITHOUT_GPU();
  testing::HandForest h(2);
  h.AddTree({h.Split(0, 0.5f, 1, 2, 10), h.Leaf(0.01, 6), h.Leaf(-0.02, 4)});
  h.AddTree({h.Split(1, 0.25f, 1, 2, 10), h.Leaf(0.03, 3), h.Leaf(0.01, 7)});
  ForestPtr small = h.Build();
  ForestPtr deep =
      MakeRandomForest({.num_trees = 200, .max_depth = 16, .num_features = 30, .seed = 5});
  ThreadPool pool(0);
  for (const ForestPtr& f : {small, deep}) {
    absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(*f);
    ASSERT_TRUE(l.ok()) << l.status();
    TreeShapGpuOptions options;  // kAuto
    absl::StatusOr<std::unique_ptr<TreeShapGpu>> gpu = TreeShapGpu::Create(*l, options);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    const treeshap_arith::ShapTable table = treeshap_arith::BuildShapTable(
        **l, options.table_max_elements, TreeShapTableBytes(**l, options));
    const treeshap_arith::PrecisionChoice want = treeshap_arith::ChoosePrecision(
        **l, TreeShapPrecision::kAuto, options.float_bound_limit, &table);
    EXPECT_EQ((*gpu)->UsesTable(false), want.table);
    EXPECT_FALSE((*gpu)->UsesTable(true));
    for (bool inter : {false, true}) {
      EXPECT_EQ((*gpu)->UsesFloat(inter), want.use_float[inter ? 1 : 0]) << (*gpu)->Describe();
      EXPECT_EQ((*gpu)->UsesTopDown(inter), want.top_down[inter ? 1 : 0]) << (*gpu)->Describe();
    }
    std::printf("%s\n", (*gpu)->Describe().c_str());
    const std::vector<float> rows = MakeRandomRows(*f, 200, 6);
    const std::vector<float> ref = ReferenceExplanation(*f, rows, false, &pool);
    EXPECT_LE(MaxMarginError(Gpu(**gpu, *f, rows, false), ref, 200, f->num_outputs), kTolerance);
  }
  // The small model is provably safe in float, the deep one is not.
  absl::StatusOr<PathLayoutPtr> ls = BuildPathLayout(*small);
  absl::StatusOr<PathLayoutPtr> ld = BuildPathLayout(*deep);
  EXPECT_TRUE(treeshap_arith::ChoosePrecision(**ls, TreeShapPrecision::kAuto, 5e-6).use_float[0]);
  EXPECT_FALSE(treeshap_arith::ChoosePrecision(**ld, TreeShapPrecision::kAuto, 5e-6).use_float[0]);
}

// The table kernel (treeshap_arith::ShapTable) on forests of depth 2-6, features and groups:
// within the tolerance of the CPU reference; with every bin in the table, bit-identical to the
// double composite kernel (its factors are that arithmetic's values); with a size cap that leaves
// bins to the arithmetic (float top-down, double), the two launches together within the
// tolerance; run to run, across chunkings and with global accumulation, the same bits.
TEST(TreeShapGpuTest, TableKernelMatchesTheReferenceAndTheDoubleArithmetic) {
  SKIP_WITHOUT_GPU();
  ThreadPool pool(0);
  for (int depth = 2; depth <= 6; ++depth) {
    for (bool grouped : {false, true}) {
      SCOPED_TRACE(absl::StrCat("depth ", depth, grouped ? " grouped" : ""));
      RandomForestOptions ro;
      ro.max_depth = depth;
      ro.num_trees = depth <= 4 ? 600 : 150;
      ro.num_outputs = depth == 5 ? 3 : 1;
      ro.vector_leaves = depth == 3;
      ro.num_outputs = depth == 3 ? 2 : ro.num_outputs;
      ro.num_features = 24;
      ro.categorical_fraction = 0.2;
      ro.lightgbm_rules = depth % 2 == 0;
      ro.extreme_cover_probability = 0.05;
      ro.seed = 500 + depth;
      ForestPtr f = MakeRandomForest(ro);
      FeatureGroupsPtr groups = testing::RandomFeatureGroups(f->num_features, ro.seed);
      PathLayoutOptions lo;
      if (grouped) lo.groups = groups.get();
      absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(*f, lo);
      ASSERT_TRUE(l.ok()) << l.status();
      const int64_t n = 400;
      const std::vector<float> rows = MakeRandomRows(*f, n, ro.seed + 1, 0.15);
      ExplainOptions eo;
      eo.groups = grouped ? groups.get() : nullptr;
      const int64_t width = ExplainWidth(*f, false, eo.groups);
      std::vector<float> ref(n * width);
      ASSERT_TRUE(ExplainCpuReference(*f, MakeRowsView(rows.data(), n, f->num_features), eo,
                                      MakeMatrixView(ref.data(), n, width), &pool)
                      .ok());
      auto run = [&](TreeShapPrecision p, int64_t table_bytes, int64_t chunk, bool shared) {
        TreeShapGpuOptions o;
        o.precision = p;
        o.table_max_bytes = table_bytes;
        o.max_chunk_bytes = chunk;
        o.shared_accumulation = shared;
        std::unique_ptr<TreeShapGpu> g = MakeGpu(*l, o);
        std::vector<float> out(n * width, std::nanf(""));
        if (g == nullptr) return out;
        EXPECT_EQ(g->UsesTable(false), p == TreeShapPrecision::kTable && table_bytes > 0)
            << g->Describe();
        absl::Status s = g->Explain(MakeRowsView(rows.data(), n, f->num_features), false,
                                       MakeMatrixView(out.data(), n, width), nullptr);
        EXPECT_TRUE(s.ok()) << s;
        return out;
      };
      const int64_t big = int64_t{1} << 30;
      const std::vector<float> table = run(TreeShapPrecision::kTable, big, big, true);
      const std::vector<float> dbl = run(TreeShapPrecision::kDouble, big, big, true);
      const double e = MaxMarginError(table, ref, n, f->num_outputs);
      std::printf("depth %d%s: table shap %.3g\n", depth, grouped ? " grouped" : "", e);
      EXPECT_LE(e, kTolerance);
      EXPECT_EQ(0, std::memcmp(table.data(), dbl.data(), table.size() * sizeof(float)));
      const std::vector<float> again = run(TreeShapPrecision::kTable, big, 4096, false);
      EXPECT_EQ(0, std::memcmp(table.data(), again.data(), table.size() * sizeof(float)));
      // A quarter of the table: the rest of the bins by auto's arithmetic.
      const treeshap_arith::ShapTable full = treeshap_arith::BuildShapTable(
          **l, treeshap_arith::kTableMaxElements, big);
      ASSERT_TRUE(full.other_bins.empty());
      const std::vector<float> part = run(TreeShapPrecision::kTable, full.Bytes() / 4 + 8, big, true);
      EXPECT_LE(MaxMarginError(part, ref, n, f->num_outputs), kTolerance);
      const std::vector<float> part2 = run(TreeShapPrecision::kTable, full.Bytes() / 4 + 8, 4096, false);
      EXPECT_EQ(0, std::memcmp(part.data(), part2.data(), part.size() * sizeof(float)));
    }
  }
}

TEST(TreeShapGpuTest, DeviceEntryMatchesHostEntry) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = MakeRandomForest({.num_trees = 50, .max_depth = 7, .num_outputs = 2, .seed = 77});
  std::unique_ptr<TreeShapGpu> gpu = MakeGpu(*f, true);
  const int64_t n = 333;
  const std::vector<float> rows = MakeRandomRows(*f, n, 3);
  for (bool inter : {false, true}) {
    const std::vector<float> host = Gpu(*gpu, *f, rows, inter);
    const int64_t width = ExplainWidth(*f, inter);
    float* d_rows = nullptr;
    float* d_out = nullptr;
    // Buffers and stream must belong to the device explained on (creating the engine left another
    // device current on a multi-GPU machine).
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_rows, rows.size() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_out, n * width * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_rows, rows.data(), rows.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
    ASSERT_TRUE(gpu->ExplainOnDevice(0, d_rows, n, inter, d_out, s).ok());
    std::vector<float> dev(n * width);
    ASSERT_EQ(cudaMemcpy(dev.data(), d_out, dev.size() * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(0, std::memcmp(host.data(), dev.data(), dev.size() * sizeof(float)));
    cudaStreamDestroy(s);
    cudaFree(d_rows);
    cudaFree(d_out);
  }
  EXPECT_GT(gpu->DeviceBytes(), 0);
  EXPECT_NE(gpu->Describe().find("cuda:0"), std::string::npos);
}

TEST(TreeShapGpuTest, EngineChoosesAndReports) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = MakeRandomForest({.num_trees = 200, .max_depth = 8, .seed = 99});
  ThreadPool pool(0);
  const std::vector<float> rows = MakeRandomRows(*f, 5000, 3);
  const std::vector<float> ref = ReferenceExplanation(*f, rows, false, &pool);
  const int64_t width = ExplainWidth(*f, false);
  for (const std::string& name : {"auto", "treeshap_gpu"}) {
    ExplainEngineOptions eo;
    eo.strategy = name;
    absl::StatusOr<std::unique_ptr<ExplainEngine>> e = ExplainEngine::Create(f, eo, &pool);
    ASSERT_TRUE(e.ok()) << e.status();
    std::vector<float> out(rows.size() / f->num_features * width);
    RunInfo info;
    ASSERT_TRUE((*e)->Explain(MakeRowsView(rows.data(), 5000, f->num_features), {},
                              MakeMatrixView(out.data(), 5000, width), &info)
                    .ok());
    std::printf("%s: device %s strategy %s reason %s\n  %s\n", name.c_str(), info.device.c_str(),
                info.strategy.c_str(), info.reason.c_str(), (*e)->Describe().c_str());
    EXPECT_LE(MaxMarginError(out, ref, 5000, 1), kTolerance);
    if (name == "treeshap_gpu") EXPECT_EQ(info.device.rfind("cuda:", 0), 0u);
    EXPECT_GT((*e)->DeviceBytes(), 0);
    // Iteration ranges go to a CPU strategy under auto.
    if (name == "auto") {
      ExplainOptions range;
      range.iteration_begin = 10;
      range.iteration_end = 20;
      ASSERT_TRUE((*e)->Explain(MakeRowsView(rows.data(), 10, f->num_features), range,
                                MakeMatrixView(out.data(), 10, width), &info)
                      .ok());
      // A CPU strategy, or quadrature_gpu, which serves iteration ranges on the device.
      EXPECT_TRUE(info.device == "cpu" || info.strategy == "quadrature_gpu")
          << info.device << " " << info.strategy;
    }
  }
}

}  // namespace
}  // namespace grove
