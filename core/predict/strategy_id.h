// StrategyId: the prediction strategies and their one name table (the seam's enum, as
// ExplainStrategy's names are for explanations). Parsed once, at load, from an option string.
// Thread-safe: pure functions over constant tables.
#pragma once

#include <optional>
#include <string_view>

#include "absl/status/statusor.h"

namespace grove {

// The strategies, in the one fixed order every table of them uses (costs, probe corrections): cpu,
// direct, shared_data, shared_forest, splitting_shared_forest, row_chunk. Every one but kCpu is a
// kernel of Tahoe (core/predict/tahoe/tahoe_kernels.h).
enum class StrategyId : int {
  kCpu = 0,
  kDirect = 1,
  kSharedData = 2,
  kSharedForest = 3,
  kSplittingSharedForest = 4,
  kRowChunk = 5,
};
inline constexpr int kNumStrategies = 6;

// Name of strategy `index` (0 .. kNumStrategies - 1, else "?"); the only table of strategy names.
const char* StrategyName(int index);
inline const char* StrategyName(StrategyId id) { return StrategyName(static_cast<int>(id)); }

// Index of a strategy name; -1 if unknown.
int StrategyIndex(std::string_view name);
// Strategy names accepted by PredictEngineOptions::strategy.
bool IsKnownStrategy(std::string_view name);
// A strategy option as given by a caller: "" or "auto" (the selector decides: nullopt), or a name
// of the table; INVALID_ARGUMENT naming the known ones otherwise.
absl::StatusOr<std::optional<StrategyId>> ParseStrategy(std::string_view name);

}  // namespace grove
