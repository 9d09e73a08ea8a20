#include "client/cli_local.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/progress.h"
#include "core/common/thread_pool.h"
#include "core/explain/background.h"
#include "core/explain/explain.h"
#include "core/explain/explain_engine.h"
#include "core/explain/interventional_engine.h"
#include "core/io/csv.h"
#include "core/model/loader.h"
#include "core/predict/predict.h"
#include "core/predict/predict_engine.h"

namespace grove::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

int Fail(const absl::Status& status) {
  std::string message(status.message());
  std::replace(message.begin(), message.end(), '\n', ' ');
  std::fprintf(stderr, "grove: error: %s\n", message.c_str());
  return 1;
}

// Makes sure an error names `path` (loaders usually do already).
absl::Status NameFile(const absl::Status& status, const std::string& path) {
  if (status.ok() || absl::string_view(status.message()).find(path) != absl::string_view::npos) {
    return status;
  }
  return absl::Status(status.code(), absl::StrCat(path, ": ", status.message()));
}

// The CPU thread pool for --threads N: the caller thread works too, so N-1 workers.
std::unique_ptr<ThreadPool> MakePool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (threads <= 1) return nullptr;
  return std::make_unique<ThreadPool>(threads - 1);
}

struct LoadedModel {
  ForestPtr forest;
  double load_seconds = 0;
};

absl::StatusOr<LoadedModel> Load(const std::string& path) {
  const auto start = Clock::now();
  absl::StatusOr<ForestPtr> forest = LoadModelFile(path);
  if (!forest.ok()) return NameFile(forest.status(), path);
  return LoadedModel{*std::move(forest), Seconds(start)};
}

void PrintVerbose(const CliArgs& args, const LoadedModel& model, const std::string& engine,
                  const RunInfo& info, const StreamStats& stats) {
  if (!args.verbose) return;
  std::fprintf(stderr,
               "grove: model %s (%s, %zu trees) loaded in %.3f s; engine %s; last call: device %s, "
               "strategy %s%s%s\n",
               args.model.c_str(), ModelFormatName(model.forest->format),
               model.forest->trees.size(), model.load_seconds, engine.c_str(), info.device.c_str(),
               info.strategy.c_str(), info.reason.empty() ? "" : ", ", info.reason.c_str());
  std::fprintf(stderr,
               "grove: %lld rows in %lld chunks; compute %.3f s, total %.3f s (%.0f rows/s)\n",
               static_cast<long long>(stats.rows), static_cast<long long>(stats.chunks),
               stats.compute_seconds, stats.total_seconds,
               stats.total_seconds > 0 ? stats.rows / stats.total_seconds : 0.0);
}

int RunPredict(const CliArgs& args) {
  absl::StatusOr<LoadedModel> model = Load(args.model);
  if (!model.ok()) return Fail(model.status());
  std::unique_ptr<ThreadPool> pool = MakePool(args.threads);
  PredictEngineOptions engine_options;
  engine_options.use_gpu = args.use_gpu;
  engine_options.strategy = args.strategy;
  absl::StatusOr<std::unique_ptr<PredictEngine>> engine =
      PredictEngine::Create(model->forest, engine_options, pool.get());
  if (!engine.ok()) return Fail(NameFile(engine.status(), args.model));

  PredictOptions options;
  options.kind = args.kind;
  options.iteration_begin = args.iteration_begin;
  options.iteration_end = args.iteration_end;
  StreamOptions stream;
  stream.input = args.input;
  stream.output = args.output;
  stream.in_cols = model->forest->num_features;
  stream.out_cols = PredictWidth(*model->forest, options);
  stream.chunk_rows = args.chunk_rows;
  stream.read_threads = args.threads;
  stream.progress = args.progress;
  stream.label = "predict";
  ResultColumns columns;
  columns.feature_names =
      FeatureNamesOrDefault(model->forest->feature_names, model->forest->num_features);
  columns.num_outputs = model->forest->num_outputs;
  columns.kind = args.kind;
  columns.width = stream.out_cols;
  ApplyColumnArgs(args, columns, &stream);
  const DoubleRowConverter converter(*model->forest);
  stream.converter = &converter;
  RunInfo info;
  StreamStats stats;
  absl::Status status = StreamRows(
      stream,
      [&](RowsView rows, MatrixView<float> out) {
        return NameFile((*engine)->Predict(rows, options, out, &info), args.model);
      },
      &stats);
  if (!status.ok()) return Fail(status);
  PrintVerbose(args, *model, (*engine)->Describe(), info, stats);
  return 0;
}

