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
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "client/progress.h"
#include "core/common/json_string.h"
#include "core/common/thread_pool.h"
#include "core/io/csv.h"
#include "core/io/file.h"
#include "core/io/npy.h"
#include "core/io/parquet.h"
#include "core/io/parquet_rows.h"
#include "core/model/category_codes.h"
#include "core/model/feature_groups.h"
#include "core/model/loader.h"
#include "core/servable/background.h"
#include "core/servable/residuals.h"
#include "core/servable/servable.h"
#include "core/servable/top_k.h"

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

// The servable of --model with the command's engine options: engines built on first use, so a
// prediction builds no explanation layout; --strategy forces the strategy of the command's engine
// family (interventional with --background; "cpu": that family's CPU strategies).
absl::StatusOr<ServablePtr> Build(const CliArgs& args, const LoadedModel& model, ThreadPool* pool) {
  EngineOptions options;
  options.device = args.use_gpu ? Device::kAuto : Device::kCpu;
  options.build = EngineBuild::kOnFirstUse;
  options.gpu_wait = GpuWait::kPoll;  // the command's thread has nothing else to do
  if (args.command == Command::kPredict) {
    options.predict_strategy = args.strategy;
  } else if (args.command == Command::kExplain && !args.background.empty()) {
    options.interventional_strategy = args.strategy;
  } else if (args.command == Command::kExplain) {
    options.explain_strategy = args.strategy;
  }
  absl::StatusOr<ServablePtr> servable = BuildServable(model.forest, nullptr, options, pool);
  if (!servable.ok()) return NameFile(servable.status(), args.model);
  return servable;
}

// An explanation's results with their additivity residuals after them (--residuals): `op` into a
// scratch matrix, the model's output (`predict`: its kind) beside it, then both into `out` (n x
// (width + K)). Reused across chunks; one caller at a time.
class ResidualColumns {
 public:
  ResidualColumns(const Servable& servable, Operation op, const RunParams& params,
                  RunParams predict, bool interactions)
      : servable_(servable), op_(op), params_(params), predict_(predict),
        interactions_(interactions) {}

  absl::Status Run(RowsView rows, MatrixView<float> out, RunInfo* info) {
    const Forest& f = servable_.forest();
    const int k = f.num_outputs;
    const int64_t width = servable_.Width(op_, params_);
    if (servable_.Width(Operation::kPredict, predict_) != k) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--residuals compares each output with the model's, but this model predicts ",
          servable_.Width(Operation::kPredict, predict_), " values for its ", k, " outputs"));
    }
    const int64_t n = rows.rows;
    values_.resize(static_cast<size_t>(n * width));
    outputs_.resize(static_cast<size_t>(n * k));
    residuals_.resize(static_cast<size_t>(n * k));
    if (absl::Status s =
            servable_.Run(op_, params_, rows, MakeMatrixView(values_.data(), n, width), info);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = servable_.Run(Operation::kPredict, predict_, rows,
                                       MakeMatrixView(outputs_.data(), n, k), nullptr);
        !s.ok()) {
      return s;
    }
    const int players = NumPlayers(f.num_features, params_.groups.get());
    if (interactions_) {
      InteractionResiduals(values_.data(), n, k, players, outputs_.data(), residuals_.data());
    } else {
      AdditivityResiduals(values_.data(), n, k, players, outputs_.data(), residuals_.data());
    }
    for (int64_t r = 0; r < n; ++r) {
      std::copy(values_.begin() + r * width, values_.begin() + (r + 1) * width, out.Row(r));
      std::copy(residuals_.begin() + r * k, residuals_.begin() + (r + 1) * k, out.Row(r) + width);
    }
    return absl::OkStatus();
  }

 private:
  const Servable& servable_;
  Operation op_;
  RunParams params_;
  RunParams predict_;
  bool interactions_;
  std::vector<float> values_, outputs_, residuals_;
};

