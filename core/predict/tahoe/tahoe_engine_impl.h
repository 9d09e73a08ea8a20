// Internal to the Tahoe GPU engine, split by job over three files: tahoe_engine.cc (selection and
// the request path: plans, launches, host staging), tahoe_device.cc (residency: the format and
// lane layout uploaded to every GPU, streams and staging slots), tahoe_probe.cc (calibration and
// the load-time probes). CUDA builds only; nothing outside those files includes it.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/common/thread_pool.h"
#include "core/gpu/cuda_status.h"
#include "core/gpu/device_buffer.h"
#include "core/gpu/device_set.h"
#include "core/gpu/event_wait.h"
#include "core/predict/tahoe/perf_model.h"
#include "core/predict/tahoe/pinned_pieces.h"
#include "core/predict/predict_strategy.h"
#include "core/predict/tahoe/shape_trials.h"
#include "core/predict/tahoe/tahoe_engine.h"
#include "core/predict/tahoe/tahoe_forest.h"
#include "core/predict/tahoe/tahoe_kernels.h"
#include "core/predict/tahoe/tahoe_lane.h"
#include "core/predict/tahoe/tahoe_level.h"
#include "core/predict/tahoe/tahoe_records.h"

namespace grove::tahoe_internal {

constexpr int kSlots = 2;
// Kernel streams of a page-locked call's pieces (RunPinnedPieces); each takes half a slot's
// workspace.
constexpr int kPieceStreams = 4;
// How long a call on device-resident rows, or a host-row call of an engine whose options say
// GpuWait::kPoll, polls for its GPU work before it sleeps. Such a call often takes a few hundred
// microseconds, and a sleeping wait's wake-up (tens of microseconds) would be a large share of
// that; a call longer than this sleeps for the rest, where the wake-up is a few percent.
// GpuWait::kShareCore's host-row calls poll gpu::kWaitSpin: a server's batch threads give their
// cores to its transport while large copies and kernels run.
inline constexpr absl::Duration kDeviceWaitSpin = absl::Milliseconds(1);
// How long a page-locked call polls for its last results once its last rows are in (then sleeps).
inline constexpr absl::Duration kPiecesTailSpin = absl::Milliseconds(2);
constexpr int64_t kTargetChunkRows = 1 << 18;   // host path: rows per staging slot
constexpr int64_t kDeviceChunkRows = 1 << 20;   // device path: rows per launch
constexpr int64_t kRowChunkWsRows = 1 << 18;     // rows per launch of row chunk with tree parts
// Host rows staged on the pool from kPipelinedStagingBytes on, each piece (at least
// kStagingPieceBytes, at most kStagingPieces of them) sent to the device as soon as it is staged
// (StageAndSend, tahoe_engine.cc).
constexpr int64_t kPipelinedStagingBytes = int64_t{2} << 20;
constexpr int64_t kStagingPieceBytes = int64_t{1} << 20;
constexpr int64_t kStagingPieces = 8;
constexpr int64_t kMaxInBytes = int64_t{64} << 20;
constexpr int64_t kMaxOutBytes = int64_t{64} << 20;
constexpr int64_t kMaxWsBytes = int64_t{512} << 20;
// Staging lanes after the first are sized for this many rows (in bytes at most kMaxExtraInBytes):
// they exist so that several mid-size batches stage at once (a server's concurrent requests), not
// for throughput on huge batches, which the first lane's larger slots serve.
constexpr int64_t kExtraLaneChunkRows = 1 << 16;
constexpr int64_t kMaxExtraInBytes = int64_t{16} << 20;
constexpr int kDefaultStagingLanes = 4;
// Automatic staging threads per GPU of a several-GPU engine: at most this many.
constexpr int kMaxAutoStagingThreads = 16;
constexpr int kMaxStagingLanes = 16;

// One staging lane of a GPU: rows in and results out through pinned memory, a kernel workspace,
// and the stream the three steps of a chunk run on.
struct Slot {
  gpu::PinnedBuffer h_in, h_out;
  gpu::DeviceBuffer d_in, d_out, d_ws;
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
  cudaEvent_t kernel_start = nullptr, kernel_end = nullptr;  // timing events (shape trials)
  float* host_in() const { return h_in.as<float>(); }
  float* host_out() const { return h_out.as<float>(); }
  float* device_in() const { return d_in.as<float>(); }
  float* device_out() const { return d_out.as<float>(); }
  double* workspace() const { return d_ws.as<double>(); }
};

// kSlots slots that one batch at a time cycles through (double buffering: a chunk's copies and
// kernel overlap the next chunk's staging), with their sizes. Batches on different lanes of a GPU
// run concurrently (their host-side copies on their own threads, their GPU work on their own
// streams), so the host copies of concurrent requests do not queue behind each other.
struct StagingLane {
  Slot slots[kSlots];
  int64_t in_bytes = 0, out_bytes = 0, ws_doubles = 0;
  // Pieces of page-locked calls (RunPinnedPieces): the slots' buffers cut into pieces; rows go in
  // on in_stream, and each piece's kernel and results out run on one of kPieceStreams streams in
  // turn, so that no copy in waits behind a kernel and the last pieces' short kernels run side by
  // side as their rows land. piece_in[b]: piece buffer b's rows are on the device; piece_free[b]:
  // its results have left (the buffer is reusable). out_stream joins the kernel streams at a
  // call's end.
  cudaStream_t in_stream = nullptr, out_stream = nullptr;
  cudaStream_t piece_streams[kPieceStreams] = {};
  cudaEvent_t piece_in[kMaxPieceBuffers] = {};
  cudaEvent_t piece_free[kMaxPieceBuffers] = {};
  // The call's last rows in and last results out (WaitForEvent events).
  cudaEvent_t pieces_in = nullptr, pieces_out = nullptr;
  // Every stream of the pieces (in, out, the kernels'), for creation, draining and teardown.
  std::array<cudaStream_t*, kPieceStreams + 2> PieceStreams() {
    std::array<cudaStream_t*, kPieceStreams + 2> s = {&in_stream, &out_stream};
    for (int j = 0; j < kPieceStreams; ++j) s[2 + j] = &piece_streams[j];
    return s;
  }
};

// One GPU: the resident format, streams, staging lanes.
struct Gpu {
  int device = 0;
  TahoeDeviceForest df;
  std::vector<gpu::DeviceBuffer> buffers;  // the resident format
  // lanes[0] is sized for the largest chunks (and the device path's workspace); the others for
  // kExtraLaneChunkRows. lane_busy and lane_freed are guarded by lane_mu.
  std::vector<std::unique_ptr<StagingLane>> lanes;
  std::vector<char> lane_busy;
  std::mutex lane_mu;
  std::condition_variable lane_freed;
  int forest_blocks_per_sm = 1, part_blocks_per_sm = 1;
  int max_row_chunk = 0;             // TahoeMaxRowChunk at this device's shared memory
  int64_t row_chunk_acc_bytes = 0;   // row chunk's shared memory besides its rows (one-row chunk)
  int64_t bytes = 0;
  // This GPU's staging threads (TahoeEngineOptions::staging_threads); null: the engine's pool.
  std::unique_ptr<ThreadPool> staging_pool;
  ThreadPool* Staging(ThreadPool* fallback) const {
    return staging_pool != nullptr ? staging_pool.get() : fallback;
  }

