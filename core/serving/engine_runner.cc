#include "core/serving/engine_runner.h"

#include "core/explain/explain.h"
#include "core/predict/predict.h"

namespace grove::serving {

absl::Status ServableEngineRunner::Run(const ComputeTask& t, RowsView rows, MatrixView<float> out,
                                       RunInfo* info) {
  if (t.op == Operation::kPredict) {
    PredictOptions o;
    o.kind = t.kind;
    o.iteration_begin = t.iteration_begin;
    o.iteration_end = t.iteration_end;
    return t.model->predict->Predict(rows, o, out, info);
  }
  if (t.op == Operation::kInterventional) {
    if (t.model->interventional == nullptr) return t.model->interventional_status;
    InterventionalOptions o;
    o.output_space = t.output_space;
    o.iteration_begin = t.iteration_begin;
    o.iteration_end = t.iteration_end;
    return t.model->interventional->Explain(rows, o, out, info);
  }
  if (t.model->explain == nullptr) {
    return t.model->explain_status.ok()
               ? absl::FailedPreconditionError("the model has no explanation engine")
               : t.model->explain_status;
  }
  ExplainOptions o;
  o.interactions = t.op == Operation::kInteractions;
  o.iteration_begin = t.iteration_begin;
  o.iteration_end = t.iteration_end;
  return t.model->explain->Explain(rows, o, out, info);
}

}  // namespace grove::serving
