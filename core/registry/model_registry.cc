#include "core/registry/model_registry.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/common/log.h"
#include "core/model/loader.h"

namespace grove::registry {
namespace {

namespace fs = std::filesystem;

// The model file names of a version directory: Grove's own, and the Triton FIL backend's default
// names of the formats Grove reads (FIL's LightGBM name is model.txt too), so that a FIL model
// repository loads unchanged. The content decides the format (LoadModelFile sniffs it).
struct ModelFile {
  const char* name;
  const char* format;  // for messages
};
constexpr ModelFile kModelFiles[] = {{"model.json", "XGBoost JSON"},
                                     {"model.ubj", "XGBoost UBJSON"},
                                     {"model.txt", "LightGBM text"},
                                     {"catboost.json", "CatBoost JSON"},
                                     {"xgboost.json", "XGBoost JSON"},
                                     {"xgboost.ubj", "XGBoost UBJSON"},
                                     // The FIL backend's name for XGBoost's binary model: UBJSON since
                                     // XGBoost 2.1 (read), the legacy format before (refused by the
                                     // loader, naming it): the content decides.
                                     {"xgboost.model", "XGBoost UBJSON"},
                                     {"checkpoint.tl", "Treelite checkpoint"}};

// "model.json (XGBoost JSON), model.ubj (XGBoost UBJSON), ...": what a version directory may hold.
std::string ModelFileNames() {
  std::string names;
  for (const ModelFile& f : kModelFiles) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", f.name, " (", f.format, ")");
  }
  return names;
}

// Why a version directory's file is a model Grove cannot read (the FIL backend's other formats, and
// the pickles it cannot read either), or "" for any other file.
std::string UnreadableModelFile(const std::string& file) {
  if (absl::EndsWith(file, ".cbm")) {
    return "CatBoost's native binary model, which Grove does not read (its FlatBuffers schema is "
           "internal to CatBoost): save it as JSON, catboost.json "
           "(model.save_model(\"catboost.json\", format=\"json\"))";
  }
  for (const char* suffix : {".pkl", ".pickle", ".joblib"}) {
    if (absl::EndsWith(file, suffix)) {
      return "a Python pickle (scikit-learn, cuML, ...), which Grove does not read: Grove serves "
             "models saved by their libraries (model.json, model.ubj, model.txt, catboost.json) "
             "and Treelite checkpoints (checkpoint.tl: groveml.Model.from_sklearn(est).save("
             "\"checkpoint.tl\") writes one for a scikit-learn forest)";
    }
  }
  return "";
}
constexpr const char* kBackgroundFiles[] = {"background.csv", "background.npy"};
constexpr const char* kGroupsFile = "groups.json";

bool ValidModelName(const std::string& name) {
  if (name.empty() || name[0] == '.' || name.size() > 200) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

// `text` with the repository root taken off every path in it. What the registry stores is shown to
// callers (statuses, errors of calls to a model that is not ready), who need a file's place in the
// repository ("fraud/1/model.json"), not where the server keeps it. Both spellings of the root are
// taken off: as configured and resolved (symbolic links followed, as CheckInsideRepository does).
std::string RepositoryRelative(const std::string& repository, absl::string_view text) {
  std::vector<std::pair<std::string, std::string>> roots;
  const std::string given = (fs::path(repository) / "").string();
  std::error_code ec;
  const std::string resolved = (fs::canonical(repository, ec) / "").string();
  // A root of "/" would take every '/' off: nothing to hide there that a path does not show.
  if (given.size() > 1) roots.emplace_back(given, "");
  if (!ec && resolved.size() > 1 && resolved != given) roots.emplace_back(resolved, "");
  return absl::StrReplaceAll(text, roots);
}

bool ParseVersion(const std::string& s, int64_t* version) {
  if (s.empty() || s.size() > 18) return false;
  if (!std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  return absl::SimpleAtoi(s, version) && *version > 0;
}

}  // namespace

const char* VersionStateName(VersionState state) {
  switch (state) {
    case VersionState::kLoading: return "LOADING";
    case VersionState::kReady: return "READY";
    case VersionState::kFailed: return "FAILED";
    case VersionState::kUnloaded: return "UNLOADED";
  }
  return "UNKNOWN";
}

ServableFactory DefaultServableFactory(ThreadPool* pool) {
  return [pool](const ForestPtr& forest, std::shared_ptr<const Background> background,
                const EngineOptions& options) {
    return BuildServable(forest, std::move(background), options, pool);
  };
}

absl::StatusOr<std::unique_ptr<ModelRegistry>> ModelRegistry::Create(RegistryOptions options) {
  if (!options.servable_factory) {
    return absl::InvalidArgumentError("ModelRegistry needs a servable factory");
  }
  std::error_code ec;
  if (!fs::is_directory(options.repository, ec)) {
    return absl::NotFoundError(
        absl::StrCat("model repository '", options.repository, "' is not a directory"));
  }
  return std::unique_ptr<ModelRegistry>(new ModelRegistry(std::move(options)));
}

ModelRegistry::ModelRegistry(RegistryOptions options) : options_(std::move(options)) {}

ModelRegistry::~ModelRegistry() { StopWatching(); }

ModelRegistry::FileStamp ModelRegistry::Stat(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return FileStamp{};
  return FileStamp{static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
                   static_cast<int64_t>(st.st_size)};
}

absl::Status ModelRegistry::CheckInsideRepository(const std::string& path) const {
  std::error_code ec;
  const fs::path root = fs::canonical(options_.repository, ec);
  if (ec) {
    return absl::NotFoundError(absl::StrCat("model repository '", options_.repository,
                                            "' cannot be resolved: ", ec.message()));
  }
  const fs::path real = fs::canonical(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat(path, ": cannot be resolved: ", ec.message()));
  // Inside: the root is a prefix of the resolved path, component by component.
  auto r = root.begin();
  auto p = real.begin();
  for (; r != root.end() && p != real.end() && *r == *p; ++r, ++p) {
  }
  if (r != root.end() || p == real.end()) {
    // Where it leads is left out: the message is shown to callers (RepositoryRelative).
    return absl::PermissionDeniedError(
        absl::StrCat(path, " resolves to a path outside the model repository; refused"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ModelRegistry::ReadConfig(const std::string& name) const {
  const std::string path = (fs::path(options_.repository) / name / "config.json").string();
  if (absl::Status inside = CheckInsideRepository(path); !inside.ok()) return inside;
  return LoadModelConfigFile(path, options_.default_config);
}

void ModelRegistry::WarnSkippedDirectory(const std::string& dir, absl::string_view why) const {
  if (!skipped_directories_.insert(dir).second) return;
  GROVE_LOG(WARNING) << "directory in the model repository skipped" << KV("directory", dir)
                     << KV("why", why);
}

std::vector<std::string> ModelRegistry::ScanModelNames() const {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(options_.repository, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code ec2;
    if (!it->is_directory(ec2)) continue;
    std::string name = it->path().filename().string();
    if (ValidModelName(name)) {
      names.push_back(std::move(name));
    } else if (name[0] != '.' && name != "lost+found") {
      WarnSkippedDirectory(name,
                           "not a model name (1 to 200 letters, digits, '_', '-' and '.', not "
                           "starting with '.')");
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

ModelRegistry::ScannedBackground ModelRegistry::ScanBackground(const std::string& name) const {
  ScannedBackground out;
  const fs::path dir = fs::path(options_.repository) / name;
  std::vector<std::string> found;
  for (size_t i = 0; i < out.stamps.size(); ++i) {
    const std::string path = (dir / kBackgroundFiles[i]).string();
    out.stamps[i] = Stat(path);
    if (out.stamps[i].size < 0) continue;
    found.push_back(kBackgroundFiles[i]);
    out.path = path;
  }
  if (found.size() > 1) {
    out.error = absl::StrCat(dir.string(), " holds ", absl::StrJoin(found, " and "),
                             "; keep one background file");
  } else if (!out.path.empty()) {
    if (absl::Status inside = CheckInsideRepository(out.path); !inside.ok()) {
      out.error = std::string(inside.message());
    }
  }
  if (!out.error.empty()) {
    out.error = RepositoryRelative(options_.repository, out.error);
    out.path.clear();
  }
  return out;
}

absl::StatusOr<std::shared_ptr<const Background>> ModelRegistry::LoadBackground(
    const Forest& forest, const ScannedBackground& scanned) {
  if (!scanned.error.empty()) return absl::InvalidArgumentError(scanned.error);
  if (scanned.path.empty()) return nullptr;
  absl::StatusOr<Background> loaded = LoadBackgroundFile(forest, scanned.path);
  if (!loaded.ok()) return loaded.status();
  return std::make_shared<const Background>(std::move(*loaded));
}

ModelRegistry::ScannedModel ModelRegistry::ScanModel(const std::string& name) const {
  ScannedModel out;
  const fs::path dir = fs::path(options_.repository) / name;
  out.config_stamp = Stat((dir / "config.json").string());
  out.background = ScanBackground(name);
  out.groups_stamp = Stat((dir / kGroupsFile).string());
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (!it->is_directory(ec2)) continue;
    int64_t version = 0;
    const std::string dir_name = it->path().filename().string();
    if (!ParseVersion(dir_name, &version)) {
      if (dir_name[0] != '.') {
        WarnSkippedDirectory(absl::StrCat(name, "/", dir_name),
                             "not a version (a positive integer of at most 18 digits)");
      }
      continue;
    }
    ScannedVersion v;
    std::vector<std::string> found;
    for (const ModelFile& file : kModelFiles) {
      const std::string path = (it->path() / file.name).string();
      FileStamp stamp = Stat(path);
      if (stamp.size >= 0) {
        found.push_back(file.name);
        v.path = path;
        v.stamp = stamp;
      }
    }
    if (found.empty()) {
      // A model in a format Grove cannot read fails the version, naming the file and why.
      for (fs::directory_iterator f(it->path(), ec2), end2; !ec2 && f != end2; f.increment(ec2)) {
        const std::string why = UnreadableModelFile(f->path().filename().string());
        if (why.empty()) continue;
        v.error = absl::StrCat(f->path().string(), " is ", why);
        v.stamp = Stat(f->path().string());
        break;
      }
      if (!v.error.empty()) {
        v.error = RepositoryRelative(options_.repository, v.error);
        out.versions.emplace(version, std::move(v));
      }
      continue;  // otherwise not (yet) a version
    }
    if (found.size() > 1) {
      v.error = absl::StrCat(it->path().string(), " holds several model files (",
                             absl::StrJoin(found, ", "), "); keep exactly one");
      v.path.clear();
    } else if (absl::Status inside = CheckInsideRepository(v.path); !inside.ok()) {
      v.error = std::string(inside.message());
      v.path.clear();
    }
    v.error = RepositoryRelative(options_.repository, v.error);
    out.versions.emplace(version, std::move(v));
  }
  return out;
}

absl::Status ModelRegistry::LoadAll() {
  absl::MutexLock load(&load_mu_);
  const std::vector<std::string> names = ScanModelNames();
  for (const std::string& name : names) SyncModel(name, /*force=*/true);
  std::vector<std::string> failures;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [name, entry] : models_) {
      ModelStatus s = StatusLocked(name, entry);
      if (s.ready) continue;
      std::string why = s.error;
      for (const VersionStatus& v : s.versions) {
        if (!v.error.empty()) absl::StrAppend(&why, why.empty() ? "" : "; ", v.error);
      }
      failures.push_back(absl::StrCat(name, ": ", why.empty() ? "not ready" : why));
    }
  }
  if (failures.empty()) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("models not ready: ", absl::StrJoin(failures, " | ")));
}

void ModelRegistry::Poll() {
  absl::MutexLock load(&load_mu_);
  const std::vector<std::string> names = ScanModelNames();
  for (const std::string& name : names) SyncModel(name, /*force=*/false);
  std::vector<std::string> gone;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [name, entry] : models_) {
      if (!std::binary_search(names.begin(), names.end(), name)) gone.push_back(name);
    }
  }
  for (const std::string& name : gone) RemoveModel(name);
}

absl::Status ModelRegistry::Load(const std::string& name) {
  absl::MutexLock load(&load_mu_);
  std::error_code ec;
  if (!ValidModelName(name) || !fs::is_directory(fs::path(options_.repository) / name, ec)) {
    return absl::NotFoundError(
        absl::StrCat("model '", name, "' not found in the repository ", options_.repository));
  }
  SyncModel(name, /*force=*/true);
  absl::ReaderMutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return absl::InternalError("model vanished while loading");
  ModelStatus s = StatusLocked(name, it->second);
  std::string why = s.error;
  for (const VersionStatus& v : s.versions) {
    if (!v.error.empty()) absl::StrAppend(&why, why.empty() ? "" : "; ", v.error);
  }
  if (!s.ready) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", name, "' could not be loaded: ", why.empty() ? "no version" : why));
  }
  if (!why.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", name, "' reload failed (previous copy still serving): ", why));
  }
  return absl::OkStatus();
}

absl::Status ModelRegistry::Unload(const std::string& name) {
  absl::MutexLock load(&load_mu_);
  std::vector<int64_t> versions;
  {
    absl::MutexLock lock(&mu_);
    auto it = models_.find(name);
    if (it == models_.end()) return absl::NotFoundError(absl::StrCat("model '", name, "' not found"));
    it->second.explicitly_unloaded = true;
    for (const auto& [v, slot] : it->second.versions) versions.push_back(v);
  }
  for (int64_t v : versions) UnloadVersion(name, v);
  GROVE_LOG(INFO) << "model unloaded" << KV("model", name);
  if (options_.listener) options_.listener->OnModelChanged(name);
  return absl::OkStatus();
}

void ModelRegistry::SyncModel(const std::string& name, bool force) {
  const ScannedModel scanned = ScanModel(name);
  std::shared_ptr<const ModelConfig> config;
  bool reload_all = false;
  bool changed = false;
  std::vector<int64_t> to_load;
  std::vector<int64_t> to_regroup;
  std::vector<int64_t> to_unload;
  std::set<int64_t> wanted;

  // Whether config.json must be read. Only loading operations (serialised by load_mu_) change
  // entries, so what is decided here still holds once the file has been read outside the lock.
  bool read_config = false;
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = models_.try_emplace(name);
    ModelEntry& entry = it->second;
    changed = inserted;
    if (force) entry.explicitly_unloaded = false;
    if (entry.explicitly_unloaded) return;
    const bool file_changed = scanned.config_stamp != entry.config_stamp;
    // A config that failed and has not changed since is not read again (nor reported again).
    const bool failed_unchanged =
        entry.config == nullptr && !file_changed && !entry.config_error_key.empty();
    if (force || file_changed || (entry.config == nullptr && !failed_unchanged)) {
      const bool stable = force || scanned.config_stamp == entry.config_seen_stamp;
      entry.config_seen_stamp = scanned.config_stamp;
      if (!stable) {
        // Note the versions' stamps too so that they do not wait one more poll.
        for (const auto& [v, sv] : scanned.versions) entry.versions[v].seen_stamp = sv.stamp;
        return;
      }
      read_config = true;
    }
  }
  // Reading and parsing happen outside the registry lock: Get, List and Status never wait on a file.
  absl::StatusOr<ModelConfig> parsed = options_.default_config;
  if (read_config && scanned.config_stamp.size >= 0) parsed = ReadConfig(name);

  {
    absl::MutexLock lock(&mu_);
    ModelEntry& entry = models_[name];
    if (read_config) {
      const bool had_config = entry.config != nullptr;
      const bool config_file_changed = scanned.config_stamp != entry.config_stamp;
      entry.config_stamp = scanned.config_stamp;
      if (!parsed.ok()) {
        entry.error = RepositoryRelative(options_.repository, parsed.status().message());
        changed = true;
        // Once per distinct (file version, error): a bad file is not reported at every poll.
        const std::string key = absl::StrCat(scanned.config_stamp.mtime_ns, ":",
                                             scanned.config_stamp.size, ":", entry.error);
        if (key != entry.config_error_key) {
          entry.config_error_key = key;
          GROVE_LOG(WARNING) << "bad model config" << KV("model", name)
                             << KV("error", parsed.status().message());
        }
        if (!had_config) return;  // nothing can load without a valid config
      } else {
        entry.error.clear();
        entry.config_error_key.clear();
        entry.config = std::make_shared<const ModelConfig>(std::move(*parsed));
        reload_all = had_config && config_file_changed;
        changed = true;
      }
    }
    if (entry.config == nullptr) return;  // a bad config that has not changed
    config = entry.config;
    // A background file being written waits, like a model file, for a stable stamp.
    const bool background_stable = force || (scanned.background.stamps == entry.background_seen &&
                                              scanned.groups_stamp == entry.groups_seen);
    entry.background_seen = scanned.background.stamps;
    entry.groups_seen = scanned.groups_stamp;

    // Versions wanted by the policy.
    if (!scanned.versions.empty()) {
      switch (config->version_policy) {
        case VersionPolicy::kLatest:
          wanted.insert(scanned.versions.rbegin()->first);
          break;
        case VersionPolicy::kAll:
          for (const auto& [v, sv] : scanned.versions) wanted.insert(v);
          break;
        case VersionPolicy::kSpecific:
          for (int64_t v : config->specific_versions) {
            if (scanned.versions.count(v)) wanted.insert(v);
          }
          break;
      }
    }
    if (wanted.empty() && entry.error.empty()) {
      entry.error = absl::StrCat(
          "no version directory holds a model file (wanted by the version policy): ",
          ModelFileNames());
      changed = true;
    } else if (!wanted.empty() && entry.error.rfind("no version directory", 0) == 0) {
      entry.error.clear();
    }
    for (int64_t v : wanted) {
      const ScannedVersion& sv = scanned.versions.at(v);
      VersionSlot& slot = entry.versions[v];
      const bool stable = force || (sv.stamp == slot.seen_stamp && background_stable);
      slot.seen_stamp = sv.stamp;
      // A wanted version without a copy (never loaded, or unloaded while another version was
      // wanted) is loaded whatever its stamps: they record the last load attempt, not what serves.
      // A version that failed and stayed wanted is retried only once its files change.
      const bool needed = force || reload_all || slot.state == VersionState::kUnloaded ||
                          sv.stamp != slot.loaded_stamp ||
                          scanned.background.stamps != slot.loaded_background ||
                          scanned.groups_stamp != slot.loaded_groups;
      if (!needed || !stable) continue;
      if (!sv.error.empty()) {
        slot.state = VersionState::kFailed;
        slot.error = sv.error;
        slot.loaded_stamp = sv.stamp;
        slot.loaded_background = scanned.background.stamps;
        slot.loaded_groups = scanned.groups_stamp;
        changed = true;
        continue;
      }
      // Only groups.json changed since the serving copy was loaded: the engines stay; the
      // version is published again with the new groups (building engines anew can take seconds,
      // calibration included), whether the previous groups.json was valid, absent or bad.
      const bool groups_only = !force && !reload_all && slot.servable != nullptr &&
                               sv.stamp == slot.serving_stamp &&
                               sv.stamp == slot.loaded_stamp &&
                               scanned.background.stamps == slot.serving_background &&
                               scanned.background.stamps == slot.loaded_background &&
                               scanned.groups_stamp != slot.loaded_groups;
      (groups_only ? to_regroup : to_load).push_back(v);
    }
    for (auto& [v, slot] : entry.versions) {
      if (wanted.count(v)) continue;
      const auto sv = scanned.versions.find(v);
      // The files of a version not wanted are followed too, so that once wanted again (the newer
      // version deleted) it loads at that poll unless its file changed since the poll before.
      if (sv != scanned.versions.end()) slot.seen_stamp = sv->second.stamp;
      if (slot.servable != nullptr || slot.state != VersionState::kUnloaded ||
          sv == scanned.versions.end()) {
        to_unload.push_back(v);
      }
    }
  }
  for (int64_t v : to_load) {
    ScannedVersion sv = scanned.versions.at(v);
    LoadVersion(name, v, sv, scanned.background, scanned.groups_stamp, config);
    changed = true;
  }
  for (int64_t v : to_regroup) {
    RegroupVersion(name, v, scanned.groups_stamp);
    changed = true;
  }
  // Versions no longer wanted give way only once every wanted version serves (a new version that
  // is still being written, or failed, does not take the old one down), or when their files are
  // gone.
  bool wanted_serving = true;
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = models_.find(name);
    for (int64_t v : wanted) {
      const auto slot = it->second.versions.find(v);
      wanted_serving = wanted_serving && slot != it->second.versions.end() &&
                       slot->second.servable != nullptr;
    }
  }
  for (int64_t v : to_unload) {
    if (!wanted_serving && scanned.versions.count(v)) continue;
    UnloadVersion(name, v);
    changed = true;
    if (!scanned.versions.count(v)) {
      absl::MutexLock lock(&mu_);
      auto it = models_.find(name);
      if (it != models_.end()) it->second.versions.erase(v);
    }
  }
  if (changed && options_.listener) options_.listener->OnModelChanged(name);
}

