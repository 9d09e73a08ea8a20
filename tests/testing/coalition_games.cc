#include "tests/testing/coalition_games.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "core/model/decision.h"
#include "core/model/transform.h"
#include "tests/testing/naive_predict.h"

namespace grove::testing {
namespace {

double ConditionalExpectation(const Forest& f, int t, int node, const float* row, uint32_t s,
                              int k) {
  const Node* nodes = f.TreeNodes(t);
  const Node& n = nodes[node];
  if (n.is_leaf()) return f.leaf_values[n.payload + k];
  if (s & (1u << n.feature)) {
    const bool left =
        GoesLeft(n.flags, n.threshold, n.payload, n.aux, f.category_bits.data(), row[n.feature]);
    return ConditionalExpectation(f, t, left ? n.left : n.right, row, s, k);
  }
  if (n.cover <= 0) return 0.0;
  return nodes[n.left].cover / n.cover * ConditionalExpectation(f, t, n.left, row, s, k) +
         nodes[n.right].cover / n.cover * ConditionalExpectation(f, t, n.right, row, s, k);
}

double Factorial(int n) { return n <= 1 ? 1.0 : n * Factorial(n - 1); }

// Interaction values laid out as pred_interactions: M[i][j] = sum over S without i, j of
// weight(|S|) times the second difference; M[i][i] = values_i - sum_{j != i} M[i][j];
// M[F][F] = values' bias (v({})).
std::vector<double> InteractionsOfGame(const std::vector<double>& game, int F, int K,
                                       const std::vector<double>& values,
                                       const std::function<double(int)>& weight) {
  const int64_t f1 = F + 1;
  const uint32_t subsets = 1u << F;
  std::vector<double> m(K * f1 * f1, 0.0);
  for (int k = 0; k < K; ++k) {
    double* mk = m.data() + k * f1 * f1;
    auto v = [&](uint32_t s) { return game[s * K + k]; };
    for (int i = 0; i < F; ++i) {
      double off = 0;
      for (int j = 0; j < F; ++j) {
        if (j == i) continue;
        const uint32_t bi = 1u << i, bj = 1u << j;
        double sum = 0;
        for (uint32_t s = 0; s < subsets; ++s) {
          if (s & (bi | bj)) continue;
          sum += weight(__builtin_popcount(s)) * (v(s | bi | bj) - v(s | bi) - v(s | bj) + v(s));
        }
        mk[i * f1 + j] = sum;
        off += sum;
      }
      mk[i * f1 + i] = values[k * f1 + i] - off;
    }
    mk[F * f1 + F] = values[k * f1 + F];
  }
  return m;
}

}  // namespace

std::vector<double> PathDependentGame(const Forest& f, const float* row, int begin, int end) {
  const int F = f.num_features, K = f.num_outputs;
  const uint32_t subsets = 1u << F;
  std::vector<double> game(subsets * K);
  for (uint32_t s = 0; s < subsets; ++s) {
    for (int k = 0; k < K; ++k) game[s * K + k] = f.base_margin[k];
    for (int t = 0; t < static_cast<int>(f.trees.size()); ++t) {
      if (!f.TreeInRange(t, begin, end)) continue;
      const Tree& tree = f.trees[t];
      for (int j = 0; j < tree.leaf_width; ++j) {
        const int k = tree.leaf_width == 1 ? tree.group : j;
        game[s * K + k] += tree.weight * ConditionalExpectation(f, t, 0, row, s, j);
      }
    }
  }
  return game;
}

std::vector<double> PairGame(const Forest& f, const float* x, const float* z, OutputSpace space) {
  const int F = f.num_features, K = f.num_outputs;
  const uint32_t subsets = 1u << F;
  const TransformParams p = MakeTransformParams(f, f.num_iterations);
  std::vector<double> game(subsets * K);
  std::vector<float> hybrid(F);
  for (uint32_t s = 0; s < subsets; ++s) {
    for (int i = 0; i < F; ++i) hybrid[i] = (s >> i) & 1 ? x[i] : z[i];
    double* m = game.data() + s * K;
    NaiveMargins(f, hybrid.data(), m);
    if (space == OutputSpace::kProbability) TransformRow(p, m, m);
  }
  return game;
}

std::vector<double> BanzhafOfGame(const std::vector<double>& game, int num_features,
                                  int num_outputs) {
  const int F = num_features, K = num_outputs;
  const uint32_t subsets = 1u << F;
  const double scale = std::ldexp(1.0, -(F - 1));
  std::vector<double> out(K * (F + 1), 0.0);
  for (int k = 0; k < K; ++k) {
    for (int i = 0; i < F; ++i) {
      for (uint32_t s = 0; s < subsets; ++s) {
        if ((s >> i) & 1) continue;
        out[k * (F + 1) + i] += scale * (game[(s | (1u << i)) * K + k] - game[s * K + k]);
      }
    }
    out[k * (F + 1) + F] = game[k];
  }
  return out;
}

std::vector<double> BanzhafInteractionsOfGame(const std::vector<double>& game, int num_features,
                                              int num_outputs) {
  const int F = num_features;
  const double scale = F >= 2 ? std::ldexp(1.0, -(F - 2)) / 2 : 0.0;
  return InteractionsOfGame(game, F, num_outputs, BanzhafOfGame(game, F, num_outputs),
                            [scale](int) { return scale; });
}

std::vector<double> GroupedGame(const std::vector<double>& game, int num_outputs,
                                const FeatureGroups& groups) {
  const int G = groups.num_groups(), K = num_outputs;
  std::vector<double> out((size_t{1} << G) * K);
  for (uint32_t t = 0; t < (1u << G); ++t) {
    uint32_t s = 0;
    for (int g = 0; g < G; ++g) {
      if (!((t >> g) & 1)) continue;
      for (int32_t f : groups.members[g]) s |= 1u << f;
    }
    for (int k = 0; k < K; ++k) out[t * K + k] = game[s * K + k];
  }
  return out;
}

std::vector<double> ShapleyOfGame(const std::vector<double>& game, int num_features,
                                  int num_outputs) {
  const int F = num_features, K = num_outputs;
  const uint32_t subsets = 1u << F;
  std::vector<double> out(K * (F + 1), 0.0);
  for (int k = 0; k < K; ++k) {
    for (int i = 0; i < F; ++i) {
      for (uint32_t s = 0; s < subsets; ++s) {
        if ((s >> i) & 1) continue;
        const int size = __builtin_popcount(s);
        const double w = Factorial(size) * Factorial(F - size - 1) / Factorial(F);
        out[k * (F + 1) + i] += w * (game[(s | (1u << i)) * K + k] - game[s * K + k]);
      }
    }
    out[k * (F + 1) + F] = game[k];
  }
  return out;
}

std::vector<double> ShapleyInteractionsOfGame(const std::vector<double>& game, int num_features,
                                              int num_outputs) {
  const int F = num_features;
  return InteractionsOfGame(game, F, num_outputs, ShapleyOfGame(game, F, num_outputs),
                            [F](int size) {
                              return Factorial(size) * Factorial(F - size - 2) /
                                     (2 * Factorial(F - 1));
                            });
}

std::vector<RandomForestOptions> SmallGameForests() {
  std::vector<RandomForestOptions> out;
  for (int seed = 1; seed <= 6; ++seed) {
    RandomForestOptions o;
    o.seed = seed;
    o.num_trees = 5;
    o.num_features = 3 + seed % 4;
    o.max_depth = 4 + seed % 3;
    o.num_outputs = seed % 3 == 0 ? 2 : 1;
    o.vector_leaves = seed == 6;
    o.categorical_fraction = seed % 2 == 0 ? 0.3 : 0.0;
    o.lightgbm_rules = seed % 3 == 1;
    out.push_back(o);
  }
  return out;
}

FeatureGroupsPtr RandomFeatureGroups(int num_features, uint64_t seed) {
  std::vector<int> order(num_features);
  for (int i = 0; i < num_features; ++i) order[i] = i;
  uint64_t state = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(state >> 33);
  };
  for (int i = num_features - 1; i > 0; --i) std::swap(order[i], order[next() % (i + 1)]);
  std::vector<GroupSpec> spec;
  for (size_t i = 0; i < order.size();) {
    const size_t size = std::min<size_t>(1 + next() % 3, order.size() - i);
    GroupSpec g;
    g.name = absl::StrCat("g", spec.size());
    for (size_t j = 0; j < size; ++j) g.members.push_back(FeatureRef{order[i + j], ""});
    spec.push_back(g);
    i += size;
  }
  absl::StatusOr<FeatureGroupsPtr> groups = ResolveFeatureGroups(spec, num_features, {});
  EXPECT_TRUE(groups.ok()) << groups.status();
  return groups.ok() ? *groups : nullptr;
}

std::vector<double> InterventionalGame(const Forest& f, const float* x, const float* background,
                                       int64_t n, OutputSpace space, const FeatureGroups* groups) {
  std::vector<double> game;
  for (int64_t j = 0; j < n; ++j) {
    std::vector<double> pair = PairGame(f, x, background + j * f.num_features, space);
    if (groups != nullptr) pair = GroupedGame(pair, f.num_outputs, *groups);
    game.resize(pair.size(), 0.0);
    for (size_t c = 0; c < pair.size(); ++c) game[c] += pair[c] / static_cast<double>(n);
  }
  return game;
}

std::vector<double> ValuesOfGame(const std::vector<double>& game, int players, int num_outputs,
                                 Attribution attribution, bool interactions) {
  if (attribution == Attribution::kBanzhaf) {
    return interactions ? BanzhafInteractionsOfGame(game, players, num_outputs)
                        : BanzhafOfGame(game, players, num_outputs);
  }
  return interactions ? ShapleyInteractionsOfGame(game, players, num_outputs)
                      : ShapleyOfGame(game, players, num_outputs);
}

}  // namespace grove::testing
