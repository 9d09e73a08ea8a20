// WaitForEvent returns only once the GPU's work is done, whether it ends while the thread polls
// or after it has gone to sleep.
#include "core/gpu/event_wait.h"

#include "core/gpu/cuda_status.h"
#include "core/gpu/device_set.h"
#include "gtest/gtest.h"

namespace grove::gpu {
namespace {

// Sleeps on the GPU for `cycles` SM clock cycles (at 1-2 GHz, cycles / 2 nanoseconds or more), then
// sets *flag (host-mapped memory, so the host sees it without a copy that would itself synchronise).
__global__ void SleepThenSet(volatile int* flag, long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) __nanosleep(1000);
  __threadfence_system();
  *flag = 1;
}

class EventWaitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (VisibleGpuCount() == 0) GTEST_SKIP() << "no CUDA device visible";
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_TRUE(CreateWaitEvent(&event_, "test event").ok());
    ASSERT_EQ(cudaHostAlloc(&flag_, sizeof(int), cudaHostAllocMapped), cudaSuccess);
    ASSERT_EQ(cudaHostGetDevicePointer(reinterpret_cast<void**>(&d_flag_), flag_, 0), cudaSuccess);
  }
  void TearDown() override {
    if (flag_ != nullptr) cudaFreeHost(flag_);
    if (event_ != nullptr) cudaEventDestroy(event_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  // Launches work of `cycles` SM cycles and records the event after it.
  void Launch(long long cycles) {
    *flag_ = 0;
    SleepThenSet<<<1, 1, 0, stream_>>>(d_flag_, cycles);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(event_, stream_), cudaSuccess);
  }
  bool Done() const { return *static_cast<volatile int*>(flag_) == 1; }

  cudaStream_t stream_ = nullptr;
  cudaEvent_t event_ = nullptr;
  int* flag_ = nullptr;
  int* d_flag_ = nullptr;
};

TEST_F(EventWaitTest, LongWorkIsWaitedForAfterTheThreadSleeps) {
  Launch(50'000'000);  // 25 ms or more: far beyond the spin
  ASSERT_TRUE(WaitForEvent(event_, "long work").ok());
  EXPECT_TRUE(Done());
  EXPECT_EQ(cudaEventQuery(event_), cudaSuccess);
}

TEST_F(EventWaitTest, WithoutASpinTheWaitStillWaits) {
  Launch(20'000'000);  // 10 ms or more
  ASSERT_TRUE(WaitForEvent(event_, "no spin", absl::ZeroDuration()).ok());
  EXPECT_TRUE(Done());
}

TEST_F(EventWaitTest, ShortWorkEndsWhileTheThreadPolls) {
  Launch(1'000);
  ASSERT_TRUE(WaitForEvent(event_, "short work", absl::Seconds(10)).ok());
  EXPECT_TRUE(Done());
}

TEST_F(EventWaitTest, AnEventNeverRecordedIsDone) {
  EXPECT_TRUE(WaitForEvent(event_, "unrecorded").ok());
}

}  // namespace
}  // namespace grove::gpu
