// Device and pinned host memory owned by one object, shared by every GPU engine (no cudaMalloc /
// cudaFree pairs by hand). Needs cuda_runtime_api.h: included only from CUDA-enabled translation
// units.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/gpu/cuda_status.h"

namespace grove::gpu {

namespace internal {
struct DeviceMemory {  // on the device current at allocation (cudaFree finds it under UVA)
  static cudaError_t Allocate(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
  static void Free(void* p) { (void)cudaFree(p); }
};
struct PinnedMemory {  // page-locked host memory: the staging side of overlapped copies
  static cudaError_t Allocate(void** p, size_t bytes) { return cudaMallocHost(p, bytes); }
  static void Free(void* p) { (void)cudaFreeHost(p); }
};
}  // namespace internal

// Move-only owner of one allocation of `Memory`; freed on destruction. Not thread-safe; the memory
// itself is used from streams as the owner sees fit.
template <typename Memory>
class Buffer {
 public:
  Buffer() = default;
  ~Buffer() { Reset(); }
  Buffer(Buffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      Reset();
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // `bytes` (at least 1 allocated); RESOURCE_EXHAUSTED naming `what` when it does not fit.
  static absl::StatusOr<Buffer> Allocate(int64_t bytes, absl::string_view what) {
    Buffer b;
    void* p = nullptr;
    GROVE_CUDA_RETURN_IF_ERROR(Memory::Allocate(&p, static_cast<size_t>(bytes > 0 ? bytes : 1)),
                               what);
    b.ptr_ = p;
    b.bytes_ = bytes;
    return b;
  }

  // A copy of `host` (synchronous); an empty vector gives a 1-byte allocation (a valid pointer).
  template <typename T>
  static absl::StatusOr<Buffer> Upload(const std::vector<T>& host, absl::string_view what) {
    absl::StatusOr<Buffer> b = Allocate(static_cast<int64_t>(host.size() * sizeof(T)), what);
    if (!b.ok()) return b.status();
    if (!host.empty()) {
      GROVE_CUDA_RETURN_IF_ERROR(
          cudaMemcpy(b->ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyDefault), what);
    }
    return b;
  }

  // Holds at least `bytes` afterwards: reallocated (contents not kept) only when smaller, so that a
  // workspace sized by the largest request seen allocates nothing in the steady state.
  absl::Status Reserve(int64_t bytes, absl::string_view what) {
    if (bytes <= bytes_ && ptr_ != nullptr) return absl::OkStatus();
    Reset();
    absl::StatusOr<Buffer> b = Allocate(bytes, what);
    if (!b.ok()) return b.status();
    *this = std::move(*b);
    return absl::OkStatus();
  }

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  int64_t bytes() const { return bytes_; }

 private:
  void Reset() {
    if (ptr_ != nullptr) Memory::Free(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }

  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
};

using DeviceBuffer = Buffer<internal::DeviceMemory>;

// `host` uploaded into `*b` (replacing what it held), its bytes added to `*accounted`: how the GPU
// engines fill their resident layouts and count their device memory.
template <typename T>
absl::Status UploadCounted(const std::vector<T>& host, absl::string_view what, DeviceBuffer* b,
                           int64_t* accounted) {
  absl::StatusOr<DeviceBuffer> u = DeviceBuffer::Upload(host, what);
  if (!u.ok()) return u.status();
  *b = std::move(*u);
  *accounted += b->bytes();
  return absl::OkStatus();
}
using PinnedBuffer = Buffer<internal::PinnedMemory>;

}  // namespace grove::gpu
