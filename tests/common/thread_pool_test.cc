// ThreadPool: ParallelFor covers [0, n) exactly once, concurrent callers do not wait on each
// other, and queued chunks run on the workers.
#include "core/common/thread_pool.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/common/cpus.h"
#include "gtest/gtest.h"

namespace grove {
namespace {

TEST(ThreadPoolTest, ParallelForCoversEveryIndexOnce) {
  // Sizes where rounding the chunk size up leaves fewer chunks than asked for (2 threads, 64
  // items, grain 4: 12 chunks of 6 would start one at 66) included.
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 64, 100, 10007}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.ParallelFor(n, 4, [&](int64_t begin, int64_t end) {
        ASSERT_LE(0, begin);
        ASSERT_LT(begin, end);
        ASSERT_LE(end, n);
        for (int64_t i = begin; i < end; ++i) ++hits[static_cast<size_t>(i)];
      });
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1)
            << threads << " threads, n " << n << ", index " << i;
      }
    }
  }
}

TEST(ThreadPoolTest, ChunksRunOnTheWorkers) {
  // Every chunk waits (bounded) until a second thread has run one: the workers must take chunks
  // while the caller holds its own.
  ThreadPool pool(3);
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::thread::id> threads;
  bool gave_up = false;
  pool.ParallelFor(16, 1, [&](int64_t, int64_t) {
    std::unique_lock<std::mutex> lock(mu);
    threads.insert(std::this_thread::get_id());
    cv.notify_all();
    if (!gave_up) {
      gave_up = !cv.wait_for(lock, std::chrono::seconds(10), [&] { return threads.size() >= 2; });
    }
  });
  EXPECT_GE(threads.size(), 2u);
  EXPECT_FALSE(gave_up);
}

TEST(ThreadPoolTest, ConcurrentCallersEachFinish) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 6; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 50; ++round) {
        pool.ParallelFor(64, 4, [&](int64_t begin, int64_t end) { total += end - begin; });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(total.load(), 6 * 50 * 64);
}

TEST(ThreadPoolTest, ACallerThatRanEveryChunkLeavesNoEntryBehind) {
  // Both workers and a first caller are held inside the first call's chunks; a second caller then
  // runs all of its chunks itself and returns. Its queue entries (pointers to its call's state on
  // its stack) must leave the queue with it: the workers, once released, would otherwise run a
  // call that no longer exists. Under every spin setting (sleeping or polling workers).
  for (std::chrono::microseconds spin : {std::chrono::microseconds(0), kDefaultSpin}) {
    ThreadPool pool(2, ThreadPriority::kNormal, spin);
    std::mutex mu;
    std::condition_variable cv;
    int inside = 0;
    bool release = false;
    std::thread first([&] {
      pool.ParallelFor(3, 1, [&](int64_t, int64_t) {
        std::unique_lock<std::mutex> lock(mu);
        ++inside;
        cv.notify_all();
        cv.wait(lock, [&] { return release; });
      });
    });
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return inside == 3; });
    }
    std::thread::id second_id;
    std::atomic<int64_t> covered{0};
    std::atomic<int> elsewhere{0};
    std::thread second([&] {
      second_id = std::this_thread::get_id();
      pool.ParallelFor(100, 1, [&](int64_t begin, int64_t end) {
        covered += end - begin;
        if (std::this_thread::get_id() != second_id) ++elsewhere;
      });
    });
    second.join();
    EXPECT_EQ(covered.load(), 100);
    EXPECT_EQ(elsewhere.load(), 0);  // the workers were held: the caller ran every chunk
    EXPECT_EQ(pool.queued(), 0);     // and took its unserved requests for helpers with it
    {
      std::lock_guard<std::mutex> lock(mu);
      release = true;
    }
    cv.notify_all();
    first.join();
    // The workers are free and the queue must be empty of the second call: a third call still
    // covers its range once, and the pool stops cleanly.
    std::atomic<int64_t> third{0};
    pool.ParallelFor(64, 1, [&](int64_t begin, int64_t end) { third += end - begin; });
    EXPECT_EQ(third.load(), 64);
  }
}

