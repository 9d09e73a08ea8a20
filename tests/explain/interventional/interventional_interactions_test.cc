// Interventional interaction values in the path form (interventional_interactions.h) -- the GPU
// kernel's per-lane arithmetic, run on the CPU -- against a brute force over every coalition of
// the library's own hybrid predictions, and against the CPU reference.
#include "core/explain/interventional/interventional_interactions.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "gtest/gtest.h"
#include "tests/testing/coalition_games.h"
#include "tests/testing/corpus.h"
#include "tests/testing/interventional_reference.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

using testing::BuildLinearized;
using testing::ExpectNearReference;
using testing::InterventionalReference;

using Layouts = testing::InterventionalLayouts;

Layouts Build(const Forest& f, const std::vector<float>& bg, ThreadPool* pool) {
  return testing::BuildInterventionalLayouts(f, bg, pool);
}

absl::StatusOr<std::vector<float>> PathsOrStatus(const Forest& f, const Layouts& l,
                                                 const std::vector<float>& rows,
                                                 InterventionalOptions o, ThreadPool* pool) {
  o.interactions = true;
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  const int64_t width = ExplainWidth(f, true);
  std::vector<float> out(n * width);
  absl::Status s = ExplainInterventionalInteractionsPathsCpu(
      f, *l.layout, *l.il, MakeRowsView(rows.data(), n, f.num_features), o,
      MakeMatrixView(out.data(), n, width), pool);
  if (!s.ok()) return s;
  return out;
}

std::vector<float> Paths(const Forest& f, const Layouts& l, const std::vector<float>& rows,
                         const InterventionalOptions& o = {}, ThreadPool* pool = nullptr) {
  absl::StatusOr<std::vector<float>> got = PathsOrStatus(f, l, rows, o, pool);
  EXPECT_TRUE(got.ok()) << got.status();
  return got.ok() ? *got : std::vector<float>();
}

// The mean over the background of the pair games v(S) = out(x_S z_S̄) (K x 2^F): the margin, or
// its link (kProbability).
std::vector<double> MeanGame(const Forest& f, const float* x, const std::vector<float>& bg,
                             OutputSpace space = OutputSpace::kMargin) {
  const int64_t n = static_cast<int64_t>(bg.size()) / f.num_features;
  std::vector<double> mean;
  for (int64_t j = 0; j < n; ++j) {
    const std::vector<double> g = testing::PairGame(f, x, bg.data() + j * f.num_features, space);
    mean.resize(g.size(), 0.0);
    for (size_t s = 0; s < g.size(); ++s) mean[s] += g[s] / n;
  }
  return mean;
}

// Shapley interaction values of a tabulated game (K x 2^F), by the definition: M[i][j] = half of
// sum over S without i, j of |S|! (F-|S|-2)! / (F-1)! times the second difference; the SHAP value
// of i by its definition; M[i][i] = phi_i - sum_{j != i} M[i][j]; M[F][F] = v({}).
std::vector<double> ShapleyInteractionsOfGame(const std::vector<double>& game, int F, int K) {
  const int64_t f1 = F + 1;
  const uint32_t subsets = 1u << F;
  std::vector<double> fact(F + 1, 1.0);
  for (int i = 1; i <= F; ++i) fact[i] = fact[i - 1] * i;
  std::vector<double> m(K * f1 * f1, 0.0);
  for (int k = 0; k < K; ++k) {
    auto v = [&](uint32_t s) { return game[s * K + k]; };
    double* mk = m.data() + k * f1 * f1;
    for (int i = 0; i < F; ++i) {
      const uint32_t bi = 1u << i;
      double phi = 0;
      for (uint32_t s = 0; s < subsets; ++s) {
        if (s & bi) continue;
        const int size = __builtin_popcount(s);
        phi += fact[size] * fact[F - size - 1] / fact[F] * (v(s | bi) - v(s));
      }
      double off = 0;
      for (int j = 0; j < F; ++j) {
        if (j == i) continue;
        const uint32_t bj = 1u << j;
        double sum = 0;
        for (uint32_t s = 0; s < subsets; ++s) {
          if (s & (bi | bj)) continue;
          const int size = __builtin_popcount(s);
          sum += fact[size] * fact[F - size - 2] / (2 * fact[F - 1]) *
                 (v(s | bi | bj) - v(s | bi) - v(s | bj) + v(s));
        }
        mk[i * f1 + j] = sum;
        off += sum;
      }
      mk[i * f1 + i] = phi - off;
    }
    mk[F * f1 + F] = v(0);
  }
  return m;
}