// Streams --input through `op` of `servable` to --output; with `residuals` (explain
// --residuals), K residual columns after the results.
int RunOperation(const CliArgs& args, const LoadedModel& model, const Servable& servable,
                 Operation op, const RunParams& params, ResultColumns columns,
                 ResidualColumns* residuals = nullptr) {
  StreamOptions stream = StreamOptionsOf(
      args, model.forest->num_features,
      servable.Width(op, params) + (residuals != nullptr ? model.forest->num_outputs : 0),
      OperationName(op));
  columns.feature_names =
      FeatureNamesOrDefault(model.forest->feature_names, model.forest->num_features);
  columns.num_outputs = model.forest->num_outputs;
  columns.width = stream.out_cols;
  ApplyColumnArgs(args, columns, &stream);
  stream.decoders = CategoryCellDecoders(
      std::shared_ptr<const std::vector<FeatureCategories>>(model.forest,
                                                            &model.forest->categories),
      UnknownCategoryOf(model.forest->format), columns.feature_names);
  const DoubleRowConverter converter(*model.forest);
  stream.converter = &converter;
  RunInfo info;
  StreamStats stats;
  absl::Status status = StreamRows(
      stream,
      [&](RowsView rows, MatrixView<float> out) {
        return NameFile(residuals != nullptr ? residuals->Run(rows, out, &info)
                                             : servable.Run(op, params, rows, out, &info),
                        args.model);
      },
      &stats);
  if (!status.ok()) return Fail(status);
  PrintVerbose(args, model, servable.Describe(op), info, stats);
  return 0;
}

int RunPredict(const CliArgs& args) {
  absl::StatusOr<LoadedModel> model = Load(args.model);
  if (!model.ok()) return Fail(model.status());
  std::unique_ptr<ThreadPool> pool = MakeCallerPool(args.threads);
  absl::StatusOr<ServablePtr> servable = Build(args, *model, pool.get());
  if (!servable.ok()) return Fail(servable.status());
  if (absl::Status s = (*servable)->Available(Operation::kPredict); !s.ok()) {
    return Fail(NameFile(s, args.model));
  }
  RunParams params;
  params.kind = args.kind;
  params.iteration_begin = args.iteration_begin;
  params.iteration_end = args.iteration_end;
  ResultColumns columns;
  columns.kind = args.kind;
  return RunOperation(args, *model, **servable, Operation::kPredict, params, columns);
}

