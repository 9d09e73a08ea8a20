// The bitmask form of interventional SHAP (core/explain/interventional/interventional_paths.h) -- the GPU kernel's
// arithmetic, run on the CPU -- against the CPU reference, and the background preprocessing.
#include "core/explain/interventional/interventional_paths.h"

#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"
#include "tests/testing/interventional_reference.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

using testing::BuildLinearized;
using testing::ExpectNearReference;
using testing::InterventionalReference;
using testing::WithLink;

using Layouts = testing::InterventionalLayouts;

Layouts Build(const Forest& f, const std::vector<float>& bg, ThreadPool* pool) {
  return testing::BuildInterventionalLayouts(f, bg, pool);
}

std::vector<float> Paths(const Forest& f, const Layouts& l, const std::vector<float>& rows,
                         const InterventionalOptions& o = {},
                         const LinearizedLayout* linearized = nullptr) {
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  const int64_t width = ExplainWidth(f, false);
  std::vector<float> out(n * width);
  absl::Status s = ExplainInterventionalPathsCpu(f, *l.layout, *l.il,
                                                 MakeRowsView(rows.data(), n, f.num_features), o,
                                                 MakeMatrixView(out.data(), n, width), nullptr,
                                                 linearized);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(InterventionalPathsTest, WeightsAndMaskCoefficients) {
  const std::vector<double> w = Build(*MakeDepth2Tree(), {0, 0}, nullptr).il->weights;
  constexpr int kSide = kInterventionalWeightSide;
  EXPECT_DOUBLE_EQ(w[1 * kSide + 0], 1.0);
  EXPECT_DOUBLE_EQ(w[1 * kSide + 1], 0.5);
  EXPECT_DOUBLE_EQ(w[2 * kSide + 1], 1.0 / 6);
  EXPECT_DOUBLE_EQ(w[0 * kSide + 3], 0.0);
  // Path root + 3 elements: x matches {root, 1, 2}, z matches {root, 2, 3}: S_x = {1}, S_z = {3}.
  const uint32_t full = FullMask(4), x = 0b0111, z = 0b1101;
  EXPECT_DOUBLE_EQ(MaskCoefficient(x, z, full, 1u << 1, w.data()), 0.5);
  EXPECT_DOUBLE_EQ(MaskCoefficient(x, z, full, 1u << 3, w.data()), -0.5);
  EXPECT_DOUBLE_EQ(MaskCoefficient(x, z, full, 1u << 2, w.data()), 0.0);  // both: free
  EXPECT_DOUBLE_EQ(MaskCoefficient(0b0011, 0b0101, full, 1u << 1, w.data()), 0.0);  // unreachable
  EXPECT_EQ(FullMask(32), 0xffffffffu);
}

TEST(InterventionalPathsTest, BackgroundMasksAreGroupedWithCounts) {
  ForestPtr f = MakeDepth2Tree();
  // Rows (0,0), (0,0), (1,1), (0,1): the path to leaf 3 (x0 < 0.5, x1 < 0.5) sees masks
  // 0b111 twice, 0b001 once and 0b011 once.
  const Layouts l = Build(*f, {0, 0, 0, 0, 1, 1, 0, 1}, nullptr);
  ASSERT_EQ(l.il->mask_begin.size(), l.layout->paths.size() + 1);
  for (size_t p = 0; p < l.layout->paths.size(); ++p) {
    uint32_t total = 0;
    for (uint32_t m = l.il->mask_begin[p]; m < l.il->mask_begin[p + 1]; ++m) {
      total += l.il->counts[m];
      if (m > l.il->mask_begin[p]) EXPECT_LT(l.il->masks[m - 1], l.il->masks[m]);
      EXPECT_TRUE(l.il->masks[m] & 1u) << "the root element matches every row";
    }
    EXPECT_EQ(total, 4u) << "path " << p;
  }
  EXPECT_EQ(l.il->background_rows, 4);
  // Tree means: leaves 1, 1, 5, 2.
  EXPECT_DOUBLE_EQ(l.il->tree_means[0], 9.0 / 4);
}

TEST(InterventionalPathsTest, RandomForestsMatchTheReference) {
  ThreadPool pool(2);
  for (const RandomForestOptions& o : testing::InterventionalForestOptions()) {
    ForestPtr f = MakeRandomForest(o);
    const std::vector<float> rows = MakeRandomRows(*f, 12, o.seed + 10);
    const std::vector<float> bg = MakeRandomRows(*f, 40, o.seed + 20);
    const Layouts l = Build(*f, bg, &pool);
    for (int begin : {0, 1}) {
      InterventionalOptions io;
      io.iteration_begin = begin;
      io.iteration_end = begin == 0 ? 0 : 3;
      ExpectNearReference(Paths(*f, l, rows, io), InterventionalReference(*f, rows, bg, io), 1e-6,
                          absl::StrCat("seed ", o.seed, " begin ", begin));
    }
  }
}

TEST(InterventionalPathsTest, CorpusMatchesTheReference) {
  if (testing::CorpusCaseDirs().empty()) GTEST_SKIP() << "no corpus found";
  ThreadPool pool(2);
  for (const auto& k : testing::InterventionalCorpus(25, 5)) {
    const Layouts l = Build(*k.forest, k.background, &pool);
    if (!l.layout->long_paths.empty()) continue;
    ExpectNearReference(Paths(*k.forest, l, k.rows),
                        InterventionalReference(*k.forest, k.rows, k.background), 1e-6, k.c.name);
  }
}

TEST(InterventionalPathsTest, LinearizedLayoutKeepsEachMasksRows) {
  ForestPtr f = MakeDepth2Tree();
  // As above: the path to leaf 3 sees 0b001 (row 2), 0b011 (row 3), 0b111 (rows 0 and 1).
  const std::vector<float> bg = {0, 0, 0, 0, 1, 1, 0, 1};
  const Layouts l = Build(*f, bg, nullptr);
  const LinearizedLayoutPtr ll = BuildLinearized(*f, l, bg);
  ASSERT_NE(ll, nullptr);
  ASSERT_EQ(ll->mask_rows.size(), l.layout->paths.size() * 4);
  for (size_t p = 0; p < l.layout->paths.size(); ++p) {
    const PathInfo& info = l.layout->paths[p];
    const uint16_t* rows = ll->mask_rows.data() + p * 4;
    for (uint32_t m = l.il->mask_begin[p]; m < l.il->mask_begin[p + 1]; ++m) {
      for (uint32_t i = 0; i < l.il->counts[m]; ++i, ++rows) {
        EXPECT_EQ(RowPathMask(l.layout->elements.data() + info.element_begin, info.length,
                              l.layout->category_bits.data(), bg.data() + 2 * *rows),
                  l.il->masks[m])
            << "path " << p << " mask " << m;
      }
    }
  }
  EXPECT_EQ(ll->background, bg);
}

TEST(InterventionalPathsTest, LinearizedMatchesTheReference) {
  ThreadPool pool(2);
  InterventionalOptions io;
  io.output_space = OutputSpace::kProbabilityLinearized;
  for (const RandomForestOptions& o : testing::InterventionalForestOptions()) {
    for (Link link : testing::ProbabilityLinks(o, io.output_space)) {
      ForestPtr f = WithLink(*MakeRandomForest(o), link);
      const std::vector<float> rows = MakeRandomRows(*f, 8, o.seed + 10);
      const std::vector<float> bg = MakeRandomRows(*f, 30, o.seed + 20);
      const Layouts l = Build(*f, bg, &pool);
      const LinearizedLayoutPtr ll = BuildLinearized(*f, l, bg);
      for (int begin : {0, 1}) {
        io.iteration_begin = begin;
        io.iteration_end = begin == 0 ? 0 : 3;
        ExpectNearReference(Paths(*f, l, rows, io, ll.get()),
                            InterventionalReference(*f, rows, bg, io), 1e-6,
                            absl::StrCat("seed ", o.seed, " link ", static_cast<int>(link),
                                         " begin ", begin));
      }
    }
  }
  if (testing::CorpusCaseDirs().empty()) return;
  io = {};
  io.output_space = OutputSpace::kProbabilityLinearized;
  int cases = 0;
  for (const auto& k : testing::InterventionalCorpus(25, 5)) {
    const Layouts l = Build(*k.forest, k.background, &pool);
    if (!l.layout->long_paths.empty() || !CheckOutputSpace(*k.forest, io.output_space).ok()) {
      continue;
    }
    const LinearizedLayoutPtr ll = BuildLinearized(*k.forest, l, k.background);
    ExpectNearReference(Paths(*k.forest, l, k.rows, io, ll.get()),
                        InterventionalReference(*k.forest, k.rows, k.background, io), 1e-6,
                        k.c.name);
    ++cases;
  }
  EXPECT_GT(cases, 5);
}

// Runs the path form and the reference in `o`'s space; expects the same values, or the same
// refusal (a pair over kMaxExactDifferingFeatures). Returns whether values were compared.
bool ExpectExactLikeTheReference(const Forest& f, const std::vector<float>& rows,
                                 const std::vector<float>& bg, const InterventionalOptions& o,
                                 ThreadPool* pool, const std::string& what) {
  const Layouts l = Build(f, bg, pool);
  const LinearizedLayoutPtr ll = BuildLinearized(f, l, bg);
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  const int64_t width = ExplainWidth(f, false);
  std::vector<float> got(n * width);
  const absl::Status s = ExplainInterventionalPathsCpu(
      f, *l.layout, *l.il, MakeRowsView(rows.data(), n, f.num_features), o,
      MakeMatrixView(got.data(), n, width), pool, ll.get());
  return testing::ExpectLikeTheReference(s.ok() ? absl::StatusOr<std::vector<float>>(got) : s, f,
                                         rows, bg, o, 1e-6, what);
}

// The exact probability space (interventional_exact.h) against the reference: sigmoid and exp on
// single-output forests, softmax on multi-output ones, iteration ranges.
TEST(InterventionalPathsTest, ExactMatchesTheReference) {
  ThreadPool pool(2);
  InterventionalOptions io;
  io.output_space = OutputSpace::kProbability;
  int compared = 0;
  for (const RandomForestOptions& o : testing::InterventionalForestOptions()) {
    for (Link link : testing::ProbabilityLinks(o, io.output_space)) {
      ForestPtr f = WithLink(*MakeRandomForest(o), link);
      const std::vector<float> rows = MakeRandomRows(*f, 6, o.seed + 10);
      const std::vector<float> bg = MakeRandomRows(*f, 20, o.seed + 20);
      for (int begin : {0, 1}) {
        io.iteration_begin = begin;
        io.iteration_end = begin == 0 ? 0 : 3;
        compared += ExpectExactLikeTheReference(
            *f, rows, bg, io, &pool,
            absl::StrCat("seed ", o.seed, " link ", static_cast<int>(link), " begin ", begin));
      }
    }
  }
  EXPECT_GT(compared, 12);
}

// The exact space's bias is computed once per iteration range and kept with the linearized layout
// (the first kExactBiasRanges ranges); a range past those is computed per call, to equal values.
TEST(InterventionalPathsTest, ExactBiasIsKeptPerRangeWithTheLinearizedLayout) {
  ThreadPool pool(2);
  RandomForestOptions o = testing::InterventionalForestOptions().front();
  o.num_trees = 6;  // single output: 6 rounds, 21 ranges
  o.num_outputs = 1;
  o.vector_leaves = false;
  ForestPtr f = WithLink(*MakeRandomForest(o), Link::kSigmoid);
  const std::vector<float> bg = MakeRandomRows(*f, 20, o.seed + 20);
  const Layouts l = Build(*f, bg, &pool);
  const LinearizedLayoutPtr ll = BuildLinearized(*f, l, bg);
  const int rounds = f->num_iterations;
  ASSERT_GE(rounds, 3);
  auto bias = [&](int begin, int end) {
    return ExactBiasFor(*f, *l.layout, *l.il, *ll, begin, end);
  };
  const auto full = bias(0, rounds);
  EXPECT_EQ(bias(0, rounds).get(), full.get()) << "the full range is computed again";
  EXPECT_EQ(full->size(), static_cast<size_t>(f->num_outputs));
  const auto part = bias(1, 3);
  EXPECT_NE(*part, *full) << "two ranges, one bias";
  EXPECT_EQ(bias(1, 3).get(), part.get());
  // Fill the memo, then one range more: not kept, but the same values each time.
  std::vector<std::pair<int, int>> ranges;
  for (int b = 0; b < rounds && ranges.size() < kExactBiasRanges + 1; ++b) {
    for (int e = b + 1; e <= rounds && ranges.size() < kExactBiasRanges + 1; ++e) {
      ranges.emplace_back(b, e);
    }
  }
  ASSERT_EQ(ranges.size(), kExactBiasRanges + 1u) << "the forest has too few rounds";
  for (const auto& [b, e] : ranges) bias(b, e);
  const auto& [b, e] = ranges.back();
  const auto once = bias(b, e), again = bias(b, e);
  EXPECT_NE(once.get(), again.get()) << "a range past the memo's bound was kept";
  EXPECT_EQ(*once, *again);
  // Concurrent first calls agree.
  const LinearizedLayoutPtr fresh = BuildLinearized(*f, l, bg);
  std::vector<std::shared_ptr<const std::vector<double>>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { got[t] = ExactBiasFor(*f, *l.layout, *l.il, *fresh, 0, rounds); });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(*g, *full);
}

