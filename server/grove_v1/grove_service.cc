#include "server/grove_v1/grove_service.h"

#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/servable/residuals.h"
#include "server/grpc/auth.h"
#include "server/call.h"
#include "server/convert.h"
#include "server/grove_v1/grove_convert.h"
#include "server/control.h"

namespace grove::server {
namespace {

using registry::ModelVersionPtr;

absl::Status CheckDeadline(absl::Time deadline) {
  if (deadline <= absl::Now()) {
    return absl::DeadlineExceededError("the call's deadline expired before it was queued");
  }
  return absl::OkStatus();
}

std::unique_ptr<ComputeTask> MakeTask(const ModelVersionPtr& model, Operation op, RowsView rows,
                                      MatrixView<float> out, int begin, int end,
                                      const std::shared_ptr<CallState>& call) {
  auto t = std::make_unique<ComputeTask>();
  t->model = model;
  t->op = op;
  t->rows = rows;
  t->out = out;
  t->params.iteration_begin = begin;
  t->params.iteration_end = end;
  t->call = call;
  return t;
}

// The queue (and metrics label) of an explanation request; an invalid method counts as explain.
Operation RequestOperation(const grove::v1::ExplainRequest& request) {
  absl::StatusOr<ExplainChoice> choice = ExplainChoiceFromRequest(request);
  return ExplainOperation(choice.ok() ? *choice : ExplainChoice{}, request.interactions());
}

void ObserveRows(Runtime* runtime, const std::string& model, Operation op, int64_t rows) {
  runtime->metrics().Model(model)->op(op).request_rows->Observe(static_cast<double>(rows));
}

// What a call keeps until it is answered besides its request and response: rows converted or
// copied, the shared memory its rows are read from and its results written to (held mapped).
struct CallBuffers {
  std::vector<float> converted;
  serving::SharedMemorySpan rows;
  std::vector<float> gathered;  // Predict's explain_rows
  std::vector<float> scratch;   // Explain's values when omitted or summed from interactions
  std::vector<float> outputs;   // Explain's model outputs of the rows (residuals)
  std::optional<SharedMemoryResults> results;  // output_shared_memory

