// Bounded polling before a blocking wait: for hand-offs between threads that usually complete
// within microseconds, where a sleep and a wake-up through the kernel cost tens of them.
#pragma once

#include <chrono>

#include "core/common/cpus.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace grove {

// One polling step: tells the core this is a spin loop (on x86 it yields the pipeline to the
// sibling hyperthread and saves power).
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// How long threads that hand work to each other poll before they sleep.
inline constexpr std::chrono::microseconds kDefaultSpin{200};
// A spin that ChooseSpin decides: kDefaultSpin where the polling threads fit the machine, else 0.
inline constexpr std::chrono::microseconds kAutoSpin{-1};

// `requested` where it is >= 0; otherwise kDefaultSpin where `threads` polling threads and their
// caller fit the usable CPUs (UsableCpus), else 0: spinning threads that outnumber the cores
// would take them from the work they wait for.
inline std::chrono::microseconds ChooseSpin(int threads, std::chrono::microseconds requested) {
  if (requested.count() >= 0) return requested;
  return threads + 1 <= UsableCpus() ? kDefaultSpin : std::chrono::microseconds(0);
}

// Calls `ready` (cheap and thread-safe; it may act, as a try_lock does, and is called again only
// after it returned false) until it returns true or `spin` has passed; returns its last answer.
// spin <= 0: one call. The caller falls back to a blocking wait.
template <class Ready>
bool SpinUntil(std::chrono::microseconds spin, const Ready& ready) {
  if (spin.count() <= 0) return ready();
  const auto deadline = std::chrono::steady_clock::now() + spin;
  for (;;) {
    // The clock is read once per 64 polls: a poll is a few nanoseconds, a clock read tens.
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return ready();
  }
}

}  // namespace grove
