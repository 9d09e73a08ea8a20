// KeyedCache: concurrent misses of one key build it once (single flight), a failed build is shared
// by its waiters and retried by the next call, other keys never wait for a build, and a pinned
// entry is never evicted (the capacity bounds the unpinned ones).
#include "core/common/keyed_cache.h"

#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace grove {
namespace {

using Cache = KeyedCache<const int>;

absl::StatusOr<std::shared_ptr<const int>> Value(int v) { return std::make_shared<const int>(v); }

TEST(KeyedCacheTest, ConcurrentMissesOfOneKeyBuildOnce) {
  constexpr int kThreads = 8;
  Cache cache(4);
  absl::Mutex mu;
  int arrived = 0;
  int builds = 0;
  // Each build waits until every thread has asked: without single flight every thread misses
  // and builds.
  auto build = [&]() -> absl::StatusOr<std::shared_ptr<const int>> {
    absl::MutexLock lock(&mu);
    ++builds;
    mu.Await(absl::Condition(+[](int* a) { return *a == kThreads; }, &arrived));
    return Value(42);
  };
  std::vector<std::shared_ptr<const int>> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      {
        absl::MutexLock lock(&mu);
        ++arrived;
      }
      absl::StatusOr<std::shared_ptr<const int>> v = cache.Get("groups", build);
      ASSERT_TRUE(v.ok()) << v.status();
      got[i] = *v;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(cache.stats().builds, 1);
  for (const auto& v : got) EXPECT_EQ(v, got[0]);
  EXPECT_EQ(*got[0], 42);
}

TEST(KeyedCacheTest, AFailedBuildIsSharedThenRetried) {
  Cache cache(4);
  absl::Notification started, release;
  absl::StatusOr<std::shared_ptr<const int>> first, waiter;
  std::thread builder([&] {
    first = cache.Get("k", [&]() -> absl::StatusOr<std::shared_ptr<const int>> {
      started.Notify();
      release.WaitForNotification();
      return absl::InvalidArgumentError("bad grouping");
    });
  });
  started.WaitForNotification();
  std::thread other([&] {
    waiter = cache.Get("k", [&]() -> absl::StatusOr<std::shared_ptr<const int>> {
      return Value(1);  // runs only when this caller missed the failed build
    });
  });
  release.Notify();
  builder.join();
  other.join();
  EXPECT_EQ(first.status().code(), absl::StatusCode::kInvalidArgument);
  // The waiter either shared the failure or came after it and built its own value.
  if (waiter.ok()) {
    EXPECT_EQ(**waiter, 1);
  } else {
    EXPECT_EQ(waiter.status().message(), "bad grouping");
  }
  absl::StatusOr<std::shared_ptr<const int>> again = cache.Get("k", [] { return Value(2); });
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(cache.size(), 1u);
}

TEST(KeyedCacheTest, ABuildThatThrowsLeavesTheKeyBuildable) {
  // An exception out of a build (std::bad_alloc for a large layout) reaches its caller; the key
  // must not stay "being built", or every later caller would wait for ever.
  Cache cache(4);
  EXPECT_THROW(
      (void)cache.Get("k", []() -> absl::StatusOr<std::shared_ptr<const int>> {
        throw std::bad_alloc();
      }),
      std::bad_alloc);
  EXPECT_EQ(cache.size(), 0u);
  absl::StatusOr<std::shared_ptr<const int>> again = cache.Get("k", [] { return Value(3); });
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(**again, 3);
}

TEST(KeyedCacheTest, OtherKeysDoNotWaitForABuild) {
  Cache cache(4);
  absl::Notification started, release;
  std::thread slow([&] {
    (void)cache.Get("slow", [&]() -> absl::StatusOr<std::shared_ptr<const int>> {
      started.Notify();
      release.WaitForNotification();
      return Value(1);
    });
  });
  started.WaitForNotification();
  // Would never return if a build held the cache's lock.
  absl::StatusOr<std::shared_ptr<const int>> fast = cache.Get("fast", [] { return Value(2); });
  ASSERT_TRUE(fast.ok());
  EXPECT_EQ(**fast, 2);
  EXPECT_EQ(cache.Find("slow"), nullptr);  // being built: not a value yet
  release.Notify();
  slow.join();
  ASSERT_NE(cache.Find("slow"), nullptr);
}

TEST(KeyedCacheTest, APinnedEntryIsNeverEvicted) {
  Cache cache(2);
  absl::StatusOr<std::pair<std::shared_ptr<const int>, CachePin>> pinned =
      cache.GetPinned("model", [] { return Value(7); });
  ASSERT_TRUE(pinned.ok());
  ASSERT_NE(pinned->second, nullptr);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(cache.Get("request" + std::to_string(i), [i] { return Value(i); }).ok());
  }
  EXPECT_EQ(cache.Find("model"), pinned->first);
  KeyedCacheStats s = cache.stats();
  EXPECT_EQ(s.pinned, 1);
  EXPECT_EQ(s.cached, 2);
  EXPECT_EQ(s.builds, 11);
  // A hit builds nothing.
  ASSERT_TRUE(cache.Get("model", [] { return Value(8); }).ok());
  EXPECT_EQ(cache.stats().builds, 11);

  // Pinned twice, released once: still pinned.
  absl::StatusOr<std::pair<std::shared_ptr<const int>, CachePin>> again =
      cache.GetPinned("model", [] { return Value(9); });
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->first, pinned->first);
  pinned->second.reset();
  for (int i = 10; i < 14; ++i) {
    ASSERT_TRUE(cache.Get("request" + std::to_string(i), [i] { return Value(i); }).ok());
  }
  EXPECT_NE(cache.Find("model"), nullptr);
  // Released: an ordinary entry, the most recent, evicted like the others.
  again->second.reset();
  EXPECT_EQ(cache.stats().pinned, 0);
  EXPECT_NE(cache.Find("model"), nullptr);
  for (int i = 20; i < 22; ++i) {
    ASSERT_TRUE(cache.Get("request" + std::to_string(i), [i] { return Value(i); }).ok());
  }
  EXPECT_EQ(cache.Find("model"), nullptr);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(KeyedCacheTest, APinMayOutliveTheCache) {
  CachePin pin;
  {
    Cache cache(1);
    absl::StatusOr<std::pair<std::shared_ptr<const int>, CachePin>> p =
        cache.GetPinned("k", [] { return Value(1); });
    ASSERT_TRUE(p.ok());
    pin = p->second;
  }
  pin.reset();  // must not touch freed memory (ASan preset)
}

}  // namespace
}  // namespace grove
