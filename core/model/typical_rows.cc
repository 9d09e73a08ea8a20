#include "core/model/typical_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace grove {
namespace {

uint64_t Next(uint64_t* s) {  // splitmix64
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Uniform(uint64_t* s) { return static_cast<double>(Next(s) >> 11) * 0x1.0p-53; }

// The values row r may take for each feature: [lo, hi) (x < threshold goes left).
struct Intervals {
  std::vector<float> lo, hi;
  explicit Intervals(int features)
      : lo(features, -std::numeric_limits<float>::infinity()),
        hi(features, std::numeric_limits<float>::infinity()) {}
};

// Walks one tree, narrowing `iv` at every split the row's interval leaves open.
void Walk(const Forest& f, const Tree& t, Intervals& iv, uint64_t* s) {
  const Node* nodes = f.nodes.data() + t.node_begin;
  int32_t i = 0;
  while (!nodes[i].is_leaf()) {
    const Node& n = nodes[i];
    const double cl = nodes[n.left].cover, cr = nodes[n.right].cover;
    const bool by_cover = Uniform(s) * (cl + cr) < cl || cl + cr <= 0;
    if (n.is_categorical()) {
      i = by_cover ? n.left : n.right;
      continue;
    }
    const int c = n.feature;
    bool left;
    if (iv.hi[c] <= n.threshold) {
      left = true;
    } else if (iv.lo[c] >= n.threshold) {
      left = false;
    } else {
      left = by_cover;
      (left ? iv.hi[c] : iv.lo[c]) = n.threshold;
    }
    i = left ? n.left : n.right;
  }
}

// A value in [lo, hi): the interval's own bounds where one is open, else uniform inside.
float ValueIn(float lo, float hi, float fallback, uint64_t* s) {
  const bool open_lo = std::isinf(lo), open_hi = std::isinf(hi);
  if (open_lo && open_hi) return fallback;
  if (open_lo) return std::nextafter(hi, -std::numeric_limits<float>::infinity());
  if (open_hi) return lo;
  const float v = lo + static_cast<float>(Uniform(s)) * (hi - lo);
  return v < hi && v >= lo ? v : lo;
}

}  // namespace

std::vector<float> TypicalRows(const Forest& forest, int64_t rows, uint64_t seed,
                               int max_trees_per_row) {
  const int nf = forest.num_features;
  const int nt = static_cast<int>(forest.trees.size());
  // Per feature, one threshold of its numeric splits for values no walk constrains.
  std::vector<float> fallback(nf, 0.0f);
  std::vector<char> seen(nf, 0);
  for (const Node& n : forest.nodes) {
    if (n.is_leaf() || n.is_categorical() || seen[n.feature]) continue;
    fallback[n.feature] = n.threshold;
    seen[n.feature] = 1;
  }
  const int walks = max_trees_per_row > 0 ? std::min(nt, max_trees_per_row) : nt;
  std::vector<float> x(static_cast<size_t>(rows) * nf);
  uint64_t s = seed * 0x2545F4914F6CDD1Dull + 1;
  for (int64_t r = 0; r < rows; ++r) {
    Intervals iv(nf);
    const int first = nt > 0 ? static_cast<int>(Next(&s) % nt) : 0;
    for (int k = 0; k < walks; ++k) Walk(forest, forest.trees[(first + k) % nt], iv, &s);
    for (int c = 0; c < nf; ++c) {
      x[static_cast<size_t>(r) * nf + c] = ValueIn(iv.lo[c], iv.hi[c], fallback[c], &s);
    }
  }
  return x;
}

}  // namespace grove
