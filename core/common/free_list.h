// Objects kept for reuse (per-thread workspaces of a call or of a model), optionally bounded by
// their bytes, so that calls do not allocate them and fault their pages in again.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace grove {

// A list of owned T, taken last in first out (the most recently used is the warmest). With a
// bound, an object is kept only while the kept objects' T::Bytes() stay within it, and one
// given beyond that is freed, outside the lock. T may be incomplete where the list is declared;
// the members are instantiated where they are used. Thread-safe.
template <typename T>
class FreeList {
 public:
  // max_bytes < 0: keeps everything given (T::Bytes() is not called); 0: keeps nothing.
  explicit FreeList(int64_t max_bytes = -1) : max_bytes_(max_bytes) {}
  FreeList(const FreeList&) = delete;
  FreeList& operator=(const FreeList&) = delete;

  // The most recently kept object, or null when none is.
  std::unique_ptr<T> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (items_.empty()) return nullptr;
    std::unique_ptr<T> item = std::move(items_.back().first);
    bytes_ -= items_.back().second;
    items_.pop_back();
    return item;
  }
  // Keeps `item` (null: nothing) within the bound; frees it otherwise.
  void Give(std::unique_ptr<T> item) {
    if (item == nullptr) return;
    const int64_t bytes = max_bytes_ < 0 ? 0 : item->Bytes();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (max_bytes_ < 0 || bytes_ + bytes <= max_bytes_) {
        bytes_ += bytes;
        items_.emplace_back(std::move(item), bytes);
        return;
      }
    }
    // `item` is freed here, outside the lock.
  }
  // Every kept object, the list left empty.
  std::vector<std::unique_ptr<T>> TakeAll() {
    std::vector<std::pair<std::unique_ptr<T>, int64_t>> items;
    {
      std::lock_guard<std::mutex> lock(mu_);
      items.swap(items_);
      bytes_ = 0;
    }
    std::vector<std::unique_ptr<T>> out;
    out.reserve(items.size());
    for (auto& [item, bytes] : items) out.push_back(std::move(item));
    return out;
  }
  // Bytes of the kept objects as they were given (0 without a bound), and how many.
  int64_t KeptBytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_;
  }
  int KeptCount() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(items_.size());
  }

 private:
  const int64_t max_bytes_;
  mutable std::mutex mu_;
  std::vector<std::pair<std::unique_ptr<T>, int64_t>> items_;  // guarded by mu_
  int64_t bytes_ = 0;                                          // guarded by mu_
};

}  // namespace grove
