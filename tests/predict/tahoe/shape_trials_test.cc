#include "core/predict/tahoe/shape_trials.h"

#include <string>

#include "gtest/gtest.h"

namespace grove {
namespace {

constexpr int kBest = 11, kSecond = 22;

std::string Label(int code) { return code == kBest ? "best" : code == kSecond ? "second" : "?"; }

// Runs `n` batches of `rows` through the trial, each taking `best_s` or `second_s` seconds.
void RunBatches(ShapeTrials& t, int n, int64_t rows, double best_s, double second_s) {
  for (int i = 0; i < n; ++i) {
    bool timed = false;
    const int code = t.Pick(rows, kBest, kSecond, &timed);
    if (timed) t.Record(rows, kBest, kSecond, code, code == kBest ? best_s : second_s);
  }
}

TEST(ShapeTrialsTest, AlternatesThenKeepsTheFaster) {
  ShapeTrials t(3);
  bool timed = false;
  EXPECT_EQ(t.Pick(10000, kBest, kSecond, &timed), kBest);  // the model's pick first
  EXPECT_TRUE(timed);
  t.Record(10000, kBest, kSecond, kBest, 130e-6);
  EXPECT_EQ(t.Pick(10000, kBest, kSecond, &timed), kSecond);
  EXPECT_TRUE(timed);
  t.Record(10000, kBest, kSecond, kSecond, 100e-6);
  RunBatches(t, 4, 10000, 120e-6, 105e-6);  // three runs of each so far
  EXPECT_EQ(t.Pick(10000, kBest, kSecond, &timed), kSecond);
  EXPECT_FALSE(timed);
  EXPECT_EQ(t.Describe(Label), "rows 8192-11585 best 0.0120us/row vs second 0.0100us/row: second");
}

TEST(ShapeTrialsTest, TheModelsPickStaysOnATieAndWhenFaster) {
  ShapeTrials tie(2);
  RunBatches(tie, 4, 5000, 50e-6, 50e-6);
  bool timed = true;
  EXPECT_EQ(tie.Pick(5000, kBest, kSecond, &timed), kBest);
  EXPECT_FALSE(timed);
  ShapeTrials faster(2);
  RunBatches(faster, 4, 5000, 40e-6, 50e-6);
  EXPECT_EQ(faster.Pick(5000, kBest, kSecond, &timed), kBest);
}

TEST(ShapeTrialsTest, TheLeastTimeOfEachShapeDecides) {
  // One slow first run (a cold cache) of the second shape does not count against it.
  ShapeTrials t(2);
  bool timed = false;
  t.Record(10000, kBest, kSecond, t.Pick(10000, kBest, kSecond, &timed), 100e-6);
  t.Record(10000, kBest, kSecond, t.Pick(10000, kBest, kSecond, &timed), 900e-6);
  t.Record(10000, kBest, kSecond, t.Pick(10000, kBest, kSecond, &timed), 100e-6);
  t.Record(10000, kBest, kSecond, t.Pick(10000, kBest, kSecond, &timed), 90e-6);
  EXPECT_EQ(t.Pick(10000, kBest, kSecond, &timed), kSecond);
}

TEST(ShapeTrialsTest, BatchSizesAndPairsAreSeparateTrials) {
  ShapeTrials t(1);
  RunBatches(t, 2, 10000, 100e-6, 90e-6);  // decided: second
  bool timed = false;
  // 11,000 rows share 10,000's half-octave bucket; 16,000 and another pair do not.
  EXPECT_EQ(t.Pick(11000, kBest, kSecond, &timed), kSecond);
  EXPECT_FALSE(timed);
  EXPECT_EQ(t.Pick(16000, kBest, kSecond, &timed), kBest);
  EXPECT_TRUE(timed);
  EXPECT_EQ(t.Pick(10000, kBest, 33, &timed), kBest);
  EXPECT_TRUE(timed);
  // Per-row time: 11,000 rows in 99 us are as fast per row as 10,000 in 90 us.
  ShapeTrials per_row(1);
  bool unused = false;
  per_row.Record(10000, kBest, kSecond, per_row.Pick(10000, kBest, kSecond, &unused), 90e-6);
  per_row.Record(11000, kBest, kSecond, per_row.Pick(11000, kBest, kSecond, &unused), 98e-6);
  EXPECT_EQ(per_row.Pick(10000, kBest, kSecond, &unused), kSecond);
}

TEST(ShapeTrialsTest, BoundedAndIgnoresStrangers) {
  ShapeTrials t(1);
  bool timed = false;
  for (int i = 0; i < ShapeTrials::kMaxTrials; ++i) t.Pick(10000, kBest, 100 + i, &timed);
  // Beyond kMaxTrials pairs: the model's pick, untimed.
  EXPECT_EQ(t.Pick(10000, kBest, kSecond, &timed), kBest);
  EXPECT_FALSE(timed);
  // A record of a shape that is neither of the pair changes nothing.
  ShapeTrials u(1);
  u.Pick(10000, kBest, kSecond, &timed);
  u.Record(10000, kBest, kSecond, 99, 1e-6);
  u.Record(10000, kBest, kSecond, kBest, 100e-6);
  EXPECT_EQ(u.Pick(10000, kBest, kSecond, &timed), kSecond);  // the second is still to be timed
  EXPECT_TRUE(timed);
}

}  // namespace
}  // namespace grove
