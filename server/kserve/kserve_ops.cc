#include "server/kserve/kserve_ops.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/servable/residuals.h"
#include "server/call.h"
#include "server/convert.h"
#include "server/kserve/kserve_convert.h"
#include "nlohmann/json.hpp"

#ifndef GROVE_VERSION
#define GROVE_VERSION "0.1.0"
#endif

namespace grove::server {
namespace {

using registry::ModelVersionPtr;

// An output written into shared memory: its range, and whether the engine computes straight into
// it (the values need no conversion and the range is float-aligned) or into the state's vector,
// converted into the range when the call is answered.
struct SharedOutput {
  serving::SharedMemorySpan span;
  bool direct = false;
};

struct InferState {
  ModelVersionPtr model;
  KserveInput input;
  KserveOutputs outputs;
  ExplainChoice explain;    // treeshap_output's method and output space
  FeatureGroupsPtr groups;  // treeshap_output's players: null, the model's features
  PredictionLayout layout;  // of output__0
  std::vector<float> prediction;
  std::vector<float> shap;
  SharedOutput prediction_shm;  // span empty: output__0 goes in the response
  SharedOutput shap_shm;
  // With outputs.residuals: the model's output of the rows (margin, or transformed in the
  // probability spaces), n x K, and the residuals computed from it when the call is answered.
  std::vector<float> model_outputs;
  std::vector<float> residuals;
};

bool FloatAligned(const char* p) { return reinterpret_cast<uintptr_t>(p) % alignof(float) == 0; }

// Resolves an output's shared memory range: at least `bytes` bytes, sharing none with the rows'
// range or with `other` (the other output's). The engine writes it directly when `direct_layout`.
absl::StatusOr<SharedOutput> ResolveOutput(const serving::SharedMemoryAccess& shared_memory,
                                           const std::string& name,
                                           const SharedMemoryRef& ref, int64_t bytes,
                                           bool direct_layout,
                                           const serving::SharedMemorySpan& rows,
                                           const serving::SharedMemorySpan& other) {
  const std::string what = absl::StrCat("output '", name, "'");
  absl::StatusOr<serving::SharedMemorySpan> span =
      shared_memory.Get(ref.region, ref.offset, ref.byte_size, what);
  if (!span.ok()) return span.status();
  if (span->byte_size < static_cast<uint64_t>(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": shared_memory_byte_size ", span->byte_size, " is smaller than the ", bytes,
        " bytes of the output"));
  }
  if (span->Overlaps(rows) || span->Overlaps(other)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": its shared memory range shares bytes with the ",
        span->Overlaps(rows) ? "input's" : "other output's",
        " range; each tensor needs bytes of its own"));
  }
  span->byte_size = static_cast<uint64_t>(bytes);  // the bytes written
  if (absl::Status s = span->Back(what); !s.ok()) return s;
  SharedOutput out;
  out.direct = direct_layout && FloatAligned(span->data);
  out.span = *std::move(span);
  return out;
}

void FillInferResponse(const InferState& state, const inference::ModelInferRequest& request,
                       inference::ModelInferResponse* response) {
  const Forest& f = state.model->forest();
  const int64_t n = state.input.rows.rows;
  response->set_model_name(state.model->name);
  response->set_model_version(std::to_string(state.model->version));
  response->set_id(request.id());
  for (const std::string& name : state.outputs.names) {
    auto* out = response->add_outputs();
    out->set_name(name);
    out->set_datatype("FP32");
    // One entry per output, empty for an output in shared memory (as Triton answers).
    std::string* raw = response->add_raw_output_contents();
    if (name == kOutputTensor && state.prediction_shm.span) {
      if (!state.prediction_shm.direct) {
        WriteKservePrediction(f, state.layout, state.prediction.data(), n,
                              state.prediction_shm.span.data);
      }
      out->add_shape(n);
      out->add_shape(state.layout.width);
    } else if (name == kOutputTensor) {
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
      for (int64_t d : KserveShapShape(f, n, state.groups.get())) out->add_shape(d);
      if (state.groups != nullptr) {
        (*out->mutable_parameters())["groups"].set_string_param(
            KserveGroupsParameter(*state.groups));
      }
      if (!state.shap_shm.span) {
        EncodeFloats(state.shap.data(), static_cast<int64_t>(state.shap.size()), raw);
      } else if (!state.shap_shm.direct) {
        std::memcpy(state.shap_shm.span.data, state.shap.data(),
                    state.shap.size() * sizeof(float));
      }
    }
  }
  if (state.outputs.residuals) {
    auto* out = response->add_outputs();
    out->set_name(kResidualsTensor);
    out->set_datatype("FP32");
    out->add_shape(n);
    out->add_shape(f.num_outputs);
    EncodeFloats(state.residuals.data(), static_cast<int64_t>(state.residuals.size()),
                 response->add_raw_output_contents());
    (*response->mutable_parameters())[kResidualArithmeticParameter].set_string_param(
        kResidualArithmetic);
  }
}

