#include "client/cli_args.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#ifndef GROVE_VERSION
#define GROVE_VERSION "0.0.0"
#endif

namespace grove::cli {
namespace {

struct OptionSpec {
  bool takes_value;
  std::set<Command> commands;
};

const std::map<std::string, OptionSpec>& Options() {
  using C = Command;
  static const auto* options = new std::map<std::string, OptionSpec>{
      {"--model", {true, {C::kPredict, C::kExplain, C::kInspect, C::kBench}}},
      {"--input", {true, {C::kPredict, C::kExplain, C::kBench}}},
      {"--output", {true, {C::kPredict, C::kExplain}}},
      {"--kind", {true, {C::kPredict, C::kBench}}},
      {"--interactions", {false, {C::kExplain, C::kBench}}},
      {"--top-k", {true, {C::kExplain}}},
      {"--background", {true, {C::kExplain}}},
      {"--groups", {true, {C::kExplain}}},
      {"--method", {true, {C::kExplain}}},
      {"--output-space", {true, {C::kExplain}}},
      {"--attribution", {true, {C::kExplain}}},
      {"--residuals", {false, {C::kExplain}}},
      {"--iteration-begin", {true, {C::kPredict, C::kExplain, C::kBench}}},
      {"--iteration-end", {true, {C::kPredict, C::kExplain, C::kBench}}},
      {"--threads", {true, {C::kPredict, C::kExplain}}},
      {"--chunk-rows", {true, {C::kPredict, C::kExplain}}},
      {"--strategy", {true, {C::kPredict, C::kExplain}}},
      {"--no-gpu", {false, {C::kPredict, C::kExplain, C::kInspect}}},
      {"--no-progress", {false, {C::kPredict, C::kExplain}}},
      {"--verbose", {false, {C::kPredict, C::kExplain, C::kInspect}}},
      {"--json", {false, {C::kInspect, C::kBench}}},
      {"--header", {false, {C::kPredict, C::kExplain}}},
      {"--keep", {true, {C::kPredict, C::kExplain}}},
      {"--output-header", {false, {C::kPredict, C::kExplain}}},
      {"--server", {true, {C::kPredict, C::kExplain, C::kInspect, C::kBench}}},
      {"--model-version", {true, {C::kPredict, C::kExplain, C::kInspect, C::kBench}}},
      {"--timeout", {true, {C::kPredict, C::kExplain, C::kInspect, C::kBench}}},
      {"--tls", {false, {C::kPredict, C::kExplain, C::kInspect, C::kBench}}},
      {"--tls-ca", {true, {C::kPredict, C::kExplain, C::kInspect, C::kBench}}},
      {"--tls-cert", {true, {C::kPredict, C::kExplain, C::kInspect, C::kBench}}},
      {"--tls-key", {true, {C::kPredict, C::kExplain, C::kInspect, C::kBench}}},
      {"--token", {true, {C::kPredict, C::kExplain, C::kInspect, C::kBench}}},
      {"--operation", {true, {C::kBench}}},
      {"--rows-per-request", {true, {C::kBench}}},
      {"--concurrency", {true, {C::kBench}}},
      {"--rate", {true, {C::kBench}}},
      {"--duration", {true, {C::kBench}}},
      {"--warmup", {true, {C::kBench}}},
      {"--requests", {true, {C::kBench}}},
      {"--server-pid", {true, {C::kBench}}},
      {"--connections", {true, {C::kBench}}},
      {"--repeated-values", {false, {C::kBench}}},
      {"--processes", {true, {C::kBench}}},
      {"--client-threads", {true, {C::kBench}}},
      {"--shared-memory", {false, {C::kPredict, C::kBench}}},
  };
  return *options;
}

const std::map<std::string, std::string>& ShortOptions() {
  static const auto* s = new std::map<std::string, std::string>{
      {"-m", "--model"}, {"-i", "--input"}, {"-o", "--output"}, {"-k", "--kind"},
      {"-t", "--threads"}, {"-v", "--verbose"}, {"-c", "--concurrency"},
      // docs/operations.md spells the TLS options with underscores.
      {"--tls_ca", "--tls-ca"}, {"--tls_cert", "--tls-cert"}, {"--tls_key", "--tls-key"}};
  return *s;
}

const char* CommandName(Command c) {
  switch (c) {
    case Command::kPredict: return "predict";
    case Command::kExplain: return "explain";
    case Command::kInspect: return "inspect";
    case Command::kBench: return "bench";
    case Command::kVersion: return "version";
    case Command::kHelp: return "help";
  }
  return "?";
}

absl::StatusOr<double> ParseSeconds(const std::string& option, const std::string& value,
                                    bool allow_zero) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(allow_zero ? v >= 0 : v > 0) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(absl::StrCat(option, ": '", value, "' is not a ",
                                                   allow_zero ? "non-negative" : "positive",
                                                   " number"));
  }
  return v;
}