// Explains one chunk of rows: `info` gets what ran.
using ExplainFn = std::function<absl::Status(RowsView, MatrixView<float>, RunInfo*)>;

// `engine`->Explain with `options` and the command's iteration range.
template <typename Engine, typename Options>
ExplainFn BindExplain(std::shared_ptr<Engine> engine, Options options, const CliArgs& args) {
  options.iteration_begin = args.iteration_begin;
  options.iteration_end = args.iteration_end;
  return [engine, options](RowsView rows, MatrixView<float> out, RunInfo* info) {
    return engine->Explain(rows, options, out, info);
  };
}

// With --background: the interventional engine over the background file (CSV or .npy, read as
// groved reads a model's background). --strategy cpu means: no GPU.
absl::Status MakeInterventional(const CliArgs& args, const LoadedModel& model, ThreadPool* pool,
                                std::shared_ptr<InterventionalEngine>* engine) {
  absl::StatusOr<Background> bg = LoadBackgroundFile(*model.forest, args.background);
  if (!bg.ok()) return bg.status();
  InterventionalEngineOptions options;
  options.use_gpu = args.use_gpu && args.strategy != "cpu";
  if (args.strategy != "cpu") options.strategy = args.strategy;
  absl::StatusOr<std::unique_ptr<InterventionalEngine>> e =
      InterventionalEngine::Create(model.forest, nullptr, bg->view(), options, pool);
  if (!e.ok()) {
    return absl::Status(e.status().code(),
                        absl::StrCat(args.background, ": ", e.status().message()));
  }
  *engine = std::move(*e);
  return absl::OkStatus();
}

int RunExplain(const CliArgs& args) {
  absl::StatusOr<LoadedModel> model = Load(args.model);
  if (!model.ok()) return Fail(model.status());
  if (absl::Status s = CheckExplainable(*model->forest); !s.ok()) {
    return Fail(NameFile(s, args.model));
  }
  std::unique_ptr<ThreadPool> pool = MakePool(args.threads);
  ExplainFn explain;
  std::string describe;
  std::shared_ptr<ExplainEngine> engine;
  std::shared_ptr<InterventionalEngine> interventional;
  if (args.background.empty()) {
    ExplainEngineOptions engine_options;
    engine_options.use_gpu = args.use_gpu;
    engine_options.strategy = args.strategy;
    absl::StatusOr<std::unique_ptr<ExplainEngine>> e =
        ExplainEngine::Create(model->forest, engine_options, pool.get());
    if (!e.ok()) return Fail(NameFile(e.status(), args.model));
    engine = std::move(*e);
    ExplainOptions options;
    options.interactions = args.interactions;
    explain = BindExplain(engine, options, args);
    describe = engine->Describe();
  } else {
    if (absl::Status s = MakeInterventional(args, *model, pool.get(), &interventional); !s.ok()) {
      return Fail(s);
    }
    InterventionalOptions options;
    options.output_space = args.output_space;
    options.interactions = args.interactions;
    explain = BindExplain(interventional, options, args);
    describe = interventional->Describe();
  }

  StreamOptions stream;
  stream.input = args.input;
  stream.output = args.output;
  stream.in_cols = model->forest->num_features;
  stream.out_cols = ExplainWidth(*model->forest, args.interactions);
  stream.chunk_rows = args.chunk_rows;
  stream.read_threads = args.threads;
  stream.progress = args.progress;
  stream.label = args.interactions ? "interactions" : "explain";
  ResultColumns columns;
  columns.feature_names =
      FeatureNamesOrDefault(model->forest->feature_names, model->forest->num_features);
  columns.num_outputs = model->forest->num_outputs;
  columns.explain = true;
  columns.interactions = args.interactions;
  ApplyColumnArgs(args, columns, &stream);
  const DoubleRowConverter converter(*model->forest);
  stream.converter = &converter;
  RunInfo info;
  StreamStats stats;
  absl::Status status = StreamRows(
      stream,
      [&](RowsView rows, MatrixView<float> out) {
        return NameFile(explain(rows, out, &info), args.model);
      },
      &stats);
  if (!status.ok()) return Fail(status);
  PrintVerbose(args, *model, describe, info, stats);
  return 0;
}

