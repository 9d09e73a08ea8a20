#include "client/cli_remote.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli_local.h"
#include "client/progress.h"
#include "core/io/csv.h"
#include "core/io/file.h"
#include "core/model/feature_groups.h"

namespace grove::cli {
namespace {


// Values per request message (input or output, whichever is wider): 4M floats = 16 MiB.
constexpr int64_t kValuesPerMessage = int64_t{1} << 22;
// ExplainStream messages in flight.
constexpr int kStreamWindow = 4;

int Fail(const absl::Status& status) {
  std::string message(status.message());
  std::replace(message.begin(), message.end(), '\n', ' ');
  std::fprintf(stderr, "grove: error: %s\n", message.c_str());
  return 1;
}

client::CallOptions Call(const CliArgs& args) {
  client::CallOptions call;
  if (args.timeout_seconds > 0) call.timeout = absl::Seconds(args.timeout_seconds);
  return call;
}

// Rows per request for rows of `in_cols` values and results of `out_cols` values.
int64_t RowsPerMessage(const grove::v1::ModelMetadata& meta, int64_t in_cols, int64_t out_cols) {
  int64_t n = std::max<int64_t>(1, kValuesPerMessage / std::max<int64_t>({1, in_cols, out_cols}));
  if (meta.max_request_rows() > 0) n = std::min(n, meta.max_request_rows());
  return n;
}

struct RemoteModel {
  std::unique_ptr<client::GroveClient> client;
  grove::v1::ModelMetadata meta;
  int64_t version = 0;
};

absl::StatusOr<RemoteModel> Open(const CliArgs& args) {
  absl::StatusOr<int64_t> version = ParseModelVersion(args);
  if (!version.ok()) return version.status();
  absl::StatusOr<std::unique_ptr<client::GroveClient>> c = ConnectToServer(args);
  if (!c.ok()) return c.status();
  absl::StatusOr<grove::v1::ModelMetadata> meta =
      (*c)->GetModelMetadata(args.model, *version, Call(args));
  if (!meta.ok()) return DescribeRemoteError(meta.status(), args);
  return RemoteModel{*std::move(c), *std::move(meta), *version};
}

void PrintVerbose(const CliArgs& args, const RemoteModel& model, const StreamStats& stats,
                  int64_t requests) {
  if (!args.verbose) return;
  std::fprintf(stderr,
               "grove: server %s, model %s version %lld (%s, %d trees); engines: predict %s, "
               "explain %s\n",
               args.server.c_str(), model.meta.name().c_str(),
               static_cast<long long>(model.meta.version()), model.meta.format().c_str(),
               model.meta.num_trees(), model.meta.predict_engine().c_str(),
               model.meta.explain_engine().c_str());
  std::fprintf(stderr,
               "grove: %lld rows in %lld chunks, %lld requests; remote %.3f s, total %.3f s "
               "(%.0f rows/s)\n",
               static_cast<long long>(stats.rows), static_cast<long long>(stats.chunks),
               static_cast<long long>(requests), stats.compute_seconds, stats.total_seconds,
               stats.total_seconds > 0 ? stats.rows / stats.total_seconds : 0.0);
}

// Copies `m` (rows x cols) into `out` at row `row0`, checking the width.
absl::Status CopyRows(const client::Matrix& m, int64_t expected_rows, MatrixView<float> out,
                      int64_t row0, const char* what) {
  if (m.rows != expected_rows || m.cols != out.cols ||
      static_cast<int64_t>(m.values.size()) != m.rows * m.cols) {
    return absl::InternalError(absl::StrCat("the server answered ", m.rows, "x", m.cols, " ", what,
                                            " for ", expected_rows, "x", out.cols));
  }
  for (int64_t r = 0; r < m.rows; ++r) {
    std::memcpy(out.data + (row0 + r) * out.stride, m.values.data() + r * m.cols,
                static_cast<size_t>(m.cols) * sizeof(float));
  }
  return absl::OkStatus();
}

// Rows of one chunk as the CSV's doubles. For LightGBM models they go out as Matrix.raw_f64 and
// the server converts them exactly as the local CLI does (core/model/double_rows.h: LightGBM
// compares doubles with double thresholds); for XGBoost models a cast to float is that conversion,
// and float32 rows go out (half the bytes).
struct DoubleRows {
  const double* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  const double* Row(int64_t r) const { return data + r * cols; }
  std::vector<float> Floats(int64_t r0, int64_t n) const {
    std::vector<float> f(static_cast<size_t>(n * cols));
    for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(Row(r0)[i]);
    return f;
  }
};
using RemoteComputeFn = std::function<absl::Status(const DoubleRows& rows, MatrixView<float> out)>;

// StreamRows (client/cli_local.h) for remote mode: rows stay doubles (see StreamDoubleRows).
absl::Status RemoteStreamRows(const StreamOptions& options, const RemoteComputeFn& compute,
                              StreamStats* stats) {
  const int64_t cols = options.in_cols;
  return StreamDoubleRows(
      options,
      [&compute, cols](const double* rows, int64_t n, MatrixView<float> out) {
        return compute(DoubleRows{rows, n, cols}, out);
      },
      stats);
}

// The CSV decoders of the categories the server's metadata lists (CategoryCellDecoders), with the
// unknown-category rule of the model's library (its format).
std::vector<CsvCellDecoder> RemoteCategoryDecoders(const grove::v1::ModelMetadata& meta,
                                                   const std::vector<std::string>& names) {
  if (meta.categories_size() == 0) return {};
  auto categories = std::make_shared<std::vector<FeatureCategories>>(names.size());
  for (const grove::v1::FeatureCategories& c : meta.categories()) {
    if (c.feature() < 0 || static_cast<size_t>(c.feature()) >= names.size()) continue;
    FeatureCategories& out = (*categories)[static_cast<size_t>(c.feature())];
    out.strings.assign(c.strings().begin(), c.strings().end());
    out.numbers.assign(c.numbers().begin(), c.numbers().end());
    out.hashes.assign(c.hashes().begin(), c.hashes().end());
  }
  const UnknownCategory unknown = absl::StartsWith(meta.format(), "xgboost")
                                      ? UnknownCategory::kError
                                      : UnknownCategory::kMissing;
  return CategoryCellDecoders(categories, unknown, names);
}

bool SendDoubles(const grove::v1::ModelMetadata& meta) {
  return absl::StartsWith(meta.format(), "lightgbm");
}

client::Output ToClientOutput(OutputKind kind) {
  switch (kind) {
    case OutputKind::kMargin:
      return client::Output::kMargin;
    case OutputKind::kPrediction:
      return client::Output::kPrediction;
    case OutputKind::kLeaf:
      return client::Output::kLeaf;
  }
  return client::Output::kPrediction;
}

const client::Matrix& Pick(const client::PredictResult& r, OutputKind kind) {
  switch (kind) {
    case OutputKind::kMargin:
      return r.margin;
    case OutputKind::kLeaf:
      return r.leaf;
    case OutputKind::kPrediction:
      break;
  }
  return r.prediction;
}

// The columns of a result of `meta`'s model (the output header; --header's feature names).
ResultColumns Columns(const grove::v1::ModelMetadata& meta, bool explain, const CliArgs& args,
                      int64_t width) {
  ResultColumns c;
  c.feature_names = FeatureNamesOrDefault(
      std::vector<std::string>(meta.feature_names().begin(), meta.feature_names().end()),
      meta.num_features());
  c.num_outputs = meta.num_outputs();
  c.explain = explain;
  c.interactions = args.interactions;
  c.kind = args.kind;
  c.width = width;
  return c;
}

// --shared-memory: one POSIX shared memory object of this process, registered with the server
// for the run: rows go in at offset 0, results come back after them. Unregistered and unlinked at
// the end.
class SharedRegion {
 public:
  static absl::StatusOr<std::unique_ptr<SharedRegion>> Create(client::GroveClient* client,
                                                              int64_t rows_bytes,
                                                              int64_t results_bytes,
                                                              const client::CallOptions& call) {
    const std::string name = absl::StrCat("grove-predict-", getpid());
    const int64_t results_at = (rows_bytes + 63) / 64 * 64;
    absl::StatusOr<std::unique_ptr<client::SharedMemoryBuffer>> buffer =
        client::SharedMemoryBuffer::Create("/" + name, results_at + results_bytes);
    if (!buffer.ok()) return buffer.status();
    if (absl::Status s = client->RegisterSharedMemory(name, (*buffer)->key(), 0,
                                                      static_cast<uint64_t>((*buffer)->size()),
                                                      call);
        !s.ok()) {
      return s;
    }
    return std::unique_ptr<SharedRegion>(
        new SharedRegion(client, name, *std::move(buffer), results_at, call));
  }
  ~SharedRegion() { (void)client_->UnregisterSharedMemory(name_, call_); }