// Every corpus case whose link has a probability (categorical, dart, multi-class, LightGBM rules),
// 5 rows against 25 background rows; cases with a pair over the limit are refused alike.
TEST(InterventionalPathsTest, ExactCorpusMatchesTheReference) {
  if (testing::CorpusCaseDirs().empty()) GTEST_SKIP() << "no corpus found";
  ThreadPool pool(2);
  InterventionalOptions io;
  io.output_space = OutputSpace::kProbability;
  int compared = 0;
  for (const auto& k : testing::InterventionalCorpus(25, 5)) {
    if (!CheckOutputSpace(*k.forest, io.output_space).ok()) continue;
    absl::StatusOr<PathLayoutPtr> layout = BuildPathLayout(*k.forest);
    if (!layout.ok() || !(*layout)->long_paths.empty()) continue;
    compared += ExpectExactLikeTheReference(*k.forest, k.rows, k.background, io, &pool, k.c.name);
  }
  EXPECT_GT(compared, 5);
}

// A pair over the limit is refused with the reference's words; equal rows are not.
TEST(InterventionalPathsTest, ExactRefusesPairsOverTheLimitAsTheReference) {
  const int F = kMaxExactDifferingFeatures + 1;
  HandForest h(F);
  h.forest.objective.link = Link::kSigmoid;
  for (int i = 0; i < F; ++i) h.AddTree({h.Split(i, 0.5f, 1, 2, 2), h.Leaf(0.0, 1), h.Leaf(1.0, 1)});
  ForestPtr wide = h.Build();
  InterventionalOptions io;
  io.output_space = OutputSpace::kProbability;
  const std::vector<float> ones(F, 1.0f), zeros(F, 0.0f);
  std::vector<float> rows = ones;
  rows.insert(rows.end(), ones.begin(), ones.end());
  std::vector<float> bg = ones;
  EXPECT_TRUE(ExpectExactLikeTheReference(*wide, rows, bg, io, nullptr, "equal rows"));
  rows.insert(rows.end(), zeros.begin(), zeros.end());  // row 2 differs from background row 1
  bg.insert(bg.end(), ones.begin(), ones.end());
  bg[F + 3] = 0.0f;
  EXPECT_FALSE(ExpectExactLikeTheReference(*wide, rows, bg, io, nullptr, "row 2"));
  const Layouts l = Build(*wide, bg, nullptr);
  const LinearizedLayoutPtr ll = BuildLinearized(*wide, l, bg);
  std::vector<float> out(3 * (F + 1));
  const absl::Status s = ExplainInterventionalPathsCpu(
      *wide, *l.layout, *l.il, MakeRowsView(rows.data(), 3, F), io,
      MakeMatrixView(out.data(), 3, F + 1), nullptr, ll.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("row 2, background row 0"), std::string::npos) << s;
}