absl::Status Usage(std::string_view message) {
  return absl::InvalidArgumentError(std::string(message));
}

absl::StatusOr<int64_t> ParseInt(const std::string& option, const std::string& value, int64_t min) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() || ptr != value.data() + value.size()) {
    return Usage(absl::StrCat(option, ": '", value, "' is not an integer"));
  }
  if (v < min) return Usage(absl::StrCat(option, " must be >= ", min, ", got ", v));
  if (v > (int64_t{1} << 31) - 1 && option != "--chunk-rows") {
    return Usage(absl::StrCat(option, ": ", v, " is too large"));
  }
  return v;
}

// --background (local) and --method interventional (remote: the model's background on the
// server) select interventional SHAP; --output-space needs it.
absl::Status CheckExplainMethod(const std::set<std::string>& seen, CliArgs* out) {
  const bool interventional = out->method == ExplainMethod::kInterventional;
  if (seen.count("--background")) {
    if (!out->server.empty()) {
      return Usage("--background reads a local file: with --server, --method interventional "
                   "explains over the background the server keeps with the model");
    }
    if (seen.count("--method") && !interventional) {
      return Usage("--background is interventional SHAP: --method path_dependent takes none");
    }
    out->method = ExplainMethod::kInterventional;
  } else if (interventional && out->server.empty()) {
    return Usage("--method interventional needs --background FILE (or --server HOST:PORT: the "
                 "model's background on the server)");
  }
  if (seen.count("--output-space") && out->method != ExplainMethod::kInterventional) {
    return Usage("--output-space needs --background FILE or --method interventional");
  }
  if (out->top_k > 0 && out->interactions) {
    return Usage("--top-k ranks SHAP values; interaction values (--interactions) are not ranked: "
                 "give one of them");
  }
  if (out->top_k > 0 && out->residuals) {
    return Usage("--residuals checks every SHAP value of a row; --top-k prints only the largest: "
                 "give one of them");
  }
  return absl::OkStatus();
}

// The options that switch something on or off: the field they set and the value.
struct Switch {
  const char* name;
  bool CliArgs::*field;
  bool value;
};
constexpr Switch kSwitches[] = {
    {"--interactions", &CliArgs::interactions, true},
    {"--residuals", &CliArgs::residuals, true},
    {"--no-gpu", &CliArgs::use_gpu, false},
    {"--no-progress", &CliArgs::progress, false},
    {"--verbose", &CliArgs::verbose, true},
    {"--json", &CliArgs::json, true},
    {"--header", &CliArgs::header, true},
    {"--output-header", &CliArgs::output_header, true},
    {"--tls", &CliArgs::tls, true},
    {"--repeated-values", &CliArgs::repeated_values, true},
    {"--shared-memory", &CliArgs::shared_memory, true},
};

// The options whose value is kept as given: the field, and what the usage error says the option
// needs when the value is empty (nullptr: an empty value is taken).
struct Text {
  const char* name;
  std::string CliArgs::*field;
  const char* when_empty;
};
constexpr Text kTexts[] = {
    {"--model", &CliArgs::model, nullptr},
    {"--input", &CliArgs::input, nullptr},
    {"--output", &CliArgs::output, nullptr},
    {"--background", &CliArgs::background, "a CSV or .npy file"},
    {"--groups", &CliArgs::groups, "a JSON file of feature groups"},
    {"--strategy", &CliArgs::strategy, "a value"},
    {"--server", &CliArgs::server, "HOST:PORT"},
    {"--model-version", &CliArgs::model_version, nullptr},
    {"--token", &CliArgs::token, "a value (or set GROVE_TOKEN)"},
};

