// ServingCore without gRPC, Prometheus or sleeps: a fake clock, a fake engine that advances it by a
// cost per row, a manual executor (the puppet) that runs batches when the test says so, and an
// observer that counts.
#include "core/serving/serving_core.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/batching/manual_executor.h"
#include "core/common/thread_pool.h"
#include "core/serving/host_buffers.h"
#include "gtest/gtest.h"

namespace grove::serving {
namespace {

using batching::FakeClock;
using batching::ManualExecutor;

// Doubles the first column of every row; each call advances the clock by `per_row` x rows.
class FakeEngine final : public EngineRunner {
 public:
  explicit FakeEngine(FakeClock* clock) : clock_(clock) {}
  absl::Status Run(const ComputeTask& task, RowsView rows, MatrixView<float> out,
                   RunInfo* info) override {
    calls_.push_back(rows.rows);
    clock_->Advance(per_row_ * rows.rows);
    if (before_return_) before_return_(static_cast<int>(calls_.size()));
    if (!fail_.ok()) return fail_;
    for (int64_t r = 0; r < rows.rows; ++r) out.At(r, 0) = 2 * rows.Row(r)[0];
    info->strategy = "fake";
    return absl::OkStatus();
  }
  void set_per_row(absl::Duration d) { per_row_ = d; }
  void set_fail(absl::Status s) { fail_ = std::move(s); }
  // Runs after the n-th call's compute (1-based), e.g. to cancel a caller mid-batch.
  void set_before_return(std::function<void(int)> fn) { before_return_ = std::move(fn); }
  const std::vector<int64_t>& calls() const { return calls_; }

 private:
  FakeClock* const clock_;
  absl::Duration per_row_ = absl::Milliseconds(1);
  absl::Status fail_;
  std::function<void(int)> before_return_;
  std::vector<int64_t> calls_;
};

struct Counts {
  int64_t admitted = 0, delivered = 0, failed = 0, wasted = 0, batches = 0;
  std::map<DropReason, int64_t> refused, dropped;  // tasks
};

class CountingObserver final : public ServingObserver {
 public:
  std::unique_ptr<QueueObserver> ForQueue(const std::string&, Operation) override {
    return std::make_unique<Queue>(this);
  }
  Counts counts() {
    absl::MutexLock lock(&mu_);
    return counts_;
  }

 private:
  class Queue final : public QueueObserver {
   public:
    explicit Queue(CountingObserver* o) : o_(o) {}
    void Admitted(int64_t) override { Add([](Counts& c) { ++c.admitted; }); }
    void Refused(DropReason r, int64_t) override { Add([r](Counts& c) { ++c.refused[r]; }); }
    void Dropped(DropReason r, int64_t, int64_t computed) override {
      Add([&](Counts& c) {
        ++c.dropped[r];
        c.wasted += computed;
      });
    }
    void Delivered(int64_t) override { Add([](Counts& c) { ++c.delivered; }); }
    void Failed(int64_t) override { Add([](Counts& c) { ++c.failed; }); }
    void BatchStarted(int64_t, int64_t) override { Add([](Counts& c) { ++c.batches; }); }

   private:
    template <typename F>
    void Add(F f) {
      absl::MutexLock lock(&o_->mu_);
      f(o_->counts_);
    }
    CountingObserver* o_;
  };
  absl::Mutex mu_;
  Counts counts_;
};

// One caller: its rows, its output, and how it was answered.
struct Caller {
  std::vector<float> in, out;
  std::shared_ptr<CallState> call;
  std::optional<absl::Status> answer;
};

class ServingCoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(ServingOptions{}); }
  void TearDown() override {
    core_->Close();
    executor_->RunUntilIdle();
    core_->Shutdown();
  }

  void Start(ServingOptions options, int64_t max_batch_rows = 4096) {
    if (core_ != nullptr) TearDown();
    options.clock = &clock_;
    executor_ = std::make_unique<ManualExecutor>();
    core_ = std::make_unique<ServingCore>(options, &engine_, &observer_, executor_.get());
    registry::ModelConfig config;
    config.batching[0].max_batch_rows = max_batch_rows;
    config.batching[0].max_delay = absl::Milliseconds(1);
    config.batching[0].max_concurrent_batches = 1;
    auto model = std::make_shared<registry::ModelVersion>();
    model->name = "m";
    model->config = std::make_shared<registry::ModelConfig>(config);
    model_ = model;
  }

