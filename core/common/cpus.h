// How many CPUs this process may run on: its affinity mask (a container's cpuset, taskset,
// numactl), not the host's hardware threads. A default thread count sized by the host would, in a
// container given 4 of 64 CPUs, start 64 threads that share 4 and spin against each other.
// Thread-safe.
#pragma once

namespace grove {

// At least 1: the CPUs of the affinity mask, or std::thread::hardware_concurrency() where the
// mask cannot be read.
int UsableCpus();

}  // namespace grove
