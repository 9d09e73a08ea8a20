// A fixed pool of worker threads with a blocking ParallelFor, for the CPU engines.
//
// Thread-safe: several callers may run ParallelFor concurrently; their chunks interleave on the
// workers, and each caller also works on its own range so a call never waits on an idle pool.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/common/thread_priority.h"

namespace grove {

class ThreadPool {
 public:
  // num_threads <= 0: one per hardware thread. Workers run at `priority`.
  explicit ThreadPool(int num_threads = 0, ThreadPriority priority = ThreadPriority::kNormal);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()); }

  // Calls fn(begin, end) over disjoint chunks covering [0, n), chunks of at least `grain` items, and
  // returns when all are done. fn must not throw.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

// Runs ParallelFor on `pool`, or inline when pool is nullptr.
void ParallelFor(ThreadPool* pool, int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)>& fn);

}  // namespace grove
