// What the serving core reports, so that server/metrics.cc turns it into Prometheus series while
// core/ stays free of Prometheus (and tests count events without either).
//
// Every task admitted ends in exactly one of Delivered, Failed or Dropped; a task refused at
// admission only gets Refused. Rows are the task's rows; `computed_rows` of a drop are rows computed
// before the caller went away (wasted work).
//
// Thread-safe: methods are called from RPC threads and executor threads at once; they must be quick
// and must not call back into the core.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "core/common/run_info.h"
#include "core/registry/model_config.h"
#include "core/serving/outcome.h"

namespace grove::serving {

// One (model, operation) queue's events.
class QueueObserver {
 public:
  virtual ~QueueObserver() = default;
  virtual void Admitted(int64_t rows) {}
  virtual void Refused(DropReason reason, int64_t rows) {}
  virtual void Dropped(DropReason reason, int64_t rows, int64_t computed_rows) {}
  virtual void Delivered(int64_t rows) {}
  virtual void Failed(int64_t rows) {}
  // A batch starts: its rows, tasks, and one queue wait per task, with the version of the task's
  // pinned model (a model's versions share its queues; Triton's statistics are per version).
  virtual void BatchStarted(int64_t rows, int64_t tasks) {}
  virtual void QueueWait(int64_t version, absl::Duration wait) {}
  // One engine call (a chunk of a batch, all of one model version) finished.
  virtual void Computed(int64_t version, int64_t rows, double seconds, const RunInfo& info,
                        bool ok) {}
  virtual void QueueDepth(int64_t queued_tasks, int64_t queued_rows) {}
};

class ServingObserver {
 public:
  virtual ~ServingObserver() = default;
  // Called once per (model, operation), the first time the core needs its queue.
  virtual std::unique_ptr<QueueObserver> ForQueue(const std::string& model,
                                                  Operation op) = 0;
};

// Ignores everything.
class NullServingObserver final : public ServingObserver {
 public:
  std::unique_ptr<QueueObserver> ForQueue(const std::string&, Operation) override {
    return std::make_unique<QueueObserver>();
  }
};

}  // namespace grove::serving
