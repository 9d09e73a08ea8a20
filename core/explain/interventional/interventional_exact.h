// The exact probability space (OutputSpace::kProbability) of interventional SHAP in the path form,
// written once as GROVE_HD code for the CPU paths strategy (one thread per row, SerialTeam) and the
// GPU kernel (one warp per row, WarpTeam in interventional_gpu.cuh). The CPU reference
// (interventional_cpu.cc, a tree walk per pair) is the independent oracle.
//
// ## Per (row x, background row z) pair
// v(S) = g(f(x_S z_S̄)) with g the link is not linear in the leaves, so the 2^d hybrid outputs are
// needed, d being the features on which the trees send x and z different ways (the reference's
// limit kMaxExactDifferingFeatures applies alike). With the per-path masks of interventional_paths.h
// (X of x, Z of z; a path is reachable by some hybrid iff (X | Z) == full):
//   1. Terms, in path order: a reachable path whose X and Z differ on some element is a term: its
//      leaf value counts for every S holding the features of X & ~Z (S_x) and none of Z & ~X
//      (S_z). Features get slots 0, 1, ... in order of first appearance. Reachable paths with
//      X == Z (x and z agree on all of it) add to every hybrid alike: a constant.
//   2. The term's indicator [S_x ⊆ S, S ∩ S_z = ∅] = sum over U ⊆ S_z of (-1)^|U| [S_x ∪ U ⊆ S]: the
//      value goes to 2^|S_z| entries of a Möbius table M (|S_z| is small: the features z alone
//      matches on one path).
//   3. f(x_S z_S̄) = constant + sum over T ⊆ S of M[T]: the subset-sum (zeta) transform, d 2^(d-1)
//      additions; then g per hybrid (softmax over the outputs of one hybrid).
//   4. phi_i += 1/N sum over S without i of W(d - |S|, |S|) (g(S ∪ i) - g(S)) (InterventionalWeight).
//   5. With interaction values: M[i][j] = M[j][i] += 1/N sum over S without i, j of
//      W(d-1-|S|, |S|) / 2 (g(S ∪ {i,j}) - g(S ∪ i) - g(S ∪ j) + g(S)) (the reference's).
// Cost per pair: the paths (two mask loads each), 2^|S_z| per term, and ~3 d 2^(d-1) per output.
//
// Feature groups: with a grouped layout (folded masks, interventional_paths.h) the players are the
// groups: d counts the groups the hybrids part on, slots and columns are groups (ExactArgs).
//
// Determinism: terms are applied in path order, one at a time (the team's members write distinct
// table entries of a term, Sync between terms), every other step has a fixed order, and the team's
// sums reduce in a fixed tree: results are bitwise identical from run to run on either device.
#pragma once

#include <cstdint>

#include "core/common/hd.h"
#include "core/explain/interventional/interventional.h"
#include "core/explain/interventional/interventional_paths.h"
#include "core/explain/paths.h"
#include "core/model/transform.h"

