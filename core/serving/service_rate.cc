#include "core/serving/service_rate.h"

#include <algorithm>
#include <cmath>

namespace grove::serving {
namespace {

// Under the writers' lock: the only writer of `average` at a time.
void Blend(std::atomic<double>* average, double sample, double weight) {
  const double old = average->load(std::memory_order_relaxed);
  average->store(old < 0 ? sample : old + weight * (sample - old), std::memory_order_relaxed);
}

}  // namespace

void ServiceRate::Observe(int64_t rows, absl::Duration elapsed, int concurrent) {
  if (rows <= 0) return;
  const double per_row = std::max(0.0, absl::ToDoubleSeconds(elapsed)) / static_cast<double>(rows);
  absl::MutexLock lock(&mu_);
  Blend(&queue_seconds_per_row_, per_row / std::max(1, concurrent), kWeight);
  Blend(&call_seconds_per_row_, per_row, kWeight);
}

bool ServiceRate::known() const {
  return call_seconds_per_row_.load(std::memory_order_relaxed) >= 0;
}

absl::Duration ServiceRate::QueueTime(int64_t rows) const {
  const double per_row = queue_seconds_per_row_.load(std::memory_order_relaxed);
  if (per_row < 0 || rows <= 0) return absl::ZeroDuration();
  return absl::Seconds(correction() * per_row * static_cast<double>(rows));
}

void ServiceRate::ObserveOutcome(absl::Duration expected, absl::Duration actual) {
  if (expected < kMinExpected) return;
  const double step =
      actual > expected ? kOutcomeStep * kQuantile : -kOutcomeStep * (1 - kQuantile);
  absl::MutexLock lock(&mu_);
  correction_.store(std::clamp(correction() * (1 + step), kMinCorrection, kMaxCorrection),
                    std::memory_order_relaxed);
}

absl::Duration ServiceRate::CallTime(int64_t rows) const {
  const double per_row = call_seconds_per_row_.load(std::memory_order_relaxed);
  if (per_row < 0) return absl::InfiniteDuration();
  return absl::Seconds(per_row * static_cast<double>(std::max<int64_t>(rows, 0)));
}

double ServiceRate::correction() const { return correction_.load(std::memory_order_relaxed); }

int64_t ServiceRate::RowsFor(absl::Duration target, int64_t fallback) const {
  const double per_row = call_seconds_per_row_.load(std::memory_order_relaxed);
  if (per_row <= 0) return per_row < 0 ? fallback : INT64_MAX / 2;
  const double rows = absl::ToDoubleSeconds(target) / per_row;
  if (!(rows < 1e15)) return INT64_MAX / 2;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(rows)));
}

}  // namespace grove::serving
