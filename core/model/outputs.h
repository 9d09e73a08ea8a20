// What a call asks a model for, shared by the engines and every layer above them: the kind of
// prediction, the space SHAP values are taken in, and how expectations are taken. Names are the
// ones the protocols, the CLI and groveml use; each parser answers INVALID_ARGUMENT naming the
// accepted names.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model/forest.h"

namespace grove {

enum class OutputKind : uint8_t {
  kMargin,      // raw score per output (base margin included)
  kPrediction,  // transformed: probabilities, exp(margin), class index for multi:softmax, ...
  kLeaf,        // the library's leaf id reached in each tree in range (XGBoost node id, LightGBM leaf)
};
// "margin", "prediction", "leaf".
const char* OutputKindName(OutputKind kind);
absl::StatusOr<OutputKind> ParseOutputKind(absl::string_view name);

enum class OutputSpace : uint8_t {
  kMargin,                 // the raw score of every output
  kProbability,            // the link of the margin (sigmoid, softmax, exp, ...), exact Shapley
  kProbabilityLinearized,  // shap's model_output="probability" (per-pair rescaled margin values)
};
// "margin", "probability", "probability_linearized".
const char* OutputSpaceName(OutputSpace space);
absl::StatusOr<OutputSpace> ParseOutputSpace(absl::string_view name);
// An output space the model's link supports (kProbability*: not XGBoost multi:softmax, whose
// output is a class index; kProbabilityLinearized: not softmax, whose per-output rescaling is not
// additive). INVALID_ARGUMENT naming why otherwise.
absl::Status CheckOutputSpace(const Forest& forest, OutputSpace space);
// The prediction an explanation in `space` adds up to (what its residuals are taken against): the
// margin for kMargin, the link's output (kPrediction) for the probability spaces.
OutputKind ExplainedOutputKind(OutputSpace space);

// How SHAP expectations are taken: over the training covers stored in the trees (path-dependent
// TreeSHAP) or over a background data set (interventional).
enum class ExplainMethod : uint8_t { kPathDependent, kInterventional };
// "path_dependent", "interventional".
const char* ExplainMethodName(ExplainMethod method);
absl::StatusOr<ExplainMethod> ParseExplainMethod(absl::string_view name);

// Which values of the method's value function explain a row: Shapley values (SHAP, additive),
// Banzhaf values (not additive; core/explain/attribution.h defines both) or Saabas attributions
// (each split on the row's path credits its feature with the change of the expected value;
// additive; path-dependent values only, core/explain/saabas/saabas.h).
enum class Attribution : uint8_t { kShapley = 0, kBanzhaf = 1, kSaabas = 2 };
// Every attribution, in the order their names are listed: the one name table that the protocols,
// the CLI and groveml take the accepted names from.
inline constexpr Attribution kAttributions[] = {Attribution::kShapley, Attribution::kBanzhaf,
                                                Attribution::kSaabas};
// "shapley", "banzhaf", "saabas".
const char* AttributionName(Attribution attribution);
// The names of kAttributions joined by ", " with " or " before the last: "shapley, banzhaf or
// saabas" (ParseAttribution's message, the CLI's help).
std::string AttributionNames();
absl::StatusOr<Attribution> ParseAttribution(absl::string_view name);

}  // namespace grove
