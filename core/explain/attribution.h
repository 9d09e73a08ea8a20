// Attribution: which game-theoretic value of a value function an explanation returns.
//
// For a value function v over the features N (path-dependent: the training covers; interventional:
// the background), feature i's value is a weighted mean of its marginal contributions
// v(S ∪ i) - v(S) over the coalitions S ⊆ N \ {i}:
//   Shapley  weights |S|! (|N| - |S| - 1)! / |N|!: additive (the values and v({}) sum to v(N));
//   Banzhaf  weight 1 / 2^(|N| - 1) for every S (each other feature joins with probability 1/2):
//            not additive, in general the values and v({}) do not sum to v(N).
// Interaction values follow the same weights on the second differences (Shapley interaction
// index; Banzhaf interaction index: 1 / 2^(|N| - 2)), and are laid out alike (half the index on
// M[i][j] and M[j][i], M[i][i] = value_i - sum_{j != i} M[i][j], the bias v({}) at M[F][F]).
//
// The enum and its names are core/model/outputs.h's (Attribution), beside ExplainMethod, since
// the protocol conversions parse them; this header holds the engines' weights.
#pragma once

#include "core/common/hd.h"
#include "core/model/outputs.h"

namespace grove {

// Weight of a leaf's value in the value of a feature the hybrid takes from x when the leaf needs a
// >= 1 features from x and b from z (every other feature is free): Shapley (a-1)! b! / (a+b)!
// (InterventionalWeight), Banzhaf 1 / 2^(a+b-1) (the coalitions with the a-1 other x features and
// none of the b z features, out of all of them). A feature taken from z gets -weight(b, a).
GROVE_HD double AttributionWeight(Attribution attribution, int a, int b) {
  if (attribution == Attribution::kBanzhaf) {
    double w = 1.0;
    for (int i = 1; i < a + b; ++i) w *= 0.5;
    return w;
  }
  double w = 1.0 / a;
  for (int i = 1; i <= b; ++i) w *= static_cast<double>(i) / (a + i);
  return w;
}

}  // namespace grove