  // A caller of `rows` rows (row i holds i + base) with a deadline `timeout` from now.
  Caller* NewCaller(int64_t rows, absl::Duration timeout = absl::InfiniteDuration(),
                    float base = 0) {
    auto c = std::make_unique<Caller>();
    for (int64_t i = 0; i < rows; ++i) c->in.push_back(static_cast<float>(i) + base);
    c->out.assign(rows, -1);
    Caller* raw = c.get();
    const absl::Time deadline = timeout == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                                                    : clock_.Now() + timeout;
    raw->call = std::make_shared<CallState>(1, deadline,
                                            [raw](absl::Status s) { raw->answer = std::move(s); });
    callers_.push_back(std::move(c));
    return raw;
  }

  absl::Status Submit(Caller* c) {
    auto t = std::make_unique<ComputeTask>();
    t->model = model_;
    t->op = Operation::kPredict;
    t->rows = MakeRowsView(c->in.data(), static_cast<int64_t>(c->in.size()), 1);
    t->out = MakeMatrixView(c->out.data(), static_cast<int64_t>(c->out.size()), 1);
    t->call = c->call;
    absl::Status s = core_->Submit(std::move(t));
    if (!s.ok()) c->call->TaskDone(s);
    return s;
  }

  // Lets the batching delay pass and runs every ready batch.
  void RunBatches() {
    clock_.Advance(absl::Milliseconds(1));
    executor_->RunUntilIdle();
  }

  // Measures the engine: one 100-row batch at the engine's cost per row.
  void Warm() {
    Caller* c = NewCaller(100);
    ASSERT_TRUE(Submit(c).ok());
    RunBatches();
    ASSERT_TRUE(c->answer.has_value() && c->answer->ok());
  }

  static void ExpectDoubled(const Caller& c) {
    for (size_t i = 0; i < c.in.size(); ++i) ASSERT_EQ(c.out[i], 2 * c.in[i]) << "row " << i;
  }

  FakeClock clock_;
  FakeEngine engine_{&clock_};
  CountingObserver observer_;
  // For cores given a host buffer pool and a copy pool (they outlive the core).
  HostBufferPool buffers_{HostBufferOptions{.max_bytes = 64 << 20, .page_locked = false}};
  ThreadPool copy_pool_{3};
  std::unique_ptr<ManualExecutor> executor_;
  std::unique_ptr<ServingCore> core_;
  registry::ModelVersionPtr model_;
  std::vector<std::unique_ptr<Caller>> callers_;
};

TEST_F(ServingCoreTest, MergesCallersIntoOneEngineCallAndScattersResults) {
  Caller* a = NewCaller(3, absl::InfiniteDuration(), 10);
  Caller* b = NewCaller(5, absl::InfiniteDuration(), 20);
  Caller* c = NewCaller(1, absl::InfiniteDuration(), 30);
  for (Caller* x : {a, b, c}) ASSERT_TRUE(Submit(x).ok());
  EXPECT_EQ(executor_->RunUntilIdle(), 0) << "no batch before the delay";
  RunBatches();
  EXPECT_EQ(engine_.calls(), std::vector<int64_t>({9}));
  for (Caller* x : {a, b, c}) {
    ASSERT_TRUE(x->answer.has_value() && x->answer->ok());
    ExpectDoubled(*x);
  }
  EXPECT_EQ(observer_.counts().delivered, 3);
}

TEST_F(ServingCoreTest, RefusesWhenTheExpectedWaitPassesTheDeadline) {
  Warm();  // 1 ms per row
  Caller* ahead = NewCaller(400);
  ASSERT_TRUE(Submit(ahead).ok());
  Caller* hurried = NewCaller(10, absl::Milliseconds(300));
  absl::Status s = Submit(hurried);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("deadline"), std::string::npos) << s;
  Caller* patient = NewCaller(10, absl::Milliseconds(500));
  EXPECT_TRUE(Submit(patient).ok());
  EXPECT_EQ(observer_.counts().refused[DropReason::kExpectedWait], 1);
  RunBatches();
  ASSERT_TRUE(patient->answer.has_value());
  EXPECT_TRUE(patient->answer->ok()) << *patient->answer;
}

TEST_F(ServingCoreTest, RefusesWhenTheWorkAheadPassesTheServerBound) {
  ServingOptions o;
  o.max_queue_wait = absl::Milliseconds(100);
  Start(o);
  Warm();
  ASSERT_TRUE(Submit(NewCaller(150)).ok());
  absl::Status s = Submit(NewCaller(1));  // no deadline, but 150 ms of work ahead
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("max_queue_wait_ms"), std::string::npos) << s;
}

