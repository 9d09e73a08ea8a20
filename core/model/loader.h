// Model loaders: XGBoost JSON / UBJSON (1.x to 3.4), LightGBM text (v3/v4), CatBoost JSON
// (save_model(format="json"), numeric features: oblivious and non-symmetric trees) and Treelite
// checkpoints (serialization v4, Treelite 4.x) into a Forest.
//
// Every loader validates through BuildForest and never crashes or reads out of bounds on any input:
// malformed input is INVALID_ARGUMENT naming the source (file), tree and node where known; a model
// kind Grove does not serve (gblinear, ...) is UNIMPLEMENTED with a clear message; an unreadable file
// is NOT_FOUND or PERMISSION_DENIED, and anything but a regular file (a directory; a FIFO or a
// device, never opened for a blocking read) INVALID_ARGUMENT. Thread-safe (no shared state).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/model/forest.h"

namespace grove {

// Reads `path` and dispatches on its content (UBJSON starts with '{' followed by a UBJSON type
// marker, JSON with '{' and text, LightGBM with "tree\n" / "version=", a Treelite checkpoint with
// the little-endian int32 major version 4 (3: refused, naming it) and two small int32s), falling
// back on the extension.
// A JSON document is CatBoost's when a top-level key before any "learner" is one CatBoost writes
// ("features_info", "oblivious_trees", "scale_and_bias", "ctr_data", "model_info"), XGBoost's
// otherwise.
absl::StatusOr<ForestPtr> LoadModelFile(const std::string& path);

// Parses a model held in memory; `source` names it in error messages.
absl::StatusOr<ForestPtr> LoadModelBytes(std::string_view bytes, std::string source);
absl::StatusOr<ForestPtr> LoadXgboostJson(std::string_view text, std::string source);
absl::StatusOr<ForestPtr> LoadXgboostUbjson(std::string_view bytes, std::string source);
absl::StatusOr<ForestPtr> LoadLightgbmText(std::string_view text, std::string source);

// CatBoost's JSON export. Float features only: a one-hot split holds the CityHash of a category
// string and a CTR split CatBoost's target statistics over hashed categories, neither of which Grove
// can evaluate exactly from numeric inputs, so both are UNIMPLEMENTED naming the tree, the split
// and the feature, as are text and embedding features and losses whose prediction transform Grove
// does not know. CatBoost's native .cbm is not read: it is a FlatBuffers schema internal to
// CatBoost (catboost/libs/model/flatbuffers/model.fbs) that changes with its releases and embeds
// the CTR tables; save the model as JSON instead (docs/formats.md).
absl::StatusOr<ForestPtr> LoadCatboostJson(std::string_view text, std::string source);

// A Treelite checkpoint (treelite.Model.serialize, serialization format v4: Treelite 4.x; what
// nvForest and Triton's FIL backend read as checkpoint.tl), whichever library Treelite imported it
// from (XGBoost, LightGBM, scikit-learn) or groveml.Model.from_sklearn wrote. Numerical tests with
// <, <=, > and >=, categorical tests, scalar and vector leaves, tree averaging (random forests),
// base scores, multi-class and multi-target outputs. UNIMPLEMENTED, naming why: the == operator,
// isolation forests (exponential_standard_ratio), a multi-target softmax or targets with different
// class counts, nodes without data_count or sum_hess (the covers SHAP needs), v3 checkpoints
// (Treelite 3.9: serialize them again with Treelite 4).
absl::StatusOr<ForestPtr> LoadTreeliteCheckpoint(std::string_view bytes, std::string source);

}  // namespace grove