  ~Gpu() {
    cudaSetDevice(device);
    for (std::unique_ptr<StagingLane>& lane : lanes) {
      for (Slot& s : lane->slots) {  // the buffers go after, with the members, once streams idle
        if (s.stream) cudaStreamSynchronize(s.stream);
        if (s.done) cudaEventDestroy(s.done);
        if (s.kernel_start) cudaEventDestroy(s.kernel_start);
        if (s.kernel_end) cudaEventDestroy(s.kernel_end);
        if (s.stream) cudaStreamDestroy(s.stream);
      }
      for (cudaStream_t* st : lane->PieceStreams()) {
        if (*st) cudaStreamSynchronize(*st);
      }
      for (int b = 0; b < kMaxPieceBuffers; ++b) {
        for (cudaEvent_t e : {lane->piece_in[b], lane->piece_free[b]}) {
          if (e) cudaEventDestroy(e);
        }
      }
      for (cudaEvent_t e : {lane->pieces_in, lane->pieces_out}) {
        if (e) cudaEventDestroy(e);
      }
      for (cudaStream_t* st : lane->PieceStreams()) {
        if (*st) cudaStreamDestroy(*st);
      }
    }
  }

  // A free lane for a batch of `rows` (blocks until one is free; the lock is released while
  // waiting). `first_only`: lane 0 (the device path needs its workspace). Otherwise lane 0 is
  // preferred when the batch is larger than the other lanes' slots.
  StagingLane& AcquireLane(int64_t rows, bool first_only);
  void ReleaseLane(const StagingLane& lane);

