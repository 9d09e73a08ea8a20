// Explanation throughput (SHAP values and interaction values) for one model, GPU and CPU.
//
//   grove_explain_bench --model M.ubj --rows R.csv [--name LABEL] [--shap-rows 10000]
//                       [--interaction-rows 200] [--reps 5] [--cpu-budget 1.0]
//                       [--precision both|double|float] [--threads N]
//                       [--cpu all|engine|saabas]
//
// Rows: the CSV's rows (a trailing label column, when there is one more column than the model has
// features, is dropped); the first --shap-rows for SHAP values, the first --interaction-rows for
// interactions (the GPUTreeShap paper's Tables 6 and 7 use 10,000 and 200).
//
// GPU (when built with CUDA and a device is visible), per path precision:
//   engine: TreeShapGpu::ExplainOnDevice, rows already on the GPU, results left there (layout
//           cached): the whole device computation (zeroing, TreeSHAP kernel, conversion);
//   h2d / d2h: the copies of those rows and results alone, from / to pinned memory;
//   e2e: TreeShapGpu::Explain, host rows in, host results out (pageable user buffers).
// CPU: ExplainPathsCpu (the same path algorithm in double), ExplainCpuReference and the CPU
// explanation engine (cpu-engine: ExplainEngine without GPUs, strategy "cpu", what
// `grove explain --no-gpu` runs; the strategy it picked is in the note) on as many rows as fit in
// --cpu-budget seconds (estimated from one row; the engine from 16, since its quadrature kernel
// runs rows in blocks of 8), all threads. Saabas attributions (SaabasEngine, what the operation
// `saabas` runs): the first --shap-rows rows on the pool, the median of --reps runs after one
// warm-up; --cpu saabas runs them alone.
// Floor: per row, the path arithmetic (about 10 L^2 flops per path of L elements for SHAP values,
// 10 L^3 for interactions) at the FP64 / FP32 rate, and the bytes every row must move (row in,
// results out in float32) at the measured device-to-device copy bandwidth; the larger is the floor.
// Timing: one warm-up run, then the median of --reps runs; device work timed with CUDA events.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "bench/common/flags.h"
#include "bench/common/main.h"
#include "bench/common/rows.h"
#include "bench/common/stats.h"
#include "core/common/run_info.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/explain_engine.h"
#include "core/explain/treeshap/explain_paths_cpu.h"
#include "core/explain/path_layout_gpu.h"
#include "core/explain/paths.h"
#include "core/explain/saabas/saabas.h"
#include "core/explain/treeshap/treeshap_gpu.h"
#include "core/gpu/device_set.h"

