// The Tahoe GPU engine's selection and request path (see tahoe_engine.h; the engine's parts are in
// tahoe_engine_impl.h). Compiled only with CUDA (tahoe_engine_nocuda.cc stands in otherwise).
#if defined(GROVE_HAVE_CUDA)

#include "core/predict/tahoe/tahoe_engine.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/cpus.h"
#include "core/common/host_copy.h"
#include "core/common/log.h"
#include "core/common/thread_pool.h"
#include "core/gpu/cuda_status.h"
#include "core/gpu/device_set.h"
#include "core/gpu/event_wait.h"
#include "core/predict/cpu/cpu_infer.h"
#include "core/predict/tahoe/tahoe_engine_impl.h"
#include "core/predict/tahoe/tahoe_kernels.h"
#include "core/model/traverse.h"

namespace grove {
namespace tahoe_internal {

namespace {

// One of Tahoe's GPU kernels as a PredictStrategy: the batch split across the engine's GPUs (few
// rows: one), each part staged, computed and copied back through that GPU's slots (RunHost).
class TahoeKernelStrategy final : public PredictStrategy {
 public:
  TahoeKernelStrategy(const TahoeEngineImpl& engine, StrategyId id) : engine_(engine), id_(id) {}
  StrategyId id() const override { return id_; }
  absl::Status Run(RowsView rows, const PredictOptions& options, int groups,
                   MatrixView<float> out, std::string* device) const override {
    return engine_.RunKernel(id_, groups, rows, options, out, device);
  }

