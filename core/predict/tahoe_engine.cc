// Host side of the Tahoe GPU engine (see tahoe_engine.h). Compiled only with CUDA
// (tahoe_engine_nocuda.cc stands in otherwise).
#if defined(GROVE_HAVE_CUDA)

#include "core/predict/tahoe_engine.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/host_copy.h"
#include "core/common/log.h"
#include "core/common/thread_pool.h"
#include "core/gpu/cuda_status.h"
#include "core/gpu/device_buffer.h"
#include "core/gpu/device_set.h"
#include "core/predict/tahoe_kernels.h"
#include "core/predict/tahoe_lane.h"
#include "core/predict/traverse.h"

namespace grove {
namespace {

// The GPU strategy of a name the selector returned; the callers have ruled out "cpu" and unknown
// names.
StrategyId StrategyFromName(std::string_view name) {
  return StrategyId(std::clamp(StrategyIndex(name), 1, kNumStrategies - 1));
}

constexpr int kSlots = 2;
constexpr int64_t kTargetChunkRows = 1 << 18;   // host path: rows per staging slot
constexpr int64_t kDeviceChunkRows = 1 << 20;   // device path: rows per launch
constexpr int64_t kMaxInBytes = int64_t{64} << 20;
constexpr int64_t kMaxOutBytes = int64_t{64} << 20;
constexpr int64_t kMaxWsBytes = int64_t{512} << 20;

struct Slot {
  float* h_in = nullptr;   // pinned
  float* h_out = nullptr;  // pinned
  float* d_in = nullptr;
  float* d_out = nullptr;
  double* d_ws = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
};

// One GPU: the resident format, streams, staging buffers.
struct Gpu {
  int device = 0;
  TahoeDeviceForest df;
  std::vector<gpu::DeviceBuffer> buffers;  // the resident format
  Slot slots[kSlots];
  int64_t in_bytes = 0, out_bytes = 0, ws_doubles = 0;
  int forest_blocks_per_sm = 1, part_blocks_per_sm = 1;
  int max_row_chunk = 0;             // TahoeMaxRowChunk at this device's shared memory
  int64_t row_chunk_acc_bytes = 0;   // row chunk's shared memory besides its rows (one-row chunk)
  int64_t bytes = 0;
  mutable std::mutex mu;

  ~Gpu() {
    cudaSetDevice(device);
    for (Slot& s : slots) {
      if (s.stream) cudaStreamSynchronize(s.stream);
      if (s.h_in) cudaFreeHost(s.h_in);
      if (s.h_out) cudaFreeHost(s.h_out);
      if (s.d_in) cudaFree(s.d_in);
      if (s.d_out) cudaFree(s.d_out);
      if (s.d_ws) cudaFree(s.d_ws);
      if (s.done) cudaEventDestroy(s.done);
      if (s.stream) cudaStreamDestroy(s.stream);
    }
  }

  template <typename T>
  absl::StatusOr<const T*> Upload(const std::vector<T>& v) {
    absl::StatusOr<gpu::DeviceBuffer> b = gpu::DeviceBuffer::Upload(v, "tahoe: forest upload");
    if (!b.ok()) return b.status();
    bytes += std::max<int64_t>(1, b->bytes());
    buffers.push_back(*std::move(b));
    return buffers.back().as<const T>();
  }
};

#define TAHOE_ASSIGN(lhs, expr)            \
  do {                                     \
    auto _r = (expr);                      \
    if (!_r.ok()) return _r.status();      \
    lhs = *_r;                             \
  } while (0)

// The root node of each tree of `order` (indices into tf.trees()).
std::vector<uint32_t> RootsOf(const TahoeForest& tf, const std::vector<uint32_t>& order) {
  std::vector<uint32_t> roots(order.size());
  for (size_t i = 0; i < order.size(); ++i) roots[i] = tf.trees()[order[i]].root;
  return roots;
}

// Rows that make the CPU walk representative paths: every feature takes a threshold of a split on
// it, nudged either way.
std::vector<float> CalibrationRows(const Forest& f, int rows) {
  std::vector<std::vector<float>> thresholds(f.num_features);
  for (const Node& n : f.nodes) {
    if (!n.is_leaf() && !n.is_categorical() && thresholds[n.feature].size() < 64) {
      thresholds[n.feature].push_back(n.threshold);
    }
  }
  std::vector<float> x(static_cast<size_t>(rows) * f.num_features, 0.0f);
  uint64_t s = 0x2545F4914F6CDD1Dull;
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < f.num_features; ++c) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      const auto& t = thresholds[c];
      float v = t.empty() ? static_cast<float>(s % 7) : t[s % t.size()];
      v += ((s >> 20) & 1) ? 1e-3f * (1 + std::abs(v)) : -1e-3f * (1 + std::abs(v));
      x[static_cast<size_t>(r) * f.num_features + c] = v;
    }
  }
  return x;
}