#if defined(GROVE_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace grove {
namespace {

struct Flags {
  std::string model, rows, name, precision = "both";
  int64_t shap_rows = 10000, interaction_rows = 200;
  int reps = 5;
  double cpu_budget = 1.0;
  int threads = 0;
  bool engine_only = false;  // --cpu engine: the CPU engine alone (no paths, no reference)
  bool saabas_only = false;  // --cpu saabas: Saabas attributions alone
};

using bench::Median;
using bench::Now;
using bench::TimeMedian;

void Row(const std::string& name, const char* kind, const char* where, const char* what,
         int64_t rows, double seconds, const std::string& note = "") {
  std::printf("| %s | %s | %s | %s | %lld | %.4f ms | %.4g rows/s | %s |\n", name.c_str(), kind,
              where, what, static_cast<long long>(rows), seconds * 1e3,
              seconds > 0 ? rows / seconds : 0.0, note.c_str());
  std::fflush(stdout);
}

// Path arithmetic per row: ~10 L^2 (SHAP) or ~10 L^3 (interactions) operations per path.
double FlopsPerRow(const PathLayout& l, bool interactions) {
  double f = 0;
  for (const PathInfo& p : l.paths) {
    const double L = p.length;
    f += interactions ? 10.0 * L * L * L : 10.0 * L * L;
  }
  return f;
}

#if defined(GROVE_HAVE_CUDA)
#define CHECK_CUDA(expr)                                                                 \
  do {                                                                                   \
    cudaError_t e = (expr);                                                              \
    if (e != cudaSuccess) {                                                              \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, \
                   __LINE__);                                                            \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

// Device-to-device copy bandwidth (bytes read + written per second).
double MeasureBandwidth() {
  const size_t bytes = size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  CHECK_CUDA(cudaMalloc(&a, bytes));
  CHECK_CUDA(cudaMalloc(&b, bytes));
  CHECK_CUDA(cudaMemset(a, 1, bytes));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  std::vector<double> t;
  for (int i = 0; i < 6; ++i) {
    CHECK_CUDA(cudaEventRecord(e0));
    CHECK_CUDA(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    CHECK_CUDA(cudaEventRecord(e1));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    if (i > 0) t.push_back(ms * 1e-3);
  }
  cudaFree(a);
  cudaFree(b);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return 2.0 * bytes / Median(t);
}

void BenchGpu(const Flags& flags, const PathLayoutPtr& layout, const Forest& forest,
              const std::vector<float>& all_rows, double bandwidth, ThreadPool* pool) {
  const int F = forest.num_features;
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  // H100 SXM datasheet rates (non-tensor): FP64 34 TFLOP/s, FP32 67 TFLOP/s.
  const double fp64 = 34e12, fp32 = 67e12;
  std::vector<bool> precisions;
  if (flags.precision != "float") precisions.push_back(true);
  if (flags.precision != "double") precisions.push_back(false);
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  auto event_time = [&](int reps, const std::function<void()>& fn) {
    fn();
    CHECK_CUDA(cudaStreamSynchronize(stream));
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      CHECK_CUDA(cudaEventRecord(e0, stream));
      fn();
      CHECK_CUDA(cudaEventRecord(e1, stream));
      CHECK_CUDA(cudaEventSynchronize(e1));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      t.push_back(ms * 1e-3);
    }
    return Median(t);
  };
  for (bool dbl : precisions) {
    TreeShapGpuOptions o;
    o.precision = dbl ? TreeShapPrecision::kDouble : TreeShapPrecision::kFloat;
    o.host_pool = pool;  // as ExplainEngine sets it
    absl::StatusOr<std::unique_ptr<TreeShapGpu>> gpu = TreeShapGpu::Create(layout, o);
    if (!gpu.ok()) {
      std::printf("GPU unavailable: %s\n", std::string(gpu.status().message()).c_str());
      return;
    }
    const char* where = dbl ? "gpu-double" : "gpu-float";
    for (bool inter : {false, true}) {
      const int64_t n = std::min<int64_t>(inter ? flags.interaction_rows : flags.shap_rows,
                                          static_cast<int64_t>(all_rows.size()) / F);
      const int64_t width = ExplainWidth(forest, inter);
      const char* kind = inter ? "interactions" : "shap";
      float *d_rows = nullptr, *d_out = nullptr, *h_rows = nullptr, *h_out = nullptr;
      CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&d_rows), n * F * sizeof(float)));
      CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&d_out), n * width * sizeof(float)));
      CHECK_CUDA(cudaMallocHost(reinterpret_cast<void**>(&h_rows), n * F * sizeof(float)));
      CHECK_CUDA(cudaMallocHost(reinterpret_cast<void**>(&h_out), n * width * sizeof(float)));
      std::memcpy(h_rows, all_rows.data(), n * F * sizeof(float));
      CHECK_CUDA(cudaMemcpy(d_rows, h_rows, n * F * sizeof(float), cudaMemcpyHostToDevice));
      bool ok = true;
      const double engine = event_time(flags.reps, [&] {
        ok = ok && (*gpu)->ExplainOnDevice(0, d_rows, n, inter, d_out, stream).ok();
      });
      if (!ok) std::printf("ExplainOnDevice failed\n");
      const double h2d = event_time(flags.reps, [&] {
        CHECK_CUDA(cudaMemcpyAsync(d_rows, h_rows, n * F * sizeof(float), cudaMemcpyHostToDevice,
                                   stream));
      });
      const double d2h = event_time(flags.reps, [&] {
        CHECK_CUDA(cudaMemcpyAsync(h_out, d_out, n * width * sizeof(float),
                                   cudaMemcpyDeviceToHost, stream));
      });
      if (dbl && width <= 512) {
        // Ablation: every lane adds to global memory (no shared-memory accumulation).
        TreeShapGpuOptions no_shared = o;
        no_shared.shared_accumulation = false;
        absl::StatusOr<std::unique_ptr<TreeShapGpu>> g2 = TreeShapGpu::Create(layout, no_shared);
        if (g2.ok()) {
          const double t = event_time(flags.reps, [&] {
            ok = ok && (*g2)->ExplainOnDevice(0, d_rows, n, inter, d_out, stream).ok();
          });
          Row(flags.name, kind, where, "engine-noshared", n, t, "ablation: global atomics only");
        }
      }
      std::vector<float> out(n * width);
      const double e2e = TimeMedian(flags.reps, [&] {
        ok = ok && (*gpu)
                       ->Explain(MakeRowsView(all_rows.data(), n, F), inter,
                                 MakeMatrixView(out.data(), n, width), nullptr)
                       .ok();
      });
      const double flops = FlopsPerRow(*layout, inter) * n;
      const double bytes = n * (F + width) * 4.0;
      const double floor_compute = flops / (dbl ? fp64 : fp32);
      const double floor_bytes = bytes / bandwidth;
      Row(flags.name, kind, where, "engine", n, engine,
          absl::StrFormat("floor %.4f ms (arith %.4f ms, bytes %.4f ms); %.1f%% of floor",
                          1e3 * std::max(floor_compute, floor_bytes), 1e3 * floor_compute,
                          1e3 * floor_bytes,
                          100.0 * std::max(floor_compute, floor_bytes) / engine));
      Row(flags.name, kind, where, "h2d", n, h2d, absl::StrFormat("%.1f MB", n * F * 4e-6));
      Row(flags.name, kind, where, "d2h", n, d2h, absl::StrFormat("%.1f MB", n * width * 4e-6));
      Row(flags.name, kind, where, "e2e", n, e2e, "host rows in, host results out");
      // The same with the host copies on the calling thread only (before the pool did them).
      TreeShapGpuOptions one_thread = o;
      one_thread.host_pool = nullptr;
      absl::StatusOr<std::unique_ptr<TreeShapGpu>> g1 = TreeShapGpu::Create(layout, one_thread);
      if (g1.ok()) {
        const double t = TimeMedian(flags.reps, [&] {
          ok = ok && (*g1)
                         ->Explain(MakeRowsView(all_rows.data(), n, F), inter,
                                   MakeMatrixView(out.data(), n, width), nullptr)
                         .ok();
        });
        Row(flags.name, kind, where, "e2e-1thread", n, t, "host copies on the calling thread");
      }
      cudaFree(d_rows);
      cudaFree(d_out);
      cudaFreeHost(h_rows);
      cudaFreeHost(h_out);
    }
    std::printf("%s %s device bytes: %lld + %lld of the path layout's copies (%s)\n",
                flags.name.c_str(), where, static_cast<long long>((*gpu)->DeviceBytes()),
                static_cast<long long>(ResidentPathLayout::ResidentBytes(*(*gpu)->layout())),
                (*gpu)->Describe().c_str());
  }
  cudaStreamDestroy(stream);
}
#endif