int RunInspect(const CliArgs& args) {
  absl::StatusOr<LoadedModel> model = Load(args.model);
  if (!model.ok()) return Fail(model.status());
  const Forest& forest = *model->forest;
  std::vector<Stat> stats;
  stats.push_back({"model", args.model, StatKind::kText});
  struct stat st;
  if (::stat(args.model.c_str(), &st) == 0) {
    stats.push_back({"file_bytes", absl::StrCat(static_cast<int64_t>(st.st_size)), StatKind::kNumber});
  }
  stats.push_back({"load_seconds", absl::StrFormat("%.6f", model->load_seconds), StatKind::kNumber});
  for (Stat& s : ForestStats(forest)) stats.push_back(std::move(s));

  // The engines that would serve the model (GPU when built and visible).
  std::unique_ptr<ThreadPool> pool = MakePool(args.threads);
  PredictEngineOptions predict_options;
  predict_options.use_gpu = args.use_gpu;
  auto predict = PredictEngine::Create(model->forest, predict_options, pool.get());
  stats.push_back({"predict_engine",
                   predict.ok() ? (*predict)->Describe()
                                : absl::StrCat("unavailable: ", predict.status().message()),
                   StatKind::kText});
  if (absl::Status s = CheckExplainable(forest); !s.ok()) {
    stats.push_back({"explain_engine", absl::StrCat("unavailable: ", s.message()), StatKind::kText});
  } else {
    ExplainEngineOptions explain_options;
    explain_options.use_gpu = args.use_gpu;
    auto explain = ExplainEngine::Create(model->forest, explain_options, pool.get());
    stats.push_back({"explain_engine",
                     explain.ok() ? (*explain)->Describe()
                                  : absl::StrCat("unavailable: ", explain.status().message()),
                     StatKind::kText});
    if (explain.ok() && (*explain)->layout() != nullptr) {  // path strategies: merged paths, bins
      stats.push_back({"explain_paths", (*explain)->layout()->stats.Describe(), StatKind::kText});
    }
  }
  const std::string text = RenderStats(stats, args.json);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

std::string Num(double v) { return absl::StrFormat("%.9g", v); }

}  // namespace

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

int64_t AutoChunkRows(int64_t in_cols, int64_t out_cols) {
  constexpr int64_t kValuesPerBuffer = int64_t{1} << 23;
  const int64_t widest = std::max<int64_t>({1, in_cols, out_cols});
  return std::clamp<int64_t>(kValuesPerBuffer / widest, 1, int64_t{1} << 18);
}

