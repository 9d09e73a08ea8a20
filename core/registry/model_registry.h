// ModelRegistry: the model repository of groved. Engine-agnostic (each version's Servable is built
// by an injected factory) and free of gRPC.
//
// Layout: <repository>/<name>/<version>/model.{json,ubj,txt}, optional <repository>/<name>/config.json
// (ModelConfig) and optional <repository>/<name>/background.csv or background.npy: the background
// data set of interventional SHAP (core/servable/background.h), loaded and checked with every version
// (a bad one fails the load, naming the file) and given to the version's Servable; a change of it
// reloads every version, as a change of config.json does. Optional <repository>/<name>/groups.json:
// the model's feature groups (core/model/feature_groups.h), resolved against every version at its
// load and kept in its ModelVersion with what its explanations need prepared and pinned
// (Servable::PinGroups), with the background's rules (a bad one fails the load, naming the file)
// except that a change of groups.json alone republishes each version with the same engines. Every model is loaded by LoadAll() at start-up; Poll() (called by the watcher thread
// every interval, or by tests) re-scans the repository and loads, reloads or unloads what changed.
// A file is acted upon by Poll only once its (mtime, size) was the same at two consecutive polls, so
// half-written files are not loaded. A version the policy stops wanting is unloaded once the
// versions it wants serve, and is loaded again as soon as it is wanted again: deleting the newest
// version under the latest policy brings the previous one back at the next poll (at the one after
// when the previous version's file changed in between). Only regular files are read (a FIFO named
// model.json is a failed version, never a blocked loader), and only files that resolve inside the
// repository (a version directory linked to a path outside it is refused). A bad config.json is
// logged once per change of the file, not at every poll. Errors and paths that the registry
// reports (ModelStatus, Get's errors, interventional_status) name files relative to the repository
// ("fraud/1/model.json"), never the server's own paths; the log names them in full.
//
// Swaps are atomic: a reload builds the new ModelVersion next to the old one and then replaces a
// shared_ptr under the registry lock. Callers hold their own ModelVersionPtr for as long as they use it,
// so requests in flight finish on the version they started with and never fail because of a reload
// or an unload. A failed reload keeps the previous copy serving.
//
// Thread-safe. Loading operations (LoadAll, Poll, Load, Unload) are serialised with each other and
// block the calling thread for the duration of the load; Get, List and Status never wait for a load
// (files are read and parsed outside the registry lock; only the swap happens under it).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/common/periodic_thread.h"
#include "core/model/forest.h"
#include "core/model/feature_groups.h"
#include "core/registry/model_config.h"
#include "core/servable/background.h"
#include "core/servable/engine_options.h"
#include "core/servable/servable.h"

namespace grove {
class ThreadPool;
}

namespace grove::registry {

// One loaded model version. Immutable once published.
struct ModelVersion {
  std::string name;
  int64_t version = 0;
  std::string path;  // model file
  ServablePtr servable;  // the model and its engines
  std::shared_ptr<const ModelConfig> config;
  // The model's groups.json resolved against this version (null: none): the players of its
  // explanations when a request names no groups of its own. Resolved once per version load.
  FeatureGroupsPtr groups;
  // Keeps what the servable prepared for `groups` at load (Servable::PinGroups): requests with
  // the model's grouping build nothing, and other groupings never evict it.
  CachePin groups_pin;
  double load_seconds = 0;
  absl::Time loaded_at;

