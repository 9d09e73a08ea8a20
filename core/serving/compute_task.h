// ComputeTask: one unit of compute, some rows of one call for one operation on one pinned model
// version. `rows` and `out` point into memory the call keeps alive until its CallState is done.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/time/time.h"
#include "core/common/rows.h"
#include "core/registry/model_registry.h"
#include "core/servable/operation.h"
#include "core/servable/run_params.h"
#include "core/serving/call_state.h"

namespace grove::serving {

struct ComputeTask {
  registry::ModelVersionPtr model;
  Operation op = Operation::kPredict;
  RunParams params;
  RowsView rows;
  MatrixView<float> out;  // rows.rows x width, stride == cols
  std::shared_ptr<CallState> call;
  // Set by admission: when, and how long it expected the task to take (zero: no estimate yet).
  absl::Time admitted;
  absl::Duration expected;

  int64_t size() const { return rows.rows; }
  absl::Time deadline() const { return call->deadline(); }
  bool cancelled() const { return call->cancelled(); }
};

}  // namespace grove::serving
