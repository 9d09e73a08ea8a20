// GPU TreeSHAP engine: warp-per-bin kernels over a PathLayout (GPUTreeShap paper, Algorithms 2-3;
// interactions by conditioning on path features, section 3.5). Plain C++: compiles with g++; the
// kernels live in treeshap_gpu.cuh / treeshap_gpu.cu, and treeshap_gpu_nocuda.cc stands in without
// CUDA (gpu::VisibleGpuCount() == 0, Create fails with UNAVAILABLE).
//
// Path arithmetic (core/explain/treeshap/treeshap_arith.h): division-free EXTEND, and UNWIND by composite
// deflation (stable always) or plain top-down (straight-line, cheaper), in float or double, chosen
// at Create per kind of request (SHAP values, interactions): with TreeShapPrecision::kAuto, the
// cheapest of float top-down, float composite and double top-down whose error bound
// (treeshap_arith::ChoosePrecision) is within TreeShapGpuOptions::float_bound_limit of the exact
// values, double composite elsewhere. SHAP values of bins whose paths all have at most
// table_max_elements non-root elements read per-pattern contribution factors precomputed at Create
// in double (treeshap_arith::ShapTable: no EXTEND or UNWIND; bit-identical to double composite)
// with kAuto and kTable, within table_max_bytes per GPU; the other bins take the arithmetic above,
// its bound taken over them only. Interactions never use the table.
//
// Determinism: results are bitwise identical from run to run for the same input. Each lane's
// contribution is rounded to 64-bit fixed point (scale per output from
// PathLayout::contribution_bound, resolution ~1e-18 of the bound) and accumulated with integer
// atomics, which commute exactly; the conversion to float adds the bias in double.
//
// Device engineering: the layout is resident on every GPU used from Create on, in the copy shared
// by every engine built on the same layout object (path_layout_gpu.h; not in DeviceBytes, which
// counts the engine's own weight and pattern tables and workspaces); each GPU has two streams,
// double-buffered device workspaces and pinned host buffers that grow to the largest request seen
// and are reused (no cudaMalloc in the steady state); rows are split across GPUs; within a GPU, chunks alternate between the streams so that
// one chunk's copies overlap the other's kernels. Every CUDA error becomes an absl::Status.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/common/rows.h"
#include "core/explain/paths.h"
#include "core/explain/treeshap/treeshap_arith.h"
#include "core/gpu/stream.h"

