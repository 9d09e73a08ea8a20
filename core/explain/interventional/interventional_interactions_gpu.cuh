// Interventional interaction values on the GPU (included only from interventional_gpu.cu): the
// per-lane arithmetic is interventional_interactions.h's, shared with the CPU twin.
//
// Mapping: as InterventionalKernel, one warp per bin (a path element per lane) and kRowsPerWarp
// rows per warp, taken one at a time: a lane sums its path's background masks into its two
// scalars and its row of with_x (shared memory, 33 doubles per lane), then adds its SHAP value on
// the diagonal slot and one fixed-point value per (row, output, pair with a later element of the
// path) to the upper triangle (the index is symmetric, and both lanes of a pair sum the same
// terms in the same order: half the atomics). The finish kernel mirrors the triangle and turns
// the diagonal slot into M[i][i] = phi_i - sum_{j != i} M[i][j] in integers.
//
// Determinism: every lane's sums run over its masks in ascending order, and the accumulators are
// 64-bit integers (FixedPointScales(layout, true): every interaction value, and the row sums of
// a matrix, stay below 2^62 in magnitude), whose atomic additions commute exactly: results are
// bitwise identical from run to run.
#pragma once

#include <cstdint>

#include "core/explain/interventional/interventional_gpu.cuh"
#include "core/explain/interventional/interventional_interactions.h"

namespace grove {
namespace interventional_kernels {

inline constexpr int kWithXStride = kWarpLanes + 1;  // odd: a lane's row starts in its own bank

__device__ inline void AddFixedValue(unsigned long long* at, double v, double scale) {
  const long long fixed = __double2ll_rn(v * scale);
  if (fixed != 0) atomicAdd(at, static_cast<unsigned long long>(fixed));
}

// Grid as InterventionalKernel's. a.d_acc: rows x outputs x (F+1) x (F+1) fixed-point values
// (a.acc_width per row; off the diagonal the upper triangle only), zero before the launch;
// a.d_scale: the interactions' scales; a.d_weights: the attribution's weight table.
__global__ void __launch_bounds__(kBlockThreads) InteractionsKernel(KernelArgs a) {
  __shared__ double weights[kWeightEntries];
  __shared__ double with_x[kWarpsPerBlock * 32 * kWithXStride];
  __shared__ double lane_shared[kWarpsPerBlock * 32];
  __shared__ int32_t lane_feature[kWarpsPerBlock * 32];
  LoadWeights(a, weights);
  WarpRows w;
  if (!BeginWarp(a, &w)) return;  // warp-uniform: every lane below takes part in the syncs
  const Lane& l = w.l;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x / 32;
  const bool element = l.is_player();  // a group's null members add nothing
  const int base = lane - l.rel;  // the lane of the path's root
  double* my_with_x = with_x + (warp * 32 + lane) * kWithXStride;
  double* sums = lane_shared + warp * 32;
  int32_t* features = lane_feature + warp * 32;
  features[lane] = element ? l.player : -1;
  const int64_t f1 = a.num_players + 1;
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t row = w.row_begin + r;
    if (row >= a.num_rows) break;
    const uint32_t x = w.x[r];
    for (int j = 0; j < kWarpLanes; ++j) my_with_x[j] = 0.0;
    InteractionLane mine;
    if (element) {
      const uint32_t end = a.d_mask_begin[l.e.path + 1];
      for (uint32_t m = a.d_mask_begin[l.e.path]; m < end; ++m) {
        AddInteractionMask(x, a.d_masks[m], l.full, l.rel, static_cast<double>(a.d_counts[m]),
                           weights, &mine, my_with_x);
      }
    }
    sums[lane] = mine.shared;
    __syncwarp();
    if (element) {
      for (int k = 0; k < l.info.width; ++k) {
        const int group = l.info.group + k;
        const double v = a.inv_background * a.d_layout.values[l.info.value_begin + k];
        const double scale = a.d_scale[group];
        unsigned long long* m = a.d_acc + row * a.acc_width + group * f1 * f1;
        const int64_t fi = l.player;
        AddFixedValue(m + fi * f1 + fi, v * mine.phi, scale);
        for (int j = l.rel + 1; j < l.info.length; ++j) {
          InteractionLane other;
          other.shared = sums[base + j];
          const double c = InteractionPairCoefficient(x, l.rel, j, mine, my_with_x, other);
          const int64_t fj = features[base + j];
          if (c != 0.0 && fj >= 0) {
            AddFixedValue(m + (fi < fj ? fi * f1 + fj : fj * f1 + fi), v * c, scale);
          }
        }
      }
    }
    __syncwarp();
  }
}

// One thread per (row, output, matrix row i): out = acc / scale / divisor with M[i][j] read from
// the upper triangle, M[i][i] = the SHAP value held on the diagonal minus the row's other entries
// (in integers), M[i][F] = M[F][i] = 0, M[F][F] = the bias (base margin + the background means of
// the range's trees) / divisor.
__global__ void InteractionsFinishKernel(const unsigned long long* d_acc, int64_t num_rows,
                                         int num_outputs, int num_players, const double* d_scale,
                                         const double* d_base_margin,
                                         const double* d_iteration_prefix, int iteration_begin,
                                         int iteration_end, double divisor, float* d_out) {
  const int64_t f1 = num_players + 1;
  const int64_t n = num_rows * num_outputs * f1;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t % f1;
    const int k = static_cast<int>((t / f1) % num_outputs);
    const unsigned long long* block = d_acc + (t - i) * f1;  // this row and output's matrix
    float* out = d_out + t * f1;
    if (i == num_players) {
      for (int64_t j = 0; j < num_players; ++j) out[j] = 0.0f;
      const double bias = d_base_margin[k] +
                          d_iteration_prefix[iteration_end * num_outputs + k] -
                          d_iteration_prefix[iteration_begin * num_outputs + k];
      out[num_players] = static_cast<float>(bias / divisor);
      continue;
    }
    auto entry = [&](int64_t j) { return j > i ? block[i * f1 + j] : block[j * f1 + i]; };
    unsigned long long off = 0;  // wraps as two's complement: exact for the true sum's range
    for (int64_t j = 0; j < num_players; ++j) off += j == i ? 0ull : entry(j);
    for (int64_t j = 0; j < num_players; ++j) {
      const unsigned long long fixed = j == i ? entry(i) - off : entry(j);
      double v = static_cast<double>(static_cast<long long>(fixed)) / d_scale[k];
      if (divisor != 1.0) v /= divisor;
      out[j] = static_cast<float>(v);
    }
    out[num_players] = 0.0f;
  }
}

