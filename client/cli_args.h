// Command line of `grove`: subcommands and their options, parsed without global flags (absl flags
// belong to server/main.cc only).
//
//   grove predict --model PATH --input X.csv [--output FILE|-] [--kind margin|prediction|leaf]
//                 [--iteration-begin N] [--iteration-end N] [--threads N] ...
//   grove explain --model PATH --input X.csv [--output FILE|-] [--interactions]
//                 [--background FILE | --method path_dependent|interventional]
//                 [--output-space margin|probability|probability_linearized]
//                 [--attribution NAME] ...
//   grove inspect --model PATH [--json]
//   grove bench --server HOST:PORT --model NAME [--operation predict|explain] [--concurrency N |
//               --rate R] [--rows-per-request N] [--duration S] [--shared-memory] [--json] ...
//   grove version | grove --help | grove help COMMAND | grove COMMAND --help
//
// `--server HOST:PORT` switches predict/explain/inspect to remote mode (client/cli_remote.h), where
// `--model` names a model loaded by the server.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/outputs.h"

namespace grove::cli {

enum class Command { kHelp, kVersion, kPredict, kExplain, kInspect, kBench };

struct CliArgs {
  Command command = Command::kHelp;
  std::string help_topic;  // kHelp: "" (overview) or a command name

  std::string model;           // --model: a file (local) or a model name (remote)
  std::string input;           // --input: CSV rows, "-" = standard input
  std::string output = "-";    // --output: CSV results, "-" = standard output
  OutputKind kind = OutputKind::kPrediction;  // --kind (predict)
  bool interactions = false;   // --interactions (explain)
  int top_k = 0;               // --top-k K (explain): the K features of largest |SHAP| per row
  std::string background;      // --background FILE (explain): interventional SHAP against it
  std::string groups;          // --groups FILE (explain): a JSON object of feature groups
  // --method (explain); --background implies kInterventional.
  ExplainMethod method = ExplainMethod::kPathDependent;
  OutputSpace output_space = OutputSpace::kMargin;  // --output-space (explain, interventional)
  Attribution attribution = Attribution::kShapley;  // --attribution (explain)
  bool residuals = false;      // --residuals (explain): the additivity residuals as K columns
  int iteration_begin = 0;     // --iteration-begin
  int iteration_end = 0;       // --iteration-end (0 = to the last round)
  int threads = 0;             // --threads: CPU threads, 0 = one per core
  int64_t chunk_rows = 0;      // --chunk-rows: rows per engine call, 0 = automatic
  std::string strategy = "auto";  // --strategy: engine strategy ("auto", "cpu", a GPU strategy)
  bool use_gpu = true;         // --no-gpu clears it
  bool progress = true;        // --no-progress clears it (a bar is shown only on a terminal)
  bool verbose = false;        // --verbose: engine, device and timings on stderr
  bool json = false;           // --json (inspect)
  bool header = false;         // --header: the input's first line names its columns (and the
                               // output gets a header line)
  std::vector<std::string> keep;  // --keep COL[,COL...]: header columns passed through to the output
  bool output_header = false;  // --output-header: a header line on the output only

  std::string server;          // --server HOST:PORT: remote mode
  std::string model_version;   // --model-version (remote)
  double timeout_seconds = 0;  // --timeout SECONDS (remote), 0 = none
  std::string tls_ca;          // --tls-ca PEM: TLS, verifying the server with these roots
  std::string tls_cert;        // --tls-cert PEM + --tls-key PEM: client certificate (mutual TLS)
  std::string tls_key;
  bool tls = false;            // --tls: TLS with the system roots
  std::string token;           // --token: bearer token (remote; ConnectToServer falls back to
                               // $GROVE_TOKEN, so that the token need not be on the command line)

  // grove bench (load generator; needs --server).
  bool bench_explain = false;      // --operation explain (default predict)
  int64_t rows_per_request = 1;    // --rows-per-request N
  int concurrency = 1;             // --concurrency N: closed loop with N callers
  double rate = 0;                 // --rate R: open loop, R requests per second (0: closed loop)
  double duration_seconds = 10;    // --duration SECONDS of measurement
  double warmup_seconds = 1;       // --warmup SECONDS before measuring
  int64_t max_requests = 0;        // --requests N: stop after N measured requests (0: duration)
  int connections = 1;             // --connections N: gRPC channels the callers share
  int64_t server_pid = 0;          // --server-pid PID: a local groved whose CPU time to report
  bool repeated_values = false;    // --repeated-values: rows as Matrix.values instead of raw_f32
  int processes = 1;               // --processes N: bench processes, each with the options above
  int client_threads = 0;          // --client-threads N: closed-loop threads per process (0: auto)
  // --shared-memory (bench; predict with --server): rows and results through POSIX shared memory
  // registered with the server (groved --shared_memory on the same host) instead of the messages.
  bool shared_memory = false;
};

// Parses argv[1..argc). Errors are INVALID_ARGUMENT with a one-line message
// ("unknown option '--foo' for 'grove predict'").
absl::StatusOr<CliArgs> ParseCliArgs(const std::vector<std::string>& args);

// Help text: the overview ("") or one command's options.
std::string HelpText(const std::string& topic);

// "grove 0.1.0 (cpu engines; CUDA engines: yes|no; remote mode: yes|no)".
std::string VersionText();

}  // namespace grove::cli
