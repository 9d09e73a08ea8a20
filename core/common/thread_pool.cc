#include "core/common/thread_pool.h"

#include <algorithm>
#include <memory>

#include "core/common/thread_priority.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace grove {
namespace {

// One polling step: tells the core this is a spin loop (on x86 it yields the pipeline to the
// sibling hyperthread and saves power).
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

std::chrono::microseconds ChooseSpin(int num_threads, std::chrono::microseconds spin) {
  if (spin >= std::chrono::microseconds(0)) return spin;
  const unsigned hardware = std::thread::hardware_concurrency();
  return static_cast<unsigned>(num_threads) + 1 <= hardware ? ThreadPool::kDefaultSpin
                                                            : std::chrono::microseconds(0);
}

}  // namespace

ThreadPool::ThreadPool(int num_threads, ThreadPriority priority, std::chrono::microseconds spin) {
  if (num_threads <= 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  spin_ = ChooseSpin(num_threads, spin);
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
    stop_.store(true);
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

template <class Ready>
bool ThreadPool::Spin(const Ready& ready) const {
  if (spin_.count() == 0) return ready();
  const auto deadline = std::chrono::steady_clock::now() + spin_;
  for (;;) {
    // The clock is read once per 64 polls: a poll is a few nanoseconds, a clock read tens.
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return ready();
  }
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (queue_.empty() && !stop_.load()) {
        // Counted under mu_, which ParallelFor holds while it queues and reads the count: a worker
        // either sees the new chunks here or is counted and notified.
        ++sleepers_;
        cv_.wait(lock, [this] { return stop_.load() || !queue_.empty(); });
        --sleepers_;
      }
      if (queue_.empty()) return;  // stopping
      task = std::move(queue_.front());
      queue_.pop_front();
      queued_.store(static_cast<int64_t>(queue_.size()), std::memory_order_relaxed);
    }
    task();
    // Poll for the next chunk before sleeping; whatever the poll sees is taken under mu_ above.
    Spin([this] {
      return queued_.load(std::memory_order_relaxed) > 0 || stop_.load(std::memory_order_relaxed);
    });
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
  int64_t wake = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t i = 0; i < helpers; ++i) queue_.emplace_back(run);
    queued_.store(static_cast<int64_t>(queue_.size()), std::memory_order_relaxed);
    // Spinning workers take chunks without a notification; only sleepers need one each.
    wake = std::min<int64_t>(helpers, sleepers_);
  }
  for (int64_t i = 0; i < wake; ++i) cv_.notify_one();
  run();
  if (Spin([&] { return state->done.load(std::memory_order_acquire) == chunks; })) return;
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
