// GPU TreeSHAP engine: device layouts, workspaces, streams and launches (see treeshap_gpu.h).
#include "core/explain/treeshap/treeshap_gpu.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/host_copy.h"
#include "core/explain/path_layout_gpu.h"
#include "core/explain/treeshap/explain_paths_cpu.h"
#include "core/explain/treeshap/treeshap_gpu.cuh"
#include "core/gpu/cuda_status.h"
#include "core/gpu/device_buffer.h"
#include "core/gpu/device_set.h"

namespace grove {
namespace {

namespace tk = treeshap_kernels;

constexpr int64_t kMaxSharedBytes = 32 * 1024;  // dynamic shared memory per block, at most
constexpr int64_t kSharedMinBins = 256;  // fewer bins: global atomics are faster (measured)
constexpr int64_t kMinInteractionBlocks = 1024;  // RowsPerWarp: blocks an interaction grid keeps
constexpr int kShapRowsPerWarp = 32;  // RowsPerWarp of SHAP values (docs/benchmarks/shap-gpu.md)

#define GROVE_CUDA_RETURN(expr) GROVE_CUDA_RETURN_IF_ERROR(expr, "treeshap_gpu: " #expr)

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Everything one GPU holds for the model.
struct DeviceState {
  int device = 0;
  std::mutex mu;
  // The layout's copy on this GPU, shared with the other engines built on it (path_layout_gpu.h).
  ResidentPathLayoutPtr layout;
  gpu::DeviceBuffer weights_float, weights_double;  // Shapley-weight tables (treeshap_arith.h)
  gpu::DeviceBuffer inter_cols, inter_slot;  // compact interactions (CompactInteractionColumns)
  // SHAP pattern tables (treeshap_arith::ShapTable), when used: factors, per-path offsets, and
  // the bins of each kind.
  gpu::DeviceBuffer table, table_offset, table_bins, other_bins;
  int64_t own_bytes = 0;  // resident beside the shared layout: weights, tables, compact columns
  // Workspaces: two slots (one per stream), grown to the largest request seen; guarded by mu.
  cudaStream_t streams[2] = {nullptr, nullptr};
  gpu::DeviceBuffer rows[2], acc[2], out[2];
  gpu::PinnedBuffer h_rows, h_out;

  // Grows `b` to `bytes`.
  absl::Status Reserve(gpu::DeviceBuffer& b, int64_t bytes) {
    return b.Reserve(bytes, "treeshap_gpu: workspace");
  }
  int64_t WorkspaceBytes() const {
    int64_t total = 0;
    for (int s = 0; s < 2; ++s) total += rows[s].bytes() + acc[s].bytes() + out[s].bytes();
    return total;
  }