  // Results flushed into shared memory (if any), then OK unless a shared memory range the call
  // read or wrote lost pages under it (its owner shrank the object): such results are not valid.
  absl::Status Finish() {
    if (results) results->Flush();
    if (absl::Status s = rows.CheckIntact("rows"); !s.ok()) return s;
    return results ? results->CheckIntact() : absl::OkStatus();
  }
};

// Resolves a request's output_shared_memory range for results of `shapes`.
absl::StatusOr<SharedMemoryResults> OutputResults(const serving::SharedMemoryAccess& shared_memory,
                                                  const grove::v1::SharedMemoryRange& range,
                                                  const std::vector<ResultShape>& shapes,
                                                  const serving::SharedMemorySpan& rows) {
  absl::StatusOr<serving::SharedMemorySpan> span =
      ResolveSharedMemory(shared_memory, range, "output_shared_memory");
  if (!span.ok()) return span.status();
  if (absl::Status s = span->Back("output_shared_memory"); !s.ok()) return s;
  return SharedMemoryResults::Create(range, *std::move(span), shapes, rows);
}

// Bytes the server holds for a call's rows: none when the engines read them in place from shared
// memory.
int64_t HeldRowBytes(const CallBuffers& buffers, const RowsView& rows) {
  if (buffers.rows && buffers.converted.empty()) return 0;
  return SaturatingBytes(rows.rows, rows.cols, 4);
}

// Everything Predict does before its tasks are queued. On OK the call finishes from `call`.
absl::Status StartPredict(Runtime* runtime, const grpc::ServerContextBase& context,
                          const grove::v1::PredictRequest* request,
                          grove::v1::PredictResponse* response, UnaryCall* reactor) {
  const absl::Time deadline = DeadlineFromChrono(context.deadline());
  if (absl::Status s = CheckDeadline(deadline); !s.ok()) return s;
  absl::StatusOr<ModelVersionPtr> got = runtime->registry().Get(request->model(), request->version());
  if (!got.ok()) return got.status();
  const ModelVersionPtr model = *std::move(got);
  reactor->resolved()->version = model->version;
  const Forest& f = model->forest();
  auto buffers = std::make_shared<CallBuffers>();
  const serving::SharedMemoryAccess shared_memory(&runtime->shared_memory(), reactor->principal());
  absl::StatusOr<RowsView> rows =
      RowsFromMatrix(*model, request->rows(), &buffers->converted, &shared_memory, &buffers->rows,
                     reactor->received_raw_rows());
  if (!rows.ok()) return rows.status();
  reactor->resolved()->rows = rows->rows;
  if (absl::Status s =
          CheckIterationRange(f, request->iteration_begin(), request->iteration_end());
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::vector<OutputKind>> outputs = ResolveOutputs(*model, *request);
  if (!outputs.ok()) return outputs.status();
  if (request->explain()) {
    if (absl::Status s = CheckExplainAvailable(*model); !s.ok()) return s;
    if (absl::Status s = CheckExplainRows(*model, *request, rows->rows); !s.ok()) return s;
  }

  // Sizes first, so that an oversize answer is refused before anything is allocated.
  const int64_t n = rows->rows;
  int64_t bytes = 0;
  std::vector<int64_t> widths;
  for (OutputKind k : *outputs) {
    RunParams params;
    params.kind = k;
    params.iteration_begin = request->iteration_begin();
    params.iteration_end = request->iteration_end();
    widths.push_back(model->servable->Width(Operation::kPredict, params));
    bytes = SaturatingAdd(bytes, SaturatingBytes(n, widths.back(), 4));
  }
  const int64_t explain_width = model->servable->Width(Operation::kExplain, RunParams());
  const int64_t explained =
      !request->explain() ? 0 : (request->explain_rows_size() > 0 ? request->explain_rows_size() : n);
  // Results into shared memory: margin, prediction, leaf, shap_values, those computed.
  std::vector<size_t> place(outputs->size());
  size_t shap_place = 0;
  if (request->has_output_shared_memory()) {
    std::vector<ResultShape> shapes;
    for (OutputKind kind : {OutputKind::kMargin, OutputKind::kPrediction, OutputKind::kLeaf}) {
      for (size_t i = 0; i < outputs->size(); ++i) {
        if ((*outputs)[i] != kind) continue;
        place[i] = shapes.size();
        shapes.push_back({n, widths[i]});
      }
    }
    shap_place = shapes.size();
    if (request->explain()) shapes.push_back({explained, explain_width});
    absl::StatusOr<SharedMemoryResults> results =
        OutputResults(shared_memory, request->output_shared_memory(), shapes, buffers->rows);
    if (!results.ok()) return results.status();
    buffers->results = *std::move(results);
  }
  // The response carries the results (unless they go to shared memory) and explained_rows; the
  // server holds the same, plus the scratch of unaligned shared memory results and the rows.
  bytes = SaturatingAdd(bytes, SaturatingBytes(explained, explain_width, 4));
  const int64_t response_bytes =
      SaturatingAdd(buffers->results ? 0 : bytes, SaturatingBytes(explained, 8, 1));
  if (absl::Status s = runtime->CheckResponseBytes(response_bytes, n); !s.ok()) return s;
  const int64_t held = SaturatingAdd(
      response_bytes, buffers->results ? buffers->results->scratch_bytes() : 0);
  const Operation op = request->explain() ? Operation::kExplain : Operation::kPredict;
  absl::StatusOr<serving::MemoryReservation> memory = runtime->ReserveMemory(
      *model, op, n, SaturatingAdd(held, HeldRowBytes(*buffers, *rows)));
  if (!memory.ok()) return memory.status();

  response->set_model(model->name);
  response->set_version(model->version);
  const bool raw = IsRawMatrix(request->rows(), reactor->received_raw_rows());  // rows' form
  const int tasks_count = static_cast<int>(outputs->size()) + (request->explain() ? 1 : 0);
  auto call = std::make_shared<CallState>(
      tasks_count, deadline, [reactor, buffers](absl::Status status) {
        if (status.ok()) status = buffers->Finish();
        reactor->Reply(status);
      });
  call->Hold(*std::move(memory));
  reactor->set_call(call);
  reactor->set_operation(op);
  ObserveRows(runtime, model->name, Operation::kPredict, n);

  std::vector<std::unique_ptr<ComputeTask>> tasks;
  for (size_t i = 0; i < outputs->size(); ++i) {
    grove::v1::Matrix* target = (*outputs)[i] == OutputKind::kMargin ? response->mutable_margin()
                                : (*outputs)[i] == OutputKind::kPrediction
                                    ? response->mutable_prediction()
                                    : response->mutable_leaf();
    MatrixView<float> out;
    if (buffers->results) {
      out = buffers->results->View(place[i]);
      buffers->results->Describe(place[i], target);
    } else {
      out = ResizeMatrix(target, n, widths[i], raw);
    }
    auto t = MakeTask(model, Operation::kPredict, *rows, out, request->iteration_begin(),
                      request->iteration_end(), call);
    t->params.kind = (*outputs)[i];
    tasks.push_back(std::move(t));
  }
  if (request->explain()) {
    RowsView explain_rows = *rows;
    if (request->explain_rows_size() > 0) {
      const int64_t cols = rows->cols;
      std::vector<float>& gathered = buffers->gathered;
      gathered.resize(static_cast<size_t>(explained * cols));
      for (int64_t i = 0; i < explained; ++i) {
        std::memcpy(gathered.data() + i * cols, rows->Row(request->explain_rows(i)),
                    sizeof(float) * cols);
        response->add_explained_rows(request->explain_rows(i));
      }
      explain_rows = MakeRowsView(gathered.data(), explained, cols);
    } else {
      for (int64_t i = 0; i < n; ++i) response->add_explained_rows(i);
    }
    ObserveRows(runtime, model->name, Operation::kExplain, explained);
    MatrixView<float> out;
    if (buffers->results) {
      out = buffers->results->View(shap_place);
      buffers->results->Describe(shap_place, response->mutable_shap_values());
    } else {
      out = ResizeMatrix(response->mutable_shap_values(), explained, explain_width, raw);
    }
    tasks.push_back(MakeTask(model, Operation::kExplain, explain_rows, out,
                             request->iteration_begin(), request->iteration_end(), call));
  }
  SubmitAll(runtime, std::move(tasks), call);
  return absl::OkStatus();
}

// ExplainStream: one reactor per stream. Messages are answered in order; at most kStreamWindow are
// being computed or waiting to be written. The first failed message ends the stream with its status
// (after the responses before it were written). Messages arrive as bytes and are decoded here, so
// that one that cannot be decoded fails like any other bad message instead of looking like the end
// of the stream.
class ExplainStreamReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // `admitted`: the access-control decision; an error ends the stream before anything is read.
  // `principal`: the caller (auth::CallerPrincipal), whose shared memory regions it may use.
  ExplainStreamReactor(Runtime* runtime, grpc::CallbackServerContext* context,
                       const absl::Status& admitted, std::string principal)
      : runtime_(runtime), context_(context), principal_(std::move(principal)) {
    runtime_->metrics().InflightRequests("ExplainStream", 1);
    absl::MutexLock lock(&mu_);
    if (!admitted.ok()) {
      read_done_ = true;
      FinishLocked(admitted);
      return;
    }
    reading_ = std::make_shared<Item>();
    StartRead(&reading_->wire_request);
  }

  void OnReadDone(bool ok) override {
    std::shared_ptr<Item> item;
    {
      absl::MutexLock lock(&mu_);
      if (!ok) {
        read_done_ = true;
        reading_.reset();
      } else {
        item = std::move(reading_);
        item->start = absl::Now();
        item->index = ++messages_read_;
        items_.push_back(item);
        ++outstanding_;
      }
    }
    if (!ok) {
      Advance();
      return;
    }
    const grpc::Status decoded = grpc::SerializationTraits<grove::v1::ExplainRequest>::Deserialize(
        &item->wire_request, &item->request);
    if (!decoded.ok()) {
      {
        absl::MutexLock lock(&mu_);
        read_done_ = true;  // nothing after a message that cannot be decoded is read
      }
      ItemDone(item, absl::InvalidArgumentError(absl::StrCat(
                         "ExplainStream message ", item->index,
                         " cannot be decoded as a grove.v1.ExplainRequest (malformed or truncated "
                         "bytes); the stream ends here")));
      return;
    }
    if (model_label_.empty()) model_label_ = ModelLabel(runtime_, item->request.model());
    std::shared_ptr<CallState> call;
    std::weak_ptr<Item> weak = item;
    absl::Status s = StartExplain(
        runtime_, item->request, &item->response, DeadlineFromChrono(context_->deadline()),
        [this, weak](absl::Status status) { ItemDone(weak.lock(), std::move(status)); }, &call,
        &item->resolved, {}, principal_);
    if (!s.ok()) {
      ItemDone(item, s);
    } else {
      bool cancelled;
      {
        absl::MutexLock lock(&mu_);
        item->call = call;
        cancelled = cancelled_;
      }
      // Outside the lock (as every Cancel here): a cancelled task may be answered at once, on this
      // thread, and ItemDone takes mu_.
      if (cancelled) call->Cancel();
    }
    Advance();
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!items_.empty()) items_.pop_front();
      if (!ok && status_.ok()) status_ = absl::UnavailableError("the stream broke while writing");
    }
    Advance();
  }