 private:
  const TahoeEngineImpl& engine_;
  StrategyId id_;
};

std::unique_ptr<PredictStrategy> MakeCpu(const TahoeEngineImpl& engine, StrategyId) {
  return MakeCpuPredictStrategy(engine.forest(), engine.pool());
}
std::unique_ptr<PredictStrategy> MakeKernel(const TahoeEngineImpl& engine, StrategyId id) {
  return std::make_unique<TahoeKernelStrategy>(engine, id);
}

// The factory of each strategy, in StrategyId order.
using StrategyFactory = std::unique_ptr<PredictStrategy> (*)(const TahoeEngineImpl&, StrategyId);
constexpr StrategyFactory kStrategyFactories[kNumStrategies] = {
    MakeCpu, MakeKernel, MakeKernel, MakeKernel, MakeKernel, MakeKernel};

// The workspace a launch of `s` over `rows` rows needs (`groups`: row chunk's shape code, whose
// tree parts each keep their sums).
int64_t LaunchWorkspaceDoubles(const TahoeDeviceForest& df, StrategyId s, int groups,
                               OutputKind kind, int64_t rows) {
  const int parts = s == StrategyId::kRowChunk ? RowChunkShape::FromCode(groups).parts : 1;
  return TahoeWorkspaceDoubles(df, s, kind, rows, parts);
}

// Copies `rows` rows of `cols` floats between host and device (rows `dst_stride` and `src_stride`
// floats apart). Rows laid end to end on both sides go as one linear transfer: a pitched copy of
// narrow rows (32-byte rows of an 8-feature model, 4-byte results) moves them a row at a time.
cudaError_t CopyMatrixAsync(float* dst, int64_t dst_stride, const float* src, int64_t src_stride,
                            int64_t cols, int64_t rows, cudaMemcpyKind kind, cudaStream_t stream) {
  if ((dst_stride == cols && src_stride == cols) || rows == 1) {
    return cudaMemcpyAsync(dst, src, rows * cols * 4, kind, stream);
  }
  return cudaMemcpy2DAsync(dst, dst_stride * 4, src, src_stride * 4, cols * 4, rows, kind, stream);
}

// Stages rows [begin, begin + n) of `rows` into the slot's pinned buffer and sends them to the
// device on the slot's stream. With `piece_pool`, each piece goes to the device as soon as its
// worker has staged it, so the DMA of the first pieces overlaps the staging of the rest (staging
// 10 MB and then sending it cost prod-wide256's 10,000-row batches both in full); otherwise the
// rows are staged (on `pool`) and sent in one transfer. Every transfer is enqueued before this
// returns, so the caller's kernel follows them on the stream.
absl::Status StageAndSend(ThreadPool* piece_pool, ThreadPool* pool, int device, Slot& slot,
                          RowsView rows, int64_t begin, int64_t n) {
  const int64_t F = rows.cols, row_bytes = std::max<int64_t>(1, F * 4);
  if (piece_pool == nullptr || n * row_bytes < kPipelinedStagingBytes) {
    StageRows(pool, slot.host_in(), F, rows.Row(begin), rows.stride, n, F);
    return gpu::CudaStatus(cudaMemcpyAsync(slot.device_in(), slot.host_in(), n * row_bytes,
                                           cudaMemcpyHostToDevice, slot.stream),
                           "copy rows to device");
  }
  std::atomic<int> error{cudaSuccess};
  // At most kStagingPieces pieces: a DMA per megabyte ran 1M-row batches of 4 KB rows 30% slower
  // end to end (workers contending for the stream, short transfers).
  const int64_t piece_bytes = std::max(kStagingPieceBytes, n * row_bytes / kStagingPieces);
  const int64_t grain = std::max<int64_t>(1, piece_bytes / row_bytes);
  piece_pool->ParallelFor(n, grain, [&](int64_t b, int64_t e) {
    float* staged = slot.host_in() + b * F;
    StageRows(nullptr, staged, F, rows.Row(begin + b), rows.stride, e - b, F);
    cudaError_t c = cudaSetDevice(device);  // a worker's current device is its own
    if (c == cudaSuccess) {
      c = cudaMemcpyAsync(slot.device_in() + b * F, staged, (e - b) * row_bytes,
                          cudaMemcpyHostToDevice, slot.stream);
    }
    if (c != cudaSuccess) error.store(c);
  });
  return gpu::CudaStatus(static_cast<cudaError_t>(error.load()), "copy rows to device");
}

}  // namespace

absl::Status TahoeEngineImpl::Init() {
  const gpu::ScopedCurrentDevice keep_device;
  if (options_.staging_lanes < 0 || options_.staging_lanes > kMaxStagingLanes) {
    return absl::InvalidArgumentError(absl::StrCat("tahoe: staging_lanes ", options_.staging_lanes,
                                                   " is outside 0..", kMaxStagingLanes));
  }
  const int visible = gpu::VisibleGpuCount();
  if (visible == 0) return absl::UnavailableError("no CUDA device visible");
  std::vector<int> devices = options_.devices;
  if (devices.empty()) {
    const int n = options_.max_gpus > 0 ? std::min(visible, options_.max_gpus) : visible;
    for (int d = 0; d < std::min(n, kMaxEngineGpus); ++d) devices.push_back(d);
  }
  if (static_cast<int>(devices.size()) > kMaxEngineGpus) {
    return absl::InvalidArgumentError(absl::StrCat("tahoe: ", devices.size(),
                                                   " devices listed; at most ", kMaxEngineGpus));
  }
  for (int d : devices) {
    if (d < 0 || d >= visible) {
      return absl::InvalidArgumentError(absl::StrCat("tahoe: device ", d, " is not one of the ",
                                                     visible, " visible CUDA devices"));
    }
  }
  const int count = static_cast<int>(devices.size());
  if (options_.staging_threads < 0 || options_.staging_threads > 64) {
    return absl::InvalidArgumentError(absl::StrCat("tahoe: staging_threads ",
                                                   options_.staging_threads, " is outside 0..64"));
  }
  // Several GPUs staging through one pool queue behind each other's copies (the pool runs their
  // pieces interleaved), so each gets threads of its own unless told otherwise: together as many
  // as the host has hardware threads (the copies are bound by the host's memory, which fewer
  // threads do not saturate), at most kMaxAutoStagingThreads each.
  int staging_threads = options_.staging_threads;
  if (staging_threads == 0 && count > 1) {
    staging_threads = std::clamp(UsableCpus() / count, 1, kMaxAutoStagingThreads);
  }
  absl::StatusOr<GpuHardwareParams> hw =
      LoadOrCalibrateGpu(options_.engine.calibration_cache_dir, devices[0]);
  if (!hw.ok()) return hw.status();
  hw_ = *hw;
  BuildLanes();
  BuildLevel();
  BuildRecords();
  for (int d : devices) {
    auto g = std::make_unique<Gpu>();
    if (absl::Status s = InitGpu(d, *g); !s.ok()) return s;
    if (staging_threads > 0) g->staging_pool = std::make_unique<ThreadPool>(staging_threads);
    gpus_.push_back(std::move(g));
  }
  issuers_ = std::make_unique<gpu::DeviceIssuers>(count);
  for (int i = 0; i < kNumStrategies; ++i) {
    strategies_[i] = kStrategyFactories[i](*this, static_cast<StrategyId>(i));
  }
  CalibrateCpu();
  if (options_.probe) {
    if (absl::Status s = Probe(); !s.ok()) return s;
  }
  GROVE_LOG(INFO) << "tahoe engine ready" << KV("gpus", count) << KV("device", hw_.device_name)
                  << KV("staging_threads_per_gpu", staging_threads)
                  << KV("trees", format_->trees().size())
                  << KV("node_bytes", format_->node_bytes()) << KV("parts", parts_)
                  << KV("device_mb", DeviceBytes() / 1e6)
                  << KV("cpu_ns_per_visit", cpu_seconds_per_visit_ * 1e9)
                  << KV("cpu_fixed_us", cpu_fixed_seconds_ * 1e6) << KV("cpu_parallelism", cpu_parallelism_);
  return absl::OkStatus();
}

int64_t TahoeEngineImpl::ChunkRows(const Gpu& g, const StagingLane& lane, StrategyId s, int groups,
                                   const TahoeCall& call, bool host) const {
  int64_t chunk = host ? kTargetChunkRows : kDeviceChunkRows;
  if (options_.max_chunk_rows > 0) chunk = std::min(chunk, options_.max_chunk_rows);
  const int64_t ws_per_row = LaunchWorkspaceDoubles(g.df, s, groups, call.kind, 1);
  if (ws_per_row > 0) chunk = std::min(chunk, lane.ws_doubles / ws_per_row);
  if (host) {
    chunk = std::min(chunk, lane.in_bytes / (4 * std::max<int64_t>(1, g.df.view.num_features)));
    chunk = std::min(chunk, lane.out_bytes / (4 * std::max<int64_t>(1, call.width)));
  }
  return std::max<int64_t>(1, chunk);
}

TahoeWorkload TahoeEngineImpl::Workload(int64_t rows, const PredictOptions& options,
                                        bool on_device) const {
  const TahoeForest& tf = *format_;
  const Gpu& g = *gpus_[0];
  TahoeWorkload w;
  w.rows = rows;
  IterationRange range;
  if (!ResolveIterationRange(*forest_, options.iteration_begin, options.iteration_end, &range).ok()) {
    range.begin = 0;
    range.end = forest_->num_iterations;
  }
  w.visits_per_row = tf.ExpectedVisits(range.begin, range.end);
  int trees = 0;
  for (const TahoeTree& t : tf.trees()) trees += t.iteration >= range.begin && t.iteration < range.end;
  w.num_trees = trees;
  w.features = forest_->num_features;
  w.outputs = forest_->num_outputs;
  w.out_width = static_cast<int>(PredictWidth(*forest_, options));
  w.node_bytes = tf.node_bytes();
  w.forest_smem_bytes = g.df.forest_smem_bytes;
  w.num_parts = g.df.num_parts;
  w.part_smem_bytes = g.df.part_smem_bytes;
  w.max_shared_data_groups = TahoeMaxSharedDataGroups(g.df, hw_.smem_per_block);
  w.shared_forest_fits =
      TahoeSharedBytes(g.df, StrategyId::kSharedForest, 1) <= hw_.smem_per_block;
  w.forest_blocks_per_sm = g.forest_blocks_per_sm;
  w.part_blocks_per_sm = g.part_blocks_per_sm;
  w.forest_threads = kForestSmemThreads;
  w.rows_staged = g.df.staged_row_bytes > 0;
  w.max_row_chunk = g.max_row_chunk;
  w.best_row_chunk = best_row_chunk_.chunk;
  w.row_chunk_per_thread = best_row_chunk_.per_thread;
  w.row_chunk_threads = best_row_chunk_.threads;
  w.row_chunk_timings = row_chunk_timings_.empty() ? nullptr : row_chunk_timings_.data();
  w.num_row_chunk_timings = static_cast<int>(row_chunk_timings_.size());
  w.row_chunk_large_rows = row_chunk_large_rows_;
  w.row_chunk_launches = row_chunk_launches_.empty() ? nullptr : row_chunk_launches_.data();
  w.num_row_chunk_launches = static_cast<int>(row_chunk_launches_.size());
  w.row_chunk_row_bytes = 4 * TahoeRowChunkStride(w.features);
  w.row_chunk_acc_bytes = g.row_chunk_acc_bytes;
  TahoeCall call;
  call.kind = options.kind;
  call.width = w.out_width;
  w.chunk_rows = ChunkRows(g, *g.lanes[0], StrategyId::kSplittingSharedForest, 1, call, !on_device);
  w.rows_on_device = on_device;
  w.num_gpus = on_device ? 1 : num_gpus();
  w.cpu_allowed = !on_device;
  w.cpu_seconds_per_visit = cpu_seconds_per_visit_;
  w.cpu_fixed_seconds = cpu_fixed_seconds_;
  for (int i = 0; i < kNumStrategies; ++i) {
    w.throughput_scale[i] = throughput_scale_[i];
    w.latency_scale[i] = latency_scale_[i];
  }
  w.cpu_threads = pool_ != nullptr ? std::max(1, pool_->num_threads()) : 1;
  w.cpu_parallelism = cpu_parallelism_;
  w.cpu_grain = cpu::kPredictGrain;
  return w;
}

absl::StatusOr<StrategyChoice> TahoeEngineImpl::Plan(int64_t rows, const PredictOptions& options,
                                                     bool rows_on_device,
                                                     std::string_view force) const {
  absl::StatusOr<std::optional<StrategyId>> forced = ParseStrategy(force);
  if (!forced.ok()) return forced.status();
  if (rows_on_device && *forced == StrategyId::kCpu) {
    return absl::InvalidArgumentError("the cpu strategy takes host rows");
  }
  const TahoeWorkload w = Workload(rows, options, rows_on_device);
  absl::StatusOr<StrategyChoice> c = ChooseStrategy(hw_, w, *forced);
  // Where the probe timed the candidates near this batch size, its winner runs (unless the
  // selector chose the CPU, or a strategy was forced).
  const StrategyId probed =
      ProbedChoice(static_cast<double>(rows) / std::max(1, w.num_gpus));
  if (c.ok() && !forced->has_value() && probed != StrategyId::kCpu &&
      c->strategy != StrategyId::kCpu && c->strategy != probed &&
      c->costs[static_cast<int>(probed)].feasible) {
    const StrategyCost& p = c->costs[static_cast<int>(probed)];
    c->reason = absl::StrCat("probe: ", p.name(), " timed fastest near this batch; ", c->reason);
    c->strategy = p.id;
    c->groups = p.groups;
    c->predicted_seconds = p.seconds;
  }
  if (c.ok() && c->strategy == StrategyId::kSharedData && options_.shared_data_groups > 0) {
    c->groups = std::min(options_.shared_data_groups,
                         std::max(1, TahoeMaxSharedDataGroups(gpus_[0]->df, hw_.smem_per_block)));
  }
  if (c.ok() && c->strategy == StrategyId::kRowChunk && options_.row_chunk > 0) {
    c->groups = options_.row_chunk;  // TahoeLaunch makes the shape valid
  }
  return c;
}

TahoeLaunchArgs TahoeEngineImpl::Args(const Gpu& g, StrategyId s, int groups,
                                      const TahoeCall& call) const {
  TahoeLaunchArgs a;
  a.strategy = s;
  a.kind = call.kind;
  a.row_params = call.row_params;
  a.transform = call.transform;
  a.groups = std::max(1, groups);
  a.sm_count = hw_.sm_count;
  a.blocks_per_sm = s == StrategyId::kSharedForest ? g.forest_blocks_per_sm : g.part_blocks_per_sm;
  a.level_walk = level_walk_;
  a.record_walk = record_walk_;
  return a;
}

absl::Status TahoeEngineImpl::RunDevice(Gpu& g, StrategyId s, int groups, const TahoeCall& call,
                                        const float* d_rows, int64_t rows, int64_t row_stride,
                                        float* d_out, int64_t out_stride,
                                        double* kernel_seconds) const {
  const LaneLease lease(g, rows, /*first_only=*/true);
  StagingLane& lane = lease.lane();
  GROVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(g.device), "cudaSetDevice");
  const int64_t chunk = ChunkRows(g, lane, s, groups, call, false);
  Slot& slot = lane.slots[0];
  TahoeLaunchArgs a = Args(g, s, groups, call);
  a.row_stride = row_stride;
  a.out_stride = out_stride;
  if (kernel_seconds != nullptr) {
    GROVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.kernel_start, slot.stream), "cudaEventRecord");
  }
  for (int64_t begin = 0; begin < rows; begin += chunk) {
    a.d_rows = d_rows + begin * row_stride;
    a.rows = std::min(chunk, rows - begin);
    a.d_out = d_out + begin * out_stride;
    GROVE_CUDA_RETURN_IF_ERROR(TahoeLaunch(g.df, a, slot.workspace(), slot.stream), "tahoe kernel launch");
  }
  if (kernel_seconds != nullptr) {
    GROVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.kernel_end, slot.stream), "cudaEventRecord");
  }
  GROVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.done, slot.stream), "cudaEventRecord");
  absl::Status waited = gpu::WaitForEvent(slot.done, "tahoe kernels", kDeviceWaitSpin);
  if (!waited.ok()) return waited;
  if (kernel_seconds != nullptr) {
    float ms = 0;
    GROVE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, slot.kernel_start, slot.kernel_end),
                               "cudaEventElapsedTime");
    *kernel_seconds = ms * 1e-3;
  }
  return absl::OkStatus();
}