class TahoeEngineImpl final : public TahoeEngine {
 public:
  TahoeEngineImpl(ForestPtr forest, TahoeForestPtr format, const TahoeEngineOptions& options,
                  ThreadPool* pool)
      : forest_(std::move(forest)), format_(std::move(format)), options_(options), pool_(pool) {}

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
                        probe_report_.empty() ? "" : "; probes: ", probe_report_);
  }
  int64_t DeviceBytes() const override { return gpus_.empty() ? 0 : gpus_[0]->bytes; }
  const TahoeForest& format() const override { return *format_; }
  const GpuHardwareParams& hardware() const override { return hw_; }
  int num_gpus() const override { return static_cast<int>(gpus_.size()); }
  int cuda_device(int gpu) const override { return gpus_[gpu]->device; }
  double cpu_seconds_per_visit() const override { return cpu_seconds_per_visit_; }

 private:
  absl::Status InitGpu(int device, Gpu& g);
  void BuildLanes();  // lanes_ (once, before InitGpu), when the options and the forest allow it
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
  // Best of three timed runs (after a warm-up) of `s` over the first `rows` probe rows of slot 1.
  // Best of `reps` - 1 timed runs after a warm-up.
  absl::StatusOr<double> TimeProbe(Gpu& g, StrategyId s, int groups, int64_t rows,
                                   int reps = 4) const;
  absl::Status ProbeRowChunk(Gpu& g, int64_t large, std::string* report);
  absl::Status ProbeChoices(Gpu& g, int64_t large, std::string* report);
  // The probed winner for a batch of `rows` (ProbeChoices), or kCpu when none.
  StrategyId ProbedChoice(double rows) const;
  void CalibrateCpu();
  absl::Status Probe();  // per-model corrections of the performance model (see perf_model.h)
  TahoeWorkload Workload(int64_t rows, const PredictOptions& options, bool on_device) const;
  int64_t ChunkRows(const Gpu& g, StrategyId s, const TahoeCall& call, bool host) const;
  TahoeLaunchArgs Args(const Gpu& g, StrategyId s, int groups, const TahoeCall& call) const;
  absl::Status RunHost(Gpu& g, StrategyId s, int groups, const TahoeCall& call, RowsView rows,
                       MatrixView<float> out) const;
  absl::Status RunDevice(Gpu& g, StrategyId s, int groups, const TahoeCall& call,
                         const float* d_rows, int64_t rows, int64_t row_stride, float* d_out,
                         int64_t out_stride) const;
  void LogChoice(const StrategyChoice& c, int64_t rows) const;

  ForestPtr forest_;
  TahoeForestPtr format_;
  TahoeEngineOptions options_;
  ThreadPool* pool_;
  GpuHardwareParams hw_;
  std::vector<std::unique_ptr<Gpu>> gpus_;
  int parts_ = 0;
  double cpu_seconds_per_visit_ = 0;
  double cpu_fixed_seconds_ = 1e-6;
  double cpu_parallelism_ = 1;
  std::string probe_report_;
  std::unique_ptr<TahoeLaneLayout> lanes_;  // host copy, uploaded to every GPU; null: none
  std::string lane_report_;
  double throughput_scale_[kNumStrategies] = {1, 1, 1, 1, 1, 1};
  double latency_scale_[kNumStrategies] = {1, 1, 1, 1, 1, 1};
  // Probe() rows and outputs on GPU 0 (TimeProbe), only while it runs.
  const float* probe_in_ = nullptr;
  float* probe_out_ = nullptr;
  // The row-chunk shape the probe found fastest at its large batch (chunk 0: not probed).
  RowChunkShape best_row_chunk_{0};
  // Batch sizes at which ProbeChoices times the selector's leading candidates, and the winner at
  // each (kCpu: not probed). A batch up to twice the largest takes the winner of the nearest size
  // on a log scale.
  static constexpr int64_t kChoiceBatches[] = {128, 1024, 8192, 65536};
  static constexpr int kNumChoiceBatches = 4;
  int64_t choice_rows_[kNumChoiceBatches] = {};
  StrategyId probed_choice_[kNumChoiceBatches] = {StrategyId::kCpu, StrategyId::kCpu,
                                                  StrategyId::kCpu, StrategyId::kCpu};
  mutable std::atomic<int> last_choice_{-1};
};

void TahoeEngineImpl::BuildLanes() {
  const TahoeForest& tf = *format_;
  const int F = forest_->num_features;
  if (options_.lanes == TahoeEngineOptions::Lanes::kOff || TahoeStagedRowBytes(F) == 0 ||
      !TahoeLaneEligible(tf)) {
    return;
  }
  absl::StatusOr<TahoeLaneLayout> lane = WithGrowingBudget(
      hw_.smem_per_block - 64 - TahoeLaneRowBytes(2 * F + 1),
      [&](int64_t b) {
        return BuildTahoeLaneLayout(tf, b,
                                    options_.lanes == TahoeEngineOptions::Lanes::kOnPaired
                                        ? TahoeLaneMode::kPaired
                                        : TahoeLaneMode::kAuto);
      });
  if (!lane.ok()) {
    GROVE_LOG(WARNING) << "tahoe: no lane layout" << KV("why", lane.status().message());
    lane_report_ = absl::StrCat("; no tree-per-lane walk (", lane.status().message(), ")");
    return;
  }
  lane_report_ = absl::StrFormat("; splitting walks a tree per lane: %s layout, %d parts, %.1f%% padding slots",
                                 lane->paired ? "paired" : "single",
                                 static_cast<int>(lane->parts.size()), 100 * lane->padding);
  lanes_ = std::make_unique<TahoeLaneLayout>(*std::move(lane));
}

TahoeCall TahoeEngineImpl::ProbeCall() const {
  TahoeCall call;
  call.kind = OutputKind::kMargin;
  call.width = forest_->num_outputs;
  call.row_params.it_begin = 0;
  call.row_params.it_end = forest_->num_iterations;
  call.transform = MakeTransformParams(*forest_, forest_->num_iterations);
  return call;
}

absl::StatusOr<double> TahoeEngineImpl::TimeProbe(Gpu& g, StrategyId s, int groups,
                                                  int64_t rows, int reps) const {
  const TahoeCall call = ProbeCall();
  double best = 1e30;
  for (int rep = 0; rep < reps; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    absl::Status st = RunDevice(g, s, groups, call, probe_in_, rows, forest_->num_features,
                                probe_out_, forest_->num_outputs);
    if (!st.ok()) return st;
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rep > 0) best = std::min(best, t);
  }
  return best;
}

