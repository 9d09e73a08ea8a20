// What an engine call did, for logs, metrics and `grove` output.
#pragma once

#include <string>

namespace grove {

struct RunInfo {
  std::string device = "cpu";  // "cpu" or "cuda:N" (several GPUs: "cuda:0+1+...")
  std::string strategy;        // e.g. "cpu", "row_chunk", "treeshap_gpu", "quadrature_gpu"
  std::string reason;          // why the selector chose it (predicted times), empty for overrides
  double compute_seconds = 0;  // engine time including host-device copies
};

}  // namespace grove