absl::Status TahoeEngineImpl::RunHost(Gpu& g, StrategyId s, int groups, const TahoeCall& call,
                                      RowsView rows, MatrixView<float> out,
                                      double* kernel_seconds) const {
  const LaneLease lease(g, rows.rows, /*first_only=*/false);
  return RunHostOnLane(g, lease.lane(), s, groups, call, rows, out, kernel_seconds);
}

absl::Status TahoeEngineImpl::RunHostOnLane(Gpu& g, StagingLane& lane, StrategyId s, int groups,
                                            const TahoeCall& call, RowsView rows,
                                            MatrixView<float> out, double* kernel_seconds) const {
  GROVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(g.device), "cudaSetDevice");
  const int64_t chunk = ChunkRows(g, lane, s, groups, call, true);
  const int64_t F = rows.cols, W = call.width;
  ThreadPool* const staging = g.Staging(pool_);
  TahoeLaunchArgs a = Args(g, s, groups, call);
  a.row_stride = F;
  a.out_stride = W;
  // Rows or results in page-locked memory (a pinned shared-memory region, say) go to and from
  // the device by DMA directly, skipping the slot's staging copy.
  const bool direct_in = gpu::IsPinnedHost(rows.data);
  const bool direct_out = gpu::IsPinnedHost(out.data);
  // With both by DMA a chunk needs nothing from the host, so every chunk (or piece: calls of up to
  // a few slots' rows, RunPinnedPieces) is queued at once and the host waits once at the end; a
  // slot's stream runs its previous chunk's copies and kernel first (a host wait per slot would
  // leave the stream idle while the thread wakes and queues the next copy). Timed runs (shape
  // trials) read each chunk's kernel events before their reuse, so they wait per chunk.
  const bool queue_all = direct_in && direct_out && kernel_seconds == nullptr;
  if (queue_all) {
    const PieceSchedule pieces = PinnedPieces(rows.rows, chunk);
    if (pieces.count > 0) return RunPinnedPieces(g, lane, a, pieces, chunk, rows, out);
  }
  if (kernel_seconds != nullptr) *kernel_seconds = 0;
  struct Pending {
    int64_t begin = 0, count = 0;
    bool active = false;
  } pending[kSlots];
  // Waits for a chunk and copies its outputs from its pinned slot to the caller's matrix.
  auto drain = [&](int i) -> absl::Status {
    Pending& p = pending[i];
    if (!p.active) return absl::OkStatus();
    if (absl::Status st = gpu::WaitForEvent(lane.slots[i].done, "tahoe chunk", HostWaitSpin());
        !st.ok()) {
      return st;
    }
    if (kernel_seconds != nullptr) {
      float ms = 0;
      GROVE_CUDA_RETURN_IF_ERROR(
          cudaEventElapsedTime(&ms, lane.slots[i].kernel_start, lane.slots[i].kernel_end),
          "cudaEventElapsedTime");
      *kernel_seconds += ms * 1e-3;
    }
    if (!direct_out) {
      CopyRows(staging, out.Row(p.begin), out.stride, lane.slots[i].host_out(), W, p.count, W);
    }
    p.active = false;
    return absl::OkStatus();
  };
  absl::Status status;
  int c = 0;
  for (int64_t begin = 0; begin < rows.rows && status.ok(); begin += chunk, ++c) {
    const int i = c % kSlots;
    Slot& slot = lane.slots[i];
    if (!queue_all) {
      status = drain(i);
      if (!status.ok()) break;
    }
    const int64_t n = std::min(chunk, rows.rows - begin);
    if (direct_in) {
      status = gpu::CudaStatus(CopyMatrixAsync(slot.device_in(), F, rows.Row(begin), rows.stride, F, n,
                                               cudaMemcpyHostToDevice, slot.stream),
                               "copy rows to device");
    } else {
      // Batches of several chunks overlap one chunk's staging with the previous one's transfer
      // already (two slots); piece by piece they ran 15-30% slower at 1M rows.
      status = StageAndSend(rows.rows <= chunk ? staging : nullptr, staging, g.device, slot, rows,
                            begin, n);
    }
    if (!status.ok()) break;
    a.d_rows = slot.device_in();
    a.rows = n;
    a.d_out = slot.device_out();
    if (kernel_seconds != nullptr) {
      status = gpu::CudaStatus(cudaEventRecord(slot.kernel_start, slot.stream), "cudaEventRecord");
      if (!status.ok()) break;
    }
    status = gpu::CudaStatus(TahoeLaunch(g.df, a, slot.workspace(), slot.stream), "tahoe kernel launch");
    if (status.ok() && kernel_seconds != nullptr) {
      status = gpu::CudaStatus(cudaEventRecord(slot.kernel_end, slot.stream), "cudaEventRecord");
    }
    if (!status.ok()) break;
    status = gpu::CudaStatus(
        direct_out ? CopyMatrixAsync(out.Row(begin), out.stride, slot.device_out(), W, W, n,
                                     cudaMemcpyDeviceToHost, slot.stream)
                   : cudaMemcpyAsync(slot.host_out(), slot.device_out(), n * W * 4,
                                     cudaMemcpyDeviceToHost, slot.stream),
        "copy results to host");
    if (!status.ok()) break;
    status = gpu::CudaStatus(cudaEventRecord(slot.done, slot.stream), "cudaEventRecord");
    pending[i] = Pending{begin, n, status.ok()};
  }
  for (int i = 0; i < kSlots; ++i) {
    if (status.ok()) {
      status = drain(i);
    } else {
      cudaStreamSynchronize(lane.slots[i].stream);  // leave the slot idle before reporting
    }
  }
  return status;
}

