#include "core/serving/service_rate.h"

#include <algorithm>
#include <cmath>

namespace grove::serving {
namespace {

void Blend(double* average, double sample, double weight) {
  *average = *average < 0 ? sample : *average + weight * (sample - *average);
}

}  // namespace

void ServiceRate::Observe(int64_t rows, absl::Duration elapsed, int concurrent) {
  if (rows <= 0) return;
  const double per_row = std::max(0.0, absl::ToDoubleSeconds(elapsed)) / static_cast<double>(rows);
  absl::MutexLock lock(&mu_);
  Blend(&call_seconds_per_row_, per_row, kWeight);
  Blend(&queue_seconds_per_row_, per_row / std::max(1, concurrent), kWeight);
}

bool ServiceRate::known() const {
  absl::MutexLock lock(&mu_);
  return call_seconds_per_row_ >= 0;
}

absl::Duration ServiceRate::QueueTime(int64_t rows) const {
  absl::MutexLock lock(&mu_);
  if (queue_seconds_per_row_ < 0 || rows <= 0) return absl::ZeroDuration();
  return absl::Seconds(correction_ * queue_seconds_per_row_ * static_cast<double>(rows));
}

void ServiceRate::ObserveOutcome(absl::Duration expected, absl::Duration actual) {
  if (expected < kMinExpected) return;
  const double step =
      actual > expected ? kOutcomeStep * kQuantile : -kOutcomeStep * (1 - kQuantile);
  absl::MutexLock lock(&mu_);
  correction_ = std::clamp(correction_ * (1 + step), kMinCorrection, kMaxCorrection);
}

absl::Duration ServiceRate::CallTime(int64_t rows) const {
  absl::MutexLock lock(&mu_);
  if (call_seconds_per_row_ < 0) return absl::InfiniteDuration();
  return absl::Seconds(call_seconds_per_row_ * static_cast<double>(std::max<int64_t>(rows, 0)));
}

double ServiceRate::correction() const {
  absl::MutexLock lock(&mu_);
  return correction_;
}

int64_t ServiceRate::RowsFor(absl::Duration target, int64_t fallback) const {
  absl::MutexLock lock(&mu_);
  if (call_seconds_per_row_ <= 0) return call_seconds_per_row_ < 0 ? fallback : INT64_MAX / 2;
  const double rows = absl::ToDoubleSeconds(target) / call_seconds_per_row_;
  if (!(rows < 1e15)) return INT64_MAX / 2;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(rows)));
}

}  // namespace grove::serving
