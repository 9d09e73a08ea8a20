// TahoeEngine: the GPU prediction engine (Tahoe, Xie et al. EuroSys'21) behind PredictEngine.
//
// At Create, per model: the adaptive forest format is built once on the host (tahoe_forest.h) and
// uploaded to every visible GPU, where it stays resident with its shared-memory parts; each GPU gets
// staging lanes (TahoeEngineOptions::staging_lanes), each two streams with two pinned host slots
// and two device slots (rows, outputs, reduction workspace), allocated once. The hardware parameters are loaded from the calibration cache or
// measured (perf_model.h), and the CPU reference path is timed on this model.
//
// Per call, the performance model predicts the time of the CPU path and of each GPU strategy
// (including the host<->device copies) and runs the fastest, unless a strategy is forced. Rows are
// split evenly across the GPUs; on each, the batch runs in chunks that alternate between the two
// slots, so staging and copies of one chunk overlap the kernels of the other. No allocation in the
// request path; rows or results already in page-locked memory go by DMA without staging. Every
// CUDA error becomes an absl::Status. Thread-safe: concurrent calls run on a GPU's free lanes
// (waiting for one when all are busy). Results are deterministic for a given strategy and row-chunk
// shape (shape trials: TahoeEngineOptions::shape_trials): a batch's plan is made once for the whole
// batch and every GPU's share runs it, and a row's result depends on the plan only, never on the
// rows beside it, so it is the same however the batch is split across GPUs and chunks (the plan
// itself may differ between engines of different GPU counts).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/predict/tahoe/perf_model.h"
#include "core/predict/predict_engine.h"
#include "core/predict/tahoe/tahoe_forest.h"

namespace grove {

struct TahoeEngineOptions {
  PredictEngineOptions engine;
  TahoeFormatOptions format;
  int max_gpus = 0;  // 0: every visible GPU
  // The CUDA devices (as this process numbers them) the engine runs on, in order; empty: the first
  // max_gpus visible ones (every one with max_gpus 0). Each entry is one GPU of the engine, with its
  // own copy of the format, staging lanes and issuing thread; a device may be listed twice (tests:
  // a batch split across two engine GPUs of one device). At most kMaxEngineGpus entries.
  std::vector<int> devices;
  // Host threads per GPU that stage its rows into and its results out of its pinned slots, created
  // at load: each GPU's staging then runs beside the others' instead of queueing on the caller's
  // pool. 0: automatic (several GPUs: hardware threads / GPUs, 1..16 each; one GPU: the caller's
  // pool); > 0: that many per GPU.
  int staging_threads = 0;
  // Time each strategy on this model at load (a small and a large batch) to correct the
  // performance model's latency and throughput terms (perf_model.h).
  bool probe = true;
  // Test and benchmark knobs (0: automatic).
  int64_t max_part_bytes = 0;     // shared-memory budget of a splitting part (forces more parts)
  // Splitting shared forest may walk a tree per lane (TahoeLaneLayout) where the forest allows it:
  // kAuto keeps it when the load-time probe finds it faster than a row per thread (with `probe`
  // off it is kept); kOn always (tests); kOnPaired always, with the paired layout even where every
  // tree fits a column (tests); kOff never (ablation).
  enum class Lanes { kOff, kAuto, kOn, kOnPaired };
  Lanes lanes = Lanes::kAuto;
  // Row chunk's walks from the roots may read a depth-by-depth copy of the nodes (tahoe_level.h),
  // where fixed-walk forests allow it: kAuto keeps it when the load-time probe finds row chunk's
  // best shape at least as fast on it (with `probe` off it is kept); kOn always; kOff never (no
  // copy uploaded).
  enum class LevelWalk { kOff, kAuto, kOn };
  LevelWalk level_walk = LevelWalk::kAuto;
  // Row chunk's walks from the roots may read records of a split and its two children, one load
  // per two depths (tahoe_records.h), where numeric fixed-walk forests of up to 512 features allow
  // it and their complete heaps fit in max_record_bytes. kAuto builds them for forests of depth
  // kRecordMinDepth and more and keeps them when the load-time probe finds row chunk's best shape
  // at least as fast on them (with `probe` off they are kept); kOn builds them whatever the depth
  // and keeps them; kOff never (no copy uploaded). They take precedence over the level layout.
  // Off by default: records pay on forests whose rows spread over a tree's deep nodes (1.13x-1.19x
  // at 1M rows on 90 synthetic-data trees of depth 14), but on real data, whose rows share hot paths
  // that the level layout keeps in few lines (its cover order; the heap has none), they ran up to
  // 1.5x slower at 1M rows on trees of depth 10 to 14, and the load-time probe, whose rows
  // spread like the synthetic ones, ranked them ahead there too (docs/benchmarks/prediction-gpu.md).
  // So the choice needs real rows (a trial on the first batches, as ShapeTrials does for shapes).
  // The depth: on shallower forests most depths share lines, where a 16-byte load costs the L1
  // more than an 8-byte one.
  enum class RecordWalk { kOff, kAuto, kOn };
  static constexpr int kRecordMinDepth = 12;
  RecordWalk record_walk = RecordWalk::kOff;
  // The records' budget: the larger of this and four times the depth-first nodes' bytes.
  int64_t max_record_bytes = int64_t{64} << 20;
  int shared_data_groups = 0;     // thread groups per shared-data block
  int row_chunk = 0;              // a RowChunkShape code (perf_model.h) for every row-chunk
                                  // launch; pairs and queues only where allowed
  // Where row chunk's two best shapes for a batch size are predicted within kShapeTrialMargin,
  // the first batches of that size alternate between them and the faster on those rows stays
  // (shape_trials.h: results may differ in the last bit until it has decided). Off: the model's.
  bool shape_trials = true;
  int64_t max_chunk_rows = 0;     // rows per launch / per staging slot
  // Staging lanes per GPU (1..16; 0: 4): batches of host rows that stage, compute and copy back at
  // once on one GPU (concurrent requests of a server). Each lane holds two pinned slots of rows
  // and results (the first for 256K rows, the others for 64K) and their device buffers.
  int staging_lanes = 0;
};

inline constexpr int kMaxEngineGpus = 16;

class TahoeEngine : public PredictEngine {
 public:
  // UNAVAILABLE without a GPU (or without CUDA).
  static absl::StatusOr<std::unique_ptr<TahoeEngine>> Create(ForestPtr forest,
                                                             const TahoeEngineOptions& options,
                                                             ThreadPool* pool);