  ~DeviceState() {  // the buffers go after, with the members
    cudaSetDevice(device);
    for (cudaStream_t st : streams) {
      if (st) cudaStreamDestroy(st);
    }
  }
};

// `host` uploaded into `*b`, its bytes added to `*accounted`.
template <typename T>
absl::Status UploadTo(const std::vector<T>& host, gpu::DeviceBuffer* b, int64_t* accounted) {
  return gpu::UploadCounted(host, "treeshap_gpu: layout upload", b, accounted);
}

// The interaction entries (output column of a row) that some binned path can touch -- every
// ordered pair of its features, the diagonal included, for each output it carries -- and every
// output's bias entry, ascending; empty when that is more than a quarter of the row's
// K (F+1)^2 entries or the row is small (a dense accumulator is then as cheap).
std::vector<int64_t> CompactInteractionColumns(const PathLayout& l) {
  const int64_t f1 = l.num_players + 1;
  const int64_t block = f1 * f1;
  const int64_t width = l.num_outputs * block;
  if (width < 4096 || width > (int64_t{1} << 31)) return {};
  std::vector<bool> touched(width, false);
  std::vector<int32_t> features;
  for (const PathInfo& p : l.paths) {
    if (p.bin == UINT32_MAX) continue;  // long paths: added on the CPU
    features.clear();
    for (int j = 1; j < p.length; ++j) features.push_back(PlayerOf(l, l.elements[p.element_begin + j]));
    for (int k = p.group; k < p.group + p.width; ++k) {
      for (int32_t a : features) {
        for (int32_t b : features) touched[k * block + a * f1 + b] = true;
      }
    }
  }
  for (int k = 0; k < l.num_outputs; ++k) touched[k * block + l.num_players * f1 + l.num_players] = true;
  std::vector<int64_t> cols;
  for (int64_t c = 0; c < width; ++c) {
    if (touched[c]) cols.push_back(c);
  }
  if (static_cast<int64_t>(cols.size()) * 4 > width) return {};
  return cols;
}

template <typename T, typename U, bool kGrouped>
void LaunchKernel(bool interactions, dim3 grid, size_t smem, cudaStream_t s,
                  const tk::KernelArgs& a) {
  if (interactions) {
    tk::InteractionsKernel<T, U, kGrouped><<<grid, tk::kBlockThreads, smem, s>>>(a);
  } else {
    tk::ShapKernel<T, U, kGrouped><<<grid, tk::kBlockThreads, smem, s>>>(a);
  }
}

// The features' kernel, or the groups' for a grouped layout (a.d_player_of set).
template <typename T, typename U>
void LaunchKernel(bool interactions, dim3 grid, size_t smem, cudaStream_t s,
                  const tk::KernelArgs& a) {
  if (a.d_player_of != nullptr) {
    LaunchKernel<T, U, true>(interactions, grid, smem, s, a);
  } else {
    LaunchKernel<T, U, false>(interactions, grid, smem, s, a);
  }
}

// The table kernel (SHAP values only), the features' or the groups'.
void LaunchTableKernel(dim3 grid, size_t smem, cudaStream_t s, const tk::KernelArgs& a) {
  if (a.d_player_of != nullptr) {
    tk::ShapTableKernel<true><<<grid, tk::kBlockThreads, smem, s>>>(a);
  } else {
    tk::ShapTableKernel<false><<<grid, tk::kBlockThreads, smem, s>>>(a);
  }
}

// The kernel of the request's arithmetic (PrecisionChoice).
void LaunchForArithmetic(bool interactions, bool use_float, bool top_down, dim3 grid, size_t smem,
                         cudaStream_t s, const tk::KernelArgs& a) {
  namespace ta = treeshap_arith;
  if (use_float && top_down) {
    LaunchKernel<float, ta::TopDownUnwinder<float>>(interactions, grid, smem, s, a);
  } else if (use_float) {
    LaunchKernel<float, ta::Unwinder<float>>(interactions, grid, smem, s, a);
  } else if (top_down) {
    LaunchKernel<double, ta::TopDownUnwinder<double>>(interactions, grid, smem, s, a);
  } else {
    LaunchKernel<double, ta::Unwinder<double>>(interactions, grid, smem, s, a);
  }
}

class TreeShapGpuImpl final : public TreeShapGpu {
 public:
  TreeShapGpuImpl(PathLayoutPtr layout, const TreeShapGpuOptions& options)
      : layout_(std::move(layout)),
        options_(options),
        table_(WantsTable(options)
                   ? treeshap_arith::BuildShapTable(*layout_, options.table_max_elements,
                                                    TreeShapTableBytes(*layout_, options))
                   : treeshap_arith::ShapTable()),
        precision_(treeshap_arith::ChoosePrecision(*layout_, options.precision,
                                                   options.float_bound_limit, &table_)),
        inter_cols_(options.compact_interactions ? CompactInteractionColumns(*layout_)
                                                 : std::vector<int64_t>()) {}
  ~TreeShapGpuImpl() override {
    const gpu::ScopedCurrentDevice keep_device;  // DeviceState's destructors switch devices
    devices_.clear();
  }

