// PeriodicThread (core/common/periodic_thread.h): runs until stopped, stops promptly, restarts.
#include "core/common/periodic_thread.h"

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace grove {
namespace {

struct Counter {
  absl::Mutex mu;
  int runs ABSL_GUARDED_BY(mu) = 0;
  void Add() {
    absl::MutexLock lock(&mu);
    ++runs;
  }
  // Waits (bounded) until `n` runs happened.
  bool WaitFor(int n) {
    absl::MutexLock lock(&mu);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return runs >= n; };
    return mu.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(30));
  }
  int Get() {
    absl::MutexLock lock(&mu);
    return runs;
  }
};

TEST(PeriodicThread, RunsUntilStoppedAndRestarts) {
  Counter c;
  PeriodicThread t;
  t.Start(absl::Milliseconds(1), [&c] { c.Add(); });
  EXPECT_TRUE(c.WaitFor(3));
  t.Stop();
  const int after_stop = c.Get();
  t.Stop();  // idempotent
  EXPECT_EQ(c.Get(), after_stop);  // Stop joined the thread: no run can follow

  t.Start(absl::Milliseconds(1), [&c] { c.Add(); });
  EXPECT_TRUE(c.WaitFor(after_stop + 2));
}

TEST(PeriodicThread, StopDoesNotWaitForTheInterval) {
  Counter c;
  const absl::Time start = absl::Now();
  {
    PeriodicThread t;
    t.Start(absl::Hours(1), [&c] { c.Add(); });
  }  // the destructor stops it at once
  EXPECT_EQ(c.Get(), 0);
  EXPECT_LT(absl::Now() - start, absl::Minutes(1));
}

}  // namespace
}  // namespace grove
