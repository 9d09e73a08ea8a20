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

OutputKind ExplainedOutputKind(OutputSpace space) {
  return space == OutputSpace::kMargin ? OutputKind::kMargin : OutputKind::kPrediction;
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

absl::Status CheckOutputSpace(const Forest& forest, OutputSpace space) {
  const Link link = forest.objective.link;
  if (space != OutputSpace::kMargin && link == Link::kArgmax) {
    return absl::InvalidArgumentError(absl::StrCat(
        "output space ", OutputSpaceName(space), ": objective '",
        forest.objective.name, "' predicts a class index, which has no probability to explain; "
        "explain the margin (or train multi:softprob)"));
  }
  if (space == OutputSpace::kProbabilityLinearized && link == Link::kSoftmax) {
    return absl::InvalidArgumentError(
        "output space probability_linearized rescales each output by its own margin change, "
        "which does not add up under softmax (an output's probability moves with the other "
        "margins); use the exact output space 'probability'");
  }
  return absl::OkStatus();
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

const char* AttributionName(Attribution attribution) {
  switch (attribution) {
    case Attribution::kShapley: return "shapley";
    case Attribution::kBanzhaf: return "banzhaf";
    case Attribution::kSaabas: return "saabas";
  }
  return "unknown";
}

std::string AttributionNames() {
  constexpr size_t n = sizeof(kAttributions) / sizeof(kAttributions[0]);
  std::string names;
  for (size_t i = 0; i < n; ++i) {
    absl::StrAppend(&names, i == 0 ? "" : i + 1 == n ? " or " : ", ",
                    AttributionName(kAttributions[i]));
  }
  return names;
}

absl::StatusOr<Attribution> ParseAttribution(absl::string_view name) {
  for (Attribution a : kAttributions) {
    if (name == AttributionName(a)) return a;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown attribution '", name, "': expected ", AttributionNames()));
}

}  // namespace grove
