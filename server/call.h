// What every RPC handler of groved shares: a unary call (UnaryCall) that records the call's metrics
// and cancels its queued work when the client goes away, and the submission of a call's compute
// tasks.
//
// A unary call reaches its handler on one of two transports, with the same handler code: gRPC's
// callback API (CallbackUnaryCall, a ServerUnaryReactor: every RPC but the hot ones) or groved's
// completion queues (server/grpc/completion_queues.h: Predict, Explain, ModelInfer). Handlers see only
// UnaryCall and grpc::ServerContextBase.
//
// Handlers never block: they validate, convert, Submit tasks and return; the last task to finish
// (on a batch executor thread) finishes the call. A short task that finds the engines idle is
// computed inside Submit (serving_core.h, inline_compute), so the call may be finished on the
// handler's own thread before the handler returns (both transports allow that).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/auth/authorizer.h"
#include "grpcpp/grpcpp.h"
#include "prometheus/gauge.h"
#include "server/runtime.h"
#include "server/grpc/status.h"

namespace grove::server {

// The `model` label of a call naming `name`: the name when the repository knows it, "_unknown"
// otherwise (callers cannot create series).
std::string ModelLabel(Runtime* runtime, const std::string& name);

// Submits `tasks` (all pointing at `call`, which was created with tasks.size()). A task that
// cannot be queued is answered with its error, the tasks after it as well, and the call is
// cancelled so that its queued tasks are dropped: `call`'s done runs exactly once either way.
void SubmitAll(Runtime* runtime, std::vector<std::unique_ptr<ComputeTask>> tasks,
               const std::shared_ptr<CallState>& call);

// What an inference call (Predict, Explain, an ExplainStream message, ModelInfer) resolved, for
// the per-version statistics (Metrics::RecordInference): the model version that answers it and
// its rows. Version 0: no version was resolved (an unknown model or version, or not an inference
// call), and nothing is counted. Written by the handler before it queues any work.
struct ResolvedCall {
  int64_t version = 0;
  int64_t rows = 0;
};

// Records a finished call of any transport: grove_requests_total by `code` (OK counted as
// CANCELLED / DEADLINE_EXCEEDED by the caller when nobody received it), for a successful
// compute call (`observe_latency`) its latency since `start` under `op`, and for an inference
// call that resolved a version its outcome and latency under that version.
void RecordFinishedCall(Runtime* runtime, const std::string& model_label, const char* method,
                        absl::StatusCode code, absl::Time start, bool observe_latency,
                        Operation op, const ResolvedCall& resolved = {});

class UnaryCall;
struct SharedMemoryControl;  // server/control.h

// Runs a shared memory registration or unregistration for `reactor` (StartSharedMemoryControl:
// on the control thread, not applied when the call's deadline passed or it was cancelled while it
// waited) and replies with its status; `unregistered` (may be null) first receives the names
// removed. The caller has admitted the call.
void ReplySharedMemoryControl(
    Runtime* runtime, UnaryCall* reactor, const grpc::ServerContextBase& context,
    SharedMemoryControl request,
    std::function<void(std::vector<std::string>)> unregistered = nullptr);

// One unary call as its handler sees it, whatever the transport. Created when the request has been
// received (the call counts as in flight until it is destroyed), answered exactly once by Reply.
//
// Thread-safe: Reply, cancelled and Cancelled may run on any thread; the setters are for the
// handler, before it queues work.
class UnaryCall {
 public:
  UnaryCall(Runtime* runtime, const char* method);
  virtual ~UnaryCall();
  UnaryCall(const UnaryCall&) = delete;
  UnaryCall& operator=(const UnaryCall&) = delete;

  void set_model_label(std::string label) { model_label_ = std::move(label); }
  // Observed in grove_request_duration_seconds on success (compute calls only).
  void set_operation(Operation op) {
    op_ = op;
    observe_latency_ = true;
  }
  // The call's compute state, cancelled when the client cancels. Set before the handler returns.
  void set_call(std::shared_ptr<CallState> call);
  // Filled by the handler before it queues work; read by Reply (the queue orders the two).
  ResolvedCall* resolved() { return &resolved_; }
  // Who the call is (auth::CallerPrincipal), set by Admit: what it may reach of shared memory.
  const std::string& principal() const { return principal_; }
  // The request's raw rows (grove.v1 Matrix.raw_f32, KServe's one raw_input_contents) when the
  // transport received them apart from the message (server/grpc/wire_rows.h: the message's own field is
  // then empty); empty otherwise. Handlers read the rows from here (RowsFromMatrix,
  // ParseKserveInput). The bytes stay valid until the call is answered.
  absl::string_view received_raw_rows() const { return received_raw_rows_; }
  // For the transport, before the handler runs.
  void set_received_raw_rows(absl::string_view bytes) { received_raw_rows_ = bytes; }

  // Records metrics and answers the RPC (Send). Exactly once; the call may be destroyed as soon as
  // it returns (by the transport, on another thread), so nothing may touch it afterwards.
  void Reply(const absl::Status& status);
  // The client cancelled the call (or its deadline passed); any thread.
  bool cancelled() const {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }

  // Access control (server/grpc/auth.h), first thing in every handler: true when the call may go on;
  // otherwise the call is answered with the UNAUTHENTICATED / PERMISSION_DENIED status (the
  // handler must then only return).
  bool Admit(const auth::Authorizer* authorizer, const grpc::ServerContextBase& context,
             auth::Role required);

 protected:
  // The transport's answer: `status`, and on OK the response the handler filled. Called once, by
  // Reply, as its last step.
  virtual void Send(const grpc::Status& status) = 0;
  // The transport learnt that the client cancelled the call or its deadline passed (any time,
  // also after Reply): queued work of the call is dropped and an OK answer counts as CANCELLED.
  void Cancelled();

 private:
  Runtime* const runtime_;
  const char* const method_;
  const absl::Time start_;
  prometheus::Gauge* const inflight_;  // grove_inflight_requests of method_
  std::string model_label_;
  Operation op_ = Operation::kPredict;
  bool observe_latency_ = false;
  ResolvedCall resolved_;
  absl::string_view received_raw_rows_;
  mutable absl::Mutex mu_;
  std::string principal_;  // written by Admit, before the handler reads it
  std::shared_ptr<CallState> call_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

// A unary call on gRPC's callback API: the handler creates it with `new` and returns it to gRPC;
// it deletes itself when gRPC is done with it (OnDone).
class CallbackUnaryCall final : public grpc::ServerUnaryReactor, public UnaryCall {
 public:
  CallbackUnaryCall(Runtime* runtime, const char* method) : UnaryCall(runtime, method) {}

  void OnCancel() override { Cancelled(); }
  void OnDone() override { delete this; }

 private:
  void Send(const grpc::Status& status) override { Finish(status); }
};

}  // namespace grove::server

// Inside a gRPC callback service's class: the declaration of its override of the unary RPC
// `method`, whose messages are ns::<method>Request and ns::<method>Response (the generated
// signature, the same for every unary RPC but for the names). An RPC whose messages are named
// otherwise is declared in full.
#define GROVE_UNARY_RPC(ns, method)                                               \
  grpc::ServerUnaryReactor* method(grpc::CallbackServerContext* context,          \
                                   const ns::method##Request* request,            \
                                   ns::method##Response* response) override
