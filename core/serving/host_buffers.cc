#include "core/serving/host_buffers.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/log.h"
#include "core/gpu/device_set.h"

namespace grove::serving {
namespace {

constexpr size_t kAlignment = 64;

char* AllocatePlain(int64_t bytes) {
  const size_t rounded = (static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment * kAlignment;
  return static_cast<char*>(std::aligned_alloc(kAlignment, rounded));
}

}  // namespace

absl::Status ValidateHostBufferOptions(const HostBufferOptions& options) {
  if (options.max_bytes < 0 || options.max_bytes > kMaxHostBufferBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kept host buffers (--host_buffer_mb) must be 0 to ", kMaxHostBufferBytes >> 20,
        " MiB; got ", options.max_bytes, " bytes"));
  }
  return absl::OkStatus();
}

HostBufferPool::Buffer& HostBufferPool::Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Release();
    pool_ = std::exchange(other.pool_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
    size_class_ = std::exchange(other.size_class_, -1);
  }
  return *this;
}

void HostBufferPool::Buffer::Release() {
  if (data_ == nullptr) return;
  pool_->Return(this);
  pool_ = nullptr;
  data_ = nullptr;
  capacity_ = 0;
  size_class_ = -1;
}

HostBufferPool::HostBufferPool(const HostBufferOptions& options) : options_(options) {}

HostBufferPool::~HostBufferPool() {
  absl::MutexLock lock(&mu_);
  for (std::vector<char*>& list : free_) {
    for (char* data : list) Free(data);
    list.clear();
  }
}

HostBufferPool::Stats HostBufferPool::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s;
  s.kept_bytes = kept_bytes_;
  s.in_use_bytes = in_use_bytes_;
  s.misses = misses_;
  s.page_locked = options_.page_locked && !lock_failed_;
  return s;
}

HostBufferPool::Buffer HostBufferPool::Acquire(int64_t bytes) {
  Buffer b;
  if (bytes <= 0) bytes = 1;
  int size_class = 0;
  while (size_class < kClasses && (int64_t{1} << (kMinClassLog2 + size_class)) < bytes) {
    ++size_class;
  }
  if (size_class == kClasses) {
    absl::MutexLock lock(&mu_);
    ++misses_;
    return b;
  }
  const int64_t class_bytes = int64_t{1} << (kMinClassLog2 + size_class);
  bool allocate = false;
  std::vector<char*> evicted;
  {
    absl::MutexLock lock(&mu_);
    std::vector<char*>& list = free_[size_class];
    if (!list.empty()) {
      b.data_ = list.back();
      list.pop_back();
      in_use_bytes_ += class_bytes;
    } else if (!lock_failed_ && class_bytes <= options_.max_bytes) {
      // At the bound, free buffers of other sizes make room (a workload whose request sizes
      // changed would otherwise keep the old sizes forever), the largest first -- only when they
      // can: freeing them while buffers in use leave no room anyway would only churn.
      const bool room = in_use_bytes_ <= options_.max_bytes - class_bytes;
      for (int c = kClasses - 1; room && c >= 0 && kept_bytes_ > options_.max_bytes - class_bytes;
           --c) {
        while (!free_[c].empty() && kept_bytes_ > options_.max_bytes - class_bytes) {
          evicted.push_back(free_[c].back());
          free_[c].pop_back();
          kept_bytes_ -= int64_t{1} << (kMinClassLog2 + c);
        }
      }
      if (kept_bytes_ <= options_.max_bytes - class_bytes) {
        // Reserved (and counted in use) now, allocated below outside the lock.
        kept_bytes_ += class_bytes;
        in_use_bytes_ += class_bytes;
        allocate = true;
      }
    }
    if (b.data_ == nullptr && !allocate) ++misses_;
  }
  for (char* data : evicted) Free(data);
  if (allocate) {
    b.data_ = Allocate(class_bytes);
    if (b.data_ == nullptr) {
      absl::MutexLock lock(&mu_);
      kept_bytes_ -= class_bytes;
      in_use_bytes_ -= class_bytes;
      ++misses_;
    }
  }
  if (b.data_ != nullptr) {
    b.pool_ = this;
    b.capacity_ = class_bytes;
    b.size_class_ = size_class;
  }
  return b;
}

char* HostBufferPool::Allocate(int64_t bytes) {
  if (!options_.page_locked) return AllocatePlain(bytes);
  absl::StatusOr<void*> p = gpu::AllocatePinnedHost(static_cast<size_t>(bytes));
  if (p.ok()) return static_cast<char*>(*p);
  bool first = false;
  {
    absl::MutexLock lock(&mu_);
    first = !std::exchange(lock_failed_, true);
  }
  if (first) {
    GROVE_LOG(WARNING) << "page-locked request buffers unavailable; large requests go through the "
                          "GPU engines' staging copies" << KV("why", p.status().message());
  }
  return nullptr;
}

void HostBufferPool::Free(char* data) const {
  if (options_.page_locked) {
    gpu::FreePinnedHost(data);
  } else {
    std::free(data);
  }
}

void HostBufferPool::Return(Buffer* buffer) {
  absl::MutexLock lock(&mu_);
  free_[buffer->size_class_].push_back(buffer->data_);
  in_use_bytes_ -= buffer->capacity_;
}

}  // namespace grove::serving
