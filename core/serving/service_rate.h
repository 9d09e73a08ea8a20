// ServiceRate: the measured speed of one queue's engine, from the chunks it computed, for admission
// (expected wait of a new task) and for sizing chunks.
//
// Two figures: the time per row of one engine call (sizes chunks), and the time per row of the
// queue as a whole, which divides by the batches that were computing at once (several batches on
// one CPU pool share it). Both are exponential moving averages of recent chunks, so a changed model
// or a warmed-up GPU shows within a few batches. Unknown until the first chunk.
//
// The queue time is corrected by what admitted tasks actually took against what admission
// expected (their time from admission to answer, or to their deadline when they expired): the
// correction tracks the 90th percentile of actual / expected (a quantile estimate: up when a task
// took longer than expected, down by a ninth of that when it did not), so that about 9 in 10
// admitted tasks finish within the time admission promised them. Work the rate does not see
// (other queues on the same cores, RPC handling, batching delays) shows up this way.
//
// Thread-safe. Readers (asked on every Submit) take no lock: each figure is an atomic; the writers
// (once per engine call or finished task) serialise on a mutex so that no update is lost. A reader
// may combine a figure from before an update with one from after it, which moves an estimate by
// one step of its average.
#pragma once

#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace grove::serving {

class ServiceRate {
 public:
  // A chunk of `rows` took `elapsed` while `concurrent` batches of the queue were computing.
  void Observe(int64_t rows, absl::Duration elapsed, int concurrent);
  bool known() const;
  // Time for the queue to get through `rows` (zero while unknown), corrected.
  absl::Duration QueueTime(int64_t rows) const;
  // A task admitted expecting to finish in `expected` took `actual` (at least: an expired task
  // took longer than its deadline allowed). Short expectations are ignored (noise).
  void ObserveOutcome(absl::Duration expected, absl::Duration actual);
  double correction() const;
  // Time of one engine call of `rows` at the measured time per row (uncorrected: the engine
  // alone); InfiniteDuration while unknown.
  absl::Duration CallTime(int64_t rows) const;
  // Rows one engine call computes in `target` (at least 1; `fallback` while unknown).
  int64_t RowsFor(absl::Duration target, int64_t fallback) const;

 private:
  static constexpr double kWeight = 0.2;  // of the newest chunk
  static constexpr double kOutcomeStep = 0.05;
  static constexpr double kQuantile = 0.9;
  static constexpr absl::Duration kMinExpected = absl::Milliseconds(10);
  static constexpr double kMinCorrection = 0.5, kMaxCorrection = 8;
  absl::Mutex mu_;  // serialises the writers
  std::atomic<double> call_seconds_per_row_{-1};
  std::atomic<double> queue_seconds_per_row_{-1};
  std::atomic<double> correction_{1};
};

}  // namespace grove::serving
