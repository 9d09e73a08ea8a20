// The device set every GPU engine shares: a count that is never negative, 0 without CUDA, and the
// same when asked again.
#include "core/gpu/device_set.h"

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace grove::gpu
