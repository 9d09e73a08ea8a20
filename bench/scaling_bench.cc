// Engine-level scaling benchmark: SHAP and predict rows/s on every visible GPU.
//
//   grove_scaling_bench --model M --rows R.csv [--explain-rows 1000000] [--predict-rows 1000000]
//                       [--explain-strategy treeshap_gpu] [--predict-strategy auto] [--reps 3]
//                       [--registered] [--bandwidth-mb 256] [--max-chunk-rows N]
//
// Rows are the CSV's rows tiled up to the requested count (a label column, if the CSV has
// num_features + 1 columns, is dropped). The engines are the ones groved runs (ExplainEngine,
// PredictEngine) and use every visible GPU, so the GPU count is chosen with CUDA_VISIBLE_DEVICES.
// Timing: one warm-up call, then the median wall time of --reps calls, host rows in and host
// results out (copies included). Each table row ends with an FNV-1a hash of the output bytes:
// runs with 1, 2, 4 or 8 GPUs must print the same hash (the multi-GPU path answers exactly as one
// GPU does), which the scaling script checks. The predict row also gives the rows' bytes per second
// that crossed host memory, beside the host's limits, measured after the tables (--bandwidth-mb 0:
// not measured): memcpy within host memory on one thread and on the pool's threads (what staging
// into pinned slots can reach), and page-locked host memory to each GPU alone, to every GPU at once
// and back (what DMA can reach). --registered page-locks the rows and results once before timing
// (gpu::PinHostRange), so that the engines copy them by DMA without staging: the caller's memory
// registered once. --max-chunk-rows caps the rows of each GPU's launches and copies (the engine's
// own choice without it): an ablation of the chunk sizes that pipeline a GPU's copies and kernels;
// it makes the GPU engine directly (TahoeEngine), so it needs a GPU and takes no "cpu" strategy.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/common/thread_pool.h"
#include "bench/common/copy_bandwidth.h"
#include "bench/common/flags.h"
#include "bench/common/main.h"
#include "bench/common/stats.h"
#include "core/gpu/device_set.h"
#include "core/explain/explain.h"
#include "core/explain/explain_engine.h"
#include "core/io/csv.h"
#include "core/model/loader.h"
#include "core/predict/predict.h"
#include "core/predict/predict_engine.h"
#include "core/predict/tahoe/tahoe_engine.h"