  absl::Status Init(int num_devices) {
    const gpu::ScopedCurrentDevice keep_device;
    const std::vector<double> weights = treeshap_arith::ShapleyWeightTable();
    const std::vector<float> weights_float(weights.begin(), weights.end());
    for (int d = 0; d < num_devices; ++d) {
      auto state = std::make_unique<DeviceState>();
      state->device = d;
      GROVE_CUDA_RETURN(cudaSetDevice(d));
      absl::StatusOr<ResidentPathLayoutPtr> resident = ResidentPathLayout::On(layout_, d);
      if (!resident.ok()) return resident.status();
      state->layout = *std::move(resident);
      int64_t& b = state->own_bytes;
      DeviceState& st = *state;
      for (absl::Status s : {UploadTo(weights_float, &st.weights_float, &b),
                             UploadTo(weights, &st.weights_double, &b)}) {
        if (!s.ok()) return s;
      }
      if (precision_.table) {
        for (absl::Status s : {UploadTo(table_.factors, &st.table, &b),
                               UploadTo(table_.path_offset, &st.table_offset, &b),
                               UploadTo(table_.table_bins, &st.table_bins, &b),
                               UploadTo(table_.other_bins, &st.other_bins, &b)}) {
          if (!s.ok()) return s;
        }
      }
      if (!inter_cols_.empty()) {
        std::vector<int32_t> slot(Width(true), -1);
        for (size_t c = 0; c < inter_cols_.size(); ++c) slot[inter_cols_[c]] = static_cast<int32_t>(c);
        for (absl::Status s : {UploadTo(inter_cols_, &st.inter_cols, &b), UploadTo(slot, &st.inter_slot, &b)}) {
          if (!s.ok()) return s;
        }
      }
      for (int s = 0; s < 2; ++s) {
        GROVE_CUDA_RETURN(cudaStreamCreateWithFlags(&state->streams[s], cudaStreamNonBlocking));
      }
      devices_.push_back(std::move(state));
    }
    issuers_ = std::make_unique<gpu::DeviceIssuers>(static_cast<int>(devices_.size()));
    // The factors live on the GPUs only (up to table_max_bytes each).
    table_bytes_ = table_.Bytes();
    table_.factors = std::vector<double>();
    table_.path_offset = std::vector<uint32_t>();
    return absl::OkStatus();
  }

  const PathLayoutPtr& layout() const override { return layout_; }
  int num_devices() const override { return static_cast<int>(devices_.size()); }
  bool UsesFloat(bool interactions) const override {
    return precision_.use_float[interactions ? 1 : 0];
  }
  bool UsesTopDown(bool interactions) const override {
    return precision_.top_down[interactions ? 1 : 0];
  }
  bool UsesTable(bool interactions) const override { return !interactions && precision_.table; }

  int64_t DeviceBytes() const override {
    int64_t total = 0;
    for (const auto& d : devices_) {
      std::lock_guard<std::mutex> lock(d->mu);
      total += d->own_bytes + d->WorkspaceBytes();
    }
    return total;
  }

  std::string DeviceName() const override {
    std::string s = "cuda:";
    for (size_t d = 0; d < devices_.size(); ++d) absl::StrAppend(&s, d == 0 ? "" : "+", d);
    return s;
  }

  std::string Describe() const override {
    auto form = [this](bool inter) {
      return absl::StrCat(UsesFloat(inter) ? "float" : "double",
                          UsesTopDown(inter) ? " top-down" : "");
    };
    const std::string table =
        precision_.table
            ? absl::StrFormat(", shap table: %d of %d bins, %.2f MB, bound %.2g",
                              table_.table_bins.size(), layout_->num_bins(), table_bytes_ / 1e6,
                              precision_.table_bound)
            : "";
    const std::string compact =
        Compact(true) ? absl::StrFormat(", interactions compact: %d of %d entries",
                                        inter_cols_.size(), Width(true))
                      : "";
    return absl::StrFormat("treeshap_gpu(shap %s, interactions %s, float bound %.2g / %.2g, "
                           "double top-down bound %.2g / %.2g%s%s) on %s, %d bins, layout %.2f MB "
                           "per GPU",
                           form(false), form(true), precision_.bound[0], precision_.bound[1],
                           precision_.top_down_bound[0][1], precision_.top_down_bound[1][1],
                           table, compact, DeviceName(), layout_->num_bins(),
                           devices_.empty() ? 0.0 : devices_[0]->layout->bytes() / 1e6);
  }

