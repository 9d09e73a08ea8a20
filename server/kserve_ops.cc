#include "server/kserve_ops.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/explain/explain.h"
#include "core/predict/predict.h"
#include "server/call.h"
#include "server/convert.h"

#ifndef GROVE_VERSION
#define GROVE_VERSION "0.1.0"
#endif

namespace grove::server {
namespace {

using registry::Operation;
using registry::ServablePtr;

struct InferState {
  ServablePtr model;
  KserveInput input;
  KserveOutputs outputs;
  PredictionLayout layout;  // of output__0
  std::vector<float> prediction;
  std::vector<float> shap;
};

void FillInferResponse(const InferState& state, const inference::ModelInferRequest& request,
                       inference::ModelInferResponse* response) {
  const Forest& f = *state.model->forest;
  const int64_t n = state.input.rows.rows;
  response->set_model_name(state.model->name);
  response->set_model_version(std::to_string(state.model->version));
  response->set_id(request.id());
  for (const std::string& name : state.outputs.names) {
    auto* out = response->add_outputs();
    out->set_name(name);
    out->set_datatype("FP32");
    std::string* raw = response->add_raw_output_contents();
    if (name == kOutputTensor) {
      EncodeKservePrediction(f, state.layout, state.prediction.data(), n, raw);
      out->add_shape(n);
      out->add_shape(state.layout.width);
      if (state.outputs.class_count > 0) {  // Triton's classification extension
        const std::string values = std::move(*raw);
        EncodeKserveClasses(reinterpret_cast<const float*>(values.data()), n, state.layout.width,
                            state.outputs.class_count, raw);
        out->set_datatype("BYTES");
        out->set_shape(1, std::min(state.outputs.class_count, state.layout.width));
      }
    } else {
      for (int64_t d : KserveShapShape(f, n)) out->add_shape(d);
      EncodeFloats(state.shap.data(), static_cast<int64_t>(state.shap.size()), raw);
    }
  }
}

// One task of the call: `op` of every input row into `out` (n x width floats, sized here).
std::unique_ptr<ComputeTask> MakeTask(Runtime* runtime, const std::shared_ptr<InferState>& state,
                                      Operation op, int64_t width, std::vector<float>* out,
                                      const std::shared_ptr<CallState>& call) {
  const int64_t n = state->input.rows.rows;
  out->resize(static_cast<size_t>(n * width));
  auto t = std::make_unique<ComputeTask>();
  t->model = state->model;
  t->op = op;
  if (op == Operation::kPredict) t->kind = OutputKind::kPrediction;
  t->rows = state->input.rows;
  t->out = MakeMatrixView(out->data(), n, width);
  t->call = call;
  runtime->metrics().Model(state->model->name)->op(op).request_rows->Observe(static_cast<double>(n));
  return t;
}

}  // namespace

void KserveServerMetadata(inference::ServerMetadataResponse* response) {
  response->set_name("grove");
  response->set_version(GROVE_VERSION);
}

absl::Status KserveModelReady(Runtime* runtime, const inference::ModelReadyRequest& request,
                              inference::ModelReadyResponse* response) {
  absl::StatusOr<int64_t> version = ParseKserveVersion(request.version());
  if (!version.ok()) return version.status();
  absl::StatusOr<ServablePtr> model = runtime->registry().Get(request.name(), *version);
  if (absl::IsNotFound(model.status())) return model.status();
  response->set_ready(model.ok() && !runtime->shutting_down());
  return absl::OkStatus();
}

absl::Status KserveModelMetadata(Runtime* runtime, const inference::ModelMetadataRequest& request,
                                 inference::ModelMetadataResponse* response) {
  absl::StatusOr<int64_t> version = ParseKserveVersion(request.version());
  if (!version.ok()) return version.status();
  absl::StatusOr<ServablePtr> model = runtime->registry().Get(request.name(), *version);
  if (!model.ok()) return model.status();
  absl::StatusOr<registry::ModelStatus> status = runtime->registry().GetStatus(request.name());
  if (!status.ok()) return status.status();
  FillKserveModelMetadata(**model, *status, response);
  return absl::OkStatus();
}

absl::Status StartKserveInfer(Runtime* runtime, const inference::ModelInferRequest& request,
                              inference::ModelInferResponse* response, absl::Time deadline,
                              const InferStarted& started,
                              std::function<void(absl::Status)> done) {
  if (deadline <= absl::Now()) {
    return absl::DeadlineExceededError("the call's deadline expired before it was queued");
  }
  absl::StatusOr<int64_t> version = ParseKserveVersion(request.model_version());
  if (!version.ok()) return version.status();
  absl::StatusOr<ServablePtr> got = runtime->registry().Get(request.model_name(), *version);
  if (!got.ok()) return got.status();
  auto state = std::make_shared<InferState>();
  state->model = *std::move(got);
  const Forest& f = *state->model->forest;
  absl::StatusOr<KserveInput> input = ParseKserveInput(*state->model, request);
  if (!input.ok()) return input.status();
  state->input = *std::move(input);
  absl::StatusOr<KserveOutputs> outputs = ParseKserveOutputs(request);
  if (!outputs.ok()) return outputs.status();
  state->outputs = *std::move(outputs);
  absl::StatusOr<PredictionLayout> layout = ResolvePredictionLayout(f, state->outputs);
  if (!layout.ok()) return layout.status();
  state->layout = *layout;
  if (state->outputs.shap) {
    if (absl::Status s = CheckExplainAvailable(*state->model); !s.ok()) return s;
  }
  const int64_t n = state->input.rows.rows;
  const int64_t pred_width = f.PredictionWidth();
  const int64_t shap_width = ExplainWidth(f, false);
  int64_t bytes = 0;
  if (state->outputs.prediction) bytes = SaturatingBytes(n, std::max<int64_t>(2, pred_width), 4);
  if (state->outputs.class_count > 0) {  // "value:index" strings: at most 64 bytes each ("%f")
    bytes = SaturatingAdd(
        bytes, SaturatingBytes(n, std::min(state->outputs.class_count, state->layout.width), 64));
  }
  if (state->outputs.shap) bytes = SaturatingAdd(bytes, SaturatingBytes(n, shap_width, 4));
  if (absl::Status s = runtime->CheckResponseBytes(bytes, n); !s.ok()) return s;

  const Operation op = state->outputs.shap ? Operation::kExplain : Operation::kPredict;
  absl::StatusOr<serving::MemoryReservation> memory = runtime->ReserveMemory(
      *state->model, op, n, SaturatingAdd(bytes, SaturatingBytes(n, state->input.rows.cols, 4)));
  if (!memory.ok()) return memory.status();
  const int count = (state->outputs.prediction ? 1 : 0) + (state->outputs.shap ? 1 : 0);
  auto call = std::make_shared<CallState>(
      count, deadline, [state, &request, response, done = std::move(done)](absl::Status status) {
        if (status.ok()) FillInferResponse(*state, request, response);
        done(status);
      });
  call->Hold(*std::move(memory));
  started(call, op);
  std::vector<std::unique_ptr<ComputeTask>> tasks;
  if (state->outputs.prediction) {
    tasks.push_back(
        MakeTask(runtime, state, Operation::kPredict, pred_width, &state->prediction, call));
  }
  if (state->outputs.shap) {
    tasks.push_back(MakeTask(runtime, state, Operation::kExplain, shap_width, &state->shap, call));
  }
  SubmitAll(runtime, std::move(tasks), call);
  return absl::OkStatus();
}

}  // namespace grove::server
