#include "core/serving/engine_runner.h"

namespace grove::serving {

absl::Status ServableEngineRunner::Run(const ComputeTask& t, RowsView rows, MatrixView<float> out,
                                       RunInfo* info) {
  return t.model->servable->Run(t.op, t.params, rows, out, info);
}

}  // namespace grove::serving