EngineOptions ModelRegistry::EngineOptionsFor(const std::string& name, const ModelConfig& config,
                                              int64_t num_features) const {
  EngineOptions o = options_.engine_options;
  o.build = EngineBuild::kAtLoad;
  // A server without GPUs (--no-gpu) runs every model on the CPU whatever its config says.
  if (o.device != Device::kCpu) o.device = config.device;
  o.predict_strategy = config.predict_strategy;
  o.explain_strategy = config.explain_strategy;
  o.no_background_message = absl::StrCat(
      "model '", name, "' has no background data set for interventional SHAP: add ",
      (fs::path(name) / kBackgroundFiles[0]).string(), " (or ", kBackgroundFiles[1], ": 1 to ",
      kMaxBackgroundRows, " rows of its ", num_features, " features) beside its version directories");
  return o;
}

absl::StatusOr<FeatureGroupsPtr> ModelRegistry::LoadGroups(const std::string& name,
                                                           const Forest& forest,
                                                           const FileStamp& stamp) const {
  if (stamp.size < 0) return nullptr;
  const std::string path = (fs::path(options_.repository) / name / kGroupsFile).string();
  if (absl::Status inside = CheckInsideRepository(path); !inside.ok()) return inside;
  return LoadFeatureGroupsFile(path, forest.num_features, forest.feature_names);
}

