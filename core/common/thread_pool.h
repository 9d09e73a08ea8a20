// A fixed pool of worker threads with a blocking ParallelFor, for the CPU engines.
//
// Thread-safe: several callers may run ParallelFor concurrently; their chunks interleave on the
// workers, and each caller also works on its own range so a call never waits on an idle pool.
//
// Idle workers spin for a short while before they sleep, and a caller spins on its last chunks
// before it sleeps: a sleeping thread takes tens of microseconds to wake on a virtual machine,
// which is longer than a whole small batch takes to compute, so back-to-back calls (a server
// under load, a loop over batches) find the workers awake. OpenMP and TBB runtimes do the same.
// Spinning is off where the pool and its caller would outnumber the hardware threads, since a
// spinning thread there takes a core from one with work.
//
// Calls reuse the pool's job records (as many as calls ever ran at once), so a call allocates
// nothing but, rarely, a block of the queue; a caller returns as soon as its chunks are done.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/common/spin.h"
#include "core/common/thread_priority.h"

namespace grove {

class ThreadPool {
 public:
  // num_threads <= 0: one per CPU the process may run on (UsableCpus, core/common/cpus.h).
  // Workers run at `priority`. `spin`: how long an idle worker or a waiting caller polls for work
  // before it sleeps on a condition variable (0: never polls; kAutoSpin, core/common/spin.h:
  // kDefaultSpin where the workers and one caller fit the machine, else 0).
  explicit ThreadPool(int num_threads = 0, ThreadPriority priority = ThreadPriority::kNormal,
                      std::chrono::microseconds spin = kAutoSpin);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()); }
  std::chrono::microseconds spin() const { return spin_; }
  // Helper requests waiting for a worker (callers' queue entries), for tests and diagnostics.
  int64_t queued() const { return queued_.load(std::memory_order_relaxed); }

  // Calls fn(begin, end) over disjoint chunks covering [0, n), chunks of at least `grain` items, and
  // returns when all are done. fn must not throw.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  struct Job;
  void WorkerLoop();
  // Polls `ready` for up to spin_; true when it turned true.
  template <class Ready>
  bool Spin(const Ready& ready) const;
  // Locks mu_, polling it for up to spin_ first: a worker that found work by polling must not
  // sleep in the mutex (waking it would cost more than the chunk it came for).
  void LockPolling(std::unique_lock<std::mutex>* lock) const;
  // Drops `refs` references to `job`; the last returns it to free_jobs_.
  void Release(Job* job, int64_t refs);

  std::chrono::microseconds spin_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // One entry per helper a caller asked for; a worker takes an entry and helps with that job.
  std::deque<Job*> queue_;                   // guarded by mu_
  std::vector<std::unique_ptr<Job>> jobs_;   // every job record; guarded by mu_
  std::vector<Job*> free_jobs_;              // those no call holds; guarded by mu_
  int sleepers_ = 0;                         // workers waiting on cv_; guarded by mu_
  std::atomic<int64_t> queued_{0};           // queue_.size(), read without mu_ by spinners
  std::atomic<bool> stop_{false};
  std::vector<std::thread> workers_;
};

// The pool of a call that uses `threads` threads in all, the calling thread among them:
// threads - 1 workers, null for 1 (the caller alone). threads <= 0: UsableCpus() in all (the
// CLI's and groveml's --threads / threads=0).
std::unique_ptr<ThreadPool> MakeCallerPool(int threads);

// Runs ParallelFor on `pool`, or inline when pool is nullptr.
void ParallelFor(ThreadPool* pool, int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)>& fn);

}  // namespace grove
