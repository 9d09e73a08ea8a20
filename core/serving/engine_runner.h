// EngineRunner: how the serving core computes rows of a task. The default runs the task's pinned
// model engines; tests inject a fake engine.
//
// Thread-safe: Run is called from several executor threads at once.
#pragma once

#include "absl/status/status.h"
#include "core/common/rows.h"
#include "core/common/run_info.h"
#include "core/serving/compute_task.h"

namespace grove::serving {

class EngineRunner {
 public:
  virtual ~EngineRunner() = default;
  // Computes `rows` (rows of tasks that share `task`'s model copy, output kind and iteration
  // range) into `out` (rows.rows x the operation's width).
  virtual absl::Status Run(const ComputeTask& task, RowsView rows, MatrixView<float> out,
                           RunInfo* info) = 0;
};

// Runs the task's operation on its model version's Servable.
class ServableEngineRunner final : public EngineRunner {
 public:
  absl::Status Run(const ComputeTask& task, RowsView rows, MatrixView<float> out,
                   RunInfo* info) override;
};

}  // namespace grove::serving
