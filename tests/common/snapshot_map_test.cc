#include "core/common/snapshot_map.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace grove {
namespace {

TEST(SnapshotMapTest, FindsWhatWasCreatedOnce) {
  SnapshotMap<std::string, int> map;
  EXPECT_EQ(map.Find(absl::string_view("a")), nullptr);
  int made = 0;
  int* a = map.FindOrCreate(absl::string_view("a"), [&] {
    ++made;
    return std::make_unique<int>(1);
  });
  int* again = map.FindOrCreate(std::string("a"), [&] {
    ++made;
    return std::make_unique<int>(2);
  });
  EXPECT_EQ(a, again);
  EXPECT_EQ(*a, 1);
  EXPECT_EQ(made, 1);
  EXPECT_EQ(map.Find(absl::string_view("a")), a);
  EXPECT_EQ(map.Find(std::string("b")), nullptr);
}

TEST(SnapshotMapTest, ValuesKeepTheirAddressAsTheMapGrows) {
  SnapshotMap<int64_t, int64_t> map;
  std::vector<int64_t*> values;
  for (int64_t i = 0; i < 100; ++i) {
    values.push_back(map.FindOrCreate(i, [i] { return std::make_unique<int64_t>(i * 10); }));
  }
  for (int64_t i = 0; i < 100; ++i) {
    ASSERT_EQ(map.Find(i), values[i]);
    EXPECT_EQ(*values[i], i * 10);
  }
  int64_t count = 0;
  map.ForEach([&](int64_t key, int64_t& value) {
    EXPECT_EQ(value, key * 10);
    ++count;
  });
  EXPECT_EQ(count, 100);
}

// Readers search while writers add: every thread sees one value per key, each created once.
TEST(SnapshotMapTest, ConcurrentReadersAndWritersAgree) {
  SnapshotMap<std::string, std::atomic<int>> map;
  std::atomic<int> made{0};
  constexpr int kThreads = 8;
  constexpr int kKeys = 64;
  std::vector<std::vector<std::atomic<int>*>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (int k = 0; k < kKeys; ++k) {
          const std::string key = absl::StrCat("key", (k + t) % kKeys);
          std::atomic<int>* v = map.FindOrCreate(key, [&] {
            made.fetch_add(1);
            return std::make_unique<std::atomic<int>>(0);
          });
          v->fetch_add(1);
          if (round == 0) seen[t].push_back(v);
          EXPECT_EQ(map.Find(key), v);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(made.load(), kKeys);
  int total = 0;
  map.ForEach([&](const std::string&, std::atomic<int>& v) { total += v.load(); });
  EXPECT_EQ(total, kThreads * kKeys * 3);
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < kKeys; ++k) {
      EXPECT_EQ(seen[t][k], map.Find(absl::StrCat("key", (k + t) % kKeys)));
    }
  }
}

}  // namespace
}  // namespace grove
