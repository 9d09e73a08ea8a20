#include "core/batching/manual_executor.h"

#include <algorithm>
#include <utility>

namespace grove::batching {

void ManualExecutor::Add(std::shared_ptr<BatchSource> source) {
  absl::MutexLock lock(&mu_);
  sources_.Add(std::move(source));
}

void ManualExecutor::Remove(const BatchSource* source) {
  absl::MutexLock lock(&mu_);
  sources_.Remove(source);
}

void ManualExecutor::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  sources_.Clear();
}

bool ManualExecutor::RunOne() {
  absl::AnyInvocable<void() &&> work;
  std::shared_ptr<BatchSource> owner;  // alive while its work runs
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return false;
    absl::Time earliest;
    work = sources_.Take(&owner, &earliest);
    if (!work) {
      next_poll_ = earliest;
      return false;
    }
    ++running_;
  }
  std::move(work)();
  absl::MutexLock lock(&mu_);
  --running_;
  return true;
}

bool ManualExecutor::TryBeginInline() {
  absl::MutexLock lock(&mu_);
  if (stopped_ || !inline_allowed_ || running_ > 0 || inline_busy_) return false;
  inline_busy_ = true;
  return true;
}

void ManualExecutor::EndInline() {
  absl::MutexLock lock(&mu_);
  inline_busy_ = false;
}

void ManualExecutor::SetInlineAllowed(bool allowed) {
  absl::MutexLock lock(&mu_);
  inline_allowed_ = allowed;
}


int ManualExecutor::RunUntilIdle() {
  int runs = 0;
  while (RunOne()) ++runs;
  return runs;
}

absl::Time ManualExecutor::next_poll() const {
  absl::MutexLock lock(&mu_);
  return next_poll_;
}

}  // namespace grove::batching