  void OnCancel() override {
    std::vector<std::shared_ptr<CallState>> calls;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      calls = CallsLocked();
    }
    for (auto& call : calls) call->Cancel();
  }

  void OnDone() override {
    runtime_->metrics().InflightRequests("ExplainStream", -1);
    bool destroy = false;
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      destroy = outstanding_ == 0;
    }
    if (destroy) delete this;
  }

 private:
  struct Item {
    grpc::ByteBuffer wire_request;
    grpc::ByteBuffer wire_response;
    int64_t index = 0;  // 1-based position in the stream
    grove::v1::ExplainRequest request;
    grove::v1::ExplainResponse response;
    std::shared_ptr<CallState> call;
    absl::Time start;
    ResolvedCall resolved;
    bool done = false;
    absl::Status status;
  };

  void ItemDone(std::shared_ptr<Item> item, absl::Status status) {
    {
      absl::MutexLock lock(&mu_);
      if (item != nullptr) {
        item->done = true;
        item->status = std::move(status);
        const double seconds = absl::ToDoubleSeconds(absl::Now() - item->start);
        if (item->status.ok()) {
          runtime_->metrics().RecordRequestLatency(model_label_, "ExplainStream", seconds,
                                                   RequestOperation(item->request));
        }
        // Each message is an inference of its own in the per-version statistics.
        if (item->resolved.version > 0) {
          runtime_->metrics().RecordInference(item->request.model(), item->resolved.version,
                                              item->status.ok(), seconds, item->resolved.rows);
        }
      }
    }
    Advance();
    // Last: once outstanding_ is 0 after OnDone, the reactor is deleted (here or in OnDone).
    bool destroy = false;
    {
      absl::MutexLock lock(&mu_);
      --outstanding_;
      destroy = done_ && outstanding_ == 0;
    }
    if (destroy) delete this;
  }

  // The calls of the messages still held (to cancel them once mu_ is released).
  std::vector<std::shared_ptr<CallState>> CallsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::shared_ptr<CallState>> calls;
    for (auto& item : items_) {
      if (item->call != nullptr) calls.push_back(item->call);
    }
    return calls;
  }

  // Decides and starts the next write / read / finish under the lock (gRPC never runs a reaction
  // inline from StartWrite/StartRead/Finish), so decision and action are atomic. When the stream
  // stops, the calls still computing are cancelled after the lock is released (a cancelled task
  // may be answered at once, on this thread, and ItemDone takes mu_); nothing touches the reactor
  // after that, since an answer may let it be deleted.
  void Advance() {
    std::vector<std::shared_ptr<CallState>> cancel;
    DecideNext(&cancel);
    for (auto& call : cancel) call->Cancel();
  }

  void DecideNext(std::vector<std::shared_ptr<CallState>>* cancel) {
    absl::MutexLock lock(&mu_);
    if (finished_ || done_) return;
    if (!writing_ && !items_.empty() && items_.front()->done) {
      Item& front = *items_.front();
      if (!front.status.ok()) {
        if (status_.ok()) status_ = front.status;
      } else if (status_.ok()) {
        bool own_buffer = false;
        const grpc::Status encoded = grpc::SerializationTraits<grove::v1::ExplainResponse>::Serialize(
            front.response, &front.wire_response, &own_buffer);
        if (encoded.ok()) {
          writing_ = true;
          StartWrite(&front.wire_response);
          return;
        }
        status_ = absl::InternalError(absl::StrCat("cannot encode the answer to ExplainStream "
                                                   "message ", front.index, ": ",
                                                   encoded.error_message()));
      }
    }
    if (!status_.ok() && !writing_) {
      // Stop: cancel what is still computing and end the stream with the error.
      *cancel = CallsLocked();
      FinishLocked(status_);
      return;
    }
    if (status_.ok() && !read_done_ && reading_ == nullptr &&
        static_cast<int>(items_.size()) < kStreamWindow) {
      reading_ = std::make_shared<Item>();
      StartRead(&reading_->wire_request);
    }
    if (read_done_ && items_.empty() && !writing_) FinishLocked(status_);
  }

  void FinishLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    runtime_->metrics().RecordRequest(model_label_, "ExplainStream", status.code(), -1,
                                      Operation::kExplain);
    Finish(ToGrpcStatus(status));
  }

  Runtime* const runtime_;
  grpc::CallbackServerContext* const context_;
  const std::string principal_;
  std::string model_label_;  // set by the first message (reads are serialised)
  absl::Mutex mu_;
  std::shared_ptr<Item> reading_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Item>> items_ ABSL_GUARDED_BY(mu_);
  int outstanding_ ABSL_GUARDED_BY(mu_) = 0;  // items whose compute has not reported yet
  int64_t messages_read_ ABSL_GUARDED_BY(mu_) = 0;
  bool read_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::Status StartExplain(Runtime* runtime, const grove::v1::ExplainRequest& request,
                          grove::v1::ExplainResponse* response, absl::Time deadline,
                          std::function<void(absl::Status)> done,
                          std::shared_ptr<CallState>* call_out, ResolvedCall* resolved,
                          absl::string_view received_raw_rows, const std::string& principal) {
  if (absl::Status s = CheckDeadline(deadline); !s.ok()) return s;
  absl::StatusOr<ModelVersionPtr> got = runtime->registry().Get(request.model(), request.version());
  if (!got.ok()) return got.status();
  const ModelVersionPtr model = *std::move(got);
  resolved->version = model->version;
  const Forest& f = model->forest();
  auto buffers = std::make_shared<CallBuffers>();
  const serving::SharedMemoryAccess shared_memory(&runtime->shared_memory(), principal);
  absl::StatusOr<RowsView> rows = RowsFromMatrix(*model, request.rows(), &buffers->converted,
                                                 &shared_memory, &buffers->rows, received_raw_rows);
  if (!rows.ok()) return rows.status();
  resolved->rows = rows->rows;
  if (absl::Status s = CheckIterationRange(f, request.iteration_begin(), request.iteration_end());
      !s.ok()) {
    return s;
  }
  absl::StatusOr<ExplainChoice> choice = ExplainChoiceFromRequest(request);
  if (!choice.ok()) return choice.status();
  if (absl::Status s = CheckExplainChoice(*model, *choice, request.interactions()); !s.ok()) {
    return s;
  }
  if (request.interactions()) {
    if (absl::Status s = CheckInteractionsAllowed(*model); !s.ok()) return s;
  }
  absl::StatusOr<FeatureGroupsPtr> groups = GroupsFromRequest(*model, request);
  if (!groups.ok()) return groups.status();
  RunParams params;
  params.groups = *groups;
  if (request.top_k() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("top_k must not be negative (got ",
                                                   request.top_k(), ")"));
  }
  const int64_t n = rows->rows;
  const int F = NumPlayers(f.num_features, params.groups.get());  // the players: features or groups
  const int K = f.num_outputs;
  const int64_t width = model->servable->Width(Operation::kExplain, params);
  const bool omit = request.omit_values() && request.top_k() > 0;
  const int k = std::min(request.top_k(), F);
  const bool interactions = request.interactions();
  const int64_t interactions_width =
      interactions ? model->servable->Width(Operation::kInteractions, params) : 0;
  // Results into shared memory: values (unless omitted), then interactions.
  if (request.has_output_shared_memory()) {
    std::vector<ResultShape> shapes;
    if (!omit) shapes.push_back({n, width});
    if (interactions) shapes.push_back({n, interactions_width});
    absl::StatusOr<SharedMemoryResults> results =
        OutputResults(shared_memory, request.output_shared_memory(), shapes, buffers->rows);
    if (!results.ok()) return results.status();
    buffers->results = *std::move(results);
  }
  const SharedMemoryResults* results = buffers->results ? &*buffers->results : nullptr;
  // The response carries the results (unless they go to shared memory), the top-k and the bias;
  // the server holds the same, plus scratch and the rows.
  const int64_t values_bytes = SaturatingBytes(n, width, 4);
  const int64_t result_bytes = SaturatingAdd(omit ? 0 : values_bytes,
                                       SaturatingBytes(n, interactions_width, 4));
  // Residuals: K floats per row in the response, and the outputs they are computed from.
  const int64_t residual_bytes = request.residuals() ? SaturatingBytes(n, K, 4) : 0;
  const int64_t response_bytes = SaturatingAdd(
      SaturatingAdd(results != nullptr ? 0 : result_bytes, SaturatingBytes(n, int64_t{K} * k, 8)),
      residual_bytes);
  if (absl::Status s = runtime->CheckResponseBytes(response_bytes, n); !s.ok()) return s;
  int64_t held = SaturatingAdd(response_bytes, results != nullptr ? results->scratch_bytes() : 0);
  if (omit) held = SaturatingAdd(held, values_bytes);
  held = SaturatingAdd(held, residual_bytes);
  const Operation op = ExplainOperation(*choice, interactions);
  absl::StatusOr<serving::MemoryReservation> memory = runtime->ReserveMemory(
      *model, op, n, SaturatingAdd(held, HeldRowBytes(*buffers, *rows)));
  if (!memory.ok()) return memory.status();

  response->set_model(model->name);
  response->set_version(model->version);
  response->set_num_features(F);
  response->set_num_outputs(K);
  response->set_sequence(request.sequence());
  if (params.groups != nullptr) DescribeGroups(*params.groups, response->mutable_groups());
  const bool raw = IsRawMatrix(request.rows(), received_raw_rows);  // results in the rows' form
  // The engine computes the interactions, or the values; the values of interactions are their
  // row sums, computed when the call is answered.
  MatrixView<float> out;
  if (buffers->results) {
    if (!omit) buffers->results->Describe(0, response->mutable_values());
    if (interactions) buffers->results->Describe(omit ? 0 : 1, response->mutable_interactions());
    if (interactions || !omit) out = buffers->results->View(interactions && !omit ? 1 : 0);
  } else if (interactions) {
    out = ResizeMatrix(response->mutable_interactions(), n, interactions_width, raw);
  }
  if (omit && !interactions) {
    buffers->scratch.resize(static_cast<size_t>(n * width));
    out = MakeMatrixView(buffers->scratch.data(), n, width);
  } else if (!interactions && !buffers->results) {
    out = ResizeMatrix(response->mutable_values(), n, width, raw);
  }
  const int top_k = request.top_k();
  // Residuals: the model's output of the rows, computed beside the explanation.
  const bool residuals = request.residuals();
  if (residuals) buffers->outputs.resize(static_cast<size_t>(n * K));
  Metrics::OpMetrics* op_metrics = &runtime->metrics().Model(model->name)->op(op);
  auto finish = [response, buffers, out, n, F, K, width, omit, interactions, top_k, raw,
                 residuals, op_metrics, done = std::move(done)](absl::Status status) {
    if (status.ok()) {
      const float* values = out.data;
      if (interactions) {
        float* sums;
        if (omit) {
          buffers->scratch.resize(static_cast<size_t>(n * width));
          sums = buffers->scratch.data();
        } else if (buffers->results) {
          sums = buffers->results->View(0).data;
        } else {
          sums = ResizeMatrix(response->mutable_values(), n, width, raw).data;
        }
        InteractionRowSums(out.data, n, K, F, sums);
        values = sums;
      }
      for (int o = 0; o < K; ++o) response->add_bias(values[o * (F + 1) + F]);
      if (top_k > 0) TopK(values, n, K, F, top_k, response->mutable_top());
      if (residuals) {
        grove::v1::Matrix* m = response->mutable_residuals();
        m->set_rows(n);
        m->set_cols(K);
        m->mutable_values()->Resize(static_cast<int>(n * K), 0.0f);
        // Interaction values: every entry of the matrices (InteractionResiduals), as the CLI and
        // groveml compute them, not their float32 row sums.
        float* into = m->mutable_values()->mutable_data();
        const int64_t exceeded =
            interactions ? InteractionResiduals(out.data, n, K, F, buffers->outputs.data(), into)
                         : AdditivityResiduals(values, n, K, F, buffers->outputs.data(), into);
        response->set_residual_arithmetic(kResidualArithmetic);
        op_metrics->residual_rows->Increment(static_cast<double>(n));
        op_metrics->residual_exceeded_rows->Increment(static_cast<double>(exceeded));
      }
      status = buffers->Finish();
    }
    done(std::move(status));
  };
  auto call = std::make_shared<CallState>(residuals ? 2 : 1, deadline, std::move(finish));
  call->Hold(*std::move(memory));
  *call_out = call;
  op_metrics->request_rows->Observe(static_cast<double>(n));
  std::vector<std::unique_ptr<ComputeTask>> tasks;
  tasks.push_back(MakeTask(model, op, *rows, out, request.iteration_begin(),
                           request.iteration_end(), call));
  tasks.back()->params.output_space = choice->output_space;
  tasks.back()->params.groups = params.groups;
  if (residuals) {
    tasks.push_back(MakeTask(model, Operation::kPredict, *rows,
                             MakeMatrixView(buffers->outputs.data(), n, K),
                             request.iteration_begin(), request.iteration_end(), call));
    tasks.back()->params.kind = ExplainedOutputKind(choice->output_space);
  }
  SubmitAll(runtime, std::move(tasks), call);
  return absl::OkStatus();
}