  absl::Status ExplainOnDevice(int device_index, const float* d_rows, int64_t num_rows,
                               bool interactions, float* d_out, CUstream_st* stream) override {
    if (device_index < 0 || device_index >= num_devices()) {
      return absl::InvalidArgumentError("no such GPU");
    }
    DeviceState& d = *devices_[device_index];
    std::lock_guard<std::mutex> lock(d.mu);
    GROVE_CUDA_RETURN(cudaSetDevice(d.device));
    const int64_t width = Width(interactions);
    const int64_t chunk = ChunkRows(interactions, num_rows);
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (absl::Status st = d.Reserve(d.acc[0], chunk * AccWidth(interactions) * 8); !st.ok()) {
      return st;
    }
    for (int64_t begin = 0; begin < num_rows; begin += chunk) {
      const int64_t n = std::min(chunk, num_rows - begin);
      if (absl::Status st =
              Launch(d, d_rows + begin * layout_->num_features, n, interactions,
                     d.acc[0].as<unsigned long long>(), d_out + begin * width, s);
          !st.ok()) {
        return st;
      }
    }
    GROVE_CUDA_RETURN(cudaStreamSynchronize(s));
    return absl::OkStatus();
  }

  absl::Status Explain(RowsView rows, bool interactions, MatrixView<float> out,
                       GpuExplainTiming* timing) override {
    const double start = Now();
    const int64_t width = Width(interactions);
    if (rows.cols != layout_->num_features || out.rows != rows.rows || out.cols != width) {
      return absl::InvalidArgumentError("TreeShapGpu::Explain: shape mismatch");
    }
    GpuExplainTiming local;
    if (rows.rows > 0) {
      const int nd = num_devices();
      // Split rows evenly; tiny batches use one GPU.
      const int use = static_cast<int>(std::min<int64_t>(nd, std::max<int64_t>(1, rows.rows / 64)));
      std::vector<absl::Status> status(use);
      std::vector<double> copy_seconds(use, 0.0);
      auto run = [&](int i) {
        const int64_t begin = rows.rows * i / use;
        const int64_t end = rows.rows * (i + 1) / use;
        status[i].Update(
            RunDevice(*devices_[i], rows, begin, end, interactions, out, &copy_seconds[i]));
      };
      issuers_->RunOnEach(use, run);
      for (int i = 0; i < use; ++i) {
        if (!status[i].ok()) return status[i];
        local.host_copy_seconds = std::max(local.host_copy_seconds, copy_seconds[i]);
      }
      if (!layout_->long_paths.empty()) {
        const double long_start = Now();
        AddLongPaths(rows, interactions, out);
        local.long_path_seconds = Now() - long_start;
      }
    }
    local.total_seconds = Now() - start;
    if (timing != nullptr) *timing = local;
    return absl::OkStatus();
  }

 private:
  static bool WantsTable(const TreeShapGpuOptions& o) {
    return (o.precision == TreeShapPrecision::kAuto || o.precision == TreeShapPrecision::kTable) &&
           o.table_max_elements > 0 && o.table_max_bytes > 0;
  }

  int64_t Width(bool interactions) const {
    const int64_t f1 = layout_->num_players + 1;
    return layout_->num_outputs * (interactions ? f1 * f1 : f1);
  }

  // Accumulator columns per row: the output's, or the compact interaction entries.
  bool Compact(bool interactions) const { return interactions && !inter_cols_.empty(); }
  int64_t AccWidth(bool interactions) const {
    return Compact(interactions) ? static_cast<int64_t>(inter_cols_.size()) : Width(interactions);
  }

  // Rows per chunk: its accumulator (8 bytes per column) and its float results within
  // max_chunk_bytes.
  int64_t ChunkRows(bool interactions, int64_t rows) const {
    const int64_t per_row = std::max(AccWidth(interactions) * 8, Width(interactions) * 4);
    const int64_t cap = std::max<int64_t>(1, options_.max_chunk_bytes / per_row);
    return std::max<int64_t>(1, std::min(rows, cap));
  }