// The residuals of the call's explanation (treeshap_output's values, wherever the engine wrote
// them) against state->model_outputs; counted in `op`'s metrics.
void ComputeResiduals(InferState* state, Metrics::OpMetrics* op) {
  const Forest& f = state->model->forest();
  const int64_t n = state->input.rows.rows;
  const float* values = state->shap_shm.direct
                            ? reinterpret_cast<const float*>(state->shap_shm.span.data)
                            : state->shap.data();
  state->residuals.resize(static_cast<size_t>(n * f.num_outputs));
  // The players of the call: with groups, each output's block is its groups' values and bias.
  const int64_t exceeded = AdditivityResiduals(values, n, f.num_outputs,
                                               NumPlayers(f.num_features, state->groups.get()),
                                               state->model_outputs.data(),
                                               state->residuals.data());
  op->residual_rows->Increment(static_cast<double>(n));
  op->residual_exceeded_rows->Increment(static_cast<double>(exceeded));
}

// OK unless a shared memory range the call read its rows from or wrote its results to lost pages
// while the call ran (its owner shrank the object): then the answer is not valid.
absl::Status CheckSharedMemoryIntact(const InferState& state) {
  if (absl::Status s = state.input.span.CheckIntact("input"); !s.ok()) return s;
  // The outputs' names are put together only for a call that has shared memory outputs.
  for (const auto& [span, name] : {std::pair{&state.prediction_shm.span, kOutputTensor},
                                   std::pair{&state.shap_shm.span, kShapTensor}}) {
    if (!*span) continue;
    if (absl::Status s = span->CheckIntact(absl::StrCat("output '", name, "'")); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// One task of the call: `op` of every input row into the output's shared memory range when the
// engine may write it directly, otherwise into `out` (n x width floats, sized here).
std::unique_ptr<ComputeTask> MakeTask(Runtime* runtime, const std::shared_ptr<InferState>& state,
                                      Operation op, int64_t width, std::vector<float>* out,
                                      const SharedOutput& shm,
                                      const std::shared_ptr<CallState>& call) {
  const int64_t n = state->input.rows.rows;
  auto t = std::make_unique<ComputeTask>();
  t->model = state->model;
  t->op = op;
  if (op == Operation::kPredict) t->params.kind = OutputKind::kPrediction;
  if (op != Operation::kPredict) {
    t->params.output_space = state->explain.output_space;
    t->params.groups = state->groups;
  }
  t->rows = state->input.rows;
  if (shm.direct) {
    t->out = MakeMatrixView(reinterpret_cast<float*>(shm.span.data), n, width);
  } else {
    out->resize(static_cast<size_t>(n * width));
    t->out = MakeMatrixView(out->data(), n, width);
  }
  t->call = call;
  runtime->metrics().Model(state->model->name)->op(op).request_rows->Observe(static_cast<double>(n));
  return t;
}

inference::ModelInput* AddInput(inference::ModelConfig* c, const char* name,
                                inference::DataType type, std::vector<int64_t> dims) {
  inference::ModelInput* in = c->add_input();
  in->set_name(name);
  in->set_data_type(type);
  for (int64_t d : dims) in->add_dims(d);
  return in;
}

void AddOutput(inference::ModelConfig* c, const char* name, std::vector<int64_t> shape) {
  inference::ModelOutput* out = c->add_output();
  out->set_name(name);
  out->set_data_type(inference::TYPE_FP32);
  for (size_t i = 1; i < shape.size(); ++i) out->add_dims(shape[i]);  // without the batch
}

const char* IndexState(const registry::VersionStatus& v) {
  if (v.serving) return "READY";
  return v.state == registry::VersionState::kLoading ? "LOADING" : "UNAVAILABLE";
}

void FillStatistics(const std::string& name, int64_t version,
                    const Metrics::VersionStatistics& t, inference::ModelStatistics* out) {
  auto ns = [](double seconds) { return static_cast<uint64_t>(std::max(0.0, seconds) * 1e9); };
  out->set_name(name);
  out->set_version(std::to_string(version));
  out->set_last_inference(static_cast<uint64_t>(t.last_inference_ms));
  out->set_inference_count(t.inferences);
  out->set_execution_count(t.executions);
  inference::InferStatistics* s = out->mutable_inference_stats();
  s->mutable_success()->set_count(t.success);
  s->mutable_success()->set_ns(ns(t.success_seconds));
  s->mutable_fail()->set_count(t.fail);
  s->mutable_fail()->set_ns(ns(t.fail_seconds));
  s->mutable_queue()->set_count(t.queued);
  s->mutable_queue()->set_ns(ns(t.queue_seconds));
  s->mutable_compute_infer()->set_count(t.executions);
  s->mutable_compute_infer()->set_ns(ns(t.compute_seconds));
}

}  // namespace

absl::Status KserveModelConfig(Runtime* runtime, const inference::ModelConfigRequest& request,
                               inference::ModelConfigResponse* response) {
  absl::StatusOr<int64_t> version = ParseKserveVersion(request.version());
  if (!version.ok()) return version.status();
  absl::StatusOr<ModelVersionPtr> model = runtime->registry().Get(request.name(), *version);
  if (!model.ok()) return model.status();
  const Forest& f = (*model)->forest();
  inference::ModelConfig* c = response->mutable_config();
  c->set_name((*model)->name);
  c->set_platform("grove");
  c->set_backend("grove");
  c->set_max_batch_size(static_cast<int32_t>(
      std::min<int64_t>((*model)->config->max_request_rows, std::numeric_limits<int32_t>::max())));
  AddInput(c, kInputTensor, inference::TYPE_FP32, {f.num_features});
  AddOutput(c, kOutputTensor, KservePredictionShape(f, 1));
  if ((*model)->servable->Available(Operation::kExplain).ok()) {
    AddOutput(c, kShapTensor, KserveShapShape(f, 1, (*model)->groups.get()));
  }
  auto param = [c](const char* key, std::string value) {
    (*c->mutable_parameters())[key].set_string_value(std::move(value));
  };
  param("format", FormatLabel(f.format));
  param("objective", f.objective.name);
  param("link", LinkName(f.objective.link));
  param("num_features", std::to_string(f.num_features));
  param("num_outputs", std::to_string(f.num_outputs));
  param("num_trees", std::to_string(f.trees.size()));
  param("version", std::to_string((*model)->version));
  if (!f.feature_names.empty()) param("feature_names", nlohmann::json(f.feature_names).dump());
  return absl::OkStatus();
}

absl::Status KserveModelStatistics(Runtime* runtime,
                                   const inference::ModelStatisticsRequest& request,
                                   inference::ModelStatisticsResponse* response) {
  // (model, version) pairs to report, as Triton picks them: the named version, else every serving
  // version of the named model, else every serving version of every model.
  std::vector<std::pair<std::string, int64_t>> versions;
  auto serving_versions = [&versions](const registry::ModelStatus& m) {
    for (const registry::VersionStatus& v : m.versions) {
      if (v.serving) versions.emplace_back(m.name, v.version);
    }
  };
  if (request.name().empty()) {
    for (const registry::ModelStatus& m : runtime->registry().List()) serving_versions(m);
  } else {
    absl::StatusOr<int64_t> version = ParseKserveVersion(request.version());
    if (!version.ok()) return version.status();
    // The lookup ModelReady and ModelInfer make: the same errors for an unknown model or version.
    absl::StatusOr<ModelVersionPtr> model = runtime->registry().Get(request.name(), *version);
    if (!model.ok()) return model.status();
    absl::StatusOr<registry::ModelStatus> status = runtime->registry().GetStatus(request.name());
    if (*version > 0 || !status.ok()) {
      versions.emplace_back((*model)->name, (*model)->version);
    } else {
      serving_versions(*status);
    }
  }
  std::sort(versions.begin(), versions.end());
  for (const auto& [name, version] : versions) {
    FillStatistics(name, version, runtime->metrics().Statistics(name, version),
                   response->add_model_stats());
  }
  return absl::OkStatus();
}

absl::Status KserveRepositoryIndex(Runtime* runtime, const inference::RepositoryIndexRequest& request,
                                   inference::RepositoryIndexResponse* response) {
  if (!request.repository_name().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "repository '", request.repository_name(), "': groved serves one repository, named \"\""));
  }
  for (const registry::ModelStatus& m : runtime->registry().List()) {
    for (const registry::VersionStatus& v : m.versions) {
      if (request.ready() && !v.serving) continue;
      auto* index = response->add_models();
      index->set_name(m.name);
      index->set_version(std::to_string(v.version));
      index->set_state(IndexState(v));
      if (!v.serving) index->set_reason(!v.error.empty() ? v.error : m.error);
    }
  }
  return absl::OkStatus();
}

