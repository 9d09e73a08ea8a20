// MemoryBudget: a server-wide bound on the bytes that admitted requests hold (converted rows and
// results), so that a burst of large requests is refused with RESOURCE_EXHAUSTED instead of growing
// the process until the kernel kills it.
//
// Thread-safe (one atomic counter); never waits.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"

namespace grove::serving {

class MemoryBudget;

// Bytes held against a budget until destroyed (movable, not copyable).
class MemoryReservation {
 public:
  MemoryReservation() = default;
  MemoryReservation(MemoryReservation&& other) noexcept
      : budget_(std::exchange(other.budget_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  MemoryReservation& operator=(MemoryReservation&& other) noexcept;
  MemoryReservation(const MemoryReservation&) = delete;
  MemoryReservation& operator=(const MemoryReservation&) = delete;
  ~MemoryReservation() { Release(); }

  int64_t bytes() const { return bytes_; }
  void Release();

 private:
  friend class MemoryBudget;
  MemoryReservation(MemoryBudget* budget, int64_t bytes) : budget_(budget), bytes_(bytes) {}
  MemoryBudget* budget_ = nullptr;
  int64_t bytes_ = 0;
};

class MemoryBudget {
 public:
  // `limit_bytes` <= 0: unbounded (every Reserve succeeds; usage is still counted).
  explicit MemoryBudget(int64_t limit_bytes) : limit_(limit_bytes) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // RESOURCE_EXHAUSTED (naming the request's bytes, the bytes held and the limit) when `bytes` do
  // not fit; the reservation must not outlive the budget.
  absl::StatusOr<MemoryReservation> Reserve(int64_t bytes);
  int64_t used() const { return used_.load(std::memory_order_relaxed); }
  int64_t limit() const { return limit_; }

 private:
  friend class MemoryReservation;
  const int64_t limit_;
  std::atomic<int64_t> used_{0};
};

}  // namespace grove::serving
