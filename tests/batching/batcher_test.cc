// Batcher with a fake clock (no sleeps), and BatchExecutor/BatchQueue end to end.
#include "core/batching/batcher.h"

#include <atomic>
#include <functional>
#include <memory>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "core/batching/batch_executor.h"
#include "core/batching/clock.h"
#include "core/batching/manual_executor.h"
#include "gtest/gtest.h"

namespace grove::batching {
namespace {

struct Task {
  int id = 0;
  int64_t rows = 1;
  absl::Time deadline_at = absl::InfiniteFuture();
  std::shared_ptr<std::atomic<bool>> cancel = std::make_shared<std::atomic<bool>>(false);
  int64_t size() const { return rows; }
  absl::Time deadline() const { return deadline_at; }
  bool cancelled() const { return cancel->load(); }
};

// A task type with only size(): the optional hooks are detected at compile time.
struct PlainTask {
  int64_t n;
  int64_t size() const { return n; }
};

std::unique_ptr<Task> MakeTask(int id, int64_t rows) {
  auto t = std::make_unique<Task>();
  t->id = id;
  t->rows = rows;
  return t;
}

BatcherOptions Options(int64_t batch_rows, absl::Duration delay, int64_t queue_rows = 1000,
                       int64_t queue_tasks = 100, int concurrent = 8) {
  BatcherOptions o;
  o.max_batch_rows = batch_rows;
  o.max_delay = delay;
  o.max_queue_rows = queue_rows;
  o.max_queue_tasks = queue_tasks;
  o.max_concurrent_batches = concurrent;
  return o;
}

std::vector<int> Ids(const Batch<Task>& b) {
  std::vector<int> ids;
  for (const auto& t : b.tasks) ids.push_back(t->id);
  return ids;
}

TEST(BatcherTest, WaitsForDelayThenFlushes) {
  FakeClock clock;
  Batcher<Task> b(Options(100, absl::Milliseconds(5)), &clock);
  const absl::Time t0 = clock.Now();
  auto t1 = MakeTask(1, 10);
  ASSERT_TRUE(b.Schedule(t1).ok());
  EXPECT_EQ(t1, nullptr);  // taken
  auto r = b.Poll();
  EXPECT_TRUE(r.batch.empty());
  EXPECT_EQ(r.next_poll, t0 + absl::Milliseconds(5));
  clock.Advance(absl::Milliseconds(2));
  auto t2 = MakeTask(2, 20);
  ASSERT_TRUE(b.Schedule(t2).ok());
  r = b.Poll();
  EXPECT_TRUE(r.batch.empty());
  EXPECT_EQ(r.next_poll, t0 + absl::Milliseconds(5));  // the oldest task decides
  clock.Advance(absl::Milliseconds(3));
  r = b.Poll();
  ASSERT_FALSE(r.batch.empty());
  EXPECT_EQ(Ids(r.batch), (std::vector<int>{1, 2}));
  EXPECT_EQ(r.batch.rows, 30);
  EXPECT_EQ(r.batch.enqueue_times[0], t0);
  EXPECT_EQ(r.batch.enqueue_times[1], t0 + absl::Milliseconds(2));
  EXPECT_EQ(r.batch.formed, t0 + absl::Milliseconds(5));
  EXPECT_EQ(r.next_poll, absl::InfiniteFuture());
  EXPECT_EQ(b.stats().inflight_rows, 30);
  b.BatchDone(30);
  EXPECT_TRUE(b.Idle());
}

TEST(BatcherTest, FullBatchIsReadyAtOnce) {
  FakeClock clock;
  Batcher<Task> b(Options(32, absl::Seconds(10)), &clock);
  for (int i = 0; i < 5; ++i) {
    auto t = MakeTask(i, 8);
    ASSERT_TRUE(b.Schedule(t).ok());
  }
  auto r = b.Poll();  // 40 rows queued >= 32: no waiting
  EXPECT_EQ(Ids(r.batch), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(r.batch.rows, 32);
  // One task of 8 rows left: it waits for its delay.
  EXPECT_EQ(r.next_poll, clock.Now() + absl::Seconds(10));
  EXPECT_EQ(b.stats().queued_rows, 8);
  EXPECT_EQ(b.stats().queued_tasks, 1);
}

TEST(BatcherTest, FlushStopsWaitingButKeepsAccepting) {
  FakeClock clock;
  Batcher<Task> b(Options(100, absl::Seconds(60)), &clock);
  auto t1 = MakeTask(1, 4);
  ASSERT_TRUE(b.Schedule(t1).ok());
  EXPECT_TRUE(b.Poll().batch.empty());  // waits for its delay
  b.Flush();
  auto r = b.Poll();
  EXPECT_EQ(Ids(r.batch), (std::vector<int>{1}));
  b.BatchDone(r.batch.rows);
  auto t2 = MakeTask(2, 4);
  ASSERT_TRUE(b.Schedule(t2).ok());  // still accepting
  EXPECT_EQ(Ids(b.Poll().batch), (std::vector<int>{2}));  // and not waiting
}

TEST(BatcherTest, BatchesNeverExceedRowLimitAndTasksAreNotSplit) {
  FakeClock clock;
  Batcher<Task> b(Options(10, absl::ZeroDuration()), &clock);
  const int64_t sizes[] = {4, 4, 4, 10, 1, 25, 3};
  for (int i = 0; i < 7; ++i) {
    auto t = MakeTask(i, sizes[i]);
    ASSERT_TRUE(b.Schedule(t).ok());
  }
  std::vector<std::vector<int>> batches;
  for (int i = 0; i < 10; ++i) {
    auto r = b.Poll();
    if (r.batch.empty()) break;
    batches.push_back(Ids(r.batch));
    if (r.batch.tasks.size() > 1) EXPECT_LE(r.batch.rows, 10);
  }
  // FIFO; the 25-row task is a batch of its own.
  EXPECT_EQ(batches, (std::vector<std::vector<int>>{{0, 1}, {2}, {3}, {4}, {5}, {6}}));
}

TEST(BatcherTest, QueueBoundsAnswerResourceExhaustedAtOnce) {
  FakeClock clock;
  Batcher<Task> b(Options(100, absl::Seconds(1), /*queue_rows=*/50, /*queue_tasks=*/3), &clock);
  auto a = MakeTask(1, 40);
  ASSERT_TRUE(b.Schedule(a).ok());
  auto big = MakeTask(2, 11);  // 40 + 11 > 50 rows
  absl::Status s = b.Schedule(big);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("50"), absl::string_view::npos) << s;
  ASSERT_NE(big, nullptr);  // the caller keeps it
  EXPECT_EQ(big->id, 2);
  auto c = MakeTask(3, 5), d = MakeTask(4, 5), e = MakeTask(5, 1);
  ASSERT_TRUE(b.Schedule(c).ok());
  ASSERT_TRUE(b.Schedule(d).ok());
  s = b.Schedule(e);  // 4th task, limit 3
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(b.stats().queued_tasks, 3);
  EXPECT_EQ(b.stats().queued_rows, 50);
}

TEST(BatcherTest, RejectsEmptyTasks) {
  FakeClock clock;
  Batcher<Task> b(Options(10, absl::Seconds(1)), &clock);
  auto t = MakeTask(1, 0);
  EXPECT_EQ(b.Schedule(t).code(), absl::StatusCode::kInvalidArgument);
}

TEST(BatcherTest, ExpiredAndCancelledTasksAreDroppedBeforeCompute) {
  FakeClock clock;
  Batcher<Task> b(Options(100, absl::Milliseconds(10)), &clock);
  auto t1 = MakeTask(1, 5);
  t1->deadline_at = clock.Now() + absl::Milliseconds(3);
  auto t2 = MakeTask(2, 5);
  auto cancel = t2->cancel;
  auto t3 = MakeTask(3, 5);
  ASSERT_TRUE(b.Schedule(t1).ok());
  ASSERT_TRUE(b.Schedule(t2).ok());
  ASSERT_TRUE(b.Schedule(t3).ok());
  auto r = b.Poll();
  EXPECT_TRUE(r.dropped.empty());
  // The next poll comes at the earliest deadline so that expired work is answered promptly.
  EXPECT_EQ(r.next_poll, clock.Now() + absl::Milliseconds(3));
  cancel->store(true);
  clock.Advance(absl::Milliseconds(3));
  r = b.Poll();
  ASSERT_EQ(r.dropped.size(), 2u);
  EXPECT_EQ(r.dropped[0].task->id, 1);
  EXPECT_EQ(r.dropped[0].status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r.dropped[1].task->id, 2);
  EXPECT_EQ(r.dropped[1].status.code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(r.batch.empty());
  EXPECT_EQ(b.stats().queued_rows, 5);
  clock.Advance(absl::Milliseconds(7));
  r = b.Poll();
  EXPECT_EQ(Ids(r.batch), (std::vector<int>{3}));
}

TEST(BatcherTest, DeadlineAtBatchTimeIsDropped) {
  FakeClock clock;
  Batcher<Task> b(Options(100, absl::Milliseconds(10)), &clock);
  auto t = MakeTask(1, 5);
  t->deadline_at = clock.Now() + absl::Milliseconds(10);
  ASSERT_TRUE(b.Schedule(t).ok());
  clock.Advance(absl::Milliseconds(10));  // delay and deadline expire together
  auto r = b.Poll();
  EXPECT_TRUE(r.batch.empty());
  ASSERT_EQ(r.dropped.size(), 1u);
  EXPECT_EQ(r.dropped[0].status.code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(BatcherTest, ConcurrentBatchLimitAccumulatesWork) {
  FakeClock clock;
  Batcher<Task> b(Options(100, absl::ZeroDuration(), 1000, 100, /*concurrent=*/1), &clock);
  auto t1 = MakeTask(1, 1);
  ASSERT_TRUE(b.Schedule(t1).ok());
  auto r = b.Poll();
  ASSERT_EQ(Ids(r.batch), (std::vector<int>{1}));
  for (int i = 2; i <= 4; ++i) {
    auto t = MakeTask(i, 1);
    ASSERT_TRUE(b.Schedule(t).ok());
  }
  auto blocked = b.Poll();  // one batch computing: wait for BatchDone
  EXPECT_TRUE(blocked.batch.empty());
  EXPECT_EQ(blocked.next_poll, absl::InfiniteFuture());
  b.BatchDone(1);
  r = b.Poll();
  EXPECT_EQ(Ids(r.batch), (std::vector<int>{2, 3, 4}));  // merged while the engine was busy
}

// Schedule says when a queued task may let a poll find something sooner: a free batch slot, or a
// deadline earlier than every queued one; with every slot computing and no earlier deadline,
// nothing changes before the next BatchDone.
TEST(BatcherTest, PollSoonerOnlyWhenASlotIsFreeOrADeadlineIsEarlier) {
  FakeClock clock;
  Batcher<Task> b(Options(100, absl::ZeroDuration(), 1000, 100, /*concurrent=*/1), &clock);
  bool sooner = false;
  auto t1 = MakeTask(1, 1);
  ASSERT_TRUE(b.Schedule(t1, nullptr, nullptr, nullptr, &sooner).ok());
  EXPECT_TRUE(sooner);  // the slot is free
  ASSERT_EQ(Ids(b.Poll().batch), (std::vector<int>{1}));

  auto t2 = MakeTask(2, 1);
  t2->deadline_at = clock.Now() + absl::Seconds(10);
  ASSERT_TRUE(b.Schedule(t2, nullptr, nullptr, nullptr, &sooner).ok());
  EXPECT_TRUE(sooner);  // the queue's first deadline
  auto t3 = MakeTask(3, 1);
  t3->deadline_at = clock.Now() + absl::Seconds(20);
  ASSERT_TRUE(b.Schedule(t3, nullptr, nullptr, nullptr, &sooner).ok());
  EXPECT_FALSE(sooner);  // later than t2's, and the only slot computes
  auto t4 = MakeTask(4, 1);  // no deadline
  ASSERT_TRUE(b.Schedule(t4, nullptr, nullptr, nullptr, &sooner).ok());
  EXPECT_FALSE(sooner);
  auto t5 = MakeTask(5, 1);
  t5->deadline_at = clock.Now() + absl::Seconds(5);
  ASSERT_TRUE(b.Schedule(t5, nullptr, nullptr, nullptr, &sooner).ok());
  EXPECT_TRUE(sooner);  // earlier than every queued one
  EXPECT_EQ(b.Poll().next_poll, clock.Now() + absl::Seconds(5));

  b.BatchDone(1);
  auto t6 = MakeTask(6, 1);
  ASSERT_TRUE(b.Schedule(t6, nullptr, nullptr, nullptr, &sooner).ok());
  EXPECT_TRUE(sooner);  // the slot is free again
  // Refused: not queued, nothing to poll for.
  Batcher<Task> small(Options(10, absl::ZeroDuration(), /*queue_rows=*/2), &clock);
  auto big = MakeTask(7, 3);
  EXPECT_FALSE(small.Schedule(big, nullptr, nullptr, nullptr, &sooner).ok());
  EXPECT_FALSE(sooner);
}

TEST(BatcherTest, CloseRefusesNewWorkAndFlushesWithoutDelay) {
  FakeClock clock;
  Batcher<Task> b(Options(100, absl::Hours(1)), &clock);
  auto t1 = MakeTask(1, 3);
  ASSERT_TRUE(b.Schedule(t1).ok());
  b.Close();
  auto t2 = MakeTask(2, 3);
  EXPECT_EQ(b.Schedule(t2).code(), absl::StatusCode::kUnavailable);
  auto r = b.Poll();  // no waiting for the hour
  EXPECT_EQ(Ids(r.batch), (std::vector<int>{1}));
  b.BatchDone(3);
  EXPECT_TRUE(b.Idle());
}

TEST(BatcherTest, DrainAllAnswersEverything) {
  FakeClock clock;
  Batcher<Task> b(Options(100, absl::Hours(1)), &clock);
  for (int i = 0; i < 3; ++i) {
    auto t = MakeTask(i, 2);
    ASSERT_TRUE(b.Schedule(t).ok());
  }
  auto dropped = b.DrainAll(absl::UnavailableError("shutdown"));
  ASSERT_EQ(dropped.size(), 3u);
  for (const auto& d : dropped) EXPECT_EQ(d.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(b.stats().queued_rows, 0);
}

TEST(BatcherTest, SetOptionsAppliesToNextPoll) {
  FakeClock clock;
  Batcher<Task> b(Options(100, absl::Hours(1)), &clock);
  auto t = MakeTask(1, 3);
  ASSERT_TRUE(b.Schedule(t).ok());
  EXPECT_TRUE(b.Poll().batch.empty());
  b.SetOptions(Options(2, absl::Hours(1)));  // 3 queued rows >= 2: ready now
  EXPECT_EQ(Ids(b.Poll().batch), (std::vector<int>{1}));
}

TEST(BatcherTest, PlainTasksWithoutHooks) {
  FakeClock clock;
  Batcher<PlainTask> b(Options(4, absl::Milliseconds(1)), &clock);
  for (int i = 0; i < 3; ++i) {
    auto t = std::make_unique<PlainTask>(PlainTask{2});
    ASSERT_TRUE(b.Schedule(t).ok());
  }
  auto r = b.Poll();
  EXPECT_EQ(r.batch.rows, 4);
  EXPECT_EQ(r.next_poll, clock.Now() + absl::Milliseconds(1));
}

TEST(BatcherTest, ValidateOptions) {
  EXPECT_TRUE(ValidateBatcherOptions(BatcherOptions{}).ok());
  BatcherOptions o;
  o.max_batch_rows = 0;
  EXPECT_EQ(ValidateBatcherOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o = BatcherOptions{};
  o.max_delay = absl::Milliseconds(-1);
  EXPECT_EQ(ValidateBatcherOptions(o).code(), absl::StatusCode::kInvalidArgument);
}

// Many threads scheduling while polls run: every task comes out exactly once, in FIFO order per
// producer, and batches respect the limit.
TEST(BatcherTest, ConcurrentScheduleAndPollLoseNothing) {
  FakeClock clock;
  Batcher<Task> b(Options(64, absl::ZeroDuration(), 1 << 20, 1 << 20), &clock);
  constexpr int kThreads = 4, kPerThread = 2000;
  std::vector<std::thread> producers;
  for (int p = 0; p < kThreads; ++p) {
    producers.emplace_back([&b, p] {
      for (int i = 0; i < kPerThread; ++i) {
        auto t = MakeTask(p * kPerThread + i, 1 + i % 5);
        ASSERT_TRUE(b.Schedule(t).ok());
      }
    });
  }
  std::vector<int> seen;
  std::vector<int> last(kThreads, -1);
  std::atomic<bool> done{false};
  std::thread closer([&] {
    for (auto& t : producers) t.join();
    done = true;
  });
  while (true) {
    const bool finished = done.load();
    auto r = b.Poll();
    if (!r.batch.empty()) {
      if (r.batch.tasks.size() > 1) ASSERT_LE(r.batch.rows, 64);
      for (const auto& t : r.batch.tasks) {
        const int p = t->id / kPerThread;
        ASSERT_GT(t->id, last[p]);
        last[p] = t->id;
        seen.push_back(t->id);
      }
      b.BatchDone(r.batch.rows);
    } else if (finished) {
      break;
    }
  }
  closer.join();
  EXPECT_EQ(seen.size(), size_t{kThreads * kPerThread});
}

TEST(BatcherTest, DefaultGoesAtOnceWhenIdleAndMergesWhatArrivesMeanwhile) {
  FakeClock clock;
  BatcherOptions o;  // the defaults: no delay
  o.max_concurrent_batches = 1;
  Batcher<Task> b(o, &clock);
  auto t1 = MakeTask(1, 1);
  ASSERT_TRUE(b.Schedule(t1).ok());
  auto first = b.Poll();  // the clock has not moved: a lone task does not wait for company
  ASSERT_EQ(Ids(first.batch), std::vector<int>({1}));
  for (int id : {2, 3, 4}) {
    auto t = MakeTask(id, 1);
    ASSERT_TRUE(b.Schedule(t).ok());
  }
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(b.Poll().batch.empty()) << "the engine is busy: arrivals wait for the next batch";
  b.BatchDone(first.batch.rows);
  EXPECT_EQ(Ids(b.Poll().batch), std::vector<int>({2, 3, 4}));
}

// Schedule's run_now: a task that finds the queue empty and a batch slot free comes back as a
// batch of its own (counted as computing) instead of being queued; otherwise it is queued.
TEST(BatcherTest, RunNowWhenTheQueueIsEmptyAndASlotIsFree) {
  FakeClock clock;
  BatcherOptions o;  // no delay
  o.max_concurrent_batches = 2;
  Batcher<Task> b(o, &clock);
  Batch<Task> now1;
  auto t1 = MakeTask(1, 3);
  ASSERT_TRUE(b.Schedule(t1, nullptr, nullptr, &now1).ok());
  EXPECT_EQ(t1, nullptr);
  ASSERT_EQ(Ids(now1), std::vector<int>({1}));
  EXPECT_EQ(now1.rows, 3);
  EXPECT_EQ(now1.enqueue_times, std::vector<absl::Time>({clock.Now()}));
  EXPECT_EQ(b.stats().inflight_batches, 1);
  EXPECT_EQ(b.stats().inflight_rows, 3);
  EXPECT_EQ(b.stats().queued_tasks, 0);

  // A second slot is free: the next one runs at once too.
  Batch<Task> now2;
  auto t2 = MakeTask(2, 1);
  ASSERT_TRUE(b.Schedule(t2, nullptr, nullptr, &now2).ok());
  EXPECT_EQ(Ids(now2), std::vector<int>({2}));
  // Both slots taken: queued, and Poll hands nothing out until a slot frees.
  Batch<Task> now3;
  auto t3 = MakeTask(3, 1);
  ASSERT_TRUE(b.Schedule(t3, nullptr, nullptr, &now3).ok());
  EXPECT_TRUE(now3.empty());
  EXPECT_TRUE(b.Poll().batch.empty());
  // Something is queued: a newcomer queues behind it even with a free slot (FIFO).
  b.BatchDone(now1.rows);
  Batch<Task> now4;
  auto t4 = MakeTask(4, 1);
  ASSERT_TRUE(b.Schedule(t4, nullptr, nullptr, &now4).ok());
  EXPECT_TRUE(now4.empty());
  EXPECT_EQ(Ids(b.Poll().batch), std::vector<int>({3, 4}));

  // Admission applies as for a queued task: bounds and the admit function refuse, the caller
  // keeps the task.
  Batcher<Task> small(Options(10, absl::ZeroDuration(), /*queue_rows=*/2), &clock);
  Batch<Task> refused;
  auto big = MakeTask(5, 3);
  EXPECT_EQ(small.Schedule(big, nullptr, nullptr, &refused).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_NE(big, nullptr);
  EXPECT_TRUE(refused.empty());
  auto no = [](const Batcher<Task>::Stats&, int64_t) {
    return absl::ResourceExhaustedError("no");
  };
  const Batcher<Task>::AdmitFn admit(no);
  auto t6 = MakeTask(6, 1);
  EXPECT_EQ(small.Schedule(t6, nullptr, &admit, &refused).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(refused.empty());
  // Closed: UNAVAILABLE, never run.
  small.Close();
  EXPECT_EQ(small.Schedule(t6, nullptr, nullptr, &refused).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_TRUE(refused.empty());
}

// A configured delay asks for company: even an idle queue queues the task (no run_now).
TEST(BatcherTest, RunNowNeverSkipsAnOptInDelay) {
  FakeClock clock;
  Batcher<Task> b(Options(100, absl::Microseconds(500)), &clock);
  Batch<Task> now;
  auto t1 = MakeTask(1, 1);
  ASSERT_TRUE(b.Schedule(t1, nullptr, nullptr, &now).ok());
  EXPECT_TRUE(now.empty());
  EXPECT_EQ(b.stats().queued_tasks, 1);
}

TEST(BatcherTest, OptInDelayWaitsForCompanyEvenWhenIdle) {
  FakeClock clock;
  BatcherOptions o;
  o.max_delay = absl::Microseconds(500);
  Batcher<Task> b(o, &clock);
  auto t1 = MakeTask(1, 1);
  ASSERT_TRUE(b.Schedule(t1).ok());
  auto polled = b.Poll();
  EXPECT_TRUE(polled.batch.empty());
  EXPECT_EQ(polled.next_poll, clock.Now() + absl::Microseconds(500));
  auto t2 = MakeTask(2, 1);
  ASSERT_TRUE(b.Schedule(t2).ok());
  clock.Advance(absl::Microseconds(500));
  EXPECT_EQ(Ids(b.Poll().batch), std::vector<int>({1, 2}));
}

TEST(BatcherTest, AdmitSeesTheWorkAheadAndCanRefuse) {
  FakeClock clock;
  Batcher<Task> b(Options(100, absl::Milliseconds(5)), &clock);
  auto t1 = MakeTask(1, 30);
  ASSERT_TRUE(b.Schedule(t1).ok());
  int64_t seen_ahead = -1;
  auto admit = [&](const Batcher<Task>::Stats& ahead, int64_t rows) {
    seen_ahead = ahead.queued_rows + ahead.inflight_rows;
    return rows > 10 ? absl::ResourceExhaustedError("too much") : absl::OkStatus();
  };
  const Batcher<Task>::AdmitFn admit_fn(admit);
  std::vector<Dropped<Task>> dropped;
  auto big = MakeTask(2, 11);
  EXPECT_EQ(b.Schedule(big, &dropped, &admit_fn).code(), absl::StatusCode::kResourceExhausted);
  ASSERT_NE(big, nullptr) << "a refused task stays with the caller";
  EXPECT_EQ(seen_ahead, 30);
  auto small = MakeTask(3, 10);
  EXPECT_TRUE(b.Schedule(small, &dropped, &admit_fn).ok());
  EXPECT_EQ(b.stats().queued_rows, 40);
}

TEST(BatcherTest, ExpiredTasksDoNotCountAsWorkAhead) {
  FakeClock clock;
  Batcher<Task> b(Options(100, absl::Milliseconds(5)), &clock);
  auto t1 = MakeTask(1, 30);
  t1->deadline_at = clock.Now() + absl::Milliseconds(1);
  ASSERT_TRUE(b.Schedule(t1).ok());
  clock.Advance(absl::Milliseconds(2));
  int64_t seen_ahead = -1;
  auto admit = [&](const Batcher<Task>::Stats& ahead, int64_t) {
    seen_ahead = ahead.queued_rows;
    return absl::OkStatus();
  };
  const Batcher<Task>::AdmitFn admit_fn(admit);
  std::vector<Dropped<Task>> dropped;
  auto t2 = MakeTask(2, 5);
  ASSERT_TRUE(b.Schedule(t2, &dropped, &admit_fn).ok());
  EXPECT_EQ(seen_ahead, 0);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].status.code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(BatcherTest, PurgeTakesCancelledTasksOutAtOnce) {
  FakeClock clock;
  Batcher<Task> b(Options(100, absl::Hours(1)), &clock);
  auto t1 = MakeTask(1, 3);
  auto cancel = t1->cancel;
  auto t2 = MakeTask(2, 4);
  ASSERT_TRUE(b.Schedule(t1).ok());
  ASSERT_TRUE(b.Schedule(t2).ok());
  cancel->store(true);
  std::vector<Dropped<Task>> dropped = b.Purge();
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].task->id, 1);
  EXPECT_EQ(dropped[0].status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(b.stats().queued_rows, 4);
}

TEST(BatcherTest, ProgressShrinksInflightRows) {
  FakeClock clock;
  Batcher<Task> b(Options(100, absl::ZeroDuration()), &clock);
  auto t1 = MakeTask(1, 50);
  ASSERT_TRUE(b.Schedule(t1).ok());
  auto polled = b.Poll();
  ASSERT_EQ(polled.batch.rows, 50);
  EXPECT_EQ(b.stats().inflight_rows, 50);
  b.Progress(20);
  EXPECT_EQ(b.stats().inflight_rows, 30);
  b.BatchDone(30);
  EXPECT_EQ(b.stats().inflight_rows, 0);
  EXPECT_EQ(b.stats().inflight_batches, 0);
}

// ---- BatchExecutor + BatchQueue (real threads; completion is awaited, nothing is timed) ----

struct Work {
  int id;
  int64_t rows;
  std::atomic<int>* answered;
  int64_t size() const { return rows; }
};

TEST(BatchExecutorTest, RunsEveryTaskOnceAcrossQueues) {
  BatchExecutor executor(3, RealClock::Get());
  std::atomic<int> answered{0};
  std::atomic<int64_t> max_batch{0};
  std::vector<std::shared_ptr<BatchQueue<Work>>> queues;
  for (int q = 0; q < 3; ++q) {
    auto queue = std::make_shared<BatchQueue<Work>>(
        Options(50, absl::Microseconds(200), 1 << 20, 1 << 20, 2), RealClock::Get(), &executor,
        [&](Batch<Work>&& batch) -> int64_t {
          int64_t m = max_batch.load();
          while (batch.tasks.size() > 1 && batch.rows > m &&
                 !max_batch.compare_exchange_weak(m, batch.rows)) {
          }
          for (auto& t : batch.tasks) t->answered->fetch_add(1);
          return 0;
        },
        [](Dropped<Work>&&) { ADD_FAILURE() << "nothing should be dropped"; });
    executor.Add(queue);
    queues.push_back(queue);
  }
  constexpr int kTasks = 3000;
  std::vector<std::thread> producers;
  for (int p = 0; p < 3; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kTasks / 3; ++i) {
        auto t = std::make_unique<Work>(Work{i, 1 + i % 7, &answered});
        ASSERT_TRUE(queues[(p + i) % 3]->Schedule(t).ok());
      }
    });
  }
  for (auto& t : producers) t.join();
  for (auto& q : queues) q->Close();  // flush without waiting for delays
  while (answered.load() < kTasks) std::this_thread::yield();
  EXPECT_EQ(answered.load(), kTasks);
  EXPECT_LE(max_batch.load(), 50);
  for (auto& q : queues) {
    while (!q->batcher().Idle()) std::this_thread::yield();
    executor.Remove(q.get());
  }
  executor.Stop();
}

// BatchQueue with run_now on a ManualExecutor (the puppet): a task that finds the engines idle is
// computed by RunNow on the scheduling thread without any executor run; one that arrives while a
// batch runs on the executor (or while the slot is held) is queued for it, and is merged with
// what else arrived.
TEST(BatchQueueTest, RunsOnTheCallerWhenTheEnginesAreIdle) {
  FakeClock clock;
  ManualExecutor executor;
  std::vector<std::vector<int>> batches;  // ids of each computed batch
  std::shared_ptr<BatchQueue<Work>> queue;
  std::function<void()> during_batch;
  queue = std::make_shared<BatchQueue<Work>>(
      Options(100, absl::ZeroDuration(), 1000, 100, 2), &clock, &executor,
      [&](Batch<Work>&& batch) -> int64_t {
        std::vector<int> ids;
        for (auto& t : batch.tasks) ids.push_back(t->id);
        batches.push_back(ids);
        if (during_batch) std::exchange(during_batch, nullptr)();
        return 0;
      },
      [](Dropped<Work>&&) { ADD_FAILURE() << "nothing should be dropped"; });
  executor.Add(queue);

  auto schedule = [&](int id) {
    auto t = std::make_unique<Work>(Work{id, 1, nullptr});
    Batch<Work> now;
    EXPECT_TRUE(queue->Schedule(t, nullptr, &now).ok());
    if (!now.empty()) queue->RunNow(std::move(now));
  };
  // Idle: computed at once, on this thread; the executor has nothing to run.
  schedule(1);
  EXPECT_EQ(batches, std::vector<std::vector<int>>({{1}}));
  EXPECT_EQ(executor.RunUntilIdle(), 0);
  EXPECT_TRUE(queue->batcher().Idle());

  // While a batch computes on the executor, arrivals queue (the engines are busy) and merge into
  // the executor's next batch.
  auto queued = std::make_unique<Work>(Work{2, 1, nullptr});
  ASSERT_TRUE(queue->Schedule(queued).ok());  // no run_now: queued for the executor
  during_batch = [&] {
    schedule(3);
    schedule(4);
  };
  EXPECT_EQ(executor.RunUntilIdle(), 2);
  EXPECT_EQ(batches, std::vector<std::vector<int>>({{1}, {2}, {3, 4}}));

  // A slot the test holds closed (another caller computing): queued, run by the executor.
  executor.SetInlineAllowed(false);
  schedule(5);
  EXPECT_EQ(batches.size(), 3u);
  EXPECT_EQ(executor.RunUntilIdle(), 1);
  EXPECT_EQ(batches.back(), std::vector<int>({5}));
  executor.Remove(queue.get());
}

// BatchExecutor's slot: taken only while no batch computes on its threads, one caller at a time.
TEST(BatchExecutorTest, InlineSlotOnlyWhenNothingComputes) {
  BatchExecutor executor(1, RealClock::Get());
  ASSERT_TRUE(executor.TryBeginInline());
  EXPECT_FALSE(executor.TryBeginInline()) << "one caller at a time";
  executor.EndInline();
  absl::Notification started, release;
  std::atomic<int> answered{0};
  auto queue = std::make_shared<BatchQueue<Work>>(
      Options(100, absl::ZeroDuration()), RealClock::Get(), &executor,
      [&](Batch<Work>&& batch) -> int64_t {
        started.Notify();
        release.WaitForNotification();
        answered.fetch_add(static_cast<int>(batch.tasks.size()));
        return 0;
      },
      [](Dropped<Work>&&) {});
  executor.Add(queue);
  auto t = std::make_unique<Work>(Work{1, 1, nullptr});
  ASSERT_TRUE(queue->Schedule(t).ok());
  started.WaitForNotification();
  EXPECT_FALSE(executor.TryBeginInline()) << "a batch computes on the executor";
  release.Notify();
  while (answered.load() < 1 || !queue->batcher().Idle()) std::this_thread::yield();
  // The worker releases its count after the batch; the slot frees once it did.
  while (!executor.TryBeginInline()) std::this_thread::yield();
  executor.EndInline();
  executor.Remove(queue.get());
  executor.Stop();
  EXPECT_FALSE(executor.TryBeginInline()) << "stopped: no compute on callers either";
}

TEST(BatchExecutorTest, DropAllAnswersQueuedWork) {
  BatchExecutor executor(1, RealClock::Get());
  std::atomic<int> dropped{0};
  auto queue = std::make_shared<BatchQueue<Work>>(
      Options(1000, absl::Hours(1)), RealClock::Get(), &executor,
      [](Batch<Work>&&) -> int64_t {
        ADD_FAILURE() << "no batch expected";
        return 0;
      },
      [&](Dropped<Work>&& d) {
        EXPECT_EQ(d.status.code(), absl::StatusCode::kUnavailable);
        dropped.fetch_add(1);
      });
  executor.Add(queue);
  for (int i = 0; i < 10; ++i) {
    auto t = std::make_unique<Work>(Work{i, 1, nullptr});
    ASSERT_TRUE(queue->Schedule(t).ok());
  }
  queue->DropAll(absl::UnavailableError("shutdown"));
  EXPECT_EQ(dropped.load(), 10);
  executor.Remove(queue.get());
}

}  // namespace
}  // namespace grove::batching
