// Process-wide absl::Mutex mode of Grove's programs (groved, the grove CLI, the bench programs, the
// Python module), set first thing in main().
#pragma once

namespace grove {

// Turns off absl::Mutex deadlock detection for the process. Debian's libabsl (20220623) is built
// without NDEBUG, so detection is on by default there: every Mutex::Lock -- Grove's and gRPC's,
// which share the library -- then looks the mutex up in a lock graph guarded by one process-wide
// spinlock. Measured on the 2-core box: 510 ns per uncontended lock and unlock with two threads,
// 19 ns without; 5-8% of groved's CPU on single-row Predict (GraphCycles), and on the H100 host 7%
// of `grove bench`'s own CPU (its spinlock and graph lookups). Tests keep detection on (lock-order
// inversions are worth catching there).
// Idempotent and thread-safe; locks taken before the call are forgotten harmlessly.
void DisableMutexDeadlockDetection();

}  // namespace grove
