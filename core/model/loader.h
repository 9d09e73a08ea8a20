// Model loaders: XGBoost JSON / UBJSON (1.x to 3.4) and LightGBM text (v3/v4) into a Forest.
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
// marker, JSON with '{' and text, LightGBM with "tree\n" / "version="), falling back on the extension.
absl::StatusOr<ForestPtr> LoadModelFile(const std::string& path);

// Parses a model held in memory; `source` names it in error messages.
absl::StatusOr<ForestPtr> LoadModelBytes(std::string_view bytes, std::string source);
absl::StatusOr<ForestPtr> LoadXgboostJson(std::string_view text, std::string source);
absl::StatusOr<ForestPtr> LoadXgboostUbjson(std::string_view bytes, std::string source);
absl::StatusOr<ForestPtr> LoadLightgbmText(std::string_view text, std::string source);

}  // namespace grove