  const Forest& forest() const { return servable->forest(); }
};
using ModelVersionPtr = std::shared_ptr<const ModelVersion>;

enum class VersionState { kLoading, kReady, kFailed, kUnloaded };
const char* VersionStateName(VersionState state);

struct VersionStatus {
  int64_t version = 0;
  VersionState state = VersionState::kUnloaded;
  std::string error;  // last load error (a FAILED version may still serve an older copy)
  bool serving = false;
  double load_seconds = 0;
  std::string path;  // model file, relative to the repository (what callers may be shown)
  absl::Time loaded_at = absl::InfinitePast();
};

struct ModelStatus {
  std::string name;
  bool ready = false;  // some version serves
  std::string error;   // model-level error (bad config.json, no version directory)
  std::vector<VersionStatus> versions;  // ascending
  std::shared_ptr<const ModelConfig> config;
};

// Builds the Servable of one version: `background` is null when the model has none; `options`
// are the factory's base options with the model's config applied (device, strategies, and what to
// tell callers when the model has no background).
using ServableFactory = std::function<absl::StatusOr<ServablePtr>(
    const ForestPtr& forest, std::shared_ptr<const Background> background,
    const EngineOptions& options)>;

// BuildServable with every engine built at load. `pool` (not owned) runs the CPU paths and
// outlives every servable.
ServableFactory DefaultServableFactory(ThreadPool* pool);

// Notifications of state changes, called from the loading thread outside the registry lock (but
// serialised with other loading operations). Implementations must not call Load/Unload/Poll.
class RegistryListener {
 public:
  virtual ~RegistryListener() = default;
  // A version was loaded or reloaded (`model` replaced the previous copy, if any).
  virtual void OnVersionReady(const ModelVersionPtr& model) {}
  virtual void OnVersionUnloaded(const std::string& name, int64_t version) {}
  virtual void OnLoadFailed(const std::string& name, int64_t version, const absl::Status& error) {}
  // Any change of the model's state or config (after the callbacks above).
  virtual void OnModelChanged(const std::string& name) {}
};

struct RegistryOptions {
  std::string repository;
  ModelConfig default_config;
  // The engines' base options (device, calibration cache); each model's config.json overrides the
  // device and strategies, and engines are always built at load.
  EngineOptions engine_options;
  ServableFactory servable_factory;      // required
  RegistryListener* listener = nullptr;  // not owned, may be null
};

class ModelRegistry {
 public:
  // INVALID_ARGUMENT without a factory, NOT_FOUND when the repository is not a directory.
  static absl::StatusOr<std::unique_ptr<ModelRegistry>> Create(RegistryOptions options);
  ~ModelRegistry();  // StopWatching()
  ModelRegistry(const ModelRegistry&) = delete;
  ModelRegistry& operator=(const ModelRegistry&) = delete;

  // Loads every model of the repository (no stability wait). Failures are recorded per model;
  // returns OK when every model has a serving version, otherwise an error listing the failures.
  absl::Status LoadAll();
  // One file-watching pass.
  void Poll();
  // Loads or reloads one model from the repository now (also after Unload). NOT_FOUND when the
  // repository has no such model directory; the load error when no version could be loaded.
  absl::Status Load(const std::string& name);
  // Unloads every version of `name`; it stays unloaded (Poll ignores it) until Load. NOT_FOUND for
  // an unknown model.
  absl::Status Unload(const std::string& name);

  // The serving copy of `name` at `version` (0: highest serving version). INVALID_ARGUMENT for a
  // negative version, NOT_FOUND for an unknown model or version, UNAVAILABLE when the model is known
  // but has no serving version.
  absl::StatusOr<ModelVersionPtr> Get(absl::string_view name, int64_t version = 0) const;

  std::vector<ModelStatus> List() const;
  absl::StatusOr<ModelStatus> GetStatus(absl::string_view name) const;
  // Whether `name` is known (GetStatus would be OK), without building its status: asked on every
  // call to label its metrics.
  bool Contains(absl::string_view name) const;
  // Every known model has a serving version (and the repository has at least... zero is fine).
  bool AllReady() const;

  // Runs Poll() every `interval` on a thread of its own until StopWatching().
  void StartWatching(absl::Duration interval);
  void StopWatching();

  const std::string& repository() const { return options_.repository; }

 private:
  struct FileStamp {
    int64_t mtime_ns = -1;
    int64_t size = -1;  // -1: absent
    bool operator==(const FileStamp&) const = default;
  };
  // Of background.csv and background.npy, in that order.
  using BackgroundStamps = std::array<FileStamp, 2>;
  struct VersionSlot {
    ModelVersionPtr servable;
    VersionState state = VersionState::kUnloaded;
    std::string error;
    std::string path;  // relative to the repository
    FileStamp loaded_stamp;  // stamp of the file last loaded (or failed)
    FileStamp seen_stamp;    // stamp seen at the previous poll (stability check)
    BackgroundStamps loaded_background;  // the model's background files at that load
    FileStamp loaded_groups;             // its groups.json at that load
    // The model and background files of the copy that serves (`servable`): a change of
    // groups.json alone republishes it with the same engines, whatever became of the
    // groups.json before.
    FileStamp serving_stamp;
    BackgroundStamps serving_background;
    double load_seconds = 0;
    absl::Time loaded_at = absl::InfinitePast();
  };
  struct ModelEntry {
    std::map<int64_t, VersionSlot> versions;
    std::shared_ptr<const ModelConfig> config;
    std::string error;
    std::string config_error_key;  // (stamp, error) of the last bad config logged; "" when good
    FileStamp config_stamp;       // of the config in use
    FileStamp config_seen_stamp;  // previous poll
    BackgroundStamps background_seen;  // previous poll
    FileStamp groups_seen;             // previous poll
    bool explicitly_unloaded = false;
  };
  // What the repository holds for one model directory.
  struct ScannedVersion {
    std::string path;  // empty: no model file (or an ambiguous one: error set)
    std::string error;
    FileStamp stamp;
  };
  struct ScannedBackground {
    std::string path;   // "" when none (or an error)
    std::string error;  // several files, or one resolving outside the repository
    BackgroundStamps stamps;
  };
  struct ScannedModel {
    std::map<int64_t, ScannedVersion> versions;
    FileStamp config_stamp;
    ScannedBackground background;
    FileStamp groups_stamp;  // <repository>/<name>/groups.json
  };

