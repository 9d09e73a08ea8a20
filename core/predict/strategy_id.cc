#include "core/predict/strategy_id.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace grove {
namespace {

constexpr const char* kStrategies[kNumStrategies] = {
    "cpu", "direct", "shared_data", "shared_forest", "splitting_shared_forest", "row_chunk"};

}  // namespace

const char* StrategyName(int index) {
  return index >= 0 && index < kNumStrategies ? kStrategies[index] : "?";
}

int StrategyIndex(std::string_view name) {
  for (int i = 0; i < kNumStrategies; ++i) {
    if (name == kStrategies[i]) return i;
  }
  return -1;
}

bool IsKnownStrategy(std::string_view name) { return StrategyIndex(name) >= 0; }

absl::StatusOr<std::optional<StrategyId>> ParseStrategy(std::string_view name) {
  if (name.empty() || name == "auto") return std::nullopt;
  const int i = StrategyIndex(name);
  if (i < 0) {
    return absl::InvalidArgumentError(absl::StrCat("unknown prediction strategy '", std::string(name),
                                                   "' (auto, ", absl::StrJoin(kStrategies, ", "),
                                                   ")"));
  }
  return static_cast<StrategyId>(i);
}

}  // namespace grove
