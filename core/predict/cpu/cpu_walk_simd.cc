#include "core/predict/cpu/cpu_walk_simd.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/predict/cpu/cpu_row_layout.h"
#include "core/predict/cpu/cpu_walk.h"

namespace grove::cpu {
namespace {

constexpr int kWidth = kSimdRows;
constexpr int kMaxVectors = kMaxLanes / kWidth;
constexpr int kDenseVectors = kDenseLanes / kWidth;

// Only intrinsics inside these functions: an inline function of another header compiled here
// with AVX-512 could be the copy the linker keeps for the whole program.

// The node fields the walk gathers, addressed in 8-byte units from the first node (a node is two
// units), so up to 2^30 nodes.
struct Fields {
  const int* feature;
  const float* threshold;
  const int* left;
  const int* bits;
};

Fields FieldsOf(const CpuNode* all) {
  return {reinterpret_cast<const int*>(&all->feature), &all->threshold,
          reinterpret_cast<const int*>(&all->left), reinterpret_cast<const int*>(&all->bits)};
}

// The categorical sets of a model (CpuForest::category_words and category_truncate). The walks
// that decide categorical splits are instances with kCat true, taken where the model has sets
// (`words` not nullptr); the others test no split for one.
struct CategorySets {
  const int* words = nullptr;
  bool truncate = false;
  int log2_stride = 1;  // words per set (CpuForest::category_stride), as a shift
  int limit = 64;       // categories below it are in a set's words (CpuForest::category_limit)
};

CategorySets SetsOf(const CpuForest& cf) {
  CategorySets s;
  s.words = reinterpret_cast<const int*>(cf.category_words());
  s.truncate = cf.category_truncate();
  s.log2_stride = __builtin_ctz(static_cast<unsigned>(cf.category_stride()));
  s.limit = cf.category_limit();
  return s;
}

// Which of the lanes `is_cat`, categorical splits whose sets are `set` (indices into the words
// of `sets`), send their value `x` left: CategoricalGoesLeft for a set of the categories below
// the limit that go left, a value outside them or invalid under the model's rule going left
// where `outside_left`. A missing value is not decided here (the callers apply the NaN
// direction).
__attribute__((target("avx512f"))) inline __mmask16 CategoryLeft512(__mmask16 is_cat,
                                                                   __mmask16 outside_left,
                                                                   __m512i set, __m512 x,
                                                                   const CategorySets& sets) {
  // Truncated toward zero, as (int)x: a value in (-1, 0) is category 0, which only LightGBM's
  // rule admits; NaN and values beyond the int range become 0x80000000, past every limit.
  const __m512i c = _mm512_cvttps_epi32(x);
  __mmask16 valid = _mm512_mask_cmplt_epu32_mask(is_cat, c, _mm512_set1_epi32(sets.limit));
  if (!sets.truncate) valid = _mm512_mask_cmp_ps_mask(valid, x, _mm512_setzero_ps(), _CMP_GE_OQ);
  const __m512i word =
      _mm512_add_epi32(_mm512_sll_epi32(set, _mm_cvtsi32_si128(sets.log2_stride)),
                       _mm512_srli_epi32(c, 5));
  const __m512i w =
      _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, word, sets.words, 4);
  const __m512i shifted = _mm512_srlv_epi32(w, _mm512_and_si512(c, _mm512_set1_epi32(31)));
  const __mmask16 listed = _mm512_mask_test_epi32_mask(valid, shifted, _mm512_set1_epi32(1));
  return listed | (is_cat & static_cast<__mmask16>(~valid) & outside_left);
}

// The decisions of sixteen lanes in a walk that decides categorical splits: `go_left` the
// numeric compare x < t of every lane, `flags` the lanes' node words (CpuNode::bits, or
// DenseNode::feature) with the bits kCatBit, kOutsideBit and kNanBit. A categorical lane's
// outcome replaces its compare; a missing value then takes its NaN direction whatever the split.
template <uint32_t kCatBit, uint32_t kOutsideBit, uint32_t kNanBit>
__attribute__((target("avx512f"))) inline __mmask16 WithCategories512(__mmask16 go_left,
                                                                     __m512i flags, __m512 t,
                                                                     __m512 x, bool nan,
                                                                     const CategorySets& sets) {
  const __mmask16 is_cat =
      _mm512_test_epi32_mask(flags, _mm512_set1_epi32(static_cast<int>(kCatBit)));
  if (is_cat) {
    const __mmask16 outside = _mm512_mask_test_epi32_mask(
        is_cat, flags, _mm512_set1_epi32(static_cast<int>(kOutsideBit)));
    go_left = (go_left & static_cast<__mmask16>(~is_cat)) |
              CategoryLeft512(is_cat, outside, _mm512_castps_si512(t), x, sets);
  }
  if (nan) {
    const __mmask16 missing = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    go_left = (go_left & static_cast<__mmask16>(~missing)) |
              _mm512_mask_test_epi32_mask(missing, flags,
                                          _mm512_set1_epi32(static_cast<int>(kNanBit)));
  }
  return go_left;
}

// One level for sixteen lanes: `base` the lanes' trees' first nodes (8-byte units), `row` their
// rows' offsets in the block (floats), `at` their byte offsets in their trees (CpuNode::left).
template <bool kCat>
__attribute__((target("avx512f"))) inline __m512i Step512(const Fields& n, __m512i base,
                                                          __m512i row, __m512i at,
                                                          const float* block, bool nan,
                                                          const CategorySets& sets) {
  const __m512i unit = _mm512_add_epi32(base, _mm512_srli_epi32(at, 3));
  const __m512i f = _mm512_i32gather_epi32(unit, n.feature, 8);
  const __m512 t = _mm512_i32gather_ps(unit, n.threshold, 8);
  const __m512i l = _mm512_i32gather_epi32(unit, n.left, 8);
  const __m512 x = _mm512_i32gather_ps(_mm512_add_epi32(row, f), block, 4);
  __mmask16 go_left = _mm512_cmp_ps_mask(x, t, _CMP_LT_OQ);
  if constexpr (kCat) {
    const __m512i b = _mm512_i32gather_epi32(unit, n.bits, 8);
    go_left = WithCategories512<kCpuCategory, kCpuOutsideLeft, kCpuNanLeft>(go_left, b, t, x, nan,
                                                                          sets);
  } else if (nan) {
    const __mmask16 missing = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    if (missing) {
      const __m512i b =
          _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), missing, unit, n.bits, 8);
      go_left |= _mm512_mask_test_epi32_mask(missing, b,
                                             _mm512_set1_epi32(static_cast<int>(kCpuNanLeft)));
    }
  }
  return _mm512_mask_mov_epi32(
      _mm512_add_epi32(l, _mm512_set1_epi32(static_cast<int>(sizeof(CpuNode)))), go_left, l);
}

// Whether every lane of at[0, vectors) is at a leaf.
__attribute__((target("avx512f"))) inline bool AllLeaves512(const Fields& n, const __m512i* base,
                                                            const __m512i* at, int vectors) {
  for (int v = 0; v < vectors; ++v) {
    const __m512i unit = _mm512_add_epi32(base[v], _mm512_srli_epi32(at[v], 3));
    const __m512i b = _mm512_i32gather_epi32(unit, n.bits, 8);
    if (_mm512_test_epi32_mask(b, _mm512_set1_epi32(static_cast<int>(kCpuLeaf))) != 0xFFFF) {
      return false;
    }
  }
  return true;
}

template <bool kCat>
__attribute__((target("avx512f"))) void Walk512(const CpuNode* all, const int32_t* lane_node,
                                                const int32_t* lane_row, int vectors, int depth,
                                                bool check_leaves, const float* block, bool nan,
                                                const CategorySets& sets, int32_t* at_out) {
  const Fields n = FieldsOf(all);
  __m512i base[kMaxVectors], row[kMaxVectors], at[kMaxVectors];
  for (int v = 0; v < vectors; ++v) {
    base[v] = _mm512_loadu_si512(lane_node + v * kWidth);
    row[v] = _mm512_loadu_si512(lane_row + v * kWidth);
    at[v] = _mm512_setzero_si512();
  }
  for (int d = 0; d < depth; ++d) {
    for (int v = 0; v < vectors; ++v) {
      at[v] = Step512<kCat>(n, base[v], row[v], at[v], block, nan, sets);
    }
    if (check_leaves && (d & 3) == 3 && AllLeaves512(n, base, at, vectors)) break;
  }
  for (int v = 0; v < vectors; ++v) {
    _mm512_storeu_si512(at_out + v * kWidth, _mm512_srli_epi32(at[v], 4));
  }
}

