#include "core/common/thread_pool.h"

#include "core/common/thread_priority.h"

#include <algorithm>
#include <atomic>
#include <memory>

namespace grove {

ThreadPool::ThreadPool(int num_threads, ThreadPriority priority) {
  if (num_threads <= 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  workers_.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i) {
    workers_.emplace_back([this, priority] {
      SetCurrentThreadPriority(priority);
      WorkerLoop();
    });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  // A few chunks per thread balance uneven rows without much queueing overhead.
  const int64_t max_chunks = static_cast<int64_t>(num_threads() + 1) * 4;
  const int64_t wanted = std::clamp<int64_t>(n / grain, 1, max_chunks);
  if (wanted == 1) {
    fn(0, n);
    return;
  }
  const int64_t chunk = (n + wanted - 1) / wanted;
  // Rounding the size up can leave fewer chunks than wanted (64 items in 12 chunks of 6 is 11):
  // no chunk may start at or past n.
  const int64_t chunks = (n + chunk - 1) / chunk;
  // Chunks are claimed from a shared counter by helpers and by the caller, so the caller
  // never blocks on workers busy with another caller's work.
  struct State {
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
    std::mutex mu;
    std::condition_variable cv;
  };
  auto state = std::make_shared<State>();
  auto run = [state, n, chunk, chunks, &fn] {
    for (;;) {
      const int64_t c = state->next.fetch_add(1);
      if (c >= chunks) return;
      const int64_t b = c * chunk;
      fn(b, std::min(n, b + chunk));
      if (state->done.fetch_add(1) + 1 == chunks) {
        std::lock_guard<std::mutex> lock(state->mu);
        state->cv.notify_all();
      }
    }
  };
  const int64_t helpers = std::min<int64_t>(chunks - 1, num_threads());
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t i = 0; i < helpers; ++i) queue_.emplace_back(run);
  }
  // One worker per queued helper: notify_all would wake every idle worker for a few chunks.
  for (int64_t i = 0; i < helpers; ++i) cv_.notify_one();
  run();
  std::unique_lock<std::mutex> lock(state->mu);
  state->cv.wait(lock, [&] { return state->done.load() == chunks; });
}

void ParallelFor(ThreadPool* pool, int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)>& fn) {
  if (pool == nullptr) {
    if (n > 0) fn(0, n);
    return;
  }
  pool->ParallelFor(n, grain, fn);
}

}  // namespace grove
