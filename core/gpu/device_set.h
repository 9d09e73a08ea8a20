// The GPUs this process may use, shared by every GPU engine, and the threads that issue work to
// them. Compiles with or without CUDA.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/spin.h"

namespace grove::gpu {

// CUDA devices visible to this process (CUDA_VISIBLE_DEVICES applies); 0 without CUDA, without a
// driver or device, or when the query fails (the failure is cleared from CUDA's per-thread error
// state, so that it does not surface in an unrelated call). Thread-safe.
int VisibleGpuCount();

// Page-locks [data, data + bytes) for direct DMA by every GPU (cudaHostRegister, portable), so
// that engines copy rows from it and results into it without their staging copies (IsPinnedHost):
// for long-lived buffers that requests point into, such as a registered shared-memory region.
// Costs about a millisecond per 100 MB, once. The range must stay mapped until UnpinHostRange.
// FAILED_PRECONDITION without CUDA or a visible GPU; the driver's error otherwise. Thread-safe.
absl::Status PinHostRange(void* data, size_t bytes);
// Undoes PinHostRange(data, ...); a range that was not pinned is left alone.
void UnpinHostRange(void* data);
// `bytes` (> 0) of page-locked host memory usable by DMA from every GPU (cudaHostAlloc, portable),
// for buffers kept and reused (about a millisecond per 10 MB to allocate); free with
// FreePinnedHost. FAILED_PRECONDITION without CUDA or a visible GPU, RESOURCE_EXHAUSTED when the
// driver refuses (the host's locked-memory limit). Thread-safe.
absl::StatusOr<void*> AllocatePinnedHost(size_t bytes);
// Frees what AllocatePinnedHost returned (null: nothing).
void FreePinnedHost(void* p);
// True when `p` lies in page-locked host memory known to CUDA (cudaHostAlloc or PinHostRange);
// false without CUDA. About a microsecond. Thread-safe.
bool IsPinnedHost(const void* p);

// Issuing threads for a batch split across an engine's devices: made once when the engine loads,
// one per device after the first, so that a request creates no thread (a std::thread per device
// and request cost each multi-GPU call its creation and join, about 20-50 us, and an unbounded
// number of threads under load). Device i > 0's share always runs on thread i, so each thread keeps
// its CUDA device current; device 0's share runs on the caller.
// A thread that ran a share polls for the next one for `spin` before it sleeps, and the caller
// polls for the shares' ends as long before it sleeps: a batch split across GPUs takes about as
// long on each, and a sleep and a wake-up through the kernel cost tens of microseconds each way,
// against calls of a fraction of a millisecond. The spin is off where the threads and the caller
// would outnumber the hardware threads (these threads only; staging pools and other engines are
// not counted).
// Thread-safe: concurrent RunOnEach calls queue their shares on each thread in call order.
class DeviceIssuers {
 public:
  // `devices` >= 1: devices - 1 threads. spin kAutoSpin (core/common/spin.h): ChooseSpin's
  // default for those threads and the caller.
  explicit DeviceIssuers(int devices, std::chrono::microseconds spin = kAutoSpin);
  ~DeviceIssuers();  // finishes queued shares, then joins
  DeviceIssuers(const DeviceIssuers&) = delete;
  DeviceIssuers& operator=(const DeviceIssuers&) = delete;

  int devices() const { return static_cast<int>(threads_.size()) + 1; }

  // Calls fn(i) for i in [0, n) (n <= devices()): fn(0) on the caller, fn(i) on thread i; returns
  // when every call has returned. fn must not throw. Waits only on the calls it queued (no lock is
  // held while waiting or while fn runs).
  void RunOnEach(int n, const std::function<void(int)>& fn);

 private:
  struct Issuer {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> queue;
    bool stop = false;
    std::atomic<int> queued{0};  // queue.size(), readable without mu (polling)
  };
  static void Loop(Issuer* issuer, std::chrono::microseconds spin);

  const std::chrono::microseconds spin_;

  std::vector<std::unique_ptr<Issuer>> issuers_;  // issuers_[i - 1] serves device i
  std::vector<std::thread> threads_;
};

}  // namespace grove::gpu
