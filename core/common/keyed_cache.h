// A small cache of immutable values built on first use, by key, least recently used first out:
// what an engine keeps per request parameter that is costly to prepare and usually repeats (the
// path layout of a grouping of features, its device copy).
//
// Thread-safe. A value is built outside the lock (two callers missing the same key may both build
// it; the first to finish is kept), so a slow build never blocks readers of other keys. Values are
// shared: one evicted while a caller holds it lives until that caller lets it go.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace grove {

template <typename V>
class KeyedCache {
 public:
  using Ptr = std::shared_ptr<V>;  // V const for immutable values

  explicit KeyedCache(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  // The value of `key`, built by `build()` (absl::StatusOr<Ptr>) when absent; its error is returned
  // and nothing is kept.
  template <typename Build>
  absl::StatusOr<Ptr> Get(const std::string& key, Build build) {
    {
      absl::MutexLock lock(&mu_);
      if (Ptr hit = FindLocked(key)) return hit;
    }
    absl::StatusOr<Ptr> built = build();
    if (!built.ok()) return built.status();
    absl::MutexLock lock(&mu_);
    if (Ptr hit = FindLocked(key)) return hit;
    if (entries_.size() >= capacity_) entries_.erase(entries_.begin());
    entries_.emplace_back(key, *built);
    return *built;
  }

  // Calls fn(value) for every value held (under the lock: keep fn short).
  template <typename Fn>
  void ForEach(Fn fn) const {
    absl::MutexLock lock(&mu_);
    for (const auto& entry : entries_) fn(*entry.second);
  }

  size_t size() const {
    absl::MutexLock lock(&mu_);
    return entries_.size();
  }

 private:
  // Moves a hit to the back (most recently used).
  Ptr FindLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].first != key) continue;
      std::pair<std::string, Ptr> hit = std::move(entries_[i]);
      entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
      entries_.push_back(std::move(hit));
      return entries_.back().second;
    }
    return nullptr;
  }

  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::vector<std::pair<std::string, Ptr>> entries_ ABSL_GUARDED_BY(mu_);  // oldest first
};

}  // namespace grove