namespace {

// The read-compute-write loop of StreamRows and StreamDoubleRows: the next chunk is parsed (by
// `read`, into one of two buffers) while the current one is computed.
template <typename T>
using ReadFn = std::function<absl::StatusOr<int64_t>(CsvReader*, int64_t chunk, int slot,
                                                     std::vector<T>*, std::vector<std::string>*)>;

// --header: reads the input's header and lays its columns out for the model's features.
absl::Status ApplyHeader(const StreamOptions& options, CsvReader* reader) {
  if (!options.header) return absl::OkStatus();
  absl::StatusOr<std::vector<std::string>> header = reader->ReadHeader();
  if (!header.ok()) return header.status();
  absl::StatusOr<CsvLayout> layout =
      MatchCsvHeader(*std::move(header), options.feature_names, options.keep, reader->path());
  if (!layout.ok()) return layout.status();
  reader->SetLayout(*std::move(layout));
  return absl::OkStatus();
}

template <typename T>
absl::Status StreamLoop(
    const StreamOptions& options, const ReadFn<T>& read,
    const std::function<absl::Status(const T* rows, int64_t n, MatrixView<float> out)>& compute,
    StreamStats* stats) {
  const auto start = Clock::now();
  *stats = StreamStats();
  absl::StatusOr<std::unique_ptr<CsvReader>> reader =
      CsvReader::Open(options.input, options.in_cols, options.read_threads);
  if (!reader.ok()) return reader.status();
  absl::StatusOr<std::unique_ptr<CsvWriter>> writer = CsvWriter::Open(options.output);
  if (!writer.ok()) return writer.status();
  const int64_t chunk = options.chunk_rows > 0 ? options.chunk_rows
                                               : AutoChunkRows(options.in_cols, options.out_cols);
  ProgressBar progress(options.progress, options.label);

  auto run = [&]() -> absl::Status {
    CsvReader* r = reader->get();
    if (absl::Status s = ApplyHeader(options, r); !s.ok()) return s;
    const bool keeping = !options.keep.empty();
    if (!options.output_header.empty()) {
      std::vector<std::string> names = options.keep;
      names.insert(names.end(), options.output_header.begin(), options.output_header.end());
      if (absl::Status s = (*writer)->WriteHeader(names); !s.ok()) return s;
    }
    std::vector<T> buffers[2];
    std::vector<std::string> kept[2];
    std::vector<float> out;
    auto read_slot = [&read, r, chunk, &buffers, &kept, keeping](int slot) {
      return read(r, chunk, slot, &buffers[slot], keeping ? &kept[slot] : nullptr);
    };
    int cur = 0;
    std::future<absl::StatusOr<int64_t>> next = std::async(std::launch::async, read_slot, cur);
    while (true) {
      absl::StatusOr<int64_t> n = next.get();
      if (!n.ok()) return n.status();
      if (*n == 0) break;
      const int64_t done_bytes = r->bytes_consumed();
      const int other = 1 - cur;
      next = std::async(std::launch::async, read_slot, other);
      out.resize(static_cast<size_t>(*n * options.out_cols));
      const auto t = Clock::now();
      absl::Status s = compute(buffers[cur].data(), *n,
                               MakeMatrixView(out.data(), *n, options.out_cols));
      stats->compute_seconds += Seconds(t);
      if (!s.ok()) return s;  // `next` finishes in its destructor
      const auto result = MakeMatrixView<const float>(out.data(), *n, options.out_cols);
      s = keeping ? (*writer)->WriteRows(result, kept[cur]) : (*writer)->WriteRows(result);
      if (!s.ok()) return s;
      stats->rows += *n;
      ++stats->chunks;
      progress.Update(done_bytes, r->total_bytes(), stats->rows);
      cur = other;
    }
    return (*writer)->Close();
  };
  absl::Status status = run();
  progress.Finish();
  stats->total_seconds = Seconds(start);
  if (!status.ok()) {
    (void)(*writer)->Close();
    if (options.output != "-") std::remove(options.output.c_str());
  }
  return status;
}

}  // namespace

