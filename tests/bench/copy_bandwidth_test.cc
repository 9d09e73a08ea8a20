// The copy-bandwidth measure benchmarks report beside multi-GPU figures: refused with a reason
// without a GPU and for bad arguments; with GPUs, a positive figure per listed device (a device
// listed twice counts twice) and for every device at once, both ways.
#include "bench/common/copy_bandwidth.h"

#include <vector>

#include "core/gpu/device_set.h"
#include "gtest/gtest.h"

namespace grove::bench {
namespace {

TEST(CopyBandwidthTest, MeasuresEveryListedDeviceAndRefusesBadArguments) {
  const int n = gpu::VisibleGpuCount();
  if (n == 0) {
    const absl::StatusOr<CopyBandwidth> b = MeasureCopyBandwidth({0}, 1 << 20, 1);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
    return;
  }
  EXPECT_EQ(MeasureCopyBandwidth({}, 1 << 20, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MeasureCopyBandwidth({n}, 1 << 20, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MeasureCopyBandwidth({0}, 0, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MeasureCopyBandwidth({0}, 1 << 20, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<int> devices;
  for (int d = 0; d < n; ++d) devices.push_back(d);
  devices.push_back(0);
  const absl::StatusOr<CopyBandwidth> b = MeasureCopyBandwidth(devices, 8 << 20, 2);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->to_device.size(), devices.size());
  for (double g : b->to_device) EXPECT_GT(g, 0.0);
  EXPECT_GT(b->to_all, 0.0);
  EXPECT_GT(b->from_all, 0.0);
}

}  // namespace
}  // namespace grove::bench
