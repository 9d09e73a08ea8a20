// Runs the built `grove` binary for the CLI tests (header-only: tests/cli builds only *_test.cc).
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "core/io/csv.h"
#include "gtest/gtest.h"

#ifndef GROVE_CLI_BINARY
#error "GROVE_CLI_BINARY (path of the grove binary) must be defined by tests/cli/CMakeLists.txt"
#endif

extern char** environ;

namespace grove::testing {

struct GroveRun {
  int exit_code = -1;
  std::string out;  // standard output
  std::string err;  // standard error
};

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A fresh directory under the test temp dir, removed when the object goes away.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("grove_cli_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Runs `grove args...` with standard input from `stdin_path` ("" = /dev/null); captures stdout and
// stderr through files in `scratch`.
inline GroveRun RunGrove(const std::vector<std::string>& args, const ScratchDir& scratch,
                         const std::string& stdin_path = "") {
  const std::string out_path = scratch.File("stdout.txt");
  const std::string err_path = scratch.File("stderr.txt");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0,
                                   stdin_path.empty() ? "/dev/null" : stdin_path.c_str(),
                                   O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::vector<std::string> argv_s = {GROVE_CLI_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  GroveRun run;
  const int rc = posix_spawn(&pid, GROVE_CLI_BINARY, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    ADD_FAILURE() << "cannot run " << GROVE_CLI_BINARY;
    return run;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.out = ReadWholeFile(out_path);
  run.err = ReadWholeFile(err_path);
  return run;
}

// Runs `grove args...`, expecting exit code 0, and reads back the CSV it wrote to `output` (an
// empty matrix when either fails, which is reported).
inline CsvMatrix<double> RunGroveForCsv(const std::vector<std::string>& args,
                                        const ScratchDir& scratch, const std::string& output) {
  GroveRun run = RunGrove(args, scratch);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  absl::StatusOr<CsvMatrix<double>> out = ReadCsvDoubles(output);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *std::move(out) : CsvMatrix<double>();
}

inline std::string Describe(const GroveRun& run) {
  return "exit " + std::to_string(run.exit_code) + ", stderr: " + run.err;
}

// Writes `rows` (row-major, `cols` columns) as `grove` reads them back (%.9g round-trips a
// float) to `name` in `scratch`; returns its path.
inline std::string WriteRows(const ScratchDir& scratch, const std::string& name,
                             const std::vector<float>& rows, int cols) {
  const std::string path = scratch.File(name);
  FILE* f = std::fopen(path.c_str(), "w");
  for (size_t i = 0; i < rows.size(); ++i) {
    std::fprintf(f, "%.9g%s", rows[i], (i + 1) % cols == 0 ? "\n" : ",");
  }
  std::fclose(f);
  return path;
}

// |got - want| <= 1e-5 * max(1, |want|) entry by entry (`what` names the case).
inline void ExpectNearRelative(const std::vector<double>& got, const std::vector<double>& want,
                               const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5 * std::max(1.0, std::abs(want[i]))) << what << " " << i;
  }
}

}  // namespace grove::testing