TEST(ThreadPoolTest, SpinningPoolsCoverEveryIndexOnceBackToBack) {
  // Workers that poll between calls take the next call's chunks without a notification, and a
  // caller that polls for its last chunks returns only when every chunk is done: many calls back
  // to back, with spins both shorter and longer than a call, from one caller and from several.
  for (auto spin : {std::chrono::microseconds(1), std::chrono::microseconds(20000)}) {
    ThreadPool pool(3, ThreadPriority::kNormal, spin);
    EXPECT_EQ(pool.spin(), spin);
    std::vector<std::atomic<int>> hits(1000);
    for (int round = 0; round < 300; ++round) {
      pool.ParallelFor(1000, 8, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) ++hits[static_cast<size_t>(i)];
      });
      for (size_t i = 0; i < hits.size(); ++i) {
        ASSERT_EQ(hits[i].load(), round + 1) << "spin " << spin.count() << " round " << round;
      }
    }
    std::atomic<int64_t> total{0};
    std::vector<std::thread> callers;
    for (int c = 0; c < 4; ++c) {
      callers.emplace_back([&] {
        for (int round = 0; round < 100; ++round) {
          pool.ParallelFor(64, 2, [&](int64_t begin, int64_t end) { total += end - begin; });
        }
      });
    }
    for (std::thread& t : callers) t.join();
    EXPECT_EQ(total.load(), 4 * 100 * 64);
  }
}

TEST(ThreadPoolTest, DestroyingAPoolStopsSpinningWorkers) {
  // A spin far longer than the test: the destructor must not wait for it to run out.
  const auto start = std::chrono::steady_clock::now();
  {
    ThreadPool pool(2, ThreadPriority::kNormal, std::chrono::microseconds(600'000'000));
    pool.ParallelFor(100, 1, [](int64_t, int64_t) {});
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

TEST(ThreadPoolTest, AutomaticSpinOnlyWhereThePoolFitsTheMachine) {
  const int hardware = static_cast<int>(std::thread::hardware_concurrency());
  ThreadPool crowded(hardware + 1);
  EXPECT_EQ(crowded.spin().count(), 0);
  if (hardware >= 2) {
    ThreadPool fits(hardware - 1);
    EXPECT_EQ(fits.spin(), kDefaultSpin);
  }
  ThreadPool off(1, ThreadPriority::kNormal, std::chrono::microseconds(0));
  EXPECT_EQ(off.spin().count(), 0);
}

TEST(ThreadPoolTest, NullPoolRunsInline) {
  int64_t seen_begin = -1, seen_end = -1;
  ParallelFor(nullptr, 9, 1, [&](int64_t b, int64_t e) {
    seen_begin = b;
    seen_end = e;
  });
  EXPECT_EQ(seen_begin, 0);
  EXPECT_EQ(seen_end, 9);
}

// The default thread count is the CPUs the process may run on: a process confined to one CPU
// (as a container's cpuset confines it) gets a pool of one worker, and a call's pool of
// MakeCallerPool(0) none.
TEST(UsableCpusTest, FollowsTheAffinityMask) {
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  EXPECT_EQ(UsableCpus(), CPU_COUNT(&saved));
  int first = 0;
  while (!CPU_ISSET(first, &saved)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  const int confined = UsableCpus();
  const int workers = ThreadPool().num_threads();
  const bool caller_alone = MakeCallerPool(0) == nullptr;
  ASSERT_EQ(sched_setaffinity(0, sizeof(saved), &saved), 0);
  EXPECT_EQ(confined, 1);
  EXPECT_EQ(workers, 1);
  EXPECT_TRUE(caller_alone);
  std::unique_ptr<ThreadPool> three = MakeCallerPool(3);
  ASSERT_NE(three, nullptr);
  EXPECT_EQ(three->num_threads(), 2);
  EXPECT_EQ(MakeCallerPool(1), nullptr);
}

}  // namespace
}  // namespace grove