std::string RefusedRepositoryArgument(
    const std::string& repository,
    const google::protobuf::Map<std::string, inference::ModelRepositoryParameter>& parameters,
    ModelControl op) {
  if (!repository.empty()) return absl::StrCat("repository '", repository, "'");
  for (const auto& [key, value] : parameters) {
    if (op == ModelControl::kUnload && key == "unload_dependents") continue;
    return absl::StrCat("parameter '", key, "'");
  }
  return "";
}

absl::Status KserveSystemSharedMemoryStatus(
    Runtime* runtime, const inference::SystemSharedMemoryStatusRequest& request,
    const std::string& owner, inference::SystemSharedMemoryStatusResponse* response) {
  absl::StatusOr<std::vector<serving::SharedMemoryRegionInfo>> regions =
      runtime->shared_memory().Status(request.name(), owner);
  if (!regions.ok()) return regions.status();
  for (const serving::SharedMemoryRegionInfo& r : *regions) {
    auto& out = (*response->mutable_regions())[r.name];
    out.set_name(r.name);
    out.set_key(r.key);
    out.set_offset(r.offset);
    out.set_byte_size(r.byte_size);
  }
  return absl::OkStatus();
}

absl::Status CudaSharedMemoryUnimplemented(absl::string_view method) {
  return absl::UnimplementedError(absl::StrCat(
      method, ": CUDA shared memory is not supported by groved; it maps system shared memory "
      "only (SystemSharedMemoryRegister, with groved --shared_memory): put the tensors in a POSIX "
      "shared memory object instead of a CUDA IPC handle"));
}

