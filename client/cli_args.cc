#include "client/cli_args.h"

#include <charconv>
#include <cstdlib>
#include <map>
#include <set>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

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
      {"--model", {true, {C::kPredict, C::kExplain, C::kInspect}}},
      {"--input", {true, {C::kPredict, C::kExplain}}},
      {"--output", {true, {C::kPredict, C::kExplain}}},
      {"--kind", {true, {C::kPredict}}},
      {"--interactions", {false, {C::kExplain}}},
      {"--iteration-begin", {true, {C::kPredict, C::kExplain}}},
      {"--iteration-end", {true, {C::kPredict, C::kExplain}}},
      {"--threads", {true, {C::kPredict, C::kExplain}}},
      {"--chunk-rows", {true, {C::kPredict, C::kExplain}}},
      {"--strategy", {true, {C::kPredict, C::kExplain}}},
      {"--no-gpu", {false, {C::kPredict, C::kExplain, C::kInspect}}},
      {"--no-progress", {false, {C::kPredict, C::kExplain}}},
      {"--verbose", {false, {C::kPredict, C::kExplain, C::kInspect}}},
      {"--json", {false, {C::kInspect}}},
      {"--server", {true, {C::kPredict, C::kExplain, C::kInspect}}},
      {"--model-version", {true, {C::kPredict, C::kExplain, C::kInspect}}},
      {"--timeout", {true, {C::kPredict, C::kExplain, C::kInspect}}},
  };
  return *options;
}

const std::map<std::string, std::string>& ShortOptions() {
  static const auto* s = new std::map<std::string, std::string>{
      {"-m", "--model"}, {"-i", "--input"}, {"-o", "--output"}, {"-k", "--kind"},
      {"-t", "--threads"}, {"-v", "--verbose"}};
  return *s;
}

const char* CommandName(Command c) {
  switch (c) {
    case Command::kPredict: return "predict";
    case Command::kExplain: return "explain";
    case Command::kInspect: return "inspect";
    case Command::kVersion: return "version";
    case Command::kHelp: return "help";
  }
  return "?";
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
        out.help_topic != "inspect" && out.help_topic != "version") {
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

    if (name == "--model") {
      out.model = value;
    } else if (name == "--input") {
      out.input = value;
    } else if (name == "--output") {
      out.output = value;
    } else if (name == "--kind") {
      if (value == "margin") {
        out.kind = OutputKind::kMargin;
      } else if (value == "prediction" || value == "pred") {
        out.kind = OutputKind::kPrediction;
      } else if (value == "leaf") {
        out.kind = OutputKind::kLeaf;
      } else {
        return Usage(absl::StrCat("--kind: '", value, "' is not one of margin, prediction, leaf"));
      }
    } else if (name == "--interactions") {
      out.interactions = true;
    } else if (name == "--iteration-begin" || name == "--iteration-end" ||
               name == "--threads" || name == "--chunk-rows") {
      absl::StatusOr<int64_t> v = ParseInt(name, value, name == "--chunk-rows" ? 1 : 0);
      if (!v.ok()) return v.status();
      if (name == "--iteration-begin") out.iteration_begin = static_cast<int>(*v);
      if (name == "--iteration-end") out.iteration_end = static_cast<int>(*v);
      if (name == "--threads") out.threads = static_cast<int>(*v);
      if (name == "--chunk-rows") out.chunk_rows = *v;
    } else if (name == "--strategy") {
      if (value.empty()) return Usage("--strategy needs a value");
      out.strategy = value;
    } else if (name == "--no-gpu") {
      out.use_gpu = false;
    } else if (name == "--no-progress") {
      out.progress = false;
    } else if (name == "--verbose") {
      out.verbose = true;
    } else if (name == "--json") {
      out.json = true;
    } else if (name == "--server") {
      if (value.empty()) return Usage("--server needs HOST:PORT");
      out.server = value;
    } else if (name == "--model-version") {
      out.model_version = value;
    } else if (name == "--timeout") {
      char* end = nullptr;
      out.timeout_seconds = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(out.timeout_seconds > 0)) {
        return Usage(absl::StrCat("--timeout: '", value, "' is not a positive number of seconds"));
      }
    }
  }

  if (out.model.empty()) return Usage(absl::StrCat(where, " needs --model"));
  if (out.command != Command::kInspect && out.input.empty()) {
    return Usage(absl::StrCat(where, " needs --input (a CSV file, or - for standard input)"));
  }
  if (out.server.empty() && (seen.count("--model-version") || seen.count("--timeout"))) {
    return Usage("--model-version and --timeout need --server");
  }
  if (out.iteration_end > 0 && out.iteration_end <= out.iteration_begin) {
    return Usage(absl::StrCat("--iteration-end (", out.iteration_end,
                              ") must be greater than --iteration-begin (", out.iteration_begin,
                              ")"));
  }
  return out;
}

