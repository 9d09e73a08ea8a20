#include "client/progress.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace grove::cli {
namespace {

constexpr auto kDelay = std::chrono::milliseconds(700);   // quiet for short runs
constexpr auto kPeriod = std::chrono::milliseconds(200);  // redraw at most 5 times a second

std::string HumanCount(double v) {
  if (v >= 1e9) return absl::StrFormat("%.2fG", v / 1e9);
  if (v >= 1e6) return absl::StrFormat("%.2fM", v / 1e6);
  if (v >= 1e3) return absl::StrFormat("%.1fk", v / 1e3);
  return absl::StrFormat("%.0f", v);
}

std::string Line(const std::string& label, int64_t done_bytes, int64_t total_bytes, int64_t rows,
                 double seconds) {
  const double rate = seconds > 0 ? rows / seconds : 0;
  const std::string elapsed = absl::StrFormat("%.0fs", seconds);
  if (total_bytes <= 0) {
    return absl::StrFormat("\r%s  %s rows  %s rows/s  %s\033[K", label, HumanCount(rows),
                           HumanCount(rate), elapsed);
  }
  const double f = std::min(1.0, static_cast<double>(done_bytes) / total_bytes);
  constexpr int kWidth = 30;
  const int fill = static_cast<int>(f * kWidth);
  std::string bar(fill, '=');
  if (fill < kWidth) bar += '>';
  bar.resize(kWidth, ' ');
  std::string eta = "";
  if (f > 0.01 && f < 1) eta = absl::StrFormat("  eta %.0fs", seconds * (1 - f) / f);
  return absl::StrFormat("\r%s [%s] %3.0f%%  %s rows  %s rows/s  %s%s\033[K", label, bar, f * 100,
                         HumanCount(rows), HumanCount(rate), elapsed, eta);
}

}  // namespace

ProgressBar::ProgressBar(bool enabled, std::string label)
    : enabled_(enabled && ::isatty(STDERR_FILENO) == 1),
      label_(std::move(label)),
      out_(stderr),
      clock_([] { return std::chrono::steady_clock::now(); }),
      start_(clock_()),
      last_draw_(start_) {
  if (!enabled_) return;
  ticker_ = std::thread([this] {
    absl::MutexLock lock(&mu_);
    while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::FromChrono(kPeriod))) {
      mu_.Unlock();  // drawing writes to the terminal: not under the lock
      Tick();
      mu_.Lock();
    }
  });
}

ProgressBar::ProgressBar(std::string label, std::FILE* out, Clock clock)
    : enabled_(true),
      label_(std::move(label)),
      out_(out),
      clock_(std::move(clock)),
      start_(clock_()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (ticker_.joinable()) ticker_.join();
  Finish();
}

void ProgressBar::Update(int64_t done_bytes, int64_t total_bytes, int64_t rows) {
  if (!enabled_) return;
  {
    absl::MutexLock lock(&mu_);
    done_bytes_ = done_bytes;
    total_bytes_ = total_bytes;
    rows_ = rows;
  }
  Draw();
}

void ProgressBar::Tick() {
  if (enabled_) Draw();
}

void ProgressBar::Draw() {
  const auto now = clock_();
  std::string line;
  {
    absl::MutexLock lock(&mu_);
    if (stop_ || now - start_ < kDelay || (shown_ && now - last_draw_ < kPeriod)) return;
    last_draw_ = now;
    shown_ = true;
    line = Line(label_, done_bytes_, total_bytes_, rows_,
                std::chrono::duration<double>(now - start_).count());
  }
  std::fputs(line.c_str(), out_);
  std::fflush(out_);
}

void ProgressBar::Finish() {
  if (!enabled_) return;
  {
    absl::MutexLock lock(&mu_);
    if (!shown_) return;
    shown_ = false;
    stop_ = true;  // nothing is drawn after the bar is cleared
  }
  std::fputs("\r\033[K", out_);
  std::fflush(out_);
}

}  // namespace grove::cli