// Row r's offset in the block (r * stride) for the rows of each of `row_vectors` vectors.
__attribute__((target("avx512f"))) inline void RowOffsets512(int32_t stride, int row_vectors,
                                                             __m512i* row_of) {
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  for (int v = 0; v < row_vectors; ++v) {
    row_of[v] = _mm512_mullo_epi32(_mm512_add_epi32(lane, _mm512_set1_epi32(v * kWidth)),
                                   _mm512_set1_epi32(stride));
  }
}

// acc[0, 16) += values[index[lane]]: sixteen rows' leaf values added to their margins.
__attribute__((target("avx512f"))) inline void AddLeaves512(const double* values, __m512i index,
                                                            double* acc) {
  const __m512d lo = _mm512_i32gather_pd(_mm512_castsi512_si256(index), values, 8);
  const __m512d hi = _mm512_i32gather_pd(_mm512_extracti64x4_epi64(index, 1), values, 8);
  _mm512_storeu_pd(acc, _mm512_add_pd(_mm512_loadu_pd(acc), lo));
  _mm512_storeu_pd(acc + 8, _mm512_add_pd(_mm512_loadu_pd(acc + 8), hi));
}

// AddLeaves512 from float values: one gather of sixteen, widened exactly.
__attribute__((target("avx512f"))) inline void AddLeaves512(const float* values, __m512i index,
                                                            double* acc) {
  const __m512 v = _mm512_i32gather_ps(index, values, 4);
  const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
  const __m512d hi =
      _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  _mm512_storeu_pd(acc, _mm512_add_pd(_mm512_loadu_pd(acc), lo));
  _mm512_storeu_pd(acc + 8, _mm512_add_pd(_mm512_loadu_pd(acc + 8), hi));
}

// out[0, 16) = values[index[lane]].
__attribute__((target("avx512f"))) inline void GatherValues512(const double* values,
                                                               __m512i index, double* out) {
  _mm512_storeu_pd(out, _mm512_i32gather_pd(_mm512_castsi512_si256(index), values, 8));
  _mm512_storeu_pd(out + 8, _mm512_i32gather_pd(_mm512_extracti64x4_epi64(index, 1), values, 8));
}

// The vectors of a walk over groups of trees (WalkAdd512, WalkAddDense512): the offsets of each
// row vector's rows in the block, and per lane vector u = g * row_vectors + v (tree g of the
// group over row vector v) its tree's start, its rows' offsets and its position in the tree.
struct GroupLanes512 {
  __m512i row_of[kDenseVectors];
  __m512i base[kDenseVectors], row[kDenseVectors], at[kDenseVectors];
};

// Starts tree `g` of a group: vector g * row_vectors + v walks row vector v (offsets row_of[v])
// from node index `first`, at position 0.
__attribute__((target("avx512f"))) inline void StartTree512(int g, int row_vectors, __m512i first,
                                                            GroupLanes512* l) {
  for (int v = 0; v < row_vectors; ++v) {
    l->base[g * row_vectors + v] = first;
    l->row[g * row_vectors + v] = l->row_of[v];
    l->at[g * row_vectors + v] = _mm512_setzero_si512();
  }
}

// WalkAndAddSimd's loop: rows in vectors of sixteen; trees walked a few at a time so that four
// vectors are always in flight (a level's gathers depend on the last level's: one vector alone
// would wait on them), then each tree's leaf values added in tree order.
template <bool kCat>
__attribute__((target("avx512f"))) void WalkAdd512(const CpuNode* all, const CpuTree* trees,
                                                   const int32_t* tree_ids, int num_trees,
                                                   const double* leaf_values, const float* block,
                                                   int32_t stride, int rows, bool nan,
                                                   const CategorySets& sets, double* margins,
                                                   int64_t out_stride) {
  const Fields n = FieldsOf(all);
  const int row_vectors = rows / kWidth;  // at most kMaxVectors: the node walk takes kMaxLanes
  const int per_group = std::max(1, kMaxVectors / row_vectors);  // trees walked together
  GroupLanes512 l;
  RowOffsets512(stride, row_vectors, l.row_of);
  for (int t0 = 0; t0 < num_trees; t0 += per_group) {
    const int group = per_group < num_trees - t0 ? per_group : num_trees - t0;
    const int vectors = group * row_vectors;
    int depth = 0;
    for (int g = 0; g < group; ++g) {
      const CpuTree& tree = trees[tree_ids[t0 + g]];
      depth = tree.depth > depth ? tree.depth : depth;
      const __m512i first = _mm512_set1_epi32(static_cast<int>(tree.node_begin));
      StartTree512(g, row_vectors, _mm512_add_epi32(first, first), &l);
    }
    const bool check_leaves = depth > kCheckDepth;
    for (int d = 0; d < depth; ++d) {
      for (int u = 0; u < vectors; ++u) {
        l.at[u] = Step512<kCat>(n, l.base[u], l.row[u], l.at[u], block, nan, sets);
      }
      if (check_leaves && (d & 3) == 3 && AllLeaves512(n, l.base, l.at, vectors)) break;
    }
    // Each row's leaf value (tree weight included) added to its output's column, in tree order.
    for (int g = 0; g < group; ++g) {
      const CpuTree& tree = trees[tree_ids[t0 + g]];
      const __m512i first = _mm512_set1_epi32(static_cast<int>(tree.node_begin));
      double* acc = margins + static_cast<int64_t>(tree.group) * out_stride;
      for (int v = 0; v < row_vectors; ++v) {
        const __m512i node =
            _mm512_add_epi32(first, _mm512_srli_epi32(l.at[g * row_vectors + v], 4));
        AddLeaves512(leaf_values, node, acc + v * kWidth);
      }
    }
  }
}

// Sixteen DenseNodes held as eight in `lo` and eight in `hi`, separated into their fields.
__attribute__((target("avx512f"))) inline void Split512(__m512i lo, __m512i hi, __m512* threshold,
                                                        __m512i* feature) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  *threshold = _mm512_castsi512_ps(_mm512_permutex2var_epi32(lo, even, hi));
  *feature = _mm512_permutex2var_epi32(lo, odd, hi);
}

// Sixteen DenseNodes, `node` their indices: two gathers of eight 8-byte nodes (a node's threshold
// and feature come from one load) instead of one gather per field, the fields then separated.
__attribute__((target("avx512f"))) inline void GatherDense512(const DenseNode* dense, __m512i node,
                                                              __m512* threshold,
                                                              __m512i* feature) {
  const long long* base = reinterpret_cast<const long long*>(dense);
  const __m512i lo = _mm512_i32gather_epi64(_mm512_castsi512_si256(node), base, 8);
  const __m512i hi = _mm512_i32gather_epi64(_mm512_extracti64x4_epi64(node, 1), base, 8);
  Split512(lo, hi, threshold, feature);
}

// The next positions in the complete layout of sixteen lanes at positions `at` whose nodes are
// (t, fn) and whose values are x: 2p + 1 + right = 2p + 2 - left; bit 31 of fn set
// (kDenseNanLeft), a missing value goes left.
template <bool kCat>
__attribute__((target("avx512f"))) inline __m512i DenseNext512(__m512i at, __m512 t, __m512i fn,
                                                               __m512 x, bool nan,
                                                               const CategorySets& sets) {
  __mmask16 go_left = _mm512_cmp_ps_mask(x, t, _CMP_LT_OQ);
  if constexpr (kCat) {
    go_left = WithCategories512<kDenseCategory, kDenseOutsideLeft, kDenseNanLeft>(go_left, fn, t,
                                                                                x, nan, sets);
  } else if (nan) {
    const __mmask16 missing = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    go_left |= _mm512_mask_cmplt_epi32_mask(missing, fn, _mm512_setzero_si512());
  }
  const __m512i next = _mm512_add_epi32(_mm512_add_epi32(at, at), _mm512_set1_epi32(2));
  return _mm512_mask_sub_epi32(next, go_left, next, _mm512_set1_epi32(1));
}

