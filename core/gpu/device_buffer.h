// Device memory owned by one object, shared by every GPU engine (no cudaMalloc / cudaFree pairs by
// hand). Needs cuda_runtime_api.h: included only from CUDA-enabled translation units.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/gpu/cuda_status.h"

namespace grove::gpu {

// Move-only owner of one cudaMalloc allocation on the device that was current when it was made;
// freed on destruction (cudaFree finds the owning device itself under unified addressing). Not
// thread-safe; the memory itself is used from streams as the owner sees fit.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // `bytes` (at least 1) of device memory; RESOURCE_EXHAUSTED naming `what` when it does not fit.
  static absl::StatusOr<DeviceBuffer> Allocate(int64_t bytes, absl::string_view what) {
    DeviceBuffer b;
    void* p = nullptr;
    GROVE_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, static_cast<size_t>(bytes > 0 ? bytes : 1)), what);
    b.ptr_ = p;
    b.bytes_ = bytes;
    return b;
  }

  // A copy of `host` (synchronous); an empty vector gives a 1-byte allocation (a valid pointer).
  template <typename T>
  static absl::StatusOr<DeviceBuffer> Upload(const std::vector<T>& host, absl::string_view what) {
    absl::StatusOr<DeviceBuffer> b =
        Allocate(static_cast<int64_t>(host.size() * sizeof(T)), what);
    if (!b.ok()) return b.status();
    if (!host.empty()) {
      GROVE_CUDA_RETURN_IF_ERROR(
          cudaMemcpy(b->ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), what);
    }
    return b;
  }

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  int64_t bytes() const { return bytes_; }

 private:
  void Reset() {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }

  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
};

}  // namespace grove::gpu
