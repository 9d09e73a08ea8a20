// Prediction throughput, latency, selector study and format ablation for one model.
//
//   grove_predict_bench --model M.ubj --rows R.csv
//                       [--mode all|study|compare|ablation|cpu|engine|row|kernel]
//                       [--batches 100,1000,10000,100000,1000000] [--budget 0.1] [--warmup 9]
//                       [--cache DIR] [--threads N] [--name LABEL] [--strategy S] [--lanes 0|1|2|auto]
//                       [--block-rows N] [--walk auto|scalar|simd|dense|bitvector|dense_avx2]
//                       [--level-walk 0|1|auto] [--record-walk 0|1|auto]
//                       [--row-chunk SHAPE[,SHAPE...]]
//                       [--gpu-wait share|poll]
//
// Rows: the CSV's rows (a trailing label column, when there is one more column than the model has
// features, is dropped; at most the first 10,000 rows) repeated to each batch size.
//
// study: for every batch size, every GPU strategy and the selector ("auto"), timed at engine level
//   (rows and outputs already on the GPU, PredictDevice) and end to end (host rows in, host results
//   out, PredictHost; the CPU path too), with the selector's predicted times; then whether the
//   selector's choice is the measured best and by how much it is off. Also the floor per batch:
//   bytes per row through device memory and node visits per row against the calibrated bandwidths.
// ablation: engine-level time of every GPU strategy at the largest batch with the adaptive
//   format's node rearrangement and tree rearrangement each turned off.
// compare: study with end-to-end times for the selector only (the nvForest comparison,
//   bench/nvforest_compare.sh).
// cpu: the CPU engine (what runs without CUDA and for small batches) and the CPU reference, then
//   single rows (cpu::PredictRow, p50/p99/p99.9 over 100,000 calls).
// engine: only the CPU engine's batches of cpu (for before/after comparisons of the engine).
// row: only the single rows of cpu.
// kernel: engine level only, strategy --strategy (default: the selector's) at each batch size, the
//   timed runs bracketed by cudaProfilerStart/Stop so that `ncu --profile-from-start off` profiles
//   only them (not the engine's load-time probes).
//
// Timing: each configuration runs once to warm up (and, when that run is short, up to `--warmup`
// runs in all: the engine's shape trials decide on a batch size's first 8 runs, shape_trials.h),
// then repeatedly until `budget` seconds or 15 runs; the median is reported. Output: one table row per configuration, `|` separated.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/common/flags.h"
#include "bench/common/main.h"
#include "core/common/log.h"
#include "core/common/thread_pool.h"
#include "core/gpu/device_set.h"
#include "core/io/csv.h"
#include "core/model/loader.h"
#include "core/predict/cpu/cpu_infer.h"
#include "core/predict/predict.h"
#include "core/predict/tahoe/tahoe_engine.h"
#include "core/predict/tahoe/tahoe_forest.h"

#if defined(GROVE_HAVE_CUDA)
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#endif