absl::Status TahoeEngineImpl::InitGpu(int device, Gpu& g) {
  g.device = device;
  GROVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device), "cudaSetDevice");
  const TahoeForest& tf = *format_;
  TahoeForestView v = tf.HostView();
  if (tf.wide()) {
    TAHOE_ASSIGN(v.nodes, g.Upload(tf.nodes16()));
  } else {
    TAHOE_ASSIGN(v.nodes, g.Upload(tf.nodes8()));
  }
  TAHOE_ASSIGN(v.trees, g.Upload(tf.trees()));
  TAHOE_ASSIGN(v.cat_splits, g.Upload(tf.cat_splits()));
  TAHOE_ASSIGN(v.cat_bits, g.Upload(tf.cat_bits()));
  TAHOE_ASSIGN(v.leaf_table, g.Upload(tf.leaf_table()));
  TAHOE_ASSIGN(v.linear_leaves, g.Upload(tf.linear_leaves()));
  TAHOE_ASSIGN(v.linear_features, g.Upload(tf.linear_features()));
  TAHOE_ASSIGN(v.linear_coeffs, g.Upload(tf.linear_coeffs()));
  TAHOE_ASSIGN(v.leaf_ids, g.Upload(tf.leaf_ids()));
  TAHOE_ASSIGN(v.base_margin, g.Upload(tf.base_margin()));
  TahoeDeviceForest& df = g.df;
  df.view = v;
  df.wide = tf.wide();
  df.simple = tf.simple();
  df.fixed = tf.fixed_walk();
  std::vector<uint32_t> order, offsets;
  const auto& assignments = tf.assignments();
  df.num_assignments = std::min<int>(kMaxAssignments, static_cast<int>(assignments.size()));
  for (int i = 0; i < df.num_assignments; ++i) {
    df.order_begin[i] = static_cast<uint32_t>(order.size());
    df.offsets_begin[i] = static_cast<uint32_t>(offsets.size());
    order.insert(order.end(), assignments[i].order.begin(), assignments[i].order.end());
    offsets.insert(offsets.end(), assignments[i].offsets.begin(), assignments[i].offsets.end());
  }
  TAHOE_ASSIGN(df.d_assign_order, g.Upload(order));
  TAHOE_ASSIGN(df.d_assign_offsets, g.Upload(offsets));
  if (df.fixed) TAHOE_ASSIGN(df.d_assign_roots, g.Upload(RootsOf(tf, order)));
  order.clear();
  offsets.clear();
  const auto& classed = tf.class_assignments();
  for (int i = 0; i < std::min<int>(kMaxAssignments, static_cast<int>(classed.size())); ++i) {
    if (classed[i].offsets.empty()) continue;
    df.class_mask |= 1u << i;
    df.class_order_begin[i] = static_cast<uint32_t>(order.size());
    df.class_offsets_begin[i] = static_cast<uint32_t>(offsets.size());
    order.insert(order.end(), classed[i].order.begin(), classed[i].order.end());
    offsets.insert(offsets.end(), classed[i].offsets.begin(), classed[i].offsets.end());
  }
  TAHOE_ASSIGN(df.d_class_order, g.Upload(order));
  TAHOE_ASSIGN(df.d_class_offsets, g.Upload(offsets));
  if (df.fixed && df.class_mask != 0) TAHOE_ASSIGN(df.d_class_roots, g.Upload(RootsOf(tf, order)));
  const int64_t nb = tf.node_bytes();
  df.forest_smem_bytes = ((v.num_nodes * nb + 15) & ~int64_t{15}) + int64_t{v.num_trees} * 16;
  df.staged_row_bytes = TahoeStagedRowBytes(v.num_features);
  // Parts: the budget leaves room for the staged rows and the 16-byte alignments.
  absl::StatusOr<std::vector<TahoePart>> parts = WithGrowingBudget(
      hw_.smem_per_block - 64 - df.staged_row_bytes,
      [&](int64_t b) { return tf.SplitIntoParts(b); });
  if (parts.ok()) {
    TAHOE_ASSIGN(df.d_parts, g.Upload(*parts));
    df.num_parts = static_cast<int>(parts->size());
    for (const TahoePart& p : *parts) {
      const int64_t b = (((p.node_end - p.node_begin) * nb + 15) & ~int64_t{15}) +
                        int64_t{p.tree_end - p.tree_begin} * 16;
      df.part_smem_bytes = std::max(df.part_smem_bytes, b);
    }
  } else {
    GROVE_LOG(WARNING) << "tahoe: no splitting shared forest" << KV("why", parts.status().message());
  }
  parts_ = df.num_parts;
  df.num_iterations = forest_->num_iterations;
  if (lanes_ != nullptr) {
    TAHOE_ASSIGN(df.d_lane_slots, g.Upload(lanes_->slots));
    TAHOE_ASSIGN(df.d_lane_bundles, g.Upload(lanes_->bundles));
    TAHOE_ASSIGN(df.d_lane_parts, g.Upload(lanes_->parts));
    df.lane_num_parts = static_cast<int>(lanes_->parts.size());
    df.lane_part_bytes = lanes_->part_bytes;
    df.lane_columns = lanes_->columns;
    df.lane_column_bits = lanes_->column_bits;
    df.lane_paired = lanes_->paired;
  }
  GROVE_CUDA_RETURN_IF_ERROR(TahoeConfigureKernels(hw_.smem_per_block), "cudaFuncSetAttribute");
  const bool multi = v.num_outputs > 1;
  const int64_t forest_smem = TahoeSharedBytes(df, StrategyId::kSharedForest, 1);
  const int64_t part_smem = TahoeSharedBytes(df, StrategyId::kSplittingSharedForest, 1);
  g.max_row_chunk = TahoeMaxRowChunk(df, hw_.smem_per_block);
  g.row_chunk_acc_bytes = TahoeSharedBytes(df, StrategyId::kRowChunk, 1) -
                          4 * int64_t{TahoeRowChunkStride(v.num_features)};
  if (forest_smem <= hw_.smem_per_block) {
    g.forest_blocks_per_sm = std::max(1, TahoeForestBlocksPerSm(df, forest_smem, multi));
  }
  if (df.num_parts > 0) {
    g.part_blocks_per_sm = std::max(1, TahoeForestBlocksPerSm(df, part_smem, multi));
  }
  // Staging slots.
  const int64_t K = v.num_outputs;
  const int64_t F = v.num_features;
  const int64_t max_width = std::max<int64_t>({K, 1, forest_->PredictionWidth()});
  g.in_bytes = std::clamp<int64_t>(kTargetChunkRows * F * 4, int64_t{1} << 20, kMaxInBytes);
  g.out_bytes = std::clamp<int64_t>(kTargetChunkRows * max_width * 4, int64_t{1} << 20, kMaxOutBytes);
  g.ws_doubles = std::clamp<int64_t>(kDeviceChunkRows * K * std::max({1, df.num_parts, df.lane_num_parts}),
                                     int64_t{1} << 16, kMaxWsBytes / 8);
  for (Slot& s : g.slots) {
    GROVE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    GROVE_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming), "cudaEventCreate");
    GROVE_CUDA_RETURN_IF_ERROR(cudaMallocHost(reinterpret_cast<void**>(&s.h_in), g.in_bytes), "cudaMallocHost");
    GROVE_CUDA_RETURN_IF_ERROR(cudaMallocHost(reinterpret_cast<void**>(&s.h_out), g.out_bytes), "cudaMallocHost");
    GROVE_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&s.d_in), g.in_bytes), "cudaMalloc (rows)");
    GROVE_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&s.d_out), g.out_bytes), "cudaMalloc (out)");
    GROVE_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&s.d_ws), g.ws_doubles * 8),
               "cudaMalloc (workspace)");
    g.bytes += g.in_bytes + g.out_bytes + g.ws_doubles * 8;
  }
  GROVE_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "upload");
  return absl::OkStatus();
}

