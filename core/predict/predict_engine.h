// PredictEngine: one model's prediction engine, built once at model load.
//
// Owns the model's derived layouts (on the GPU when one is there) and picks, per call, where and how
// to run (CPU reference or a GPU strategy) from calibrated costs. Thread-safe: Predict may be called
// concurrently from any thread; it blocks until the results are in `out`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/common/rows.h"
#include "core/common/run_info.h"
#include "core/model/forest.h"
#include "core/predict/predict.h"

namespace grove {

class ThreadPool;

// How a call's thread waits for the GPU's work on host rows (copies in, kernels, copies out).
//  kShareCore: polls briefly (about a small batch's whole GPU time), then sleeps in the driver, so
//    that a long call holds no core that a server's transport needs while it waits (groved).
//  kPoll: polls up to a millisecond before it sleeps, so that calls of up to about a millisecond
//    end without the driver's wake-up (tens of microseconds), for callers whose thread has nothing
//    else to do while it waits (the CLI, groveml in process).
// Calls on device-resident rows always poll up to a millisecond (no transport shares their wait).
enum class GpuWait : uint8_t { kShareCore, kPoll };

struct PredictEngineOptions {
  bool use_gpu = true;            // use visible GPUs when built with CUDA
  GpuWait gpu_wait = GpuWait::kShareCore;
  std::string strategy = "auto";  // "auto", "cpu", or a GPU strategy name (tests, benchmarks)
  std::string calibration_cache_dir;  // where GPU calibration is cached ("" = no cache)
};

class PredictEngine {
 public:
  virtual ~PredictEngine() = default;
  // `pool` (not owned, may be nullptr) runs the CPU path and must outlive the engine.
  static absl::StatusOr<std::unique_ptr<PredictEngine>> Create(ForestPtr forest,
                                                                const PredictEngineOptions& options,
                                                                ThreadPool* pool);
  // Host rows in, host results out. `out` is rows.rows x PredictWidth(forest, options).
  virtual absl::Status Predict(RowsView rows, const PredictOptions& options, MatrixView<float> out,
                               RunInfo* info) const = 0;
  // One row (forest.num_features values) to `out` (PredictWidth values) by the CPU strategy on
  // the calling thread, whatever devices the engine has: for callers that answer a row at a time
  // (no pool hop, no device round trip, no allocation for models of up to 64 outputs).
  virtual absl::Status PredictRow(const float* row, const PredictOptions& options,
                                  float* out) const = 0;
  // Bytes of derived layouts resident on each device ("cpu" excluded).
  virtual std::string Describe() const = 0;
  virtual int64_t DeviceBytes() const = 0;
};

}  // namespace grove
