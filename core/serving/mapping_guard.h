// MappingGuard: keeps the server alive when a client's shared memory object loses pages under it.
//
// A region registered by a client (core/serving/shared_memory.h) is a MAP_SHARED mapping of an
// object the client owns. If the client shrinks the object (ftruncate) while a request reads rows
// from it or writes results into it, or if the object's pages cannot be allocated (a full
// /dev/shm), the next access to a lost page raises SIGBUS, whose default action kills groved and
// every call in flight. POSIX shared memory cannot be sealed against ftruncate, so the fault
// cannot be prevented; it is absorbed instead, as Wayland compositors do for client buffers:
//
//   * A guarded mapping is entered in a process-wide table of address ranges that the SIGBUS
//     handler can read without locks.
//   * On a SIGBUS at an address inside a guarded mapping, the handler maps anonymous zero pages
//     over the rest of the mapping (from the faulting page to its end: the object lost its tail)
//     and marks the mapping faulted. The faulting instruction then runs again on the zero page, so
//     the computation finishes on meaningless bytes instead of killing the process.
//   * Whoever used the mapping asks Faulted() before it answers and refuses the call: rows read
//     from, or results written to, a faulted mapping are never reported as valid.
//   * A SIGBUS anywhere else goes to the disposition installed before (default: the process dies
//     with SIGBUS, as it would without the guard).
//
// The handler is installed on the first Add and stays installed. It relies on mmap from a signal
// handler (a system call, not on POSIX's async-signal-safe list, but safe on Linux for a thread
// that faulted on a page of its own mapping). A mapping must be removed before it is unmapped;
// a thread that faults inside it holds it (the region cannot be released under an access), so
// the handler never maps over an address that was reused.
//
// Thread-safe: every function may be called concurrently, and from any thread.
#pragma once

#include <cstddef>

namespace grove::serving {

class MappingGuard {
 public:
  // Most mappings guarded at once in the process (the shared memory registry's own bound on
  // regions is at most this).
  static constexpr int kCapacity = 65536;

  // Guards [begin, begin + bytes) (page-aligned `begin`, as mmap returns it). Returns the
  // mapping's slot, or -1 when kCapacity mappings are guarded already.
  static int Add(void* begin, size_t bytes);
  // Stops guarding `slot` (from Add; -1 is ignored). Call before munmap.
  static void Remove(int slot);
  // Whether a SIGBUS in `slot`'s mapping was absorbed since Add (false for -1).
  static bool Faulted(int slot);
};

}  // namespace grove::serving
