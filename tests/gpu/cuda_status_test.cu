// The one conversion of CUDA errors: canonical codes a caller can act on and messages that say
// what failed and why. No device is needed (the conversion only reads the error's name).
#include "core/gpu/cuda_status.h"

#include <string>

#include "core/gpu/device_buffer.h"
#include "core/gpu/device_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grove::gpu {
namespace {

using ::testing::HasSubstr;

TEST(CudaStatusTest, CodesSayWhatTheCallerCanDo) {
  EXPECT_TRUE(CudaStatus(cudaSuccess, "x").ok());
  EXPECT_EQ(CudaStatus(cudaErrorMemoryAllocation, "x").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CudaStatus(cudaErrorNoDevice, "x").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CudaStatus(cudaErrorInsufficientDriver, "x").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CudaStatus(cudaErrorInvalidValue, "x").code(), absl::StatusCode::kInternal);
}

TEST(CudaStatusTest, MessageNamesTheOperationAndTheError) {
  const absl::Status s = CudaStatus(cudaErrorMemoryAllocation, "tahoe: forest upload");
  EXPECT_THAT(std::string(s.message()), HasSubstr("tahoe: forest upload"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("cudaErrorMemoryAllocation"));
}

absl::Status Fails() {
  GROVE_CUDA_RETURN_IF_ERROR(cudaErrorInvalidValue, "step two");
  return absl::OkStatus();
}

TEST(CudaStatusTest, MacroReturnsTheFirstError) {
  const absl::Status s = Fails();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()), HasSubstr("step two"));
}

// A buffer holds what was uploaded and frees it when it goes; an allocation that cannot fit is
// RESOURCE_EXHAUSTED, not a crash.
TEST(DeviceBufferTest, UploadsOwnsAndReportsExhaustion) {
  if (VisibleGpuCount() == 0) GTEST_SKIP() << "no CUDA device visible";
  const std::vector<int> host = {1, 2, 3, 4, 5};
  absl::StatusOr<DeviceBuffer> b = DeviceBuffer::Upload(host, "test upload");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->bytes(), static_cast<int64_t>(host.size() * sizeof(int)));
  std::vector<int> back(host.size());
  ASSERT_EQ(cudaMemcpy(back.data(), b->get(), b->bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, host);
  DeviceBuffer moved = *std::move(b);
  EXPECT_NE(moved.get(), nullptr);
  absl::StatusOr<DeviceBuffer> huge = DeviceBuffer::Allocate(int64_t{1} << 50, "a petabyte");
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  (void)cudaGetLastError();
}

// Reserve grows a workspace only when asked for more (the steady state allocates nothing); pinned
// buffers are host memory the device can copy from.
TEST(DeviceBufferTest, ReserveGrowsOnlyAndPinnedBuffersAreHostMemory) {
  if (VisibleGpuCount() == 0) GTEST_SKIP() << "no CUDA device visible";
  DeviceBuffer d;
  ASSERT_TRUE(d.Reserve(100, "test workspace").ok());
  void* const first = d.get();
  EXPECT_EQ(d.bytes(), 100);
  ASSERT_TRUE(d.Reserve(50, "test workspace").ok());
  EXPECT_EQ(d.get(), first);
  EXPECT_EQ(d.bytes(), 100);
  ASSERT_TRUE(d.Reserve(4096, "test workspace").ok());
  EXPECT_EQ(d.bytes(), 4096);
  const std::vector<int> host = {7, 8, 9};
  absl::StatusOr<PinnedBuffer> h = PinnedBuffer::Upload(host, "test staging");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->as<int>()[2], 9);  // readable on the host directly
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, h->get()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeHost);
  ASSERT_EQ(cudaMemcpy(d.get(), h->get(), h->bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  std::vector<int> back(3);
  ASSERT_EQ(cudaMemcpy(back.data(), d.get(), 12, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, host);
}

}  // namespace
}  // namespace grove::gpu
