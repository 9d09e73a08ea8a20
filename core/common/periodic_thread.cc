#include "core/common/periodic_thread.h"

#include <utility>

namespace grove {

void PeriodicThread::Start(absl::Duration interval, std::function<void()> fn) {
  Stop();
  {
    absl::MutexLock lock(&mu_);
    stop_ = false;
  }
  thread_ = std::thread([this, interval, fn = std::move(fn)] {
    absl::MutexLock lock(&mu_);
    while (true) {
      mu_.AwaitWithTimeout(absl::Condition(&stop_), interval);
      if (stop_) return;
      mu_.Unlock();
      fn();
      mu_.Lock();
    }
  });
}

void PeriodicThread::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace grove