// The top this many levels of the complete layout (1 << (L - 1) = 128 nodes in the last) are
// selected from registers: per field, one permute of two 16-lane halves for a level of up to
// kLevelPartNodes nodes, and for 64 or 128 nodes one per part and blends between the parts.
// Deeper levels gather the node (two gathers), which measured slower than selecting it
// (docs/benchmarks/prediction-cpu.md).
constexpr int kRegisterLevels = 8;
constexpr int kLevelPartNodes = 32;
static_assert((1 << (kRegisterLevels - 1)) <= 4 * kLevelPartNodes,
              "WideLevel512 holds at most four parts");

// Nodes [first, first + 8) of a level of `count` nodes as eight 8-byte lanes; zero past `count`.
__attribute__((target("avx512f"))) inline __m512i LevelPart512(const DenseNode* level, int count,
                                                               int first) {
  const int n = std::clamp(count - first, 0, 8);
  if (n == 0) return _mm512_setzero_si512();
  const __mmask8 m = static_cast<__mmask8>((1u << n) - 1u);
  return _mm512_maskz_loadu_epi64(m, reinterpret_cast<const long long*>(level) + first);
}

// The `count` (1 .. 32, a power of two) nodes of one level starting at `level`, as thresholds and
// feature words of nodes [0, 16) in *_lo and [16, 32) in *_hi; lanes past `count` are zero.
// Masked loads: nothing past the level is read (the last tree's level may end the array).
__attribute__((target("avx512f"))) inline void LoadLevel512(const DenseNode* level, int count,
                                                            __m512* t_lo, __m512* t_hi,
                                                            __m512i* f_lo, __m512i* f_hi) {
  Split512(LevelPart512(level, count, 0), LevelPart512(level, count, 8), t_lo, f_lo);
  if (count > 16) {
    Split512(LevelPart512(level, count, 16), LevelPart512(level, count, 24), t_hi, f_hi);
  } else {
    *t_hi = _mm512_setzero_ps();
    *f_hi = _mm512_setzero_si512();
  }
}

// A level of 64 or 128 nodes: two or four parts of 32 (LoadLevel512's halves each). Kept apart
// from the levels of up to 32 nodes so that those stay four plain registers (a struct for both
// keeps them in memory).
struct WideLevel512 {
  __m512 t[4][2];
  __m512i f[4][2];
  int parts = 0;
};

__attribute__((target("avx512f"))) inline void LoadWideLevel512(const DenseNode* level, int count,
                                                                WideLevel512* w) {
  w->parts = count / 32;
  for (int p = 0; p < w->parts; ++p) {
    LoadLevel512(level + 32 * p, 32, &w->t[p][0], &w->t[p][1], &w->f[p][0], &w->f[p][1]);
  }
}

// The nodes of sixteen lanes at positions i (relative to the level's first node) of a wide
// level: selected in every part by the low five bits of i, between parts by bits 5 and 6.
__attribute__((target("avx512f"))) inline void SelectWide512(const WideLevel512& w, __m512i i,
                                                             __m512* t, __m512i* fn) {
  const __mmask16 b5 = _mm512_test_epi32_mask(i, _mm512_set1_epi32(32));
  __m512 ta = _mm512_mask_blend_ps(b5, _mm512_permutex2var_ps(w.t[0][0], i, w.t[0][1]),
                                   _mm512_permutex2var_ps(w.t[1][0], i, w.t[1][1]));
  __m512i fa = _mm512_mask_blend_epi32(b5, _mm512_permutex2var_epi32(w.f[0][0], i, w.f[0][1]),
                                       _mm512_permutex2var_epi32(w.f[1][0], i, w.f[1][1]));
  if (w.parts == 4) {
    const __m512 tb = _mm512_mask_blend_ps(b5, _mm512_permutex2var_ps(w.t[2][0], i, w.t[2][1]),
                                           _mm512_permutex2var_ps(w.t[3][0], i, w.t[3][1]));
    const __m512i fb =
        _mm512_mask_blend_epi32(b5, _mm512_permutex2var_epi32(w.f[2][0], i, w.f[2][1]),
                                _mm512_permutex2var_epi32(w.f[3][0], i, w.f[3][1]));
    const __mmask16 b6 = _mm512_test_epi32_mask(i, _mm512_set1_epi32(64));
    ta = _mm512_mask_blend_ps(b6, ta, tb);
    fa = _mm512_mask_blend_epi32(b6, fa, fb);
  }
  *t = ta;
  *fn = fa;
}

// Walks on below the complete layout: the (tree, row) lanes of a WalkAddDense512 call whose
// paths go on (at a position of the last level where CpuForest::dense_next >= 0), packed into
// whole vectors. Few lanes go on and their paths differ in length, so packing them keeps the
// vectors full where stepping the row vectors as they are would step mostly idle lanes; and a
// step's gathers wait on the last step's, so several vectors walk at once.
struct Continuations {
  static constexpr int kMax = kTreeChunk * kMaxLanes;
  // Per lane: its byte offset in its tree (CpuNode::left's unit), its row's offset in the block,
  // its tree's first node in 8-byte units, and its entry of the call's leaf values.
  int32_t at[kMax + kWidth], row[kMax + kWidth], base[kMax + kWidth], out[kMax + kWidth];
  int count = 0;
};

// Appends the lanes of one tree's row vectors that go on: `leaf` the positions they reached
// (indices into `next`), `row_of` their rows' offsets, `out` the entry of the call's leaf values
// of each vector's first row.
__attribute__((target("avx512f"))) inline void CollectContinuations512(
    const CpuTree& tree, const int32_t* next, const __m512i* leaf, const __m512i* row_of,
    int row_vectors, int32_t out, Continuations* c) {
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i base = _mm512_set1_epi32(static_cast<int>(2 * tree.node_begin));
  for (int v = 0; v < row_vectors; ++v) {
    const __m512i at = _mm512_i32gather_epi32(leaf[v], next, 4);
    const __mmask16 goes_on = _mm512_cmpge_epi32_mask(at, _mm512_setzero_si512());
    if (goes_on == 0) continue;
    // Compressed in registers and stored whole (a compressing store to memory is microcoded on
    // some processors); the arrays' last kWidth entries take what lies past the packed lanes.
    const int n = c->count;
    _mm512_storeu_si512(c->at + n, _mm512_maskz_compress_epi32(goes_on, at));
    _mm512_storeu_si512(c->row + n, _mm512_maskz_compress_epi32(goes_on, row_of[v]));
    _mm512_storeu_si512(c->base + n, _mm512_maskz_compress_epi32(goes_on, base));
    const __m512i out_index = _mm512_add_epi32(lane, _mm512_set1_epi32(out + v * kWidth));
    _mm512_storeu_si512(c->out + n, _mm512_maskz_compress_epi32(goes_on, out_index));
    c->count = n + __builtin_popcount(goes_on);
  }
}

// Vectors of Continuations walked at once.
constexpr int kContinueVectors = 8;