void GroveService::HandlePredict(const grpc::ServerContextBase& context,
                                 const grove::v1::PredictRequest& request,
                                 grove::v1::PredictResponse* response, UnaryCall* call) {
  if (!call->Admit(authorizer_, context, auth::Role::kInfer)) return;
  call->set_model_label(ModelLabel(runtime_, request.model()));
  if (absl::Status s = StartPredict(runtime_, context, &request, response, call); !s.ok()) {
    call->Reply(s);
  }
}

void GroveService::HandleExplain(const grpc::ServerContextBase& context,
                                 const grove::v1::ExplainRequest& request,
                                 grove::v1::ExplainResponse* response, UnaryCall* call) {
  if (!call->Admit(authorizer_, context, auth::Role::kInfer)) return;
  call->set_model_label(ModelLabel(runtime_, request.model()));
  call->set_operation(RequestOperation(request));
  std::shared_ptr<CallState> state;
  absl::Status s = StartExplain(
      runtime_, request, response, DeadlineFromChrono(context.deadline()),
      [call](absl::Status status) { call->Reply(status); }, &state, call->resolved(),
      call->received_raw_rows(), call->principal());
  if (!s.ok()) {
    call->Reply(s);
  } else {
    call->set_call(std::move(state));
  }
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* GroveService::ExplainStream(
    grpc::CallbackServerContext* context) {
  std::string principal;
  absl::Status admitted =
      Authorize(authorizer_, *context, auth::Role::kInfer, "ExplainStream", &principal);
  return new ExplainStreamReactor(runtime_, context, admitted, std::move(principal));
}

grpc::ServerUnaryReactor* GroveService::ListModels(grpc::CallbackServerContext* context,
                                                   const grove::v1::ListModelsRequest* request,
                                                   grove::v1::ListModelsResponse* response) {
  auto* reactor = new CallbackUnaryCall(runtime_, "ListModels");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kInfer)) return reactor;
  for (const registry::ModelStatus& s : runtime_->registry().List()) {
    FillModelStatus(s, response->add_models());
  }
  reactor->Reply(absl::OkStatus());
  return reactor;
}