namespace {

// What `servable` prepares for the model's groups (a null pin without groups).
absl::StatusOr<CachePin> PinGroups(const Servable& servable, const FeatureGroupsPtr& groups) {
  if (groups == nullptr) return CachePin();
  return servable.PinGroups(*groups);
}

}  // namespace

void ModelRegistry::LoadVersion(const std::string& name, int64_t version,
                                const ScannedVersion& scanned,
                                const ScannedBackground& background, const FileStamp& groups_stamp,
                                std::shared_ptr<const ModelConfig> config) {
  std::string shown_path = RepositoryRelative(options_.repository, scanned.path);
  {
    absl::MutexLock lock(&mu_);
    VersionSlot& slot = models_[name].versions[version];
    slot.state = VersionState::kLoading;
    slot.path = std::move(shown_path);
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<ForestPtr> forest = LoadModelFile(scanned.path);
  absl::StatusOr<FeatureGroupsPtr> groups =
      forest.ok() ? LoadGroups(name, **forest, groups_stamp) : forest.status();
  absl::StatusOr<std::shared_ptr<const Background>> bg =
      groups.ok() ? LoadBackground(**forest, background) : groups.status();
  absl::StatusOr<ServablePtr> built =
      bg.ok() ? options_.servable_factory(*forest, *bg,
                                          EngineOptionsFor(name, *config, (*forest)->num_features))
              : absl::StatusOr<ServablePtr>(bg.status());
  absl::StatusOr<CachePin> groups_pin = CachePin();
  if (built.ok()) {
    groups_pin = PinGroups(**built, *groups);
    if (!groups_pin.ok()) built = groups_pin.status();
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!built.ok()) {
    {
      absl::MutexLock lock(&mu_);
      VersionSlot& slot = models_[name].versions[version];
      slot.state = VersionState::kFailed;
      slot.error = RepositoryRelative(options_.repository, built.status().message());
      slot.loaded_stamp = scanned.stamp;
      slot.loaded_background = background.stamps;
      slot.loaded_groups = groups_stamp;
    }
    GROVE_LOG(WARNING) << "model load failed" << KV("model", name) << KV("version", version)
                       << KV("path", scanned.path) << KV("error", built.status().message());
    if (options_.listener) options_.listener->OnLoadFailed(name, version, built.status());
    return;
  }
  auto servable = std::make_shared<ModelVersion>();
  servable->name = name;
  servable->version = version;
  servable->path = scanned.path;
  servable->servable = *std::move(built);
  servable->config = std::move(config);
  servable->groups = *std::move(groups);
  servable->groups_pin = *std::move(groups_pin);
  servable->load_seconds = seconds;
  servable->loaded_at = absl::Now();
  ModelVersionPtr published = servable;
  ModelVersionPtr previous;
  {
    absl::MutexLock lock(&mu_);
    VersionSlot& slot = models_[name].versions[version];
    previous = std::move(slot.servable);
    slot.servable = published;  // the atomic swap
    slot.state = VersionState::kReady;
    slot.error.clear();
    slot.loaded_stamp = scanned.stamp;
    slot.loaded_background = background.stamps;
    slot.loaded_groups = groups_stamp;
    slot.serving_stamp = scanned.stamp;
    slot.serving_background = background.stamps;
    slot.load_seconds = seconds;
    slot.loaded_at = published->loaded_at;
  }
  GROVE_LOG(INFO) << (previous ? "model reloaded" : "model loaded") << KV("model", name)
                  << KV("version", version) << KV("seconds", seconds)
                  << KV("trees", published->forest().trees.size())
                  << KV("features", published->forest().num_features)
                  << KV("background_rows", published->servable->background_rows())
                  << KV("predict_engine", published->servable->Describe(Operation::kPredict));
  if (options_.listener) options_.listener->OnVersionReady(published);
  // `previous` is released here; requests still holding it finish on it.
}

void ModelRegistry::RegroupVersion(const std::string& name, int64_t version,
                                   const FileStamp& groups_stamp) {
  ModelVersionPtr current;
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = models_.find(name);
    if (it == models_.end()) return;
    auto v = it->second.versions.find(version);
    if (v == it->second.versions.end()) return;
    current = v->second.servable;
  }
  if (current == nullptr) return;
  absl::StatusOr<FeatureGroupsPtr> groups = LoadGroups(name, current->forest(), groups_stamp);
  absl::StatusOr<CachePin> groups_pin =
      groups.ok() ? PinGroups(*current->servable, *groups) : groups.status();
  if (!groups_pin.ok()) groups = groups_pin.status();
  if (!groups.ok()) {
    {
      absl::MutexLock lock(&mu_);
      VersionSlot& slot = models_[name].versions[version];
      slot.state = VersionState::kFailed;
      slot.error = RepositoryRelative(options_.repository, groups.status().message());
      slot.loaded_groups = groups_stamp;
    }
    GROVE_LOG(WARNING) << "model groups failed" << KV("model", name) << KV("version", version)
                       << KV("error", groups.status().message());
    if (options_.listener) options_.listener->OnLoadFailed(name, version, groups.status());
    return;
  }
  auto regrouped = std::make_shared<ModelVersion>(*current);  // the same servable, shared
  regrouped->groups = *std::move(groups);
  regrouped->groups_pin = *std::move(groups_pin);
  regrouped->loaded_at = absl::Now();
  ModelVersionPtr published = regrouped;
  {
    absl::MutexLock lock(&mu_);
    VersionSlot& slot = models_[name].versions[version];
    slot.servable = published;
    slot.state = VersionState::kReady;
    slot.error.clear();
    slot.loaded_groups = groups_stamp;
    slot.loaded_at = published->loaded_at;
  }
  GROVE_LOG(INFO) << "model groups reloaded" << KV("model", name) << KV("version", version)
                  << KV("groups", published->groups != nullptr ? published->groups->num_groups()
                                                               : 0);
  if (options_.listener) options_.listener->OnVersionReady(published);
}