// Walks every lane of `c` in its tree's CpuNodes (Step512) until it stands at a leaf (a step
// that leaves it where it was: a leaf routes to itself), and sets its entry of `values` to that
// leaf's value (tree weight included).
template <bool kCat>
__attribute__((target("avx512f"))) void WalkContinuations512(const Fields& n, Continuations* c,
                                                             const double* leaf_values,
                                                             const float* block, bool nan,
                                                             const CategorySets& sets,
                                                             double* values) {
  const int count = c->count;
  if (count == 0) return;
  const int vectors = (count + kWidth - 1) / kWidth;
  // Lanes past the last repeat lane 0 (valid addresses, results not kept).
  for (int i = count; i < vectors * kWidth; ++i) {
    c->at[i] = c->at[0];
    c->row[i] = c->row[0];
    c->base[i] = c->base[0];
  }
  for (int v0 = 0; v0 < vectors; v0 += kContinueVectors) {
    const int m = std::min(kContinueVectors, vectors - v0);
    __m512i at[kContinueVectors], row[kContinueVectors], base[kContinueVectors];
    for (int v = 0; v < m; ++v) {
      at[v] = _mm512_loadu_si512(c->at + (v0 + v) * kWidth);
      row[v] = _mm512_loadu_si512(c->row + (v0 + v) * kWidth);
      base[v] = _mm512_loadu_si512(c->base + (v0 + v) * kWidth);
    }
    unsigned moving = (1u << m) - 1;  // vectors with a lane not yet at its leaf
    while (moving != 0) {
      for (int v = 0; v < m; ++v) {
        if (!(moving & (1u << v))) continue;
        const __m512i to = Step512<kCat>(n, base[v], row[v], at[v], block, nan, sets);
        if (_mm512_cmpneq_epi32_mask(to, at[v]) == 0) moving &= ~(1u << v);
        at[v] = to;
      }
    }
    for (int v = 0; v < m; ++v) {
      // The leaf's node index: its tree's first node (base / 2) plus its offset / 16.
      const __m512i node = _mm512_add_epi32(_mm512_srli_epi32(base[v], 1),
                                            _mm512_srli_epi32(at[v], kCpuNodeShift));
      _mm512_storeu_si512(c->at + (v0 + v) * kWidth, node);
    }
  }
  for (int i = 0; i < count; ++i) values[c->out[i]] = leaf_values[c->at[i]];
}

// Sixteen lanes' values of the features in fn's low bits: at row + feature in a block of rows
// (`row` the lane's row offset), at row + 16 x feature in a block by column (`row` the lane's
// offset: its index in its row vector plus 16 x the values per row x the vector's index).
template <bool kColumns>
__attribute__((target("avx512f"))) inline __m512 ValueAt512(const float* block, __m512i row,
                                                            __m512i fn) {
  __m512i f = _mm512_and_si512(fn, _mm512_set1_epi32(static_cast<int>(kDenseFeatureBits)));
  if constexpr (kColumns) f = _mm512_slli_epi32(f, 4);
  return _mm512_i32gather_ps(_mm512_add_epi32(row, f), block, 4);
}

// WalkAndAddSimd over the complete layout (DenseNode): a level of the top kRegisterLevels is
// selected from the tree's level in registers (LoadLevel512, SelectWide512) and the row's value
// gathered, a level below gathers the node too; the child computed as 2p + 1 + right; every tree
// runs `depth` levels and ends on its leaf's position in the last level. kKeep false: each leaf
// value added to margins (from `values32` where not null: one gather instead of two); true (some
// tree of the call goes on below the layout): kept in deferred[j * rows + r] (tree j of the call)
// and the lanes that go on collected in `lanes`.
// kColumns false: row r's values at block + r * stride; true: the block by column
// (Transpose512's layout, `stride` values per row), where the top levels' lanes, which share a few
// nodes, read their values from a few cache lines instead of one per row.
template <bool kKeep, bool kCat, bool kColumns>
__attribute__((target("avx512f"))) void WalkDenseLevels512(const CpuTree* trees,
                                                           const int32_t* tree_ids, int num_trees,
                                                           const DenseNode* dense, int depth,
                                                           const double* values,
                                                           const float* values32,
                                                           const int32_t* next,
                                                           const float* block, int32_t stride,
                                                           int rows, bool nan,
                                                           const CategorySets& sets,
                                                           double* margins, int64_t out_stride,
                                                           double* deferred,
                                                           Continuations* lanes) {
  static_assert(!(kKeep && kColumns), "the walk below the layout reads rows, not columns");
  const int row_vectors = rows / kWidth;
  // Up to kMaxVectors rows' vectors: trees walked together to fill them; more: one tree.
  const int per_group = std::max(1, kMaxVectors / row_vectors);
  const int inner = (1 << depth) - 1;
  const float* threshold = &dense->threshold;
  const int* feature = reinterpret_cast<const int*>(&dense->feature);
  GroupLanes512 l;
  if constexpr (kColumns) {
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    for (int v = 0; v < row_vectors; ++v) {
      l.row_of[v] = _mm512_add_epi32(lane, _mm512_set1_epi32(v * stride * kWidth));
    }
  } else {
    RowOffsets512(stride, row_vectors, l.row_of);
  }
  for (int t0 = 0; t0 < num_trees; t0 += per_group) {
    const int group = per_group < num_trees - t0 ? per_group : num_trees - t0;
    const int vectors = group * row_vectors;
    for (int g = 0; g < group; ++g) {
      StartTree512(g, row_vectors, _mm512_set1_epi32(trees[tree_ids[t0 + g]].dense * inner), &l);
    }
    const int top = std::min(depth, kRegisterLevels);
    for (int d = 0; d < top; ++d) {
      const int level_begin = (1 << d) - 1;
      const __m512i in_level = _mm512_set1_epi32(level_begin);
      for (int g = 0; g < group; ++g) {
        const DenseNode* level = dense + trees[tree_ids[t0 + g]].dense * inner + level_begin;
        if ((1 << d) <= kLevelPartNodes) {
          __m512 t_lo, t_hi;
          __m512i f_lo, f_hi;
          LoadLevel512(level, 1 << d, &t_lo, &t_hi, &f_lo, &f_hi);
          for (int v = 0; v < row_vectors; ++v) {
            const int u = g * row_vectors + v;
            const __m512i i = _mm512_sub_epi32(l.at[u], in_level);
            const __m512 t = _mm512_permutex2var_ps(t_lo, i, t_hi);
            const __m512i fn = _mm512_permutex2var_epi32(f_lo, i, f_hi);
            const __m512 x = ValueAt512<kColumns>(block, l.row[u], fn);
            l.at[u] = DenseNext512<kCat>(l.at[u], t, fn, x, nan, sets);
          }
        } else {
          WideLevel512 w;
          LoadWideLevel512(level, 1 << d, &w);
          for (int v = 0; v < row_vectors; ++v) {
            const int u = g * row_vectors + v;
            __m512 t;
            __m512i fn;
            SelectWide512(w, _mm512_sub_epi32(l.at[u], in_level), &t, &fn);
            const __m512 x = ValueAt512<kColumns>(block, l.row[u], fn);
            l.at[u] = DenseNext512<kCat>(l.at[u], t, fn, x, nan, sets);
          }
        }
      }
    }
    for (int d = top; d < depth; ++d) {
      for (int u = 0; u < vectors; ++u) {
        const __m512i node = _mm512_add_epi32(l.base[u], l.at[u]);
        const __m512 t = _mm512_i32gather_ps(node, threshold, 8);
        const __m512i fn = _mm512_i32gather_epi32(node, feature, 8);
        const __m512 x = ValueAt512<kColumns>(block, l.row[u], fn);
        l.at[u] = DenseNext512<kCat>(l.at[u], t, fn, x, nan, sets);
      }
    }
    for (int g = 0; g < group; ++g) {
      const CpuTree& tree = trees[tree_ids[t0 + g]];
      const __m512i first = _mm512_set1_epi32(tree.dense * (inner + 1) - inner);
      __m512i leaf[kDenseVectors];
      for (int v = 0; v < row_vectors; ++v) {
        leaf[v] = _mm512_add_epi32(first, l.at[g * row_vectors + v]);
      }
      if constexpr (kKeep) {
        double* kept = deferred + (t0 + g) * rows;
        for (int v = 0; v < row_vectors; ++v) GatherValues512(values, leaf[v], kept + v * kWidth);
        if (tree.continues) {
          CollectContinuations512(tree, next, leaf, l.row_of, row_vectors, (t0 + g) * rows,
                                  lanes);
        }
      } else {
        double* acc = margins + static_cast<int64_t>(tree.group) * out_stride;
        if (values32 != nullptr) {
          for (int v = 0; v < row_vectors; ++v) AddLeaves512(values32, leaf[v], acc + v * kWidth);
        } else {
          for (int v = 0; v < row_vectors; ++v) AddLeaves512(values, leaf[v], acc + v * kWidth);
        }
      }
    }
  }
}

