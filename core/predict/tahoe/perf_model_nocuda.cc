// Without CUDA there is no GPU to calibrate: the performance model's GPU entry points report that.
#include <string>

#include "core/predict/tahoe/perf_model.h"

namespace grove {

bool GpuIdentity(int device, std::string* name, std::string* driver) { return false; }

bool MeasureGpuHardware(int device, GpuHardwareParams* params, std::string* error) {
  *error = "built without CUDA";
  return false;
}

}  // namespace grove