  template <typename T>
  absl::StatusOr<const T*> Upload(const std::vector<T>& v) {
    absl::StatusOr<gpu::DeviceBuffer> b = gpu::DeviceBuffer::Upload(v, "tahoe: forest upload");
    if (!b.ok()) return b.status();
    bytes += std::max<int64_t>(1, b->bytes());
    buffers.push_back(*std::move(b));
    return buffers.back().as<const T>();
  }
};

// A lane of `g` held for one batch (Gpu::AcquireLane), given back when it goes.
class LaneLease {
 public:
  LaneLease(Gpu& g, int64_t rows, bool first_only) : g_(g), lane_(g.AcquireLane(rows, first_only)) {}
  ~LaneLease() { g_.ReleaseLane(lane_); }
  LaneLease(const LaneLease&) = delete;
  LaneLease& operator=(const LaneLease&) = delete;
  StagingLane& lane() const { return lane_; }

 private:
  Gpu& g_;
  StagingLane& lane_;
};

// The root node of each tree of `order` (indices into tf.trees()).
std::vector<uint32_t> RootsOf(const TahoeForest& tf, const std::vector<uint32_t>& order);

// The rows every calibration and probe times (TypicalRows: paths as the training rows took them).
std::vector<float> CalibrationRows(const Forest& f, int rows);

class TahoeEngineImpl final : public TahoeEngine {
 public:
  TahoeEngineImpl(ForestPtr forest, TahoeForestPtr format, const TahoeEngineOptions& options,
                  ThreadPool* pool)
      : forest_(std::move(forest)), format_(std::move(format)), options_(options), pool_(pool) {}
  // Each GPU's resources are released on that GPU; the caller's current device stays as it was
  // (seen on two GPUs: after an engine went away, the caller's next allocation landed on GPU 1).
  ~TahoeEngineImpl() override {
    const gpu::ScopedCurrentDevice keep_device;
    gpus_.clear();
  }

  absl::Status Init();

  absl::Status Predict(RowsView rows, const PredictOptions& options, MatrixView<float> out,
                       RunInfo* info) const override {
    return PredictHost(rows, options, out, options_.engine.strategy, info);
  }
  absl::Status PredictHost(RowsView rows, const PredictOptions& options, MatrixView<float> out,
                           std::string_view strategy, RunInfo* info) const override;
  absl::Status PredictDevice(int gpu, const float* d_rows, int64_t rows, int64_t row_stride,
                             const PredictOptions& options, float* d_out, int64_t out_stride,
                             std::string_view strategy, RunInfo* info) const override;
  absl::StatusOr<StrategyChoice> Plan(int64_t rows, const PredictOptions& options,
                                      bool rows_on_device, std::string_view force) const override;