// WalkDenseLevels512 for a call where some tree goes on below the layout: its leaf values kept,
// the lanes that go on walked on (WalkContinuations512), then every value added to its row's
// margin in tree order. Apart so that the other calls' frames stay small.
template <bool kCat>
__attribute__((target("avx512f"), noinline)) void WalkAddDenseContinued512(
    const CpuNode* all, const CpuTree* trees, const int32_t* tree_ids, int num_trees,
    const DenseNode* dense, int depth, const double* values, const int32_t* next,
    const double* leaf_values, const float* block, int32_t stride, int rows, bool nan,
    const CategorySets& sets, double* margins, int64_t out_stride) {
  double deferred[kTreeChunk * kMaxLanes];
  Continuations lanes;
  WalkDenseLevels512<true, kCat, false>(trees, tree_ids, num_trees, dense, depth, values, nullptr,
                                        next, block, stride, rows, nan, sets, margins, out_stride,
                                        deferred, &lanes);
  WalkContinuations512<kCat>(FieldsOf(all), &lanes, leaf_values, block, nan, sets, deferred);
  for (int j = 0; j < num_trees; ++j) {
    double* acc = margins + static_cast<int64_t>(trees[tree_ids[j]].group) * out_stride;
    const double* kept = deferred + j * rows;
    for (int r = 0; r < rows; r += kWidth / 2) {
      _mm512_storeu_pd(acc + r, _mm512_add_pd(_mm512_loadu_pd(acc + r), _mm512_loadu_pd(kept + r)));
    }
  }
}

// Whether some tree of tree_ids[0, num_trees) goes on below the complete layout.
inline bool Continues(const CpuForest& cf, const int32_t* tree_ids, int num_trees) {
  if (cf.dense_next() == nullptr) return false;
  for (int j = 0; j < num_trees; ++j) {
    if (cf.trees()[tree_ids[j]].continues) return true;
  }
  return false;
}

// WalkAndAddSimd over the complete layout for trees tree_ids[0, num_trees) (at most kTreeChunk)
// and `rows` rows (a multiple of kWidth; at most kMaxLanes where a tree goes on below the layout,
// whose walk keeps fixed arrays of that many lanes, else at most kDenseLanes): where a tree goes
// on below the layout (CpuTree::continues), its rows there continue in its CpuNodes, from `block`
// (row r at block + r * stride); otherwise from `columns` where not null (the same rows by
// column, Transpose512's layout), else from `block`.
template <bool kCat>
__attribute__((target("avx512f"))) void WalkAddDense512(const CpuForest& cf,
                                                        const int32_t* tree_ids, int num_trees,
                                                        const float* block, int32_t stride,
                                                        const float* columns, int rows, bool nan,
                                                        const CategorySets& sets,
                                                        double* margins, int64_t out_stride) {
  const CpuTree* trees = cf.trees();
  if (Continues(cf, tree_ids, num_trees)) {
    WalkAddDenseContinued512<kCat>(cf.nodes(), trees, tree_ids, num_trees, cf.dense_nodes(),
                                   cf.dense_depth(), cf.dense_values(), cf.dense_next(),
                                   cf.leaf_values(), block, stride, rows, nan, sets, margins,
                                   out_stride);
  } else if (columns != nullptr) {
    WalkDenseLevels512<false, kCat, true>(
        trees, tree_ids, num_trees, cf.dense_nodes(), cf.dense_depth(), cf.dense_values(),
        cf.dense_values32(), cf.dense_next(), columns, cf.forest().num_features, rows, nan, sets,
        margins, out_stride, nullptr, nullptr);
  } else {
    WalkDenseLevels512<false, kCat, false>(
        trees, tree_ids, num_trees, cf.dense_nodes(), cf.dense_depth(), cf.dense_values(),
        cf.dense_values32(), cf.dense_next(), block, stride, rows, nan, sets, margins, out_stride,
        nullptr, nullptr);
  }
}

// The bitvector layout's columns of a block: column j of row vector v (rows 16v .. 16v + 15) at
// out[(v * columns + j) * 16], one gather per column and vector. Transpose512's layout, for the
// listed features only (the bitvector trees' splits read few of a wide row's values).
__attribute__((target("avx512f"))) void Columns512(const float* block, int32_t stride,
                                                   int row_vectors, const int32_t* features,
                                                   int columns, float* out) {
  __m512i row_of[kMaxBlockRows / kWidth];
  RowOffsets512(stride, row_vectors, row_of);
  for (int v = 0; v < row_vectors; ++v) {
    float* dst = out + static_cast<int64_t>(v) * columns * kWidth;
    for (int j = 0; j < columns; ++j) {
      const __m512i at = _mm512_add_epi32(row_of[v], _mm512_set1_epi32(features[j]));
      _mm512_storeu_ps(dst + j * kWidth, _mm512_i32gather_ps(at, block, 4));
    }
  }
}

// Rows [0, 16 * row_vectors) of a block (row r at block + r * stride, `cols` values each) by
// column: value f of row 16v + i at out[(v * cols + f) * 16 + i]. Sixteen rows by sixteen values
// at a time, transposed in registers (four rounds of sixteen shuffles): every value, where
// Columns512 gathers a list of features.
__attribute__((target("avx512f"))) void Transpose512(const float* block, int64_t stride,
                                                     int row_vectors, int cols, float* out) {
  for (int v = 0; v < row_vectors; ++v) {
    const float* rows = block + static_cast<int64_t>(v) * kWidth * stride;
    float* dst = out + static_cast<int64_t>(v) * cols * kWidth;
    for (int f = 0; f < cols; f += kWidth) {
      const int n = std::min(kWidth, cols - f);
      const __mmask16 m = static_cast<__mmask16>((1u << n) - 1u);
      __m512 a[kWidth], b[kWidth];
      for (int i = 0; i < kWidth; ++i) a[i] = _mm512_maskz_loadu_ps(m, rows + i * stride + f);
      // Pairs of rows interleaved by value, then by pairs of values, then 128- and 256-bit
      // lanes: a[i] ends as column f + i of the sixteen rows.
      for (int i = 0; i < kWidth; i += 2) {
        b[i] = _mm512_unpacklo_ps(a[i], a[i + 1]);
        b[i + 1] = _mm512_unpackhi_ps(a[i], a[i + 1]);
      }
      for (int i = 0; i < kWidth; i += 4) {
        const __m512d b0 = _mm512_castps_pd(b[i]), b1 = _mm512_castps_pd(b[i + 1]);
        const __m512d b2 = _mm512_castps_pd(b[i + 2]), b3 = _mm512_castps_pd(b[i + 3]);
        a[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(b0, b2));
        a[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(b0, b2));
        a[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b1, b3));
        a[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b1, b3));
      }
      for (int i = 0; i < 4; ++i) {
        b[i] = _mm512_shuffle_f32x4(a[i], a[i + 4], 0x88);
        b[i + 4] = _mm512_shuffle_f32x4(a[i], a[i + 4], 0xdd);
        b[i + 8] = _mm512_shuffle_f32x4(a[i + 8], a[i + 12], 0x88);
        b[i + 12] = _mm512_shuffle_f32x4(a[i + 8], a[i + 12], 0xdd);
      }
      for (int i = 0; i < 4; ++i) {
        a[i] = _mm512_shuffle_f32x4(b[i], b[i + 8], 0x88);
        a[i + 8] = _mm512_shuffle_f32x4(b[i], b[i + 8], 0xdd);
        a[i + 4] = _mm512_shuffle_f32x4(b[i + 4], b[i + 12], 0x88);
        a[i + 12] = _mm512_shuffle_f32x4(b[i + 4], b[i + 12], 0xdd);
      }
      for (int i = 0; i < n; ++i) _mm512_storeu_ps(dst + (f + i) * kWidth, a[i]);
    }
  }
}