void TahoeEngineImpl::CalibrateCpu() {
  const int rows = 128;
  const std::vector<float> x = CalibrationRows(*forest_, rows);
  PredictOptions o;
  o.kind = OutputKind::kMargin;
  std::vector<float> out(static_cast<size_t>(rows) * forest_->num_outputs);
  const RowsView view = MakeRowsView(x.data(), rows, forest_->num_features);
  const MatrixView<float> ov = MakeMatrixView(out.data(), rows, forest_->num_outputs);
  double best = 1e30;
  const auto begin = std::chrono::steady_clock::now();
  for (int rep = 0; rep < 20; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    if (!PredictCpu(*forest_, view, o, ov, nullptr).ok()) return;
    const auto end = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(end - start).count());
    if (std::chrono::duration<double>(end - begin).count() > 0.05) break;
  }
  const double visits = std::max(1e-9, format_->stats().expected_visits_per_row);
  cpu_seconds_per_visit_ = best / (rows * visits);
  if (pool_ == nullptr) return;
  // Per-call overhead of the pool: two chunks (the fewest it hands out) after the workers have gone
  // idle, as a sporadic small request finds them; the median of 7, less the longer chunk's walk.
  const int64_t grain = PredictCpuGrain(*forest_);
  auto timed = [&](const std::vector<float>& rows_in, int64_t n) {
    std::vector<float> res(static_cast<size_t>(n) * forest_->num_outputs);
    const auto start = std::chrono::steady_clock::now();
    const absl::Status st = PredictCpu(*forest_, MakeRowsView(rows_in.data(), n, forest_->num_features),
                                       o, MakeMatrixView(res.data(), n, forest_->num_outputs), pool_);
    return st.ok() ? std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
                   : -1.0;
  };
  const std::vector<float> two = CalibrationRows(*forest_, static_cast<int>(2 * grain));
  std::vector<double> ts;
  for (int rep = 0; rep < 7; ++rep) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const double t = timed(two, 2 * grain);
    if (t < 0) return;
    ts.push_back(t);
  }
  std::nth_element(ts.begin(), ts.begin() + 3, ts.end());
  cpu_fixed_seconds_ = std::max(1e-6, ts[3] - grain * visits * cpu_seconds_per_visit_);
  // Speed-up on a batch that gives every worker its chunks (memory bandwidth and shared cores keep
  // it below the thread count).
  const int threads = std::max(1, pool_->num_threads());
  const int64_t big = grain * 4 * (threads + 1);
  const std::vector<float> many = CalibrationRows(*forest_, static_cast<int>(big));
  double tb = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const double t = timed(many, big);
    if (t < 0) return;
    tb = std::min(tb, t);
  }
  cpu_parallelism_ = std::clamp(big * visits * cpu_seconds_per_visit_ /
                                    std::max(1e-9, tb - cpu_fixed_seconds_),
                                1.0, static_cast<double>(threads));
}