void BenchCpu(const Flags& flags, const PathLayoutPtr& layout, const ForestPtr& forest_ptr,
              const std::vector<float>& all_rows, ThreadPool* pool) {
  const Forest& forest = *forest_ptr;
  const int F = forest.num_features;
  const int threads = pool->num_threads();
  double shap_one[3] = {0, 0, 0};
  ExplainEngineOptions engine_options;
  engine_options.use_gpu = false;
  engine_options.strategy = "cpu";
  absl::StatusOr<std::unique_ptr<ExplainEngine>> engine =
      ExplainEngine::Create(forest_ptr, engine_options, pool);
  if (!engine.ok()) {
    std::printf("CPU engine failed: %s\n", std::string(engine.status().message()).c_str());
  }
  const double mean_len =
      layout->paths.empty() ? 1.0 : static_cast<double>(layout->elements.size()) / layout->paths.size();
  for (bool inter : {false, true}) {
    const int64_t limit = std::min<int64_t>(inter ? flags.interaction_rows : flags.shap_rows,
                                            static_cast<int64_t>(all_rows.size()) / F);
    const int64_t width = ExplainWidth(forest, inter);
    const char* kind = inter ? "interactions" : "shap";
    ExplainOptions o;
    o.interactions = inter;
    for (int which = 0; which < 3; ++which) {
      if (which == 2 && !engine.ok()) continue;
      if (which != 2 && flags.engine_only) continue;
      const char* where = which == 0 ? "cpu-paths" : which == 1 ? "cpu-reference" : "cpu-engine";
      RunInfo info;
      // The engine runs on its own pool (`pool`) whatever `p` says.
      auto run = [&](int64_t n, ThreadPool* p) {
        std::vector<float> out(n * width);
        const double start = Now();
        const RowsView rows = MakeRowsView(all_rows.data(), n, F);
        const MatrixView<float> results = MakeMatrixView(out.data(), n, width);
        absl::Status s = which == 0   ? ExplainPathsCpu(*layout, rows, o, results, p)
                         : which == 1 ? ExplainCpuReference(forest, rows, o, results, p)
                                      : (*engine)->Explain(rows, o, results, &info);
        if (!s.ok()) std::printf("CPU explain failed: %s\n", std::string(s.message()).c_str());
        return Now() - start;
      };
      if (inter && shap_one[which] * mean_len > flags.cpu_budget * 4) {
        // Interactions cost about (mean path length) SHAP passes: skip what would blow the budget.
        Row(flags.name, kind, where, "skipped", 0, 0,
            absl::StrFormat("estimated %.3g s per row on 1 thread", shap_one[which] * mean_len));
        continue;
      }
      const int64_t probe = which == 2 ? std::min<int64_t>(16, limit) : 1;
      const double one = run(probe, nullptr) / probe;
      if (!inter) shap_one[which] = one;
      int64_t n = static_cast<int64_t>(flags.cpu_budget / std::max(one, 1e-9) * threads);
      n = std::clamp<int64_t>(n, 1, limit);
      if (one > flags.cpu_budget * 4) {
        Row(flags.name, kind, where, "1 row, 1 thread", 1, one, "over budget: not repeated");
        continue;
      }
      const double t = run(n, pool);
      Row(flags.name, kind, where, "e2e", n, t,
          which == 2 ? absl::StrFormat("%d pool threads + caller, %s", threads, info.strategy)
                     : absl::StrFormat("%d threads", threads));
    }
  }
}