absl::Status TahoeEngineImpl::RunPinnedPieces(Gpu& g, StagingLane& lane, TahoeLaunchArgs a,
                                              const PieceSchedule& pieces, int64_t slot_rows,
                                              RowsView rows, MatrixView<float> out) const {
  const int64_t F = rows.cols, W = a.out_stride, P = pieces.piece_rows;
  // Piece buffers: each slot's rows and results cut into pieces of P rows (buffer b in slot
  // b % kSlots). Kernels take the piece streams in turn, stream j half of slot j % kSlots's
  // workspace, or, where a launch needs more than half, two streams with a whole one each.
  const int per_slot = static_cast<int>(
      std::min<int64_t>(kMaxPieceBuffers / kSlots, slot_rows / std::max<int64_t>(1, P)));
  if (per_slot < 1) return absl::InternalError("tahoe: a piece larger than its slot");
  const int buffers = per_slot * kSlots;
  const int64_t ws_piece = LaunchWorkspaceDoubles(g.df, a.strategy, a.groups, a.kind, P);
  const bool halves = 2 * ws_piece <= lane.ws_doubles;
  const int streams = halves ? kPieceStreams : kSlots;
  // Piece k (rows [begin, begin + n)): rows in once its buffer's previous piece has left (that
  // piece's kernel read the rows and its results were copied out), the kernel once the rows are
  // in, the results out after the kernel on its stream (the stream's next kernel is kPieceStreams
  // pieces later: the short copy delays nothing that waits on it).
  auto enqueue = [&](size_t k, int64_t begin, int64_t n) -> absl::Status {
    const int b = static_cast<int>(k % buffers), j = static_cast<int>(k % streams);
    Slot& slot = lane.slots[b % kSlots];
    float* const d_in = slot.device_in() + (b / kSlots) * P * F;
    float* const d_out = slot.device_out() + (b / kSlots) * P * W;
    double* const ws =
        lane.slots[j % kSlots].workspace() + (halves ? (j / kSlots) * (lane.ws_doubles / 2) : 0);
    cudaStream_t const kernel_stream = lane.piece_streams[j];
    if (k >= static_cast<size_t>(buffers)) {
      GROVE_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(lane.in_stream, lane.piece_free[b], 0),
                                 "cudaStreamWaitEvent");
    }
    GROVE_CUDA_RETURN_IF_ERROR(CopyMatrixAsync(d_in, F, rows.Row(begin), rows.stride, F, n,
                                               cudaMemcpyHostToDevice, lane.in_stream),
                               "copy rows to device");
    GROVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(lane.piece_in[b], lane.in_stream),
                               "cudaEventRecord");
    GROVE_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(kernel_stream, lane.piece_in[b], 0),
                               "cudaStreamWaitEvent");
    a.d_rows = d_in;
    a.rows = n;
    a.d_out = d_out;
    GROVE_CUDA_RETURN_IF_ERROR(TahoeLaunch(g.df, a, ws, kernel_stream), "tahoe kernel launch");
    GROVE_CUDA_RETURN_IF_ERROR(CopyMatrixAsync(out.Row(begin), out.stride, d_out, W, W, n,
                                               cudaMemcpyDeviceToHost, kernel_stream),
                               "copy results to host");
    GROVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(lane.piece_free[b], kernel_stream),
                               "cudaEventRecord");
    return absl::OkStatus();
  };
  // The call's end: the last rows in, and every kernel stream's last piece out (the out stream
  // waits for each; an earlier piece of the same buffer precedes its last piece's copy in).
  auto finish = [&]() -> absl::Status {
    GROVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(lane.pieces_in, lane.in_stream), "cudaEventRecord");
    const size_t count = static_cast<size_t>(pieces.count);
    for (size_t k = count > static_cast<size_t>(streams) ? count - streams : 0; k < count; ++k) {
      GROVE_CUDA_RETURN_IF_ERROR(
          cudaStreamWaitEvent(lane.out_stream, lane.piece_free[k % buffers], 0),
          "cudaStreamWaitEvent");
    }
    GROVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(lane.pieces_out, lane.out_stream),
                               "cudaEventRecord");
    return absl::OkStatus();
  };
  absl::Status status;
  int64_t begin = 0;
  for (int k = 0; k < pieces.count && status.ok(); ++k) {
    status = enqueue(k, begin, pieces.rows[k]);
    begin += pieces.rows[k];
  }
  if (status.ok()) status = finish();
  // The host waits for the last rows to be in as for a chunk (sleeping after HostWaitSpin), then
  // polls for the short rest (the last kernels and copies out): a wake-up from a sleeping wait
  // takes tens of microseconds, which here would come after the results instead of during the
  // tail.
  if (status.ok()) status = gpu::WaitForEvent(lane.pieces_in, "tahoe pieces", HostWaitSpin());
  if (status.ok()) status = gpu::WaitForEvent(lane.pieces_out, "tahoe pieces", kPiecesTailSpin);
  if (!status.ok()) {  // leave the lane idle before reporting
    for (cudaStream_t* st : lane.PieceStreams()) cudaStreamSynchronize(*st);
  }
  return status;
}

