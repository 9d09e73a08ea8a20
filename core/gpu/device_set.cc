#include "core/gpu/device_set.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/spin.h"

#if defined(GROVE_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace grove::gpu {

int VisibleGpuCount() {
#if defined(GROVE_HAVE_CUDA)
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

absl::Status PinHostRange(void* data, size_t bytes) {
#if defined(GROVE_HAVE_CUDA)
  if (VisibleGpuCount() == 0) {
    return absl::FailedPreconditionError("cannot page-lock host memory for DMA: no GPU is visible");
  }
  const cudaError_t e = cudaHostRegister(data, bytes, cudaHostRegisterPortable);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::InternalError(absl::StrCat("cudaHostRegister of ", bytes,
                                            " bytes failed: ", cudaGetErrorString(e)));
  }
  return absl::OkStatus();
#else
  (void)data;
  (void)bytes;
  return absl::FailedPreconditionError(
      "cannot page-lock host memory for DMA: this build has no CUDA");
#endif
}

void UnpinHostRange(void* data) {
#if defined(GROVE_HAVE_CUDA)
  if (cudaHostUnregister(data) != cudaSuccess) (void)cudaGetLastError();
#else
  (void)data;
#endif
}

absl::StatusOr<void*> AllocatePinnedHost(size_t bytes) {
#if defined(GROVE_HAVE_CUDA)
  if (VisibleGpuCount() == 0) {
    return absl::FailedPreconditionError("cannot allocate page-locked host memory: no GPU is visible");
  }
  void* p = nullptr;
  const cudaError_t e = cudaHostAlloc(&p, bytes > 0 ? bytes : 1, cudaHostAllocPortable);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat("cudaHostAlloc of ", bytes,
                                                     " bytes failed: ", cudaGetErrorString(e)));
  }
  return p;
#else
  (void)bytes;
  return absl::FailedPreconditionError(
      "cannot allocate page-locked host memory: this build has no CUDA");
#endif
}

void FreePinnedHost(void* p) {
#if defined(GROVE_HAVE_CUDA)
  if (p != nullptr && cudaFreeHost(p) != cudaSuccess) (void)cudaGetLastError();
#else
  (void)p;
#endif
}

bool IsPinnedHost(const void* p) {
#if defined(GROVE_HAVE_CUDA)
  cudaPointerAttributes a{};
  if (p == nullptr || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost;
#else
  (void)p;
  return false;
#endif
}

DeviceIssuers::DeviceIssuers(int devices, std::chrono::microseconds spin)
    : spin_(ChooseSpin(devices - 1, spin)) {
  for (int i = 1; i < devices; ++i) {
    issuers_.push_back(std::make_unique<Issuer>());
    threads_.emplace_back(&DeviceIssuers::Loop, issuers_.back().get(), spin_);
  }
}

DeviceIssuers::~DeviceIssuers() {
  for (auto& issuer : issuers_) {
    {
      std::lock_guard<std::mutex> lock(issuer->mu);
      issuer->stop = true;
    }
    issuer->cv.notify_one();
  }
  for (std::thread& t : threads_) t.join();
}

void DeviceIssuers::Loop(Issuer* issuer, std::chrono::microseconds spin) {
  for (;;) {
    // Stopping is rare and always comes with a notify: the poll watches the queue only.
    SpinUntil(spin, [&] { return issuer->queued.load(std::memory_order_acquire) > 0; });
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(issuer->mu);
      issuer->cv.wait(lock, [&] { return issuer->stop || !issuer->queue.empty(); });
      if (issuer->queue.empty()) return;  // stopping, nothing left
      job = std::move(issuer->queue.front());
      issuer->queue.pop_front();
      issuer->queued.fetch_sub(1, std::memory_order_relaxed);
    }
    job();
  }
}

void DeviceIssuers::RunOnEach(int n, const std::function<void(int)>& fn) {
  if (n <= 0) return;
  if (n > devices()) n = devices();
  // The caller's completion count; each share decrements it and notifies under done_mu, so the
  // caller, whether it saw zero polling or waiting, takes done_mu once before it returns: no
  // share touches this frame after that.
  std::mutex done_mu;
  std::condition_variable done_cv;
  std::atomic<int> pending{n - 1};
  for (int i = 1; i < n; ++i) {
    Issuer& issuer = *issuers_[i - 1];
    {
      std::lock_guard<std::mutex> lock(issuer.mu);
      issuer.queue.push_back([&, i] {
        fn(i);
        std::lock_guard<std::mutex> done_lock(done_mu);
        if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) done_cv.notify_one();
      });
      issuer.queued.fetch_add(1, std::memory_order_release);
    }
    issuer.cv.notify_one();
  }
  fn(0);
  SpinUntil(spin_, [&] { return pending.load(std::memory_order_acquire) == 0; });
  std::unique_lock<std::mutex> lock(done_mu);
  done_cv.wait(lock, [&] { return pending.load(std::memory_order_acquire) == 0; });
}

}  // namespace grove::gpu
