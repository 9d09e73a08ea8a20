// Model load time and CPU engine throughput for one model file.
//
//   grove_model_bench --model M.{json,ubj,txt} [--rows R.csv] [--threads N] [--load-repeats 3]
//                     [--budget 2] [--predict-rows 10000] [--explain-rows 1000]
//                     [--interaction-rows 50] [--skip-interactions] [--explain-strategy auto]
//
// Load: LoadModelFile (read + parse + validate) `load-repeats` times; min and median are reported,
//   with the file size and the model's shape. The first load also pays the page cache.
// Rows: the CSV's rows (a trailing label column, when there is one more column than the model has
//   features, is dropped), read as doubles through DoubleRowConverter as `grove` does; without
//   --rows, synthetic rows: for each feature, values drawn from the model's own split thresholds
//   (so that rows spread over the trees' leaves) and their neighbours, 5% missing.
// Throughput: each engine call (PredictCpu margins; SHAP values and interaction values by the CPU
//   explanation engine, as `grove explain --no-gpu` runs it: ExplainEngine without GPUs, strategy
//   --explain-strategy, default "auto" = the cheapest CPU strategy by the costs it measured at
//   creation; "reference" times ExplainCpuReference) is repeated on the same rows until `budget`
//   seconds have passed (at least once), and rows/s is rows per call / median seconds per call.
//   The strategy that ran is printed. Threads: as `grove --threads N` (N - 1 pool threads plus
//   the calling thread; default: one per core).
// Output: a `|` table, one line per measurement.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "bench/common/flags.h"
#include "bench/common/main.h"
#include "bench/common/stats.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/explain_engine.h"
#include "core/io/csv.h"
#include "core/model/double_rows.h"
#include "core/model/loader.h"
#include "core/predict/predict.h"

namespace grove {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  std::string model, rows;
  int threads = 0;
  int load_repeats = 3;
  double budget = 2.0;
  int64_t predict_rows = 10000;
  int64_t explain_rows = 1000;
  int64_t interaction_rows = 50;
  bool skip_interactions = false;
  std::string explain_strategy = "auto";
};

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "grove_model_bench: %s\nusage: grove_model_bench --model PATH [--rows CSV] "
               "[--threads N] [--load-repeats N] [--budget SECONDS] [--predict-rows N] "
               "[--explain-rows N] [--interaction-rows N] [--skip-interactions] "
               "[--explain-strategy NAME]\n",
               why);
  std::exit(2);
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  bench::FlagSet set;
  bench::AddModelRowsFlags(&set, &f.model, &f.rows);
  set.Int("--threads", &f.threads);
  set.Int("--load-repeats", &f.load_repeats);
  set.Double("--budget", &f.budget);
  bench::AddPredictExplainFlags(&set, &f.predict_rows, &f.explain_rows, &f.explain_strategy);
  set.Int("--interaction-rows", &f.interaction_rows);
  set.Switch("--skip-interactions", &f.skip_interactions);
  if (!set.Parse(argc, argv)) Usage("bad flags");
  if (f.threads < 0 || f.load_repeats < 0 || f.predict_rows < 0 || f.explain_rows < 0 ||
      f.interaction_rows < 0 || !(f.budget >= 0)) {
    Usage("a count or the budget is negative");
  }
  if (f.model.empty()) Usage("--model is required");
  f.load_repeats = std::max(1, f.load_repeats);
  return f;
}

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

using bench::Median;

// Runs `fn` until `budget` seconds have passed (at least once); per-call seconds.
std::vector<double> Repeat(const std::function<void()>& fn, double budget) {
  std::vector<double> times;
  const auto start = Clock::now();
  do {
    const auto t = Clock::now();
    fn();
    times.push_back(Since(t));
  } while (Since(start) < budget && times.size() < 1000);
  return times;
}