// Row chunk: every valid shape that fits (chunk, threads per block, one or two rows per thread)
// timed once on the large batch, then the four fastest again; the fastest there becomes the shape
// of large batches (RowChunkShapeFor shrinks the chunk for small ones).
absl::Status TahoeEngineImpl::ProbeRowChunk(Gpu& g, int64_t large, std::string* report) {
  const TahoeCall call = ProbeCall();
  TahoeLaunchArgs a = Args(g, StrategyId::kRowChunk, 1, call);
  std::vector<std::pair<double, RowChunkShape>> timed;
  for (int threads = kRowChunkMinThreads; threads <= kRowChunkMaxThreads; threads *= 2) {
    for (int c = std::max(1, threads / 256); c <= threads; c *= 2) {
      for (int per_thread = 1; per_thread <= 4; per_thread *= 2) {
        RowChunkShape shape;
        shape.chunk = c;
        shape.threads = threads;
        shape.per_thread = per_thread;
        if (per_thread > 1 && !TahoeRowChunkPairable(g.df, call.kind, c, threads)) continue;
        a.groups = shape.Code();
        const RowChunkShape valid = RowChunkLaunchShape(g.df, a);
        if (valid.chunk != c || valid.threads != threads || valid.per_thread != per_thread ||
            TahoeSharedBytes(g.df, StrategyId::kRowChunk, shape.Code()) > hw_.smem_per_block) {
          continue;  // not this shape, or does not fit
        }
        absl::StatusOr<double> t = TimeProbe(g, StrategyId::kRowChunk, shape.Code(), large, 2);
        if (!t.ok()) return t.status();
        timed.emplace_back(*t, shape);
      }
    }
  }
  if (timed.empty()) return absl::OkStatus();
  std::sort(timed.begin(), timed.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  std::string firsts;
  for (const auto& [t, shape] : timed) {
    absl::StrAppend(&firsts, firsts.empty() ? "" : " ", shape.Label(), ":",
                    absl::StrFormat("%.1fus", t * 1e6));
  }
  double best_t = 1e30;
  std::vector<std::pair<double, RowChunkShape>> finals_timed;
  std::string finals;
  for (size_t i = 0; i < std::min<size_t>(4, timed.size()); ++i) {
    absl::StatusOr<double> t = TimeProbe(g, StrategyId::kRowChunk, timed[i].second.Code(), large);
    if (!t.ok()) return t.status();
    absl::StrAppend(&finals, finals.empty() ? "" : " ", timed[i].second.Label(), ":",
                    absl::StrFormat("%.1fus", *t * 1e6));
    finals_timed.emplace_back(*t, timed[i].second);
    best_t = std::min(best_t, *t);
  }
  // Within 3% of the fastest, the shape with the most threads per block: on real rows at 1M,
  // 256-thread one-row shapes ran up to 2x slower per row than on the probe's rows at 262,144
  // (prod-wide256: "16" 71M rows/s against 32@512's 147M; the probe had them 1% apart), while
  // 512- and 1,024-thread shapes held their probed rate (docs/benchmarks.md).
  RowChunkShape best;
  double chosen_t = 1e30;
  for (const auto& [t, shape] : finals_timed) {
    if (t > 1.03 * best_t) continue;
    if (chosen_t == 1e30 || shape.threads > best.threads ||
        (shape.threads == best.threads && t < chosen_t)) {
      best = shape;
      chosen_t = t;
    }
  }
  best_row_chunk_ = best;
  absl::StrAppend(report, "row_chunk shapes at ", large, " rows: ", firsts, "; again: ", finals,
                  " (best ", best.Label(), "); ");
  return absl::OkStatus();
}

absl::Status TahoeEngineImpl::Probe() {
  Gpu& g = *gpus_[0];
  const int64_t F = forest_->num_features, K = forest_->num_outputs;
  // The large probe batch: 262,144 rows or 256 MB of them, in buffers of their own (freed after
  // the probes), so that wide rows are timed at a size where every shape runs many waves (a shape
  // can rank first at 65,536 rows and run 2x slower at 1M: prod-wide256).
  const int64_t large = std::max<int64_t>(
      1, std::min<int64_t>({int64_t{1} << 18, (int64_t{256} << 20) / (4 * F),
                            (int64_t{256} << 20) / (4 * K)}));
  const int64_t small = std::min<int64_t>(256, large);
  GROVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(g.device), "cudaSetDevice");
  struct Buffers {  // freed, and the engine's pointers to them cleared, however Probe returns
    TahoeEngineImpl* engine;
    float* in = nullptr;
    float* out = nullptr;
    ~Buffers() {
      engine->probe_in_ = nullptr;
      engine->probe_out_ = nullptr;
      if (in != nullptr) cudaFree(in);
      if (out != nullptr) cudaFree(out);
    }
  } buffers{this};
  GROVE_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&buffers.in), large * F * 4), "cudaMalloc (probe)");
  GROVE_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&buffers.out), large * K * 4), "cudaMalloc (probe)");
  {
    // 1,024 calibration rows, then doubled on the device up to `large`.
    const int64_t base_rows = std::min<int64_t>(1024, large);
    const std::vector<float> base = CalibrationRows(*forest_, static_cast<int>(base_rows));
    GROVE_CUDA_RETURN_IF_ERROR(cudaMemcpy(buffers.in, base.data(), base_rows * F * 4, cudaMemcpyHostToDevice),
               "probe rows");
    for (int64_t have = base_rows; have < large; have *= 2) {
      const int64_t n = std::min(have, large - have);
      GROVE_CUDA_RETURN_IF_ERROR(cudaMemcpy(buffers.in + have * F, buffers.in, n * F * 4, cudaMemcpyDeviceToDevice),
                 "probe rows");
    }
  }
  probe_in_ = buffers.in;
  probe_out_ = buffers.out;
  PredictOptions o;
  o.kind = OutputKind::kMargin;
  std::string report;
  if (g.df.lane_num_parts > 0 && options_.lanes == TahoeEngineOptions::Lanes::kAuto) {
    // Tree per lane or row per thread for splitting: the faster at the large probe batch stays
    // (lanes win where the row walks conflict in shared memory; rows win where a part holds few
    // steps per row, since each row then pays the lanes' reduction).
    const int lane_parts = g.df.lane_num_parts;
    absl::StatusOr<double> lanes = TimeProbe(g, StrategyId::kSplittingSharedForest, 1, large);
    if (!lanes.ok()) return lanes.status();
    g.df.lane_num_parts = 0;
    absl::StatusOr<double> rows = TimeProbe(g, StrategyId::kSplittingSharedForest, 1, large);
    if (!rows.ok()) return rows.status();
    const bool keep = *lanes < *rows;
    for (auto& gpu : gpus_) gpu->df.lane_num_parts = keep ? lane_parts : 0;
    absl::StrAppend(&lane_report_, absl::StrFormat(" (%s: %lld rows %.1fus per lane, %.1fus per row)",
                                                   keep ? "kept" : "not used",
                                                   static_cast<long long>(large), *lanes * 1e6,
                                                   *rows * 1e6));
  }
  if (g.max_row_chunk > 0) {
    absl::Status st = ProbeRowChunk(g, large, &report);
    if (!st.ok()) return st;
  }
  for (int i = 1; i < kNumStrategies; ++i) {
    const char* name = StrategyName(i);
    double measured[2] = {0, 0};
    StrategyCost predicted[2];
    bool ok = true;
    for (int k = 0; k < 2 && ok; ++k) {
      const int64_t n = k == 0 ? small : large;
      TahoeWorkload w = Workload(n, o, true);
      for (int j = 0; j < kNumStrategies; ++j) w.throughput_scale[j] = w.latency_scale[j] = 1;
      absl::StatusOr<StrategyChoice> c = ChooseStrategy(hw_, w, name);
      if (!c.ok()) {
        ok = false;
        break;
      }
      predicted[k] = c->costs[i];
      absl::StatusOr<double> best = TimeProbe(g, StrategyFromName(name), c->groups, n);
      if (!best.ok()) return best.status();
      measured[k] = *best;
    }
    if (!ok) continue;
    auto ratio = [](double m, double fixed, double term) {
      return term > 0 ? std::clamp((m - fixed) / term, 0.05, 50.0) : 1.0;
    };
    latency_scale_[i] = ratio(measured[0], predicted[0].fixed_seconds, predicted[0].latency_seconds);
    throughput_scale_[i] =
        ratio(measured[1], predicted[1].fixed_seconds, predicted[1].throughput_seconds);
    absl::StrAppend(&report, name,
                    absl::StrFormat(": %lld rows %.1fus (latency x%.2f), %lld rows %.1fus "
                                    "(throughput x%.2f); ",
                                    static_cast<long long>(small), measured[0] * 1e6,
                                    latency_scale_[i], static_cast<long long>(large),
                                    measured[1] * 1e6, throughput_scale_[i]));
  }
  if (absl::Status st = ProbeChoices(g, large, &report); !st.ok()) return st;
  GROVE_LOG(INFO) << "tahoe probes" << KV("corrections", report);
  probe_report_ = report;
  return absl::OkStatus();
}