  const std::string& name() const { return name_; }
  char* rows() const { return buffer_->data(); }
  // The results' range (after the rows) and its bytes here.
  grove::v1::SharedMemoryRange results() const {
    grove::v1::SharedMemoryRange r;
    r.set_region(name_);
    r.set_offset(static_cast<uint64_t>(results_at_));
    r.set_byte_size(static_cast<uint64_t>(buffer_->size() - results_at_));
    return r;
  }
  const char* results_data() const { return buffer_->data() + results_at_; }

 private:
  SharedRegion(client::GroveClient* client, std::string name,
               std::unique_ptr<client::SharedMemoryBuffer> buffer, int64_t results_at,
               client::CallOptions call)
      : client_(client), name_(std::move(name)), buffer_(std::move(buffer)),
        results_at_(results_at), call_(call) {}
  client::GroveClient* client_;
  std::string name_;
  std::unique_ptr<client::SharedMemoryBuffer> buffer_;
  int64_t results_at_;
  client::CallOptions call_;
};

int RunRemotePredict(const CliArgs& args) {
  absl::StatusOr<RemoteModel> model = Open(args);
  if (!model.ok()) return Fail(model.status());
  const int64_t in_cols = model->meta.num_features();
  client::PredictParams params;
  params.model = args.model;
  params.version = model->version;
  params.outputs = {ToClientOutput(args.kind)};
  params.iteration_begin = args.iteration_begin;
  params.iteration_end = args.iteration_end;
  params.raw_rows = model->meta.raw_tensors();  // older groved: repeated values

  int64_t out_cols = 0;
  switch (args.kind) {
    case OutputKind::kMargin:
      out_cols = model->meta.num_outputs();
      break;
    case OutputKind::kPrediction:
      out_cols = model->meta.prediction_width();
      break;
    case OutputKind::kLeaf: {
      // Trees in the iteration range: ask the server with one all-missing row (this also checks
      // the range before any input is read).
      std::vector<float> probe(static_cast<size_t>(in_cols),
                               std::numeric_limits<float>::quiet_NaN());
      absl::StatusOr<client::PredictResult> r =
          model->client->Predict(params, probe.data(), 1, in_cols, Call(args));
      if (!r.ok()) return Fail(DescribeRemoteError(r.status(), args));
      out_cols = r->leaf.cols;
      break;
    }
  }
  const int64_t per_request = RowsPerMessage(model->meta, in_cols, out_cols);
  StreamOptions stream = StreamOptionsOf(args, in_cols, out_cols, "predict");
  ApplyColumnArgs(args, Columns(model->meta, false, args, out_cols), &stream);
  stream.decoders = RemoteCategoryDecoders(model->meta, stream.feature_names);
  StreamStats stats;
  int64_t requests = 0;
  const bool doubles = SendDoubles(model->meta);
  std::unique_ptr<SharedRegion> shm;
  if (args.shared_memory) {
    if (!model->meta.shared_memory()) {
      return Fail(absl::FailedPreconditionError(absl::StrCat(
          "--shared-memory: the server at ", args.server, " does not register shared memory "
          "(start groved with --shared_memory, on this host)")));
    }
    absl::StatusOr<std::unique_ptr<SharedRegion>> created = SharedRegion::Create(
        model->client.get(), per_request * in_cols * (doubles ? 8 : 4),
        per_request * out_cols * 4, Call(args));
    if (!created.ok()) return Fail(DescribeRemoteError(created.status(), args));
    shm = *std::move(created);
  }
  // One request of `n` rows from row `r0` of `rows`, inline or through shared memory.
  auto predict = [&](const DoubleRows& rows, int64_t r0,
                     int64_t n) -> absl::StatusOr<client::PredictResult> {
    if (shm == nullptr) {
      return doubles ? model->client->Predict(params, rows.Row(r0), n, in_cols, Call(args))
                     : model->client->Predict(params, rows.Floats(r0, n).data(), n, in_cols,
                                              Call(args));
    }
    if (doubles) {
      std::memcpy(shm->rows(), rows.Row(r0), static_cast<size_t>(n * in_cols) * sizeof(double));
    } else {
      const std::vector<float> floats = rows.Floats(r0, n);
      std::memcpy(shm->rows(), floats.data(), floats.size() * sizeof(float));
    }
    return model->client->PredictSharedMemory(
        params, client::SharedMemoryRows{shm->name(), 0, n, in_cols, doubles}, shm->results(),
        shm->results_data(), Call(args));
  };
  absl::Status status = RemoteStreamRows(
      stream,
      [&](const DoubleRows& rows, MatrixView<float> out) -> absl::Status {
        for (int64_t r0 = 0; r0 < rows.rows; r0 += per_request) {
          const int64_t n = std::min(per_request, rows.rows - r0);
          absl::StatusOr<client::PredictResult> r = predict(rows, r0, n);
          ++requests;
          if (!r.ok()) return DescribeRemoteError(r.status(), args);
          if (absl::Status s = CopyRows(Pick(*r, args.kind), n, out, r0, OutputKindName(args.kind));
              !s.ok()) {
            return s;
          }
        }
        return absl::OkStatus();
      },
      &stats);
  if (!status.ok()) return Fail(status);
  PrintVerbose(args, *model, stats, requests);
  return 0;
}

grove::v1::OutputSpace OutputSpaceToProto(OutputSpace space) {
  switch (space) {
    case OutputSpace::kMargin: return grove::v1::OUTPUT_SPACE_MARGIN;
    case OutputSpace::kProbability: return grove::v1::OUTPUT_SPACE_PROBABILITY;
    case OutputSpace::kProbabilityLinearized: return grove::v1::OUTPUT_SPACE_PROBABILITY_LINEARIZED;
  }
  return grove::v1::OUTPUT_SPACE_MARGIN;
}

int RunRemoteExplain(const CliArgs& args) {
  absl::StatusOr<RemoteModel> model = Open(args);
  if (!model.ok()) return Fail(model.status());
  if (!model->meta.explainable()) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(args.model, ": ",
                                                           model->meta.explain_error().empty()
                                                               ? "the model cannot be explained"
                                                               : model->meta.explain_error())));
  }
  const int64_t in_cols = model->meta.num_features();
  // The columns' players: --groups, resolved here as groved resolves them (for the width and the
  // header); otherwise the model's groups.json when it has one; otherwise its features.
  client::ExplainParams params;
  std::vector<std::string> players;
  if (!args.groups.empty()) {
    const std::vector<std::string> names(model->meta.feature_names().begin(),
                                         model->meta.feature_names().end());
    absl::StatusOr<std::string> text = ReadRegularFile(args.groups, kMaxGroupsJsonBytes);
    if (!text.ok()) return Fail(text.status());
    absl::StatusOr<std::vector<GroupSpec>> spec = ParseFeatureGroupsJson(*text, args.groups);
    if (!spec.ok()) return Fail(spec.status());
    absl::StatusOr<FeatureGroupsPtr> groups =
        ResolveFeatureGroups(*spec, static_cast<int>(in_cols), names);
    if (!groups.ok()) return Fail(groups.status());
    players = (*groups)->names;
    for (const GroupSpec& g : *spec) {
      grove::v1::FeatureGroup& message = params.groups.emplace_back();
      message.set_name(g.name);
      for (const FeatureRef& ref : g.members) {
        if (ref.index >= 0) {
          message.add_feature_indices(static_cast<int32_t>(ref.index));
        } else {
          message.add_features(ref.name);
        }
      }
    }
  } else {
    for (const grove::v1::FeatureGroup& g : model->meta.groups()) players.push_back(g.name());
  }
  const int64_t block = (players.empty() ? in_cols : static_cast<int64_t>(players.size())) + 1;
  const int64_t result_cols =
      model->meta.num_outputs() * (args.interactions ? block * block : block);
  // --residuals: the server's residuals (ExplainRequest.residuals), K columns after the results.
  const int64_t out_cols = result_cols + (args.residuals ? model->meta.num_outputs() : 0);
  params.model = args.model;
  params.version = model->version;
  params.interactions = args.interactions;
  params.method = args.method == ExplainMethod::kInterventional
                      ? grove::v1::EXPLAIN_METHOD_INTERVENTIONAL
                      : grove::v1::EXPLAIN_METHOD_PATH_DEPENDENT;
  params.output_space = OutputSpaceToProto(args.output_space);
  // ATTRIBUTION_<NAME> names the core's attribution <name> (groved maps it back by name).
  if (!grove::v1::Attribution_Parse(
          absl::AsciiStrToUpper(absl::StrCat("ATTRIBUTION_", AttributionName(args.attribution))),
          &params.attribution)) {
    return Fail(absl::InternalError(absl::StrCat("attribution ", AttributionName(args.attribution),
                                                 " has no grove.v1 value")));
  }
  params.iteration_begin = args.iteration_begin;
  params.iteration_end = args.iteration_end;
  params.raw_rows = model->meta.raw_tensors();  // older groved: repeated values
  params.residuals = args.residuals;
  const int64_t per_message = RowsPerMessage(model->meta, in_cols, out_cols);

  StreamOptions stream =
      StreamOptionsOf(args, in_cols, out_cols, args.interactions ? "interactions" : "explain");
  ResultColumns columns = Columns(model->meta, true, args, out_cols);
  columns.residuals = args.residuals;
  columns.groups = players;
  ApplyColumnArgs(args, columns, &stream);
  stream.decoders = RemoteCategoryDecoders(model->meta, stream.feature_names);
  StreamStats stats;
  int64_t requests = 0;
  const bool doubles = SendDoubles(model->meta);
  absl::Status status = RemoteStreamRows(
      stream,
      [&](const DoubleRows& rows, MatrixView<float> out) -> absl::Status {
        // One ExplainStream call per chunk: messages of per_message rows, kStreamWindow in flight.
        int64_t next_row = 0;
        std::vector<int64_t> starts;
        auto take = [&](int64_t* n) {
          if (next_row >= rows.rows) return false;
          *n = std::min(per_message, rows.rows - next_row);
          starts.push_back(next_row);
          next_row += *n;
          ++requests;
          return true;
        };
        client::GroveClient::NextRowsF64Fn next_f64 = [&](std::vector<double>* buf, int64_t* n) {
          if (!take(n)) return false;
          const double* first = rows.Row(starts.back());
          buf->assign(first, first + *n * in_cols);
          return true;
        };
        client::GroveClient::NextRowsFn next_f32 = [&](std::vector<float>* buf, int64_t* n) {
          if (!take(n)) return false;
          *buf = rows.Floats(starts.back(), *n);
          return true;
        };
        auto done = [&](uint64_t sequence, client::ExplainResult&& r) -> absl::Status {
          const int64_t r0 = starts[sequence];
          const int64_t n = (sequence + 1 < starts.size() ? starts[sequence + 1] : next_row) - r0;
          const MatrixView<float> results{out.data, out.rows, result_cols, out.stride};
          absl::Status s = CopyRows(args.interactions ? r.interactions : r.values, n, results, r0,
                                    args.interactions ? "interaction values" : "SHAP values");
          if (!s.ok() || !args.residuals) return s;
          const MatrixView<float> residuals{out.data + result_cols, out.rows,
                                            out.cols - result_cols, out.stride};
          return CopyRows(r.residuals, n, residuals, r0, "residuals");
        };
        absl::Status s = doubles ? model->client->ExplainStream(params, in_cols, next_f64, done,
                                                                kStreamWindow, Call(args))
                                 : model->client->ExplainStream(params, in_cols, next_f32, done,
                                                                kStreamWindow, Call(args));
        return s.ok() ? s : DescribeRemoteError(s, args);
      },
      &stats);
  if (!status.ok()) return Fail(status);
  PrintVerbose(args, *model, stats, requests);
  return 0;
}