// Synthetic rows: per feature, the model's split thresholds (and the floats around them).
std::vector<float> SyntheticRows(const Forest& f, int64_t n) {
  std::vector<std::vector<float>> values(static_cast<size_t>(f.num_features));
  for (const Node& node : f.nodes) {
    if (node.is_leaf()) continue;
    auto& v = values[static_cast<size_t>(node.feature)];
    if (v.size() < 4096) {
      v.push_back(node.is_categorical() ? static_cast<float>(v.size() % 8) : node.threshold);
    }
  }
  std::mt19937_64 rng(1);
  std::vector<float> rows(static_cast<size_t>(n * f.num_features));
  for (int64_t r = 0; r < n; ++r) {
    for (int c = 0; c < f.num_features; ++c) {
      float& x = rows[static_cast<size_t>(r * f.num_features + c)];
      const auto& v = values[static_cast<size_t>(c)];
      if (rng() % 20 == 0 || v.empty()) {
        x = v.empty() ? 0.0f : NAN;
        continue;
      }
      x = v[rng() % v.size()];
      switch (rng() % 3) {
        case 0: x = std::nextafter(x, -INFINITY); break;
        case 1: x = std::nextafter(x, INFINITY); break;
        default: break;
      }
    }
  }
  return rows;
}

absl::StatusOr<std::vector<float>> CsvRows(const Forest& f, const std::string& path,
                                           int64_t max_rows) {
  absl::StatusOr<CsvMatrix<double>> m = ReadCsvDoubles(path);
  if (!m.ok()) return m.status();
  const int64_t cols = f.num_features;
  if (m->cols != cols && m->cols != cols + 1) {
    return absl::InvalidArgumentError(path + ": " + std::to_string(m->cols) +
                                      " columns for a model of " + std::to_string(cols) +
                                      " features");
  }
  const int64_t n = std::min(m->rows, max_rows);
  std::vector<double> dense(static_cast<size_t>(n * cols));
  for (int64_t r = 0; r < n; ++r) {
    std::copy_n(m->values.begin() + r * m->cols, cols, dense.begin() + r * cols);
  }
  std::vector<float> rows(dense.size());
  DoubleRowConverter(f).ConvertRows(dense.data(), n, rows.data());
  return rows;
}

// `rows` (n x F) cycled to `want` rows.
std::vector<float> Cycle(const std::vector<float>& rows, int64_t cols, int64_t want) {
  const int64_t have = static_cast<int64_t>(rows.size()) / cols;
  std::vector<float> out(static_cast<size_t>(want * cols));
  for (int64_t r = 0; r < want; ++r) {
    std::copy_n(rows.begin() + (r % have) * cols, cols, out.begin() + r * cols);
  }
  return out;
}