grpc::ServerUnaryReactor* GroveService::GetModelMetadata(
    grpc::CallbackServerContext* context, const grove::v1::GetModelMetadataRequest* request,
    grove::v1::ModelMetadata* response) {
  auto* reactor = new CallbackUnaryCall(runtime_, "GetModelMetadata");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kInfer)) return reactor;
  reactor->set_model_label(ModelLabel(runtime_, request->model()));
  absl::StatusOr<registry::ModelStatus> status = runtime_->registry().GetStatus(request->model());
  absl::StatusOr<ModelVersionPtr> model =
      runtime_->registry().Get(request->model(), request->version());
  if (model.ok() && status.ok()) {
    FillModelMetadata(**model, *status, response);
    response->set_shared_memory(runtime_->shared_memory_enabled());
    reactor->Reply(absl::OkStatus());
  } else if (status.ok() && absl::IsUnavailable(model.status())) {
    // Known but not serving: name and version states only.
    response->set_name(status->name);
    grove::v1::ModelStatus tmp;
    FillModelStatus(*status, &tmp);
    *response->mutable_versions() = tmp.versions();
    reactor->Reply(absl::OkStatus());
  } else {
    reactor->Reply(model.ok() ? status.status() : model.status());
  }
  return reactor;
}

grpc::ServerUnaryReactor* GroveService::LoadModel(grpc::CallbackServerContext* context,
                                                  const grove::v1::LoadModelRequest* request,
                                                  grove::v1::LoadModelResponse* response) {
  auto* reactor = new CallbackUnaryCall(runtime_, "LoadModel");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kAdmin)) return reactor;
  reactor->set_model_label(ModelLabel(runtime_, request->model()));
  Runtime* runtime = runtime_;
  StartModelControl(
      runtime_, model_control_, ModelControl::kLoad, request->model(),
      DeadlineFromChrono(context->deadline()), [reactor] { return reactor->cancelled(); },
      [runtime, reactor, request, response](absl::Status s) {
        absl::StatusOr<registry::ModelStatus> status =
            runtime->registry().GetStatus(request->model());
        if (status.ok()) FillModelStatus(*status, response->mutable_status());
        reactor->set_model_label(ModelLabel(runtime, request->model()));
        reactor->Reply(s);
      });
  return reactor;
}

