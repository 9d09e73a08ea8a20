// SnapshotMap<Key, Value>: a map that only grows, read on every request and written rarely (a model
// seen for the first time, a new label value), so that a lookup takes no lock.
//
// Readers load an immutable snapshot (an absl::flat_hash_map of pointers) with one atomic load and
// search it; a writer, under a mutex, copies the snapshot, adds the entry and publishes the copy.
// Old snapshots are kept until the map is destroyed (a reader may still be searching one), so a map
// of n entries keeps about n^2/2 pointers: meant for bounded key sets (models, versions, label
// values). Values are created once, never move and live as long as the map; entries are never
// removed.
//
// Find accepts whatever the snapshot's find accepts (absl's string hashing is transparent, so a
// map keyed by std::string is searched with an absl::string_view without a copy).
//
// Thread-safe: Find never blocks; FindOrCreate blocks only on other writers.
#pragma once

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace grove {

template <typename Key, typename Value>
class SnapshotMap {
 public:
  SnapshotMap() {
    absl::MutexLock lock(&mu_);
    snapshots_.push_back(std::make_unique<Map>());
    current_.store(snapshots_.back().get(), std::memory_order_release);
  }
  SnapshotMap(const SnapshotMap&) = delete;
  SnapshotMap& operator=(const SnapshotMap&) = delete;

  // The value of `key`, or null when it was never created.
  template <typename K>
  Value* Find(const K& key) const {
    const Map* map = current_.load(std::memory_order_acquire);
    auto it = map->find(key);
    return it == map->end() ? nullptr : it->second;
  }

  // The value of `key`, created with `make()` (a std::unique_ptr<Value>, called once under the
  // writers' lock: it must not call back into this map) when missing.
  template <typename K, typename MakeFn>
  Value* FindOrCreate(const K& key, MakeFn&& make) {
    if (Value* found = Find(key)) return found;
    absl::MutexLock lock(&mu_);
    const Map* map = current_.load(std::memory_order_relaxed);
    if (auto it = map->find(key); it != map->end()) return it->second;
    std::unique_ptr<Value> value = make();
    Value* raw = value.get();
    values_.push_back(std::move(value));
    auto next = std::make_unique<Map>(*map);
    next->emplace(Key(key), raw);
    current_.store(next.get(), std::memory_order_release);
    snapshots_.push_back(std::move(next));
    return raw;
  }

  // Calls fn(key, value) for every entry (of the snapshot current when it starts).
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    const Map* map = current_.load(std::memory_order_acquire);
    for (const auto& [key, value] : *map) fn(key, *value);
  }

 private:
  using Map = absl::flat_hash_map<Key, Value*>;

  absl::Mutex mu_;
  std::vector<std::unique_ptr<Value>> values_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Map>> snapshots_ ABSL_GUARDED_BY(mu_);
  std::atomic<const Map*> current_{nullptr};
};

}  // namespace grove