template <typename T, size_t N>
const T* FindByName(const T (&table)[N], const std::string& name) {
  for (const T& entry : table) {
    if (name == entry.name) return &entry;
  }
  return nullptr;
}
const Switch* FindSwitch(const std::string& name) { return FindByName(kSwitches, name); }
const Text* FindText(const std::string& name) { return FindByName(kTexts, name); }

}  // namespace

absl::StatusOr<CliArgs> ParseCliArgs(const std::vector<std::string>& args) {
  CliArgs out;
  if (args.empty()) {
    out.command = Command::kHelp;
    return out;
  }
  const std::string& cmd = args[0];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    out.command = Command::kHelp;
    if (cmd == "help" && args.size() > 1) out.help_topic = args[1];
    if (!out.help_topic.empty() && out.help_topic != "predict" && out.help_topic != "explain" &&
        out.help_topic != "inspect" && out.help_topic != "version" && out.help_topic != "bench") {
      return Usage(absl::StrCat("unknown command '", out.help_topic, "' (see grove --help)"));
    }
    return out;
  }
  if (cmd == "version" || cmd == "--version") {
    if (args.size() > 1) return Usage("grove version takes no arguments");
    out.command = Command::kVersion;
    return out;
  }
  if (cmd == "predict") {
    out.command = Command::kPredict;
  } else if (cmd == "explain") {
    out.command = Command::kExplain;
  } else if (cmd == "inspect") {
    out.command = Command::kInspect;
  } else if (cmd == "bench") {
    out.command = Command::kBench;
  } else {
    return Usage(absl::StrCat("unknown command '", cmd, "' (see grove --help)"));
  }
  const std::string where = absl::StrCat("'grove ", CommandName(out.command), "'");

  std::set<std::string> seen;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string name = args[i];
    std::string value;
    bool has_value = false;
    if (name == "--help" || name == "-h") {
      CliArgs help;
      help.command = Command::kHelp;
      help.help_topic = CommandName(out.command);
      return help;
    }
    if (name.size() > 2 && name.rfind("--", 0) == 0) {
      const size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      if (auto alias = ShortOptions().find(name); alias != ShortOptions().end()) {
        name = alias->second;
      }
    } else if (auto s = ShortOptions().find(name); s != ShortOptions().end()) {
      name = s->second;
    } else {
      return Usage(absl::StrCat("unexpected argument '", name, "' for ", where,
                                " (see grove ", CommandName(out.command), " --help)"));
    }
    auto spec = Options().find(name);
    if (spec == Options().end() || spec->second.commands.count(out.command) == 0) {
      return Usage(absl::StrCat("unknown option '", name, "' for ", where, " (see grove ",
                                CommandName(out.command), " --help)"));
    }
    if (!seen.insert(name).second) return Usage(absl::StrCat(name, " given twice"));
    if (spec->second.takes_value) {
      if (!has_value) {
        if (i + 1 >= args.size()) return Usage(absl::StrCat(name, " needs a value"));
        value = args[++i];
      }
    } else if (has_value) {
      return Usage(absl::StrCat(name, " takes no value"));
    }

    if (const Switch* sw = FindSwitch(name); sw != nullptr) {
      out.*(sw->field) = sw->value;
    } else if (const Text* text = FindText(name); text != nullptr) {
      if (value.empty() && text->when_empty != nullptr) {
        return Usage(absl::StrCat(name, " needs ", text->when_empty));
      }
      out.*(text->field) = value;
    } else if (name == "--kind") {
      absl::StatusOr<OutputKind> kind = ParseOutputKind(value == "pred" ? "prediction" : value);
      if (!kind.ok()) {
        return Usage(absl::StrCat("--kind: '", value, "' is not one of margin, prediction, leaf"));
      }
      out.kind = *kind;
    } else if (name == "--top-k") {
      absl::StatusOr<int64_t> v = ParseInt(name, value, 1);
      if (!v.ok()) return v.status();
      out.top_k = static_cast<int>(std::min<int64_t>(*v, int64_t{1} << 30));
    } else if (name == "--method") {
      absl::StatusOr<ExplainMethod> method = ParseExplainMethod(value);
      if (!method.ok()) return Usage(absl::StrCat("--method: ", method.status().message()));
      out.method = *method;
    } else if (name == "--attribution") {
      absl::StatusOr<Attribution> attribution = ParseAttribution(value);
      if (!attribution.ok()) {
        return Usage(absl::StrCat("--attribution: ", attribution.status().message()));
      }
      out.attribution = *attribution;
    } else if (name == "--output-space") {
      absl::StatusOr<OutputSpace> space = ParseOutputSpace(value);
      if (!space.ok()) return Usage(absl::StrCat("--output-space: ", space.status().message()));
      out.output_space = *space;
    } else if (name == "--iteration-begin" || name == "--iteration-end" ||
               name == "--threads" || name == "--chunk-rows") {
      absl::StatusOr<int64_t> v = ParseInt(name, value, name == "--chunk-rows" ? 1 : 0);
      if (!v.ok()) return v.status();
      if (name == "--iteration-begin") out.iteration_begin = static_cast<int>(*v);
      if (name == "--iteration-end") out.iteration_end = static_cast<int>(*v);
      if (name == "--threads") out.threads = static_cast<int>(*v);
      if (name == "--chunk-rows") out.chunk_rows = *v;
    } else if (name == "--keep") {
      for (absl::string_view col : absl::StrSplit(value, ',')) {
        if (col.empty()) return Usage(absl::StrCat("--keep: '", value, "' has an empty column name"));
        out.keep.emplace_back(col);
      }
    } else if (name == "--tls-ca" || name == "--tls-cert" || name == "--tls-key") {
      if (value.empty()) return Usage(absl::StrCat(name, " needs a PEM file"));
      (name == "--tls-ca" ? out.tls_ca : name == "--tls-cert" ? out.tls_cert : out.tls_key) = value;
    } else if (name == "--operation") {
      if (value != "predict" && value != "explain") {
        return Usage(absl::StrCat("--operation: '", value, "' is not one of predict, explain"));
      }
      out.bench_explain = value == "explain";
    } else if (name == "--rows-per-request" || name == "--concurrency" || name == "--requests" ||
               name == "--connections" || name == "--server-pid" || name == "--processes" ||
               name == "--client-threads") {
      absl::StatusOr<int64_t> v = ParseInt(name, value, name == "--requests" ? 0 : 1);
      if (!v.ok()) return v.status();
      if (name == "--rows-per-request") out.rows_per_request = *v;
      if (name == "--concurrency") out.concurrency = static_cast<int>(*v);
      if (name == "--requests") out.max_requests = *v;
      if (name == "--connections") out.connections = static_cast<int>(*v);
      if (name == "--server-pid") out.server_pid = *v;
      if (name == "--processes") {
        if (*v > 256) return Usage("--processes: at most 256");
        out.processes = static_cast<int>(*v);
      }
      if (name == "--client-threads") {
        if (*v > 1024) return Usage("--client-threads: at most 1024");
        out.client_threads = static_cast<int>(*v);
      }
    } else if (name == "--rate" || name == "--duration" || name == "--warmup") {
      absl::StatusOr<double> v = ParseSeconds(name, value, name != "--duration");
      if (!v.ok()) return v.status();
      if (name == "--rate") out.rate = *v;
      if (name == "--duration") out.duration_seconds = *v;
      if (name == "--warmup") out.warmup_seconds = *v;
    } else if (name == "--timeout") {
      char* end = nullptr;
      out.timeout_seconds = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(out.timeout_seconds > 0)) {
        return Usage(absl::StrCat("--timeout: '", value, "' is not a positive number of seconds"));
      }
    }
  }

  if (out.model.empty()) return Usage(absl::StrCat(where, " needs --model"));
  if (out.command == Command::kBench && out.server.empty()) {
    return Usage("'grove bench' needs --server HOST:PORT (a running groved)");
  }
  if (out.command == Command::kBench && seen.count("--rate") && seen.count("--concurrency")) {
    return Usage("--rate (open loop) and --concurrency (closed loop) exclude each other");
  }
  if (out.server.empty() && (seen.count("--tls") || seen.count("--tls-ca") ||
                             seen.count("--tls-cert") || seen.count("--tls-key"))) {
    return Usage("--tls, --tls-ca, --tls-cert and --tls-key need --server");
  }
  if (out.server.empty() && seen.count("--token")) return Usage("--token needs --server");
  if (out.shared_memory) {
    if (out.server.empty()) {
      return Usage("--shared-memory needs --server (a groved on this host, with --shared_memory)");
    }
    if (out.rate > 0) {
      return Usage("--shared-memory is for the closed loop (--concurrency): each caller has one "
                   "region and one request in flight, which an open loop (--rate) cannot keep");
    }
    if (out.repeated_values) {
      return Usage("--shared-memory and --repeated-values exclude each other (rows go through "
                   "shared memory, not the messages)");
    }
  }
  if (absl::Status s = CheckExplainMethod(seen, &out); !s.ok()) return s;
  if (seen.count("--tls-cert") != seen.count("--tls-key")) {
    return Usage("--tls-cert and --tls-key go together");
  }
  if (out.command != Command::kInspect && out.command != Command::kBench && out.input.empty()) {
    return Usage(absl::StrCat(where, " needs --input (a CSV file, or - for standard input)"));
  }
  if (out.server.empty() && (seen.count("--model-version") || seen.count("--timeout"))) {
    return Usage("--model-version and --timeout need --server");
  }
  if (seen.count("--keep") && !out.header) {
    return Usage("--keep needs --header (columns are named by the input's header line)");
  }
  if (out.iteration_end > 0 && out.iteration_end <= out.iteration_begin) {
    return Usage(absl::StrCat("--iteration-end (", out.iteration_end,
                              ") must be greater than --iteration-begin (", out.iteration_begin,
                              ")"));
  }
  return out;
}