// Saabas attributions of the first --shap-rows rows on `pool` (SaabasEngine, built once).
void BenchSaabas(const Flags& flags, const ForestPtr& forest, const std::vector<float>& all_rows,
                 ThreadPool* pool) {
  const int F = forest->num_features;
  const double build_start = Now();
  absl::StatusOr<std::unique_ptr<SaabasEngine>> engine = SaabasEngine::Create(forest, pool);
  const double build = Now() - build_start;
  if (!engine.ok()) {
    std::printf("Saabas engine failed: %s\n", std::string(engine.status().message()).c_str());
    return;
  }
  const int64_t n = std::min<int64_t>(flags.shap_rows, static_cast<int64_t>(all_rows.size()) / F);
  const int64_t width = ExplainWidth(*forest, false);
  std::vector<float> out(n * width);
  RunInfo info;
  const double t = TimeMedian(flags.reps, [&] {
    absl::Status s = (*engine)->Explain(MakeRowsView(all_rows.data(), n, F), ExplainOptions(),
                                        MakeMatrixView(out.data(), n, width), &info);
    if (!s.ok()) std::printf("Saabas failed: %s\n", std::string(s.message()).c_str());
  });
  Row(flags.name, "saabas", "cpu-saabas", "e2e", n, t,
      absl::StrFormat("%d pool threads + caller, %s; built in %.1f ms", pool->num_threads(),
                      info.strategy, build * 1e3));
}

int Main(int argc, char** argv) {
  Flags flags;
  bench::FlagSet set;
  bench::AddModelRowsFlags(&set, &flags.model, &flags.rows, &flags.name);
  set.String("--precision", &flags.precision);
  set.Int("--shap-rows", &flags.shap_rows);
  set.Int("--interaction-rows", &flags.interaction_rows);
  set.Int("--reps", &flags.reps);
  set.Double("--cpu-budget", &flags.cpu_budget);
  set.Custom("--cpu", [&](const std::string& v) {
    flags.engine_only = v == "engine";
    flags.saabas_only = v == "saabas";
    return true;
  });
  set.Int("--threads", &flags.threads);
  if (!set.Parse(argc, argv)) return 2;
  bench::ModelAndRows input;
  if (int status = bench::StartModelRows(
          flags.model, flags.rows, &flags.name,
          "usage: grove_explain_bench --model M --rows R.csv [flags]", &input);
      status != 0) {
    return status;
  }
  const Forest& f = *input.forest;
  std::vector<float> rows = std::move(input.rows);
  const int64_t max_rows = std::max(flags.shap_rows, flags.interaction_rows);
  const int64_t n = std::min<int64_t>(rows.size() / std::max(f.num_features, 1), max_rows);
  rows.resize(n * f.num_features);
  const double layout_start = Now();
  absl::StatusOr<PathLayoutPtr> layout = BuildPathLayout(f);
  if (!layout.ok()) {
    std::fprintf(stderr, "%s\n", std::string(layout.status().message()).c_str());
    return 1;
  }
  std::printf("== %s: %zu trees, %d features, %d outputs; layout built in %.1f ms\n%s\n",
              flags.name.c_str(), f.trees.size(), f.num_features, f.num_outputs,
              1e3 * (Now() - layout_start), (*layout)->stats.Describe().c_str());
  std::printf("| model | values | where | what | rows | median | rows/s | note |\n");
  ThreadPool pool(flags.threads);
  if (flags.saabas_only) {
    BenchSaabas(flags, input.forest, rows, &pool);
    return 0;
  }
#if defined(GROVE_HAVE_CUDA)
  if (gpu::VisibleGpuCount() > 0) {
    static double bandwidth = 0;
    if (bandwidth == 0) bandwidth = MeasureBandwidth();
    std::printf("device-to-device copy bandwidth: %.0f GB/s\n", bandwidth / 1e9);
    BenchGpu(flags, *layout, f, rows, bandwidth, &pool);
  } else {
    std::printf("no GPU visible\n");
  }
#endif
  BenchCpu(flags, *layout, input.forest, rows, &pool);
  BenchSaabas(flags, input.forest, rows, &pool);
  return 0;
}

}  // namespace
}  // namespace grove

int main(int argc, char** argv) { return grove::bench::RunMain(argc, argv, &grove::Main); }
