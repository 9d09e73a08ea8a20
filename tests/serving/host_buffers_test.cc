#include "core/serving/host_buffers.h"

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "core/gpu/device_set.h"

namespace grove::serving {
namespace {

TEST(HostBufferPool, KeepsAndReusesBuffersBySizeClass) {
  HostBufferPool pool(HostBufferOptions{.max_bytes = 8 << 20, .page_locked = false});
  char* first = nullptr;
  {
    HostBufferPool::Buffer b = pool.Acquire(100 << 10);  // class 128 KiB
    ASSERT_TRUE(b);
    EXPECT_EQ(b.capacity(), 128 << 10);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
    std::memset(b.data(), 1, 100 << 10);
    first = b.data();
  }
  EXPECT_EQ(pool.stats().kept_bytes, 128 << 10);
  HostBufferPool::Buffer again = pool.Acquire(128 << 10);  // same class: the same memory
  EXPECT_EQ(again.data(), first);
  HostBufferPool::Buffer other = pool.Acquire(1);  // smallest class, a new buffer
  EXPECT_EQ(other.capacity(), 64 << 10);
  EXPECT_NE(other.data(), first);
  EXPECT_EQ(pool.stats().kept_bytes, (128 << 10) + (64 << 10));
  again.Release();
  EXPECT_FALSE(again);
  EXPECT_EQ(pool.Acquire(120 << 10).data(), first);
}

TEST(HostBufferPool, PastItsBoundGivesNothingUntilABufferIsFree) {
  HostBufferPool pool(HostBufferOptions{.max_bytes = 1 << 20, .page_locked = false});
  HostBufferPool::Buffer a = pool.Acquire(1 << 20);
  ASSERT_TRUE(a);
  EXPECT_FALSE(pool.Acquire(1 << 20));  // the bound is reached: the caller keeps its own memory
  EXPECT_FALSE(pool.Acquire(1));        // also for a class it holds none of
  EXPECT_FALSE(pool.Acquire(int64_t{1} << 41));  // past the largest class
  a.Release();
  EXPECT_TRUE(pool.Acquire(1 << 20));
  EXPECT_EQ(pool.stats().kept_bytes, 1 << 20);

  HostBufferPool none(HostBufferOptions{.max_bytes = 0, .page_locked = false});
  EXPECT_FALSE(none.Acquire(1000));
  EXPECT_EQ(none.stats().kept_bytes, 0);
}

// What metrics report: kept and in-use bytes at class size, misses for every empty Acquire.
TEST(HostBufferPool, StatsCountKeptInUseAndMisses) {
  HostBufferPool pool(HostBufferOptions{.max_bytes = 1 << 20, .page_locked = false});
  EXPECT_EQ(pool.stats().kept_bytes, 0);
  EXPECT_FALSE(pool.stats().page_locked);
  HostBufferPool::Buffer a = pool.Acquire(300 << 10);  // class 512 KiB, new
  HostBufferPool::Buffer b = pool.Acquire(200 << 10);  // class 256 KiB, new
  HostBufferPool::Stats s = pool.stats();
  EXPECT_EQ(s.kept_bytes, 768 << 10);
  EXPECT_EQ(s.in_use_bytes, 768 << 10);
  EXPECT_EQ(s.misses, 0);
  EXPECT_FALSE(pool.Acquire(512 << 10));         // no room: a miss
  EXPECT_FALSE(pool.Acquire(int64_t{1} << 41));  // past the largest class: a miss
  a.Release();
  s = pool.stats();
  EXPECT_EQ(s.kept_bytes, 768 << 10);
  EXPECT_EQ(s.in_use_bytes, 256 << 10);
  EXPECT_EQ(s.misses, 2);
  HostBufferPool::Buffer c = pool.Acquire(400 << 10);  // the free 512 KiB one again
  EXPECT_EQ(pool.stats().in_use_bytes, 768 << 10);
  c.Release();
  b.Release();
  s = pool.stats();
  EXPECT_EQ(s.in_use_bytes, 0);
  EXPECT_EQ(s.kept_bytes, 768 << 10);
  EXPECT_EQ(s.misses, 2);

  HostBufferPool none(HostBufferOptions{.max_bytes = 0, .page_locked = false});
  EXPECT_FALSE(none.Acquire(1000));
  EXPECT_EQ(none.stats().misses, 1);
}

// Request sizes change: free buffers of the old size make room for the new one.
TEST(HostBufferPool, FreeBuffersOfOtherSizesMakeRoom) {
  HostBufferPool pool(HostBufferOptions{.max_bytes = 1 << 20, .page_locked = false});
  {
    HostBufferPool::Buffer big = pool.Acquire(1 << 20);
    ASSERT_TRUE(big);
  }
  EXPECT_EQ(pool.stats().kept_bytes, 1 << 20);
  HostBufferPool::Buffer small = pool.Acquire(100 << 10);  // the free 1 MiB one goes
  ASSERT_TRUE(small);
  EXPECT_EQ(small.capacity(), 128 << 10);
  EXPECT_EQ(pool.stats().kept_bytes, 128 << 10);
  HostBufferPool::Buffer more = pool.Acquire(512 << 10);  // room left under the bound
  EXPECT_TRUE(more);
  EXPECT_FALSE(pool.Acquire(512 << 10));  // in use: nothing to free
}

// Free buffers are not freed for a request they cannot make room for (buffers in use hold the
// rest of the bound): they stay for the next request of their size.
TEST(HostBufferPool, FreeBuffersStayWhenTheyCannotMakeRoom) {
  HostBufferPool pool(HostBufferOptions{.max_bytes = 1 << 20, .page_locked = false});
  HostBufferPool::Buffer held = pool.Acquire(512 << 10);
  char* small = nullptr;
  {
    HostBufferPool::Buffer b = pool.Acquire(100 << 10);  // 128 KiB, then free
    small = b.data();
  }
  EXPECT_FALSE(pool.Acquire(1 << 20));  // 512 KiB in use: 1 MiB cannot fit whatever is freed
  EXPECT_EQ(pool.stats().kept_bytes, (512 << 10) + (128 << 10));
  EXPECT_EQ(pool.Acquire(128 << 10).data(), small);
}

TEST(HostBufferPool, MovedBuffersReturnOnce) {
  HostBufferPool pool(HostBufferOptions{.max_bytes = 1 << 20, .page_locked = false});
  HostBufferPool::Buffer a = pool.Acquire(1000);
  char* p = a.data();
  HostBufferPool::Buffer b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_EQ(b.data(), p);
  b = pool.Acquire(1000);  // the old one returns, a new one is taken
  EXPECT_NE(b.data(), p);
  EXPECT_EQ(pool.Acquire(1000).data(), p);
}

TEST(HostBufferPool, ConcurrentCallersNeverShareABuffer) {
  HostBufferPool pool(HostBufferOptions{.max_bytes = 4 << 20, .page_locked = false});
  std::vector<std::thread> threads;
  std::atomic<int> clashes{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        HostBufferPool::Buffer b = pool.Acquire(1 + (i * 7919 + t) % (300 << 10));
        if (!b) continue;  // four callers may hold more than the bound at once
        const char mark = static_cast<char>(t + 1);
        b.data()[0] = mark;
        b.data()[b.capacity() - 1] = mark;
        std::this_thread::yield();
        if (b.data()[0] != mark || b.data()[b.capacity() - 1] != mark) ++clashes;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(clashes.load(), 0);
  EXPECT_LE(pool.stats().kept_bytes, 4 << 20);
  EXPECT_EQ(pool.stats().in_use_bytes, 0);  // every buffer came back, counted once
}

// Page-locking needs a GPU: without one the pool says so once and gives nothing (callers keep to
// their own memory); with one (tests/gpu/device_set_test.cc) its buffers are page-locked.
TEST(HostBufferPool, PageLockingWithoutAGpuGivesNothing) {
  if (gpu::VisibleGpuCount() > 0) GTEST_SKIP() << "a GPU is visible (tests/gpu covers it)";
  HostBufferPool pool(HostBufferOptions{.max_bytes = 8 << 20, .page_locked = true});
  EXPECT_FALSE(pool.Acquire(1000));
  EXPECT_FALSE(pool.stats().page_locked);
  EXPECT_EQ(pool.stats().kept_bytes, 0);
  EXPECT_EQ(pool.stats().in_use_bytes, 0);
  EXPECT_EQ(pool.stats().misses, 1);
}

TEST(HostBufferPool, OptionsHaveBounds) {
  EXPECT_TRUE(ValidateHostBufferOptions({}).ok());
  EXPECT_FALSE(ValidateHostBufferOptions(HostBufferOptions{.max_bytes = -1}).ok());
  EXPECT_FALSE(
      ValidateHostBufferOptions(HostBufferOptions{.max_bytes = kMaxHostBufferBytes + 1}).ok());
}

}  // namespace
}  // namespace grove::serving
