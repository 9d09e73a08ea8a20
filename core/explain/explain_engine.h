// ExplainEngine: one model's explanation engine, built once at model load.
//
// Owns the model's derived layouts (GPU path layouts when a GPU is there) and picks, per call, where
// and how to run. Thread-safe: Explain may be called concurrently; it blocks until `out` is filled.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/common/rows.h"
#include "core/common/run_info.h"
#include "core/explain/explain.h"
#include "core/model/forest.h"

namespace grove {

class ThreadPool;

struct ExplainEngineOptions {
  bool use_gpu = true;
  std::string strategy = "auto";  // "auto", "cpu", or an explanation strategy name
};

class ExplainEngine {
 public:
  virtual ~ExplainEngine() = default;
  static absl::StatusOr<std::unique_ptr<ExplainEngine>> Create(ForestPtr forest,
                                                                const ExplainEngineOptions& options,
                                                                ThreadPool* pool);
  // Host rows in, host results out. `out` is rows.rows x ExplainWidth(forest, interactions).
  virtual absl::Status Explain(RowsView rows, const ExplainOptions& options, MatrixView<float> out,
                               RunInfo* info) const = 0;
  virtual std::string Describe() const = 0;
  virtual int64_t DeviceBytes() const = 0;
};

}  // namespace grove
