#include "core/predict/tahoe/shape_trials.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace grove {

ShapeTrials::ShapeTrials(int runs) : runs_(std::clamp(runs, 1, 64)) {}

int ShapeTrials::Bucket(int64_t rows) {
  return static_cast<int>(std::floor(2.0 * std::log2(static_cast<double>(std::max<int64_t>(1, rows)))));
}

ShapeTrials::Trial* ShapeTrials::Find(int bucket, int best, int second) {
  for (Trial& t : trials_) {
    if (t.bucket == bucket && t.best == best && t.second == second) return &t;
  }
  if (trials_.size() >= static_cast<size_t>(kMaxTrials)) return nullptr;
  Trial t;
  t.bucket = bucket;
  t.best = best;
  t.second = second;
  trials_.push_back(t);
  return &trials_.back();
}

int ShapeTrials::Pick(int64_t rows, int best, int second, bool* timed) {
  *timed = false;
  absl::MutexLock lock(&mu_);
  Trial* t = Find(Bucket(rows), best, second);
  if (t == nullptr) return best;
  if (t->winner >= 0) return t->winner == 0 ? best : second;
  // The shape with fewer runs issued (the model's pick on a tie), so that concurrent batches of
  // the trial alternate too.
  const int i = t->issued[1] < t->issued[0] ? 1 : 0;
  ++t->issued[i];
  *timed = true;
  return i == 0 ? best : second;
}

void ShapeTrials::Record(int64_t rows, int best, int second, int code, double kernel_seconds) {
  absl::MutexLock lock(&mu_);
  Trial* t = Find(Bucket(rows), best, second);
  if (t == nullptr || t->winner >= 0 || (code != best && code != second)) return;
  const int i = code == best ? 0 : 1;
  const double per_row = kernel_seconds / static_cast<double>(std::max<int64_t>(1, rows));
  t->per_row[i] = t->timed[i] == 0 ? per_row : std::min(t->per_row[i], per_row);
  ++t->timed[i];
  if (t->timed[0] >= runs_ && t->timed[1] >= runs_) {
    t->winner = t->per_row[1] < t->per_row[0] ? 1 : 0;
  }
}

std::string ShapeTrials::Describe(std::string (*label)(int code)) const {
  absl::MutexLock lock(&mu_);
  std::string s;
  for (const Trial& t : trials_) {
    absl::StrAppend(&s, s.empty() ? "" : "; ", "rows ",
                    static_cast<int64_t>(std::ceil(std::exp2(t.bucket / 2.0))), "-",
                    static_cast<int64_t>(std::ceil(std::exp2((t.bucket + 1) / 2.0))) - 1, " ",
                    label(t.best),
                    absl::StrFormat(" %.4fus/row vs ", t.per_row[0] * 1e6), label(t.second),
                    absl::StrFormat(" %.4fus/row: ", t.per_row[1] * 1e6),
                    t.winner < 0 ? "timing" : label(t.winner == 0 ? t.best : t.second));
  }
  return s;
}

}  // namespace grove
