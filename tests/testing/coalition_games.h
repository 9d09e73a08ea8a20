// Value functions of the explanation games tabulated over every feature subset, and the Banzhaf
// values of a tabulated game by their definition: the independent oracle of the Banzhaf tests.
// Exponential in the features (2^F subsets): small models only (F <= 12 or so).
//
// A game is K x 2^F doubles, game[s * K + k] = v_k(S) with bit i of s meaning feature i is in S.
// Thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <vector>

#include "core/explain/attribution.h"
#include "core/model/feature_groups.h"
#include "core/model/forest.h"
#include "core/model/outputs.h"
#include "tests/testing/random_forest.h"

namespace grove::testing {

// Path-dependent: v_k(S) = E[margin_k | x_S] over the training covers (below a split on a feature
// of S follow the row, else average the children by cover; 0 under a zero-cover node), base margin
// included, trees of rounds [begin, end) (end <= 0: to the last round).
std::vector<double> PathDependentGame(const Forest& f, const float* row, int begin = 0,
                                      int end = 0);

// Interventional, one background row z: v_k(S) = out_k(x_S z_S̄), the naive margin of the hybrid
// (kMargin) or its link (kProbability), every round.
std::vector<double> PairGame(const Forest& f, const float* x, const float* z, OutputSpace space);

// Banzhaf values of `game` (K x 2^F): per output F values then v({}) (ExplainWidth layout), each
// 2^-(F-1) sum over S without i of v(S ∪ i) - v(S).
std::vector<double> BanzhafOfGame(const std::vector<double>& game, int num_features,
                                  int num_outputs);

// Banzhaf interaction values (K x (F+1)^2): M[i][j] = half the Banzhaf interaction index
// 2^-(F-2) sum over S without i, j of the second difference; M[i][i] = value_i - sum_{j != i}
// M[i][j]; M[F][F] = v({}).
std::vector<double> BanzhafInteractionsOfGame(const std::vector<double>& game, int num_features,
                                              int num_outputs);

// The game whose players are `groups` (K x 2^G): v_k(T) = game's v_k(union of T's members).
std::vector<double> GroupedGame(const std::vector<double>& game, int num_outputs,
                                const FeatureGroups& groups);

// Seeded forests small enough to tabulate their games (3 to 6 features): numeric and categorical
// splits, LightGBM rules, two outputs, vector leaves.
std::vector<RandomForestOptions> SmallGameForests();

// A seeded partition of `num_features` features into groups of 1 to 3 features, declared by index
// (a pure function of its arguments); resolution errors fail the test.
FeatureGroupsPtr RandomFeatureGroups(int num_features, uint64_t seed);

// Interventional over a background (n rows, row-major): v_k(T) = the mean over the background of
// the pair games (PairGame) of x, over `groups` when not null (GroupedGame).
std::vector<double> InterventionalGame(const Forest& f, const float* x, const float* background,
                                       int64_t n, OutputSpace space, const FeatureGroups* groups);

// The values of `game` (K x 2^players) an explanation should give: Shapley or Banzhaf, values
// (ExplainWidth layout) or interaction values.
std::vector<double> ValuesOfGame(const std::vector<double>& game, int players, int num_outputs,
                                 Attribution attribution, bool interactions);

// Shapley values of `game` (K x 2^F), laid out as BanzhafOfGame: the factorial weights
// |S|! (F - |S| - 1)! / F!.
std::vector<double> ShapleyOfGame(const std::vector<double>& game, int num_features,
                                  int num_outputs);

// Shapley interaction values (K x (F+1)^2) laid out as BanzhafInteractionsOfGame: M[i][j] = half
// the Shapley interaction index, sum over S without i, j of |S|! (F - |S| - 2)! / (F - 1)! times
// the second difference.
std::vector<double> ShapleyInteractionsOfGame(const std::vector<double>& game, int num_features,
                                              int num_outputs);

}  // namespace grove::testing