namespace grove {

class ThreadPool;

struct TreeShapGpuOptions {
  // Path arithmetic (EXTEND / UNWIND) precision; accumulation is always 64-bit fixed point.
  TreeShapPrecision precision = TreeShapPrecision::kAuto;
  // kAuto keeps float for a kind of request when the float error bound of every output is at most
  // this: half the corpus tolerance 1e-5 x max(1, |margin|) (whose scale is >= 1), a 2x margin
  // for the bound's second-order terms.
  double float_bound_limit = 5e-6;
  // SHAP pattern tables (kAuto, kTable): paths of at most this many non-root elements (clamped
  // to treeshap_arith::kTableMaxElements; 2^n n doubles per path), at most this many bytes per
  // GPU and 8 times the path layout's own bytes (bins in layout order; a bin that does not fit
  // keeps the arithmetic). 0: no table.
  int table_max_elements = treeshap_arith::kTableMaxElements;
  int64_t table_max_bytes = int64_t{128} << 20;
  int max_devices = 0;          // 0: every visible GPU
  int rows_per_warp = 0;        // rows a warp explains per loaded bin; 0: automatic (SHAP 32;
                                // interactions up to 128 while the grid keeps 1,024 blocks)
  int bins_per_warp = 0;        // bins a warp explains per launch; 0: automatic
  // Allow accumulating a block's rows in shared memory and flushing once per block (used for SHAP
  // values of models with >= 256 bins whose block rows fit in 32 KB, where it measured faster);
  // false: every lane adds to global memory (ablation).
  bool shared_accumulation = true;
  int64_t max_chunk_bytes = int64_t{1} << 30;  // fixed-point accumulator bytes per chunk
  // Interaction values of wide models accumulate only the entries some path can touch (pairs of
  // features sharing a path, per output; CompactInteractionColumns) instead of all K (F+1)^2 per
  // row, when those are at most a quarter of them: the dense 8-byte accumulator of fashion_mnist's
  // 10 x 785^2 entries per row is 50 MB to zero and read back. false: always dense (ablation).
  bool compact_interactions = true;
  // Copies between the caller's buffers and the pinned staging buffers run on this pool
  // (core/common/host_copy.h); not owned, must outlive the engine. Null: the calling thread.
  ThreadPool* host_pool = nullptr;
};

// The pattern tables' bytes on each GPU for `layout`: at most options.table_max_bytes and
// kTableLayoutFactor times the path layout's own bytes, so that a model of many short paths grows
// its device footprint by a bounded factor of what it already holds.
inline constexpr int64_t kTableLayoutFactor = 8;
inline int64_t TreeShapTableBytes(const PathLayout& layout, const TreeShapGpuOptions& options) {
  return std::min(options.table_max_bytes, kTableLayoutFactor * layout.HostBytes());
}

// What one host-to-host call spent (wall clock, seconds).
struct GpuExplainTiming {
  double total_seconds = 0;
  double host_copy_seconds = 0;  // user buffers <-> pinned buffers
  double long_path_seconds = 0;  // CPU fallback for paths longer than kWarpLanes
};

class TreeShapGpu {
 public:
  // Makes `layout` resident on the first max_devices visible GPUs (ResidentPathLayout::On: shared
  // with the other engines built on it). UNAVAILABLE without a GPU.
  static absl::StatusOr<std::unique_ptr<TreeShapGpu>> Create(PathLayoutPtr layout,
                                                             const TreeShapGpuOptions& options);
  virtual ~TreeShapGpu() = default;

  // Host rows in (rows x num_features), host results out (rows x ExplainWidth), every tree of the
  // model (no iteration ranges), long paths included (explained on the CPU and added).
  // Deterministic. Thread-safe (calls on one GPU are serialised).
  virtual absl::Status Explain(RowsView rows, bool interactions, MatrixView<float> out,
                               GpuExplainTiming* timing) = 0;

  // Device-level entry (benchmarks, future device-resident callers): rows already on GPU
  // `device_index` (d_rows: num_rows x num_features, dense), results left in d_out (num_rows x
  // ExplainWidth, dense) on that GPU, enqueued on `stream` (a cudaStream_t of that GPU; the call
  // returns once enqueued work is done). Uses the engine's workspace on that GPU (serialised).
  // Long paths are NOT included (CPU fallback happens in Explain only). Deterministic.
  virtual absl::Status ExplainOnDevice(int device_index, const float* d_rows, int64_t num_rows,
                                       bool interactions, float* d_out,
                                       CUstream_st* stream) = 0;

  // Path arithmetic of each kind of request, fixed at Create: true = float; true = top-down UNWIND.
  virtual bool UsesFloat(bool interactions) const = 0;
  virtual bool UsesTopDown(bool interactions) const = 0;
  // SHAP values of some bins read the pattern tables (UsesFloat / UsesTopDown: the other bins').
  virtual bool UsesTable(bool interactions) const = 0;

  virtual const PathLayoutPtr& layout() const = 0;  // the layout Create was given
  virtual int num_devices() const = 0;
  // The engine's own resident tables and workspaces, all GPUs (the shared layout copies are
  // ResidentPathLayout::ResidentBytes of the layout).
  virtual int64_t DeviceBytes() const = 0;
  // e.g. "treeshap_gpu(shap float, interactions double, float bound 2.1e-06 / 8.4e-06) on cuda:0, ..."
  virtual std::string Describe() const = 0;
  virtual std::string DeviceName() const = 0;  // "cuda:0" or "cuda:0+1+..."
};

}  // namespace grove
