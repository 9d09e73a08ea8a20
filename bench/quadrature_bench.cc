// Quadrature SHAP vs warp-level TreeShap on the GPU, and the explanation strategy selector, for one
// model.
//
//   grove_quadrature_bench --model M.ubj --rows R.csv [--name LABEL] [--shap-rows 10000]
//                          [--interaction-rows 200] [--reps 5] [--engine]
//
// Rows: the CSV's rows (a trailing label column is dropped when the CSV has one more column than
// the model has features); the first --shap-rows for SHAP values, the first --interaction-rows for
// interactions (the GPUTreeShap paper's Tables 6 and 7: 10,000 and 200).
//
// Per strategy (quadrature_gpu double / float, treeshap_gpu double):
//   engine: rows already on the GPU, results left there, model layout resident (CUDA events);
//   e2e:    host rows in, host results out (QuadratureGpuExplainer / TreeShapGpu::Explain).
// Selector: each strategy's cost is calibrated at load on the running device (two batch sizes,
// host to host, on synthetic rows drawn around the model's thresholds), the pick is the smallest
// estimate for the batch; the table says whether the pick is the measured best (e2e) or within 5%.
// Load: path layout, quadrature preprocessing, upload and calibration seconds.
// Timing: one warm-up, then the median of --reps runs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
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
#include "core/explain/paths.h"
#include "core/explain/quadrature/quadrature.h"
#include "core/explain/treeshap/treeshap_gpu.h"
#include "core/gpu/device_set.h"

