// CompletionQueues: groved's hot unary RPCs (grove.v1 Predict and Explain, KServe ModelInfer) on
// gRPC's asynchronous API, so that receiving, decoding, admitting, computing inline and answering
// them spreads over as many threads as the host has (gRPC 1.51 runs callback-API calls on a few
// threads of its own; every other RPC stays there).
//
// Threads and queues: N server completion queues (grpc::ServerBuilder::AddCompletionQueue), each
// drained by one thread of its own. Each queue has one slot per method: a call object whose request
// is posted to gRPC (a raw asynchronous method of the service, WithRawMethod_X::RequestX). gRPC
// gives an incoming call to a queue that has a slot of its method (first the queue of the call's
// connection, then the others); with none free, the call waits inside gRPC until a slot is posted.
//
// How a call flows, on the thread of the queue it was given to:
//   1. received: its bytes are decoded (INVALID_ARGUMENT naming the method when they cannot be:
//      server/grpc/rpc_errors.h, as the callback API's interceptor answers) -- for a method added with a
//      raw rows field, a large payload of raw rows is copied from the received slices into a host
//      buffer of the runtime's pool (server/grpc/wire_rows.h; in parallel over the compute pool) and
//      handed to the handler as UnaryCall::received_raw_rows, unless the pool is at its bound --
//      a UnaryCall is created
//      (server/call.h: in-flight metrics, cancellation) and the method's handler runs: the same
//      handler the callback API would run (GroveService::HandlePredict, ...). It answers at once
//      (an error, or a short call computed inline, without leaving this thread) or queues work,
//      whose last task answers from the batch thread that completes it.
//   2. only then is the queue's slot of that method posted again, so that a queue whose thread is
//      busy takes no new call and calls go to idle threads.
//   3. answered (UnaryCall::Reply, any thread): the response is encoded and the responder's Finish
//      started from that thread.
//   4. gRPC returns two tags to the queue: Finish's (the answer was sent or failed) and the done
//      tag (AsyncNotifyWhenDone: the call is over; cancelled when the client left or its deadline
//      passed, which cancels the call's queued work as the callback API's OnCancel does). The call
//      object is deleted on the queue's thread once both have come back.
//
// A call that waits inside gRPC for a free queue thread when the server shuts down has reached no
// handler: gRPC cancels it, as any call that arrives once shutdown began (the calls that reached
// their handler are answered; docs/operations.md "Shutdown").
//
// Lifecycle (GroveServer): construct (adds the queues to the builder) and AddMethod before
// grpc::ServerBuilder::BuildAndStart; Start after it; Shutdown after grpc::Server::Shutdown
// returned and every call was answered (Runtime::Shutdown), which shuts the queues down, drains
// them and joins the threads. The object must outlive the grpc::Server (gRPC's rule for its queues)
// and the services and runtime must outlive Shutdown.
//
// Thread-safety: construction, AddMethod, Start and Shutdown from one thread; the rest is internal
// (a queue's calls are touched by its thread, and by the one thread that answers each call).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/async_unary_call.h"
#include "core/serving/host_buffers.h"
#include "server/call.h"
#include "server/grpc/rpc_errors.h"
#include "server/runtime.h"
#include "server/grpc/wire_rows.h"

namespace grove::server {

// Bounds of ServerOptions::grpc_threads (0: one per hardware thread, at most kMaxGrpcThreads).
inline constexpr int kMaxGrpcThreads = 64;

// Threads for `requested` (0: the host's hardware threads), within 1..kMaxGrpcThreads.
int ResolveGrpcThreads(int requested);

// A request's raw rows received apart from its message (server/grpc/wire_rows.h).
struct ReceivedApart {
  std::string rest;                      // the request's other bytes, to parse as the message
  serving::HostBufferPool::Buffer rows;  // the raw rows, copied out of the received slices
  size_t bytes = 0;
};
// For a request of at least kMinSplitPayloadBytes whose raw rows at `where` split exactly and find
// a buffer in `runtime`'s host buffer pool: the rows copied there (over its compute pool) and the
// rest; nullopt otherwise (the request is then parsed whole). `request` is left as it was.
std::optional<ReceivedApart> ReceiveRawRowsApart(const grpc::ByteBuffer& request,
                                                 RawRowsField where, Runtime* runtime);

class CompletionQueues {
 public:
  using Responder = grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>;
  // Requests the next call of a method into (context, request bytes, responder) with `tag` on
  // `queue`: the generated WithRawMethod_X::RequestX of a registered service, with `queue` as both
  // its call and notification queue.
  using RequestFn =
      std::function<void(grpc::ServerContext* context, grpc::ByteBuffer* request,
                         Responder* responder, grpc::ServerCompletionQueue* queue, void* tag)>;
  // A method's handler (see the top of this file): answers `call` exactly once; `request` and
  // `response` live until then.
  template <typename Request, typename Response>
  using HandleFn = std::function<void(const grpc::ServerContextBase& context,
                                      const Request& request, Response* response, UnaryCall* call)>;