// ANDs the masks of splits [begin, end) that each row goes right at into its mask:
// `kPredicate` is the compare that sends a row left (x < t, or with NaN going left, !(x >= t)).
// 32-bit masks: m[v] holds row vector v's sixteen; 64-bit: m[2v] and m[2v + 1] its two halves.
template <int kPredicate, bool kWide>
__attribute__((target("avx512f"))) inline void AndSplits512(const BitvectorNode* nodes,
                                                            int32_t begin, int32_t end,
                                                            const float* columns,
                                                            int64_t vector_stride, int vectors,
                                                            __m512i* m) {
  for (int32_t i = begin; i < end; ++i) {
    const BitvectorNode& b = nodes[i];
    const __m512 t = _mm512_set1_ps(b.threshold);
    const float* column = columns + b.feature * kWidth;
    if constexpr (kWide) {
      const __m512i keep = _mm512_set1_epi64(static_cast<long long>(b.mask));
      for (int v = 0; v < vectors; ++v) {
        const __m512 x = _mm512_loadu_ps(column + v * vector_stride);
        const unsigned right = static_cast<__mmask16>(~_mm512_cmp_ps_mask(x, t, kPredicate));
        m[2 * v] = _mm512_mask_and_epi64(m[2 * v], static_cast<__mmask8>(right), m[2 * v], keep);
        m[2 * v + 1] = _mm512_mask_and_epi64(m[2 * v + 1], static_cast<__mmask8>(right >> 8),
                                             m[2 * v + 1], keep);
      }
    } else {
      const __m512i keep = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(b.mask)));
      for (int v = 0; v < vectors; ++v) {
        const __m512 x = _mm512_loadu_ps(column + v * vector_stride);
        const __mmask16 left = _mm512_cmp_ps_mask(x, t, kPredicate);
        m[v] = _mm512_mask_and_epi32(m[v], static_cast<__mmask16>(~left), m[v], keep);
      }
    }
  }
}

// The tree's splits ANDed into m (AndSplits512), those that send NaN left with the compare that
// does so where the block has a missing value.
template <bool kWide>
__attribute__((target("avx512f"))) inline void TreeMasks512(const BitvectorTree& b,
                                                            const BitvectorNode* nodes,
                                                            const float* columns,
                                                            int64_t vector_stride, int vectors,
                                                            bool nan, __m512i* m) {
  for (int v = 0; v < (kWide ? 2 : 1) * vectors; ++v) m[v] = _mm512_set1_epi32(-1);
  if (nan) {
    AndSplits512<_CMP_NGE_UQ, kWide>(nodes, b.begin, b.nan_right, columns, vector_stride,
                                     vectors, m);
  } else {
    AndSplits512<_CMP_LT_OQ, kWide>(nodes, b.begin, b.nan_right, columns, vector_stride,
                                    vectors, m);
  }
  AndSplits512<_CMP_LT_OQ, kWide>(nodes, b.nan_right, b.end, columns, vector_stride, vectors, m);
}

// Per 32-bit lane, the exponent field of the lane as an unsigned integer made float: for a
// power of two 2^i, i + 127; for 0, 0.
__attribute__((target("avx512f"))) inline __m512i Exponents512(__m512i x) {
  return _mm512_srli_epi32(_mm512_castps_si512(_mm512_cvtepu32_ps(x)), 23);
}

// WalkAndAddSimd over the bitvector layout for up to kMaxVectors row vectors of `columns`
// (Columns512's layout, `vector_stride` floats from one row vector to the next): per tree, every
// split compared for every row, the masks ANDed, the lowest bit left the row's leaf, its value
// added to its output's column in tree order.
__attribute__((target("avx512f"))) void WalkAddBitvector512(
    const CpuTree* trees, const int32_t* tree_ids, int num_trees, const BitvectorTree* bt,
    const BitvectorNode* nodes, const double* values, const float* columns,
    int64_t vector_stride, int vectors, bool nan, double* margins, int64_t out_stride) {
  const __m512i bias = _mm512_set1_epi32(127);
  for (int j = 0; j < num_trees; ++j) {
    const CpuTree& tree = trees[tree_ids[j]];
    const BitvectorTree& b = bt[tree.bitvector];
    double* acc = margins + static_cast<int64_t>(tree.group) * out_stride;
    __m512i m[2 * kMaxVectors];
    if (!b.wide) {
      TreeMasks512<false>(b, nodes, columns, vector_stride, vectors, nan, m);
      for (int v = 0; v < vectors; ++v) {
        // The lowest set bit: m & -m is 2^index, exact as a float.
        const __m512i low = _mm512_and_si512(m[v], _mm512_sub_epi32(_mm512_setzero_si512(), m[v]));
        AddLeaves512(values + b.values, _mm512_sub_epi32(Exponents512(low), bias), acc + v * kWidth);
      }
      continue;
    }
    TreeMasks512<true>(b, nodes, columns, vector_stride, vectors, nan, m);
    const __m512i low32 = _mm512_set1_epi64(0xffffffffLL);
    for (int h = 0; h < 2 * vectors; ++h) {
      // Per 64-bit lane, 2^index in one of its halves and 0 in the other: the index from the
      // low half's exponent where it is not 0, else 32 more than the high half's.
      const __m512i low = _mm512_and_si512(m[h], _mm512_sub_epi64(_mm512_setzero_si512(), m[h]));
      const __m512i e = Exponents512(low);
      const __mmask8 in_low = _mm512_test_epi64_mask(e, low32);
      const __m512i from_low = _mm512_sub_epi64(_mm512_and_si512(e, low32), _mm512_set1_epi64(127));
      const __m512i from_high = _mm512_sub_epi64(_mm512_srli_epi64(e, 32), _mm512_set1_epi64(95));
      const __m512i leaf = _mm512_mask_blend_epi64(in_low, from_high, from_low);
      const __m512d add = _mm512_i64gather_pd(leaf, values + b.values, 8);
      double* a = acc + h * (kWidth / 2);
      _mm512_storeu_pd(a, _mm512_add_pd(_mm512_loadu_pd(a), add));
    }
  }
}

// A round of WalkAndAddRowSimd's walks: per lane, its leaf value; for the node walk, lane l
// holds tree t0 + l (lanes past the run's last tree repeat it: valid addresses, results not
// kept), `first[l]` its tree's first node in 8-byte units and `leaf[l]` the same as a node index.
struct RowRound {
  int32_t first[kRowWalkVectors * kWidth];
  int32_t leaf[kRowWalkVectors * kWidth];
  double value[kRowWalkVectors * kWidth];
};

// Adds round `r`'s leaf values of trees tree_ids[0, n) to their outputs in tree order.
inline void AddRowRound(const CpuTree* trees, const int32_t* tree_ids, int n, const RowRound& r,
                        double* margins) {
  for (int j = 0; j < n; ++j) margins[trees[tree_ids[j]].group] += r.value[j];
}

// The top levels of sixteen trees of a row-layout block (`block`: its position 0), `level`'s
// candidates read with vector loads, each lane keeping its own: cheaper than two gathers while a
// level has few positions.
__attribute__((target("avx512f"))) inline void LoadTop512(const DenseNode* block, int level,
                                                          __m512i at, __m512* threshold,
                                                          __m512i* feature) {
  const int first = (1 << level) - 1;
  const long long* p = reinterpret_cast<const long long*>(block + first * kWidth);
  __m512i lo = _mm512_loadu_si512(p);
  __m512i hi = _mm512_loadu_si512(p + 8);
  for (int k = 1; k < (1 << level); ++k) {
    const __mmask16 m = _mm512_cmpeq_epi32_mask(at, _mm512_set1_epi32(first + k));
    const long long* q = p + k * kWidth;
    lo = _mm512_mask_loadu_epi64(lo, static_cast<__mmask8>(m), q);
    hi = _mm512_mask_loadu_epi64(hi, static_cast<__mmask8>(m >> 8), q + 8);
  }
  Split512(lo, hi, threshold, feature);
}

// sum + v[0] + v[1] + ... + v[7], added in that order (the reference's sum).
__attribute__((target("avx512f"))) inline __m128d AddPair(__m128d sum, __m128d pair) {
  return _mm_add_sd(_mm_add_sd(sum, pair), _mm_unpackhi_pd(pair, pair));
}
__attribute__((target("avx512f"))) inline __m128d AddInOrder512(__m128d sum, __m512d v) {
  const __m512 f = _mm512_castpd_ps(v);
  sum = AddPair(sum, _mm512_castpd512_pd128(v));
  sum = AddPair(sum, _mm_castps_pd(_mm512_extractf32x4_ps(f, 1)));
  sum = AddPair(sum, _mm_castps_pd(_mm512_extractf32x4_ps(f, 2)));
  return AddPair(sum, _mm_castps_pd(_mm512_extractf32x4_ps(f, 3)));
}