absl::Status StreamRows(const StreamOptions& options, const ComputeFn& compute,
                        StreamStats* stats) {
  const DoubleRowConverter* converter = options.converter;
  const int64_t in_cols = options.in_cols;
  std::vector<double> doubles[2];  // per slot: the converter's input
  return StreamLoop<float>(
      options,
      [converter, in_cols, &doubles](CsvReader* r, int64_t chunk, int slot, std::vector<float>* b,
                                     std::vector<std::string>* kept) -> absl::StatusOr<int64_t> {
        if (converter == nullptr) return r->ReadRows(chunk, b, kept);
        absl::StatusOr<int64_t> n = r->ReadRows(chunk, &doubles[slot], kept);
        if (!n.ok()) return n;
        b->resize(static_cast<size_t>(*n * in_cols));
        converter->ConvertRows(doubles[slot].data(), *n, b->data());
        return n;
      },
      [&compute, in_cols](const float* rows, int64_t n, MatrixView<float> out) {
        return compute(MakeRowsView(rows, n, in_cols), out);
      },
      stats);
}

absl::Status StreamDoubleRows(const StreamOptions& options, const DoubleComputeFn& compute,
                              StreamStats* stats) {
  return StreamLoop<double>(
      options,
      [](CsvReader* r, int64_t chunk, int, std::vector<double>* b,
         std::vector<std::string>* kept) { return r->ReadRows(chunk, b, kept); },
      compute, stats);
}

std::vector<std::string> FeatureNamesOrDefault(const std::vector<std::string>& names,
                                               int64_t num_features) {
  if (static_cast<int64_t>(names.size()) == num_features) return names;
  std::vector<std::string> out;
  for (int64_t i = 0; i < num_features; ++i) out.push_back(absl::StrCat("f", i));
  return out;
}

std::vector<std::string> ResultColumnNames(const ResultColumns& c) {
  std::vector<std::string> names;
  if (!c.explain) {
    const char* base = c.kind == OutputKind::kMargin ? "margin"
                       : c.kind == OutputKind::kLeaf ? "leaf"
                                                     : "prediction";
    if (c.width == 1 && c.kind != OutputKind::kLeaf) return {base};
    for (int64_t j = 0; j < c.width; ++j) names.push_back(absl::StrCat(base, "_", j));
    return names;
  }
  std::vector<std::string> block = c.feature_names;
  block.push_back("bias");
  for (int k = 0; k < c.num_outputs; ++k) {
    const std::string prefix = c.num_outputs > 1 ? absl::StrCat("out", k, ".") : "";
    for (const std::string& a : block) {
      if (!c.interactions) {
        names.push_back(prefix + a);
        continue;
      }
      for (const std::string& b : block) names.push_back(absl::StrCat(prefix, a, "*", b));
    }
  }
  return names;
}

void ApplyColumnArgs(const CliArgs& args, const ResultColumns& columns, StreamOptions* stream) {
  stream->header = args.header;
  stream->keep = args.keep;
  stream->feature_names = columns.feature_names;
  if (args.header || args.output_header) stream->output_header = ResultColumnNames(columns);
}

void AppendFeatureStats(const std::vector<std::string>& names,
                        const std::vector<std::string>& types, std::vector<Stat>* stats) {
  stats->push_back({"feature_names", "", StatKind::kList, names});
  stats->push_back({"feature_types", "", StatKind::kList, types});
}