int RunExplain(const CliArgs& args) {
  absl::StatusOr<LoadedModel> model = Load(args.model);
  if (!model.ok()) return Fail(model.status());
  std::unique_ptr<ThreadPool> pool = MakeCallerPool(args.threads);
  absl::StatusOr<ServablePtr> servable = Build(args, *model, pool.get());
  if (!servable.ok()) return Fail(servable.status());
  if (absl::Status s = (*servable)->Explainable(); !s.ok()) return Fail(NameFile(s, args.model));
  std::shared_ptr<const Background> background;
  if (!args.background.empty()) {
    // --background: read as groved reads a model's background.
    absl::StatusOr<Background> bg = LoadBackgroundFile(*model->forest, args.background);
    if (!bg.ok()) return Fail(bg.status());
    background = std::make_shared<const Background>(*std::move(bg));
    servable = (*servable)->WithBackground(background);
    if (!servable.ok()) return Fail(servable.status());
  }
  const absl::StatusOr<Operation> explain_op = ExplainOperationOf(
      background != nullptr ? ExplainMethod::kInterventional : ExplainMethod::kPathDependent,
      args.attribution, args.interactions);
  if (!explain_op.ok()) return Fail(explain_op.status());
  const Operation op = *explain_op;
  if (absl::Status s = (*servable)->Available(op); !s.ok()) {
    // Errors of the background name its file; the others the model's.
    return Fail(background != nullptr ? s : NameFile(s, args.model));
  }
  RunParams params;
  params.output_space = args.output_space;
  params.iteration_begin = args.iteration_begin;
  params.iteration_end = args.iteration_end;
  ResultColumns columns;
  CachePin groups_pin;  // the run's grouping, prepared once before its rows
  if (!args.groups.empty()) {
    absl::StatusOr<FeatureGroupsPtr> groups = LoadFeatureGroupsFile(
        args.groups, model->forest->num_features, model->forest->feature_names);
    if (!groups.ok()) return Fail(groups.status());
    params.groups = *groups;
    columns.groups = (*groups)->names;
    if (background == nullptr && op != Operation::kSaabas) {  // Saabas reads no path layout
      absl::StatusOr<CachePin> pin = (*servable)->PinGroups(**groups);
      if (!pin.ok()) return Fail(NameFile(pin.status(), args.groups));
      groups_pin = *std::move(pin);
    }
  }
  columns.explain = true;
  columns.interactions = args.interactions;
  columns.residuals = args.residuals;
  if (!args.residuals) return RunOperation(args, *model, **servable, op, params, columns);
  // The model's output in the explained space: the margin, or the link's output.
  RunParams predict;
  predict.kind = ExplainedOutputKind(args.output_space);
  predict.iteration_begin = args.iteration_begin;
  predict.iteration_end = args.iteration_end;
  ResidualColumns residuals(**servable, op, params, predict, args.interactions);
  return RunOperation(args, *model, **servable, op, params, columns, &residuals);
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
  std::unique_ptr<ThreadPool> pool = MakeCallerPool(args.threads);
  absl::StatusOr<ServablePtr> servable = Build(args, *model, pool.get());
  if (!servable.ok()) return Fail(servable.status());
  stats.push_back({"predict_engine", (*servable)->Describe(Operation::kPredict), StatKind::kText});
  stats.push_back({"explain_engine", (*servable)->Describe(Operation::kExplain), StatKind::kText});
  if (const std::string paths = (*servable)->PathLayoutStats(); !paths.empty() &&
      (*servable)->Available(Operation::kExplain).ok()) {
    stats.push_back({"explain_paths", paths, StatKind::kText});
  }
  const std::string text = RenderStats(stats, args.json);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

namespace {

// Where the rows of --input come from: a CSV file read in chunks (CsvReader), a Parquet file
// decoded a row group at a time (ParquetRowReader), or a .npy array, read whole and handed out in
// chunks.
class RowSource {
 public:
  virtual ~RowSource() = default;
  virtual absl::StatusOr<int64_t> ReadRows(int64_t max_rows, std::vector<float>* out,
                                           std::vector<std::string>* kept) = 0;
  virtual absl::StatusOr<int64_t> ReadRows(int64_t max_rows, std::vector<double>* out,
                                           std::vector<std::string>* kept) = 0;
  virtual int64_t bytes_consumed() const = 0;
  virtual int64_t total_bytes() const = 0;
};

// A reader that hands out rows (CsvReader, ParquetRowReader) as a RowSource.
template <typename Reader>
class ReaderSource : public RowSource {
 public:
  explicit ReaderSource(std::unique_ptr<Reader> reader) : reader_(std::move(reader)) {}
  absl::StatusOr<int64_t> ReadRows(int64_t max_rows, std::vector<float>* out,
                                   std::vector<std::string>* kept) override {
    return reader_->ReadRows(max_rows, out, kept);
  }
  absl::StatusOr<int64_t> ReadRows(int64_t max_rows, std::vector<double>* out,
                                   std::vector<std::string>* kept) override {
    return reader_->ReadRows(max_rows, out, kept);
  }
  int64_t bytes_consumed() const override { return reader_->bytes_consumed(); }
  int64_t total_bytes() const override { return reader_->total_bytes(); }
  Reader* reader() { return reader_.get(); }

 private:
  std::unique_ptr<Reader> reader_;
};
using CsvSource = ReaderSource<CsvReader>;

class NpySource : public RowSource {
 public:
  NpySource(NpyArray array, int64_t cols, int64_t file_bytes)
      : array_(std::move(array)), cols_(cols), file_bytes_(file_bytes) {}
  absl::StatusOr<int64_t> ReadRows(int64_t max_rows, std::vector<float>* out,
                                   std::vector<std::string>*) override {
    return Take(max_rows, out);
  }
  absl::StatusOr<int64_t> ReadRows(int64_t max_rows, std::vector<double>* out,
                                   std::vector<std::string>*) override {
    return Take(max_rows, out);
  }
  int64_t bytes_consumed() const override {
    const int64_t rows = cols_ > 0 ? static_cast<int64_t>(array_.values.size()) / cols_ : 0;
    return rows > 0 ? file_bytes_ * next_ / rows : file_bytes_;
  }
  int64_t total_bytes() const override { return file_bytes_; }

 private:
  template <typename T>
  int64_t Take(int64_t max_rows, std::vector<T>* out) {
    const int64_t rows = static_cast<int64_t>(array_.values.size()) / cols_;
    const int64_t n = std::min(max_rows, rows - next_);
    const double* first = array_.values.data() + next_ * cols_;
    out->assign(first, first + n * cols_);  // float: cast as a float64 array is cast
    next_ += n;
    return n;
  }

  NpyArray array_;
  int64_t cols_;
  int64_t file_bytes_;
  int64_t next_ = 0;
};

bool IsNpy(const std::string& path) { return absl::EndsWith(path, ".npy"); }

// The rows of a .npy input: a 2-D array [rows, in_cols] (a 1-D array of in_cols values is one
// row), any dtype ParseNpy reads, C or Fortran order.
absl::StatusOr<std::unique_ptr<RowSource>> OpenNpy(const StreamOptions& options) {
  if (options.header || !options.keep.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.input, ": --header and --keep read a CSV header; a .npy array has no column "
        "names: its columns are the model's features in order"));
  }
  absl::StatusOr<std::string> bytes = ReadRegularFile(options.input);
  if (!bytes.ok()) return bytes.status();
  // Values are held as doubles: at most one per byte of the file (the smallest dtype).
  absl::StatusOr<NpyArray> array =
      ParseNpy(*bytes, options.input, static_cast<int64_t>(bytes->size()));
  if (!array.ok()) return array.status();
  const std::vector<int64_t>& shape = array->shape;
  const bool one_row = shape.size() == 1 && shape[0] == options.in_cols;
  if (!one_row && (shape.size() != 2 || shape[1] != options.in_cols)) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.input, ": the array has shape (", absl::StrJoin(shape, ", "),
        "); the model takes rows of ", options.in_cols, " features: (rows, ", options.in_cols,
        ")"));
  }
  const int64_t size = static_cast<int64_t>(bytes->size());
  return std::unique_ptr<RowSource>(new NpySource(*std::move(array), options.in_cols, size));
}

