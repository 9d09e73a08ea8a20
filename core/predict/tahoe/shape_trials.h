// ShapeTrials: the Tahoe engine's choice between two row-chunk shapes that its load-time model
// cannot tell apart, decided by timing both on the first real batches of a size.
//
// Why: the load-time timings (perf_model.h: the wave model, and launches at a few batch sizes) are
// of typical rows, and users' rows can walk the trees differently (missing values take another
// branch of the walk), so two shapes the probe's rows time within a few percent can differ by more
// on real rows (docs/benchmarks/archive.md). So where the model's best and
// second-best shapes for a launch are within a margin, batches of that size alternate between them
// until each has run `runs` times, and from then on the one with the least kernel time per row
// runs. Batch sizes are grouped in half-octave buckets; at most kMaxTrials (bucket, pair) entries
// are kept (beyond, the model's pick runs).
//
// Determinism: the two shapes give the same leaves; their double sums can be added in another
// order (tree parts), so a row's float result may differ in the last bit between a batch run
// during the trial and one after it. Outside trials, results are as deterministic as the shape.
//
// Thread-safe: Pick and Record take a mutex for a few comparisons (no blocking call under it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace grove {

class ShapeTrials {
 public:
  static constexpr int kDefaultRuns = 4;
  static constexpr int kMaxTrials = 64;

  // `runs`: timed runs of each shape before the choice (1..64).
  explicit ShapeTrials(int runs = kDefaultRuns);

  // The shape code a launch of `rows` rows runs, between the model's pick `best` and its runner-up
  // `second`. `timed` (not null) is set when the caller must time the run and Record it.
  int Pick(int64_t rows, int best, int second, bool* timed);

  // A timed run (Pick set `timed`) of shape `code` over `rows` rows took `kernel_seconds`.
  void Record(int64_t rows, int best, int second, int code, double kernel_seconds);

  // "rows 8192-11585 16@1024 0.0101us/row vs 16@1024/2 0.0119us/row: 16@1024; ..." (shape
  // labels by `label`; "timing" until decided).
  std::string Describe(std::string (*label)(int code)) const;

 private:
  struct Trial {
    int bucket = 0, best = 0, second = 0;
    int issued[2] = {0, 0}, timed[2] = {0, 0};
    double per_row[2] = {0, 0};  // least seconds per row of each shape
    int winner = -1;             // 0 or 1 once decided
  };
  static int Bucket(int64_t rows);
  Trial* Find(int bucket, int best, int second) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int runs_;
  mutable absl::Mutex mu_;
  std::vector<Trial> trials_ ABSL_GUARDED_BY(mu_);
};

}  // namespace grove