TEST_F(ServingCoreTest, LearnsFromTasksThatTookLongerThanExpected) {
  Warm();  // 1 ms per row
  // 300 rows ahead: 300 ms expected. A deadline of 320 ms fits while the estimate is trusted.
  Caller* probe_ahead = NewCaller(300);
  ASSERT_TRUE(Submit(probe_ahead).ok());
  EXPECT_TRUE(Submit(NewCaller(10, absl::Milliseconds(320))).ok());
  RunBatches();
  // Then every task takes twice what admission expected (work the engine's rate does not see).
  for (int i = 0; i < 40; ++i) {
    Caller* c = NewCaller(20);
    ASSERT_TRUE(Submit(c).ok());
    clock_.Advance(absl::Milliseconds(20));
    RunBatches();
    ASSERT_TRUE(c->answer.has_value() && c->answer->ok());
  }
  ASSERT_TRUE(Submit(NewCaller(300)).ok());
  absl::Status s = Submit(NewCaller(10, absl::Milliseconds(320)));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
}

TEST_F(ServingCoreTest, AdmitsEverythingBeforeTheRateIsKnown) {
  Caller* big = NewCaller(5000);
  ASSERT_TRUE(Submit(big).ok());
  EXPECT_TRUE(Submit(NewCaller(1, absl::Milliseconds(1))).ok());
}