std::string JoinOutputs(const grove::v1::ModelMetadata& meta) {
  std::vector<std::string> names;
  for (int o : meta.default_outputs()) {
    switch (o) {
      case grove::v1::OUTPUT_MARGIN:
        names.push_back("margin");
        break;
      case grove::v1::OUTPUT_PREDICTION:
        names.push_back("prediction");
        break;
      case grove::v1::OUTPUT_LEAF:
        names.push_back("leaf");
        break;
      default:
        names.push_back("unspecified");
        break;
    }
  }
  return absl::StrJoin(names, ",");
}

int RunRemoteInspect(const CliArgs& args) {
  absl::StatusOr<RemoteModel> model = Open(args);
  if (!model.ok()) return Fail(model.status());
  const grove::v1::ModelMetadata& m = model->meta;
  std::vector<Stat> s;
  auto text = [&](const char* key, std::string v) {
    s.push_back({key, std::move(v), StatKind::kText});
  };
  auto num = [&](const char* key, double v) {
    s.push_back({key, absl::StrFormat("%.9g", v), StatKind::kNumber});
  };
  auto yes_no = [&](const char* key, bool v) {
    s.push_back({key, v ? "yes" : "no", StatKind::kBool});
  };
  text("server", args.server);
  text("model", m.name());
  num("version", static_cast<double>(m.version()));
  std::vector<std::string> versions;
  for (const grove::v1::VersionStatus& v : m.versions()) {
    std::string state = grove::v1::ModelState_Name(v.state());
    versions.push_back(
        absl::StrCat(v.version(), ":", absl::AsciiStrToLower(state.substr(state.rfind('_') + 1))));
  }
  text("versions", absl::StrJoin(versions, ","));
  for (const grove::v1::VersionStatus& v : m.versions()) {
    if (v.version() == m.version()) {
      text("path", v.path());
      num("load_seconds", v.load_seconds());
    }
  }
  text("format", m.format());
  text("library_version", m.library_version());
  num("features", m.num_features());
  num("outputs", m.num_outputs());
  num("prediction_width", m.prediction_width());
  num("iterations", m.num_iterations());
  num("trees", m.num_trees());
  num("max_depth", m.max_depth());
  text("objective", m.objective());
  text("link", m.link());
  yes_no("categorical_splits", m.has_categorical());
  yes_no("linear_leaves", m.has_linear_leaves());
  yes_no("explainable", m.explainable());
  if (!m.explain_error().empty()) text("explain_error", m.explain_error());
  text("predict_engine", m.predict_engine());
  text("explain_engine", m.explain_engine());
  num("max_request_rows", static_cast<double>(m.max_request_rows()));
  num("max_interaction_values_per_row", static_cast<double>(m.max_interaction_values_per_row()));
  yes_no("interactions_allowed", m.interactions_allowed());
  num("background_rows", static_cast<double>(m.background_rows()));
  text("default_outputs", JoinOutputs(m));
  AppendFeatureStats({m.feature_names().begin(), m.feature_names().end()},
                     {m.feature_types().begin(), m.feature_types().end()}, &s);
  const std::string out = RenderStats(s, args.json);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

absl::StatusOr<int64_t> ParseModelVersion(const CliArgs& args) {
  if (args.model_version.empty()) return 0;
  int64_t v = 0;
  const std::string& s = args.model_version;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model-version: '", s, "' is not a positive integer"));
  }
  return v;
}

