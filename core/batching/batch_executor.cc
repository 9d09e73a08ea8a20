#include "core/batching/batch_executor.h"

#include <algorithm>

namespace grove::batching {

const Clock* RealClock::Get() {
  static const RealClock* clock = new RealClock();
  return clock;
}

absl::Status ValidateBatcherOptions(const BatcherOptions& options) {
  if (options.max_batch_rows <= 0 || options.max_queue_rows <= 0 || options.max_queue_tasks <= 0 ||
      options.max_concurrent_batches <= 0) {
    return absl::InvalidArgumentError(
        "batching limits (max_batch_rows, max_queue_rows, max_queue_requests, "
        "max_concurrent_batches) must be positive");
  }
  if (options.max_delay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("batching max_delay must not be negative");
  }
  return absl::OkStatus();
}

void SourceRing::Add(std::shared_ptr<BatchSource> source) { sources_.push_back(std::move(source)); }

void SourceRing::Remove(const BatchSource* source) {
  sources_.erase(std::remove_if(sources_.begin(), sources_.end(),
                                [&](const auto& s) { return s.get() == source; }),
                 sources_.end());
}

absl::AnyInvocable<void() &&> SourceRing::Take(std::shared_ptr<BatchSource>* owner,
                                               absl::Time* earliest) {
  *earliest = absl::InfiniteFuture();
  const size_t n = sources_.size();
  for (size_t i = 0; i < n; ++i) {
    const size_t index = (next_ + i) % n;
    absl::Time next = absl::InfiniteFuture();
    absl::AnyInvocable<void() &&> work = sources_[index]->TakeWork(&next);
    *earliest = std::min(*earliest, next);
    if (work) {
      *owner = sources_[index];
      next_ = index + 1;
      return work;
    }
  }
  return nullptr;
}

BatchExecutor::BatchExecutor(int num_threads, const Clock* clock, ThreadPriority priority)
    : clock_(clock) {
  num_threads = std::max(1, num_threads);
  threads_.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i) {
    threads_.emplace_back([this, priority] {
      SetCurrentThreadPriority(priority);
      WorkerLoop();
    });
  }
}

BatchExecutor::~BatchExecutor() { Stop(); }

void BatchExecutor::Add(std::shared_ptr<BatchSource> source) {
  absl::MutexLock lock(&mu_);
  sources_.Add(std::move(source));
  ++generation_;
  cv_.SignalAll();
}

void BatchExecutor::Remove(const BatchSource* source) {
  absl::MutexLock lock(&mu_);
  sources_.Remove(source);
}

void BatchExecutor::Notify() {
  absl::MutexLock lock(&mu_);
  ++generation_;
  cv_.Signal();
}

bool BatchExecutor::TryBeginInline() {
  if (stopped_.load(std::memory_order_acquire)) return false;
  int idle = 0;
  return busy_.compare_exchange_strong(idle, 1, std::memory_order_acq_rel);
}

void BatchExecutor::EndInline() { busy_.fetch_sub(1, std::memory_order_acq_rel); }

void BatchExecutor::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    stop_ = true;
    stopped_.store(true, std::memory_order_release);
    cv_.SignalAll();
  }
  for (std::thread& t : threads_) t.join();
  absl::MutexLock lock(&mu_);
  sources_.Clear();
}

void BatchExecutor::WorkerLoop() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    const uint64_t generation = generation_;
    absl::Time earliest;
    // Keep the source alive while its work runs outside the lock.
    std::shared_ptr<BatchSource> owner;
    absl::AnyInvocable<void() &&> work = sources_.Take(&owner, &earliest);
    if (work) {
      busy_.fetch_add(1, std::memory_order_acq_rel);
      // Another idle worker may find more: wake one only when a source asked to be polled again
      // now (more is ready); work that arrives later wakes one through Notify.
      if (earliest <= clock_->Now()) cv_.Signal();
      mu_.Unlock();
      std::move(work)();
      owner.reset();
      busy_.fetch_sub(1, std::memory_order_acq_rel);
      mu_.Lock();
      continue;
    }
    if (generation != generation_ || stop_) continue;
    if (earliest == absl::InfiniteFuture()) {
      cv_.Wait(&mu_);
    } else {
      const absl::Duration wait = earliest - clock_->Now();
      if (wait > absl::ZeroDuration()) cv_.WaitWithTimeout(&mu_, wait);
    }
  }
}

}  // namespace grove::batching
