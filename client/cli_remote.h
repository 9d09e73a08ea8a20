// `grove ... --server HOST:PORT`: remote mode, talking to a running groved; and `grove bench`, the
// load generator. Defined in client/cli_remote.cc and client/cli_bench.cc, which are compiled only
// with GROVE_BUILD_SERVER (client/CMakeLists.txt then defines GROVE_CLI_REMOTE=1 and grove_main.cc
// dispatches here).
//
// Remote predict/explain contract: same arguments, output files (byte for byte) and exit codes as
// RunLocal (client/cli_local.h); `--model` names a model loaded by the server. The input is read
// in chunks (the StreamRows loop of cli_local.h, with rows parsed as doubles), so memory stays
// bounded whatever the input size; each chunk goes out as Predict requests (at most the model's
// max_request_rows each) or, for explain, as messages of one ExplainStream call with a bounded
// window. Rows go out as float64 (Matrix.raw_f64) for LightGBM models, whose thresholds are
// doubles, and as float32 for XGBoost models, so that the server routes them as the local CLI.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/cli_args.h"
#include "client/grove_client.h"

namespace grove::cli {

// predict / explain / inspect against args.server. Exit code: 0 success, 1 failure, 2 bad usage.
int RunRemote(const CliArgs& args);

// `grove bench`. Exit code: 0 when every measured request succeeded, 1 otherwise.
int RunBench(const CliArgs& args);
// The gRPC poller `grove bench` runs with: GRPC_POLL_STRATEGY when the environment sets it, else
// "poll" on a host of at least kBenchPollMinThreads hardware threads and "epoll1" (gRPC 1.51's
// default) below, which RunBench puts in the environment before gRPC starts. Measured
// (docs/benchmarks/serving.md, "The load generator's poller"): with groved on the same host, poll
// gave 5-12% more single-row requests/s on 16 threads (an H100 host) and epoll1 4-9% more on 2;
// 8 is between the two, not measured. Call before any gRPC object exists.
inline constexpr unsigned kBenchPollMinThreads = 8;
std::string ChooseBenchPollStrategy(unsigned hardware_threads);

// A client for args.server with the TLS options, --timeout and --token of `args` (without --token:
// $GROVE_TOKEN when set).
absl::StatusOr<std::unique_ptr<client::GroveClient>> ConnectToServer(const CliArgs& args);

// --model-version as a number (0 when absent).
absl::StatusOr<int64_t> ParseModelVersion(const CliArgs& args);

// "message (CODE from HOST:PORT)" for errors that came from the server.
absl::Status DescribeRemoteError(const absl::Status& status, const CliArgs& args);

}  // namespace grove::cli