namespace grove {
namespace {

struct Flags {
  std::string model, rows, mode = "all", cache = "/tmp/grove-tahoe-cache", name;
  std::vector<int64_t> batches = {100, 1000, 10000, 100000, 1000000};
  double budget = 0.1;
  int threads = 0;
  std::string strategy;  // kernel mode
  // Splitting shared forest: tree per lane (TahoeEngineOptions::lanes) auto, 1 = on, 2 = on with the
  // paired layout, 0 = off.
  TahoeEngineOptions::Lanes lanes = TahoeEngineOptions::Lanes::kAuto;
  int block_rows = 0;  // cpu mode: the CPU engine's rows per block (0: its default)
  cpu::CpuForestOptions::Walk walk = cpu::CpuForestOptions::Walk::kAuto;  // cpu mode
  // Row chunk's level layout (TahoeEngineOptions::level_walk): auto, 1 = on, 0 = off.
  TahoeEngineOptions::LevelWalk level_walk = TahoeEngineOptions::LevelWalk::kAuto;
  // Row chunk's record layout (TahoeEngineOptions::record_walk): auto, 1 = on, 0 = off; by
  // default the engine's default.
  TahoeEngineOptions::RecordWalk record_walk = TahoeEngineOptions{}.record_walk;
  // Row chunk's shape for every launch (a RowChunkShape label: "16", "4x2", "32@512"; empty: the
  // probe's). Kernel mode takes a comma-separated list and times each shape.
  std::string row_chunk;
  // How end-to-end (host-row) calls wait for the GPU (PredictEngineOptions::gpu_wait): "share",
  // groved's, or "poll", the CLI's and groveml's.
  GpuWait gpu_wait = GpuWait::kShareCore;
};

int g_warmup = 9;  // --warmup

double Seconds(const std::function<bool()>& fn, double budget, bool* ok) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  *ok = fn();
  const double first = std::chrono::duration<double>(clock::now() - t0).count();
  if (!*ok) return 0;
  if (first > budget) return first;  // slow configurations: the warm-up run is the measurement
  for (int i = 1; i < g_warmup && first * i < budget; ++i) {
    if (!fn()) {
      *ok = false;
      return 0;
    }
  }
  std::vector<double> t;
  double total = 0;
  while (t.size() < 15 && (total < budget || t.size() < 3)) {
    t0 = clock::now();
    if (!fn()) {
      *ok = false;
      return 0;
    }
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    t.push_back(s);
    total += s;
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::string Batch(int64_t n) {
  if (n >= 1000000 && n % 1000000 == 0) return std::to_string(n / 1000000) + "M";
  if (n >= 1000 && n % 1000 == 0) return std::to_string(n / 1000) + "K";
  return std::to_string(n);
}

std::vector<float> RepeatRows(const std::vector<float>& base, int64_t base_rows, int64_t cols,
                              int64_t n) {
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (int64_t r = 0; r < n; ++r) {
    std::copy_n(base.begin() + (r % base_rows) * cols, cols, x.begin() + r * cols);
  }
  return x;
}

int CpuOnly(const Flags& flags, const Forest& f, const std::vector<float>& base, int64_t base_rows,
            ThreadPool* pool) {
  PredictOptions o;
  const ForestPtr shared = std::make_shared<Forest>(f);
  cpu::CpuForestOptions co;
  co.block_rows = flags.block_rows;
  co.walk = flags.walk;
  absl::StatusOr<cpu::CpuForestPtr> layout = cpu::CpuForest::Build(shared, co);
  if (!layout.ok()) {
    std::fprintf(stderr, "CPU engine: %s\n", layout.status().ToString().c_str());
    return 1;
  }
  std::printf("# %s %s, %d threads\n", flags.name.c_str(), (*layout)->Describe().c_str(),
              pool->num_threads());
  if (flags.mode != "row") std::printf("model | batch | strategy | e2e_ms | e2e_Mrows_s\n");
  for (int64_t n : flags.batches) {
    if (flags.mode == "row") break;
    const std::vector<float> x = RepeatRows(base, base_rows, f.num_features, n);
    const int64_t w = PredictWidth(f, o);
    std::vector<float> out(n * w);
    const RowsView rows = MakeRowsView(x.data(), n, f.num_features);
    const MatrixView<float> results = MakeMatrixView(out.data(), n, w);
    // cpu: the engine every CPU path runs; cpu_reference: the exactness oracle (slow beyond 100K).
    const std::pair<const char*, std::function<bool()>> runs[] = {
        {"cpu", [&] { return cpu::Predict(**layout, rows, o, results, pool).ok(); }},
        {"cpu_reference", [&] { return PredictCpu(f, rows, o, results, pool).ok(); }}};
    for (const auto& [name, run] : runs) {
      if (std::string(name) == "cpu_reference" && (n > 100000 || flags.mode == "engine")) {
        continue;
      }
      bool ok = false;
      const double t = Seconds(run, flags.budget, &ok);
      std::printf("%s | %s | %s | %.4f | %.3f\n", flags.name.c_str(), Batch(n).c_str(), name,
                  t * 1e3, n / t / 1e6);
    }
  }
  if (flags.mode == "engine") return 0;
  // One row at a time on this thread (cpu::PredictRow, what an embedding caller runs): latency
  // percentiles over 100,000 calls cycling through the rows, after 10,000 unmeasured ones.
  constexpr int kCalls = 100000;
  std::vector<double> us(kCalls);
  std::vector<float> out(PredictWidth(f, o));
  int64_t r = 0;
  for (int i = -10000; i < kCalls; ++i) {
    const float* row = base.data() + (r++ % base_rows) * f.num_features;
    const auto t0 = std::chrono::steady_clock::now();
    const absl::Status s = cpu::PredictRow(**layout, row, o, out.data());
    const auto t1 = std::chrono::steady_clock::now();
    if (!s.ok()) {
      std::fprintf(stderr, "PredictRow: %s\n", s.ToString().c_str());
      return 1;
    }
    if (i >= 0) us[i] = std::chrono::duration<double, std::micro>(t1 - t0).count();
  }
  std::sort(us.begin(), us.end());
  std::printf("model | single_row | p50_us | p99_us | p999_us | max_us\n");
  std::printf("%s | PredictRow | %.2f | %.2f | %.2f | %.2f\n", flags.name.c_str(), us[kCalls / 2],
              us[kCalls * 99 / 100], us[kCalls * 999 / 1000], us.back());
  return 0;
}

#if defined(GROVE_HAVE_CUDA)

// Every GPU strategy, from the one name table (index 0 is the CPU).
std::vector<std::string> GpuStrategyNames() {
  std::vector<std::string> s;
  for (int i = 1; i < kNumStrategies; ++i) s.push_back(StrategyName(i));
  return s;
}

struct DeviceRows {
  float* d_rows = nullptr;
  float* d_out = nullptr;
  ~DeviceRows() {
    cudaFree(d_rows);
    cudaFree(d_out);
  }
  // Room for `rows` x `width` outputs and `all` (rows x features) copied in.
  bool Fill(const std::vector<float>& all, int64_t rows, int64_t width) {
    return cudaMalloc(reinterpret_cast<void**>(&d_rows), all.size() * 4) == cudaSuccess &&
           cudaMalloc(reinterpret_cast<void**>(&d_out), rows * width * 4) == cudaSuccess &&
           cudaMemcpy(d_rows, all.data(), all.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess;
  }
};

// The engine a run measures (null after printing why when it cannot be made).
std::unique_ptr<TahoeEngine> MakeEngine(const Flags& flags, const ForestPtr& forest, ThreadPool* pool,
                                        const TahoeFormatOptions& format = {}) {
  TahoeEngineOptions eo;
  eo.engine.calibration_cache_dir = flags.cache;
  eo.engine.gpu_wait = flags.gpu_wait;
  eo.format = format;
  eo.lanes = flags.lanes;
  eo.level_walk = flags.level_walk;
  eo.record_walk = flags.record_walk;
  if (!flags.row_chunk.empty()) eo.row_chunk = RowChunkShape::FromLabel(flags.row_chunk).Code();
  // A forced strategy and shape leave the load-time probes nothing to choose.
  eo.probe = flags.row_chunk.empty() || flags.strategy != StrategyName(StrategyId::kRowChunk);
  absl::StatusOr<std::unique_ptr<TahoeEngine>> engine = TahoeEngine::Create(forest, eo, pool);
  if (!engine.ok()) {
    std::fprintf(stderr, "engine: %s\n", engine.status().ToString().c_str());
    return nullptr;
  }
  return *std::move(engine);
}

double PredictedSeconds(const StrategyChoice& c, const std::string& name) {
  for (const StrategyCost& s : c.costs) {
    if (s.name() == name) return s.feasible ? s.seconds : -1;
  }
  return -1;
}

struct Tally {
  int total = 0, right = 0;
  double worst = 1, sum_off = 0;
  void Add(double chosen, double best) {
    ++total;
    const double r = chosen / best;
    if (r <= 1.0 + 1e-9) {
      ++right;
    } else {
      worst = std::max(worst, r);
      sum_off += r;
    }
  }
  void Print(const char* what) const {
    const int wrong = total - right;
    std::printf("SELECTOR %s: chose the measured best in %d of %d batches; when not, %.2fx slower "
                "on average (worst %.2fx)\n",
                what, right, total, wrong ? sum_off / wrong : 1.0, worst);
  }
};

int Study(const Flags& flags, const ForestPtr& forest, const std::vector<float>& base,
          int64_t base_rows, ThreadPool* pool, const TahoeFormatOptions& format, bool e2e,
          const std::vector<int64_t>& batches, const char* tag) {
  const Forest& f = *forest;
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<TahoeEngine> engine = MakeEngine(flags, forest, pool, format);
  if (engine == nullptr) return 1;
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const TahoeEngine& e = *engine;
  const GpuHardwareParams& hw = e.hardware();
  const TahoeFormatStats& st = e.format().stats();
  std::printf("# %s [%s] %s\n# engine load %.1f ms; device %s; %d GPU(s)\n", flags.name.c_str(), tag,
              e.Describe().c_str(), load_s * 1e3, hw.device_name.c_str(), e.num_gpus());
  PredictOptions o;  // transformed prediction, all rounds
  const int64_t F = f.num_features, W = PredictWidth(f, o);
  const int64_t max_n = *std::max_element(batches.begin(), batches.end());
  const std::vector<float> all = RepeatRows(base, base_rows, F, max_n);
  DeviceRows dev;
  if (!dev.Fill(all, max_n, W)) {
    std::fprintf(stderr, "device buffers: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  std::vector<float> out(max_n * W);
  // Floor per row: a row read once and its output written once through device memory; node visits
  // at the calibrated shared-memory read bandwidth.
  const double bytes_row = 4.0 * (F + W);
  const double visits = st.expected_visits_per_row;
  std::printf("# floor per row: %.0f B device memory, %.1f node visits (%.0f B of nodes); "
              "BW gmem %.0f GB/s, smem(random) %.0f GB/s\n",
              bytes_row, visits, visits * st.node_bytes, hw.gmem_coalesced_bw / 1e9,
              hw.smem_read_bw / 1e9);
  // The host path's floor (compare_table.py's link column): rows in at the pinned host-to-device
  // rate, outputs out at the device-to-host rate, the two directions overlapping.
  std::printf("LINK | in_bytes_per_row %.0f | out_bytes_per_row %.0f | h2d_GBps %.1f | d2h_GBps %.1f\n",
              4.0 * F, 4.0 * W, hw.h2d_bw / 1e9, hw.d2h_bw / 1e9);
  std::printf("model | variant | batch | strategy | engine_ms | engine_Mrows_s | pred_engine_ms | "
              "e2e_ms | e2e_Mrows_s | pred_e2e_ms\n");
  Tally engine_tally, e2e_tally;
  std::map<std::string, double> last_engine, last_e2e;  // skip configurations that would take long
  for (int64_t n : batches) {
    absl::StatusOr<StrategyChoice> plan_dev = e.Plan(n, o, true, "");
    absl::StatusOr<StrategyChoice> plan_host = e.Plan(n, o, false, "");
    std::map<std::string, double> eng, end;
    std::vector<std::string> names = GpuStrategyNames();
    names.push_back("cpu");
    names.push_back("auto");
    for (const std::string& s : names) {
      double te = -1, th = -1;
      RunInfo info_dev, info_host;
      bool ok = false;
      const double scale = static_cast<double>(n) / std::max<int64_t>(1, n / 10);
      if (s != "cpu" && !(last_engine.count(s) && last_engine[s] * scale > 3.0)) {
        te = Seconds(
            [&] {
              return e.PredictDevice(0, dev.d_rows, n, F, o, dev.d_out, W, s == "auto" ? "" : s,
                                     &info_dev)
                  .ok();
            },
            flags.budget, &ok);
        if (!ok) te = -1;
        if (te > 0) last_engine[s] = te;
      }
      const double limit = s == "cpu" ? 0.5 : 3.0;  // seconds a run may be predicted to take
      const bool e2e_this = e2e && (flags.mode != "compare" || s == "auto");
      if (e2e_this && !(last_e2e.count(s) && last_e2e[s] * scale > limit)) {
        th = Seconds(
            [&] {
              return e.PredictHost(MakeRowsView(all.data(), n, F), o,
                                   MakeMatrixView(out.data(), n, W), s == "auto" ? "" : s,
                                   &info_host)
                  .ok();
            },
            flags.budget, &ok);
        if (!ok) th = -1;
        if (th > 0) last_e2e[s] = th;
      }
      if (te > 0) eng[s] = te;
      if (th > 0) end[s] = th;
      const double pe = plan_dev.ok() && s != "auto" ? PredictedSeconds(*plan_dev, s) : -1;
      const double ph = plan_host.ok() && s != "auto" ? PredictedSeconds(*plan_host, s) : -1;
      std::string label = s;
      if (s == "auto") {
        label = "auto(" + (te > 0 ? info_dev.strategy : std::string("-")) + "/" +
                (th > 0 ? info_host.strategy : std::string("-")) + ")";
      }
      std::printf("%s | %s | %s | %s | %.4f | %.2f | %.4f | %.4f | %.2f | %.4f\n", flags.name.c_str(),
                  tag, Batch(n).c_str(), label.c_str(), te * 1e3, te > 0 ? n / te / 1e6 : 0,
                  pe * 1e3, th * 1e3, th > 0 ? n / th / 1e6 : 0, ph * 1e3);
      if (s == "auto" && te > 0) std::printf("# auto at %s: %s\n", Batch(n).c_str(), info_dev.reason.c_str());
    }
    // Selector vs measured best.
    auto judge = [&](const absl::StatusOr<StrategyChoice>& plan, const std::map<std::string, double>& m,
                     Tally& tally, const char* what) {
      if (!plan.ok() || m.empty()) return;
      std::string best;
      for (const auto& [k, v] : m) {
        if (k == "auto") continue;
        if (best.empty() || v < m.at(best)) best = k;
      }
      const std::string chose = StrategyName(plan->strategy);
      if (best.empty() || !m.count(chose)) return;
      tally.Add(m.at(chose), m.at(best));
      std::printf("CHOICE %s | %s | %s | chose %s (%.4f ms) | best %s (%.4f ms) | %.2fx\n",
                  flags.name.c_str(), Batch(n).c_str(), what, chose.c_str(), m.at(chose) * 1e3,
                  best.c_str(), m.at(best) * 1e3, m.at(chose) / m.at(best));
    };
    judge(plan_dev, eng, engine_tally, "engine");
    if (e2e) judge(plan_host, end, e2e_tally, "e2e");
    if (eng.count("auto")) {
      const double t = eng["auto"];
      const double floor = std::max(n * bytes_row / hw.gmem_coalesced_bw,
                                    n * visits * st.node_bytes / hw.smem_read_bw);
      std::printf("FLOOR %s | %s | selector %.4f ms | floor %.4f ms | %.1fx floor\n",
                  flags.name.c_str(), Batch(n).c_str(), t * 1e3, floor * 1e3, t / floor);
    }
  }
  engine_tally.Print((flags.name + " engine").c_str());
  if (e2e) e2e_tally.Print((flags.name + " e2e").c_str());
  std::fflush(stdout);
  return 0;
}

int KernelOnly(const Flags& flags, const ForestPtr& forest, const std::vector<float>& base,
               int64_t base_rows, ThreadPool* pool) {
  if (flags.row_chunk.find(',') != std::string::npos) {  // a list of shapes: one engine each
    for (absl::string_view label : absl::StrSplit(flags.row_chunk, ',')) {
      Flags one = flags;
      one.row_chunk = std::string(label);
      if (const int rc = KernelOnly(one, forest, base, base_rows, pool); rc != 0) return rc;
    }
    return 0;
  }
  const Forest& f = *forest;
  std::unique_ptr<TahoeEngine> engine = MakeEngine(flags, forest, pool);
  if (engine == nullptr) return 1;
  const TahoeEngine& e = *engine;
  std::printf("# %s %s\n", flags.name.c_str(), e.Describe().c_str());
  PredictOptions o;
  const int64_t F = f.num_features, W = PredictWidth(f, o);
  const int64_t max_n = *std::max_element(flags.batches.begin(), flags.batches.end());
  DeviceRows dev;
  if (!dev.Fill(RepeatRows(base, base_rows, F, max_n), max_n, W)) {
    std::fprintf(stderr, "device buffers: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  std::printf("model | batch | strategy | engine_ms | engine_Mrows_s\n");
  for (int64_t n : flags.batches) {
    RunInfo info;
    auto run = [&] {
      return e.PredictDevice(0, dev.d_rows, n, F, o, dev.d_out, W, flags.strategy, &info).ok();
    };
    if (!run()) {  // warm-up outside the profiled range
      std::fprintf(stderr, "strategy %s failed at %lld rows\n", flags.strategy.c_str(),
                   static_cast<long long>(n));
      return 1;
    }
    cudaProfilerStart();
    bool ok = false;
    const double t = Seconds(run, flags.budget, &ok);
    cudaProfilerStop();
    std::string shape = info.strategy;
    if (absl::StatusOr<StrategyChoice> plan = e.Plan(n, o, true, flags.strategy);
        plan.ok() && plan->strategy == StrategyId::kRowChunk) {
      shape += " " + RowChunkShape::FromCode(plan->groups).Label();
    }
    std::printf("%s | %s | %s | %.4f | %.2f\n", flags.name.c_str(), Batch(n).c_str(),
                shape.c_str(), t * 1e3, n / t / 1e6);
  }
  return 0;
}

#endif  // GROVE_HAVE_CUDA

int Main(int argc, char** argv) {
  Flags flags;
  bench::FlagSet set;
  bench::AddModelRowsFlags(&set, &flags.model, &flags.rows, &flags.name);
  set.String("--mode", &flags.mode);
  set.String("--cache", &flags.cache);
  set.Double("--budget", &flags.budget);
  set.Int("--block-rows", &flags.block_rows);
  set.Custom("--walk", [&](const std::string& v) {
    absl::StatusOr<cpu::CpuForestOptions::Walk> walk = cpu::ParseWalk(v);
    if (!walk.ok()) {
      std::fprintf(stderr, "%s\n", std::string(walk.status().message()).c_str());
      return false;
    }
    flags.walk = *walk;
    return true;
  });
  set.Int("--warmup", &g_warmup);
  // Unknown values are refused, not read as auto (a typo would measure the default).
  set.Custom("--lanes", [&](const std::string& v) {
    if (v != "0" && v != "1" && v != "2" && v != "auto") return false;
    flags.lanes = v == "0"   ? TahoeEngineOptions::Lanes::kOff
                  : v == "1" ? TahoeEngineOptions::Lanes::kOn
                  : v == "2" ? TahoeEngineOptions::Lanes::kOnPaired
                             : TahoeEngineOptions::Lanes::kAuto;
    return true;
  });
  set.Custom("--level-walk", [&](const std::string& v) {
    if (v != "0" && v != "1" && v != "auto") return false;
    flags.level_walk = v == "0"   ? TahoeEngineOptions::LevelWalk::kOff
                       : v == "1" ? TahoeEngineOptions::LevelWalk::kOn
                                  : TahoeEngineOptions::LevelWalk::kAuto;
    return true;
  });
  set.Custom("--record-walk", [&](const std::string& v) {
    if (v != "0" && v != "1" && v != "auto") return false;
    flags.record_walk = v == "0"   ? TahoeEngineOptions::RecordWalk::kOff
                        : v == "1" ? TahoeEngineOptions::RecordWalk::kOn
                                   : TahoeEngineOptions::RecordWalk::kAuto;
    return true;
  });
  set.Custom("--gpu-wait", [&](const std::string& v) {
    if (v != "share" && v != "poll") return false;
    flags.gpu_wait = v == "poll" ? GpuWait::kPoll : GpuWait::kShareCore;
    return true;
  });
  set.String("--row-chunk", &flags.row_chunk);
  set.String("--strategy", &flags.strategy);
  set.Int("--threads", &flags.threads);
  set.Custom("--batches", [&](const std::string& v) {
    flags.batches.clear();
    for (absl::string_view s : absl::StrSplit(v, ',')) {
      int64_t n = 0;
      if (absl::SimpleAtoi(s, &n) && n > 0) flags.batches.push_back(n);
    }
    return true;
  });
  if (!set.Parse(argc, argv)) return 2;
  g_warmup = std::max(1, g_warmup);
  if (flags.model.empty() || flags.rows.empty() || flags.batches.empty()) {
    std::fprintf(stderr,
                 "usage: grove_predict_bench --model M --rows R.csv "
                 "[--mode all|study|compare|ablation|cpu|engine|row|kernel] "
                 "[--strategy s] [--row-chunk 16|4x2|32@512|16@1024/4[,...]] [--batches 100,1000] [--budget s] [--warmup n] [--cache dir] "
                 "[--threads n] [--name label] [--lanes 0|1|2|auto] [--level-walk 0|1|auto] "
                 "[--record-walk 0|1|auto] "
                 "[--gpu-wait share|poll] [--block-rows n] "
                 "[--walk auto|scalar|simd|dense|bitvector|dense_avx2]\n");
    return 2;
  }
  SetMinLogSeverity(LogSeverity::kWarning);
  if (flags.name.empty()) flags.name = flags.model.substr(flags.model.rfind('/') + 1);
  absl::StatusOr<ForestPtr> forest = LoadModelFile(flags.model);
  if (!forest.ok()) {
    std::fprintf(stderr, "model: %s\n", forest.status().ToString().c_str());
    return 1;
  }
  const Forest& f = **forest;
  absl::StatusOr<CsvMatrix<float>> csv = ReadCsvFloats(flags.rows);
  if (!csv.ok()) {
    std::fprintf(stderr, "rows: %s\n", csv.status().ToString().c_str());
    return 1;
  }
  if (csv->cols != f.num_features && csv->cols != f.num_features + 1) {
    std::fprintf(stderr, "rows have %lld columns; the model has %d features\n",
                 static_cast<long long>(csv->cols), f.num_features);
    return 1;
  }
  const int64_t base_rows = std::min<int64_t>(csv->rows, 10000);
  std::vector<float> base(base_rows * f.num_features);
  for (int64_t r = 0; r < base_rows; ++r) {
    std::copy_n(csv->values.begin() + r * csv->cols, f.num_features, base.begin() + r * f.num_features);
  }
  ThreadPool pool(flags.threads);
  if (flags.mode == "cpu" || flags.mode == "engine" || flags.mode == "row") {
    return CpuOnly(flags, f, base, base_rows, &pool);
  }
#if defined(GROVE_HAVE_CUDA)
  if (gpu::VisibleGpuCount() == 0) {
    std::fprintf(stderr, "no GPU: CPU reference only\n");
    return CpuOnly(flags, f, base, base_rows, &pool);
  }
  if (flags.mode == "kernel") return KernelOnly(flags, *forest, base, base_rows, &pool);
  int rc = 0;
  if (flags.mode == "all" || flags.mode == "study" || flags.mode == "compare") {
    rc |= Study(flags, *forest, base, base_rows, &pool, {}, true, flags.batches, "tahoe");
  }
  if (flags.mode == "all" || flags.mode == "ablation") {
    const std::vector<int64_t> largest = {
        *std::max_element(flags.batches.begin(), flags.batches.end())};
    for (int v = 1; v < 4; ++v) {
      TahoeFormatOptions fo;
      fo.node_rearrangement = !(v & 1);
      fo.tree_rearrangement = !(v & 2);
      const char* tag = v == 1 ? "no-node-rearr" : v == 2 ? "no-tree-rearr" : "no-rearr";
      rc |= Study(flags, *forest, base, base_rows, &pool, fo, false, largest, tag);
    }
  }
  return rc;
#else
  std::fprintf(stderr, "built without CUDA: CPU reference only\n");
  return CpuOnly(flags, f, base, base_rows, &pool);
#endif
}

}  // namespace
}  // namespace grove

int main(int argc, char** argv) { return grove::bench::RunMain(argc, argv, &grove::Main); }
