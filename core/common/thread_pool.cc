#include "core/common/thread_pool.h"

#include <algorithm>
#include <memory>
#include <thread>

#include "core/common/cpus.h"
#include "core/common/spin.h"
#include "core/common/thread_priority.h"

namespace grove {

ThreadPool::ThreadPool(int num_threads, ThreadPriority priority, std::chrono::microseconds spin) {
  if (num_threads <= 0) num_threads = UsableCpus();
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
  return SpinUntil(spin_, ready);
}

// One ParallelFor call: chunks claimed from `next` by the caller and by the workers that took one
// of its queue entries. Owned by the pool and reused: a call's caller and each of its queue entries
// (then the worker that took it) hold a reference; the last to drop one returns the job to the
// pool's free list, so a caller returns as soon as its chunks are done, whatever a worker that took
// an entry late is doing.
struct ThreadPool::Job {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, chunk = 0, chunks = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::atomic<int64_t> refs{0};
  std::mutex mu;  // the caller's sleep on cv once its polling is over
  std::condition_variable cv;

  void Run() {
    for (;;) {
      const int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks) return;
      const int64_t b = c * chunk;
      (*fn)(b, std::min(n, b + chunk));
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
        std::lock_guard<std::mutex> lock(mu);
        cv.notify_all();
      }
    }
  }
};

void ThreadPool::LockPolling(std::unique_lock<std::mutex>* lock) const {
  if (!Spin([lock] { return lock->try_lock(); })) lock->lock();
}

void ThreadPool::Release(Job* job, int64_t refs) {
  if (job->refs.fetch_sub(refs, std::memory_order_acq_rel) != refs) return;
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  LockPolling(&lock);
  free_jobs_.push_back(job);
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    Job* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
      LockPolling(&lock);
      if (queue_.empty() && !stop_.load()) {
        // Counted under mu_, which ParallelFor holds while it queues and reads the count: a worker
        // either sees the new entries here or is counted and notified.
        ++sleepers_;
        cv_.wait(lock, [this] { return stop_.load() || !queue_.empty(); });
        --sleepers_;
      }
      if (queue_.empty()) return;  // stopping
      job = queue_.front();  // the entry's reference is now this worker's
      queue_.pop_front();
      queued_.store(static_cast<int64_t>(queue_.size()), std::memory_order_relaxed);
    }
    // A job whose chunks are all claimed returns at once: its caller may have returned, and only
    // an unclaimed chunk reads the caller's function.
    job->Run();
    Release(job, 1);
    // Poll for the next entry before sleeping; whatever the poll sees is taken under mu_ above.
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
  // Chunks are claimed from the job's counter by helpers and by the caller, so the caller never
  // blocks on workers busy with another caller's work.
  const int64_t helpers = std::min<int64_t>(chunks - 1, num_threads());
  Job* job = nullptr;
  int64_t wake = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_jobs_.empty()) {  // a pool makes as many jobs as it has concurrent calls, once
      jobs_.push_back(std::make_unique<Job>());
      free_jobs_.push_back(jobs_.back().get());
    }
    job = free_jobs_.back();
    free_jobs_.pop_back();
    job->fn = &fn;
    job->n = n;
    job->chunk = chunk;
    job->chunks = chunks;
    job->next.store(0, std::memory_order_relaxed);
    job->done.store(0, std::memory_order_relaxed);
    job->refs.store(1 + helpers, std::memory_order_relaxed);
    for (int64_t i = 0; i < helpers; ++i) queue_.push_back(job);
    queued_.store(static_cast<int64_t>(queue_.size()), std::memory_order_relaxed);
    // Polling workers take entries without a notification; only sleepers need one each.
    wake = std::min<int64_t>(helpers, sleepers_);
  }
  for (int64_t i = 0; i < wake; ++i) cv_.notify_one();
  job->Run();
  const auto finished = [job] {
    return job->done.load(std::memory_order_acquire) == job->chunks;
  };
  if (!Spin(finished)) {
    std::unique_lock<std::mutex> lock(job->mu);
    job->cv.wait(lock, finished);
  }
  // Every chunk is done: the entries no worker took leave the queue with the caller's reference.
  int64_t dropped = 0;
  {
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    LockPolling(&lock);
    const auto kept = std::remove(queue_.begin(), queue_.end(), job);
    dropped = queue_.end() - kept;
    queue_.erase(kept, queue_.end());
    queued_.store(static_cast<int64_t>(queue_.size()), std::memory_order_relaxed);
  }
  Release(job, 1 + dropped);
}

void ParallelFor(ThreadPool* pool, int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)>& fn) {
  if (pool == nullptr) {
    if (n > 0) fn(0, n);
    return;
  }
  pool->ParallelFor(n, grain, fn);
}

std::unique_ptr<ThreadPool> MakeCallerPool(int threads) {
  if (threads <= 0) threads = UsableCpus();
  if (threads <= 1) return nullptr;
  return std::make_unique<ThreadPool>(threads - 1);
}

}  // namespace grove