namespace grove {
namespace {

struct Flags {
  std::string model, rows;
  int64_t explain_rows = 1000000;
  int64_t predict_rows = 1000000;
  std::string explain_strategy = "treeshap_gpu";
  std::string predict_strategy = "auto";
  int reps = 3;
  bool registered = false;
  int64_t bandwidth_mb = 256;
  int64_t max_chunk_rows = 0;
};

using bench::TimeMedian;

uint64_t Fnv1a(const float* v, int64_t n) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(v);
  for (size_t i = 0; i < static_cast<size_t>(n) * sizeof(float); ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

// The host's limits for rows staged to GPUs (see the header comment): a table of GB/s.
void PrintHostLimits(ThreadPool& pool, int64_t bytes, int reps) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const int64_t grain = int64_t{1} << 20;
  auto copy_on = [&](ThreadPool* p) {
    return TimeMedian(reps, [&] {
      ParallelFor(p, bytes, grain, [&](int64_t b, int64_t e) {
        std::memcpy(dst.data() + b, src.data() + b, e - b);
      });
    });
  };
  std::printf("\n| host limit | GB/s |\n|---|---:|\n");
  std::printf("| memcpy, 1 thread | %.1f |\n", bytes / copy_on(nullptr) / 1e9);
  std::printf("| memcpy, %d threads | %.1f |\n", pool.num_threads(), bytes / copy_on(&pool) / 1e9);
  std::vector<int> devices;
  for (int d = 0; d < gpu::VisibleGpuCount(); ++d) devices.push_back(d);
  if (devices.empty()) return;
  absl::StatusOr<bench::CopyBandwidth> b = bench::MeasureCopyBandwidth(devices, bytes, reps);
  if (!b.ok()) {
    std::printf("| pinned copies | %s |\n", b.status().ToString().c_str());
    return;
  }
  for (size_t i = 0; i < b->to_device.size(); ++i) {
    std::printf("| pinned host to cuda:%d alone | %.1f |\n", devices[i], b->to_device[i]);
  }
  std::printf("| pinned host to all %zu GPUs at once | %.1f |\n", devices.size(), b->to_all);
  std::printf("| all %zu GPUs to pinned host at once | %.1f |\n", devices.size(), b->from_all);
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "%s\n", s.ToString().c_str());
  return 1;
}

int Main(int argc, char** argv) {
  Flags flags;
  bench::FlagSet set;
  bench::AddModelRowsFlags(&set, &flags.model, &flags.rows);
  bench::AddPredictExplainFlags(&set, &flags.predict_rows, &flags.explain_rows,
                                &flags.explain_strategy);
  set.String("--predict-strategy", &flags.predict_strategy);
  set.Int("--reps", &flags.reps);
  set.Switch("--registered", &flags.registered);
  set.Int("--bandwidth-mb", &flags.bandwidth_mb);
  set.Int("--max-chunk-rows", &flags.max_chunk_rows);
  if (!set.Parse(argc, argv)) return 2;
  flags.reps = std::max(1, flags.reps);
  flags.bandwidth_mb = std::max<int64_t>(0, flags.bandwidth_mb);
  if (flags.model.empty() || flags.rows.empty()) {
    std::fprintf(stderr, "usage: grove_scaling_bench --model M --rows R.csv [flags]\n");
    return 2;
  }
  absl::StatusOr<ForestPtr> forest = LoadModelFile(flags.model);
  if (!forest.ok()) return Fail(forest.status());
  const int nf = (*forest)->num_features;
  absl::StatusOr<CsvMatrix<float>> csv = ReadCsvFloats(flags.rows);
  if (!csv.ok()) return Fail(csv.status());
  if (csv->rows == 0 || (csv->cols != nf && csv->cols != nf + 1)) {
    std::fprintf(stderr, "rows have %lld columns, model %d features\n",
                 static_cast<long long>(csv->cols), nf);
    return 1;
  }
  const int64_t n = std::max(flags.explain_rows, flags.predict_rows);
  std::vector<float> rows(n * nf);
  for (int64_t r = 0; r < n; ++r) {
    std::memcpy(rows.data() + r * nf, csv->values.data() + (r % csv->rows) * csv->cols,
                nf * sizeof(float));
  }
  ThreadPool pool(0);
  std::vector<float> out_buffer;  // the largest output, registered with the rows (--registered)
  {
    int64_t width = 0;
    if (flags.explain_rows > 0) width = std::max<int64_t>(width, ExplainWidth(**forest, false));
    PredictOptions margin;
    margin.kind = OutputKind::kMargin;
    if (flags.predict_rows > 0) width = std::max<int64_t>(width, PredictWidth(**forest, margin));
    out_buffer.resize(n * width);
  }
  if (flags.registered) {
    absl::Status st = gpu::PinHostRange(rows.data(), rows.size() * sizeof(float));
    if (st.ok()) st = gpu::PinHostRange(out_buffer.data(), out_buffer.size() * sizeof(float));
    if (!st.ok()) return Fail(st);
  }
  std::printf("| op | rows | device | strategy | median s | rows/s | rows GB/s | output hash |\n");
  std::printf("|---|---:|---|---|---:|---:|---:|---|\n");

  if (flags.explain_rows > 0) {
    ExplainEngineOptions eo;
    eo.strategy = flags.explain_strategy;
    absl::StatusOr<std::unique_ptr<ExplainEngine>> engine = ExplainEngine::Create(*forest, eo, &pool);
    if (!engine.ok()) return Fail(engine.status());
    const int64_t m = flags.explain_rows;
    float* out = out_buffer.data();
    const int64_t out_size = m * ExplainWidth(**forest, false);
    ExplainOptions o;
    RunInfo info;
    absl::Status st;
    const double t = TimeMedian(flags.reps, [&] {
      st.Update((*engine)->Explain(MakeRowsView(rows.data(), m, nf), o,
                                   MakeMatrixView(out, m, ExplainWidth(**forest, false)),
                                   &info));
    });
    if (!st.ok()) return Fail(st);
    std::printf("| shap | %lld | %s | %s | %.4f | %.0f | %.1f | %016llx |\n",
                static_cast<long long>(m), info.device.c_str(), info.strategy.c_str(), t, m / t,
                m * nf * 4.0 / t / 1e9, static_cast<unsigned long long>(Fnv1a(out, out_size)));
  }
  if (flags.predict_rows > 0) {
    PredictEngineOptions po;
    po.strategy = flags.predict_strategy;
    absl::StatusOr<std::unique_ptr<PredictEngine>> engine;
    if (flags.max_chunk_rows > 0) {
      TahoeEngineOptions to;
      to.engine = po;
      to.max_chunk_rows = flags.max_chunk_rows;
      absl::StatusOr<std::unique_ptr<TahoeEngine>> tahoe = TahoeEngine::Create(*forest, to, &pool);
      if (!tahoe.ok()) return Fail(tahoe.status());
      engine = std::unique_ptr<PredictEngine>(std::move(*tahoe));
    } else {
      engine = PredictEngine::Create(*forest, po, &pool);
    }
    if (!engine.ok()) return Fail(engine.status());
    const int64_t m = flags.predict_rows;
    PredictOptions o;
    o.kind = OutputKind::kMargin;
    const int64_t width = PredictWidth(**forest, o);
    float* out = out_buffer.data();
    RunInfo info;
    absl::Status st;
    const double t = TimeMedian(flags.reps, [&] {
      st.Update((*engine)->Predict(MakeRowsView(rows.data(), m, nf), o,
                                   MakeMatrixView(out, m, width), &info));
    });
    if (!st.ok()) return Fail(st);
    std::printf("| predict%s | %lld | %s | %s | %.4f | %.0f | %.1f | %016llx |\n",
                flags.registered ? " (registered)" : "", static_cast<long long>(m),
                info.device.c_str(), info.strategy.c_str(), t, m / t, m * nf * 4.0 / t / 1e9,
                static_cast<unsigned long long>(Fnv1a(out, m * width)));
  }
  if (flags.registered) {
    gpu::UnpinHostRange(rows.data());
    gpu::UnpinHostRange(out_buffer.data());
  }
  if (flags.bandwidth_mb > 0) PrintHostLimits(pool, flags.bandwidth_mb << 20, flags.reps);
  return 0;
}

}  // namespace
}  // namespace grove

int main(int argc, char** argv) { return grove::bench::RunMain(argc, argv, &grove::Main); }
