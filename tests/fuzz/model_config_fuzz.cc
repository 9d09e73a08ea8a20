// libFuzzer target for config.json (core/registry/model_config.h): any text must parse into a
// config whose every number is within its documented bounds, or be INVALID_ARGUMENT naming the
// source; never a crash, a sanitizer report or an exception.
//
// Seed corpus: deploy/k8s/base/default_model_config.json (tests/fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/registry/model_config.h"

namespace {

using grove::registry::ModelConfig;

bool InBounds(const ModelConfig& c) {
  namespace r = grove::registry;
  if (c.max_request_rows < 1 || c.max_request_rows > r::kMaxRequestRows) return false;
  if (c.max_interaction_values_per_row < 1 ||
      c.max_interaction_values_per_row > r::kMaxInteractionValuesPerRow) {
    return false;
  }
  for (int64_t v : c.specific_versions) {
    if (v < 1 || v > r::kMaxVersion) return false;
  }
  for (const grove::batching::BatcherOptions& b : c.batching) {
    if (b.max_batch_rows < 1 || b.max_batch_rows > r::kMaxBatchRows) return false;
    if (b.max_queue_rows < 1 || b.max_queue_rows > r::kMaxQueueRows) return false;
    if (b.max_queue_tasks < 1 || b.max_queue_tasks > r::kMaxQueueRequests) return false;
    if (b.max_concurrent_batches < 1 || b.max_concurrent_batches > r::kMaxConcurrentBatches) {
      return false;
    }
    if (b.max_delay < absl::ZeroDuration() || b.max_delay > absl::Microseconds(r::kMaxDelayMicros)) {
      return false;
    }
  }
  return !c.default_outputs.empty();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const ModelConfig defaults;
  const absl::StatusOr<ModelConfig> c =
      grove::registry::ParseModelConfig(absl::string_view(text.data(), text.size()), defaults,
                                        "<fuzz>");
  if (c.ok()) {
    if (!InBounds(*c)) std::abort();
    return 0;
  }
  if (c.status().code() != absl::StatusCode::kInvalidArgument ||
      c.status().message().find("<fuzz>") == absl::string_view::npos) {
    std::abort();
  }
  return 0;
}
