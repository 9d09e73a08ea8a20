// HostBufferPool: reusable host buffers for the bytes the serving path copies anyway -- a large
// request's rows as they leave gRPC's receive buffers, the rows of a merged batch gathered from
// its requests, the batch's results before they are scattered back -- page-locked when a GPU is
// visible, so that the GPU engines move them by DMA and skip their own staging copies
// (gpu::IsPinnedHost). Without page-locking the pool still saves the allocation and first-touch
// page faults of a fresh multi-megabyte buffer per request.
//
// Page-locking costs about a millisecond per 10 MB (cudaHostAlloc), so buffers are kept: a buffer
// is one of a few size classes (powers of two from 64 KiB); Acquire takes a free buffer of the
// smallest class that fits, or allocates a new one (outside the lock) while the pool holds less
// than its bound, first freeing free buffers of other classes when that makes room (so a change
// in request sizes is followed; freeing page-locked memory may wait for the GPU, once per such
// change). When the buffers in use fill the bound it gives nothing and the caller keeps to its
// own memory (the path it had without a pool). Acquire never waits for another caller's buffer.
//
// Ownership: a Buffer returns its memory to the pool when destroyed; the pool must outlive its
// buffers. Thread-safe: Acquire and Buffer destruction from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace grove::serving {

// Bound of HostBufferOptions::max_bytes (inclusive; 0 keeps nothing).
inline constexpr int64_t kMaxHostBufferBytes = int64_t{1} << 40;

struct HostBufferOptions {
  // Bytes of buffers the pool keeps (counted at their class size), 0 .. kMaxHostBufferBytes.
  int64_t max_bytes = int64_t{256} << 20;
  // Kept buffers are page-locked (needs a visible GPU). Once allocating one fails (the host's
  // locked-memory limit, say) the pool logs it and keeps no new buffers: what it kept stays.
  bool page_locked = false;
};

// INVALID_ARGUMENT naming the bound.
absl::Status ValidateHostBufferOptions(const HostBufferOptions& options);

class HostBufferPool {
 public:
  // At least the requested bytes, 64-byte aligned, contents unspecified. Move-only.
  class Buffer {
   public:
    Buffer() = default;
    ~Buffer() { Release(); }
    Buffer(Buffer&& other) noexcept { *this = static_cast<Buffer&&>(other); }
    Buffer& operator=(Buffer&& other) noexcept;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    char* data() const { return data_; }
    float* floats() const { return reinterpret_cast<float*>(data_); }
    int64_t capacity() const { return capacity_; }
    // Holds memory (an empty Buffer: the pool had none to give).
    explicit operator bool() const { return data_ != nullptr; }
    // Gives the memory back to the pool now.
    void Release();

   private:
    friend class HostBufferPool;
    HostBufferPool* pool_ = nullptr;
    char* data_ = nullptr;
    int64_t capacity_ = 0;
    int size_class_ = -1;
  };

  explicit HostBufferPool(const HostBufferOptions& options = {});
  ~HostBufferPool();  // frees the kept buffers; every Buffer must have been released
  HostBufferPool(const HostBufferPool&) = delete;
  HostBufferPool& operator=(const HostBufferPool&) = delete;

  // A kept buffer of at least `bytes` (> 0) bytes, or an empty Buffer when buffers in use leave no
  // room under the bound (or page-locking failed) and none of that size class is free. Never
  // waits on other callers; buffers are allocated and freed outside the pool's lock.
  Buffer Acquire(int64_t bytes);

  // What the pool holds (one consistent reading; metrics read it at every scrape).
  struct Stats {
    int64_t kept_bytes = 0;    // kept buffers, free or in use (at their class size)
    int64_t in_use_bytes = 0;  // kept buffers held by callers now
    int64_t misses = 0;        // Acquire calls that gave nothing (the caller used its own memory)
    bool page_locked = false;  // new kept buffers are page-locked (false once page-locking failed)
  };
  Stats stats() const;

 private:
  static constexpr int kMinClassLog2 = 16;  // 64 KiB
  static constexpr int kClasses = 25;       // up to 2^40 bytes

  void Return(Buffer* buffer);
  char* Allocate(int64_t bytes);  // null when it cannot be allocated
  void Free(char* data) const;

  const HostBufferOptions options_;
  mutable absl::Mutex mu_;
  std::vector<char*> free_[kClasses] ABSL_GUARDED_BY(mu_);
  int64_t kept_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_use_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // kept_bytes_ less the free lists' bytes
  int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
  bool lock_failed_ ABSL_GUARDED_BY(mu_) = false;  // page-locking failed: keep nothing new
};

}  // namespace grove::serving