// The selector's model (corrected above) ranks strategies well apart but can miss between close
// ones by 10-30%: at a few batch sizes, the candidates within 2x of its best are timed and the
// fastest is kept for batches near that size (ProbedChoice).
absl::Status TahoeEngineImpl::ProbeChoices(Gpu& g, int64_t large, std::string* report) {
  PredictOptions o;
  o.kind = OutputKind::kMargin;
  absl::StrAppend(report, "choices:");
  for (int b = 0; b < kNumChoiceBatches; ++b) {
    const int64_t n = std::min(kChoiceBatches[b], large);
    choice_rows_[b] = n;
    const std::vector<StrategyCost> costs = EstimateStrategies(hw_, Workload(n, o, true));
    double best_predicted = 1e30;
    for (int i = 1; i < kNumStrategies; ++i) {
      if (costs[i].feasible) best_predicted = std::min(best_predicted, costs[i].seconds);
    }
    double best_t = 1e30;
    for (int i = 1; i < kNumStrategies; ++i) {
      if (!costs[i].feasible || costs[i].seconds > 2 * best_predicted) continue;
      absl::StatusOr<double> t = TimeProbe(g, static_cast<StrategyId>(i), costs[i].groups, n);
      if (!t.ok()) return t.status();
      absl::StrAppend(report, " ", n, " rows ", StrategyName(i), " ",
                      absl::StrFormat("%.1fus", *t * 1e6));
      if (*t < best_t) {
        best_t = *t;
        probed_choice_[b] = static_cast<StrategyId>(i);
      }
    }
    absl::StrAppend(report, " (", StrategyName(probed_choice_[b]), ");");
  }
  return absl::OkStatus();
}

StrategyId TahoeEngineImpl::ProbedChoice(double rows) const {
  // Far above the largest probed batch the model decides: its throughput terms were corrected at
  // the large probe batch, and the ranking there differs from the one at 65,536 rows (measured:
  // splitting 2x faster than shared data at 1M rows of cal_housing-med, slower at 65,536).
  if (rows > 2.0 * choice_rows_[kNumChoiceBatches - 1]) return StrategyId::kCpu;
  int best = -1;
  double best_d = 1e30;
  for (int b = 0; b < kNumChoiceBatches; ++b) {
    if (choice_rows_[b] <= 0) continue;
    const double d = std::abs(std::log2(std::max(1.0, rows)) - std::log2(choice_rows_[b]));
    if (d < best_d) best_d = d, best = b;
  }
  return best >= 0 ? probed_choice_[best] : StrategyId::kCpu;
}

absl::Status TahoeEngineImpl::Init() {
  int count = gpu::VisibleGpuCount();
  if (count == 0) return absl::UnavailableError("no CUDA device visible");
  if (options_.max_gpus > 0) count = std::min(count, options_.max_gpus);
  absl::StatusOr<GpuHardwareParams> hw =
      LoadOrCalibrateGpu(options_.engine.calibration_cache_dir, 0);
  if (!hw.ok()) return hw.status();
  hw_ = *hw;
  BuildLanes();
  for (int d = 0; d < count; ++d) {
    auto g = std::make_unique<Gpu>();
    if (absl::Status s = InitGpu(d, *g); !s.ok()) return s;
    gpus_.push_back(std::move(g));
  }
  CalibrateCpu();
  if (options_.probe) {
    if (absl::Status s = Probe(); !s.ok()) return s;
  }
  GROVE_LOG(INFO) << "tahoe engine ready" << KV("gpus", count) << KV("device", hw_.device_name)
                  << KV("trees", format_->trees().size())
                  << KV("node_bytes", format_->node_bytes()) << KV("parts", parts_)
                  << KV("device_mb", DeviceBytes() / 1e6)
                  << KV("cpu_ns_per_visit", cpu_seconds_per_visit_ * 1e9)
                  << KV("cpu_fixed_us", cpu_fixed_seconds_ * 1e6) << KV("cpu_parallelism", cpu_parallelism_);
  return absl::OkStatus();
}