void ModelRegistry::UnloadVersion(const std::string& name, int64_t version) {
  ModelVersionPtr previous;
  {
    absl::MutexLock lock(&mu_);
    auto it = models_.find(name);
    if (it == models_.end()) return;
    auto v = it->second.versions.find(version);
    if (v == it->second.versions.end()) return;
    previous = std::move(v->second.servable);
    v->second.state = VersionState::kUnloaded;
  }
  if (previous) {
    GROVE_LOG(INFO) << "model version unloaded" << KV("model", name) << KV("version", version);
  }
  if (options_.listener) options_.listener->OnVersionUnloaded(name, version);
}

void ModelRegistry::RemoveModel(const std::string& name) {
  std::vector<int64_t> versions;
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = models_.find(name);
    if (it == models_.end()) return;
    for (const auto& [v, slot] : it->second.versions) versions.push_back(v);
  }
  for (int64_t v : versions) UnloadVersion(name, v);
  {
    absl::MutexLock lock(&mu_);
    models_.erase(name);
  }
  GROVE_LOG(INFO) << "model removed from the repository" << KV("model", name);
  if (options_.listener) options_.listener->OnModelChanged(name);
}

absl::StatusOr<ModelVersionPtr> ModelRegistry::Get(absl::string_view name, int64_t version) const {
  if (version < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "version ", version, " of model '", name,
        "' is not valid: versions are positive (0 asks for the highest serving version)"));
  }
  absl::ReaderMutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    return absl::NotFoundError(absl::StrCat("model '", name, "' not found"));
  }
  const ModelEntry& entry = it->second;
  if (version > 0) {
    auto v = entry.versions.find(version);
    if (v == entry.versions.end()) {
      return absl::NotFoundError(absl::StrCat("model '", name, "' has no version ", version));
    }
    if (v->second.servable == nullptr) {
      return absl::UnavailableError(absl::StrCat("model '", name, "' version ", version,
                                                 " is not ready (",
                                                 VersionStateName(v->second.state),
                                                 v->second.error.empty() ? "" : ": ",
                                                 v->second.error, ")"));
    }
    return v->second.servable;
  }
  for (auto v = entry.versions.rbegin(); v != entry.versions.rend(); ++v) {
    if (v->second.servable != nullptr) return v->second.servable;
  }
  std::string why = entry.explicitly_unloaded ? "unloaded" : entry.error;
  for (const auto& [v, slot] : entry.versions) {
    if (!slot.error.empty()) absl::StrAppend(&why, why.empty() ? "" : "; ", slot.error);
  }
  return absl::UnavailableError(absl::StrCat("model '", name, "' is not ready",
                                             why.empty() ? "" : ": ", why));
}

