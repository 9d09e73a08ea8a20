#include "core/model/outputs.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace grove {

const char* OutputKindName(OutputKind kind) {
  switch (kind) {
    case OutputKind::kMargin: return "margin";
    case OutputKind::kPrediction: return "prediction";
    case OutputKind::kLeaf: return "leaf";
  }
  return "unknown";
}

absl::StatusOr<OutputKind> ParseOutputKind(absl::string_view name) {
  for (OutputKind k : {OutputKind::kPrediction, OutputKind::kMargin, OutputKind::kLeaf}) {
    if (name == OutputKindName(k)) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown output kind '", name, "': expected prediction, margin or leaf"));
}

const char* OutputSpaceName(OutputSpace space) {
  switch (space) {
    case OutputSpace::kMargin: return "margin";
    case OutputSpace::kProbability: return "probability";
    case OutputSpace::kProbabilityLinearized: return "probability_linearized";
  }
  return "unknown";
}

absl::StatusOr<OutputSpace> ParseOutputSpace(absl::string_view name) {
  for (OutputSpace s : {OutputSpace::kMargin, OutputSpace::kProbability,
                        OutputSpace::kProbabilityLinearized}) {
    if (name == OutputSpaceName(s)) return s;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown output space '", name, "': expected margin, probability or probability_linearized"));
}

const char* ExplainMethodName(ExplainMethod method) {
  return method == ExplainMethod::kInterventional ? "interventional" : "path_dependent";
}

absl::StatusOr<ExplainMethod> ParseExplainMethod(absl::string_view name) {
  for (ExplainMethod m : {ExplainMethod::kPathDependent, ExplainMethod::kInterventional}) {
    if (name == ExplainMethodName(m)) return m;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown explanation method '", name, "': expected path_dependent or interventional"));
}

}  // namespace grove