grpc::ServerUnaryReactor* GroveService::UnloadModel(grpc::CallbackServerContext* context,
                                                    const grove::v1::UnloadModelRequest* request,
                                                    grove::v1::UnloadModelResponse* response) {
  auto* reactor = new CallbackUnaryCall(runtime_, "UnloadModel");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kAdmin)) return reactor;
  reactor->set_model_label(ModelLabel(runtime_, request->model()));
  StartModelControl(runtime_, model_control_, ModelControl::kUnload, request->model(),
                    DeadlineFromChrono(context->deadline()),
                    [reactor] { return reactor->cancelled(); },
                    [reactor](absl::Status s) { reactor->Reply(s); });
  return reactor;
}

grpc::ServerUnaryReactor* GroveService::RegisterSharedMemory(
    grpc::CallbackServerContext* context, const grove::v1::RegisterSharedMemoryRequest* request,
    grove::v1::RegisterSharedMemoryResponse* response) {
  auto* reactor = new CallbackUnaryCall(runtime_, "RegisterSharedMemory");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kAdmin)) return reactor;
  ReplySharedMemoryControl(runtime_, reactor, *context,
                           SharedMemoryControl::Register(request->name(), request->key(),
                                                         request->offset(), request->byte_size()));
  return reactor;
}

grpc::ServerUnaryReactor* GroveService::UnregisterSharedMemory(
    grpc::CallbackServerContext* context, const grove::v1::UnregisterSharedMemoryRequest* request,
    grove::v1::UnregisterSharedMemoryResponse* response) {
  auto* reactor = new CallbackUnaryCall(runtime_, "UnregisterSharedMemory");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kAdmin)) return reactor;
  ReplySharedMemoryControl(runtime_, reactor, *context,
                           SharedMemoryControl::Unregister(request->name()),
                           [response](std::vector<std::string> removed) {
                             for (std::string& name : removed) {
                               response->add_unregistered(std::move(name));
                             }
                           });
  return reactor;
}

grpc::ServerUnaryReactor* GroveService::GetSharedMemoryStatus(
    grpc::CallbackServerContext* context, const grove::v1::SharedMemoryStatusRequest* request,
    grove::v1::SharedMemoryStatusResponse* response) {
  auto* reactor = new CallbackUnaryCall(runtime_, "GetSharedMemoryStatus");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kInfer)) return reactor;
  absl::StatusOr<std::vector<serving::SharedMemoryRegionInfo>> regions =
      runtime_->shared_memory().Status(request->name(), reactor->principal());
  if (regions.ok()) {
    for (const serving::SharedMemoryRegionInfo& r : *regions) {
      grove::v1::SharedMemoryRegion* out = response->add_regions();
      out->set_name(r.name);
      out->set_key(r.key);
      out->set_offset(r.offset);
      out->set_byte_size(r.byte_size);
    }
  }
  reactor->Reply(regions.status());
  return reactor;
}

}  // namespace grove::server
