// Values built once per key and shared by whoever holds them: the first Get of a key builds its
// value, every Get of the key while some caller still holds that value returns the same one, and
// the value is destroyed with its last holder (the next Get builds it again). What a resource
// that many owners use and none owns alone needs (a path layout's copy on a GPU, which the SHAP
// and the interventional engines of one model share), where KeyedCache keeps values by recency.
//
// Single flight per key: callers of one key wait for its build in progress and share its result;
// a failed build is not kept (the next Get tries again). A build runs under its key's own build
// lock only, so a slow build (an upload to a GPU) never blocks callers of other keys, and Live
// (what metrics read) never waits for any build.
//
// Thread-safe. Key: ordered (std::map). Values are immutable once built.
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace grove {

template <typename Key, typename Value>
class SharedByKey {
 public:
  // The live value of `key`, or the one build() (absl::StatusOr<std::shared_ptr<const Value>>())
  // makes, which is then shared; build()'s error otherwise.
  template <typename Build>
  absl::StatusOr<std::shared_ptr<const Value>> Get(const Key& key, const Build& build) {
    std::shared_ptr<Slot> slot;
    {
      absl::MutexLock lock(&mu_);
      Prune();
      std::shared_ptr<Slot>& s = slots_[key];
      if (s == nullptr) s = std::make_shared<Slot>();
      slot = s;
    }
    absl::MutexLock building(&slot->build_mu);
    {
      absl::MutexLock lock(&slot->mu);
      if (std::shared_ptr<const Value> live = slot->value.lock()) return live;
    }
    absl::StatusOr<std::shared_ptr<const Value>> built = build();
    if (built.ok()) {
      absl::MutexLock lock(&slot->mu);
      slot->value = *built;
    }
    return built;
  }

  // The live values whose key satisfies pred(key), in key order. Never waits for a build: a key
  // being built has no live value yet (a build runs only once the last one has gone).
  template <typename Pred>
  std::vector<std::shared_ptr<const Value>> Live(const Pred& pred) const {
    std::vector<std::shared_ptr<Slot>> matching;
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [key, slot] : slots_) {
        if (pred(key)) matching.push_back(slot);
      }
    }
    std::vector<std::shared_ptr<const Value>> live;
    for (const std::shared_ptr<Slot>& slot : matching) {
      absl::MutexLock lock(&slot->mu);
      if (std::shared_ptr<const Value> v = slot->value.lock()) live.push_back(std::move(v));
    }
    return live;
  }

  // Keys held in the map (live, being built or not yet pruned): for tests.
  size_t SlotsForTesting() const {
    absl::MutexLock lock(&mu_);
    return slots_.size();
  }

 private:
  struct Slot {
    absl::Mutex build_mu;  // held by the Get that builds, across the build
    absl::Mutex mu;        // guards value; held for a few instructions, never across a build
    std::weak_ptr<const Value> value ABSL_GUARDED_BY(mu);
  };

  // Drops the slots no caller is using whose value has gone. A slot only the map holds has no
  // caller inside Get or Live (they hold it), so its locks are free and taking one never waits.
  void Prune() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto it = slots_.begin(); it != slots_.end();) {
      bool gone = false;
      if (it->second.use_count() == 1) {
        absl::MutexLock lock(&it->second->mu);
        gone = it->second->value.expired();
      }
      it = gone ? slots_.erase(it) : std::next(it);
    }
  }

  mutable absl::Mutex mu_;
  std::map<Key, std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
};

}  // namespace grove
