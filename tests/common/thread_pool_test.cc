// ThreadPool: ParallelFor covers [0, n) exactly once, concurrent callers do not wait on each
// other, and queued chunks run on the workers.
#include "core/common/thread_pool.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

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

TEST(ThreadPoolTest, NullPoolRunsInline) {
  int64_t seen_begin = -1, seen_end = -1;
  ParallelFor(nullptr, 9, 1, [&](int64_t b, int64_t e) {
    seen_begin = b;
    seen_end = e;
  });
  EXPECT_EQ(seen_begin, 0);
  EXPECT_EQ(seen_end, 9);
}

}  // namespace
}  // namespace grove