// A Parquet file: by its content (the magic "PAR1" at its start and end), whatever its name, or
// by its name (".parquet": then a file that is not Parquet is an error saying so).
bool IsParquet(const std::string& path) {
  if (path == "-") return false;
  if (absl::EndsWith(path, ".parquet")) return true;
  int64_t size = 0;
  absl::StatusOr<ScopedFd> fd = OpenRegularFile(path, &size);
  if (!fd.ok() || size < 12) return false;
  char head[4], tail[4];
  return ::pread(fd->get(), head, 4, 0) == 4 && ::pread(fd->get(), tail, 4, size - 4) == 4 &&
         LooksLikeParquet(absl::string_view(head, 4)) &&
         LooksLikeParquet(absl::string_view(tail, 4));
}

// The rows of a Parquet input: its columns named as the model's features (in any order; --header
// is implied, a Parquet file always names its columns), --keep columns passed through.
absl::StatusOr<std::unique_ptr<RowSource>> OpenParquet(const StreamOptions& options) {
  absl::StatusOr<std::unique_ptr<ParquetRowReader>> reader =
      ParquetRowReader::Open(options.input, options.feature_names, options.keep);
  if (!reader.ok()) return reader.status();
  (*reader)->SetCellDecoders(options.decoders);
  return std::unique_ptr<RowSource>(new ReaderSource<ParquetRowReader>(*std::move(reader)));
}