  // Adds `threads` (1..kMaxGrpcThreads) completion queues to `builder`. `runtime` (metrics of the
  // calls) is not owned.
  CompletionQueues(grpc::ServerBuilder* builder, int threads, Runtime* runtime);
  ~CompletionQueues();  // Shutdown()
  CompletionQueues(const CompletionQueues&) = delete;
  CompletionQueues& operator=(const CompletionQueues&) = delete;

  // Serves a method on every queue (before Start). `label`: its name in metrics ("Predict");
  // `path`: its full name ("/grove.v1.Grove/Predict"); both must outlive this object.
  // `raw_rows`: where the request keeps raw rows that are received outside the message when
  // large (see the top of this file); field 0: requests are parsed whole.
  template <typename Request, typename Response>
  void AddMethod(const char* label, const char* path, RequestFn request,
                 HandleFn<Request, Response> handle, RawRowsField raw_rows = {}) {
    methods_.push_back(std::make_unique<TypedMethod<Request, Response>>(
        runtime_, label, path, std::move(request), std::move(handle), raw_rows));
  }

  // AddMethod for `service`'s method X: `request` its generated WithRawMethod_X::RequestX (asked
  // with the queue as both call and notification queue), `handle` its handler. `service` must
  // outlive this object.
  template <typename Service, typename Request, typename Response>
  void AddServiceMethod(const char* label, const char* path, Service* service,
                        std::type_identity_t<void (Service::*)(
                            grpc::ServerContext*, grpc::ByteBuffer*, Responder*,
                            grpc::CompletionQueue*, grpc::ServerCompletionQueue*, void*)>
                            request,
                        void (Service::*handle)(const grpc::ServerContextBase&, const Request&,
                                                Response*, UnaryCall*),
                        RawRowsField raw_rows = {}) {
    AddMethod<Request, Response>(
        label, path,
        [service, request](grpc::ServerContext* context, grpc::ByteBuffer* bytes,
                           Responder* responder, grpc::ServerCompletionQueue* queue, void* tag) {
          (service->*request)(context, bytes, responder, queue, queue, tag);
        },
        [service, handle](const grpc::ServerContextBase& context, const Request& req,
                          Response* response,
                          UnaryCall* call) { (service->*handle)(context, req, response, call); },
        raw_rows);
  }

  // Posts a slot of every method on every queue and starts the threads (after BuildAndStart).
  void Start();
  // Stops posting, shuts the queues down, drains them (every call object is deleted) and joins the
  // threads. Call after grpc::Server::Shutdown returned and every call was answered. Idempotent.
  void Shutdown();

  int threads() const { return static_cast<int>(queues_.size()); }
  // The full paths of the methods added ("/grove.v1.Grove/Predict", ...).
  std::vector<std::string> method_paths() const;

 private:
  struct Queue {
    std::unique_ptr<grpc::ServerCompletionQueue> cq;
    std::thread thread;
    absl::Mutex mu;  // held only while a request is posted, so that none is posted after shutdown
    bool shut_down ABSL_GUARDED_BY(mu) = false;
  };

  // One call of a method on one queue, from its slot being posted until gRPC is done with it.
  class Slot {
   public:
    enum class Event { kReceived, kFinished, kDone };
    // What gRPC returns on the queue: a pointer to one of these (the tags of a slot).
    struct Tag {
      Slot* slot;
      Event event;
    };
    virtual ~Slot() = default;
    // Asks gRPC for the next call of the method into this slot (the queue's mu held).
    virtual void RequestCall() = 0;
    // One of the slot's tags came back (on its queue's thread). May delete the slot.
    virtual void Proceed(Event event, bool ok) = 0;
  };

  class Method {
   public:
    Method(Runtime* runtime, const char* label, const char* path, RequestFn request)
        : runtime_(runtime), label_(label), path_(path), request_(std::move(request)) {}
    virtual ~Method() = default;
    // Posts a new slot of this method on `queue` (none once the queue is shut down).
    void Post(Queue* queue);
    const char* path() const { return path_; }

   protected:
    // A new slot of this method on `queue`, not yet posted.
    virtual Slot* NewSlot(Queue* queue) = 0;

    Runtime* const runtime_;
    const char* const label_;
    const char* const path_;
    const RequestFn request_;
  };

  template <typename Request, typename Response>
  class TypedMethod;

  // The thread of `queue`: runs the tags it returns until it is shut down and empty.
  static void Drain(Queue* queue);