  std::string Describe() const override {
    return absl::StrCat("tahoe gpu engine on ", gpus_.size(), " GPU(s) (", hw_.device_name, "); ",
                        format_->Describe(), absl::StrFormat("; %d shared-memory parts", parts_),
                        lane_report_,
                        record_walk_  ? "; row chunk walks the record layout"
                        : level_walk_ ? "; row chunk walks the level layout"
                                      : "",
                        "; host-row calls poll ", absl::FormatDuration(HostWaitSpin()),
                        " before they sleep", probe_report_.empty() ? "" : "; probes: ",
                        probe_report_,
                        ShapeTrialReport());
  }
  int64_t DeviceBytes() const override { return gpus_.empty() ? 0 : gpus_[0]->bytes; }
  absl::Status PredictRow(const float* row, const PredictOptions& options,
                          float* out) const override {
    return cpu_strategy().RunRow(row, options, out);
  }
  // Slot kCpu always holds the CPU strategy (kStrategyFactories in tahoe_engine.cc).
  const CpuPredictStrategy& cpu_strategy() const {
    return static_cast<const CpuPredictStrategy&>(
        *strategies_[static_cast<int>(StrategyId::kCpu)]);
  }
  const TahoeForest& format() const override { return *format_; }
  const GpuHardwareParams& hardware() const override { return hw_; }
  int num_gpus() const override { return static_cast<int>(gpus_.size()); }
  int cuda_device(int gpu) const override { return gpus_[gpu]->device; }
  double cpu_seconds_per_visit() const override { return cpu_seconds_per_visit_; }

  // For the strategy objects (kStrategyFactories).
  const ForestPtr& forest() const { return forest_; }
  ThreadPool* pool() const { return pool_; }
  // GPU kernel `s` over host rows: split across the GPUs, staged through their slots. `device`
  // gets "cuda:0", "cuda:0+1", ...
  // `kernel_seconds` (may be null): the kernels' time on the slowest GPU (shape trials).
  absl::Status RunKernel(StrategyId s, int groups, RowsView rows, const PredictOptions& options,
                         MatrixView<float> out, std::string* device,
                         double* kernel_seconds = nullptr) const;

