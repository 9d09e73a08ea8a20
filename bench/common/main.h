// The main of every bench program (bench programs only).
#pragma once

namespace grove::bench {

// Turns absl::Mutex deadlock detection off (core/common/mutex_mode.h: every program's main does)
// and runs `program`, returning its exit status.
int RunMain(int argc, char** argv, int (*program)(int argc, char** argv));

}  // namespace grove::bench
