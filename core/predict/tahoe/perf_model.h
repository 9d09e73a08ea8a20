// Tahoe performance model and strategy selector (Xie et al., EuroSys'21, §6).
//
// Hardware parameters (the paper's Table 1) are measured once per GPU by microbenchmarks
// (MeasureGpuHardware, perf_model.cu) and cached on disk keyed by GPU name and driver version
// (LoadOrCalibrateGpu). Per batch, EstimateStrategies predicts every strategy's time with the §6.1
// equations and ChooseStrategy runs the fastest. Extensions over the paper, each added because the
// plain equations cannot rank small batches or the host path:
//  * fill: a batch with fewer threads than the GPU holds gets that fraction of the bandwidths;
//  * latency: a thread's dependent chain of node and attribute loads (visits per thread x measured
//    load latency) bounds the time from below, which is what decides batches of ~100 rows;
//  * launches: every kernel launch and chunk costs the measured launch latency;
//  * global reduction: proportional to parts x rows x outputs (our reduction writes and re-reads a
//    partial per row and part) instead of to the number of blocks;
//  * forest staging: each block's copy of its shared-memory part at the per-SM share of bandwidth;
//  * the CPU (measured per model) and the host<->device copies, so small batches run where they
//    finish first.
// Everything here except MeasureGpuHardware / GpuIdentity is plain host arithmetic (CPU-tested
// with fake calibrations). Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/predict/strategy_id.h"

namespace grove {

struct GpuHardwareParams {
  // Cache key.
  std::string device_name;
  std::string driver;  // driver version, e.g. "13000"
  // Device properties.
  int sm_count = 0;
  int max_threads_per_sm = 2048;
  int64_t smem_per_block = 0;  // opt-in dynamic shared memory per block
  int64_t smem_per_sm = 0;
  // Table 1, bytes per second for the whole GPU.
  double smem_read_bw = 0;         // BW_RSMEM: random 8-byte shared-memory reads
  double smem_write_bw = 0;        // BW_WSMEM
  double gmem_coalesced_bw = 0;    // BW_R^COA_GMEM: streaming 16-byte reads
  double gmem_uncoalesced_bw = 0;  // BW_R^NCOA_GMEM: random 4-byte reads (useful bytes)
  double block_reduce_rate = 0;    // B_rate: seconds per partial added by block-wise reductions
  double global_reduce_rate = 0;   // G_rate: seconds per partial written + re-read (global)
  // Extensions.
  double launch_seconds = 0;       // launch + completion of an empty kernel
  double smem_latency = 0;         // seconds per dependent shared-memory load
  double gmem_latency = 0;         // seconds per dependent global load (L2-resident data)
  double h2d_bw = 0;               // pinned host -> device, bytes/s
  double d2h_bw = 0;               // device -> pinned host
  double copy_latency = 0;         // one small copy, seconds
  double host_copy_bw = 0;         // pageable -> pinned memcpy on the host, bytes/s

