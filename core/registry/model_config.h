// ModelConfig: the typed per-model configuration of a model repository (DIR/<name>/config.json),
// with server-wide defaults. See docs/operations.md for the JSON schema.
//
// Thread-safe (plain values; parsing has no shared state).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "core/batching/batcher.h"
#include "core/model/outputs.h"
#include "core/servable/engine_options.h"
#include "core/servable/operation.h"

namespace grove::registry {

enum class VersionPolicy { kLatest, kAll, kSpecific };

// Bounds of the numeric fields (inclusive; every lower bound is 1, max_delay_us's is 0). They keep
// products of limits (rows x columns x bytes) far from int64 overflow and refuse values that would
// make a model never answer (a delay of centuries) or never refuse (a queue of 2^62 requests).
inline constexpr int64_t kMaxRequestRows = int64_t{1} << 30;
inline constexpr int64_t kMaxInteractionValuesPerRow = int64_t{1} << 30;
inline constexpr int64_t kMaxVersion = 999'999'999'999'999'999;  // 18 digits: a directory name
inline constexpr int64_t kMaxConfigFileBytes = int64_t{1} << 20;   // config.json: 1 MiB
inline constexpr int64_t kMaxBatchRows = int64_t{1} << 30;
inline constexpr int64_t kMaxDelayMicros = 600'000'000;  // 10 minutes
inline constexpr int64_t kMaxQueueRows = int64_t{1} << 40;
inline constexpr int64_t kMaxQueueRequests = int64_t{1} << 20;
inline constexpr int64_t kMaxConcurrentBatches = 1024;

// The batching limits an operation's queue starts from, by what a row of it costs. No delay: a
// task goes to the engine at once when a batch slot is free; tasks that arrive while
// max_concurrent_batches compute merge into the next batch (max_delay_us is opt-in). An operation
// without limits of its own gets those of an expensive one (small batches, one at a time), so a
// new operation is served safely before it is tuned.
batching::BatcherOptions DefaultBatching(Operation op);
// DefaultBatching of every operation, indexed by Operation.
std::array<batching::BatcherOptions, kNumOperations> DefaultBatchingTable();

struct ModelConfig {
  VersionPolicy version_policy = VersionPolicy::kLatest;
  std::vector<int64_t> specific_versions;  // kSpecific
  Device device = Device::kAuto;
  // Forced strategies by name, checked against the engines' tables when a version is built
  // (EngineOptions).
  std::string predict_strategy = "auto";
  std::string explain_strategy = "auto";
  std::vector<OutputKind> default_outputs = {OutputKind::kPrediction};
  int64_t max_request_rows = 65536;
  int64_t max_interaction_values_per_row = int64_t{1} << 20;
  // Per operation (OperationName's order): DefaultBatching's limits unless config.json sets them.
  std::array<batching::BatcherOptions, kNumOperations> batching = DefaultBatchingTable();

  const batching::BatcherOptions& Batching(Operation op) const {
    return batching[static_cast<int>(op)];
  }
};

// Parses a config.json text over `defaults` (fields not given keep their default). Unknown fields,
// wrong types and invalid values (numbers outside the bounds above included) are INVALID_ARGUMENT
// naming `source`, the field and, for numbers, the bounds.
absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json, const ModelConfig& defaults,
                                             absl::string_view source);

// Reads and parses a file (NOT_FOUND when it does not exist, INVALID_ARGUMENT when it is not a
// regular file: a FIFO is refused without blocking; see core/io/file.h).
absl::StatusOr<ModelConfig> LoadModelConfigFile(const std::string& path,
                                                const ModelConfig& defaults);

}  // namespace grove::registry