int64_t TahoeEngineImpl::ChunkRows(const Gpu& g, StrategyId s, const TahoeCall& call,
                                   bool host) const {
  int64_t chunk = host ? kTargetChunkRows : kDeviceChunkRows;
  if (options_.max_chunk_rows > 0) chunk = std::min(chunk, options_.max_chunk_rows);
  const int64_t ws_per_row = TahoeWorkspaceDoubles(g.df, s, call.kind, 1);
  if (ws_per_row > 0) chunk = std::min(chunk, g.ws_doubles / ws_per_row);
  if (host) {
    chunk = std::min(chunk, g.in_bytes / (4 * std::max<int64_t>(1, g.df.view.num_features)));
    chunk = std::min(chunk, g.out_bytes / (4 * std::max<int64_t>(1, call.width)));
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
  w.row_chunk_row_bytes = 4 * TahoeRowChunkStride(w.features);
  w.row_chunk_acc_bytes = g.row_chunk_acc_bytes;
  TahoeCall call;
  call.kind = options.kind;
  call.width = w.out_width;
  w.chunk_rows = ChunkRows(g, StrategyId::kSplittingSharedForest, call, !on_device);
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
  w.cpu_grain = PredictCpuGrain(*forest_);
  return w;
}

absl::StatusOr<StrategyChoice> TahoeEngineImpl::Plan(int64_t rows, const PredictOptions& options,
                                                     bool rows_on_device,
                                                     std::string_view force) const {
  if (rows_on_device && force == "cpu") {
    return absl::InvalidArgumentError("the cpu strategy takes host rows");
  }
  const TahoeWorkload w = Workload(rows, options, rows_on_device);
  absl::StatusOr<StrategyChoice> c = ChooseStrategy(hw_, w, force);
  // Where the probe timed the candidates near this batch size, its winner runs (unless the
  // selector chose the CPU, or a strategy was forced).
  const StrategyId probed =
      ProbedChoice(static_cast<double>(rows) / std::max(1, w.num_gpus));
  if (c.ok() && (force.empty() || force == "auto") && probed != StrategyId::kCpu &&
      c->strategy != StrategyName(StrategyId::kCpu) && c->strategy != StrategyName(probed) &&
      c->costs[static_cast<int>(probed)].feasible) {
    const StrategyCost& p = c->costs[static_cast<int>(probed)];
    c->reason = absl::StrCat("probe: ", p.name, " timed fastest near this batch; ", c->reason);
    c->strategy = p.name;
    c->groups = p.groups;
    c->predicted_seconds = p.seconds;
  }
  if (c.ok() && c->strategy == "shared_data" && options_.shared_data_groups > 0) {
    c->groups = std::min(options_.shared_data_groups,
                         std::max(1, TahoeMaxSharedDataGroups(gpus_[0]->df, hw_.smem_per_block)));
  }
  if (c.ok() && c->strategy == StrategyName(StrategyId::kRowChunk) && options_.row_chunk > 0) {
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
  return a;
}

absl::Status TahoeEngineImpl::RunDevice(Gpu& g, StrategyId s, int groups, const TahoeCall& call,
                                        const float* d_rows, int64_t rows, int64_t row_stride,
                                        float* d_out, int64_t out_stride) const {
  std::lock_guard<std::mutex> lock(g.mu);
  GROVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(g.device), "cudaSetDevice");
  const int64_t chunk = ChunkRows(g, s, call, false);
  Slot& slot = g.slots[0];
  TahoeLaunchArgs a = Args(g, s, groups, call);
  a.row_stride = row_stride;
  a.out_stride = out_stride;
  for (int64_t begin = 0; begin < rows; begin += chunk) {
    a.d_rows = d_rows + begin * row_stride;
    a.rows = std::min(chunk, rows - begin);
    a.d_out = d_out + begin * out_stride;
    GROVE_CUDA_RETURN_IF_ERROR(TahoeLaunch(g.df, a, slot.d_ws, slot.stream), "tahoe kernel launch");
  }
  GROVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(slot.stream), "tahoe kernels");
  return absl::OkStatus();
}

absl::Status TahoeEngineImpl::RunHost(Gpu& g, StrategyId s, int groups, const TahoeCall& call,
                                      RowsView rows, MatrixView<float> out) const {
  std::lock_guard<std::mutex> lock(g.mu);
  GROVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(g.device), "cudaSetDevice");
  const int64_t chunk = ChunkRows(g, s, call, true);
  const int64_t F = rows.cols, W = call.width;
  TahoeLaunchArgs a = Args(g, s, groups, call);
  a.row_stride = F;
  a.out_stride = W;
  struct Pending {
    int64_t begin = 0, count = 0;
    bool active = false;
  } pending[kSlots];
  // Copies a finished chunk's outputs from its pinned slot to the caller's matrix.
  auto drain = [&](int i) -> absl::Status {
    Pending& p = pending[i];
    if (!p.active) return absl::OkStatus();
    GROVE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(g.slots[i].done), "tahoe chunk");
    CopyRows(pool_, out.Row(p.begin), out.stride, g.slots[i].h_out, W, p.count, W);
    p.active = false;
    return absl::OkStatus();
  };
  absl::Status status;
  int c = 0;
  for (int64_t begin = 0; begin < rows.rows && status.ok(); begin += chunk, ++c) {
    const int i = c % kSlots;
    Slot& slot = g.slots[i];
    status = drain(i);
    if (!status.ok()) break;
    const int64_t n = std::min(chunk, rows.rows - begin);
    CopyRows(pool_, slot.h_in, F, rows.Row(begin), rows.stride, n, F);
    status = gpu::CudaStatus(cudaMemcpyAsync(slot.d_in, slot.h_in, n * F * 4, cudaMemcpyHostToDevice,
                                        slot.stream),
                        "copy rows to device");
    if (!status.ok()) break;
    a.d_rows = slot.d_in;
    a.rows = n;
    a.d_out = slot.d_out;
    status = gpu::CudaStatus(TahoeLaunch(g.df, a, slot.d_ws, slot.stream), "tahoe kernel launch");
    if (!status.ok()) break;
    status = gpu::CudaStatus(cudaMemcpyAsync(slot.h_out, slot.d_out, n * W * 4, cudaMemcpyDeviceToHost,
                                        slot.stream),
                        "copy results to host");
    if (!status.ok()) break;
    status = gpu::CudaStatus(cudaEventRecord(slot.done, slot.stream), "cudaEventRecord");
    pending[i] = Pending{begin, n, status.ok()};
  }
  for (int i = 0; i < kSlots; ++i) {
    if (status.ok()) {
      status = drain(i);
    } else {
      cudaStreamSynchronize(g.slots[i].stream);  // leave the slot idle before reporting
    }
  }
  return status;
}

