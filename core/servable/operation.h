// Operation: what a call asks of a model's Servable. Each operation has its own queue and measured
// rate per model in the serving core (interventional SHAP costs about background rows times what
// path-dependent SHAP does per row), its own batching options in config.json and its own metrics.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model/outputs.h"

namespace grove {

enum class Operation : int {
  kPredict = 0,         // predictions (OutputKind)
  kExplain = 1,         // path-dependent SHAP values
  kInteractions = 2,    // path-dependent SHAP interaction values
  kInterventional = 3,  // interventional SHAP values over the background (OutputSpace)
  kInterventionalInteractions = 4,  // interventional Shapley interaction values (OutputSpace)
  // Banzhaf values (core/explain/attribution.h) of the same value functions, laid out as SHAP
  // values; not additive.
  kBanzhaf = 5,                     // path-dependent Banzhaf values
  kBanzhafInteractions = 6,         // path-dependent Banzhaf interaction values
  kInterventionalBanzhaf = 7,       // interventional Banzhaf values (OutputSpace)
  kInterventionalBanzhafInteractions = 8,  // interventional Banzhaf interaction values
  // Saabas attributions (core/explain/saabas/saabas.h), laid out as SHAP values; path-dependent,
  // no interaction values.
  kSaabas = 9,
};
inline constexpr int kNumOperations = 10;
// "predict", "explain", "interactions", "interventional", "interventional_interactions",
// "banzhaf", "banzhaf_interactions", "interventional_banzhaf",
// "interventional_banzhaf_interactions", "saabas".
const char* OperationName(Operation op);
// The names above; INVALID_ARGUMENT naming the accepted ones otherwise.
absl::StatusOr<Operation> ParseOperation(absl::string_view name);

// The explanation operation of a request: `method`'s value function, `attribution`'s values,
// interaction values or values. The one mapping of groved's protocols, the CLI and groveml:
// INVALID_ARGUMENT saying why for a combination no operation computes.
absl::StatusOr<Operation> ExplainOperationOf(ExplainMethod method, Attribution attribution,
                                             bool interactions);

}  // namespace grove
