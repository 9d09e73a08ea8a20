#include "core/serving/memory_budget.h"

#include "absl/strings/str_cat.h"

namespace grove::serving {

MemoryReservation& MemoryReservation::operator=(MemoryReservation&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void MemoryReservation::Release() {
  if (budget_ != nullptr) budget_->used_.fetch_sub(bytes_, std::memory_order_relaxed);
  budget_ = nullptr;
  bytes_ = 0;
}

absl::StatusOr<MemoryReservation> MemoryBudget::Reserve(int64_t bytes) {
  if (bytes < 0) bytes = 0;
  int64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (limit_ > 0 && (bytes > limit_ || used > limit_ - bytes)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the server's request memory budget is spent: this request needs ", bytes,
          " bytes, admitted requests hold ", used, " of ", limit_,
          " (--max_request_memory_mb); retry later or send fewer rows"));
    }
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return MemoryReservation(this, bytes);
}

}  // namespace grove::serving