// The engine options of predict and explain. Ends without a newline, as kRemoteOptions.
constexpr absl::string_view kEngineOptions =
    R"(      --iteration-begin N    first boosting round used (default 0)
      --iteration-end N      one past the last boosting round used (default 0 = all)
  -t, --threads N            CPU threads, for the model and for parsing the input
                             (default 0 = one per core)
      --chunk-rows N         rows per engine call (default: automatic)
      --strategy NAME        engine strategy: auto (default), cpu, or a GPU strategy
      --no-gpu               never use a GPU)";

// The remote options every command that can ask a running groved lists after its --server line.
// Ends without a newline, so that the text after it starts on a line of its own.
constexpr absl::string_view kRemoteOptions =
    R"(      --model-version N      remote: model version (default: the highest ready one)
      --timeout SECONDS      remote: deadline of every request
      --tls, --tls-ca PEM    remote: TLS (system roots, or these roots)
      --tls-cert PEM, --tls-key PEM   remote: client certificate (mutual TLS)
      --token TOKEN          remote: bearer token (default: $GROVE_TOKEN))";

std::string HelpText(const std::string& topic) {
  if (topic == "predict") {
    return absl::StrCat(R"(Usage: grove predict --model PATH --input X.csv [options]

Predicts every row of X.csv (comma separated, one row per line; empty or nan = missing; True /
False = 1 / 0; a categorical feature's cells may be its category names when the model records its
categories; no header unless --header), of X.npy (a [rows, F] array) or of a Parquet file (columns
matched to the features by name; see docs/formats.md), and writes one CSV line per row, numbers as
%.9g.

Options:
  -m, --model PATH           XGBoost model (.json, .ubj) or LightGBM model (.txt)
  -i, --input FILE           input rows; - reads standard input
  -o, --output FILE          where to write the results (default -, standard output)
  -k, --kind KIND            margin | prediction (default) | leaf
)",
                        kEngineOptions, R"(
      --no-progress          no progress bar (one is shown on a terminal for long inputs)
      --header               the input's first line names its columns: they are matched to the
                             model's feature names (any order; other columns are dropped) and
                             the output gets a header line too
      --keep COL[,COL...]    with --header: pass these input columns through to the output,
                             first on each line (e.g. an id or a label)
      --output-header        a header line on the output (prediction / margin / leaf columns)
  -v, --verbose              print the engine, device and timings on standard error
      --server HOST:PORT     ask a running groved instead (--model is then a model name)
)",
                        kRemoteOptions, R"(
      --shared-memory        remote, groved on this host with --shared_memory: pass rows and
                             results through a POSIX shared memory object registered for the
                             run (role admin with access control) instead of the messages
)");
  }
  if (topic == "explain") {
    return absl::StrCat(R"(Usage: grove explain --model PATH --input X.csv [options]

Writes the exact SHAP values (or --attribution's values) of every row of X.csv
(or X.npy or Parquet; read as for predict), laid out
like XGBoost pred_contribs:
for each output, F feature contributions then the bias (num_outputs * (F+1) numbers per line).
With --interactions, SHAP interaction values like XGBoost pred_interactions:
num_outputs * (F+1) * (F+1) numbers per line.

Options:
  -m, --model PATH           XGBoost model (.json, .ubj) or LightGBM model (.txt)
  -i, --input FILE           input rows; - reads standard input
  -o, --output FILE          where to write the results (default -, standard output)
      --interactions         SHAP interaction values instead of SHAP values (with
                             --background: interventional, the Shapley interaction index)
      --top-k K              per row and output, the K features of largest |SHAP value|, largest
                             first: K pairs of feature index and value (header topI_feature,
                             topI_value)
      --background FILE      interventional SHAP: expectations over these rows (CSV as --input,
                             or .npy; 1 to 10,000 rows) instead of the training covers (shap's feature_perturbation=
                             "interventional"); the bias is the mean output over them
      --method METHOD        path_dependent (default: the training covers) or interventional
                             (with --server: over the background groved keeps with the model)
      --output-space SPACE   interventional: margin (default), probability (exact Shapley
                             values of the link's output) or probability_linearized (shap's
                             model_output="probability")
      --groups FILE          values of feature groups: a JSON object of group names to
                             feature names or indices, as groups.json in a model repository
                             (the game whose players are the groups; every other feature is
                             its own); with --server, the model's groups.json is the default
      --attribution NAME     which values explain a row: )",
                        AttributionNames(), R"(
                             (default shapley: SHAP values; docs/api.md describes the others
                             and what each combines with)
      --residuals            K more columns per line (header residual, or outK.residual): per
                             output, the sum in double of the row's float32 values and bias
                             (of its interaction matrix with --interactions) minus the model's
                             float32 output in the explained space (margin, or the link's
                             output in the probability spaces); near 0 for SHAP values
)",
                        kEngineOptions, R"(
      --no-progress          no progress bar
      --header               the input's first line names its columns: they are matched to the
                             model's feature names (any order; other columns are dropped) and
                             the output gets a header line: feature names then bias, prefixed
                             outK. per output when there are several; A*B for interactions
      --keep COL[,COL...]    with --header: pass these input columns through to the output
      --output-header        a header line on the output, without an input header
  -v, --verbose              print the engine, device and timings on standard error
      --server HOST:PORT     ask a running groved instead (--model is then a model name)
)",
                        kRemoteOptions, "\n");
  }
  if (topic == "inspect") {
    return absl::StrCat(R"(Usage: grove inspect --model PATH [--json]

Loads a model and prints its shape and statistics: format, trees, leaves, depth, features,
outputs, objective and link, load time, file and memory bytes, and the engines that would run it.

Options:
  -m, --model PATH           XGBoost model (.json, .ubj) or LightGBM model (.txt)
      --json                 one JSON object instead of text
      --no-gpu               describe the CPU engines only
      --server HOST:PORT     describe a model loaded by a running groved
)",
                        kRemoteOptions, "\n");
  }
  if (topic == "bench") {
    return R"(Usage: grove bench --server HOST:PORT --model NAME [options]

Load generator for a running groved: sends Predict (or Explain) requests and reports throughput
(requests/s, rows/s) and latency percentiles (p50, p90, p99, p99.9) of the successful calls, and
the failed calls by status code with their latency (p50, p99, max). Closed loop (default): --concurrency callers, each
sending its next request when the previous one is answered. Open loop (--rate R): R requests per
second on a fixed schedule whatever the answers; latency counts from the scheduled send time.

Options:
  -m, --model NAME           model name on the server
      --model-version N      model version (default: the highest ready one)
  -i, --input FILE           rows to send (CSV as for predict, cycled); default: random rows
      --operation OP         predict (default) | explain
  -k, --kind KIND            predict output: margin | prediction (default) | leaf
      --interactions         explain: SHAP interaction values as well
      --rows-per-request N   rows per request (default 1)
  -c, --concurrency N        closed loop with N concurrent callers (default 1)
      --rate R               open loop: R requests per second
      --connections N        gRPC connections shared by the callers (default 1)
      --processes N          run N bench processes at once, each with --concurrency callers on
                             --connections connections (and --rate in the open loop), started
                             together; one report over all of them (default 1: one process's
                             client threads can be the limit of a many-core server)
      --client-threads N     closed loop: threads (each with a completion queue) driving the
                             callers of one process (default: a quarter of the hardware threads,
                             at least 2, at most --concurrency)
      --repeated-values      send rows as repeated Matrix.values (the older form; results come
                             back the same way) instead of raw little-endian bytes (raw_f32)
      --shared-memory        closed loop, groved on this host with --shared_memory: each caller
                             writes its rows once into a POSIX shared memory object of its own,
                             registers it (role admin with access control) and sends requests
                             that name it; results are written there too (unregistered and
                             unlinked at the end)
      --duration SECONDS     measured time (default 10)
      --warmup SECONDS       unmeasured time before (default 1)
      --requests N           stop after N measured requests instead
      --timeout SECONDS      deadline of every request
      --server-pid PID       a groved on this machine: report its CPU time over the measured
                             time (total, cores busy, per request) from /proc/PID/stat
      --json                 one JSON object instead of text
      --tls, --tls-ca PEM, --tls-cert PEM, --tls-key PEM   TLS / mutual TLS
      --token TOKEN          bearer token (default: $GROVE_TOKEN)

gRPC polls this client's sockets with its `poll` poller on hosts of 8 or more hardware threads
and with `epoll1` below (measured faster there), unless GRPC_POLL_STRATEGY names one.
)";
  }
  if (topic == "version") return "Usage: grove version\n\nPrints the version and build options.\n";
  return R"(grove: exact predictions and SHAP explanations of XGBoost and LightGBM tree ensembles.

Usage: grove COMMAND [options]

Commands:
  predict    predict the rows of a CSV file (margins, predictions or leaf indices)
  explain    SHAP values (or SHAP interaction values) of the rows of a CSV file
  inspect    load a model and print its statistics
  bench      load generator for a running groved (throughput and latency percentiles)
  version    print the version and build options
  help       help on a command (grove help predict, grove predict --help)

Example:
  grove predict --model model.json --input rows.csv --output pred.csv
  grove explain --model model.txt --input rows.csv --interactions
)";
}

std::string VersionText() {
#ifdef GROVE_HAVE_CUDA
  const char* cuda = "yes";
#else
  const char* cuda = "no";
#endif
#ifdef GROVE_CLI_REMOTE
  const char* remote = "yes";
#else
  const char* remote = "no";
#endif
  return absl::StrCat("grove ", GROVE_VERSION, " (CUDA engines: ", cuda, "; remote mode: ", remote,
                      ")\n");
}

}  // namespace grove::cli
