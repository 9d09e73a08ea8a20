#include "server/grpc/completion_queues.h"

#include <pthread.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/cpus.h"
#include "core/common/host_copy.h"

namespace grove::server {

int ResolveGrpcThreads(int requested) {
  if (requested > 0) return std::min(requested, kMaxGrpcThreads);
  return std::clamp(UsableCpus(), 1, kMaxGrpcThreads);
}

std::optional<ReceivedApart> ReceiveRawRowsApart(const grpc::ByteBuffer& request,
                                                 RawRowsField where, Runtime* runtime) {
  if (request.Length() < kMinSplitPayloadBytes) return std::nullopt;
  std::vector<grpc::Slice> slices;  // references to the received bytes, not copies
  if (!request.Dump(&slices).ok()) return std::nullopt;
  std::vector<WirePiece> pieces;
  pieces.reserve(slices.size());
  for (const grpc::Slice& slice : slices) {
    pieces.push_back(WirePiece{reinterpret_cast<const char*>(slice.begin()), slice.size()});
  }
  std::optional<RawRowsSplit> split = SplitRawRows(pieces, where);
  if (!split.has_value()) return std::nullopt;
  ReceivedApart out;
  out.rows = runtime->host_buffers().Acquire(static_cast<int64_t>(split->payload_bytes));
  if (!out.rows) return std::nullopt;  // the pool is at its bound
  out.bytes = split->payload_bytes;
  std::vector<CopyPiece> copies;
  copies.reserve(split->payload.size());
  char* dst = out.rows.data();
  for (const WirePiece& piece : split->payload) {
    copies.push_back(CopyPiece{dst, piece.data, piece.size});
    dst += piece.size;
  }
  CopyPieces(runtime->pool(), copies);
  out.rest = std::move(split->rest);
  return out;
}

CompletionQueues::CompletionQueues(grpc::ServerBuilder* builder, int threads, Runtime* runtime)
    : runtime_(runtime) {
  threads = std::clamp(threads, 1, kMaxGrpcThreads);
  for (int i = 0; i < threads; ++i) {
    auto queue = std::make_unique<Queue>();
    queue->cq = builder->AddCompletionQueue();
    queues_.push_back(std::move(queue));
  }
}

CompletionQueues::~CompletionQueues() { Shutdown(); }

void CompletionQueues::Method::Post(Queue* queue) {
  Slot* slot = NewSlot(queue);
  {
    absl::MutexLock lock(&queue->mu);
    if (!queue->shut_down) {
      slot->RequestCall();
      return;
    }
  }
  delete slot;
}

std::vector<std::string> CompletionQueues::method_paths() const {
  std::vector<std::string> paths;
  for (const std::unique_ptr<Method>& method : methods_) paths.emplace_back(method->path());
  return paths;
}

void CompletionQueues::Start() {
  if (started_ || shut_down_) return;
  started_ = true;
  for (size_t i = 0; i < queues_.size(); ++i) {
    Queue* queue = queues_[i].get();
    for (const std::unique_ptr<Method>& method : methods_) method->Post(queue);
    queue->thread = std::thread([queue, i] {
      // "grove-cq-N" in top, perf and /proc (15 characters at most).
      pthread_setname_np(pthread_self(), absl::StrCat("grove-cq-", i).c_str());
      Drain(queue);
    });
  }
}

void CompletionQueues::Drain(Queue* queue) {
  void* tag = nullptr;
  bool ok = false;
  while (queue->cq->Next(&tag, &ok)) {
    auto* t = static_cast<Slot::Tag*>(tag);
    t->slot->Proceed(t->event, ok);
  }
}

void CompletionQueues::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  for (const std::unique_ptr<Queue>& queue : queues_) {
    {
      absl::MutexLock lock(&queue->mu);
      queue->shut_down = true;
    }
    // No slot is posted any more: the queue may shut down (outside the lock: nothing waits here).
    queue->cq->Shutdown();
  }
  for (const std::unique_ptr<Queue>& queue : queues_) {
    if (queue->thread.joinable()) {
      queue->thread.join();
    } else {
      Drain(queue.get());  // never started: empty, returns at once
    }
  }
}

}  // namespace grove::server
