// Waiting for a GPU's work without holding a host core for all of it, shared by the GPU engines.
// Needs cuda_runtime_api.h: included only from CUDA-enabled translation units.
//
// Why: with one CUDA context on many cores, CUDA's default wait spins the waiting thread until the
// GPU finishes: a batch thread waiting for a large call's copies and kernel holds a core that
// gRPC's transport needs when groved and its clients share a host. Sleeping at once frees it but
// adds the wake-up to every small call; polling first keeps small and mid-size calls as fast as
// spinning and most of the saving for large ones (docs/benchmarks/serving.md, "The GPU engine's
// wait").
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace grove::gpu {

// How long WaitForEvent polls before it sleeps: longer than a small batch's whole GPU time
// (tens of microseconds), a small part of a large one's.
inline constexpr absl::Duration kWaitSpin = absl::Microseconds(50);

// Creates an event for WaitForEvent: no timing, and a blocking wait (cudaEventBlockingSync) for
// cudaEventSynchronize. CudaStatus of the driver's error, naming `what`. Thread-safe.
absl::Status CreateWaitEvent(cudaEvent_t* event, absl::string_view what);

// Returns when the work before `event`'s last record has finished: polls it for up to `spin`, then
// sleeps in the driver until it completes (the event must come from CreateWaitEvent; any other
// event spins or yields as the device's flags say). An error of that work, or of the wait, as
// CudaStatus naming `what`. Thread-safe (per event, as CUDA's event calls).
absl::Status WaitForEvent(cudaEvent_t event, absl::string_view what,
                          absl::Duration spin = kWaitSpin);

}  // namespace grove::gpu
