// SharedByKey (core/common/shared_by_key.h): one value per key while it is held, rebuilt after its
// last holder lets it go, failed builds not kept, single flight per key, and a slow build of one
// key that holds up neither another key nor Live on its own key.
#include "core/common/shared_by_key.h"

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace grove {
namespace {

using Cache = SharedByKey<int, std::string>;

absl::StatusOr<std::shared_ptr<const std::string>> Make(std::atomic<int>* builds,
                                                        const std::string& value) {
  builds->fetch_add(1);
  return std::make_shared<const std::string>(value);
}

// A build of `key` on a thread of its own that runs until Finish: the constructor returns once
// the build has started (its key's build lock held).
class SlowBuild {
 public:
  SlowBuild(Cache* cache, int key, const std::string& value) {
    std::promise<void> started;
    thread_ = std::thread([this, cache, key, value, &started] {
      (void)cache->Get(key, [&] {
        started.set_value();
        release_.get_future().wait();
        return absl::StatusOr<std::shared_ptr<const std::string>>(
            std::make_shared<const std::string>(value));
      });
    });
    started.get_future().wait();
  }
  // Also on the way out of a test that failed before Finish (a joinable thread would abort).
  ~SlowBuild() {
    if (thread_.joinable()) Finish();
  }
  void Finish() {
    release_.set_value();
    thread_.join();
  }

 private:
  std::promise<void> release_;
  std::thread thread_;
};

TEST(SharedByKeyTest, OneValuePerKeyWhileHeldThenBuiltAgain) {
  Cache cache;
  std::atomic<int> builds{0};
  absl::StatusOr<std::shared_ptr<const std::string>> a =
      cache.Get(1, [&] { return Make(&builds, "a"); });
  absl::StatusOr<std::shared_ptr<const std::string>> b =
      cache.Get(1, [&] { return Make(&builds, "b"); });
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(**b, "a");
  EXPECT_EQ(builds.load(), 1);
  absl::StatusOr<std::shared_ptr<const std::string>> other =
      cache.Get(2, [&] { return Make(&builds, "c"); });
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(**other, "c");
  EXPECT_EQ(cache.Live([](int key) { return key == 1; }).size(), 1u);
  EXPECT_EQ(cache.Live([](int) { return true; }).size(), 2u);

  // Gone with its last holder: Live no longer sees it, the next Get builds anew, and the map
  // forgets the key.
  a->reset();
  b->reset();
  EXPECT_TRUE(cache.Live([](int key) { return key == 1; }).empty());
  absl::StatusOr<std::shared_ptr<const std::string>> again =
      cache.Get(1, [&] { return Make(&builds, "d"); });
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(**again, "d");
  EXPECT_EQ(builds.load(), 3);
  again->reset();
  other->reset();
  (void)cache.Get(3, [&] { return Make(&builds, "e"); });  // prunes the two gone keys
  EXPECT_EQ(cache.SlotsForTesting(), 1u);
}

TEST(SharedByKeyTest, AFailedBuildIsNotKept) {
  Cache cache;
  absl::StatusOr<std::shared_ptr<const std::string>> failed =
      cache.Get(1, [] { return absl::StatusOr<std::shared_ptr<const std::string>>(
                            absl::ResourceExhaustedError("full")); });
  EXPECT_TRUE(absl::IsResourceExhausted(failed.status()));
  EXPECT_TRUE(cache.Live([](int) { return true; }).empty());
  std::atomic<int> builds{0};
  absl::StatusOr<std::shared_ptr<const std::string>> ok =
      cache.Get(1, [&] { return Make(&builds, "x"); });
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(builds.load(), 1);
}

TEST(SharedByKeyTest, CallersOfOneKeyShareOneBuild) {
  Cache cache;
  std::atomic<int> builds{0};
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::vector<std::thread> callers;
  std::vector<std::shared_ptr<const std::string>> got(8);
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([&, i] {
      absl::StatusOr<std::shared_ptr<const std::string>> v = cache.Get(7, [&] {
        released.wait();  // every other caller arrives while this build runs
        return Make(&builds, "shared");
      });
      if (v.ok()) got[i] = *v;
    });
  }
  std::this_thread::yield();
  release.set_value();
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(builds.load(), 1);
  for (const auto& v : got) {
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v.get(), got[0].get());
  }
}

TEST(SharedByKeyTest, ASlowBuildDoesNotHoldUpOtherKeys) {
  Cache cache;
  SlowBuild slow(&cache, 1, "slow");
  // Key 1's build is in progress (its key lock held): key 2 is built and read meanwhile.
  std::atomic<int> builds{0};
  absl::StatusOr<std::shared_ptr<const std::string>> fast =
      cache.Get(2, [&] { return Make(&builds, "fast"); });
  ASSERT_TRUE(fast.ok());
  EXPECT_EQ(**fast, "fast");
  EXPECT_EQ(cache.Live([](int key) { return key == 2; }).size(), 1u);
  // Live over the key being built returns at once: it has no live value yet.
  EXPECT_TRUE(cache.Live([](int key) { return key == 1; }).empty());
  slow.Finish();
}

TEST(SharedByKeyTest, LiveDoesNotWaitForARebuild) {
  // Key 1 built, let go, then built again slowly: Live of every key answers during the rebuild
  // (the metrics read it while a model loads), listing only the value still held.
  Cache cache;
  std::atomic<int> builds{0};
  (void)cache.Get(1, [&] { return Make(&builds, "first"); });  // let go at once
  absl::StatusOr<std::shared_ptr<const std::string>> other =
      cache.Get(2, [&] { return Make(&builds, "other"); });
  ASSERT_TRUE(other.ok());
  SlowBuild slow(&cache, 1, "again");
  const std::vector<std::shared_ptr<const std::string>> live =
      cache.Live([](int) { return true; });
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(*live[0], "other");
  slow.Finish();
}

}  // namespace
}  // namespace grove