TEST(InterventionalInteractionsTest, LaneSumsOfOnePathByHand) {
  // Root + 3 elements; the row matches {root, 1, 2}, so element 3 is always taken from z
  // (b = 1). Masks: {root, 3} (S_x = {1, 2}, a = 2) twice, {root, 2, 3} (S_x = {1}) once and
  // {root, 1} (unreachable) once. Shapley weights W(a, b) = (a-1)! b! / (a+b)!.
  std::vector<double> w(kInterventionalWeightSide * kInterventionalWeightSide, 0.0);
  for (int a = 1; a < kInterventionalWeightSide; ++a) {
    for (int b = 0; b < kInterventionalWeightSide; ++b) {
      w[a * kInterventionalWeightSide + b] = AttributionWeight(Attribution::kShapley, a, b);
    }
  }
  const uint32_t full = FullMask(4), x = 0b0111;
  const uint32_t masks[] = {0b1001, 0b1001, 0b1101, 0b0011};
  InteractionLane lanes[4];
  double with_x[4][4] = {};
  for (int e = 1; e < 4; ++e) {
    for (uint32_t z : masks) AddInteractionMask(x, z, full, e, 1.0, w.data(), &lanes[e], with_x[e]);
  }
  // Element 1: S_x in all three reachable masks: phi = 2 W(2,1) + W(1,1) = 2/6 + 1/2.
  EXPECT_DOUBLE_EQ(lanes[1].phi, 2.0 / 6 + 0.5);
  // Pair (1, 2): both from x in the two {root, 3} masks: 2 W(1, 1) / 2.
  EXPECT_DOUBLE_EQ(InteractionPairCoefficient(x, 1, 2, lanes[1], with_x[1], lanes[2]), 0.5);
  EXPECT_DOUBLE_EQ(InteractionPairCoefficient(x, 2, 1, lanes[2], with_x[2], lanes[1]), 0.5);
  // Pair (1, 3): mixed in every reachable mask: -(2 W(2, 0) + W(1, 0)) / 2 = -(2/2 + 1) / 2.
  EXPECT_DOUBLE_EQ(InteractionPairCoefficient(x, 1, 3, lanes[1], with_x[1], lanes[3]), -1.0);
  EXPECT_DOUBLE_EQ(InteractionPairCoefficient(x, 3, 1, lanes[3], with_x[3], lanes[1]), -1.0);
  // Element 3 (from z): phi = -(2 W(1, 2) + W(1, 1)) = -(2/3 + 1/2).
  EXPECT_DOUBLE_EQ(lanes[3].phi, -(2.0 / 3 + 0.5));
}

TEST(InterventionalInteractionsTest, SmallForestsMatchBruteForceShapleyAndBanzhaf) {
  ThreadPool pool(2);
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    testing::RandomForestOptions o;
    o.seed = seed;
    o.num_trees = 5;
    o.max_depth = 3 + static_cast<int>(seed % 3);
    o.num_features = 5 + static_cast<int>(seed % 3);
    o.categorical_fraction = seed % 2 ? 0.3 : 0.0;
    o.lightgbm_rules = seed % 3 == 0;
    o.num_outputs = seed == 4 ? 2 : 1;
    o.vector_leaves = seed == 5;
    if (o.vector_leaves) o.num_outputs = 2;
    ForestPtr f = MakeRandomForest(o);
    const int F = f->num_features, K = f->num_outputs;
    const std::vector<float> rows = testing::MakeRandomRows(*f, 3, seed + 30);
    const std::vector<float> bg = testing::MakeRandomRows(*f, 7, seed + 40);
    const Layouts l = Build(*f, bg, &pool);
    for (Attribution attribution : {Attribution::kShapley, Attribution::kBanzhaf}) {
      InterventionalOptions io;
      io.attribution = attribution;
      const std::vector<float> got = Paths(*f, l, rows, io, &pool);
      std::vector<double> want;
      for (int r = 0; r < 3; ++r) {
        const std::vector<double> game = MeanGame(*f, rows.data() + r * F, bg);
        const std::vector<double> one = attribution == Attribution::kShapley
                                            ? ShapleyInteractionsOfGame(game, F, K)
                                            : testing::BanzhafInteractionsOfGame(game, F, K);
        want.insert(want.end(), one.begin(), one.end());
      }
      ExpectNearReference(got, std::vector<float>(want.begin(), want.end()), 1e-5,
                          absl::StrCat("seed ", seed, " ", AttributionName(attribution)));
    }
  }
}