#if defined(GROVE_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace grove {
namespace {

struct Flags {
  std::string model, rows, name;
  int64_t shap_rows = 10000, interaction_rows = 200;
  int reps = 5;
  bool engine = false;  // also build ExplainEngine ("auto") and report its pick
};

using bench::Median;
using bench::Now;
using bench::TimeMedian;

#if defined(GROVE_HAVE_CUDA)

#define BENCH_CUDA(expr)                                                             \
  do {                                                                               \
    cudaError_t _e = (expr);                                                         \
    if (_e != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s: %s\n", #expr, cudaGetErrorString(_e));               \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

// Two-point cost model (fixed + per row) of a host-to-host explain function, as the quadrature
// strategy calibrates itself: on synthetic rows, never the benchmark rows.
struct Cost {
  double fixed = 0, per_row = 0;
  double Seconds(int64_t rows) const { return fixed + per_row * rows; }
};

Cost Calibrate(const Forest& forest, bool interactions,
               const std::function<bool(RowsView, MatrixView<float>)>& run) {
  const int64_t width = ExplainWidth(forest, interactions);
  int64_t large = interactions ? 64 : 2048;
  large = std::max<int64_t>(2, std::min<int64_t>(large, (int64_t{256} << 20) / (4 * width)));
  const int64_t small = std::max<int64_t>(1, large / 16);
  std::vector<float> x = QuadratureCalibrationRows(forest, large, 11);
  std::vector<float> out(large * width);
  auto go = [&](int64_t n) {
    return run(MakeRowsView(x.data(), n, forest.num_features),
               MakeMatrixView(out.data(), n, width));
  };
  go(small);
  go(large);
  double ts = 1e30, tl = 1e30;
  for (int i = 0; i < 3; ++i) {
    double s = Now();
    go(small);
    ts = std::min(ts, Now() - s);
  }
  for (int i = 0; i < 2; ++i) {
    double s = Now();
    go(large);
    tl = std::min(tl, Now() - s);
  }
  Cost c;
  c.per_row = std::max(0.0, (tl - ts) / (large - small));
  c.fixed = std::max(0.0, ts - c.per_row * small);
  return c;
}

struct Result {
  std::string strategy;
  double engine[2] = {NAN, NAN};  // [shap, interactions] seconds
  double e2e[2] = {NAN, NAN};
  double estimate[2] = {NAN, NAN};
};

void Bench(const Flags& flags, ForestPtr forest, const std::vector<float>& all_rows) {
  const int F = forest->num_features;
  const int64_t rows_n[2] = {std::min<int64_t>(flags.shap_rows, all_rows.size() / F),
                             std::min<int64_t>(flags.interaction_rows, all_rows.size() / F)};
  double t0 = Now();
  absl::StatusOr<PathLayoutPtr> layout = BuildPathLayout(*forest);
  if (!layout.ok()) {
    std::printf("layout: %s\n", std::string(layout.status().message()).c_str());
    return;
  }
  const double layout_s = Now() - t0;
  t0 = Now();
  absl::StatusOr<QuadratureModelPtr> qmodel = BuildQuadratureModel(forest, *layout);
  if (!qmodel.ok()) {
    std::printf("quadrature: %s\n", std::string(qmodel.status().message()).c_str());
    return;
  }
  const double quad_s = Now() - t0;
  std::printf("model %s: %s\n  layout %.3f s, quadrature preprocessing %.3f s\n", flags.name.c_str(),
              (*qmodel)->Describe().c_str(), layout_s, quad_s);

  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  BENCH_CUDA(cudaEventCreate(&e0));
  BENCH_CUDA(cudaEventCreate(&e1));
  auto event_time = [&](const std::function<bool()>& fn) {
    if (!fn()) return NAN * 1.0;
    BENCH_CUDA(cudaStreamSynchronize(stream));
    std::vector<double> t;
    for (int i = 0; i < flags.reps; ++i) {
      BENCH_CUDA(cudaEventRecord(e0, stream));
      if (!fn()) return NAN * 1.0;
      BENCH_CUDA(cudaEventRecord(e1, stream));
      BENCH_CUDA(cudaEventSynchronize(e1));
      float ms = 0;
      BENCH_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      t.push_back(ms * 1e-3);
    }
    return Median(t);
  };
  // Device rows and outputs (largest of the two kinds).
  const int64_t max_rows = std::max(rows_n[0], rows_n[1]);
  float* d_rows = nullptr;
  float* d_out = nullptr;
  const int64_t out_floats = std::max(rows_n[0] * ExplainWidth(*forest, false),
                                      rows_n[1] * ExplainWidth(*forest, true));
  BENCH_CUDA(cudaMalloc(reinterpret_cast<void**>(&d_rows), max_rows * F * 4));
  BENCH_CUDA(cudaMalloc(reinterpret_cast<void**>(&d_out), out_floats * 4));
  BENCH_CUDA(cudaMemcpy(d_rows, all_rows.data(), max_rows * F * 4, cudaMemcpyHostToDevice));
  std::vector<float> host_out(out_floats);

  std::vector<Result> results;
  // Quadrature, both precisions.
  for (QuadraturePrecision p : {QuadraturePrecision::kDouble, QuadraturePrecision::kFloat}) {
    Result r;
    r.strategy = absl::StrFormat("quadrature_gpu(%s)", QuadraturePrecisionName(p));
    t0 = Now();
    absl::StatusOr<std::unique_ptr<QuadratureGpuExplainer>> gpu =
        QuadratureGpuExplainer::Create(*qmodel, 0, p, int64_t{8} << 30);
    if (!gpu.ok()) {
      std::printf("  %s: %s\n", r.strategy.c_str(), std::string(gpu.status().message()).c_str());
      continue;
    }
    const double upload_s = Now() - t0;
    const QuadratureGpuModel& gm = (*gpu)->gpu_model();
    for (int kind = 0; kind < 2; ++kind) {
      ExplainOptions o;
      o.interactions = kind == 1;
      const int64_t n = rows_n[kind];
      const int64_t width = ExplainWidth(*forest, o.interactions);
      const int64_t ws_bytes = gm.WorkspaceBytes(n, o.interactions);
      void* d_ws = nullptr;
      if (cudaMalloc(&d_ws, ws_bytes) != cudaSuccess) {
        cudaGetLastError();
        std::printf("  %s: workspace of %lld bytes does not fit\n", r.strategy.c_str(),
                    static_cast<long long>(ws_bytes));
        continue;
      }
      r.engine[kind] = event_time([&] {
        return gm.Explain(d_rows, n, F, o, p, d_out, width, d_ws, ws_bytes, stream).ok();
      });
      BENCH_CUDA(cudaFree(d_ws));
      r.e2e[kind] = TimeMedian(flags.reps, [&] {
        return (*gpu)->Explain(MakeRowsView(all_rows.data(), n, F), o,
                               MakeMatrixView(host_out.data(), n, width))
            .ok();
      });
    }
    t0 = Now();
    QuadratureStrategyOptions so;
    so.precision = p;
    so.choose_precision = false;
    absl::StatusOr<std::unique_ptr<QuadratureStrategy>> strategy =
        MakeQuadratureGpuStrategy(*qmodel, so);
    const double calibrate_s = Now() - t0;
    if (!strategy.ok()) {
      std::printf("  %s: strategy: %s\n", r.strategy.c_str(),
                  std::string(strategy.status().message()).c_str());
    }
    if (strategy.ok()) {
      for (int kind = 0; kind < 2; ++kind) {
        ExplainOptions o;
        o.interactions = kind == 1;
        r.estimate[kind] = (*strategy)->EstimateSeconds(rows_n[kind], o);
      }
      std::printf("  %s: upload %.3f s, create+calibrate %.3f s, %s\n", r.strategy.c_str(),
                  upload_s, calibrate_s, (*strategy)->Describe().c_str());
    }
    results.push_back(r);
  }
  // The precision the strategy picks by itself at load (float only when measured safe).
  std::string auto_precision = "double";
  {
    t0 = Now();
    absl::StatusOr<std::unique_ptr<QuadratureStrategy>> strategy = MakeQuadratureGpuStrategy(*qmodel);
    if (strategy.ok()) {
      auto_precision = (*strategy)->Precision();
      std::printf("  quadrature_gpu(auto): create+choose+calibrate %.3f s, %s\n", Now() - t0,
                  (*strategy)->Describe().c_str());
      std::printf("PRECISION | %s | %s | %s\n", flags.name.c_str(), auto_precision.c_str(),
                  (*strategy)->Describe().c_str());
    } else {
      std::printf("  quadrature_gpu(auto): %s\n", std::string(strategy.status().message()).c_str());
    }
  }
  // Warp-level TreeShap (treeshap_gpu), double path arithmetic.
  {
    Result r;
    r.strategy = "treeshap_gpu(double)";
    TreeShapGpuOptions o;
    o.precision = TreeShapPrecision::kDouble;
    o.max_devices = 1;
    t0 = Now();
    absl::StatusOr<std::unique_ptr<TreeShapGpu>> gpu = TreeShapGpu::Create(*layout, o);
    if (gpu.ok()) {
      const double upload_s = Now() - t0;
      for (int kind = 0; kind < 2; ++kind) {
        const bool inter = kind == 1;
        const int64_t n = rows_n[kind];
        const int64_t width = ExplainWidth(*forest, inter);
        r.engine[kind] = event_time(
            [&] { return (*gpu)->ExplainOnDevice(0, d_rows, n, inter, d_out, stream).ok(); });
        r.e2e[kind] = TimeMedian(flags.reps, [&] {
          return (*gpu)->Explain(MakeRowsView(all_rows.data(), n, F), inter,
                                 MakeMatrixView(host_out.data(), n, width), nullptr)
              .ok();
        });
      }
      t0 = Now();
      for (int kind = 0; kind < 2; ++kind) {
        const bool inter = kind == 1;
        const Cost c = Calibrate(*forest, inter, [&](RowsView x, MatrixView<float> out) {
          return (*gpu)->Explain(x, inter, out, nullptr).ok();
        });
        r.estimate[kind] = c.Seconds(rows_n[kind]);
      }
      std::printf("  %s: upload %.3f s, calibrate %.3f s, %s\n", r.strategy.c_str(), upload_s,
                  Now() - t0, (*gpu)->Describe().c_str());
      results.push_back(r);
    } else {
      std::printf("  treeshap_gpu: %s\n", std::string(gpu.status().message()).c_str());
    }
  }
  cudaFree(d_rows);
  cudaFree(d_out);
  cudaStreamDestroy(stream);
  // The engine as the server builds it (strategy "auto", costs measured at creation).
  ThreadPool pool(0);
  t0 = Now();
  std::unique_ptr<ExplainEngine> engine;
  std::unique_ptr<ExplainEngine> cpu_engine;  // the engine's cheapest CPU strategy
  if (flags.engine) {
    absl::StatusOr<std::unique_ptr<ExplainEngine>> e = ExplainEngine::Create(forest, {}, &pool);
    if (e.ok()) {
      engine = std::move(*e);
      std::printf("  engine: created in %.3f s: %s\n", Now() - t0, engine->Describe().c_str());
    } else {
      std::printf("  engine: %s\n", std::string(e.status().message()).c_str());
    }
    ExplainEngineOptions cpu_options;
    cpu_options.strategy = "cpu";
    absl::StatusOr<std::unique_ptr<ExplainEngine>> c =
        ExplainEngine::Create(forest, cpu_options, &pool);
    if (c.ok()) cpu_engine = std::move(*c);
  }

  std::printf("\n| model | kind | rows | strategy | engine rows/s | e2e rows/s | estimate ms | e2e ms |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (int kind = 0; kind < 2; ++kind) {
    const int64_t n = rows_n[kind];
    for (const Result& r : results) {
      std::printf("| %s | %s | %lld | %s | %.4g | %.4g | %.3f | %.3f |\n", flags.name.c_str(),
                  kind ? "interactions" : "SHAP", static_cast<long long>(n), r.strategy.c_str(),
                  n / r.engine[kind], n / r.e2e[kind], r.estimate[kind] * 1e3, r.e2e[kind] * 1e3);
    }
    // Selector (bench model): smallest calibrated estimate among the engine's default quadrature
    // precision and treeshap_gpu, against the measured best e2e.
    const std::string default_quad = absl::StrFormat("quadrature_gpu(%s)", auto_precision);
    const Result* pick = nullptr;
    const Result* best = nullptr;
    for (const Result& r : results) {
      if (r.strategy != default_quad && r.strategy.rfind("treeshap", 0) != 0) continue;
      if (std::isnan(r.estimate[kind]) || std::isnan(r.e2e[kind])) continue;
      if (pick == nullptr || r.estimate[kind] < pick->estimate[kind]) pick = &r;
      if (best == nullptr || r.e2e[kind] < best->e2e[kind]) best = &r;
    }
    if (pick != nullptr) {
      const double ratio = pick->e2e[kind] / best->e2e[kind];
      std::printf("SELECTOR(bench costs) | %s | %s | pick %s | best %s | pick/best %.3f | %s\n",
                  flags.name.c_str(), kind ? "interactions" : "SHAP", pick->strategy.c_str(),
                  best->strategy.c_str(), ratio, ratio <= 1.05 ? "OK" : "MISS");
    }
    // The engine's own selector (ExplainEngine, strategy "auto"): which strategy did it run, and
    // how long did its pick take end to end against the best measured (GPU strategies above and,
    // where it could win, the engine's cheapest CPU strategy on this host's cores)?
    if (engine != nullptr && best != nullptr) {
      ExplainOptions o;
      o.interactions = kind == 1;
      RunInfo info;
      const int64_t width = ExplainWidth(*forest, o.interactions);
      absl::Status st;
      auto run = [&](ExplainEngine& e, int64_t rows, RunInfo* ri) {
        st = e.Explain(MakeRowsView(all_rows.data(), rows, F), o,
                       MakeMatrixView(host_out.data(), rows, width), ri);
        return st.ok();
      };
      const double pick_e2e = TimeMedian(flags.reps, [&] { return run(*engine, n, &info); });
      double best_e2e = std::min(best->e2e[kind], pick_e2e);
      std::string best_name = best->e2e[kind] <= pick_e2e ? best->strategy : info.strategy;
      std::string cpu_note = "cpu: no engine";
      if (cpu_engine != nullptr) {
        // Probe a few rows first: a CPU strategy far slower than the best is not timed in full.
        const int64_t probe = std::min<int64_t>(n, 16);
        RunInfo ci;
        const double t_probe = TimeMedian(1, [&] { return run(*cpu_engine, probe, &ci); });
        const double extrapolated = t_probe * n / probe;
        if (!std::isnan(t_probe) && extrapolated < 3 * best_e2e) {
          const double cpu_e2e = TimeMedian(flags.reps, [&] { return run(*cpu_engine, n, &ci); });
          cpu_note = absl::StrFormat("cpu %s e2e %.3f ms", ci.strategy, cpu_e2e * 1e3);
          if (cpu_e2e < best_e2e) {
            best_e2e = cpu_e2e;
            best_name = ci.strategy;
          }
        } else {
          cpu_note = absl::StrFormat("cpu %s not timed (%.0f ms extrapolated from %lld rows)",
                                     ci.strategy, extrapolated * 1e3,
                                     static_cast<long long>(probe));
        }
      }
      const double ratio = pick_e2e / best_e2e;
      std::printf("SELECTOR(engine) | %s | %s | pick %s (%s) %.3f ms | best %s %.3f ms | "
                  "pick/best %.3f | %s | %s | %s\n",
                  flags.name.c_str(), kind ? "interactions" : "SHAP", info.strategy.c_str(),
                  info.device.c_str(), pick_e2e * 1e3, best_name.c_str(), best_e2e * 1e3, ratio,
                  std::isnan(ratio) ? "n/a" : (ratio <= 1.05 ? "OK" : "MISS"), cpu_note.c_str(),
                  st.ok() ? info.reason.c_str() : std::string(st.message()).c_str());
    }
  }
}

#endif  // GROVE_HAVE_CUDA

int Main(int argc, char** argv) {
  Flags flags;
  bench::FlagSet set;
  bench::AddModelRowsFlags(&set, &flags.model, &flags.rows, &flags.name);
  set.Int("--shap-rows", &flags.shap_rows);
  set.Int("--interaction-rows", &flags.interaction_rows);
  set.Int("--reps", &flags.reps);
  set.Switch("--engine", &flags.engine);
  if (!set.Parse(argc, argv)) return 2;
  bench::ModelAndRows input;
  if (int status = bench::StartModelRows(flags.model, flags.rows, &flags.name,
                                         "usage: grove_quadrature_bench --model M --rows R.csv",
                                         &input);
      status != 0) {
    return status;
  }
  std::vector<float> rows = std::move(input.rows);
#if defined(GROVE_HAVE_CUDA)
  if (gpu::VisibleGpuCount() == 0) {
    std::printf("no CUDA device\n");
    return 0;
  }
  Bench(flags, input.forest, rows);
#else
  std::printf("built without CUDA: nothing to measure\n");
#endif
  return 0;
}

}  // namespace
}  // namespace grove

int main(int argc, char** argv) { return grove::bench::RunMain(argc, argv, &grove::Main); }
