#include "core/servable/engine_options.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace grove {

const char* DeviceName(Device device) {
  switch (device) {
    case Device::kAuto: return "auto";
    case Device::kCpu: return "cpu";
    case Device::kGpu: return "gpu";
  }
  return "unknown";
}

absl::StatusOr<Device> ParseDevice(absl::string_view name) {
  for (Device d : {Device::kAuto, Device::kCpu, Device::kGpu}) {
    if (name == DeviceName(d)) return d;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown device '", name, "': expected auto, cpu or gpu"));
}

}  // namespace grove
