#include "client/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_format.h"

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

}  // namespace

ProgressBar::ProgressBar(bool enabled, std::string label)
    : enabled_(enabled && ::isatty(STDERR_FILENO) == 1),
      label_(std::move(label)),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() { Finish(); }

void ProgressBar::Update(int64_t done_bytes, int64_t total_bytes, int64_t rows) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ < kDelay || (shown_ && now - last_draw_ < kPeriod)) return;
  last_draw_ = now;
  shown_ = true;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const double rate = seconds > 0 ? rows / seconds : 0;
  std::string line;
  if (total_bytes > 0) {
    const double f = std::min(1.0, static_cast<double>(done_bytes) / total_bytes);
    constexpr int kWidth = 30;
    const int fill = static_cast<int>(f * kWidth);
    std::string bar(fill, '=');
    if (fill < kWidth) bar += '>';
    bar.resize(kWidth, ' ');
    std::string eta = "";
    if (f > 0.01 && f < 1) eta = absl::StrFormat("  eta %.0fs", seconds * (1 - f) / f);
    line = absl::StrFormat("\r%s [%s] %3.0f%%  %s rows  %s rows/s%s", label_, bar, f * 100,
                           HumanCount(rows), HumanCount(rate), eta);
  } else {
    line = absl::StrFormat("\r%s  %s rows  %s rows/s", label_, HumanCount(rows), HumanCount(rate));
  }
  line += "\033[K";  // clear the rest of the line
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

void ProgressBar::Finish() {
  if (!enabled_ || !shown_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  shown_ = false;
}

}  // namespace grove::cli