static_assert(kWidth == kRowBlockTrees, "a row-layout block is one vector of lanes");

// WalkAndAddRowSimd over the row layout (RowGeometry `g`): trees tree_ids[0, n) in slots
// [slot0, slot0 + n), a block of sixteen slots per vector (the slots of a block outside the run
// are walked too, their values not kept). The first kRowTopLevels levels are read with vector
// loads, the other interleaved ones gathered position by position, the deeper ones gathered
// from each lane's tree's line-sized subtrees.
template <bool kCat>
__attribute__((target("avx512f"))) void RowWalkBlocks512(const CpuTree* trees,
                                                         const int32_t* tree_ids, int32_t slot0,
                                                         int n, const DenseNode* nodes,
                                                         const RowGeometry& g,
                                                         const double* values,
                                                         const float* row, bool nan,
                                                         const CategorySets& sets,
                                                         bool one_output, double* margins) {
  const int depth = g.depth();
  const int inner = (1 << depth) - 1;
  const int interleaved = g.interleaved();
  const int interleaved_inner = (1 << interleaved) - 1;
  const int loads = interleaved < kRowTopLevels ? interleaved : kRowTopLevels;
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i index_bits = _mm512_set1_epi32(static_cast<int>(kDenseFeatureBits));
  // Per lane, its slot's first deep node less the block's (added per vector).
  const __m512i lane_deep = _mm512_mullo_epi32(lane, _mm512_set1_epi32(g.tree_nodes()));
  RowRound round;
  __m512i at[kRowWalkVectors];
  __m512i deep[kRowWalkVectors];
  const int32_t first_block = slot0 / kWidth;
  const int32_t end_block = (slot0 + n + kWidth - 1) / kWidth;
  for (int32_t b0 = first_block; b0 < end_block; b0 += kRowWalkVectors) {
    const int vectors = end_block - b0 < kRowWalkVectors ? end_block - b0 : kRowWalkVectors;
    for (int u = 0; u < vectors; ++u) {
      at[u] = _mm512_setzero_si512();
      deep[u] = _mm512_add_epi32(
          lane_deep,
          _mm512_set1_epi32(static_cast<int32_t>(g.deep_base() + static_cast<int64_t>(b0 + u) *
                                                                     kWidth * g.tree_nodes())));
    }
    for (int d = 0; d < depth; ++d) {
      const int32_t level_first = (1 << d) - 1;
      const RowGeometry::Level& l = g.level(d);
      for (int u = 0; u < vectors; ++u) {
        const int32_t block_first = (b0 + u) * interleaved_inner;
        __m512 t;
        __m512i fn;
        if (d < loads) {
          LoadTop512(nodes + static_cast<int64_t>(block_first) * kWidth, d, at[u], &t, &fn);
        } else if (d < interleaved) {
          const __m512i node = _mm512_add_epi32(
              _mm512_slli_epi32(_mm512_add_epi32(_mm512_set1_epi32(block_first), at[u]), 4),
              lane);
          GatherDense512(nodes, node, &t, &fn);
        } else {
          // q = at - (2^d - 1); node = deep + offset + ((q >> shift) << slot_log2)
          //     + (2^shift - 1) + (q & (2^shift - 1)), as RowGeometry::DeepNode.
          const __m512i q = _mm512_sub_epi32(at[u], _mm512_set1_epi32(level_first));
          const __m512i slot = _mm512_slli_epi32(_mm512_srli_epi32(q, l.shift), l.slot_log2);
          const __m512i within =
              _mm512_and_si512(q, _mm512_set1_epi32(static_cast<int32_t>((1u << l.shift) - 1)));
          const __m512i node = _mm512_add_epi32(
              _mm512_add_epi32(deep[u], slot),
              _mm512_add_epi32(within, _mm512_set1_epi32(l.offset + (1 << l.shift) - 1)));
          GatherDense512(nodes, node, &t, &fn);
        }
        const __m512 x = _mm512_i32gather_ps(_mm512_and_si512(fn, index_bits), row, 4);
        at[u] = DenseNext512<kCat>(at[u], t, fn, x, nan, sets);
      }
    }
    for (int u = 0; u < vectors; ++u) {
      // Position q = at - inner of the last level: value ((block * 2^depth + q) * 16 + lane).
      const __m512i leaf = _mm512_add_epi32(
          _mm512_slli_epi32(
              _mm512_add_epi32(_mm512_set1_epi32((b0 + u) * (inner + 1) - inner), at[u]), 4),
          lane);
      GatherValues512(values, leaf, round.value + u * kWidth);
    }
    // The run's trees of this round, in tree order.
    const int32_t s_begin = slot0 > b0 * kWidth ? slot0 : b0 * kWidth;
    const int32_t s_end =
        slot0 + n < (b0 + vectors) * kWidth ? slot0 + n : (b0 + vectors) * kWidth;
    if (one_output && s_begin == b0 * kWidth && s_end == (b0 + vectors) * kWidth) {
      // Every value into one sum: added from registers (the chain of dependent adds is the
      // round's critical path; reloading the values just stored would lengthen it).
      __m128d sum = _mm_load_sd(margins);
      for (int u = 0; u < vectors; ++u) {
        sum = AddInOrder512(sum, _mm512_loadu_pd(round.value + u * kWidth));
        sum = AddInOrder512(sum, _mm512_loadu_pd(round.value + u * kWidth + 8));
      }
      _mm_store_sd(margins, sum);
      continue;
    }
    for (int32_t s = s_begin; s < s_end; ++s) {
      margins[trees[tree_ids[s - slot0]].group] += round.value[s - b0 * kWidth];
    }
  }
}

template <bool kCat>
__attribute__((target("avx512f"))) void RowWalkNodes512(const CpuNode* all, const CpuTree* trees,
                                                        const int32_t* tree_ids, int num_trees,
                                                        const double* leaf_values,
                                                        const float* row, bool nan,
                                                        const CategorySets& sets,
                                                        double* margins) {
  constexpr int kLanes = kRowWalkVectors * kWidth;
  const Fields fields = FieldsOf(all);
  const __m512i zero = _mm512_setzero_si512();
  RowRound round;
  __m512i base[kRowWalkVectors], at[kRowWalkVectors];
  for (int t0 = 0; t0 < num_trees; t0 += kLanes) {
    const int n = num_trees - t0 < kLanes ? num_trees - t0 : kLanes;
    const int vectors = (n + kWidth - 1) / kWidth;
    int depth = 0;
    for (int l = 0; l < vectors * kWidth; ++l) {
      const CpuTree& tree = trees[tree_ids[t0 + (l < n ? l : n - 1)]];
      depth = tree.depth > depth ? tree.depth : depth;
      round.first[l] = static_cast<int32_t>(2 * tree.node_begin);
      round.leaf[l] = static_cast<int32_t>(tree.node_begin);
    }
    for (int u = 0; u < vectors; ++u) {
      base[u] = _mm512_loadu_si512(round.first + u * kWidth);
      at[u] = zero;
    }
    const bool check_leaves = depth > kCheckDepth;
    for (int d = 0; d < depth; ++d) {
      for (int u = 0; u < vectors; ++u) {
        at[u] = Step512<kCat>(fields, base[u], zero, at[u], row, nan, sets);
      }
      if (check_leaves && (d & 3) == 3 && AllLeaves512(fields, base, at, vectors)) break;
    }
    for (int u = 0; u < vectors; ++u) {
      const __m512i leaf = _mm512_add_epi32(_mm512_loadu_si512(round.leaf + u * kWidth),
                                            _mm512_srli_epi32(at[u], kCpuNodeShift));
      GatherValues512(leaf_values, leaf, round.value + u * kWidth);
    }
    AddRowRound(trees, tree_ids + t0, n, round, margins);
  }
}