TEST(InterventionalInteractionsTest, RandomForestsMatchTheReference) {
  ThreadPool pool(2);
  for (const testing::RandomForestOptions& o : testing::InterventionalForestOptions()) {
    ForestPtr f = MakeRandomForest(o);
    const std::vector<float> rows = testing::MakeRandomRows(*f, 6, o.seed + 10);
    const std::vector<float> bg = testing::MakeRandomRows(*f, 30, o.seed + 20);
    const Layouts l = Build(*f, bg, &pool);
    for (const InterventionalOptions& io : testing::InteractionCases()) {
      ExpectNearReference(Paths(*f, l, rows, io, &pool), InterventionalReference(*f, rows, bg, io),
                          1e-6, absl::StrCat("seed ", o.seed, " ", testing::Describe(io)));
    }
  }
}

// The exact probability space's interaction values (interventional_exact.h, step 5) on the CPU
// path form: against a brute force over every coalition of the mean linked game, Shapley and
// Banzhaf, sigmoid and softmax; then against the reference on the seeded forests (or its refusal
// of a pair over the limit).
TEST(InterventionalInteractionsTest, ExactProbabilityMatchesBruteForceAndTheReference) {
  ThreadPool pool(2);
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    testing::RandomForestOptions o;
    o.seed = seed;
    o.num_trees = 4;
    o.max_depth = 3 + static_cast<int>(seed % 2);
    o.num_features = 5 + static_cast<int>(seed % 2);
    o.num_outputs = seed % 2 ? 1 : 3;
    ForestPtr f = testing::WithLink(*MakeRandomForest(o), seed % 2 ? Link::kSigmoid
                                                                    : Link::kSoftmax);
    const int F = f->num_features, K = f->num_outputs;
    const std::vector<float> rows = testing::MakeRandomRows(*f, 3, seed + 50);
    const std::vector<float> bg = testing::MakeRandomRows(*f, 5, seed + 60);
    const Layouts l = Build(*f, bg, &pool);
    const LinearizedLayoutPtr ll = BuildLinearized(*f, l, bg);
    for (Attribution attribution : {Attribution::kShapley, Attribution::kBanzhaf}) {
      InterventionalOptions io;
      io.interactions = true;
      io.output_space = OutputSpace::kProbability;
      io.attribution = attribution;
      std::vector<float> got(3 * ExplainWidth(*f, true));
      ASSERT_TRUE(ExplainInterventionalPathsCpu(*f, *l.layout, *l.il,
                                                MakeRowsView(rows.data(), 3, F), io,
                                                MakeMatrixView(got.data(), 3, got.size() / 3),
                                                &pool, ll.get())
                      .ok());
      std::vector<float> want;
      for (int r = 0; r < 3; ++r) {
        const std::vector<double> game = MeanGame(*f, rows.data() + r * F, bg,
                                                  OutputSpace::kProbability);
        const std::vector<double> one = attribution == Attribution::kShapley
                                            ? ShapleyInteractionsOfGame(game, F, K)
                                            : testing::BanzhafInteractionsOfGame(game, F, K);
        want.insert(want.end(), one.begin(), one.end());
      }
      ExpectNearReference(got, want, 1e-5,
                          absl::StrCat("seed ", seed, " ", AttributionName(attribution)));
    }
  }
  int compared = 0;
  for (const testing::RandomForestOptions& o : testing::InterventionalForestOptions()) {
    for (Link link : testing::ProbabilityLinks(o, OutputSpace::kProbability)) {
      ForestPtr f = testing::WithLink(*MakeRandomForest(o), link);
      const std::vector<float> rows = testing::MakeRandomRows(*f, 4, o.seed + 10);
      const std::vector<float> bg = testing::MakeRandomRows(*f, 6, o.seed + 20);
      const Layouts l = Build(*f, bg, &pool);
      const LinearizedLayoutPtr ll = BuildLinearized(*f, l, bg);
      InterventionalOptions io;
      io.interactions = true;
      io.output_space = OutputSpace::kProbability;
      const int64_t width = ExplainWidth(*f, true);
      std::vector<float> got(4 * width);
      const absl::Status s = ExplainInterventionalPathsCpu(
          *f, *l.layout, *l.il, MakeRowsView(rows.data(), 4, f->num_features), io,
          MakeMatrixView(got.data(), 4, width), &pool, ll.get());
      compared += testing::ExpectLikeTheReference(
          s.ok() ? absl::StatusOr<std::vector<float>>(got) : s, *f, rows, bg, io, 1e-5,
          absl::StrCat("seed ", o.seed, " link ", LinkName(link)));
    }
  }
  EXPECT_GT(compared, 6);
}

