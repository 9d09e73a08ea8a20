// SKIP_WITHOUT_GPU(): the first statement of a GPU test, so that the test binaries of a CUDA
// build run (and skip) on a machine without a GPU, as CI's does.
#pragma once

#include "core/gpu/device_set.h"
#include "gtest/gtest.h"

#define SKIP_WITHOUT_GPU()                                                              \
  do {                                                                                  \
    if (::grove::gpu::VisibleGpuCount() == 0) GTEST_SKIP() << "no CUDA device visible"; \
  } while (0)
