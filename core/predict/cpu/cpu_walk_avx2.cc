#include "core/predict/cpu/cpu_walk_avx2.h"

#include <immintrin.h>

#include <algorithm>

#include "core/predict/cpu/cpu_walk.h"

namespace grove::cpu {
namespace {

constexpr int kWidth = kAvx2Rows;
// Vectors walked together: a level's gathers depend on the last level's, so one vector alone
// would wait on them; eight (64 lanes) keep enough loads in flight and their state in L1.
constexpr int kMaxVectors = kMaxLanes / kWidth;
// Levels of at most eight nodes (the top four) are held in one register per field and selected
// with a permute: only the row value is gathered there.
constexpr int kRegisterLevels = 4;

// Only intrinsics inside the functions below, each marked target("avx2"): an inline function of
// another header compiled here with AVX2 could be the copy the linker keeps for the whole program,
// and this file's code runs only where HaveAvx2Walk().

// The next positions of eight lanes at positions `at` whose nodes are (t, fn) and whose values
// are x: 2p + 2 - left, a compare's all-ones lane being -1. Bit 31 of fn (kDenseNanLeft): a
// missing value goes left (it compares false, so goes right otherwise).
template <bool kNan>
__attribute__((target("avx2"))) inline __m256i DenseNextAvx2(__m256i at, __m256 t, __m256i fn,
                                                             __m256 x) {
  __m256 left = _mm256_cmp_ps(x, t, _CMP_LT_OQ);
  if constexpr (kNan) {
    const __m256 missing = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    left = _mm256_blendv_ps(left, _mm256_castsi256_ps(_mm256_srai_epi32(fn, 31)), missing);
  }
  const __m256i next = _mm256_add_epi32(_mm256_add_epi32(at, at), _mm256_set1_epi32(2));
  return _mm256_add_epi32(next, _mm256_castps_si256(left));
}

// values[index[lane]] for four lanes. The masked form with a zero source: the plain one's
// undefined source reads as uninitialized to GCC 12 (-Wmaybe-uninitialized), and a defined one
// carries no dependency on an earlier register.
__attribute__((target("avx2"))) inline __m256d GatherValuesAvx2(const double* values,
                                                                __m128i index) {
  const __m256d all = _mm256_castsi256_pd(_mm256_set1_epi64x(-1));
  return _mm256_mask_i32gather_pd(_mm256_setzero_pd(), values, index, all, 8);
}

// Eight DenseNodes, `node` their indices: two gathers of four 8-byte nodes (a node's threshold
// and feature come from one load: half the elements of a gather per field), the fields then
// separated. The shuffles interleave the two gathers' nodes pairwise within each 128-bit half, so
// the first gathers lanes 0, 1, 4, 5 and the second 2, 3, 6, 7 for the fields to come out in lane
// order.
__attribute__((target("avx2"))) inline void GatherDenseAvx2(const DenseNode* dense, __m256i node,
                                                            __m256* threshold, __m256i* feature) {
  const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  const __m256i index = _mm256_permutevar8x32_epi32(node, order);
  const long long* base = reinterpret_cast<const long long*>(dense);
  const __m256i all = _mm256_set1_epi64x(-1);
  const __m256 lo = _mm256_castsi256_ps(_mm256_mask_i32gather_epi64(
      _mm256_setzero_si256(), base, _mm256_castsi256_si128(index), all, 8));
  const __m256 hi = _mm256_castsi256_ps(_mm256_mask_i32gather_epi64(
      _mm256_setzero_si256(), base, _mm256_extracti128_si256(index, 1), all, 8));
  *threshold = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
  *feature = _mm256_castps_si256(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Trees tree_ids[0, num_trees) over `rows` rows (a multiple of kWidth, at most kMaxLanes) of
// `block`: trees walked a few at a time so that eight vectors are in flight, every tree `depth`
// levels down to its leaf's position in the last level, then each tree's leaf values added in
// tree order to margins[group * out_stride + r].
template <bool kNan>
__attribute__((target("avx2"))) void WalkDenseAvx2(const CpuTree* trees, const int32_t* tree_ids,
                                                   int num_trees, const DenseNode* dense,
                                                   int depth, const double* values,
                                                   const float* block, int32_t stride, int rows,
                                                   double* margins, int64_t out_stride) {
  const int row_vectors = rows / kWidth;
  const int per_group = kMaxVectors / row_vectors;
  const int inner = (1 << depth) - 1;
  const __m256i index_bits = _mm256_set1_epi32(static_cast<int>(kDenseFeatureBits));
  const __m256i lane = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
  __m256i row_of[kMaxVectors];
  for (int v = 0; v < row_vectors; ++v) {
    row_of[v] = _mm256_mullo_epi32(_mm256_add_epi32(lane, _mm256_set1_epi32(v * kWidth)),
                                   _mm256_set1_epi32(stride));
  }
  __m256i base[kMaxVectors], row[kMaxVectors], at[kMaxVectors];
  for (int t0 = 0; t0 < num_trees; t0 += per_group) {
    const int group = std::min(per_group, num_trees - t0);
    const int vectors = group * row_vectors;
    for (int g = 0; g < group; ++g) {
      const __m256i first = _mm256_set1_epi32(trees[tree_ids[t0 + g]].dense * inner);
      for (int v = 0; v < row_vectors; ++v) {
        base[g * row_vectors + v] = first;
        row[g * row_vectors + v] = row_of[v];
        at[g * row_vectors + v] = _mm256_setzero_si256();
      }
    }
    const int top = std::min(depth, kRegisterLevels);
    for (int d = 0; d < top; ++d) {
      const int level_begin = (1 << d) - 1;
      const __m256i in_level = _mm256_set1_epi32(level_begin);
      for (int g = 0; g < group; ++g) {
        // The level's nodes, read one by one (nothing past the level: the last tree's may end
        // the array); lanes past them stay zero and are never selected.
        alignas(32) float t_level[kWidth] = {};
        alignas(32) int f_level[kWidth] = {};
        const DenseNode* level = dense + trees[tree_ids[t0 + g]].dense * inner + level_begin;
        for (int i = 0; i < (1 << d); ++i) {
          t_level[i] = level[i].threshold;
          f_level[i] = level[i].feature;
        }
        const __m256 t_reg = _mm256_load_ps(t_level);
        const __m256i f_reg = _mm256_load_si256(reinterpret_cast<const __m256i*>(f_level));
        for (int v = 0; v < row_vectors; ++v) {
          const int u = g * row_vectors + v;
          const __m256i i = _mm256_sub_epi32(at[u], in_level);
          const __m256 t = _mm256_permutevar8x32_ps(t_reg, i);
          const __m256i fn = _mm256_permutevar8x32_epi32(f_reg, i);
          const __m256i f = _mm256_and_si256(fn, index_bits);
          const __m256 x = _mm256_i32gather_ps(block, _mm256_add_epi32(row[u], f), 4);
          at[u] = DenseNextAvx2<kNan>(at[u], t, fn, x);
        }
      }
    }
    for (int d = top; d < depth; ++d) {
      for (int u = 0; u < vectors; ++u) {
        const __m256i node = _mm256_add_epi32(base[u], at[u]);
        __m256 t;
        __m256i fn;
        GatherDenseAvx2(dense, node, &t, &fn);
        const __m256i f = _mm256_and_si256(fn, index_bits);
        const __m256 x = _mm256_i32gather_ps(block, _mm256_add_epi32(row[u], f), 4);
        at[u] = DenseNextAvx2<kNan>(at[u], t, fn, x);
      }
    }
    // Each row's leaf value (tree weight included) added to its output's column, in tree order.
    for (int g = 0; g < group; ++g) {
      const CpuTree& tree = trees[tree_ids[t0 + g]];
      const __m256i first = _mm256_set1_epi32(tree.dense * (inner + 1) - inner);
      double* acc = margins + static_cast<int64_t>(tree.group) * out_stride;
      for (int v = 0; v < row_vectors; ++v) {
        const __m256i leaf = _mm256_add_epi32(first, at[g * row_vectors + v]);
        const __m256d lo = GatherValuesAvx2(values, _mm256_castsi256_si128(leaf));
        const __m256d hi = GatherValuesAvx2(values, _mm256_extracti128_si256(leaf, 1));
        double* a = acc + v * kWidth;
        _mm256_storeu_pd(a, _mm256_add_pd(_mm256_loadu_pd(a), lo));
        _mm256_storeu_pd(a + 4, _mm256_add_pd(_mm256_loadu_pd(a + 4), hi));
      }
    }
  }
}

}  // namespace

bool HaveAvx2Walk() { return __builtin_cpu_supports("avx2"); }

__attribute__((target("avx2"))) bool HasNanAvx2(const float* x, int64_t n) {
  __m256 nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + kWidth <= n; i += kWidth) {
    const __m256 v = _mm256_loadu_ps(x + i);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  bool any = _mm256_movemask_ps(nan) != 0;
  for (; i < n; ++i) any |= x[i] != x[i];
  return any;
}

void WalkAndAddDenseAvx2(const CpuForest& cf, const int32_t* tree_ids, int num_trees,
                         const float* block, int64_t stride, int num_rows, bool nan,
                         double* margins) {
  const CpuTree* trees = cf.trees();
  const int32_t s = static_cast<int32_t>(stride);
  auto* walk = nan ? WalkDenseAvx2<true> : WalkDenseAvx2<false>;
  ForTreeChunks(0, num_trees, num_rows, kMaxLanes, [&](int c0, int cn, int r0, int sub) {
    walk(trees, tree_ids + c0, cn, cf.dense_nodes(), cf.dense_depth(), cf.dense_values(),
         block + static_cast<int64_t>(r0) * stride, s, sub, margins + r0, num_rows);
  });
}

}  // namespace grove::cpu