TEST(InterventionalInteractionsTest, IdentityLinkProbabilityIsTheMarginOverTheDivisor) {
  testing::RandomForestOptions o;
  o.seed = 11;
  o.num_features = 7;
  ForestPtr f = MakeRandomForest(o);
  const std::vector<float> rows = testing::MakeRandomRows(*f, 4, 12);
  const std::vector<float> bg = testing::MakeRandomRows(*f, 20, 13);
  const Layouts l = Build(*f, bg, nullptr);
  InterventionalOptions io;
  io.interactions = true;
  io.output_space = OutputSpace::kProbability;
  ExpectNearReference(Paths(*f, l, rows, io), InterventionalReference(*f, rows, bg, io), 1e-6,
                      "identity probability");
}

TEST(InterventionalInteractionsTest, CorpusMatchesTheReference) {
  if (testing::CorpusCaseDirs().empty()) GTEST_SKIP() << "no corpus found";
  ThreadPool pool(2);
  int compared = 0;
  for (const auto& k : testing::InterventionalCorpus(25, 3)) {
    const Layouts l = Build(*k.forest, k.background, &pool);
    if (!l.layout->long_paths.empty()) continue;
    InterventionalOptions io;
    io.interactions = true;
    ExpectNearReference(Paths(*k.forest, l, k.rows, io, &pool),
                        InterventionalReference(*k.forest, k.rows, k.background, io), 1e-5,
                        k.c.name);
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

TEST(InterventionalInteractionsTest, DeterministicAcrossThreadCounts) {
  testing::RandomForestOptions o;
  o.seed = 21;
  o.num_trees = 20;
  o.num_features = 12;
  ForestPtr f = MakeRandomForest(o);
  const std::vector<float> rows = testing::MakeRandomRows(*f, 16, 22);
  const std::vector<float> bg = testing::MakeRandomRows(*f, 50, 23);
  const Layouts l = Build(*f, bg, nullptr);
  ThreadPool pool(3);
  const std::vector<float> one = Paths(*f, l, rows, {}, nullptr);
  const std::vector<float> many = Paths(*f, l, rows, {}, &pool);
  ASSERT_EQ(one.size(), many.size());
  for (size_t i = 0; i < one.size(); ++i) ASSERT_EQ(one[i], many[i]) << i;
}

TEST(InterventionalInteractionsTest, RefusesWhatThePathFormDoesNot) {
  testing::RandomForestOptions o;
  o.seed = 5;
  ForestPtr f = testing::WithLink(*MakeRandomForest(o), Link::kSigmoid);
  const std::vector<float> rows = testing::MakeRandomRows(*f, 2, 6);
  const std::vector<float> bg = testing::MakeRandomRows(*f, 5, 7);
  const Layouts l = Build(*f, bg, nullptr);
  for (OutputSpace space : {OutputSpace::kProbability, OutputSpace::kProbabilityLinearized}) {
    InterventionalOptions io;
    io.output_space = space;
    io.interactions = true;
    EXPECT_FALSE(PathFormExplainsInteractions(*f, io));
    absl::StatusOr<std::vector<float>> got = PathsOrStatus(*f, l, rows, io, nullptr);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << OutputSpaceName(space);
  }
  InterventionalOptions values;  // SHAP values are the other engines' work
  EXPECT_FALSE(PathFormExplainsInteractions(*f, values));
}

}  // namespace
}  // namespace grove