int Main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  const int threads = flags.threads > 0
                          ? flags.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  struct stat st;
  const double file_mb = ::stat(flags.model.c_str(), &st) == 0 ? st.st_size / 1e6 : 0.0;

  // Load.
  std::vector<double> load_times;
  ForestPtr forest;
  for (int i = 0; i < flags.load_repeats; ++i) {
    forest.reset();  // free the previous copy first: measure one load, not two models in memory
    const auto t = Clock::now();
    absl::StatusOr<ForestPtr> f = LoadModelFile(flags.model);
    load_times.push_back(Since(t));
    if (!f.ok()) {
      std::fprintf(stderr, "grove_model_bench: %s\n", std::string(f.status().message()).c_str());
      return 1;
    }
    forest = *std::move(f);
  }
  const Forest& f = *forest;
  std::printf("model | %s | %s | %.1f MB | %zu trees | %lld leaves | %zu nodes | max depth %d | "
              "%d features | %d outputs | %.1f MB in memory\n",
              flags.model.c_str(), ModelFormatName(f.format), file_mb, f.trees.size(),
              static_cast<long long>(f.num_leaves), f.nodes.size(), f.max_depth, f.num_features,
              f.num_outputs, f.MemoryBytes() / 1e6);
  const double load_min = *std::min_element(load_times.begin(), load_times.end());
  std::printf("load | %d runs | min %.3f s | median %.3f s | %.0f MB/s | %.2f M leaves/s\n",
              flags.load_repeats, load_min, Median(load_times), file_mb / load_min,
              f.num_leaves / load_min / 1e6);
  std::fflush(stdout);

  // Rows.
  const int64_t base_rows = std::max<int64_t>(
      {1, flags.predict_rows, flags.explain_rows, flags.interaction_rows});
  std::vector<float> rows;
  if (!flags.rows.empty()) {
    absl::StatusOr<std::vector<float>> r = CsvRows(f, flags.rows, std::min<int64_t>(base_rows, 10000));
    if (!r.ok()) {
      std::fprintf(stderr, "grove_model_bench: %s\n", std::string(r.status().message()).c_str());
      return 1;
    }
    rows = *std::move(r);
    if (rows.empty()) {
      std::fprintf(stderr, "grove_model_bench: %s has no rows\n", flags.rows.c_str());
      return 1;
    }
  } else {
    rows = SyntheticRows(f, std::min<int64_t>(base_rows, 10000));
  }
  const int64_t cols = f.num_features;
  // As the CLI (client/cli_local.cc MakePool): the calling thread works too.
  std::unique_ptr<ThreadPool> pool_owner =
      threads > 1 ? std::make_unique<ThreadPool>(threads - 1) : nullptr;
  ThreadPool* pool = pool_owner.get();

  auto report = [&](const char* what, int64_t n, const std::vector<double>& times) {
    const double med = Median(times);
    std::printf("%s | %d threads | %lld rows per call | %zu calls | median %.4f s | %.1f rows/s\n",
                what, threads, static_cast<long long>(n), times.size(), med, n / med);
    std::fflush(stdout);
  };

  if (flags.predict_rows > 0) {
    const int64_t n = flags.predict_rows;
    const std::vector<float> in = Cycle(rows, cols, n);
    PredictOptions o;
    o.kind = OutputKind::kMargin;
    std::vector<float> out(static_cast<size_t>(n * PredictWidth(f, o)));
    absl::Status status;
    auto times = Repeat(
        [&] {
          status = PredictCpu(f, MakeRowsView(in.data(), n, cols), o,
                              MakeMatrixView(out.data(), n, PredictWidth(f, o)), pool);
        },
        flags.budget);
    if (!status.ok()) {
      std::fprintf(stderr, "grove_model_bench: predict: %s\n", std::string(status.message()).c_str());
      return 1;
    }
    report("cpu predict (margin)", n, times);
  }
  if (!CheckExplainable(f).ok()) {
    std::printf("cpu explain | refused: %s\n", std::string(CheckExplainable(f).message()).c_str());
    return 0;
  }
  ExplainEngineOptions engine_options;
  engine_options.use_gpu = false;
  engine_options.strategy = flags.explain_strategy;
  const auto engine_start = Clock::now();
  absl::StatusOr<std::unique_ptr<ExplainEngine>> engine =
      ExplainEngine::Create(forest, engine_options, pool);
  if (!engine.ok()) {
    std::fprintf(stderr, "grove_model_bench: explain engine: %s\n",
                 std::string(engine.status().message()).c_str());
    return 1;
  }
  std::printf("explain engine | created in %.3f s | %s\n", Since(engine_start),
              (*engine)->Describe().c_str());
  for (bool interactions : {false, true}) {
    const int64_t n = interactions ? flags.interaction_rows : flags.explain_rows;
    if (n <= 0 || (interactions && flags.skip_interactions)) continue;
    const std::vector<float> in = Cycle(rows, cols, n);
    const int64_t width = ExplainWidth(f, interactions);
    std::vector<float> out(static_cast<size_t>(n * width));
    ExplainOptions o;
    o.interactions = interactions;
    absl::Status status;
    RunInfo info;
    auto times = Repeat(
        [&] {
          status = (*engine)->Explain(MakeRowsView(in.data(), n, cols), o,
                                      MakeMatrixView(out.data(), n, width), &info);
        },
        flags.budget);
    if (!status.ok()) {
      std::fprintf(stderr, "grove_model_bench: explain: %s\n", std::string(status.message()).c_str());
      return 1;
    }
    const std::string what = absl::StrCat("cpu explain (", interactions ? "interactions" : "shap",
                                          ", ", info.strategy, ")");
    report(what.c_str(), n, times);
  }
  return 0;
}

}  // namespace
}  // namespace grove

int main(int argc, char** argv) { return grove::bench::RunMain(argc, argv, &grove::Main); }