// The read-compute-write loop of StreamRows and StreamDoubleRows: the next chunk is parsed (by
// `read`, into one of two buffers) while the current one is computed.
template <typename T>
using ReadFn = std::function<absl::StatusOr<int64_t>(RowSource*, int64_t chunk, int slot,
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

// --top-k: SHAP values [n, K, F + 1] into rows of K x k (feature index, value) pairs.
void RankTopK(const StreamOptions& options, const float* shap, int64_t n,
              std::vector<float>* ranked) {
  const int64_t pairs = n * options.top_k_outputs * options.top_k;
  std::vector<int32_t> features(static_cast<size_t>(pairs));
  std::vector<float> values(static_cast<size_t>(pairs));
  TopKFeatures(shap, n, options.top_k_outputs, options.top_k_features, options.top_k,
               features.data(), values.data());
  ranked->resize(static_cast<size_t>(2 * pairs));
  for (int64_t i = 0; i < pairs; ++i) {
    (*ranked)[static_cast<size_t>(2 * i)] = static_cast<float>(features[static_cast<size_t>(i)]);
    (*ranked)[static_cast<size_t>(2 * i + 1)] = values[static_cast<size_t>(i)];
  }
}

template <typename T>
absl::Status StreamLoop(
    const StreamOptions& options, const ReadFn<T>& read,
    const std::function<absl::Status(const T* rows, int64_t n, MatrixView<float> out)>& compute,
    StreamStats* stats) {
  const auto start = Clock::now();
  *stats = StreamStats();
  std::unique_ptr<RowSource> source;
  if (IsParquet(options.input)) {
    absl::StatusOr<std::unique_ptr<RowSource>> parquet = OpenParquet(options);
    if (!parquet.ok()) return parquet.status();
    source = *std::move(parquet);
  } else if (IsNpy(options.input)) {
    absl::StatusOr<std::unique_ptr<RowSource>> npy = OpenNpy(options);
    if (!npy.ok()) return npy.status();
    source = *std::move(npy);
  } else {
    absl::StatusOr<std::unique_ptr<CsvReader>> reader =
        CsvReader::Open(options.input, options.in_cols, options.read_threads);
    if (!reader.ok()) return reader.status();
    source = std::make_unique<CsvSource>(*std::move(reader));
  }
  absl::StatusOr<std::unique_ptr<CsvWriter>> writer = CsvWriter::Open(options.output);
  if (!writer.ok()) return writer.status();
  const int64_t chunk = options.chunk_rows > 0 ? options.chunk_rows
                                               : AutoChunkRows(options.in_cols, options.out_cols);
  ProgressBar progress(options.progress, options.label);

  auto run = [&]() -> absl::Status {
    RowSource* r = source.get();
    if (auto* csv = dynamic_cast<CsvSource*>(r); csv != nullptr) {
      if (absl::Status s = ApplyHeader(options, csv->reader()); !s.ok()) return s;
      csv->reader()->SetCellDecoders(options.decoders);
    }
    const bool keeping = !options.keep.empty();
    if (!options.output_header.empty()) {
      std::vector<std::string> names = options.keep;
      names.insert(names.end(), options.output_header.begin(), options.output_header.end());
      if (absl::Status s = (*writer)->WriteHeader(names); !s.ok()) return s;
    }
    std::vector<T> buffers[2];
    std::vector<std::string> kept[2];
    std::vector<float> out, ranked;
    const int64_t compute_cols =
        options.top_k > 0
            ? int64_t{options.top_k_outputs} * (options.top_k_features + 1)
            : options.out_cols;
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
      out.resize(static_cast<size_t>(*n * compute_cols));
      const auto t = Clock::now();
      absl::Status s = compute(buffers[cur].data(), *n,
                               MakeMatrixView(out.data(), *n, compute_cols));
      stats->compute_seconds += Seconds(t);
      if (!s.ok()) return s;  // `next` finishes in its destructor
      if (options.top_k > 0) RankTopK(options, out.data(), *n, &ranked);
      const auto result = MakeMatrixView<const float>(
          options.top_k > 0 ? ranked.data() : out.data(), *n, options.out_cols);
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
      [converter, in_cols, &doubles](RowSource* r, int64_t chunk, int slot, std::vector<float>* b,
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
      [](RowSource* r, int64_t chunk, int, std::vector<double>* b,
         std::vector<std::string>* kept) { return r->ReadRows(chunk, b, kept); },
      compute, stats);
}

std::vector<CsvCellDecoder> CategoryCellDecoders(
    std::shared_ptr<const std::vector<FeatureCategories>> categories, UnknownCategory unknown,
    const std::vector<std::string>& feature_names) {
  std::vector<CsvCellDecoder> decoders;
  for (size_t f = 0; f < categories->size() && f < feature_names.size(); ++f) {
    const FeatureCategories& c = (*categories)[f];
    if (c.empty()) continue;
    decoders.resize(feature_names.size());
    // The coder refers to `categories`: its deleter keeps them alive as long as it lives.
    auto owned = std::shared_ptr<const CategoryCodes>(
        new CategoryCodes(c, unknown, feature_names[f]),
        [categories](const CategoryCodes* p) { delete p; });
    const bool string_categories = !c.strings.empty();
    const bool number_categories = !c.numbers.empty();
    decoders[f] = [owned, string_categories,
                   number_categories](std::string_view cell) -> absl::StatusOr<double> {
      // A name is the cell as written, blanks included (core/io/csv.h: as KServe and grove.v1
      // take names); blanks around a number are not part of it.
      absl::string_view name(cell.data(), cell.size());
      if (number_categories) name = absl::StripAsciiWhitespace(name);
      if (const int64_t code = owned->Find(name); code >= 0) return static_cast<double>(code);
      double v;
      if (ParseCsvNumber(cell, &v) && (string_categories || std::isnan(v))) return v;
      absl::StatusOr<float> code = owned->Code(name);  // the unknown category's rule
      if (!code.ok()) return code.status();
      return static_cast<double>(*code);
    };
  }
  return decoders;
}

StreamOptions StreamOptionsOf(const CliArgs& args, int64_t in_cols, int64_t out_cols,
                              std::string label) {
  StreamOptions stream;
  stream.input = args.input;
  stream.output = args.output;
  stream.in_cols = in_cols;
  stream.out_cols = out_cols;
  stream.chunk_rows = args.chunk_rows;
  stream.read_threads = args.threads;
  stream.progress = args.progress;
  stream.label = std::move(label);
  return stream;
}

void ApplyColumnArgs(const CliArgs& args, ResultColumns columns, StreamOptions* stream) {
  stream->header = args.header;
  stream->keep = args.keep;
  stream->feature_names = columns.feature_names;
  if (columns.explain && args.top_k > 0) {
    // Ranked among the explanation's players: its groups where it has them.
    const int features = static_cast<int>(
        columns.groups.empty() ? columns.feature_names.size() : columns.groups.size());
    stream->top_k = std::min(args.top_k, features);
    stream->top_k_outputs = columns.num_outputs;
    stream->top_k_features = features;
    stream->out_cols = int64_t{columns.num_outputs} * 2 * stream->top_k;
    columns.top_k = stream->top_k;
  }
  if (args.header || args.output_header) stream->output_header = ResultColumnNames(columns);
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
