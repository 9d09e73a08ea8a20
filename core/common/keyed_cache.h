// A small cache of immutable values built on first use, by key, least recently used first out:
// what an engine keeps per request parameter that is costly to prepare and usually repeats (the
// path layout of a grouping of features, its device copy).
//
// Single flight: the first caller that misses a key builds its value; callers asking for the same
// key meanwhile wait for that build and share its result (its error too; the next call after a
// failed build tries again). The build runs outside the lock, so a slow build never blocks callers
// of other keys.
//
// Pins: GetPinned keeps an entry while the returned Pin lives (a model's declared grouping, built
// at load, must not be evicted by the groupings of requests). Pinned entries are not counted
// against the capacity; `capacity` bounds the unpinned ones. An entry whose last pin is released
// becomes the most recently used unpinned entry.
//
// Thread-safe. Values are shared: one evicted while a caller holds it lives until that caller lets
// it go. A Pin may outlive the cache.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace grove {

// What a cache holds (for logs, Describe and tests).
struct KeyedCacheStats {
  int64_t pinned = 0;  // entries held by a Pin
  int64_t cached = 0;  // other entries
  int64_t builds = 0;  // builds started since creation (failed ones included)
};

// Keeps a cache entry (or several) while it lives; null when nothing needed keeping.
using CachePin = std::shared_ptr<const void>;

template <typename V>
class KeyedCache {
 public:
  using Ptr = std::shared_ptr<V>;  // V const for immutable values

  explicit KeyedCache(size_t capacity) : state_(std::make_shared<State>(capacity)) {}

  // The value of `key`, built by `build()` (absl::StatusOr<Ptr>) when absent; its error is returned
  // and nothing is kept.
  template <typename Build>
  absl::StatusOr<Ptr> Get(const std::string& key, Build build) {
    absl::StatusOr<std::shared_ptr<Entry>> entry = Acquire(key, build, /*pin=*/false);
    if (!entry.ok()) return entry.status();
    return (*entry)->value;
  }

  // As Get, and the entry stays (never evicted) while the returned pin lives.
  template <typename Build>
  absl::StatusOr<std::pair<Ptr, CachePin>> GetPinned(const std::string& key, Build build) {
    absl::StatusOr<std::shared_ptr<Entry>> entry = Acquire(key, build, /*pin=*/true);
    if (!entry.ok()) return entry.status();
    Ptr value = (*entry)->value;
    return std::make_pair(std::move(value), CachePin(std::make_shared<PinToken>(state_, *entry)));
  }

  // The value of `key` when it is built (never builds it, never waits for a build).
  Ptr Find(const std::string& key) const {
    absl::MutexLock lock(&state_->mu);
    for (const auto& e : state_->entries) {
      if (e->key == key && !e->building) return e->value;
    }
    return nullptr;
  }

  // Calls fn(value) for every value held (under the lock: keep fn short).
  template <typename Fn>
  void ForEach(Fn fn) const {
    absl::MutexLock lock(&state_->mu);
    for (const auto& e : state_->entries) {
      if (!e->building) fn(*e->value);
    }
  }

  KeyedCacheStats stats() const {
    absl::MutexLock lock(&state_->mu);
    KeyedCacheStats s;
    s.builds = state_->builds;
    for (const auto& e : state_->entries) {
      if (e->building) continue;
      ++(e->pins > 0 ? s.pinned : s.cached);
    }
    return s;
  }

  size_t size() const {
    const KeyedCacheStats s = stats();
    return static_cast<size_t>(s.pinned + s.cached);
  }

 private:
  struct Entry {
    std::string key;
    Ptr value;              // set once built
    bool building = true;   // a caller is building it; the others wait
    absl::Status error;     // the build's error, for the callers that waited on it
    int64_t pins = 0;
  };
  struct State {
    explicit State(size_t c) : capacity(c < 1 ? 1 : c) {}
    const size_t capacity;
    absl::Mutex mu;
    std::list<std::shared_ptr<Entry>> entries ABSL_GUARDED_BY(mu);  // least recently used first
    int64_t builds ABSL_GUARDED_BY(mu) = 0;

    // Drops the least recently used unpinned entries beyond the capacity.
    void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      size_t unpinned = 0;
      for (const auto& e : entries) unpinned += !e->building && e->pins == 0;
      for (auto it = entries.begin(); it != entries.end() && unpinned > capacity;) {
        if (!(*it)->building && (*it)->pins == 0) {
          it = entries.erase(it);
          --unpinned;
        } else {
          ++it;
        }
      }
    }
  };
  struct PinToken {
    PinToken(std::shared_ptr<State> s, std::shared_ptr<Entry> e)
        : state(std::move(s)), entry(std::move(e)) {}
    ~PinToken() {
      absl::MutexLock lock(&state->mu);
      if (--entry->pins > 0) return;
      // Unpinned: the most recently used of the ordinary entries.
      auto it = std::find(state->entries.begin(), state->entries.end(), entry);
      if (it != state->entries.end()) state->entries.splice(state->entries.end(), state->entries, it);
      state->EvictLocked();
    }
    std::shared_ptr<State> state;
    std::shared_ptr<Entry> entry;
  };

  template <typename Build>
  absl::StatusOr<std::shared_ptr<Entry>> Acquire(const std::string& key, Build& build, bool pin) {
    State& s = *state_;
    std::shared_ptr<Entry> entry;
    {
      absl::MutexLock lock(&s.mu);
      for (auto it = s.entries.begin(); it != s.entries.end(); ++it) {
        if ((*it)->key != key) continue;
        entry = *it;
        s.entries.splice(s.entries.end(), s.entries, it);  // most recently used
        break;
      }
      if (entry != nullptr) {
        // Hit, or a build under way: wait for it and share its outcome.
        s.mu.Await(absl::Condition(
            +[](Entry* e) { return !e->building; }, entry.get()));
        if (!entry->error.ok()) return entry->error;
        if (pin && ++entry->pins == 1 &&
            std::find(s.entries.begin(), s.entries.end(), entry) == s.entries.end()) {
          // Evicted between its build and this waiter's wake-up: a pinned entry is listed.
          s.entries.push_back(entry);
        }
        return entry;
      }
      entry = std::make_shared<Entry>();
      entry->key = key;
      s.entries.push_back(entry);
      ++s.builds;
    }
    // A build that throws (std::bad_alloc) must not leave its waiters waiting for ever: they get
    // an error and the key is built again by the next call.
    struct Abandon {
      State& s;
      const std::shared_ptr<Entry>& entry;
      bool armed = true;
      ~Abandon() {
        if (!armed) return;
        absl::MutexLock lock(&s.mu);
        entry->building = false;
        entry->error = absl::ResourceExhaustedError("cache build failed with an exception");
        s.entries.remove(entry);
      }
    } abandon{s, entry};
    absl::StatusOr<Ptr> built = build();
    abandon.armed = false;
    absl::MutexLock lock(&s.mu);
    entry->building = false;
    if (!built.ok() || *built == nullptr) {
      entry->error = built.ok() ? absl::InternalError("cache build returned no value")
                                : built.status();
      s.entries.remove(entry);
      return entry->error;
    }
    entry->value = *std::move(built);
    if (pin) ++entry->pins;
    s.EvictLocked();
    return entry;
  }

  std::shared_ptr<State> state_;
};

}  // namespace grove
