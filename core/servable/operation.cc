#include "core/servable/operation.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace grove {

const char* OperationName(Operation op) {
  switch (op) {
    case Operation::kPredict: return "predict";
    case Operation::kExplain: return "explain";
    case Operation::kInteractions: return "interactions";
    case Operation::kInterventional: return "interventional";
    case Operation::kInterventionalInteractions: return "interventional_interactions";
  }
  return "unknown";
}

absl::StatusOr<Operation> ParseOperation(absl::string_view name) {
  for (int i = 0; i < kNumOperations; ++i) {
    if (name == OperationName(static_cast<Operation>(i))) return static_cast<Operation>(i);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown operation '", name,
      "': expected predict, explain, interactions, interventional or interventional_interactions"));
}

}  // namespace grove
