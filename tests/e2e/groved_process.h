// End-to-end test helpers: start the real `groved` binary on loopback with ephemeral ports
// (--grpc_port=0 --metrics_port=0 --port_file=...), build model repositories from corpus cases,
// and run the `grove` CLI. Header-only (tests/e2e builds only *_test.cc files into its binary).
//
// Binary paths: $GROVED_BINARY / $GROVE_CLI_BINARY when set, else the GROVE_GROVED_BINARY /
// GROVE_CLI_BINARY definitions of tests/e2e/CMakeLists.txt.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace grove::e2e {

inline std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

inline std::string GrovedBinary() {
#ifdef GROVE_GROVED_BINARY
  return EnvOr("GROVED_BINARY", GROVE_GROVED_BINARY);
#else
  return EnvOr("GROVED_BINARY", "");
#endif
}

inline std::string GroveCliBinary() {
#ifdef GROVE_CLI_BINARY
  return EnvOr("GROVE_CLI_BINARY", GROVE_CLI_BINARY);
#else
  return EnvOr("GROVE_CLI_BINARY", "");
#endif
}

inline bool IsExecutable(const std::string& path) {
  return !path.empty() && ::access(path.c_str(), X_OK) == 0;
}

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void WriteWholeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A fresh directory, removed with its contents when the object goes away.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static std::atomic<int> counter{0};
    const char* base = std::getenv("TMPDIR");
    path_ = std::filesystem::path(base != nullptr && *base ? base : "/tmp") /
            absl::StrCat("grove_e2e_", tag, "_", ::getpid(), "_", counter++);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    std::filesystem::remove_all(path_.string() + ".staging", ec);  // see InstallModel
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path() const { return path_.string(); }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Spawns argv with stdin from /dev/null and stdout/stderr into files; returns the pid (-1 on
// error).
inline pid_t Spawn(const std::vector<std::string>& args, const std::string& stdout_path,
                   const std::string& stderr_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, copy[0].c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// Waits for `pid` up to `timeout`; returns the exit code (128 + signal), or nullopt on timeout.
inline std::optional<int> WaitPid(pid_t pid, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return -1;
    if (std::chrono::steady_clock::now() >= end) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs a command to completion (timeout: killed, exit code -1).
inline CommandResult RunCommand(const std::vector<std::string>& args, const TempDir& scratch,
                                std::chrono::seconds timeout = std::chrono::seconds(300)) {
  static std::atomic<int> counter{0};
  const int n = counter++;
  const std::string out = scratch.File(absl::StrCat("cmd", n, ".out"));
  const std::string err = scratch.File(absl::StrCat("cmd", n, ".err"));
  CommandResult result;
  const pid_t pid = Spawn(args, out, err);
  if (pid < 0) {
    result.err = "cannot run " + args[0];
    return result;
  }
  std::optional<int> code = WaitPid(pid, timeout);
  if (!code) {
    ::kill(pid, SIGKILL);
    WaitPid(pid, std::chrono::seconds(10));
  }
  result.exit_code = code.value_or(-1);
  result.out = ReadWholeFile(out);
  result.err = ReadWholeFile(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return result;
}

// A running groved. The destructor sends SIGTERM, waits, then SIGKILLs.
class GrovedProcess {
 public:
  struct Options {
    std::string repository;
    std::vector<std::string> flags;  // extra flags, "--name=value"
    std::chrono::seconds start_timeout{180};
  };

  static absl::StatusOr<std::unique_ptr<GrovedProcess>> Start(const Options& options) {
    const std::string binary = GrovedBinary();
    if (!IsExecutable(binary)) {
      return absl::NotFoundError(absl::StrCat("groved binary not found ('", binary,
                                              "'); build target groved or set GROVED_BINARY"));
    }
    auto p = std::unique_ptr<GrovedProcess>(new GrovedProcess());
    p->dir_ = std::make_unique<TempDir>("groved");
    const std::string port_file = p->dir_->File("ports.json");
    p->log_path_ = p->dir_->File("groved.log");
    std::vector<std::string> args = {binary,
                                     "--model_repository=" + options.repository,
                                     "--grpc_address=127.0.0.1",
                                     "--grpc_port=0",
                                     "--metrics_address=127.0.0.1",
                                     "--metrics_port=0",
                                     "--http_address=127.0.0.1",
                                     "--http_port=0",
                                     "--port_file=" + port_file};
    args.insert(args.end(), options.flags.begin(), options.flags.end());
    p->pid_ = Spawn(args, p->dir_->File("groved.out"), p->log_path_);
    if (p->pid_ < 0) return absl::InternalError("cannot spawn " + binary);
    const auto end = std::chrono::steady_clock::now() + options.start_timeout;
    while (true) {
      const std::string text = ReadWholeFile(port_file);
      std::smatch g, m;
      if (std::regex_search(text, g, std::regex("\"grpc_port\"\\s*:\\s*(\\d+)")) &&
          std::regex_search(text, m, std::regex("\"metrics_port\"\\s*:\\s*(-?\\d+)"))) {
        p->grpc_port_ = std::stoi(g[1]);
        p->metrics_port_ = std::stoi(m[1]);
        return p;
      }
      if (std::optional<int> code = WaitPid(p->pid_, std::chrono::milliseconds(0))) {
        p->pid_ = -1;
        return absl::InternalError(absl::StrCat("groved exited with ", *code,
                                                " before writing its port file; log:\n",
                                                ReadWholeFile(p->log_path_)));
      }
      if (std::chrono::steady_clock::now() > end) {
        return absl::DeadlineExceededError(
            absl::StrCat("groved wrote no port file; log:\n", ReadWholeFile(p->log_path_)));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }

  ~GrovedProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      if (!WaitPid(pid_, std::chrono::seconds(30))) {
        ::kill(pid_, SIGKILL);
        WaitPid(pid_, std::chrono::seconds(10));
      }
    }
  }

  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  std::string target() const { return absl::StrCat("127.0.0.1:", grpc_port_); }
  std::string log() const { return ReadWholeFile(log_path_); }
  pid_t pid() const { return pid_; }

  void Signal(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  // Waits for exit; returns the exit code, nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return -1;
    std::optional<int> code = WaitPid(pid_, timeout);
    if (code) pid_ = -1;
    return code;
  }

 private:
  GrovedProcess() = default;
  std::unique_ptr<TempDir> dir_;
  std::string log_path_;
  pid_t pid_ = -1;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
};

// Places `model_file` as DIR/name/version/model.<ext> (by copy, then rename: atomic).
inline void InstallModel(const std::string& repository, const std::string& name, int64_t version,
                         const std::string& model_file) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(repository) / name / std::to_string(version);
  fs::create_directories(dir);
  const std::string ext = fs::path(model_file).extension().string();
  // Staged outside the repository so that groved never sees a half-written file.
  const fs::path staging = fs::path(repository + ".staging");
  fs::create_directories(staging);
  const fs::path tmp = staging / (name + "_" + std::to_string(version) + ext);
  fs::copy_file(model_file, tmp, fs::copy_options::overwrite_existing);
  // model.<ext> is a repository name of every format but Treelite's, which is checkpoint.tl.
  fs::rename(tmp, dir / (ext == ".tl" ? std::string("checkpoint.tl") : "model" + ext));
}

}  // namespace grove::e2e
