#include "core/common/mutex_mode.h"

#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace grove {
namespace {

// Two mutexes taken in both orders: a lock-order inversion, which Abseil's deadlock detection
// reports (and aborts on, in its default mode) where it is on.
void Inversion() {
  absl::Mutex a, b;
  a.Lock();
  b.Lock();
  b.Unlock();
  a.Unlock();
  b.Lock();
  a.Lock();
  a.Unlock();
  b.Unlock();
}

// Debian's Abseil, which the project builds against, has detection on (built without NDEBUG): an
// inversion aborts. Each case runs in a child process, so this test binary keeps its own mode.
TEST(MutexModeDeathTest, DebiansAbseilDetectsInversions) {
  EXPECT_DEATH(Inversion(), "");
}

// Once turned off, the same inversion goes through: the programs that call
// DisableMutexDeadlockDetection pay no lock-graph bookkeeping on any Mutex::Lock.
TEST(MutexModeDeathTest, TurnedOffAnInversionGoesThrough) {
  EXPECT_EXIT(
      {
        DisableMutexDeadlockDetection();
        Inversion();
        DisableMutexDeadlockDetection();  // idempotent
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace grove
