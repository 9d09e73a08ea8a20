#include "core/predict/cpu/cpu_walk_simd.h"

#include <immintrin.h>

#include <algorithm>

#include "core/predict/cpu/cpu_walk.h"

namespace grove::cpu {
namespace {

constexpr int kWidth = 16;
constexpr int kMaxVectors = kMaxLanes / kWidth;

// Only intrinsics inside: an inline function of another header compiled here with AVX-512 could
// be the copy the linker keeps for the whole program.
__attribute__((target("avx512f"))) void Walk512(const CpuNode* all, const int32_t* lane_node,
                                                const int32_t* lane_row, int vectors, int depth,
                                                bool check_leaves, const float* block, bool nan,
                                                int32_t* at_out) {
  // Gather indices count 8-byte units from the first node (a node is two): up to 2^30 nodes.
  const int* feature = reinterpret_cast<const int*>(&all->feature);
  const float* threshold = &all->threshold;
  const int* left = reinterpret_cast<const int*>(&all->left);
  const int* bits = reinterpret_cast<const int*>(&all->bits);
  const __m512i step = _mm512_set1_epi32(static_cast<int>(sizeof(CpuNode)));
  const __m512i nan_left = _mm512_set1_epi32(static_cast<int>(kCpuNanLeft));
  const __m512i leaf = _mm512_set1_epi32(static_cast<int>(kCpuLeaf));
  __m512i base[kMaxVectors], row[kMaxVectors], at[kMaxVectors];
  for (int v = 0; v < vectors; ++v) {
    base[v] = _mm512_loadu_si512(lane_node + v * kWidth);
    row[v] = _mm512_loadu_si512(lane_row + v * kWidth);
    at[v] = _mm512_setzero_si512();
  }
  // base: the tree's first node in 8-byte units; at: byte offsets in the tree (CpuNode::left).
  for (int d = 0; d < depth; ++d) {
    for (int v = 0; v < vectors; ++v) {
      const __m512i unit = _mm512_add_epi32(base[v], _mm512_srli_epi32(at[v], 3));
      const __m512i f = _mm512_i32gather_epi32(unit, feature, 8);
      const __m512 t = _mm512_i32gather_ps(unit, threshold, 8);
      const __m512i l = _mm512_i32gather_epi32(unit, left, 8);
      const __m512 x = _mm512_i32gather_ps(_mm512_add_epi32(row[v], f), block, 4);
      __mmask16 go_left = _mm512_cmp_ps_mask(x, t, _CMP_LT_OQ);
      if (nan) {
        const __mmask16 missing = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
        if (missing) {
          const __m512i b = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), missing, unit, bits, 8);
          go_left |= _mm512_mask_test_epi32_mask(missing, b, nan_left);
        }
      }
      at[v] = _mm512_mask_mov_epi32(_mm512_add_epi32(l, step), go_left, l);
    }
    if (check_leaves && (d & 3) == 3) {
      bool done = true;
      for (int v = 0; v < vectors && done; ++v) {
        const __m512i unit = _mm512_add_epi32(base[v], _mm512_srli_epi32(at[v], 3));
        const __m512i b = _mm512_i32gather_epi32(unit, bits, 8);
        done = _mm512_test_epi32_mask(b, leaf) == 0xFFFF;
      }
      if (done) break;
    }
  }
  for (int v = 0; v < vectors; ++v) {
    _mm512_storeu_si512(at_out + v * kWidth, _mm512_srli_epi32(at[v], 4));
  }
}

}  // namespace

bool HaveSimdWalk() { return __builtin_cpu_supports("avx512f"); }

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
  Walk512(cf.nodes(), lane_node, lane_row, vectors, depth, depth > kCheckDepth, block, nan, at);
  std::copy(at, at + lanes, idx);
}

}  // namespace grove::cpu
