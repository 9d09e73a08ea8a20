#include "core/serving/call_state.h"

namespace grove::serving {

void CallState::TaskDone(const absl::Status& status) {
  if (!status.ok()) {
    absl::MutexLock lock(&mu_);
    if (status_.ok()) status_ = status;
  }
  if (pending_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  absl::Status final_status;
  {
    absl::MutexLock lock(&mu_);
    final_status = status_;
  }
  std::move(done_)(std::move(final_status));
}

void CallState::Cancel() {
  std::vector<absl::AnyInvocable<void()>> hooks;
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;
    hooks.swap(hooks_);
  }
  for (auto& hook : hooks) hook();
}

void CallState::OnCancel(absl::AnyInvocable<void()> hook) {
  {
    absl::MutexLock lock(&mu_);
    if (!cancelled()) {
      hooks_.push_back(std::move(hook));
      return;
    }
  }
  hook();
}

void CallState::Hold(MemoryReservation reservation) {
  absl::MutexLock lock(&mu_);
  memory_ = std::move(reservation);
}

}  // namespace grove::serving