TEST_F(ServingCoreTest, CancelledCallLeavesTheQueueAtOnce) {
  Caller* a = NewCaller(4);
  Caller* b = NewCaller(4);
  ASSERT_TRUE(Submit(a).ok());
  ASSERT_TRUE(Submit(b).ok());
  a->call->Cancel();
  ASSERT_TRUE(a->answer.has_value()) << "answered without a poll";
  EXPECT_EQ(a->answer->code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(core_->QueueStats("m", Operation::kPredict).queued_tasks, 1);
  RunBatches();
  EXPECT_EQ(engine_.calls(), std::vector<int64_t>({4}));
  EXPECT_EQ(observer_.counts().dropped[DropReason::kCancelled], 1);
}

TEST_F(ServingCoreTest, ExpiredTaskLeavesAtTheNextSubmit) {
  Caller* a = NewCaller(4, absl::Milliseconds(10));
  ASSERT_TRUE(Submit(a).ok());
  clock_.Advance(absl::Milliseconds(20));
  Caller* b = NewCaller(4);
  ASSERT_TRUE(Submit(b).ok());
  ASSERT_TRUE(a->answer.has_value());
  EXPECT_EQ(a->answer->code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(core_->QueueStats("m", Operation::kPredict).queued_tasks, 1);
  EXPECT_EQ(core_->QueueStats("m", Operation::kPredict).queued_rows, 4);
}

TEST_F(ServingCoreTest, RefusesACallWhoseDeadlinePassed) {
  Caller* a = NewCaller(4, absl::ZeroDuration());
  EXPECT_EQ(Submit(a).code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(ServingCoreTest, RunningBatchStopsWhenItsCallerCancels) {
  Warm();  // 1 ms per row: 20-row chunks of 20 ms
  const size_t warm_calls = engine_.calls().size();
  Caller* a = NewCaller(200);
  ASSERT_TRUE(Submit(a).ok());
  engine_.set_before_return([&](int n) {
    if (n == static_cast<int>(warm_calls) + 3) a->call->Cancel();
  });
  RunBatches();
  ASSERT_TRUE(a->answer.has_value());
  EXPECT_EQ(a->answer->code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(engine_.calls().size(), warm_calls + 3);
  EXPECT_EQ(engine_.calls().back(), 20);
  const Counts counts = observer_.counts();
  EXPECT_EQ(counts.dropped.at(DropReason::kCancelled), 1);
  EXPECT_EQ(counts.wasted, 60);
  EXPECT_EQ(core_->QueueStats("m", Operation::kPredict).inflight_rows, 0);
}

TEST_F(ServingCoreTest, RunningBatchStopsAtTheDeadlineAndServesTheOthers) {
  Start(ServingOptions{}, /*max_batch_rows=*/32);  // rate unknown: chunks of 32 rows, 32 ms each
  Caller* hurried = NewCaller(100, absl::Milliseconds(50));
  Caller* patient = NewCaller(20, absl::InfiniteDuration(), 7);
  ASSERT_TRUE(Submit(hurried).ok());
  ASSERT_TRUE(Submit(patient).ok());
  RunBatches();
  ASSERT_TRUE(hurried->answer.has_value());
  EXPECT_EQ(hurried->answer->code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(patient->answer.has_value());
  EXPECT_TRUE(patient->answer->ok());
  ExpectDoubled(*patient);
  int64_t computed = 0;
  for (int64_t rows : engine_.calls()) computed += rows;
  EXPECT_LT(computed, 120) << "the expired caller's remaining rows were computed";
}

// With a host buffer pool, a batch of several callers gathers their rows into the pool's memory
// (page-locked with a GPU, so that the GPU engines skip their staging copies) and scatters the
// results from it, over the copy pool when large; every row and result lands in place, and the
// next batch reuses the kept buffers.
TEST_F(ServingCoreTest, MergedBatchesGatherIntoKeptBuffersOverTheCopyPool) {
  ServingOptions o;
  o.host_buffers = &buffers_;
  o.copy_pool = &copy_pool_;
  Start(o, /*max_batch_rows=*/1 << 20);  // rate unknown: one chunk of up to 2^20 rows
  engine_.set_per_row(absl::Nanoseconds(10));
  for (int round = 0; round < 2; ++round) {
    Caller* a = NewCaller(300000, absl::InfiniteDuration(), 0.5f);
    Caller* b = NewCaller(200001, absl::InfiniteDuration(), 7);
    Caller* c = NewCaller(5, absl::InfiniteDuration(), 9);
    for (Caller* x : {a, b, c}) {
      const absl::Status s = Submit(x);
      ASSERT_TRUE(s.ok()) << s;
    }
    RunBatches();
    ASSERT_EQ(engine_.calls().size(), static_cast<size_t>(round + 1));
    EXPECT_EQ(engine_.calls().back(), 500006);
    for (Caller* x : {a, b, c}) {
      ASSERT_TRUE(x->answer.has_value() && x->answer->ok());
      ExpectDoubled(*x);
    }
    // Rows and results of 500,006 one-float rows: two 2 MiB buffers, kept once.
    EXPECT_EQ(buffers_.stats().kept_bytes, 4 << 20) << "round " << round;
  }
}

// Small merged batches (single rows from several callers, say) gather into the batch thread's own
// buffers: they never ask the pool (here one that keeps nothing, where every request is a miss).
TEST_F(ServingCoreTest, SmallMergedBatchesDoNotAskTheHostBufferPool) {
  HostBufferPool none(HostBufferOptions{.max_bytes = 0, .page_locked = false});
  ServingOptions o;
  o.host_buffers = &none;
  o.copy_pool = &copy_pool_;
  Start(o, /*max_batch_rows=*/1 << 20);
  engine_.set_per_row(absl::Nanoseconds(10));
  std::vector<Caller*> callers;
  for (int i = 0; i < 4; ++i) callers.push_back(NewCaller(1 + i, absl::InfiniteDuration(), 3 * i));
  for (Caller* c : callers) ASSERT_TRUE(Submit(c).ok());
  RunBatches();
  ASSERT_EQ(engine_.calls().size(), 1u);
  EXPECT_EQ(engine_.calls().back(), 10);
  for (Caller* c : callers) {
    ASSERT_TRUE(c->answer.has_value() && c->answer->ok());
    ExpectDoubled(*c);
  }
  EXPECT_EQ(none.stats().misses, 0);
  // A large one does ask (and, with nothing kept, takes the batch thread's buffers too).
  Caller* big = NewCaller(40000, absl::InfiniteDuration(), 1);
  Caller* other = NewCaller(3, absl::InfiniteDuration(), 2);
  for (Caller* c : {big, other}) {
    const absl::Status s = Submit(c);
    ASSERT_TRUE(s.ok()) << s;
  }
  RunBatches();
  for (Caller* c : {big, other}) {
    ASSERT_TRUE(c->answer.has_value() && c->answer->ok());
    ExpectDoubled(*c);
  }
  EXPECT_GT(none.stats().misses, 0);
}

TEST_F(ServingCoreTest, ChunksAcrossCallersKeepEveryRowInPlace) {
  Warm();
  engine_.set_per_row(absl::Milliseconds(3));  // chunks shrink to about 7 rows
  std::vector<Caller*> callers;
  for (int i = 0; i < 5; ++i) callers.push_back(NewCaller(13 + i, absl::InfiniteDuration(), 100 * i));
  for (Caller* c : callers) ASSERT_TRUE(Submit(c).ok());
  RunBatches();
  for (Caller* c : callers) {
    ASSERT_TRUE(c->answer.has_value() && c->answer->ok());
    ExpectDoubled(*c);
  }
  EXPECT_GT(engine_.calls().size(), 3u);
}

// A part finished before more engine work is answered at once; the parts finished by a batch's last
// engine call are answered once the batch has released its slot (the queue's next batch may start
// while this thread answers).
TEST_F(ServingCoreTest, AnswersEarlyFinishersAtOnceAndTheLastAfterTheSlotIsFree) {
  Warm();
  const size_t warm_calls = engine_.calls().size();
  engine_.set_per_row(absl::Milliseconds(3));  // chunks shrink to about 7 rows
  struct Seen {
    size_t engine_calls = 0;
    int inflight_batches = -1;
  };
  Seen first_seen, last_seen;
  Caller* first = NewCaller(3, absl::InfiniteDuration(), 10);
  Caller* last = NewCaller(30, absl::InfiniteDuration(), 20);
  auto watch = [&](Caller* c, Seen* seen) {
    c->call = std::make_shared<CallState>(1, absl::InfiniteFuture(), [this, c, seen](absl::Status s) {
      seen->engine_calls = engine_.calls().size();
      seen->inflight_batches = core_->QueueStats("m", Operation::kPredict).inflight_batches;
      c->answer = std::move(s);
    });
  };
  watch(first, &first_seen);
  watch(last, &last_seen);
  ASSERT_TRUE(Submit(first).ok());
  ASSERT_TRUE(Submit(last).ok());
  RunBatches();
  for (Caller* c : {first, last}) {
    ASSERT_TRUE(c->answer.has_value() && c->answer->ok());
    ExpectDoubled(*c);
  }
  const size_t calls = engine_.calls().size() - warm_calls;
  ASSERT_GE(calls, 2u);
  EXPECT_EQ(first_seen.engine_calls, warm_calls + 1);  // before the second chunk
  EXPECT_EQ(first_seen.inflight_batches, 1);
  EXPECT_EQ(last_seen.engine_calls, warm_calls + calls);
  EXPECT_EQ(last_seen.inflight_batches, 0);
}

TEST_F(ServingCoreTest, EngineErrorAnswersEveryTaskOfTheBatch) {
  engine_.set_fail(absl::InternalError("boom"));
  Caller* a = NewCaller(2);
  Caller* b = NewCaller(3);
  ASSERT_TRUE(Submit(a).ok());
  ASSERT_TRUE(Submit(b).ok());
  RunBatches();
  for (Caller* c : {a, b}) {
    ASSERT_TRUE(c->answer.has_value());
    EXPECT_EQ(c->answer->code(), absl::StatusCode::kInternal);
  }
  EXPECT_EQ(observer_.counts().failed, 2);
  EXPECT_EQ(core_->QueueStats("m", Operation::kPredict).inflight_rows, 0);
}

TEST_F(ServingCoreTest, MemoryBudgetRefusesAndRecovers) {
  ServingOptions o;
  o.memory_budget_bytes = int64_t{1} << 20;
  Start(o);
  absl::StatusOr<MemoryReservation> a = core_->Reserve(*model_, Operation::kPredict, 1, 800'000);
  ASSERT_TRUE(a.ok());
  absl::StatusOr<MemoryReservation> b = core_->Reserve(*model_, Operation::kPredict, 1, 800'000);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(observer_.counts().refused[DropReason::kMemory], 1);
  a->Release();
  EXPECT_EQ(core_->memory().used(), 0);
  EXPECT_TRUE(core_->Reserve(*model_, Operation::kPredict, 1, 800'000).ok());
  EXPECT_EQ(core_->memory().used(), 0) << "released when the reservation went away";
}

TEST_F(ServingCoreTest, ShutdownAnswersQueuedWorkAndRefusesNewWork) {
  Caller* a = NewCaller(4);
  ASSERT_TRUE(Submit(a).ok());
  core_->Shutdown();  // the manual executor never ran the batch
  ASSERT_TRUE(a->answer.has_value());
  EXPECT_EQ(a->answer->code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Submit(NewCaller(1)).code(), absl::StatusCode::kUnavailable);
}

// inline_compute: a short task that finds its queue empty and the engines idle is computed inside
// Submit, on the caller's thread (no executor run), with the same admission, observer events and
// cancellation; anything else is queued for the executor.
TEST_F(ServingCoreTest, ShortTaskOnAnIdleEngineRunsOnTheCaller) {
  ServingOptions options;
  options.inline_compute = absl::Milliseconds(5);
  Start(options);
  registry::ModelConfig config = *model_->config;
  config.batching[0].max_delay = absl::ZeroDuration();  // the default: no waiting for company
  auto model = std::make_shared<registry::ModelVersion>(*model_);
  model->config = std::make_shared<registry::ModelConfig>(config);
  model_ = model;

  // The engine's speed is unknown before the first batch: queued for the executor.
  Caller* first = NewCaller(2);
  ASSERT_TRUE(Submit(first).ok());
  EXPECT_FALSE(first->answer.has_value());
  EXPECT_EQ(executor_->RunUntilIdle(), 1);
  ASSERT_TRUE(first->answer.has_value() && first->answer->ok());

  // 1 ms per row now known: 3 rows (3 ms <= 5 ms) are computed inside Submit.
  Caller* quick = NewCaller(3, absl::InfiniteDuration(), 7);
  ASSERT_TRUE(Submit(quick).ok());
  ASSERT_TRUE(quick->answer.has_value()) << "answered before Submit returned";
  EXPECT_TRUE(quick->answer->ok());
  ExpectDoubled(*quick);
  EXPECT_EQ(engine_.calls(), std::vector<int64_t>({2, 3}));
  EXPECT_EQ(executor_->RunUntilIdle(), 0) << "nothing was handed to the executor";
  Counts counts = observer_.counts();
  EXPECT_EQ(counts.admitted, 2);
  EXPECT_EQ(counts.delivered, 2);
  EXPECT_EQ(counts.batches, 2);

  // 10 rows (10 ms expected) would hold the caller too long: queued.
  Caller* slow = NewCaller(10);
  ASSERT_TRUE(Submit(slow).ok());
  EXPECT_FALSE(slow->answer.has_value());

  // While that batch computes on the executor the engines are busy: a short task is queued too,
  // and runs in the executor's next batch.
  Caller* during = nullptr;
  engine_.set_before_return([&](int call) {
    if (call == 3) {
      during = NewCaller(1);
      ASSERT_TRUE(Submit(during).ok());
      EXPECT_FALSE(during->answer.has_value()) << "the engines are busy";
    }
  });
  EXPECT_EQ(executor_->RunUntilIdle(), 2);
  ASSERT_NE(during, nullptr);
  ASSERT_TRUE(slow->answer.has_value() && slow->answer->ok());
  ASSERT_TRUE(during->answer.has_value() && during->answer->ok());
  EXPECT_EQ(engine_.calls(), std::vector<int64_t>({2, 3, 10, 1}));

  // A call cancelled before it is submitted is answered CANCELLED at once, without compute.
  Caller* gone = NewCaller(1);
  gone->call->Cancel();
  ASSERT_TRUE(Submit(gone).ok());
  ASSERT_TRUE(gone->answer.has_value());
  EXPECT_EQ(gone->answer->code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(engine_.calls().size(), 4u);
  EXPECT_EQ(observer_.counts().dropped[DropReason::kCancelled], 1);
}

// A positive batching delay is a request to wait for company: never computed on the caller.
TEST_F(ServingCoreTest, OptInDelayIsNeverSkippedByInlineCompute) {
  ServingOptions options;
  options.inline_compute = absl::Milliseconds(5);
  Start(options);  // the fixture's model waits 1 ms for company
  Warm();
  Caller* c = NewCaller(1);
  ASSERT_TRUE(Submit(c).ok());
  EXPECT_FALSE(c->answer.has_value());
  RunBatches();
  ASSERT_TRUE(c->answer.has_value() && c->answer->ok());
}

TEST(ServingOptionsTest, BoundsAreChecked) {
  ServingOptions o;
  EXPECT_TRUE(ValidateServingOptions(o).ok());
  o.max_queue_wait = absl::Hours(2);
  EXPECT_EQ(ValidateServingOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o = ServingOptions{};
  o.chunk_target = absl::ZeroDuration();
  EXPECT_EQ(ValidateServingOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o = ServingOptions{};
  o.inline_compute = absl::Milliseconds(11);
  EXPECT_EQ(ValidateServingOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o.inline_compute = absl::Milliseconds(10);
  EXPECT_TRUE(ValidateServingOptions(o).ok());
  o = ServingOptions{};
  o.memory_budget_bytes = 1000;
  EXPECT_EQ(ValidateServingOptions(o).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace grove::serving