  Runtime* const runtime_;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::vector<std::unique_ptr<Method>> methods_;
  bool started_ = false;
  bool shut_down_ = false;
};

// ---- Implementation of the templates ----

template <typename Request, typename Response>
class CompletionQueues::TypedMethod final : public CompletionQueues::Method {
 public:
  TypedMethod(Runtime* runtime, const char* label, const char* path, RequestFn request,
              HandleFn<Request, Response> handle, RawRowsField raw_rows)
      : Method(runtime, label, path, std::move(request)),
        handle_(std::move(handle)),
        raw_rows_(raw_rows) {}

 private:
  class CallSlot;

  // The UnaryCall of a received request: answers through its slot.
  class Call final : public UnaryCall {
   public:
    Call(Runtime* runtime, const char* label, CallSlot* slot)
        : UnaryCall(runtime, label), slot_(slot) {}
    using UnaryCall::Cancelled;

   private:
    void Send(const grpc::Status& status) override { slot_->Send(status); }

    CallSlot* const slot_;
  };

  class CallSlot final : public Slot {
   public:
    CallSlot(TypedMethod* method, Queue* queue) : method_(method), queue_(queue) {}

    void RequestCall() override {
      context_.AsyncNotifyWhenDone(&done_tag_);
      method_->request_(&context_, &wire_request_, &responder_, queue_->cq.get(), &received_tag_);
    }

    void Proceed(Event event, bool ok) override {
      switch (event) {
        case Event::kReceived:
          // Not ok: the server shut down before a call came; no other tag will.
          if (!ok) {
            delete this;
            return;
          }
          Handle();
          // The thread is free again: only now may this queue take another call of the method.
          method_->Post(queue_);
          break;
        case Event::kFinished:
          finished_ = true;
          break;
        case Event::kDone:
          done_ = true;
          if (context_.IsCancelled()) {
            if (call_.has_value()) {
              call_->Cancelled();
            } else {
              cancelled_early_ = true;
            }
          }
          break;
      }
      if (finished_ && done_) delete this;
    }

    // The answer (Call::Send, on any thread): encodes the response and starts Finish, the last
    // thing that touches the slot off its queue's thread.
    void Send(const grpc::Status& status) {
      if (!status.ok()) {
        responder_.FinishWithError(status, &finished_tag_);
        return;
      }
      grpc::ByteBuffer bytes;
      bool own = false;
      grpc::Status encoded =
          grpc::SerializationTraits<Response>::Serialize(response_, &bytes, &own);
      if (!encoded.ok()) {
        responder_.FinishWithError(encoded, &finished_tag_);
        return;
      }
      responder_.Finish(bytes, grpc::Status::OK, &finished_tag_);
    }

   private:
    void Handle() {
      const grpc::Status decoded = Decode();
      if (!decoded.ok()) {
        // As the callback API answers (its interceptor): no handler ran, nothing is counted.
        responder_.FinishWithError(UndecodableRequestStatus(method_->path_), &finished_tag_);
        return;
      }
      call_.emplace(method_->runtime_, method_->label_, this);
      if (received_) {
        call_->set_received_raw_rows(absl::string_view(received_.data(), received_bytes_));
      }
      if (cancelled_early_) call_->Cancelled();
      method_->handle_(context_, request_, &response_, &*call_);
    }

    // Parses the request; with the method's raw rows field, a large payload goes from the
    // received slices into received_ instead of into the message.
    grpc::Status Decode() {
      if (method_->raw_rows_.field > 0) {
        std::optional<ReceivedApart> apart =
            ReceiveRawRowsApart(wire_request_, method_->raw_rows_, method_->runtime_);
        if (apart.has_value()) {
          // Parsing the rest fails exactly when parsing the whole would (server/grpc/wire_rows.h).
          if (!request_.ParseFromString(apart->rest)) {
            return grpc::Status(grpc::StatusCode::INTERNAL, "undecodable request");
          }
          received_ = std::move(apart->rows);
          received_bytes_ = apart->bytes;
          wire_request_.Clear();
          return grpc::Status::OK;
        }
      }
      return grpc::SerializationTraits<Request>::Deserialize(&wire_request_, &request_);
    }

    TypedMethod* const method_;
    Queue* const queue_;
    grpc::ServerContext context_;
    grpc::ByteBuffer wire_request_;
    serving::HostBufferPool::Buffer received_;  // the raw rows when received apart
    size_t received_bytes_ = 0;
    Responder responder_{&context_};
    Request request_;
    Response response_;
    std::optional<Call> call_;  // once received and decoded
    Tag received_tag_{this, Event::kReceived};
    Tag finished_tag_{this, Event::kFinished};
    Tag done_tag_{this, Event::kDone};
    // The queue thread's state.
    bool finished_ = false;
    bool done_ = false;
    bool cancelled_early_ = false;  // the done tag, cancelled, came before the request was handled
  };

  Slot* NewSlot(Queue* queue) override { return new CallSlot(this, queue); }

  const HandleFn<Request, Response> handle_;
  const RawRowsField raw_rows_;
};

}  // namespace grove::server