void TahoeEngineImpl::LogChoice(const Decision& d, int groups, int64_t rows) const {
  const int id = static_cast<int>(d.strategy);
  GROVE_LOG(DEBUG) << "tahoe strategy" << KV("rows", rows) << KV("strategy", StrategyName(id))
                   << KV("groups", groups) << KV("reason", d.reason);
  // Once per strategy and engine: batches of mixed sizes switch strategies from call to call (a
  // line per switch flooded the log at tens of thousands of calls per second).
  const uint32_t bit = 1u << id;
  if ((logged_choices_.fetch_or(bit) & bit) == 0) {
    GROVE_LOG(INFO) << "tahoe strategy first used" << KV("rows", rows) << KV("strategy", StrategyName(id))
                    << KV("groups", groups) << KV("reason", d.reason);
  }
}

absl::StatusOr<std::shared_ptr<const TahoeEngineImpl::Decision>> TahoeEngineImpl::Decide(
    int64_t rows, const PredictOptions& options, bool on_device, std::string_view force) const {
  absl::StatusOr<std::optional<StrategyId>> forced = ParseStrategy(force);
  if (!forced.ok()) return forced.status();
  const DecisionKey key{rows, static_cast<int>(options.kind), options.iteration_begin,
                        options.iteration_end, on_device,
                        forced->has_value() ? static_cast<int>(**forced) : -1};
  {
    absl::MutexLock lock(&decisions_mu_);
    if (auto it = decisions_.find(key); it != decisions_.end()) return it->second;
  }
  absl::StatusOr<StrategyChoice> c = Plan(rows, options, on_device, force);
  if (!c.ok()) return c.status();
  auto d = std::make_shared<Decision>();
  d->strategy = c->strategy;
  d->groups = c->groups;
  d->reason = std::move(c->reason);
  const StrategyCost& rc = c->costs[static_cast<int>(StrategyId::kRowChunk)];
  if (options_.shape_trials && !forced->has_value() && options_.row_chunk == 0 &&
      c->strategy == StrategyId::kRowChunk && rc.groups == c->groups) {
    d->runner_up_groups = rc.runner_up_groups;
  }
  absl::MutexLock lock(&decisions_mu_);
  if (decisions_.size() >= kMaxDecisions) decisions_.clear();
  return decisions_.emplace(key, std::move(d)).first->second;
}

