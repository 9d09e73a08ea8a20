#include "server/kserve_service.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
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
  ExplainChoice explain;
  std::vector<float> prediction;
  std::vector<float> shap;
};

absl::Status StartInfer(Runtime* runtime, grpc::CallbackServerContext* context,
                        const inference::ModelInferRequest* request,
                        inference::ModelInferResponse* response, UnaryCall* reactor) {
  const absl::Time deadline = DeadlineFromChrono(context->deadline());
  if (deadline <= absl::Now()) {
    return absl::DeadlineExceededError("the call's deadline expired before it was queued");
  }
  absl::StatusOr<int64_t> version = ParseKserveVersion(request->model_version());
  if (!version.ok()) return version.status();
  absl::StatusOr<ServablePtr> got = runtime->registry().Get(request->model_name(), *version);
  if (!got.ok()) return got.status();
  auto state = std::make_shared<InferState>();
  state->model = *std::move(got);
  const Forest& f = *state->model->forest;
  absl::StatusOr<KserveInput> input = ParseKserveInput(*state->model, *request);
  if (!input.ok()) return input.status();
  state->input = *std::move(input);
  absl::StatusOr<KserveOutputs> outputs = ParseKserveOutputs(*request);
  if (!outputs.ok()) return outputs.status();
  state->outputs = *std::move(outputs);
  if (state->outputs.shap) {
    absl::StatusOr<ExplainChoice> explain = ExplainChoiceFromKserve(*request);
    if (!explain.ok()) return explain.status();
    state->explain = *explain;
    if (absl::Status s = CheckExplainChoice(*state->model, state->explain, false); !s.ok()) {
      return s;
    }
  }
  const int64_t n = state->input.rows.rows;
  const int64_t pred_width = f.PredictionWidth();
  const int64_t shap_width = ExplainWidth(f, false);
  int64_t bytes = 0;
  if (state->outputs.prediction) bytes = SaturatingBytes(n, std::max<int64_t>(2, pred_width), 4);
  if (state->outputs.shap) bytes = SaturatingAdd(bytes, SaturatingBytes(n, shap_width, 4));
  if (absl::Status s = runtime->CheckResponseBytes(bytes, n); !s.ok()) return s;

  const Operation explain_op = ExplainOperation(state->explain, false);
  const Operation op = state->outputs.shap ? explain_op : Operation::kPredict;
  absl::StatusOr<serving::MemoryReservation> memory = runtime->ReserveMemory(
      *state->model, op, n, SaturatingAdd(bytes, SaturatingBytes(n, state->input.rows.cols, 4)));
  if (!memory.ok()) return memory.status();
  reactor->set_operation(op);
  const int count = (state->outputs.prediction ? 1 : 0) + (state->outputs.shap ? 1 : 0);
  auto call = std::make_shared<CallState>(
      count, deadline, [state, request, response, reactor](absl::Status status) {
        if (status.ok()) {
          const Forest& f = *state->model->forest;
          const int64_t n = state->input.rows.rows;
          response->set_model_name(state->model->name);
          response->set_model_version(std::to_string(state->model->version));
          response->set_id(request->id());
          for (const std::string& name : state->outputs.names) {
            auto* out = response->add_outputs();
            out->set_name(name);
            out->set_datatype("FP32");
            std::string* raw = response->add_raw_output_contents();
            if (name == kOutputTensor) {
              for (int64_t d : KservePredictionShape(f, n)) out->add_shape(d);
              EncodeKservePrediction(f, state->prediction.data(), n, raw);
            } else {
              for (int64_t d : KserveShapShape(f, n)) out->add_shape(d);
              EncodeFloats(state->shap.data(), static_cast<int64_t>(state->shap.size()), raw);
            }
          }
        }
        reactor->Reply(status);
      });
  call->Hold(*std::move(memory));
  reactor->set_call(call);
  std::vector<std::unique_ptr<ComputeTask>> tasks;
  auto metrics = runtime->metrics().Model(state->model->name);
  if (state->outputs.prediction) {
    state->prediction.resize(static_cast<size_t>(n * pred_width));
    auto t = std::make_unique<ComputeTask>();
    t->model = state->model;
    t->op = Operation::kPredict;
    t->kind = OutputKind::kPrediction;
    t->rows = state->input.rows;
    t->out = MakeMatrixView(state->prediction.data(), n, pred_width);
    t->call = call;
    metrics->op(Operation::kPredict).request_rows->Observe(static_cast<double>(n));
    tasks.push_back(std::move(t));
  }
  if (state->outputs.shap) {
    state->shap.resize(static_cast<size_t>(n * shap_width));
    auto t = std::make_unique<ComputeTask>();
    t->model = state->model;
    t->op = explain_op;
    t->output_space = state->explain.output_space;
    t->rows = state->input.rows;
    t->out = MakeMatrixView(state->shap.data(), n, shap_width);
    t->call = call;
    metrics->op(explain_op).request_rows->Observe(static_cast<double>(n));
    tasks.push_back(std::move(t));
  }
  SubmitAll(runtime, std::move(tasks), call);
  return absl::OkStatus();
}

}  // namespace

