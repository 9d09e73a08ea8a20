// What the columns of a result are and how many rows an engine call takes: the names `grove
// --output-header`, groved's metadata and groveml give a result's columns, and the chunk size the
// CLI and groveml stream rows in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/forest.h"
#include "core/model/input_schema.h"  // FeatureNamesOrDefault
#include "core/model/outputs.h"

namespace grove {

// Rows per engine call for rows of `in_cols` values and results of `out_cols` values: about 8M
// values per buffer, between 1 and 262144 rows.
int64_t AutoChunkRows(int64_t in_cols, int64_t out_cols);

// A categorical feature whose categories the model file records (Forest::categories).
struct NamedCategories {
  int feature = 0;
  std::string name;                      // FeatureNamesOrDefault's
  const FeatureCategories* categories = nullptr;  // into the forest, which must outlive this
};
// Every feature with recorded categories, in feature order (none for most models): what metadata
// lists and clients recode category columns by.
std::vector<NamedCategories> RecordedCategories(const Forest& forest);

// What the columns of a result are (the output header of --header / --output-header).
struct ResultColumns {
  std::vector<std::string> feature_names;  // FeatureNamesOrDefault
  // Explain: the names of grouped values' players (feature groups), which name the columns in
  // place of feature_names; empty for the model's features.
  std::vector<std::string> groups;
  int num_outputs = 1;                     // margins per row (K)
  bool explain = false;                    // SHAP values; otherwise predictions
  bool interactions = false;               // explain: SHAP interaction values
  bool residuals = false;                  // explain: K residual columns after the values
  OutputKind kind = OutputKind::kPrediction;  // predict
  int64_t width = 0;                       // predict: values per row
  int top_k = 0;                           // explain: > 0, the top-k pairs instead (TopKFeatures)
};
// Names of a result's columns. Predict: `prediction` / `margin` for one column, `prediction_J` /
// `margin_J` for several, `leaf_J` for the J-th tree of the range. Explain: the feature (or group)
// names then `bias` (pred_contribs order); interactions `A*B` for each pair (pred_interactions
// order, `bias` last); with K > 1 outputs every name is prefixed `outK.`. Residuals: `residual`
// per output after all of them (`outK.residual` with K > 1). Top-k (explain with top_k > 0, k
// capped at the features or groups): `topI_feature`, `topI_value` for I = 1..k, prefixed `outK.`
// likewise.
std::vector<std::string> ResultColumnNames(const ResultColumns& columns);

}  // namespace grove