  // Host rows in, host results out, with `strategy` ("" or "auto": the selector, which may pick
  // "cpu") instead of the engine's configured one. Predict() is PredictHost(options.strategy).
  virtual absl::Status PredictHost(RowsView rows, const PredictOptions& options,
                                   MatrixView<float> out, std::string_view strategy,
                                   RunInfo* info) const = 0;

  // Engine level (benchmarks): rows and outputs already on GPU number `gpu` (0 .. num_gpus()-1),
  // row-major with the given strides. `strategy`: "" or "auto" for the selector over the GPU
  // strategies, or one of them. Blocks until the results are in d_out, polling for the first
  // millisecond (a call shorter than that holds the calling thread's core throughout; a longer one
  // then sleeps), whatever PredictEngineOptions::gpu_wait says for Predict's host-row calls (which
  // with kShareCore sleep after 50 us; page-locked calls in pieces poll again for their last
  // kernels and copies). Runs on the engine's own non-blocking
  // stream, which does not wait for work the caller enqueued elsewhere (the legacy default stream
  // included): d_rows and d_out must be written before the call.
  virtual absl::Status PredictDevice(int gpu, const float* d_rows, int64_t rows, int64_t row_stride,
                                     const PredictOptions& options, float* d_out,
                                     int64_t out_stride, std::string_view strategy,
                                     RunInfo* info) const = 0;

  // The selector's plan for a batch of `rows` (every strategy's predicted time and the choice).
  // rows_on_device: engine level (no copies, no CPU).
  virtual absl::StatusOr<StrategyChoice> Plan(int64_t rows, const PredictOptions& options,
                                              bool rows_on_device,
                                              std::string_view force) const = 0;

  virtual const TahoeForest& format() const = 0;
  virtual const GpuHardwareParams& hardware() const = 0;
  virtual int num_gpus() const = 0;
  virtual int cuda_device(int gpu) const = 0;  // CUDA device id of GPU number `gpu`
  virtual double cpu_seconds_per_visit() const = 0;
};

}  // namespace grove