  // SHAP values: kShapRowsPerWarp (each bin's paths, once loaded, serve that many rows; the
  // block's rows accumulate in shared memory where they fit). Interactions: up to 128, as long as
  // the grid keeps kMinInteractionBlocks blocks: each bin's lane state then serves more rows, and
  // fewer blocks than that leave SMs idle (docs/benchmarks/shap-gpu.md has the measurements).
  int RowsPerWarp(int64_t rows, bool interactions) const {
    int r = options_.rows_per_warp;
    if (r <= 0 && !interactions) r = kShapRowsPerWarp;
    if (r <= 0) {
      const int64_t bin_groups = (layout_->num_bins() + tk::kWarpsPerBlock - 1) / tk::kWarpsPerBlock;
      r = 128;
      while (r > 8 && bin_groups * ((rows + r - 1) / r) < kMinInteractionBlocks) r /= 2;
    }
    // Keep gridDim.y under its limit.
    const int64_t min_r = (rows + 65534) / 65535;
    return static_cast<int>(std::max<int64_t>(r, min_r));
  }

  // Enqueues zeroing, the kernel(s) and the conversion for n rows on stream s.
  absl::Status Launch(DeviceState& d, const float* d_rows, int64_t n, bool interactions,
                      unsigned long long* d_acc, float* d_out, cudaStream_t s) {
    const int64_t f1 = layout_->num_players + 1;
    const int64_t block = interactions ? f1 * f1 : f1;
    const int64_t width = Width(interactions);
    const int64_t acc_width = AccWidth(interactions);
    // Launch errors are read with cudaGetLastError below; drop a stale one left on this thread
    // by other code, so that it is not reported as ours.
    (void)cudaGetLastError();
    GROVE_CUDA_RETURN(cudaMemsetAsync(d_acc, 0, n * acc_width * 8, s));
    tk::KernelArgs a;
    a.d_layout = d.layout->arrays();
    a.d_scale = d.layout->scale(interactions);
    a.num_bins = layout_->num_bins();
    a.d_rows = d_rows;
    a.num_rows = n;
    a.num_features = layout_->num_features;
    a.num_players = layout_->num_players;
    a.d_player_of = d.layout->player_of();
    a.rows_per_warp = RowsPerWarp(n, interactions);
    a.d_acc = d_acc;
    a.acc_width = acc_width;
    a.d_slot = Compact(interactions) ? d.inter_slot.as<int32_t>() : nullptr;
    // One launch per kind of bin: SHAP values of the table's bins by the table kernel, the other
    // bins by the arithmetic's (both add integers to the same accumulator: order-independent).
    const bool use_float = UsesFloat(interactions);
    a.d_weights = use_float ? d.weights_float.get() : d.weights_double.get();
    auto launch_bins = [&](int64_t num_bins, const uint32_t* d_bins, bool table) {
      a.num_bins = num_bins;
      a.d_bins = d_bins;
      // Shared-memory accumulation when the block's rows fit (small outputs): one global atomic per
      // entry per block instead of one per lane and row. Measured on the H100
      // (docs/benchmarks/archive.md, 2026-11-22): 1.3-1.9x faster for SHAP values of models with
      // thousands of bins; slower for models of a few bins (zeroing and flushing dominate) and
      // never faster for interactions. Both ways give bitwise identical results (integer sums).
      const int64_t shared_bytes = static_cast<int64_t>(a.rows_per_warp) * width * 8;
      a.use_shared = options_.shared_accumulation && !interactions &&
                     a.num_bins >= kSharedMinBins && shared_bytes <= kMaxSharedBytes;
      const int64_t blocks_y = (n + a.rows_per_warp - 1) / a.rows_per_warp;
      const int64_t bin_groups = (a.num_bins + tk::kWarpsPerBlock - 1) / tk::kWarpsPerBlock;
      // Several bins per warp when there are far more blocks than the GPU holds at once: for SHAP
      // values it amortises the shared accumulator's zeroing and flush, and with global atomics
      // (rows too wide for shared memory) the block's row loads; interactions keep one.
      int bpw = options_.bins_per_warp;
      if (bpw <= 0) {
        bpw = static_cast<int>(std::clamp<int64_t>(bin_groups * blocks_y / 8192, 1, 16));
        if (interactions) bpw = 1;
      }
      a.bins_per_warp = bpw;
      const dim3 grid(static_cast<unsigned>((bin_groups + bpw - 1) / bpw),
                      static_cast<unsigned>(blocks_y));
      const size_t smem = a.use_shared ? static_cast<size_t>(shared_bytes) : 0;
      if (table) {
        LaunchTableKernel(grid, smem, s, a);
      } else {
        LaunchForArithmetic(interactions, use_float, UsesTopDown(interactions), grid, smem, s, a);
      }
    };
    if (UsesTable(interactions)) {
      a.d_table = d.table.as<double>();
      a.d_table_offset = d.table_offset.as<uint32_t>();
      const int64_t tabled = static_cast<int64_t>(table_.table_bins.size());
      const int64_t others = static_cast<int64_t>(table_.other_bins.size());
      if (tabled > 0) launch_bins(tabled, d.table_bins.as<uint32_t>(), true);
      GROVE_CUDA_RETURN(cudaGetLastError());
      if (others > 0) launch_bins(others, d.other_bins.as<uint32_t>(), false);
      GROVE_CUDA_RETURN(cudaGetLastError());
    } else if (layout_->num_bins() > 0) {
      launch_bins(layout_->num_bins(), nullptr, false);
      GROVE_CUDA_RETURN(cudaGetLastError());
    }
    const int64_t total = n * acc_width;
    const int threads = 256;
    const int blocks = std::max(
        1, static_cast<int>(std::min<int64_t>((total + threads - 1) / threads, 65536)));
    const int64_t bias_col =
        interactions ? layout_->num_players * f1 + layout_->num_players : layout_->num_players;
    const double* d_scale = d.layout->scale(interactions);
    if (Compact(interactions)) {  // untouched entries are zero
      GROVE_CUDA_RETURN(cudaMemsetAsync(d_out, 0, n * width * sizeof(float), s));
    }
    tk::FinishKernel<<<blocks, threads, 0, s>>>(
        d_acc, n, acc_width, Compact(interactions) ? d.inter_cols.as<int64_t>() : nullptr, width,
        block, bias_col, d_scale, d.layout->bias(), d_out);
    GROVE_CUDA_RETURN(cudaGetLastError());
    return absl::OkStatus();
  }