namespace grove {

// One worker: the CPU paths strategy's team.
struct SerialTeam {
  GROVE_HD int rank() const { return 0; }
  GROVE_HD int size() const { return 1; }
  GROVE_HD void Sync() const {}
  GROVE_HD uint32_t Ballot(bool b) const { return b ? 1u : 0u; }
  GROVE_HD uint32_t Broadcast(uint32_t v, int) const { return v; }
  // The members' values summed in a fixed order, the same result on every member.
  GROVE_HD double Sum(double v) const { return v; }
};

// The bits of `u` placed, lowest first, at the set bits of `mask` (x86's pdep).
GROVE_HD uint32_t DepositBits(uint32_t u, uint32_t mask) {
  uint32_t out = 0;
  for (int i = 0; mask != 0; ++i, mask &= mask - 1) {
    if ((u >> i) & 1u) out |= mask & (~mask + 1);
  }
  return out;
}

// q with a 0 inserted at bit i: the q-th subset of the d slots that lacks slot i.
GROVE_HD uint32_t InsertZeroBit(uint32_t q, int i) {
  const uint32_t low = (1u << i) - 1;
  return ((q & ~low) << 1) | (q & low);
}

// What every pair of a call reads. Device or host pointers alike.
struct ExactArgs {
  const PathElement* elements = nullptr;
  const PathInfo* paths = nullptr;
  const double* values = nullptr;
  const uint32_t* category_bits = nullptr;
  const double* base_margin = nullptr;
  const double* weights = nullptr;  // InterventionalLayout::weights
  int64_t num_paths = 0;
  int iteration_begin = 0;
  int iteration_end = 0;
  int num_outputs = 1;
  int num_features = 0;  // the rows' columns
  // The players (PathLayout::player_of: null for the features, else per feature its group) and
  // their count: slots and output columns are players.
  const int32_t* player_of = nullptr;
  int num_players = 0;
  int max_slots = 0;  // ExactMaxSlots
  TransformParams transform;
};

// Slots a pair may use: kMaxExactDifferingFeatures, or fewer when the call has fewer players.
GROVE_HD int ExactMaxSlots(int num_players) {
  return num_players < kMaxExactDifferingFeatures ? num_players : kMaxExactDifferingFeatures;
}

// The sizes, range and link of a call over `forest`'s rounds [begin, end) with `layout`'s players;
// the arrays (player_of included) are the caller's (host or device copies of the layout's and the
// forest's).
inline ExactArgs ExactCallArgs(const Forest& forest, const PathLayout& layout, int begin,
                               int end) {
  ExactArgs a;
  a.num_paths = static_cast<int64_t>(layout.paths.size());
  a.iteration_begin = begin;
  a.iteration_end = end;
  a.num_outputs = forest.num_outputs;
  a.num_features = forest.num_features;
  a.num_players = layout.num_players;
  a.max_slots = ExactMaxSlots(layout.num_players);
  a.transform = MakeTransformParams(forest, end - begin);
  return a;
}

// One team's scratch. Between pairs (and before the first) slot_of is all -1 and table and
// partial are all 0: every pair restores them.
struct ExactScratch {
  uint32_t* x_masks = nullptr;       // num_paths: the row's mask per path
  int32_t* slot_of = nullptr;        // num_players: the player's slot in the pair, or -1
  int32_t* slot_feature = nullptr;   // num_players: the slot's player
  double* partial = nullptr;         // team size x num_outputs: constant terms per member
  double* table = nullptr;           // 2^max_slots x num_outputs
};

// Entries of each ExactScratch array, for a team of `team_size`.
struct ExactScratchSizes {
  int64_t x_masks, slot_of, slot_feature, partial, table;
};
inline ExactScratchSizes ExactScratchSizesFor(int64_t num_paths, int num_players, int num_outputs,
                                              int team_size) {
  return {num_paths, num_players, num_players, int64_t{team_size} * num_outputs,
          (int64_t{1} << ExactMaxSlots(num_players)) * num_outputs};
}

GROVE_HD bool ExactPathInRange(const ExactArgs& a, int64_t p) {
  const int it = a.paths[p].iteration;
  return it >= a.iteration_begin && it < a.iteration_end;
}

// The row's mask per path (0 for paths outside the iteration range).
template <typename Team, typename Row>
GROVE_HD void ExactRowMasks(const Team& team, const ExactArgs& a, const Row& row,
                            uint32_t* x_masks) {
  for (int64_t p = team.rank(); p < a.num_paths; p += team.size()) {
    const PathInfo& info = a.paths[p];
    x_masks[p] = ExactPathInRange(a, p)
                     ? RowPathMask(a.elements + info.element_begin, info.length, a.category_bits, row)
                     : 0u;
  }
  team.Sync();
}

// Margin (num_outputs values, base margin included) of the row whose masks are `masks`: the paths
// it matches fully, in path order.
GROVE_HD void ExactMarginFromMasks(const ExactArgs& a, const uint32_t* masks, double* margin) {
  for (int k = 0; k < a.num_outputs; ++k) margin[k] = a.base_margin[k];
  for (int64_t p = 0; p < a.num_paths; ++p) {
    const PathInfo& info = a.paths[p];
    if (!ExactPathInRange(a, p) || masks[p] != FullMask(info.length)) continue;
    for (int k = 0; k < info.width; ++k) margin[info.group + k] += a.values[info.value_begin + k];
  }
}

// Background row masks of path p, from the InterventionalLayout's masks and counts and the
// LinearizedLayout's rows per mask: z_masks[j * num_paths + p] for every background row j.
GROVE_HD void ScatterPathMasks(int64_t p, int64_t num_paths, int64_t n, const uint32_t* mask_begin,
                               const uint32_t* masks, const uint32_t* counts,
                               const uint16_t* mask_rows, uint32_t* z_masks) {
  const uint16_t* rows = mask_rows + p * n;
  for (uint32_t m = mask_begin[p]; m < mask_begin[p + 1]; ++m) {
    for (uint32_t i = 0; i < counts[m]; ++i) z_masks[int64_t{*rows++} * num_paths + p] = masks[m];
  }
}

namespace exact_internal {

// Slots of the term's differing elements (assigned on first appearance, by rank 0, the same on
// every member); the term's S_x / S_z slot masks. Slots past max_slots are only counted.
template <typename Team>
GROVE_HD void TermSlots(const Team& team, const ExactArgs& a, const ExactScratch& s,
                        const PathInfo& info, uint32_t x, uint32_t diff, int* d, uint32_t* sx,
                        uint32_t* sz) {
  *sx = 0;
  *sz = 0;
  for (uint32_t bits = diff; bits != 0; bits &= bits - 1) {
    const int e = LowestBit(bits);
    const int32_t f = PlayerColumn(a.player_of, a.elements[info.element_begin + e]);
    int32_t slot = s.slot_of[f];
    if (slot < 0) {
      slot = (*d)++;
      if (team.rank() == 0) {
        s.slot_of[f] = slot;
        s.slot_feature[slot] = f;
      }
    }
    if (slot < a.max_slots) ((x >> e) & 1u ? *sx : *sz) |= 1u << slot;
  }
}

// The term's value at its 2^|S_z| Möbius entries (members take distinct entries).
template <typename Team>
GROVE_HD void AddTerm(const Team& team, const ExactArgs& a, const PathInfo& info, uint32_t sx,
                      uint32_t sz, double* table) {
  const uint32_t subsets = 1u << PopCount32(sz);
  for (uint32_t u = team.rank(); u < subsets; u += team.size()) {
    const double sign = (PopCount32(u) & 1) ? -1.0 : 1.0;
    double* t = table + static_cast<int64_t>(sx | DepositBits(u, sz)) * a.num_outputs + info.group;
    for (int k = 0; k < info.width; ++k) t[k] += sign * a.values[info.value_begin + k];
  }
}

// Step 1 and 2 over every path; returns d (the pair's differing features).
template <typename Team>
GROVE_HD int CollectTerms(const Team& team, const ExactArgs& a, const ExactScratch& s,
                          const uint32_t* x, const uint32_t* z) {
  double* partial = s.partial + team.rank() * a.num_outputs;
  int d = 0;
  for (int64_t base = 0; base < a.num_paths; base += team.size()) {
    const int64_t p = base + team.rank();
    uint32_t xm = 0, diff = 0;
    bool term = false;
    if (p < a.num_paths && ExactPathInRange(a, p)) {
      const PathInfo& info = a.paths[p];
      const uint32_t full = FullMask(info.length);
      xm = x[p];
      if ((xm | z[p]) == full) {
        diff = (xm ^ z[p]) & full;
        term = diff != 0;
        if (!term) {
          for (int k = 0; k < info.width; ++k) partial[info.group + k] += a.values[info.value_begin + k];
        }
      }
    }
    for (uint32_t todo = team.Ballot(term); todo != 0; todo &= todo - 1) {
      const int r = LowestBit(todo);
      const uint32_t xr = team.Broadcast(xm, r), dr = team.Broadcast(diff, r);
      const PathInfo& info = a.paths[base + r];
      uint32_t sx, sz;
      TermSlots(team, a, s, info, xr, dr, &d, &sx, &sz);
      team.Sync();
      if (d > a.max_slots) continue;
      AddTerm(team, a, info, sx, sz, s.table);
      team.Sync();
    }
  }
  return d;
}

// The constant of every hybrid (base margin + the members' constant terms) into partial[0..K) of
// rank 0; the other members' partials cleared.
template <typename Team>
GROVE_HD void ReduceConstant(const Team& team, const ExactArgs& a, const ExactScratch& s) {
  for (int k = 0; k < a.num_outputs; ++k) {
    double* mine = s.partial + team.rank() * a.num_outputs + k;
    const double total = team.Sum(*mine);
    *mine = team.rank() == 0 ? a.base_margin[k] + total : 0.0;
  }
  team.Sync();
}

// Step 3: table[S] = g(constant + sum over T ⊆ S of M[T]) for the 2^d subsets.
template <typename Team>
GROVE_HD void HybridOutputs(const Team& team, const ExactArgs& a, const ExactScratch& s, int d) {
  const int K = a.num_outputs;
  const uint32_t half = 1u << (d - 1);
  for (int i = 0; i < d; ++i) {
    for (uint32_t q = team.rank(); q < half; q += team.size()) {
      const uint32_t without = InsertZeroBit(q, i);
      double* to = s.table + static_cast<int64_t>(without | (1u << i)) * K;
      const double* from = s.table + static_cast<int64_t>(without) * K;
      for (int k = 0; k < K; ++k) to[k] += from[k];
    }
    team.Sync();
  }
  for (uint32_t h = team.rank(); h < (1u << d); h += team.size()) {
    double* m = s.table + static_cast<int64_t>(h) * K;
    for (int k = 0; k < K; ++k) m[k] += s.partial[k];
    TransformRow(a.transform, m, m);
  }
  team.Sync();
}

// Step 4: the pair's Shapley values, times `scale`, added by rank 0 to phi (num_outputs x f1).
template <typename Team>
GROVE_HD void AddShapley(const Team& team, const ExactArgs& a, const ExactScratch& s, int d,
                         double scale, double* phi) {
  const int K = a.num_outputs;
  const int64_t f1 = a.num_players + 1;
  const uint32_t half = 1u << (d - 1);
  for (int i = 0; i < d; ++i) {
    const uint32_t bit = 1u << i;
    const int32_t feature = s.slot_feature[i];
    for (int k = 0; k < K; ++k) {
      double part = 0;
      for (uint32_t q = team.rank(); q < half; q += team.size()) {
        const uint32_t without = InsertZeroBit(q, i);
        const int size = PopCount32(without);
        part += a.weights[(d - size) * kInterventionalWeightSide + size] *
                (s.table[static_cast<int64_t>(without | bit) * K + k] -
                 s.table[static_cast<int64_t>(without) * K + k]);
      }
      const double total = team.Sum(part);
      if (team.rank() == 0) phi[k * f1 + feature] += scale * total;
    }
  }
}

// Step 5: the pair's interaction values (half the index), times `scale`, added by rank 0 to inter
// (num_outputs x f1 x f1, off-diagonal).
template <typename Team>
GROVE_HD void AddInteractionIndex(const Team& team, const ExactArgs& a, const ExactScratch& s,
                                  int d, double scale, double* inter) {
  const int K = a.num_outputs;
  const int64_t f1 = a.num_players + 1;
  const uint32_t quarter = d >= 2 ? 1u << (d - 2) : 0u;
  for (int i = 0; i < d; ++i) {
    for (int j = i + 1; j < d; ++j) {
      const uint32_t bi = 1u << i, bj = 1u << j;
      const int64_t fi = s.slot_feature[i], fj = s.slot_feature[j];
      for (int k = 0; k < K; ++k) {
        double part = 0;
        for (uint32_t q = team.rank(); q < quarter; q += team.size()) {
          const uint32_t without = InsertZeroBit(InsertZeroBit(q, i), j);
          const int size = PopCount32(without);
          const double* t = s.table + k;
          const int64_t at = static_cast<int64_t>(without) * K;
          const int64_t at_i = static_cast<int64_t>(without | bi) * K;
          const int64_t at_j = static_cast<int64_t>(without | bj) * K;
          const int64_t at_ij = static_cast<int64_t>(without | bi | bj) * K;
          part += a.weights[(d - 1 - size) * kInterventionalWeightSide + size] / 2 *
                  (t[at_ij] - t[at_i] - t[at_j] + t[at]);
        }
        const double total = team.Sum(part);
        if (team.rank() == 0) {
          double* m = inter + k * f1 * f1;
          m[fi * f1 + fj] += scale * total;
          m[fj * f1 + fi] += scale * total;
        }
      }
    }
  }
}

// Restores the scratch invariants after a pair that used d slots.
template <typename Team>
GROVE_HD void ClearPair(const Team& team, const ExactArgs& a, const ExactScratch& s, int d) {
  team.Sync();
  const int used = d < a.max_slots ? d : a.max_slots;
  const int64_t entries = (int64_t{1} << used) * a.num_outputs;
  for (int64_t i = team.rank(); i < entries; i += team.size()) s.table[i] = 0.0;
  for (int i = team.rank(); i < d; i += team.size()) s.slot_of[s.slot_feature[i]] = -1;
  for (int k = 0; k < a.num_outputs; ++k) s.partial[team.rank() * a.num_outputs + k] = 0.0;
  team.Sync();
}

}  // namespace exact_internal

// Adds scale x the exact Shapley values of pair (x, z) (their masks per path: x_masks from
// ExactRowMasks, z_masks likewise) to phi (num_outputs x (num_features + 1); bias columns left),
// and with `inter` (may be null; num_outputs x f1 x f1) their interaction values off the diagonal.
// Returns d, the features the pair's hybrids part on; when d > a.max_slots nothing is added (the
// caller refuses the pair). Every member of the team calls it with the same arguments.
template <typename Team>
GROVE_HD int ExplainExactPair(const Team& team, const ExactArgs& a, const ExactScratch& s,
                              const uint32_t* x_masks, const uint32_t* z_masks, double scale,
                              double* phi, double* inter = nullptr) {
  namespace ei = exact_internal;
  const int d = ei::CollectTerms(team, a, s, x_masks, z_masks);
  if (d > 0 && d <= a.max_slots) {
    ei::ReduceConstant(team, a, s);
    ei::HybridOutputs(team, a, s, d);
    ei::AddShapley(team, a, s, d, scale, phi);
    if (inter != nullptr) ei::AddInteractionIndex(team, a, s, d, scale, inter);
  }
  ei::ClearPair(team, a, s, d);
  return d;
}

// One row against the whole background (z_masks: n rows of num_paths masks): adds the row's
// averaged SHAP values to phi (and interaction values to `inter` when not null). Returns the
// first background row whose pair differs on more than a.max_slots features (*too_many: its d),
// or -1.
template <typename Team, typename Row>
GROVE_HD int64_t ExplainExactRow(const Team& team, const ExactArgs& a, const ExactScratch& s,
                                 const Row& row, const uint32_t* z_masks, int64_t n, double* phi,
                                 int* too_many, double* inter = nullptr) {
  ExactRowMasks(team, a, row, s.x_masks);
  const double scale = 1.0 / static_cast<double>(n);
  for (int64_t j = 0; j < n; ++j) {
    const int d = ExplainExactPair(team, a, s, s.x_masks, z_masks + j * a.num_paths, scale, phi,
                                   inter);
    if (d > a.max_slots) {
      *too_many = d;
      return j;
    }
  }
  return -1;
}

}  // namespace grove