 private:
  absl::Status InitGpu(int device, Gpu& g);
  void BuildLanes();  // lanes_ (once, before InitGpu), when the options and the forest allow it
  void BuildLevel();  // level_ (once, before InitGpu), when the options and the forest allow it
  void BuildRecords();  // records_ (once, before InitGpu), when the options and the forest allow it
  // `build(budget)` with the largest budget (or options_.max_part_bytes, a test knob, doubled
  // until every piece fits).
  template <typename Build>
  auto WithGrowingBudget(int64_t max_budget, Build build) const {
    int64_t b = options_.max_part_bytes > 0 ? std::min(max_budget, options_.max_part_bytes)
                                            : max_budget;
    auto r = build(b);
    while (!r.ok() && b < max_budget) {
      b = std::min(2 * b, max_budget);
      r = build(b);
    }
    return r;
  }
  // Margins over every round: what the load-time probes run.
  TahoeCall ProbeCall() const;
  // Best of `reps` - 1 timed runs (after a warm-up) of `s` over the first `rows` probe rows.
  absl::StatusOr<double> TimeProbe(Gpu& g, StrategyId s, int groups, int64_t rows,
                                   int reps = 4) const;
  absl::Status ProbeRowChunk(Gpu& g, int64_t large, std::string* report);
  // Fills row_chunk_timings_ from the shapes ProbeRowChunk timed at `large` rows (seconds, shape).
  absl::Status TimeRowChunkWaves(Gpu& g, int64_t large,
                                 const std::vector<std::pair<double, RowChunkShape>>& timed,
                                 std::string* report);
  // `shape` timed at RowChunkTiming's wave points (appended to *report), its block_seconds
  // `block_seconds`; blocks_per_sm 0 (nothing timed) where the shape has no resident block.
  absl::StatusOr<RowChunkTiming> TimeRowChunkShape(Gpu& g, int64_t large,
                                                   const RowChunkShape& shape,
                                                   double block_seconds, std::string* report);
  // Fills row_chunk_launches_ (after TimeRowChunkWaves), adding the part variants it times to
  // row_chunk_timings_.
  absl::Status ProbeRowChunkSizes(Gpu& g, int64_t large, std::string* report);
  absl::Status ProbeChoices(Gpu& g, int64_t large, std::string* report);
  // The probed winner for a batch of `rows` (ProbeChoices), or kCpu when none.
  StrategyId ProbedChoice(double rows) const;
  void CalibrateCpu();
  absl::Status Probe();  // per-model corrections of the performance model (see perf_model.h)
  TahoeWorkload Workload(int64_t rows, const PredictOptions& options, bool on_device) const;
  // Rows per launch of `s` (`groups`: row chunk's shape code, for its tree parts' workspace).
  int64_t ChunkRows(const Gpu& g, const StagingLane& lane, StrategyId s, int groups,
                    const TahoeCall& call, bool host) const;
  TahoeLaunchArgs Args(const Gpu& g, StrategyId s, int groups, const TahoeCall& call) const;
  // `kernel_seconds` (may be null): the chunks' kernel time, from events around their launches.
  absl::Status RunHost(Gpu& g, StrategyId s, int groups, const TahoeCall& call, RowsView rows,
                       MatrixView<float> out, double* kernel_seconds) const;
  absl::Status RunHostOnLane(Gpu& g, StagingLane& lane, StrategyId s, int groups,
                             const TahoeCall& call, RowsView rows, MatrixView<float> out,
                             double* kernel_seconds) const;
  // A page-locked call (rows and results reached by DMA) in the pieces of `pieces` (PinnedPieces
  // for slots of `slot_rows` rows): rows in on the lane's in stream, each piece's kernel and copy
  // out on the piece streams in turn; the host waits for the last rows to be in as for a chunk
  // (HostWaitSpin), then polls for the rest. `a`: the launch's arguments but its rows.
  absl::Status RunPinnedPieces(Gpu& g, StagingLane& lane, TahoeLaunchArgs a,
                               const PieceSchedule& pieces, int64_t slot_rows, RowsView rows,
                               MatrixView<float> out) const;
  // Creates a lane's streams and buffers on the current device.
  absl::Status InitLane(Gpu& g, StagingLane& lane, int64_t in_bytes, int64_t out_bytes,
                        int64_t ws_doubles) const;
  absl::Status RunDevice(Gpu& g, StrategyId s, int groups, const TahoeCall& call,
                         const float* d_rows, int64_t rows, int64_t row_stride, float* d_out,
                         int64_t out_stride, double* kernel_seconds = nullptr) const;
  // What the request path needs of Plan's choice, cached per batch shape: Plan estimates every
  // strategy and formats a reason, microseconds that were a fifth of a 10,000-row batch of the
  // paper's small models. `runner_up_groups`: row chunk's near-equal second shape for shape
  // trials (0: none, or trials off, or a strategy or shape forced).
  struct Decision {
    StrategyId strategy = StrategyId::kCpu;
    int groups = 1;
    int runner_up_groups = 0;
    std::string reason;
  };
  absl::StatusOr<std::shared_ptr<const Decision>> Decide(int64_t rows, const PredictOptions& options,
                                                         bool on_device,
                                                         std::string_view force) const;
  // A batch's run of row chunk between two near-equal shapes (ShapeTrials): the trial's shape in
  // *groups, and whether the run is to be timed and recorded.
  struct TrialRun {
    int best = 0, second = 0;
    bool timed = false;
  };
  TrialRun ApplyShapeTrial(const Decision& d, int64_t rows, int* groups) const;
  // RunInfo::reason of a run: the decision's, and the shape trial's part in it.
  static std::string RunReason(const Decision& d, const TrialRun& t, int groups);
  std::string ShapeTrialReport() const {
    const std::string t =
        shape_trials_.Describe([](int code) { return RowChunkShape::FromCode(code).Label(); });
    return t.empty() ? t : absl::StrCat("; shape trials: ", t);
  }
  void RecordShapeTrial(const TrialRun& t, int64_t rows, int groups, double kernel_seconds) const;
  void LogChoice(const Decision& d, int groups, int64_t rows) const;
  // How long a host-row call polls for a chunk before it sleeps (PredictEngineOptions::gpu_wait).
  absl::Duration HostWaitSpin() const {
    return options_.engine.gpu_wait == GpuWait::kPoll ? kDeviceWaitSpin : gpu::kWaitSpin;
  }

