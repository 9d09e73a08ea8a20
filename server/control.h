// Model and shared memory control, the operations grove.v1 and KServe (gRPC and REST) both serve:
// each runs on the runtime's control thread (a load or a pin hook may take a while) and answers
// `done` there. Thread-safe (state lives in the Runtime).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/runtime.h"

namespace grove::server {

// Model control shared by grove.v1 LoadModel / UnloadModel and KServe RepositoryModelLoad /
// Unload: UNIMPLEMENTED naming --model_control when it is off; otherwise runs the (blocking) load
// or unload on the runtime's control thread and calls `done` there. A call whose deadline passed,
// or for which `cancelled` answers true, while it waited is answered without being applied.
enum class ModelControl { kLoad, kUnload };
void StartModelControl(Runtime* runtime, bool model_control, ModelControl op, std::string model,
                       absl::Time deadline, std::function<bool()> cancelled,
                       std::function<void(absl::Status)> done);

// Shared memory control shared by grove.v1 RegisterSharedMemory / UnregisterSharedMemory and
// KServe SystemSharedMemoryRegister / Unregister (gRPC and REST): UNIMPLEMENTED naming
// --shared_memory when the runtime's shared memory is off; otherwise runs on the runtime's control
// thread (a pin hook may take a while) and calls `done` there, with the registry's status and, for
// an unregistration, the names removed. Deadline and cancellation as StartModelControl: a call that
// waited past them is answered without being applied.
struct SharedMemoryControl {
  enum class Op { kRegister, kUnregister };
  static SharedMemoryControl Register(std::string name, std::string key, uint64_t offset,
                                      uint64_t byte_size) {
    return {Op::kRegister, std::move(name), std::move(key), "", offset, byte_size};
  }
  static SharedMemoryControl Unregister(std::string name) {
    return {Op::kUnregister, std::move(name), "", "", 0, 0};
  }
  Op op = Op::kRegister;
  std::string name;  // kUnregister: "" = every region of `owner`
  std::string key;    // kRegister only
  std::string owner;  // the caller (auth::CallerPrincipal): it owns what it registers
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};
void StartSharedMemoryControl(
    Runtime* runtime, SharedMemoryControl request, absl::Time deadline,
    std::function<bool()> cancelled,
    std::function<void(absl::Status, std::vector<std::string> unregistered)> done);

}  // namespace grove::server