// Runs of tree_ids[0, num_trees) (increasing) in turn: `same(previous, next)` says whether tree
// `next` continues the run of `previous`, `walk(first, count)` takes a run. Where the ids are
// consecutive, CpuTree's `end` says where a run ends without asking `same` tree by tree.
template <typename Same, typename Walk>
void ByRuns(const CpuTree* trees, const int32_t* tree_ids, int num_trees,
            int32_t CpuTree::*end, Same same, Walk walk) {
  const bool consecutive = num_trees > 0 && tree_ids[num_trees - 1] - tree_ids[0] == num_trees - 1;
  for (int t0 = 0; t0 < num_trees;) {
    int t1 = t0 + 1;
    if (consecutive && end != nullptr) {
      const int32_t id = tree_ids[t0];
      t1 = t0 + std::min(num_trees - t0, trees[id].*end - id);
    } else {
      while (t1 < num_trees && same(tree_ids[t1 - 1], tree_ids[t1])) ++t1;
    }
    walk(t0, t1 - t0);
    t0 = t1;
  }
}

}  // namespace

bool HaveSimdWalk() { return __builtin_cpu_supports("avx512f"); }

__attribute__((target("avx512f"))) bool HasNanSimd(const float* x, int64_t n) {
  __mmask16 nan = 0;
  int64_t i = 0;
  for (; i + kWidth <= n; i += kWidth) {
    const __m512 v = _mm512_loadu_ps(x + i);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  }
  if (i < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(tail, x + i);
    nan |= _mm512_mask_cmp_ps_mask(tail, v, v, _CMP_UNORD_Q);
  }
  return nan != 0;
}

void WalkGroupSimd(const CpuForest& cf, const int32_t* tree_ids, int num_trees, const float* block,
                   int64_t stride, int num_rows, bool nan, int32_t* idx) {
  const CpuTree* trees = cf.trees();
  const int lanes = num_trees * num_rows;
  const int vectors = (lanes + kWidth - 1) / kWidth;
  // Per lane: the first node of its tree and its row's offset in the block; lanes past the last
  // repeat lane 0 (valid addresses, results not kept).
  int32_t lane_node[kMaxLanes];
  int32_t lane_row[kMaxLanes];
  int32_t at[kMaxLanes];
  int depth = 0;
  for (int j = 0; j < num_trees; ++j) {
    const CpuTree& tree = trees[tree_ids[j]];
    depth = std::max(depth, tree.depth);
    for (int r = 0; r < num_rows; ++r) {
      lane_node[j * num_rows + r] = static_cast<int32_t>(2 * tree.node_begin);
      lane_row[j * num_rows + r] = static_cast<int32_t>(r * stride);
    }
  }
  for (int l = lanes; l < vectors * kWidth; ++l) {
    lane_node[l] = lane_node[0];
    lane_row[l] = lane_row[0];
  }
  const CategorySets sets = SetsOf(cf);
  if (sets.words != nullptr) {
    Walk512<true>(cf.nodes(), lane_node, lane_row, vectors, depth, depth > kCheckDepth, block,
                  nan, sets, at);
  } else {
    Walk512<false>(cf.nodes(), lane_node, lane_row, vectors, depth, depth > kCheckDepth, block,
                   nan, sets, at);
  }
  std::copy(at, at + lanes, idx);
}

void WalkAndAddSimd(const CpuForest& cf, const int32_t* tree_ids, int num_trees,
                    const float* block, int64_t stride, int num_rows, bool nan, double* margins) {
  // Runs of trees with a complete layout take the dense walk; the others the node walk.
  const CpuTree* trees = cf.trees();
  const int32_t s = static_cast<int32_t>(stride);
  const bool dense = cf.dense_walk();
  const bool bitvector = cf.bitvector_walk();
  // 0: node walk, 1: complete layout, 2: bitvector layout.
  auto kind = [&](int32_t t) {
    return bitvector && trees[t].bitvector >= 0 ? 2 : dense && trees[t].dense >= 0 ? 1 : 0;
  };
  // The block's columns for the bitvector layout, laid out once per call (on its first run):
  // each thread keeps its buffer, grown to the largest block it has walked.
  thread_local std::vector<float> columns;
  bool have_columns = false;
  // The block by column for the complete layout (Transpose512), laid out once per call on its
  // first chunk of trees that takes it: where the call's trees visit at least as many nodes per
  // row as a row has values, so that the copy costs less than the cache lines it saves.
  thread_local std::vector<float> by_column;
  bool have_by_column = false;
  const int num_features = cf.forest().num_features;
  const bool take_columns =
      dense && static_cast<int64_t>(num_trees) * cf.dense_depth() >= num_features;
  const int row_vectors = num_rows / kWidth;
  const int num_columns = static_cast<int>(cf.bitvector_features().size());
  const int64_t vector_stride = static_cast<int64_t>(num_columns) * kWidth;
  const CategorySets sets = SetsOf(cf);
  ByRuns(
      trees, tree_ids, num_trees, nullptr, [&](int32_t a, int32_t b) { return kind(a) == kind(b); },
      [&](int t0, int n) {
        const int k = kind(tree_ids[t0]);
        if (k == 2 && !have_columns) {
          columns.resize(std::max(columns.size(), static_cast<size_t>(row_vectors) * vector_stride));
          Columns512(block, s, row_vectors, cf.bitvector_features().data(), num_columns,
                     columns.data());
          have_columns = true;
        }
        // The complete layout's runs take more rows at once where no tree goes on below it.
        const int lanes = k == 1 && !Continues(cf, tree_ids + t0, n) ? kDenseLanes : kMaxLanes;
        ForTreeChunks(t0, n, num_rows, lanes, [&](int c0, int cn, int r0, int sub) {
          const float* rows = block + static_cast<int64_t>(r0) * stride;
          if (k == 2) {
            WalkAddBitvector512(trees, tree_ids + c0, cn, cf.bitvector_trees(),
                                cf.bitvector_nodes(), cf.bitvector_values(),
                                columns.data() + (r0 / kWidth) * vector_stride, vector_stride,
                                sub / kWidth, nan, margins + r0, num_rows);
          } else if (k == 1) {
            const float* rows_by_column = nullptr;
            if (take_columns && !Continues(cf, tree_ids + c0, cn)) {
              if (!have_by_column) {
                by_column.resize(std::max(by_column.size(), static_cast<size_t>(num_rows) *
                                                                num_features));
                Transpose512(block, stride, row_vectors, num_features, by_column.data());
                have_by_column = true;
              }
              rows_by_column = by_column.data() + static_cast<int64_t>(r0) * num_features;
            }
            (sets.words != nullptr ? WalkAddDense512<true> : WalkAddDense512<false>)(
                cf, tree_ids + c0, cn, rows, s, rows_by_column, sub, nan, sets, margins + r0,
                num_rows);
          } else {
            (sets.words != nullptr ? WalkAdd512<true> : WalkAdd512<false>)(
                cf.nodes(), trees, tree_ids + c0, cn, cf.leaf_values(), rows, s, sub, nan, sets,
                margins + r0, num_rows);
          }
        });
      });
}

void WalkAndAddRowSimd(const CpuForest& cf, const int32_t* tree_ids, int num_trees,
                       const float* row, bool nan, double* margins) {
  // Runs of trees in consecutive slots of the row layout take the block walk; the others the
  // node walk.
  const CpuTree* trees = cf.trees();
  const CategorySets sets = SetsOf(cf);
  ByRuns(
      trees, tree_ids, num_trees, &CpuTree::row_end,
      [&](int32_t a, int32_t b) {
        if (trees[a].row < 0) return trees[b].row < 0;
        return trees[b].row == trees[a].row + 1;
      },
      [&](int t0, int n) {
        const int32_t slot0 = trees[tree_ids[t0]].row;
        if (slot0 >= 0) {
          (sets.words != nullptr ? RowWalkBlocks512<true> : RowWalkBlocks512<false>)(
              trees, tree_ids + t0, slot0, n, cf.row_nodes(), cf.row_geometry(), cf.row_values(),
              row, nan, sets, cf.forest().num_outputs == 1, margins);
        } else {
          (sets.words != nullptr ? RowWalkNodes512<true> : RowWalkNodes512<false>)(
              cf.nodes(), trees, tree_ids + t0, n, cf.leaf_values(), row, nan, sets, margins);
        }
      });
}

}  // namespace grove::cpu