void KserveServerMetadata(bool shared_memory, inference::ServerMetadataResponse* response) {
  response->set_name("grove");
  response->set_version(GROVE_VERSION);
  for (const char* e : {"classification", "model_repository", "model_repository(unload_dependents)",
                        "model_configuration", "binary_tensor_data", "parameters",
                        "statistics"}) {
    response->add_extensions(e);
  }
  if (shared_memory) response->add_extensions("system_shared_memory");
}

absl::Status KserveModelReady(Runtime* runtime, const inference::ModelReadyRequest& request,
                              inference::ModelReadyResponse* response) {
  absl::StatusOr<int64_t> version = ParseKserveVersion(request.version());
  if (!version.ok()) return version.status();
  absl::StatusOr<ModelVersionPtr> model = runtime->registry().Get(request.name(), *version);
  if (absl::IsNotFound(model.status())) return model.status();
  response->set_ready(model.ok() && !runtime->shutting_down());
  return absl::OkStatus();
}

absl::Status KserveModelMetadata(Runtime* runtime, const inference::ModelMetadataRequest& request,
                                 inference::ModelMetadataResponse* response) {
  absl::StatusOr<int64_t> version = ParseKserveVersion(request.version());
  if (!version.ok()) return version.status();
  absl::StatusOr<ModelVersionPtr> model = runtime->registry().Get(request.name(), *version);
  if (!model.ok()) return model.status();
  absl::StatusOr<registry::ModelStatus> status = runtime->registry().GetStatus(request.name());
  if (!status.ok()) return status.status();
  FillKserveModelMetadata(**model, *status, response);
  return absl::OkStatus();
}

