#include "server/call.h"

#include <utility>

#include "server/grpc/auth.h"
#include "server/convert.h"
#include "server/control.h"

namespace grove::server {

std::string ModelLabel(Runtime* runtime, const std::string& name) {
  return runtime->registry().Contains(name) ? name : std::string(kUnknownModelLabel);
}

void SubmitAll(Runtime* runtime, std::vector<std::unique_ptr<ComputeTask>> tasks,
               const std::shared_ptr<CallState>& call) {
  size_t i = 0;
  absl::Status error;
  for (; i < tasks.size(); ++i) {
    error = runtime->Submit(std::move(tasks[i]));
    if (!error.ok()) break;
  }
  if (error.ok()) return;
  // The error is recorded first, so that it (not CANCELLED) is the call's status.
  for (; i < tasks.size(); ++i) call->TaskDone(error);
  call->Cancel();
}

void RecordFinishedCall(Runtime* runtime, const std::string& model_label, const char* method,
                        absl::StatusCode code, absl::Time start, bool observe_latency,
                        Operation op, const ResolvedCall& resolved) {
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  const bool ok = code == absl::StatusCode::kOk;
  runtime->metrics().RecordRequest(model_label, method, code, ok && observe_latency ? elapsed : -1,
                                   op);
  if (resolved.version > 0) {
    runtime->metrics().RecordInference(model_label, resolved.version, ok, elapsed, resolved.rows);
  }
}

void ReplySharedMemoryControl(Runtime* runtime, UnaryCall* reactor,
                              const grpc::ServerContextBase& context,
                              SharedMemoryControl request,
                              std::function<void(std::vector<std::string>)> unregistered) {
  request.owner = reactor->principal();
  StartSharedMemoryControl(
      runtime, std::move(request), DeadlineFromChrono(context.deadline()),
      [reactor] { return reactor->cancelled(); },
      [reactor, unregistered = std::move(unregistered)](absl::Status s,
                                                        std::vector<std::string> removed) {
        if (unregistered) unregistered(std::move(removed));
        reactor->Reply(s);
      });
}

UnaryCall::UnaryCall(Runtime* runtime, const char* method)
    : runtime_(runtime),
      method_(method),
      start_(absl::Now()),
      inflight_(runtime->metrics().InflightGauge(method)) {
  inflight_->Increment();
}

UnaryCall::~UnaryCall() { inflight_->Decrement(); }

void UnaryCall::set_call(std::shared_ptr<CallState> call) {
  bool cancelled;
  {
    absl::MutexLock lock(&mu_);
    call_ = call;
    cancelled = cancelled_;
  }
  // Outside the lock: a cancelled task may be answered at once, on this thread.
  if (cancelled) call->Cancel();
}

void UnaryCall::Reply(const absl::Status& status) {
  // An answer computed after the caller left reaches nobody: it counts as the caller's outcome,
  // not as OK.
  absl::StatusCode counted = status.code();
  if (status.ok()) {
    absl::MutexLock lock(&mu_);
    if (cancelled_) {
      counted = absl::StatusCode::kCancelled;
    } else if (call_ != nullptr && call_->deadline() <= absl::Now()) {
      counted = absl::StatusCode::kDeadlineExceeded;
    }
  }
  RecordFinishedCall(runtime_, model_label_, method_, counted, start_, observe_latency_, op_,
                     resolved_);
  Send(ToGrpcStatus(status));
}

bool UnaryCall::Admit(const auth::Authorizer* authorizer, const grpc::ServerContextBase& context,
                      auth::Role required) {
  absl::Status s = Authorize(authorizer, context, required, method_, &principal_);
  if (s.ok()) return true;
  Reply(s);
  return false;
}

void UnaryCall::Cancelled() {
  std::shared_ptr<CallState> call;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    call = call_;
  }
  // Outside the lock: a cancelled task may be answered at once, on this thread (Reply).
  if (call != nullptr) call->Cancel();
}

}  // namespace grove::server