  // Rows [begin, end) of `rows` on one GPU, chunks alternating between its two streams.
  absl::Status RunDevice(DeviceState& d, RowsView rows, int64_t begin, int64_t end,
                         bool interactions, MatrixView<float> out, double* copy_seconds) {
    std::lock_guard<std::mutex> lock(d.mu);
    GROVE_CUDA_RETURN(cudaSetDevice(d.device));
    const int64_t F = layout_->num_features;
    const int64_t width = Width(interactions);
    const int64_t n = end - begin;
    // At least two chunks when there is enough work, so that copies overlap compute.
    int64_t chunk = ChunkRows(interactions, n);
    if (chunk == n && n >= 4096) chunk = (n + 3) / 4;
    for (absl::Status st : {d.h_rows.Reserve(n * F * sizeof(float), "treeshap_gpu: pinned rows"),
                            d.h_out.Reserve(n * width * sizeof(float), "treeshap_gpu: pinned results")}) {
      if (!st.ok()) return st;
    }
    for (int s = 0; s < 2; ++s) {
      for (absl::Status st : {d.Reserve(d.rows[s], chunk * F * sizeof(float) + 16),
                              d.Reserve(d.acc[s], chunk * AccWidth(interactions) * 8),
                              d.Reserve(d.out[s], chunk * width * sizeof(float))}) {
        if (!st.ok()) return st;
      }
    }
    float* h_rows = d.h_rows.as<float>();
    float* h_out = d.h_out.as<float>();
    ThreadPool* pool = options_.host_pool;
    // Each chunk's rows are staged just before its copy, and the previous chunk's results are
    // copied out while this one computes (its stream is the other one).
    auto copy_out = [&](int64_t c, int prev_slot) -> absl::Status {
      GROVE_CUDA_RETURN(cudaStreamSynchronize(d.streams[prev_slot]));
      const double start = Now();
      const int64_t m = std::min(chunk, n - c);
      CopyRows(pool, out.Row(begin + c), out.stride, h_out + c * width, width, m, width);
      *copy_seconds += Now() - start;
      return absl::OkStatus();
    };
    int slot = 0;
    int64_t pending = -1;  // first row of the chunk whose results are not copied out yet
    for (int64_t c = 0; c < n; c += chunk, slot ^= 1) {
      const int64_t m = std::min(chunk, n - c);
      cudaStream_t s = d.streams[slot];
      const double copy_start = Now();
      CopyRows(pool, h_rows + c * F, F, rows.Row(begin + c), rows.stride, m, F);
      *copy_seconds += Now() - copy_start;
      float* d_rows = d.rows[slot].as<float>();
      float* d_out = d.out[slot].as<float>();
      GROVE_CUDA_RETURN(cudaMemcpyAsync(d_rows, h_rows + c * F, m * F * sizeof(float),
                                        cudaMemcpyHostToDevice, s));
      if (absl::Status st =
              Launch(d, d_rows, m, interactions, d.acc[slot].as<unsigned long long>(), d_out, s);
          !st.ok()) {
        return st;
      }
      GROVE_CUDA_RETURN(cudaMemcpyAsync(h_out + c * width, d_out, m * width * sizeof(float),
                                        cudaMemcpyDeviceToHost, s));
      if (pending >= 0) {
        if (absl::Status st = copy_out(pending, slot ^ 1); !st.ok()) return st;
      }
      pending = c;
    }
    if (pending >= 0) {
      if (absl::Status st = copy_out(pending, slot ^ 1); !st.ok()) return st;
    }
    GROVE_CUDA_RETURN(cudaStreamSynchronize(d.streams[0]));
    GROVE_CUDA_RETURN(cudaStreamSynchronize(d.streams[1]));
    return absl::OkStatus();
  }

