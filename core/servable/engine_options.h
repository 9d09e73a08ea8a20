// EngineOptions: how a Servable's engines are built (BuildServable), from groved's flags and a
// model's config.json, the CLI's flags or groveml's arguments.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/predict/predict_engine.h"

namespace grove {

// Where a model's engines may run. kAuto: the GPU engines when the build has CUDA and a GPU is
// visible (small batches still run the CPU strategy), else the CPU; kCpu: the CPU only; kGpu:
// FAILED_PRECONDITION at build time when the build has no CUDA engines.
enum class Device : uint8_t { kAuto, kCpu, kGpu };
// "auto", "cpu", "gpu".
const char* DeviceName(Device device);
// The names above; INVALID_ARGUMENT naming the accepted ones otherwise.
absl::StatusOr<Device> ParseDevice(absl::string_view name);

// When the engines are built. kAtLoad: all of them in BuildServable, so that a server reports a
// model's faults and pays its calibration at load, never on a request. kOnFirstUse: each on the
// first call that needs it (the CLI and groveml, where a predict-only job should not build the
// path layout of explanations).
enum class EngineBuild : uint8_t { kAtLoad, kOnFirstUse };

struct EngineOptions {
  Device device = Device::kAuto;
  EngineBuild build = EngineBuild::kAtLoad;
  // A forced strategy per engine family, by the family's name ("auto": the engine's selector;
  // "cpu": the cheapest CPU strategy of the family, no GPU). BuildServable checks each against its
  // family's table and answers INVALID_ARGUMENT for an unknown name, whatever `build` says.
  std::string predict_strategy = "auto";         // strategy_id.h StrategyName
  std::string explain_strategy = "auto";         // explain_engine.h strategy names
  std::string interventional_strategy = "auto";  // InterventionalStrategyName
  // Where GPU calibration is cached ("" = no cache).
  std::string calibration_cache_dir;
  // How a prediction's thread waits for the GPU (predict_engine.h GpuWait): a server shares its
  // cores with its transport; in-process callers poll.
  GpuWait gpu_wait = GpuWait::kShareCore;
  // What Available(kInterventional) answers for a model without a background data set (how to add
  // one where the caller keeps it); "" = a generic message.
  std::string no_background_message;
};

}  // namespace grove