absl::StatusOr<std::unique_ptr<client::GroveClient>> ConnectToServer(const CliArgs& args) {
  client::ClientOptions options;
  options.target = args.server;
  options.tls = args.tls;
  options.tls_ca_file = args.tls_ca;
  options.tls_cert_file = args.tls_cert;
  options.tls_key_file = args.tls_key;
  options.token = args.token;
  if (options.token.empty()) {
    const char* env = std::getenv("GROVE_TOKEN");
    if (env != nullptr) options.token = env;
  }
  if (args.timeout_seconds > 0) options.default_timeout = absl::Seconds(args.timeout_seconds);
  return client::GroveClient::Create(options);
}

absl::Status DescribeRemoteError(const absl::Status& status, const CliArgs& args) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(status.message(), " (", absl::StatusCodeToString(status.code()),
                                   " from ", args.server, ")"));
}

int RunRemote(const CliArgs& args) {
  if (!args.model_version.empty() && !ParseModelVersion(args).ok()) {
    std::fprintf(stderr, "grove: error: %s\n",
                 std::string(ParseModelVersion(args).status().message()).c_str());
    return 2;
  }
  switch (args.command) {
    case Command::kPredict:
      return RunRemotePredict(args);
    case Command::kExplain:
      return RunRemoteExplain(args);
    case Command::kInspect:
      return RunRemoteInspect(args);
    case Command::kBench:
      return RunBench(args);
    default:
      break;
  }
  return Fail(absl::InvalidArgumentError("RunRemote: not a model command"));
}

}  // namespace grove::cli
