#include "core/servable/operation.h"

#include "absl/status/status.h"
#include <string>

#include "absl/strings/str_cat.h"

namespace grove {

const char* OperationName(Operation op) {
  switch (op) {
    case Operation::kPredict: return "predict";
    case Operation::kExplain: return "explain";
    case Operation::kInteractions: return "interactions";
    case Operation::kInterventional: return "interventional";
    case Operation::kInterventionalInteractions: return "interventional_interactions";
    case Operation::kBanzhaf: return "banzhaf";
    case Operation::kBanzhafInteractions: return "banzhaf_interactions";
    case Operation::kInterventionalBanzhaf: return "interventional_banzhaf";
    case Operation::kInterventionalBanzhafInteractions:
      return "interventional_banzhaf_interactions";
    case Operation::kSaabas: return "saabas";
  }
  return "unknown";
}

absl::StatusOr<Operation> ParseOperation(absl::string_view name) {
  for (int i = 0; i < kNumOperations; ++i) {
    if (name == OperationName(static_cast<Operation>(i))) return static_cast<Operation>(i);
  }
  std::string names;
  for (int i = 0; i < kNumOperations; ++i) {
    absl::StrAppend(&names, i == 0 ? "" : ", ", OperationName(static_cast<Operation>(i)));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown operation '", name, "': expected one of ", names));
}

absl::StatusOr<Operation> ExplainOperationOf(ExplainMethod method, Attribution attribution,
                                             bool interactions) {
  if (attribution == Attribution::kSaabas) {
    if (method == ExplainMethod::kInterventional) {
      return absl::InvalidArgumentError(
          "Saabas attributions are path-dependent only: they follow the trees' covers, not a "
          "background (ask for method path_dependent, or another attribution)");
    }
    if (interactions) {
      return absl::InvalidArgumentError(
          "Saabas attributions have no interaction values (ask for values, or another "
          "attribution)");
    }
    return Operation::kSaabas;
  }
  const bool banzhaf = attribution == Attribution::kBanzhaf;
  if (method == ExplainMethod::kInterventional) {
    if (banzhaf) {
      return interactions ? Operation::kInterventionalBanzhafInteractions
                          : Operation::kInterventionalBanzhaf;
    }
    return interactions ? Operation::kInterventionalInteractions : Operation::kInterventional;
  }
  if (banzhaf) return interactions ? Operation::kBanzhafInteractions : Operation::kBanzhaf;
  return interactions ? Operation::kInteractions : Operation::kExplain;
}

}  // namespace grove
