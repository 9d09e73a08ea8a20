// `grove ... --server HOST:PORT`: remote mode, talking to a running groved.
//
// Declared here, defined in client/cli_remote.cc, which is compiled only with GROVE_BUILD_SERVER
// (client/CMakeLists.txt then defines GROVE_CLI_REMOTE=1 and grove_main.cc dispatches to it).
// Contract: same arguments, output files and exit codes as RunLocal (client/cli_local.h); `--model`
// names a model loaded by the server. StreamRows / RenderStats from cli_local.h are meant to be
// reused so that both modes write identical output.
#pragma once

#include "client/cli_args.h"

namespace grove::cli {

int RunRemote(const CliArgs& args);

}  // namespace grove::cli