grpc::ServerUnaryReactor* KserveService::ServerLive(grpc::CallbackServerContext* context,
                                                    const inference::ServerLiveRequest* request,
                                                    inference::ServerLiveResponse* response) {
  auto* reactor = new UnaryCall(runtime_, "ServerLive");
  response->set_live(true);
  reactor->Reply(absl::OkStatus());
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::ServerReady(grpc::CallbackServerContext* context,
                                                     const inference::ServerReadyRequest* request,
                                                     inference::ServerReadyResponse* response) {
  auto* reactor = new UnaryCall(runtime_, "ServerReady");
  response->set_ready(runtime_->ServerReady());
  reactor->Reply(absl::OkStatus());
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::ModelReady(grpc::CallbackServerContext* context,
                                                    const inference::ModelReadyRequest* request,
                                                    inference::ModelReadyResponse* response) {
  auto* reactor = new UnaryCall(runtime_, "ModelReady");
  reactor->set_model_label(ModelLabel(runtime_, request->name()));
  absl::StatusOr<int64_t> version = ParseKserveVersion(request->version());
  if (!version.ok()) {
    reactor->Reply(version.status());
    return reactor;
  }
  absl::StatusOr<ServablePtr> model = runtime_->registry().Get(request->name(), *version);
  if (absl::IsNotFound(model.status())) {
    reactor->Reply(model.status());
    return reactor;
  }
  response->set_ready(model.ok() && !runtime_->shutting_down());
  reactor->Reply(absl::OkStatus());
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::ServerMetadata(
    grpc::CallbackServerContext* context, const inference::ServerMetadataRequest* request,
    inference::ServerMetadataResponse* response) {
  auto* reactor = new UnaryCall(runtime_, "ServerMetadata");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kInfer)) return reactor;
  response->set_name("grove");
  response->set_version(GROVE_VERSION);
  reactor->Reply(absl::OkStatus());
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::ModelMetadata(
    grpc::CallbackServerContext* context, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  auto* reactor = new UnaryCall(runtime_, "ModelMetadata");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kInfer)) return reactor;
  reactor->set_model_label(ModelLabel(runtime_, request->name()));
  absl::StatusOr<int64_t> version = ParseKserveVersion(request->version());
  if (!version.ok()) {
    reactor->Reply(version.status());
    return reactor;
  }
  absl::StatusOr<ServablePtr> model = runtime_->registry().Get(request->name(), *version);
  absl::StatusOr<registry::ModelStatus> status = runtime_->registry().GetStatus(request->name());
  if (!model.ok() || !status.ok()) {
    reactor->Reply(model.ok() ? status.status() : model.status());
    return reactor;
  }
  FillKserveModelMetadata(**model, *status, response);
  reactor->Reply(absl::OkStatus());
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::ModelInfer(grpc::CallbackServerContext* context,
                                                    const inference::ModelInferRequest* request,
                                                    inference::ModelInferResponse* response) {
  auto* reactor = new UnaryCall(runtime_, "ModelInfer");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kInfer)) return reactor;
  reactor->set_model_label(ModelLabel(runtime_, request->model_name()));
  if (absl::Status s = StartInfer(runtime_, context, request, response, reactor); !s.ok()) {
    reactor->Reply(s);
  }
  return reactor;
}

}  // namespace grove::server
