// A progress bar on standard error for long `grove` runs, shown only when stderr is a terminal
// and the run has lasted a moment (short runs and redirected output stay clean).
//
// The bar is redrawn by a ticker thread as well as at each Update, so that an input read as one
// long chunk (small but slow: a wide model's interactions, a remote server) shows its elapsed time
// while the chunk computes instead of staying blank until the end.
//
// Thread-safe: Update and Finish come from the caller's thread, Tick from the ticker's.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace grove::cli {

class ProgressBar {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // `enabled` false, or stderr not a terminal, makes every call a no-op. Draws on stderr with the
  // real clock and a ticker thread (every 200 ms).
  ProgressBar(bool enabled, std::string label);
  // For tests: draws on `out` (not owned) with `clock`; no ticker thread (call Tick).
  ProgressBar(std::string label, std::FILE* out, Clock clock);
  ~ProgressBar();  // stops the ticker, clears the bar

  // `done`/`total` bytes of input (total < 0: unknown, shows rows and rate only).
  void Update(int64_t done_bytes, int64_t total_bytes, int64_t rows);
  // Redraws the last Update's figures with the elapsed time now (after the first 700 ms).
  void Tick();
  void Finish();

 private:
  // Writes the bar for the state now when it is due (past the delay and the redraw period).
  void Draw() ABSL_LOCKS_EXCLUDED(mu_);

  const bool enabled_;
  const std::string label_;
  std::FILE* const out_;
  const Clock clock_;
  const std::chrono::steady_clock::time_point start_;

  absl::Mutex mu_;
  bool shown_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point last_draw_ ABSL_GUARDED_BY(mu_);
  int64_t done_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t total_bytes_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t rows_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread ticker_;
};

}  // namespace grove::cli