  // CPU fallback for paths longer than a warp: double contributions added to the GPU result.
  void AddLongPaths(RowsView rows, bool interactions, MatrixView<float> out) const {
    const PathLayout& l = *layout_;
    const int64_t width = Width(interactions);
    std::vector<double> acc(width);
    for (int64_t r = 0; r < rows.rows; ++r) {
      std::fill(acc.begin(), acc.end(), 0.0);
      AddPathContributions(l, l.long_paths.data(), static_cast<int64_t>(l.long_paths.size()),
                           rows.Row(r), interactions, acc.data());
      float* o = out.Row(r);
      for (int64_t c = 0; c < width; ++c) {
        if (acc[c] != 0) o[c] = static_cast<float>(static_cast<double>(o[c]) + acc[c]);
      }
    }
  }

  PathLayoutPtr layout_;
  TreeShapGpuOptions options_;
  // SHAP pattern tables (empty unless kAuto or kTable); after Init only the bin lists remain.
  treeshap_arith::ShapTable table_;
  int64_t table_bytes_ = 0;
  treeshap_arith::PrecisionChoice precision_;  // fixed at construction
  std::vector<int64_t> inter_cols_;  // CompactInteractionColumns; empty: dense interactions
  std::vector<std::unique_ptr<DeviceState>> devices_;
  std::unique_ptr<gpu::DeviceIssuers> issuers_;  // device i's share on thread i (made at Init)
};

}  // namespace

absl::StatusOr<std::unique_ptr<TreeShapGpu>> TreeShapGpu::Create(
    PathLayoutPtr layout, const TreeShapGpuOptions& options) {
  if (layout == nullptr) return absl::InvalidArgumentError("TreeShapGpu: no layout");
  int n = gpu::VisibleGpuCount();
  if (n == 0) return absl::UnavailableError("no GPU: no CUDA device is visible");
  if (options.max_devices > 0) n = std::min(n, options.max_devices);
  auto engine = std::make_unique<TreeShapGpuImpl>(std::move(layout), options);
  if (absl::Status s = engine->Init(n); !s.ok()) return s;
  return std::unique_ptr<TreeShapGpu>(std::move(engine));
}

}  // namespace grove
