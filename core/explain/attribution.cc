#include "core/explain/attribution.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace grove {

const char* AttributionName(Attribution attribution) {
  return attribution == Attribution::kBanzhaf ? "banzhaf" : "shapley";
}

absl::StatusOr<Attribution> ParseAttribution(absl::string_view name) {
  for (Attribution a : {Attribution::kShapley, Attribution::kBanzhaf}) {
    if (name == AttributionName(a)) return a;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown attribution '", name, "': expected shapley or banzhaf"));
}

}  // namespace grove