  ForestPtr forest_;
  TahoeForestPtr format_;
  TahoeEngineOptions options_;
  ThreadPool* pool_;
  GpuHardwareParams hw_;
  std::vector<std::unique_ptr<Gpu>> gpus_;
  std::unique_ptr<gpu::DeviceIssuers> issuers_;  // GPU d's share of a batch on thread d (RunKernel)
  int parts_ = 0;
  double cpu_seconds_per_visit_ = 0;
  double cpu_fixed_seconds_ = 1e-6;
  double cpu_parallelism_ = 1;
  std::string probe_report_;
  std::unique_ptr<TahoeLaneLayout> lanes_;  // host copy, uploaded to every GPU; null: none
  std::string lane_report_;
  // The level layout (host copy, uploaded after the depth-first nodes to every GPU; null: none),
  // and whether row chunk walks it (Args). Written by Init()/Probe() before the engine serves.
  std::unique_ptr<TahoeLevelLayout> level_;
  bool level_walk_ = false;
  // The record layout (host copy, uploaded to every GPU; null: none), and whether row chunk walks
  // it (Args; before the level layout). Written by Init()/Probe() before the engine serves.
  std::unique_ptr<TahoeRecordLayout> records_;
  bool record_walk_ = false;
  double throughput_scale_[kNumStrategies] = {1, 1, 1, 1, 1, 1};
  double latency_scale_[kNumStrategies] = {1, 1, 1, 1, 1, 1};
  // Probe() rows and outputs on GPU 0 (TimeProbe), only while it runs.
  const float* probe_in_ = nullptr;
  float* probe_out_ = nullptr;
  // The row-chunk shape the probe found fastest at its large batch (chunk 0: not probed).
  RowChunkShape best_row_chunk_{0};
  // Every row-chunk shape the probe timed, and its large batch (TahoeWorkload::row_chunk_timings).
  // Written by Probe() before the engine serves; read-only after.
  std::vector<RowChunkTiming> row_chunk_timings_;
  int64_t row_chunk_large_rows_ = 0;
  // The row-chunk shapes the probe timed at batch sizes below the large one, by ascending size,
  // fastest first (TahoeWorkload::row_chunk_launches). Written by Probe() before the engine serves;
  // read-only after.
  std::vector<RowChunkLaunchTiming> row_chunk_launches_;
  // Batch sizes at which ProbeChoices times the selector's leading candidates, and the winner at
  // each (kCpu: not probed); the last is the large probe batch (0 here: Probe's `large`). A batch
  // takes the winner of the nearest size on a log scale (above the largest, the largest's).
  static constexpr int64_t kChoiceBatches[] = {128, 1024, 8192, 65536, 0};
  static constexpr int kNumChoiceBatches = 5;
  int64_t choice_rows_[kNumChoiceBatches] = {};
  StrategyId probed_choice_[kNumChoiceBatches] = {StrategyId::kCpu, StrategyId::kCpu,
                                                  StrategyId::kCpu, StrategyId::kCpu,
                                                  StrategyId::kCpu};
  mutable ShapeTrials shape_trials_;
  // Decide's cache: (rows, kind, iteration range, rows on device, forced strategy or -1); cleared
  // when it reaches kMaxDecisions (servers see a bounded set of batch sizes).
  using DecisionKey = std::tuple<int64_t, int, int, int, bool, int>;
  static constexpr size_t kMaxDecisions = 4096;
  mutable absl::Mutex decisions_mu_;
  mutable absl::flat_hash_map<DecisionKey, std::shared_ptr<const Decision>> decisions_
      ABSL_GUARDED_BY(decisions_mu_);
  mutable std::atomic<uint32_t> logged_choices_{0};  // bit i: strategy i's first use was logged
  // One object per StrategyId (kStrategyFactories in tahoe_engine.cc), built by Init().
  std::unique_ptr<PredictStrategy> strategies_[kNumStrategies];
};

}  // namespace grove::tahoe_internal
