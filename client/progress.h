// A progress bar on standard error for long `grove` runs, shown only when stderr is a terminal
// and the run has lasted a moment (short runs and redirected output stay clean).
// Not thread-safe: one thread updates it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace grove::cli {

class ProgressBar {
 public:
  // `enabled` false (or stderr not a terminal) makes every call a no-op.
  ProgressBar(bool enabled, std::string label);
  ~ProgressBar();  // clears the bar

  // `done`/`total` bytes of input (total < 0: unknown, shows rows and rate only).
  void Update(int64_t done_bytes, int64_t total_bytes, int64_t rows);
  void Finish();

 private:
  bool enabled_;
  bool shown_ = false;
  std::string label_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace grove::cli