// The exact probability space's interaction values (the exact kernel's double accumulators:
// d_phi rows x K x (F+1), d_inter rows x K x (F+1)^2) into d_out, one thread per (row, output,
// matrix row i): M[i][i] = phi_i - sum_{j != i} M[i][j] and M[F][F] = d_bias[k], as the CPU's
// StoreExplainedRow.
__global__ void ExactInteractionsFinishKernel(const double* d_phi, const double* d_inter,
                                              int64_t num_rows, int num_outputs, int num_players,
                                              const double* d_bias, float* d_out) {
  const int64_t f1 = num_players + 1;
  const int64_t n = num_rows * num_outputs * f1;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const RowOutputEntry e = SplitRowOutput(t, f1, num_outputs);
    const int64_t i = e.entry;  // the matrix row
    const double* m = d_inter + t * f1;
    float* out = d_out + t * f1;
    if (i == num_players) {
      for (int64_t j = 0; j < num_players; ++j) out[j] = 0.0f;
      out[num_players] = static_cast<float>(d_bias[e.k]);
      continue;
    }
    double off = 0;
    for (int64_t j = 0; j < num_players; ++j) off += j == i ? 0.0 : m[j];
    for (int64_t j = 0; j < num_players; ++j) {
      out[j] = static_cast<float>(j == i ? d_phi[e.rk * f1 + i] - off : m[j]);
    }
    out[num_players] = 0.0f;
  }
}

}  // namespace interventional_kernels
}  // namespace grove