  std::string Serialize() const;  // key=value lines
  static absl::StatusOr<GpuHardwareParams> Parse(std::string_view text);
  bool Valid() const;
};

// Name and driver of `device` (for the cache key) without measuring; false without a GPU.
bool GpuIdentity(int device, std::string* name, std::string* driver);

// Runs the microbenchmarks on `device` (a few hundred milliseconds). false + *error on failure
// or without CUDA.
bool MeasureGpuHardware(int device, GpuHardwareParams* params, std::string* error);

// The cached parameters of `device` from `cache_dir` (file named from the GPU name and driver), or
// measures and writes them there. Empty cache_dir: measures every time.
absl::StatusOr<GpuHardwareParams> LoadOrCalibrateGpu(const std::string& cache_dir, int device);

// Row chunk's StrategyCost::groups is a code: its rows per thread group (bits 0-10), the rows each
// thread walks at once (1 << bits 11-12: kRowChunkPaired for two, kRowChunkQuad for four), the
// block's threads (256 << bits 13-14) and the tree parts (1 << bits 15-16). RowChunkShape is the
// decoded form.
inline constexpr int kRowChunkPaired = 1 << 11;
inline constexpr int kRowChunkQuad = 2 << 11;
inline constexpr int kRowChunkThreadsShift = 13;
inline constexpr int kRowChunkPartsShift = 15;
inline constexpr int kRowChunkMaxParts = 8;
inline constexpr int kRowChunkMinThreads = 256;
inline constexpr int kRowChunkMaxThreads = 1024;
struct RowChunkShape {
  int chunk = 1;        // rows per thread group (power of two, at most threads)
  int per_thread = 1;   // rows each thread walks at once: 1, 2 or 4 (per_thread x chunk a block)
  int threads = kRowChunkMinThreads;  // per block: 256, 512 or 1024
  // Tree parts: 1, 2, 4 or 8 blocks share a chunk's rows, each walking 1/parts of every thread
  // group's trees, and a reduction adds their sums. More and shorter blocks for mid-size batches,
  // where a shape's last wave of whole-forest blocks leaves SMs idle (the rows each block shares a
  // tree's nodes among stay the same, unlike a smaller chunk).
  int parts = 1;
  int Code() const;
  static RowChunkShape FromCode(int code);
  // A block's tree groups (threads / chunk) index the forest's assignments, at most 256 of them:
  // the block halved (down to 256 threads) until they fit.
  void BoundGroups() {
    while (threads > kRowChunkMinThreads && threads / chunk > 256) threads /= 2;
  }
  // "16", "4x2", "128@1024", "16@1024/4": chunk, x rows per thread, @threads, /tree parts.
  std::string Label() const;
  static RowChunkShape FromLabel(const std::string& label);  // Label's inverse (no checks)
};

// A row-chunk shape as the load-time probe timed it. Batches between one block per SM and a few
// waves of resident blocks run in steps: a shape that is fastest per row on a large batch can leave
// most of its last wave empty on a mid-size one, and blocks sharing an SM slow each other less than
// in proportion (docs/benchmarks/archive.md). So each shape is timed
// with 1, half a wave's and a wave's blocks on every SM, and with two waves; RowChunkWaveSeconds
// composes a batch of whole waves and one partial wave from them.
struct RowChunkTiming {
  static constexpr int kPoints = 4;
  RowChunkShape shape;
  int blocks_per_sm = 1;      // resident blocks of this shape per SM (occupancy)
  // Blocks on the busiest SM (1, half a wave, a wave, two waves; ascending, clamped to the probe's
  // large batch) and the measured launch time at each (synchronization included).
  int per_sm[kPoints] = {};
  double seconds[kPoints] = {};
  double block_seconds = 0;   // a block per SM at the large batch's rate (a wave's lower bound)
};
// Predicted time of one launch of `rows` rows with the timed shape on `sm_count` SMs, from the
// busiest SM's blocks p in waves of b = blocks_per_sm: up to one wave, the measured points
// interpolated; beyond, a fixed part o, floor(p / b) waves of W (the two-wave point less the one-wave
// point, at least b x block_seconds) and the partial wave of the remaining blocks as measured, less
// o. A block past a full wave
// costs a whole wave's latency, not 1/b of one: a partial wave runs as long as a full one.
double RowChunkWaveSeconds(const RowChunkTiming& t, int sm_count, double rows);
// The timing of shape `code` among `count` timings (null if none; `timings` may be null).
const RowChunkTiming* FindRowChunkTiming(const RowChunkTiming* timings, int count, int code);

// A row-chunk shape the load-time probe timed on a launch of `rows` rows, at one of a few batch
// sizes below its large batch. The wave model above extrapolates from a few block counts: it ranks
// shapes well apart but can misorder close ones at mid-size batches. So near a probed size the
// shapes timed there compete on their measured seconds, each scaled to the launch's rows by the
// ratio of its own wave model's times, which keeps a shape's steps between partial and whole waves
// (a shape that fits one wave at the probed size can start a second a little above it). Each
// shape timed is among the workload's timings.
struct RowChunkLaunchTiming {
  int64_t rows = 0;
  int code = 0;        // RowChunkShape::Code()
  double seconds = 0;  // the launch, synchronization included
};
// A launch takes the probed size nearest in log2(rows) when within this many octaves (the probe's
// sizes are an octave apart); farther away, the wave model alone.
inline constexpr double kRowChunkProbedOctaves = 0.5;

// What one batch asks of each strategy (from the model, the batch and the engine's layout).
struct TahoeWorkload {
  int64_t rows = 0;               // the batch
  double visits_per_row = 0;      // D_tree * N_trees: expected node loads per row (trees in range)
  int num_trees = 0;              // trees in range
  int features = 0;               // S_sample / 4
  int outputs = 1;                // margins accumulated per row (K)
  int out_width = 1;              // floats written per row
  int node_bytes = 8;             // S_node
  int64_t forest_smem_bytes = 0;  // S_forest as staged in shared memory (nodes + tree records)
  int num_parts = 1;              // splitting shared forest parts
  int64_t part_smem_bytes = 0;
  int max_shared_data_groups = 0; // 0: shared data does not fit
  bool shared_forest_fits = false;
  int forest_blocks_per_sm = 1;   // resident shared-forest blocks per SM (whole forest)
  int part_blocks_per_sm = 1;     // resident splitting-shared-forest blocks per SM (one part)
  int forest_threads = 1024;      // threads per shared-forest block
  bool rows_staged = false;       // shared forest / splitting stage rows in shared memory
  // Row chunk: the largest chunk whose block fits shared memory (0: none), the chunk the load-time
  // probe found fastest on a large batch (0: not probed), and the block's shared memory as
  // acc x (threads / 256) + chunk x row bytes (for the resident blocks per SM; acc: 256 threads).
  int max_row_chunk = 0;
  int best_row_chunk = 0;
  int row_chunk_per_thread = 1;   // the probe found this many rows per thread fastest
  int row_chunk_threads = kRowChunkMinThreads;  // ... and this many threads per block
  // Every shape the probe timed (owned by the engine; null: not probed). Below half of
  // row_chunk_large_rows (the probe's large batch): near a probed size (row_chunk_launches,
  // ascending rows, one entry a shape a size; kRowChunkProbedOctaves) the shape timed there with
  // the least RowChunkSeconds, elsewhere the shape with the least RowChunkWaveSeconds; at and
  // above, the probe's choice.
  const RowChunkTiming* row_chunk_timings = nullptr;
  int num_row_chunk_timings = 0;
  int64_t row_chunk_large_rows = 0;
  const RowChunkLaunchTiming* row_chunk_launches = nullptr;
  int num_row_chunk_launches = 0;
  int64_t row_chunk_acc_bytes = 0;
  int64_t row_chunk_row_bytes = 0;
  int64_t chunk_rows = 1 << 18;   // rows per launch (workspace limit)
  bool rows_on_device = false;    // engine level: no copies
  int num_gpus = 1;
  // CPU reference path.
  bool cpu_allowed = true;
  double cpu_seconds_per_visit = 0;  // one thread
  double cpu_fixed_seconds = 1e-6;   // per call that engages the pool (waking its workers)
  int cpu_threads = 1;               // pool workers
  double cpu_parallelism = 1;        // speed-up the pool reaches when every worker has chunks
  int64_t cpu_grain = 32;            // cpu::kPredictGrain: fewer than 2 x this rows run inline
  // Per-model corrections measured at engine load (TahoeEngine probes each strategy at a small and
  // a large batch): multipliers of the throughput and the latency terms, by strategy index
  // (StrategyIndex). 1 = the equations as calibrated.
  double throughput_scale[kNumStrategies] = {1, 1, 1, 1, 1, 1};
  double latency_scale[kNumStrategies] = {1, 1, 1, 1, 1, 1};
};

// The rows per thread group row_chunk uses for a batch of `rows` on one GPU: the probed best chunk,
// smaller when the batch would not give every SM a few blocks of `threads` threads (the chunk only;
// see RowChunkShapeFor).
int RowChunkFor(const GpuHardwareParams& hw, const TahoeWorkload& w, double rows,
                int threads = kRowChunkMinThreads);
// The whole shape for a launch of `rows` rows: with timings, the probe's choice for large launches,
// below them the shape with the least RowChunkSeconds among those timed at a probed size near
// `rows`, else the timed shape with the least RowChunkWaveSeconds; without timings, RowChunkFor's
// chunk with the probed threads, several rows per thread only at the probed chunk and where the
// batch still fills every SM.
RowChunkShape RowChunkShapeFor(const GpuHardwareParams& hw, const TahoeWorkload& w, double rows);
// The timing of RowChunkShapeFor's shape (null without timings).
const RowChunkTiming* RowChunkTimingFor(const GpuHardwareParams& hw, const TahoeWorkload& w,
                                        double rows);
// Below the large batch, the runner-up to RowChunkTimingFor's pick when it is within
// kShapeTrialMargin of it (null otherwise): the two the engine times on real batches
// (shape_trials.h). Near a probed size the shape timed there with the second least
// RowChunkSeconds, within kProbedShapeTrialMargin: those are timings of the probe's typical rows,
// which users' rows can walk at another speed shape by shape (categorical and missing values);
// elsewhere the timed shape with the second least RowChunkWaveSeconds.
inline constexpr double kShapeTrialMargin = 0.10;
inline constexpr double kProbedShapeTrialMargin = 0.25;
const RowChunkTiming* RowChunkRunnerUp(const GpuHardwareParams& hw, const TahoeWorkload& w,
                                       double rows);
// Predicted time of one launch of `rows` rows with timed shape `t`: where `t` was timed at the
// probed size near `rows` (below the large batch), those seconds x RowChunkWaveSeconds(t, rows) /
// RowChunkWaveSeconds(t, probed rows); otherwise RowChunkWaveSeconds.
double RowChunkSeconds(const GpuHardwareParams& hw, const TahoeWorkload& w, const RowChunkTiming& t,
                       double rows);

struct StrategyCost {
  StrategyId id = StrategyId::kCpu;
  const char* name() const { return StrategyName(id); }
  bool feasible = false;
  double seconds = 0;     // predicted total (kernels + copies), or the CPU time
  double kernel_seconds = 0;     // fixed + max(throughput, latency), scaled
  double copy_seconds = 0;
  double fixed_seconds = 0;      // launches and shared-memory staging
  double throughput_seconds = 0; // §6.1 equations (whole-GPU bandwidths), unscaled
  double latency_seconds = 0;    // one thread's dependent chain x waves, unscaled
  int groups = 1;         // shared data: thread groups; row chunk: RowChunkShape::Code()
  int runner_up_groups = 0;  // row chunk: RowChunkRunnerUp's shape code (0: none)
  std::string why_not;    // when infeasible
};

// Every strategy's predicted time for the batch, in StrategyName order.
std::vector<StrategyCost> EstimateStrategies(const GpuHardwareParams& hw, const TahoeWorkload& w);

struct StrategyChoice {
  StrategyId strategy = StrategyId::kCpu;
  int groups = 1;
  double predicted_seconds = 0;
  std::string reason;  // "selector: shared_data 41us < direct 77us < ..."
  std::vector<StrategyCost> costs;
};

// The fastest feasible strategy; `force` ("" or "auto": none) picks one regardless of the model
// (reason says "override"), INVALID_ARGUMENT for an unknown name, FAILED_PRECONDITION when the forced
// strategy cannot run this model.
absl::StatusOr<StrategyChoice> ChooseStrategy(const GpuHardwareParams& hw, const TahoeWorkload& w,
                                              std::string_view force = "");
// The same with the forced strategy already parsed (ParseStrategy; nullopt: none).
absl::StatusOr<StrategyChoice> ChooseStrategy(const GpuHardwareParams& hw, const TahoeWorkload& w,
                                              std::optional<StrategyId> force);

// Shared-data groups that minimise the predicted time for the batch (1 .. max_shared_data_groups).
int BestSharedDataGroups(const GpuHardwareParams& hw, const TahoeWorkload& w);


}  // namespace grove