absl::Status StartKserveInfer(Runtime* runtime, const inference::ModelInferRequest& request,
                              inference::ModelInferResponse* response, absl::Time deadline,
                              const InferStarted& started,
                              std::function<void(absl::Status)> done, ResolvedCall* resolved,
                              absl::string_view received_raw, const std::string& principal) {
  if (deadline <= absl::Now()) {
    return absl::DeadlineExceededError("the call's deadline expired before it was queued");
  }
  absl::StatusOr<int64_t> version = ParseKserveVersion(request.model_version());
  if (!version.ok()) return version.status();
  absl::StatusOr<ModelVersionPtr> got = runtime->registry().Get(request.model_name(), *version);
  if (!got.ok()) return got.status();
  auto state = std::make_shared<InferState>();
  state->model = *std::move(got);
  resolved->version = state->model->version;
  const Forest& f = state->model->forest();
  const serving::SharedMemoryAccess shared_memory(&runtime->shared_memory(), principal);
  absl::StatusOr<KserveInput> input =
      ParseKserveInput(*state->model, request, &shared_memory, received_raw);
  if (!input.ok()) return input.status();
  state->input = *std::move(input);
  resolved->rows = state->input.rows.rows;
  absl::StatusOr<KserveOutputs> outputs = ParseKserveOutputs(request);
  if (!outputs.ok()) return outputs.status();
  state->outputs = *std::move(outputs);
  absl::StatusOr<PredictionLayout> layout = ResolvePredictionLayout(f, state->outputs);
  if (!layout.ok()) return layout.status();
  state->layout = *layout;
  if (state->outputs.shap) {
    absl::StatusOr<ExplainChoice> explain = ExplainChoiceFromKserve(request);
    if (!explain.ok()) return explain.status();
    state->explain = *explain;
    if (absl::Status s = CheckExplainChoice(*state->model, state->explain, false); !s.ok()) {
      return s;
    }
    absl::StatusOr<FeatureGroupsPtr> groups = GroupsFromKserve(*state->model, request);
    if (!groups.ok()) return groups.status();
    state->groups = *std::move(groups);
  }
  const int64_t n = state->input.rows.rows;
  const int64_t pred_width = f.PredictionWidth();
  RunParams shap_params;
  shap_params.groups = state->groups;
  const int64_t shap_width = state->model->servable->Width(Operation::kExplain, shap_params);
  // Outputs in shared memory: checked and resolved before anything is queued.
  if (const auto& ref = state->outputs.prediction_shared_memory; ref.has_value()) {
    absl::StatusOr<SharedOutput> out = ResolveOutput(
        shared_memory, kOutputTensor, *ref, SaturatingBytes(n, state->layout.width, 4),
        KservePredictionIsEngineOutput(f, state->layout), state->input.span, {});
    if (!out.ok()) return out.status();
    state->prediction_shm = *std::move(out);
  }
  if (const auto& ref = state->outputs.shap_shared_memory; ref.has_value()) {
    absl::StatusOr<SharedOutput> out =
        ResolveOutput(shared_memory, kShapTensor, *ref, SaturatingBytes(n, shap_width, 4), true,
                      state->input.span, state->prediction_shm.span);
    if (!out.ok()) return out.status();
    state->shap_shm = *std::move(out);
  }
  // Bytes of the response, and of what the server holds while computing (rows converted or
  // carried in the request, results not written straight into shared memory).
  int64_t bytes = 0, held = 0;
  if (state->outputs.prediction && !state->prediction_shm.span) {
    bytes = SaturatingBytes(n, std::max<int64_t>(2, pred_width), 4);
  }
  if (state->outputs.prediction && !state->prediction_shm.direct) {
    held = SaturatingBytes(n, std::max<int64_t>(2, pred_width), 4);
  }
  if (state->outputs.class_count > 0) {  // "value:index" strings: at most 64 bytes each ("%f")
    const int64_t classes =
        SaturatingBytes(n, std::min(state->outputs.class_count, state->layout.width), 64);
    bytes = SaturatingAdd(bytes, classes);
    held = SaturatingAdd(held, classes);
  }
  if (state->outputs.shap && !state->shap_shm.span) {
    bytes = SaturatingAdd(bytes, SaturatingBytes(n, shap_width, 4));
  }
  if (state->outputs.shap && !state->shap_shm.direct) {
    held = SaturatingAdd(held, SaturatingBytes(n, shap_width, 4));
  }
  if (state->outputs.residuals) {  // the residuals in the response; the outputs and them held
    bytes = SaturatingAdd(bytes, SaturatingBytes(n, f.num_outputs, 4));
    held = SaturatingAdd(held, SaturatingBytes(n, f.num_outputs, 8));
  }
  if (absl::Status s = runtime->CheckResponseBytes(bytes, n); !s.ok()) return s;
  if (!state->input.span || !state->input.owned.empty()) {
    held = SaturatingAdd(held, SaturatingBytes(n, state->input.rows.cols, 4));
  }

  const Operation explain_op = ExplainOperation(state->explain, false);
  const Operation op = state->outputs.shap ? explain_op : Operation::kPredict;
  absl::StatusOr<serving::MemoryReservation> memory =
      runtime->ReserveMemory(*state->model, op, n, held);
  if (!memory.ok()) return memory.status();
  const int count = (state->outputs.prediction ? 1 : 0) + (state->outputs.shap ? 1 : 0) +
                    (state->outputs.residuals ? 1 : 0);
  Metrics::OpMetrics* explain_metrics =
      state->outputs.residuals ? &runtime->metrics().Model(state->model->name)->op(explain_op)
                               : nullptr;
  auto call = std::make_shared<CallState>(
      count, deadline,
      [state, &request, response, explain_metrics, done = std::move(done)](absl::Status status) {
        if (status.ok()) {
          if (state->outputs.residuals) ComputeResiduals(state.get(), explain_metrics);
          FillInferResponse(*state, request, response);
          status = CheckSharedMemoryIntact(*state);
        }
        done(status);
      });
  call->Hold(*std::move(memory));
  started(call, op);
  std::vector<std::unique_ptr<ComputeTask>> tasks;
  if (state->outputs.prediction) {
    tasks.push_back(MakeTask(runtime, state, Operation::kPredict, pred_width, &state->prediction,
                             state->prediction_shm, call));
  }
  if (state->outputs.shap) {
    tasks.push_back(
        MakeTask(runtime, state, explain_op, shap_width, &state->shap, state->shap_shm, call));
  }
  if (state->outputs.residuals) {  // the model's output in the explained space, beside it
    auto t = std::make_unique<ComputeTask>();
    t->model = state->model;
    t->op = Operation::kPredict;
    t->params.kind = ExplainedOutputKind(state->explain.output_space);
    t->rows = state->input.rows;
    state->model_outputs.resize(static_cast<size_t>(n * f.num_outputs));
    t->out = MakeMatrixView(state->model_outputs.data(), n, f.num_outputs);
    t->call = call;
    tasks.push_back(std::move(t));
  }
  SubmitAll(runtime, std::move(tasks), call);
  return absl::OkStatus();
}

}  // namespace grove::server