void TahoeEngineImpl::LogChoice(const StrategyChoice& c, int64_t rows) const {
  const int id = StrategyIndex(c.strategy);
  GROVE_LOG(DEBUG) << "tahoe strategy" << KV("rows", rows) << KV("strategy", c.strategy)
                   << KV("reason", c.reason);
  if (last_choice_.exchange(id) != id) {
    GROVE_LOG(INFO) << "tahoe strategy changed" << KV("rows", rows) << KV("strategy", c.strategy)
                    << KV("groups", c.groups) << KV("reason", c.reason);
  }
}

absl::Status TahoeEngineImpl::PredictHost(RowsView rows, const PredictOptions& options,
                                          MatrixView<float> out, std::string_view strategy,
                                          RunInfo* info) const {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<TahoeCall> call = TahoePrepareCall(*format_, rows, options, out);
  if (!call.ok()) return call.status();
  absl::StatusOr<StrategyChoice> choice = Plan(rows.rows, options, false, strategy);
  if (!choice.ok()) return choice.status();
  LogChoice(*choice, rows.rows);
  absl::Status status;
  std::string device = "cpu";
  if (choice->strategy == "cpu") {
    status = PredictCpu(*forest_, rows, options, out, pool_);
  } else if (rows.rows > 0) {
    const StrategyId s = StrategyFromName(choice->strategy);
    const int n = num_gpus();
    // Few rows: one GPU (the others would only add latency).
    const int used = static_cast<int>(std::clamp<int64_t>(rows.rows / 4096, 1, n));
    device = "cuda:";
    std::vector<absl::Status> results(used);
    std::vector<std::thread> threads;
    const int64_t per = (rows.rows + used - 1) / used;
    for (int d = 0; d < used; ++d) {
      absl::StrAppend(&device, d == 0 ? "" : "+", gpus_[d]->device);
      const int64_t b = d * per, e = std::min(rows.rows, b + per);
      if (b >= e) continue;
      RowsView rv{rows.Row(b), e - b, rows.cols, rows.stride};
      MatrixView<float> ov{out.Row(b), e - b, out.cols, out.stride};
      auto run = [&, d, rv, ov] {
        results[d] = RunHost(*gpus_[d], s, choice->groups, *call, rv, ov);
      };
      if (d + 1 == used) {
        run();
      } else {
        threads.emplace_back(run);
      }
    }
    for (std::thread& t : threads) t.join();
    for (const absl::Status& r : results) {
      if (!r.ok() && status.ok()) status = r;
    }
  } else {
    device = absl::StrCat("cuda:", gpus_[0]->device);
  }
  if (info != nullptr) {
    info->device = device;
    info->strategy = choice->strategy;
    info->reason = choice->reason;
    info->compute_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return status;
}

absl::Status TahoeEngineImpl::PredictDevice(int gpu, const float* d_rows, int64_t rows,
                                            int64_t row_stride, const PredictOptions& options,
                                            float* d_out, int64_t out_stride,
                                            std::string_view strategy, RunInfo* info) const {
  if (gpu < 0 || gpu >= num_gpus()) return absl::InvalidArgumentError("no such GPU");
  const auto start = std::chrono::steady_clock::now();
  const Forest& f = *forest_;
  // Shape checks as TahoePrepareCall, without touching device memory.
  if (row_stride < f.num_features) return absl::InvalidArgumentError("row stride < features");
  const int64_t width = PredictWidth(f, options);
  if (out_stride < width) return absl::InvalidArgumentError("output stride < width");
  std::vector<float> dummy_row(f.num_features), dummy_out(width);
  RowsView probe{dummy_row.data(), rows, f.num_features, 0};
  MatrixView<float> probe_out{dummy_out.data(), rows, width, 0};
  probe.stride = f.num_features;
  probe_out.stride = width;
  absl::StatusOr<TahoeCall> call = TahoePrepareCall(*format_, probe, options, probe_out);
  if (!call.ok()) return call.status();
  absl::StatusOr<StrategyChoice> choice = Plan(rows, options, true, strategy);
  if (!choice.ok()) return choice.status();
  LogChoice(*choice, rows);
  absl::Status s = RunDevice(*gpus_[gpu], StrategyFromName(choice->strategy), choice->groups,
                             *call, d_rows, rows, row_stride, d_out, out_stride);
  if (info != nullptr) {
    info->device = absl::StrCat("cuda:", gpus_[gpu]->device);
    info->strategy = choice->strategy;
    info->reason = choice->reason;
    info->compute_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TahoeEngine>> TahoeEngine::Create(ForestPtr forest,
                                                                  const TahoeEngineOptions& options,
                                                                  ThreadPool* pool) {
  if (forest == nullptr) return absl::InvalidArgumentError("TahoeEngine: no model");
  const std::string& s = options.engine.strategy;
  if (!s.empty() && s != "auto" && !IsKnownStrategy(s)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown prediction strategy '", s, "'"));
  }
  if (gpu::VisibleGpuCount() == 0) return absl::UnavailableError("no CUDA device visible");
  absl::StatusOr<TahoeForestPtr> format = TahoeForest::Build(forest, options.format);
  if (!format.ok()) return format.status();
  auto engine = std::make_unique<TahoeEngineImpl>(forest, *format, options, pool);
  if (absl::Status st = engine->Init(); !st.ok()) return st;
  return std::unique_ptr<TahoeEngine>(std::move(engine));
}

}  // namespace grove

#endif  // GROVE_HAVE_CUDA