std::string HelpText(const std::string& topic) {
  if (topic == "predict") {
    return R"(Usage: grove predict --model PATH --input X.csv [options]

Predicts every row of X.csv (comma separated, no header, one row per line; empty or nan = missing)
and writes one CSV line per row, numbers as %.9g.

Options:
  -m, --model PATH           XGBoost model (.json, .ubj) or LightGBM model (.txt)
  -i, --input FILE           input rows; - reads standard input
  -o, --output FILE          where to write the results (default -, standard output)
  -k, --kind KIND            margin | prediction (default) | leaf
      --iteration-begin N    first boosting round used (default 0)
      --iteration-end N      one past the last boosting round used (default 0 = all)
  -t, --threads N            CPU threads (default 0 = one per core)
      --chunk-rows N         rows per engine call (default: automatic)
      --strategy NAME        engine strategy: auto (default), cpu, or a GPU strategy
      --no-gpu               never use a GPU
      --no-progress          no progress bar (one is shown on a terminal for long inputs)
  -v, --verbose              print the engine, device and timings on standard error
      --server HOST:PORT     ask a running groved instead (--model is then a model name)
)";
  }
  if (topic == "explain") {
    return R"(Usage: grove explain --model PATH --input X.csv [options]

Writes the exact TreeSHAP values of every row of X.csv, laid out like XGBoost pred_contribs:
for each output, F feature contributions then the bias (num_outputs * (F+1) numbers per line).
With --interactions, SHAP interaction values like XGBoost pred_interactions:
num_outputs * (F+1) * (F+1) numbers per line.

Options:
  -m, --model PATH           XGBoost model (.json, .ubj) or LightGBM model (.txt)
  -i, --input FILE           input rows; - reads standard input
  -o, --output FILE          where to write the results (default -, standard output)
      --interactions         SHAP interaction values instead of SHAP values
      --iteration-begin N    first boosting round used (default 0)
      --iteration-end N      one past the last boosting round used (default 0 = all)
  -t, --threads N            CPU threads (default 0 = one per core)
      --chunk-rows N         rows per engine call (default: automatic)
      --strategy NAME        engine strategy: auto (default), cpu, or a GPU strategy
      --no-gpu               never use a GPU
      --no-progress          no progress bar
  -v, --verbose              print the engine, device and timings on standard error
      --server HOST:PORT     ask a running groved instead (--model is then a model name)
)";
  }
  if (topic == "inspect") {
    return R"(Usage: grove inspect --model PATH [--json]

Loads a model and prints its shape and statistics: format, trees, leaves, depth, features,
outputs, objective and link, load time, file and memory bytes, and the engines that would run it.

Options:
  -m, --model PATH           XGBoost model (.json, .ubj) or LightGBM model (.txt)
      --json                 one JSON object instead of text
      --no-gpu               describe the CPU engines only
      --server HOST:PORT     describe a model loaded by a running groved
)";
  }
  if (topic == "version") return "Usage: grove version\n\nPrints the version and build options.\n";
  return R"(grove: exact predictions and SHAP explanations of XGBoost and LightGBM tree ensembles.

Usage: grove COMMAND [options]

Commands:
  predict    predict the rows of a CSV file (margins, predictions or leaf indices)
  explain    SHAP values (or SHAP interaction values) of the rows of a CSV file
  inspect    load a model and print its statistics
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