  explicit ModelRegistry(RegistryOptions options);

  static FileStamp Stat(const std::string& path);
  // OK when `path` resolves (symbolic links followed) inside the repository root; otherwise
  // PERMISSION_DENIED naming both (or NOT_FOUND when it cannot be resolved).
  absl::Status CheckInsideRepository(const std::string& path) const;
  // Reads and parses <repository>/<name>/config.json (never under mu_).
  absl::StatusOr<ModelConfig> ReadConfig(const std::string& name) const;
  // The model directories of the repository. Directories that cannot be a model (a name outside
  // ValidModelName), and in ScanModel those that cannot be a version, are skipped with a warning
  // naming them, once per directory; names starting with '.' (the operator's or Kubernetes' own,
  // such as ..data) and lost+found are skipped quietly.
  std::vector<std::string> ScanModelNames() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(load_mu_);
  ScannedModel ScanModel(const std::string& name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(load_mu_);
  // Logs that `dir` (relative to the repository) is skipped and `why`, the first time only.
  void WarnSkippedDirectory(const std::string& dir, absl::string_view why) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(load_mu_);
  ScannedBackground ScanBackground(const std::string& name) const;
  // The background of a version being loaded: null when the model has none.
  static absl::StatusOr<std::shared_ptr<const Background>> LoadBackground(
      const Forest& forest, const ScannedBackground& scanned);
  // Brings one model in line with the repository. `force`: no stability wait, retry failures.
  void SyncModel(const std::string& name, bool force) ABSL_EXCLUSIVE_LOCKS_REQUIRED(load_mu_);
  // The engine options of a version of `name`: the base options with `config` applied, built at
  // load, and the hint naming the background file to add.
  EngineOptions EngineOptionsFor(const std::string& name, const ModelConfig& config,
                                 int64_t num_features) const;
  // The groups of a version being loaded (groups.json when `stamp` says it exists): null when the
  // model has none; INVALID_ARGUMENT naming the file when it is unreadable or not the model's.
  absl::StatusOr<FeatureGroupsPtr> LoadGroups(const std::string& name, const Forest& forest,
                                              const FileStamp& stamp) const;
  void LoadVersion(const std::string& name, int64_t version, const ScannedVersion& scanned,
                   const ScannedBackground& background, const FileStamp& groups_stamp,
                   std::shared_ptr<const ModelConfig> config)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(load_mu_);
  // Publishes the serving copy of `version` again with the model's groups.json as it is now
  // (the engines shared, the new grouping pinned) and READY; on a bad file the copy keeps serving
  // and the version reports FAILED.
  void RegroupVersion(const std::string& name, int64_t version, const FileStamp& groups_stamp)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(load_mu_);
  void UnloadVersion(const std::string& name, int64_t version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(load_mu_);
  void RemoveModel(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(load_mu_);
  ModelStatus StatusLocked(const std::string& name, const ModelEntry& entry) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const RegistryOptions options_;
  absl::Mutex load_mu_;    // serialises loading operations
  mutable absl::Mutex mu_;  // guards models_ (held briefly, never during a load)
  std::map<std::string, ModelEntry, std::less<>> models_ ABSL_GUARDED_BY(mu_);
  // Directories WarnSkippedDirectory has logged (scanning is otherwise read-only).
  mutable std::set<std::string> skipped_directories_ ABSL_GUARDED_BY(load_mu_);

  PeriodicThread watcher_;
};

}  // namespace grove::registry
