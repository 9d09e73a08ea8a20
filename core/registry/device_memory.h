// Memory of the visible GPUs, for the server's metrics. Without CUDA (or without a visible device)
// the list is empty. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace grove::registry {

struct DeviceMemory {
  std::string device;  // "cuda:N"
  int64_t used_bytes = 0;
  int64_t total_bytes = 0;
};

std::vector<DeviceMemory> QueryDeviceMemory();

}  // namespace grove::registry
