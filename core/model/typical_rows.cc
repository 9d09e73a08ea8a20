#include "core/model/typical_rows.h"

#include <algorithm>
#include <bit>
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

// Categories of a categorical feature that a row's walks track (its splits' bitsets name no more
// in the models seen); rows never take a category past them.
constexpr int kMaxTrackedCategories = 4096;

// Per categorical feature, the categories 0..universe-1 its splits' bitsets name, as a span of
// 64-bit words in a row's `allowed` pool (universe 0: not tracked); `all` has every one allowed.
struct CategoryLayout {
  std::vector<int> universe, word_begin;
  std::vector<uint64_t> all;
  explicit CategoryLayout(const Forest& f)
      : universe(f.num_features, 0), word_begin(f.num_features, 0) {
    for (const Node& n : f.nodes) {
      if (n.is_leaf() || !n.is_categorical()) continue;
      int& u = universe[n.feature];
      u = std::max(u, static_cast<int>(std::min<uint32_t>(n.aux, kMaxTrackedCategories / 32) * 32));
    }
    for (int c = 0; c < f.num_features; ++c) {
      word_begin[c] = static_cast<int>(all.size());
      for (int v = 0; v < universe[c]; v += 64) {
        const int rest = universe[c] - v;
        all.push_back(rest >= 64 ? ~uint64_t{0} : (uint64_t{1} << rest) - 1);
      }
    }
  }
};

// The values row r may take for each feature: [lo, hi) (x < threshold goes left), and for
// categorical features the categories still allowed (bit v of the feature's words).
struct Intervals {
  std::vector<float> lo, hi;
  std::vector<uint64_t> allowed;
  Intervals(int features, const CategoryLayout& cats)
      : lo(features, -std::numeric_limits<float>::infinity()),
        hi(features, std::numeric_limits<float>::infinity()),
        allowed(cats.all) {}
};

// A categorical split on a tracked feature: the side by cover where categories still allowed go
// there, else the side they all go to; the allowed set shrinks to that side's categories. The
// split's set is word-wise CategoricalGoesLeft for the whole categories 0..universe-1 (each in the
// bitset or past it, so not in the set; a category is never NaN).
bool CategoricalSide(const Forest& f, const Node& n, const CategoryLayout& cats, bool by_cover,
                     Intervals& iv) {
  const int c = n.feature;
  const int words = (cats.universe[c] + 63) / 64;
  uint64_t* allowed = iv.allowed.data() + cats.word_begin[c];
  const uint32_t* bits = f.category_bits.data() + n.payload;
  const bool in_set_left = (n.flags & kNodeCategoryInSetGoesLeft) != 0;
  bool any_left = false, any_right = false;
  // left[w]: the allowed categories of word w that go left.
  uint64_t left[kMaxTrackedCategories / 64];
  for (int w = 0; w < words; ++w) {
    const uint32_t lo = 2u * w < n.aux ? bits[2 * w] : 0u;
    const uint32_t hi = 2u * w + 1 < n.aux ? bits[2 * w + 1] : 0u;
    const uint64_t in_set = lo | (uint64_t{hi} << 32);
    left[w] = allowed[w] & (in_set_left ? in_set : ~in_set);
    any_left |= left[w] != 0;
    any_right |= (allowed[w] & ~left[w]) != 0;
  }
  const bool go_left = any_left && (by_cover || !any_right);
  for (int w = 0; w < words; ++w) allowed[w] = go_left ? left[w] : allowed[w] & ~left[w];
  return go_left;
}

// Walks one tree, narrowing `iv` at every split the row's interval (or allowed categories) leaves
// open.
void Walk(const Forest& f, const Tree& t, const CategoryLayout& cats, Intervals& iv, uint64_t* s) {
  const Node* nodes = f.nodes.data() + t.node_begin;
  int32_t i = 0;
  while (!nodes[i].is_leaf()) {
    const Node& n = nodes[i];
    const double cl = nodes[n.left].cover, cr = nodes[n.right].cover;
    const bool by_cover = Uniform(s) * (cl + cr) < cl || cl + cr <= 0;
    if (n.is_categorical()) {
      const bool tracked = cats.universe[n.feature] > 0;
      i = (tracked ? CategoricalSide(f, n, cats, by_cover, iv) : by_cover) ? n.left : n.right;
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

// One of the allowed categories of `words` words, uniformly (the walks leave at least one).
float CategoryIn(const uint64_t* allowed, int words, uint64_t* s) {
  int count = 0;
  for (int w = 0; w < words; ++w) count += std::popcount(allowed[w]);
  if (count == 0) return 0.0f;
  int k = static_cast<int>(Next(s) % static_cast<uint64_t>(count));
  for (int w = 0; w < words; ++w) {
    for (uint64_t m = allowed[w]; m != 0; m &= m - 1) {
      if (k-- == 0) return static_cast<float>(w * 64 + std::countr_zero(m));
    }
  }
  return 0.0f;
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
  const CategoryLayout cats(forest);
  const int walks = max_trees_per_row > 0 ? std::min(nt, max_trees_per_row) : nt;
  std::vector<float> x(static_cast<size_t>(rows) * nf);
  uint64_t s = seed * 0x2545F4914F6CDD1Dull + 1;
  for (int64_t r = 0; r < rows; ++r) {
    Intervals iv(nf, cats);
    const int first = nt > 0 ? static_cast<int>(Next(&s) % nt) : 0;
    for (int k = 0; k < walks; ++k) Walk(forest, forest.trees[(first + k) % nt], cats, iv, &s);
    for (int c = 0; c < nf; ++c) {
      x[static_cast<size_t>(r) * nf + c] =
          cats.universe[c] > 0
              ? CategoryIn(iv.allowed.data() + cats.word_begin[c], (cats.universe[c] + 63) / 64, &s)
              : ValueIn(iv.lo[c], iv.hi[c], fallback[c], &s);
    }
  }
  return x;
}

}  // namespace grove
