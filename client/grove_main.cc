// `grove`: the command-line tool. Parses the subcommand and dispatches to the local (embedded)
// mode, or to the remote mode when --server is given and the build has it (GROVE_CLI_REMOTE).
#include <cstdio>
#include <string>
#include <vector>

#include "client/cli_args.h"
#include "client/cli_local.h"
#include "core/common/log.h"
#include "core/common/mutex_mode.h"
#ifdef GROVE_CLI_REMOTE
#include "client/cli_remote.h"
#endif

int main(int argc, char** argv) {
  grove::DisableMutexDeadlockDetection();  // see core/common/mutex_mode.h
  using grove::cli::Command;
  // Engines log at INFO (GPU selection, calibration); a command-line tool shows warnings only.
  grove::SetMinLogSeverity(grove::LogSeverity::kWarning);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {  // a command is required: the usage, as a usage error (scripts see the 2)
    std::fputs(grove::cli::HelpText("").c_str(), stderr);
    return 2;
  }
  absl::StatusOr<grove::cli::CliArgs> parsed = grove::cli::ParseCliArgs(args);
  if (!parsed.ok()) {
    std::fprintf(stderr, "grove: error: %s\n", std::string(parsed.status().message()).c_str());
    return 2;
  }
  const grove::cli::CliArgs& a = *parsed;
  switch (a.command) {
    case Command::kHelp:
      std::fputs(grove::cli::HelpText(a.help_topic).c_str(), stdout);
      return 0;
    case Command::kVersion:
      std::fputs(grove::cli::VersionText().c_str(), stdout);
      return 0;
    default: break;
  }
  if (!a.server.empty()) {
#ifdef GROVE_CLI_REMOTE
    return grove::cli::RunRemote(a);
#else
    std::fprintf(stderr,
                 "grove: error: --server needs remote mode, which this build does not have "
                 "(configure with -DGROVE_BUILD_SERVER=ON)\n");
    return 2;
#endif
  }
  return grove::cli::RunLocal(a);
}