std::vector<Stat> ForestStats(const Forest& forest) {
  std::vector<Stat> s;
  auto text = [&](const char* key, std::string v) {
    s.push_back({key, std::move(v), StatKind::kText});
  };
  auto num = [&](const char* key, double v) { s.push_back({key, Num(v), StatKind::kNumber}); };
  auto yes_no = [&](const char* key, bool v) {
    s.push_back({key, v ? "yes" : "no", StatKind::kBool});
  };

  text("format", ModelFormatName(forest.format));
  text("library_version", forest.library_version);
  num("memory_bytes", static_cast<double>(forest.MemoryBytes()));
  num("features", forest.num_features);
  num("outputs", forest.num_outputs);
  num("iterations", forest.num_iterations);
  num("trees", static_cast<double>(forest.trees.size()));
  num("nodes", static_cast<double>(forest.nodes.size()));
  num("leaves", static_cast<double>(forest.num_leaves));
  num("max_depth", forest.max_depth);

  // Mean leaf depth and mean tree depth: how far a row travels, the cost driver of every engine.
  double leaf_depth_sum = 0;
  double tree_depth_sum = 0;
  int64_t leaves = 0;
  int64_t weighted_trees = 0;
  std::vector<std::pair<int32_t, int32_t>> stack;
  for (size_t t = 0; t < forest.trees.size(); ++t) {
    const Tree& tree = forest.trees[t];
    tree_depth_sum += tree.depth;
    weighted_trees += tree.weight != 1.0;
    const Node* nodes = forest.TreeNodes(static_cast<int>(t));
    if (tree.num_nodes == 0) continue;
    stack.assign(1, {0, 0});
    while (!stack.empty()) {
      auto [n, d] = stack.back();
      stack.pop_back();
      if (n < 0 || static_cast<uint32_t>(n) >= tree.num_nodes) continue;
      if (nodes[n].is_leaf()) {
        leaf_depth_sum += d;
        ++leaves;
      } else {
        stack.push_back({nodes[n].left, d + 1});
        stack.push_back({nodes[n].right, d + 1});
      }
    }
  }
  num("mean_tree_depth", forest.trees.empty() ? 0.0 : tree_depth_sum / forest.trees.size());
  num("mean_leaf_depth", leaves == 0 ? 0.0 : leaf_depth_sum / leaves);

  text("objective", forest.objective.name);
  text("link", LinkName(forest.objective.link));
  if (forest.objective.link == Link::kSigmoid && forest.objective.sigmoid_alpha != 1.0) {
    num("sigmoid_alpha", forest.objective.sigmoid_alpha);
  }
  yes_no("average_output", forest.objective.average_output);
  std::string base;
  for (size_t k = 0; k < forest.base_margin.size(); ++k) {
    absl::StrAppend(&base, k ? "," : "", Num(forest.base_margin[k]));
  }
  text("base_margin", base);
  yes_no("categorical_splits", forest.has_categorical);
  yes_no("linear_leaves", forest.has_linear_leaves);
  yes_no("vector_leaves", forest.has_vector_leaves);
  num("weighted_trees", static_cast<double>(weighted_trees));
  AppendFeatureStats(forest.feature_names, forest.feature_types, &s);
  return s;
}

std::string RenderStats(const std::vector<Stat>& stats, bool json) {
  std::string out;
  if (json) {
    out = "{";
    for (size_t i = 0; i < stats.size(); ++i) {
      const Stat& st = stats[i];
      std::string value = st.kind == StatKind::kNumber ? st.value
                          : st.kind == StatKind::kBool ? (st.value == "yes" ? "true" : "false")
                                                       : JsonString(st.value);
      if (st.kind == StatKind::kList) {
        value = "[";
        for (size_t j = 0; j < st.list.size(); ++j) {
          absl::StrAppend(&value, j ? ", " : "", JsonString(st.list[j]));
        }
        value += "]";
      }
      absl::StrAppend(&out, i ? ", " : "", JsonString(st.key), ": ", value);
    }
    return out + "}\n";
  }
  size_t width = 0;
  for (const Stat& s : stats) width = std::max(width, s.key.size());
  for (const Stat& s : stats) {
    std::string key = s.key;
    std::replace(key.begin(), key.end(), '_', ' ');
    const std::string value = s.kind == StatKind::kList
                                  ? (s.list.empty() ? "(none)" : absl::StrJoin(s.list, ", "))
                                  : s.value;
    absl::StrAppend(&out, key, std::string(width + 2 - key.size(), ' '), value, "\n");
  }
  return out;
}

int RunLocal(const CliArgs& args) {
  switch (args.command) {
    case Command::kPredict: return RunPredict(args);
    case Command::kExplain: return RunExplain(args);
    case Command::kInspect: return RunInspect(args);
    default: break;
  }
  return Fail(absl::InvalidArgumentError("RunLocal: not a model command"));
}

}  // namespace grove::cli
