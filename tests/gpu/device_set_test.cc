// The device set every GPU engine shares: a count that is never negative, 0 without CUDA, and the
// same when asked again; issuing threads that run each device's share exactly once, device i > 0's
// always on the same thread of its own, device 0's on the caller, under concurrent callers.
#include "core/gpu/device_set.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "core/serving/host_buffers.h"

namespace grove::gpu {
namespace {

TEST(DeviceSetTest, CountIsNeverNegativeAndZeroWithoutCuda) {
  const int n = VisibleGpuCount();
  EXPECT_GE(n, 0);
#if !defined(GROVE_HAVE_CUDA)
  EXPECT_EQ(n, 0);
#endif
  EXPECT_EQ(VisibleGpuCount(), n);  // stable: asking again changes nothing
}

TEST(DeviceIssuersTest, EachShareRunsOnceOnItsOwnThread) {
  DeviceIssuers issuers(4);
  EXPECT_EQ(issuers.devices(), 4);
  std::vector<std::thread::id> first(4);
  for (int call = 0; call < 20; ++call) {
    std::vector<std::thread::id> ran(4);
    std::vector<int> count(4, 0);
    issuers.RunOnEach(4, [&](int i) {
      ran[i] = std::this_thread::get_id();
      ++count[i];
    });
    for (int i = 0; i < 4; ++i) EXPECT_EQ(count[i], 1) << "share " << i;
    EXPECT_EQ(ran[0], std::this_thread::get_id());  // device 0 on the caller
    if (call == 0) first = ran;
    for (int i = 1; i < 4; ++i) {
      EXPECT_EQ(ran[i], first[i]) << "device " << i << " moved to another thread";
      EXPECT_NE(ran[i], std::this_thread::get_id());
    }
  }
  EXPECT_EQ(std::set<std::thread::id>(first.begin(), first.end()).size(), 4u);
}

TEST(DeviceIssuersTest, FewerSharesThanDevicesAndOneDevice) {
  DeviceIssuers issuers(3);
  std::vector<int> count(3, 0);
  issuers.RunOnEach(2, [&](int i) { ++count[i]; });
  EXPECT_EQ(count, (std::vector<int>{1, 1, 0}));
  issuers.RunOnEach(9, [&](int i) { ++count[i]; });  // at most devices()
  EXPECT_EQ(count, (std::vector<int>{2, 2, 1}));
  DeviceIssuers single(1);
  EXPECT_EQ(single.devices(), 1);
  std::thread::id ran;
  single.RunOnEach(1, [&](int) { ran = std::this_thread::get_id(); });
  EXPECT_EQ(ran, std::this_thread::get_id());
  single.RunOnEach(0, [&](int) { ADD_FAILURE() << "no share to run"; });
}

// With the threads and the caller polling (the default where they fit the machine) and without:
// every call returns with all of its shares done, under concurrent callers.
class DeviceIssuersSpinTest : public ::testing::TestWithParam<int> {};

INSTANTIATE_TEST_SUITE_P(Spin, DeviceIssuersSpinTest, ::testing::Values(0, 200, 5000));

TEST_P(DeviceIssuersSpinTest, ConcurrentCallersEachGetTheirOwnShares) {
  DeviceIssuers issuers(3, std::chrono::microseconds(GetParam()));
  std::atomic<int> total{0};
  std::vector<std::thread> callers;
  std::mutex mu;
  int complete_calls = 0;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int k = 0; k < 200; ++k) {
        int mine[3] = {0, 0, 0};
        issuers.RunOnEach(3, [&](int i) {
          ++mine[i];
          total.fetch_add(1);
        });
        if (mine[0] == 1 && mine[1] == 1 && mine[2] == 1) {
          std::lock_guard<std::mutex> lock(mu);
          ++complete_calls;
        }
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 200 * 3);
  EXPECT_EQ(complete_calls, 4 * 200);  // every call returned with all of its shares done
}

// A share that outlasts the poll: the caller and the thread fall back to their blocking waits and
// the call still returns with the share done; the destructor stops threads that are polling.
TEST_P(DeviceIssuersSpinTest, SharesLongerThanThePollAndDestructionWhilePolling) {
  for (int round = 0; round < 3; ++round) {
    DeviceIssuers issuers(2, std::chrono::microseconds(GetParam()));
    std::atomic<int> done{0};
    issuers.RunOnEach(2, [&](int i) {
      if (i == 1) std::this_thread::sleep_for(std::chrono::microseconds(GetParam() + 2000));
      done.fetch_add(1);
    });
    EXPECT_EQ(done.load(), 2);
    issuers.RunOnEach(2, [&](int) { done.fetch_add(1); });
    EXPECT_EQ(done.load(), 4);
  }  // destroyed right after a share: its thread is polling for the next one
}

// Page-locking needs a GPU: without one (or without CUDA) it is refused with a reason, and no
// pointer counts as pinned; with one, a pinned range is recognised inside and released.
TEST(PinHostRangeTest, PinsWithAGpuAndSaysWhyNotWithout) {
  std::vector<float> v(1 << 16, 1.0f);
  EXPECT_FALSE(IsPinnedHost(nullptr));
  EXPECT_FALSE(IsPinnedHost(v.data()));
  const absl::Status s = PinHostRange(v.data(), v.size() * sizeof(float));
  if (VisibleGpuCount() == 0) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("page-lock"), std::string::npos) << s;
    return;
  }
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(IsPinnedHost(v.data() + 1000));
  UnpinHostRange(v.data());
  EXPECT_FALSE(IsPinnedHost(v.data()));
}

// Page-locked allocations likewise: refused with a reason without a GPU; with one, recognised as
// pinned, and a page-locked host buffer pool hands out such memory (what lets the GPU engines skip
// their staging copies for rows received into it).
TEST(AllocatePinnedHostTest, AllocatesWithAGpuAndSaysWhyNotWithout) {
  absl::StatusOr<void*> p = AllocatePinnedHost(1 << 20);
  serving::HostBufferPool pool(serving::HostBufferOptions{.max_bytes = 8 << 20, .page_locked = true});
  serving::HostBufferPool::Buffer b = pool.Acquire(300 << 10);
  if (VisibleGpuCount() == 0) {
    EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(p.status().message().find("page-locked"), std::string::npos) << p.status();
    EXPECT_FALSE(b);
    return;
  }
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(IsPinnedHost(static_cast<char*>(*p) + 1000));
  FreePinnedHost(*p);
  ASSERT_TRUE(b);
  EXPECT_TRUE(pool.stats().page_locked);
  EXPECT_TRUE(IsPinnedHost(b.data() + 1000));
}

}  // namespace
}  // namespace grove::gpu