ModelStatus ModelRegistry::StatusLocked(const std::string& name, const ModelEntry& entry) const {
  ModelStatus s;
  s.name = name;
  s.error = entry.explicitly_unloaded && entry.error.empty() ? "unloaded" : entry.error;
  s.config = entry.config;
  for (const auto& [v, slot] : entry.versions) {
    VersionStatus vs;
    vs.version = v;
    vs.state = slot.state;
    vs.error = slot.error;
    vs.serving = slot.servable != nullptr;
    vs.load_seconds = slot.load_seconds;
    vs.path = slot.path;
    vs.loaded_at = slot.loaded_at;
    s.ready = s.ready || vs.serving;
    s.versions.push_back(std::move(vs));
  }
  return s;
}

std::vector<ModelStatus> ModelRegistry::List() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<ModelStatus> out;
  out.reserve(models_.size());
  for (const auto& [name, entry] : models_) out.push_back(StatusLocked(name, entry));
  return out;
}

absl::StatusOr<ModelStatus> ModelRegistry::GetStatus(absl::string_view name) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return absl::NotFoundError(absl::StrCat("model '", name, "' not found"));
  return StatusLocked(it->first, it->second);
}

bool ModelRegistry::Contains(absl::string_view name) const {
  absl::ReaderMutexLock lock(&mu_);
  return models_.contains(name);
}

bool ModelRegistry::AllReady() const {
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, entry] : models_) {
    if (entry.explicitly_unloaded) continue;
    bool ready = false;
    for (const auto& [v, slot] : entry.versions) ready = ready || slot.servable != nullptr;
    if (!ready) return false;
  }
  return true;
}

void ModelRegistry::StartWatching(absl::Duration interval) {
  watcher_.Start(interval, [this] { Poll(); });
}

void ModelRegistry::StopWatching() { watcher_.Stop(); }

}  // namespace grove::registry
