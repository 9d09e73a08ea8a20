// Shared by the request converter fuzz targets: the models requests are converted for (a binary
// XGBoost model, a multiclass one and a LightGBM one, whose float64 rows convert differently), each
// with the default limits and with the largest row limit a config.json may set, so that shape
// products near the bounds are exercised.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "google/protobuf/stubs/logging.h"
#include "core/common/rows.h"
#include "core/model/loader.h"
#include "core/registry/model_config.h"
#include "core/registry/model_registry.h"

namespace grove::fuzz {

inline const std::vector<registry::ServablePtr>& RequestModels() {
  static const std::vector<registry::ServablePtr>* models = [] {
    // Invalid UTF-8 in string fields is a parse failure the fuzzer meets all the time; Protobuf's
    // log line for each would drown the run.
    google::protobuf::SetLogHandler(nullptr);
    auto* out = new std::vector<registry::ServablePtr>();
    const std::string root = GROVE_SOURCE_DIR;
    for (const char* file : {"/examples/models/demo/1/model.json",
                             "/tests/golden/xgb_multiclass3/model.json",
                             "/tests/golden/lgb_zero_as_missing/model.txt"}) {
      absl::StatusOr<ForestPtr> forest = LoadModelFile(root + file);
      if (!forest.ok()) std::abort();  // the fuzzer needs its models
      for (int64_t max_rows : {int64_t{65536}, registry::kMaxRequestRows}) {
        auto m = std::make_shared<registry::ServableModel>();
        m->name = "fuzz";
        m->version = 1;
        m->forest = *forest;
        registry::ModelConfig config;
        config.max_request_rows = max_rows;
        m->config = std::make_shared<const registry::ModelConfig>(config);
        out->push_back(std::move(m));
      }
    }
    return out;
  }();
  return *models;
}

// Aborts unless `s` is OK or one of the codes a request check may answer.
inline void CheckRequestStatus(const absl::Status& s) {
  if (s.ok() || s.code() == absl::StatusCode::kInvalidArgument ||
      s.code() == absl::StatusCode::kFailedPrecondition) {
    return;
  }
  std::abort();
}

// Reads every value of `rows` (a view the converter promised is rows x cols): an out-of-bounds
// view is a sanitizer report.
inline void TouchRows(const RowsView& rows, int64_t num_features) {
  if (rows.rows <= 0 || rows.cols != num_features) std::abort();
  double sum = 0;
  for (int64_t r = 0; r < rows.rows; ++r) {
    for (int64_t c = 0; c < rows.cols; ++c) sum += rows.At(r, c);
  }
  if (sum == 12345.678) std::abort();  // keeps `sum` alive; never true in practice
}

}  // namespace grove::fuzz
