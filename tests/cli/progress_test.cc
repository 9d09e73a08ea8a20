// The progress bar (client/progress.h) with a fake clock: quiet for short runs, then redrawn by
// Tick while no Update comes (one long chunk of a small but slow input), cleared by Finish.
#include "client/progress.h"

#include <chrono>
#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grove::cli {
namespace {

using ::testing::HasSubstr;

std::string Written(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  return text;
}

TEST(ProgressBar, TicksShowElapsedTimeWhileAChunkComputes) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  auto now = std::chrono::steady_clock::time_point();
  {
    ProgressBar bar("explain", out, [&now] { return now; });
    now += std::chrono::milliseconds(300);
    bar.Tick();
    EXPECT_EQ(Written(out), "");  // a short run stays clean
    now += std::chrono::seconds(3);
    bar.Tick();  // no Update yet: the first chunk is still computing
    std::string text = Written(out);
    EXPECT_THAT(text, HasSubstr("explain"));
    EXPECT_THAT(text, HasSubstr("0 rows"));
    EXPECT_THAT(text, HasSubstr("3s"));
    now += std::chrono::seconds(2);
    bar.Update(50, 100, 1000);
    text = Written(out);
    EXPECT_THAT(text, HasSubstr("50%"));
    EXPECT_THAT(text, HasSubstr("1.0k rows"));
    EXPECT_THAT(text, HasSubstr("5s"));
    bar.Finish();
    EXPECT_THAT(Written(out), testing::EndsWith("\r\033[K"));
    now += std::chrono::seconds(1);
    bar.Tick();  // nothing after the bar is cleared
    EXPECT_THAT(Written(out), testing::EndsWith("\r\033[K"));
  }
  std::fclose(out);
}

}  // namespace
}  // namespace grove::cli
