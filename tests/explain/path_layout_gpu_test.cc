// The path layout's GPU copy without a visible GPU (or without CUDA): refused as UNAVAILABLE,
// nothing resident. The copies themselves are tested in path_layout_gpu_test.cu (label gpu).
#include "core/explain/path_layout_gpu.h"

#include "core/gpu/device_set.h"
#include "gtest/gtest.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

TEST(ResidentPathLayoutWithoutGpuTest, IsUnavailableAndHoldsNothing) {
  if (gpu::VisibleGpuCount() > 0) GTEST_SKIP() << "a GPU is visible: path_layout_gpu_test.cu";
  RandomForestOptions o;
  o.num_trees = 4;
  absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(*MakeRandomForest(o));
  ASSERT_TRUE(l.ok()) << l.status();
  absl::StatusOr<ResidentPathLayoutPtr> copy = ResidentPathLayout::On(*l, 0);
  EXPECT_TRUE(absl::IsUnavailable(copy.status())) << copy.status();
  EXPECT_EQ(ResidentPathLayout::ResidentBytes(**l), 0);
}

}  // namespace
}  // namespace grove