TahoeEngineImpl::TrialRun TahoeEngineImpl::ApplyShapeTrial(const Decision& d, int64_t rows,
                                                            int* groups) const {
  TrialRun t;
  *groups = d.groups;
  if (d.runner_up_groups == 0) return t;
  t.best = d.groups;
  t.second = d.runner_up_groups;
  *groups = shape_trials_.Pick(rows, t.best, t.second, &t.timed);
  return t;
}

std::string TahoeEngineImpl::RunReason(const Decision& d, const TrialRun& t, int groups) {
  if (t.best == 0) return d.reason;
  return absl::StrCat(d.reason, "; shape trial ", RowChunkShape::FromCode(t.best).Label(), " vs ",
                      RowChunkShape::FromCode(t.second).Label(), t.timed ? ": timing " : ": ",
                      RowChunkShape::FromCode(groups).Label());
}

void TahoeEngineImpl::RecordShapeTrial(const TrialRun& t, int64_t rows, int groups,
                                       double kernel_seconds) const {
  if (t.timed && kernel_seconds > 0) {
    shape_trials_.Record(rows, t.best, t.second, groups, kernel_seconds);
  }
}

absl::Status TahoeEngineImpl::PredictHost(RowsView rows, const PredictOptions& options,
                                          MatrixView<float> out, std::string_view strategy,
                                          RunInfo* info) const {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::shared_ptr<const Decision>> d = Decide(rows.rows, options, false, strategy);
  if (!d.ok()) return d.status();
  int groups = 1;
  const TrialRun trial = ApplyShapeTrial(**d, rows.rows, &groups);
  LogChoice(**d, groups, rows.rows);
  const PredictStrategy& chosen = *strategies_[static_cast<int>((*d)->strategy)];
  std::string device;
  absl::Status status;
  if (trial.timed) {  // the row chunk strategy's run, timed
    double kernel_seconds = 0;
    status = RunKernel(StrategyId::kRowChunk, groups, rows, options, out, &device, &kernel_seconds);
    if (status.ok()) RecordShapeTrial(trial, rows.rows, groups, kernel_seconds);
  } else {
    status = chosen.Run(rows, options, groups, out, &device);
  }
  if (info != nullptr) {
    info->device = device;
    info->strategy = chosen.name();
    info->reason = RunReason(**d, trial, groups);
    info->compute_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return status;
}

absl::Status TahoeEngineImpl::RunKernel(StrategyId s, int groups, RowsView rows,
                                        const PredictOptions& options, MatrixView<float> out,
                                        std::string* device, double* kernel_seconds) const {
  absl::StatusOr<TahoeCall> call = TahoePrepareCall(*format_, rows, options, out);
  if (!call.ok()) return call.status();
  // Few rows: one GPU (the others would only add latency).
  const int used = static_cast<int>(std::clamp<int64_t>(rows.rows / 4096, 1, num_gpus()));
  *device = "cuda:";
  std::vector<absl::Status> results(used);
  std::vector<double> seconds(used, 0.0);
  const int64_t per = (rows.rows + used - 1) / used;
  for (int d = 0; d < used; ++d) absl::StrAppend(device, d == 0 ? "" : "+", gpus_[d]->device);
  issuers_->RunOnEach(used, [&](int d) {
    const int64_t b = d * per, e = std::min(rows.rows, b + per);
    if (b >= e) return;
    RowsView rv{rows.Row(b), e - b, rows.cols, rows.stride};
    MatrixView<float> ov{out.Row(b), e - b, out.cols, out.stride};
    results[d] = RunHost(*gpus_[d], s, groups, *call, rv, ov,
                         kernel_seconds != nullptr ? &seconds[d] : nullptr);
  });
  for (const absl::Status& r : results) {
    if (!r.ok()) return r;
  }
  if (kernel_seconds != nullptr) *kernel_seconds = *std::max_element(seconds.begin(), seconds.end());
  return absl::OkStatus();
}

absl::Status TahoeEngineImpl::PredictDevice(int gpu, const float* d_rows, int64_t rows,
                                            int64_t row_stride, const PredictOptions& options,
                                            float* d_out, int64_t out_stride,
                                            std::string_view strategy, RunInfo* info) const {
  if (gpu < 0 || gpu >= num_gpus()) return absl::InvalidArgumentError("no such GPU");
  const auto start = std::chrono::steady_clock::now();
  if (row_stride < forest_->num_features) {
    return absl::InvalidArgumentError(absl::StrCat("row stride ", row_stride, " < the model's ",
                                                   forest_->num_features, " features"));
  }
  if (out_stride < PredictWidth(*forest_, options)) {
    return absl::InvalidArgumentError(absl::StrCat("output stride ", out_stride, " < the width ",
                                                   PredictWidth(*forest_, options)));
  }
  // Shape checks only: TahoePrepareCall reads no row or output.
  const RowsView in{d_rows, rows, forest_->num_features, row_stride};
  const MatrixView<float> out{d_out, rows, PredictWidth(*forest_, options), out_stride};
  absl::StatusOr<TahoeCall> call = TahoePrepareCall(*format_, in, options, out);
  if (!call.ok()) return call.status();
  absl::StatusOr<std::shared_ptr<const Decision>> d = Decide(rows, options, true, strategy);
  if (!d.ok()) return d.status();
  int groups = 1;
  const TrialRun trial = ApplyShapeTrial(**d, rows, &groups);
  LogChoice(**d, groups, rows);
  if ((*d)->strategy == StrategyId::kCpu) {
    return absl::InternalError("the selector chose the CPU for rows on the GPU");
  }
  double kernel_seconds = 0;
  absl::Status s = RunDevice(*gpus_[gpu], (*d)->strategy, groups, *call, d_rows, rows, row_stride,
                             d_out, out_stride, trial.timed ? &kernel_seconds : nullptr);
  if (s.ok()) RecordShapeTrial(trial, rows, groups, kernel_seconds);
  if (info != nullptr) {
    info->device = absl::StrCat("cuda:", gpus_[gpu]->device);
    info->strategy = StrategyName((*d)->strategy);
    info->reason = RunReason(**d, trial, groups);
    info->compute_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return s;
}

}  // namespace tahoe_internal

using tahoe_internal::TahoeEngineImpl;

absl::StatusOr<std::unique_ptr<TahoeEngine>> TahoeEngine::Create(ForestPtr forest,
                                                                  const TahoeEngineOptions& options,
                                                                  ThreadPool* pool) {
  if (forest == nullptr) return absl::InvalidArgumentError("TahoeEngine: no model");
  if (absl::Status s = ParseStrategy(options.engine.strategy).status(); !s.ok()) return s;
  if (gpu::VisibleGpuCount() == 0) return absl::UnavailableError("no CUDA device visible");
  absl::StatusOr<TahoeForestPtr> format = TahoeForest::Build(forest, options.format);
  if (!format.ok()) return format.status();
  auto engine = std::make_unique<TahoeEngineImpl>(forest, *format, options, pool);
  if (absl::Status st = engine->Init(); !st.ok()) return st;
  return std::unique_ptr<TahoeEngine>(std::move(engine));
}

}  // namespace grove

#endif  // GROVE_HAVE_CUDA