TEST(InterventionalPathsTest, RefusesWhatTheKernelDoesNot) {
  ForestPtr f = WithLink(*MakeDepth2Tree(), Link::kSigmoid);
  const Layouts l = Build(*f, {0, 0}, nullptr);
  std::vector<float> rows = {0, 1}, out(3);
  InterventionalOptions o;
  o.output_space = OutputSpace::kProbability;  // without its layout
  EXPECT_EQ(ExplainInterventionalPathsCpu(*f, *l.layout, *l.il, MakeRowsView(rows.data(), 1, 2), o,
                                          MakeMatrixView(out.data(), 1, 3), nullptr)
                .code(),
            absl::StatusCode::kFailedPrecondition);
  // Linearized without its layout.
  o.output_space = OutputSpace::kProbabilityLinearized;
  EXPECT_EQ(ExplainInterventionalPathsCpu(*f, *l.layout, *l.il, MakeRowsView(rows.data(), 1, 2), o,
                                          MakeMatrixView(out.data(), 1, 3), nullptr)
                .code(),
            absl::StatusCode::kFailedPrecondition);
  // A linearized layout of another background.
  EXPECT_EQ(BuildLinearizedLayout(*l.layout, *l.il, MakeRowsView(rows.data(), 2, 1), nullptr)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildInterventionalLayout(*f, *l.layout, MakeRowsView(rows.data(), 0, 2), nullptr)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace grove
