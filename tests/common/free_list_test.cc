// FreeList: last in, first out; a bound on the kept bytes (what is given beyond it is freed, and
// nothing is kept with a bound of 0); without a bound every object is kept and its size never
// asked; TakeAll empties the list; concurrent takers never share an object.
#include "core/common/free_list.h"

#include <atomic>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace grove {
namespace {

struct Item {
  explicit Item(int id, int64_t bytes = 10, std::atomic<int>* sized = nullptr)
      : id(id), size(bytes), sized(sized) {}
  int64_t Bytes() const {
    if (sized != nullptr) sized->fetch_add(1);
    return size;
  }
  int id;
  int64_t size;
  std::atomic<int>* sized;
};

TEST(FreeListTest, LastInFirstOutWithinTheBound) {
  FreeList<Item> list(25);
  EXPECT_EQ(list.Take(), nullptr);
  list.Give(std::make_unique<Item>(1));
  list.Give(std::make_unique<Item>(2));
  list.Give(std::make_unique<Item>(3));  // 30 bytes would pass the bound: freed
  list.Give(nullptr);
  EXPECT_EQ(list.KeptCount(), 2);
  EXPECT_EQ(list.KeptBytes(), 20);
  std::unique_ptr<Item> a = list.Take();
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->id, 2);
  EXPECT_EQ(list.KeptBytes(), 10);
  list.Give(std::make_unique<Item>(4, 15));  // 25: exactly the bound
  EXPECT_EQ(list.KeptBytes(), 25);
  EXPECT_EQ(list.Take()->id, 4);
  EXPECT_EQ(list.Take()->id, 1);
  EXPECT_EQ(list.Take(), nullptr);
  EXPECT_EQ(list.KeptBytes(), 0);

  FreeList<Item> none(0);
  none.Give(std::make_unique<Item>(5));
  EXPECT_EQ(none.KeptCount(), 0);
  none.Give(std::make_unique<Item>(6, 0));  // an empty object fits a bound of 0
  EXPECT_EQ(none.KeptCount(), 1);
}

TEST(FreeListTest, UnboundedKeepsAllWithoutAskingTheirSizeAndTakeAllEmptiesIt) {
  std::atomic<int> sized{0};
  FreeList<Item> list;
  for (int i = 0; i < 5; ++i) list.Give(std::make_unique<Item>(i, int64_t{1} << 40, &sized));
  EXPECT_EQ(list.KeptCount(), 5);
  EXPECT_EQ(list.KeptBytes(), 0);
  EXPECT_EQ(sized.load(), 0);
  std::vector<std::unique_ptr<Item>> all = list.TakeAll();
  ASSERT_EQ(all.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(all[i]->id, i);
  EXPECT_EQ(list.KeptCount(), 0);
  EXPECT_EQ(list.Take(), nullptr);
}

TEST(FreeListTest, ConcurrentTakersNeverShareAnObject) {
  FreeList<Item> list(1000);
  for (int i = 0; i < 8; ++i) list.Give(std::make_unique<Item>(i));
  std::atomic<int> clashes{0};
  std::vector<std::atomic<int>> holders(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int k = 0; k < 2000; ++k) {
        std::unique_ptr<Item> item = list.Take();
        if (item == nullptr) continue;
        if (holders[item->id].fetch_add(1) != 0) clashes.fetch_add(1);
        holders[item->id].fetch_sub(1);
        list.Give(std::move(item));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(clashes.load(), 0);
  EXPECT_EQ(list.KeptCount(), 8);
  EXPECT_EQ(list.KeptBytes(), 80);
}

}  // namespace
}  // namespace grove
