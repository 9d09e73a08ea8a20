// Without CUDA there is no Tahoe GPU engine: Create reports UNAVAILABLE and PredictEngine::Create
// falls back to the CPU reference.
#include "absl/status/status.h"
#include "core/predict/tahoe/tahoe_engine.h"

namespace grove {

absl::StatusOr<std::unique_ptr<TahoeEngine>> TahoeEngine::Create(ForestPtr forest,
                                                                  const TahoeEngineOptions& options,
                                                                  ThreadPool* pool) {
  return absl::UnavailableError("built without CUDA: no GPU prediction engine");
}

}  // namespace grove
