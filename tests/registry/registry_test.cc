// ModelRegistry: start-up load, version policies, file watching, reload/unload, atomic swap, bad
// models and configs. Models come from the test corpus (tests/golden, /work/shared/testdata).
#include "core/registry/model_registry.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <array>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/thread_pool.h"
#include "core/model/loader.h"
#include "core/registry/model_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"

namespace grove::registry {
namespace {

namespace fs = std::filesystem;

// First corpus case directory holding `file` (model.json / model.txt), "" when none.
std::string FindCaseWith(const std::string& file, int skip = 0) {
  for (const std::string& dir : testing::CorpusCaseDirs()) {
    std::error_code ec;
    if (fs::is_regular_file(fs::path(dir) / file, ec) &&
        !fs::exists(fs::path(dir) / "model.unsupported", ec) &&
        dir.find("refused") == std::string::npos) {
      if (skip-- == 0) return (fs::path(dir) / file).string();
    }
  }
  return "";
}

class TempRepo {
 public:
  TempRepo() {
    root_ = fs::temp_directory_path() /
            absl::StrCat("grove_registry_test_", ::getpid(), "_", counter_++);
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~TempRepo() { fs::remove_all(root_); }
  std::string path() const { return root_.string(); }
  // Copies `from` to <name>/<version>/<file name of from>, with an mtime `age` in the past.
  void Put(const std::string& name, int version, const std::string& from,
           std::chrono::seconds bump = std::chrono::seconds(0)) {
    fs::path dir = root_ / name / std::to_string(version);
    fs::create_directories(dir);
    fs::path to = dir / fs::path(from).filename();
    fs::copy_file(from, to, fs::copy_options::overwrite_existing);
    Touch(to, bump);
  }
  // Copies `from` to <name>/<version>/<file>.
  void PutAs(const std::string& name, int version, const std::string& from,
             const std::string& file) {
    fs::path dir = root_ / name / std::to_string(version);
    fs::create_directories(dir);
    fs::copy_file(from, dir / file, fs::copy_options::overwrite_existing);
    Touch(dir / file, std::chrono::seconds(0));
  }
  void Write(const std::string& rel, const std::string& text,
             std::chrono::seconds bump = std::chrono::seconds(0)) {
    fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::trunc) << text;
    Touch(p, bump);
  }
  void Remove(const std::string& rel) { fs::remove_all(root_ / rel); }

 private:
  static void Touch(const fs::path& p, std::chrono::seconds bump) {
    // Distinct mtimes even on coarse file systems.
    fs::last_write_time(p, fs::file_time_type::clock::now() + bump + std::chrono::seconds(++tick_));
  }
  fs::path root_;
  static inline int counter_ = 0;
  static inline int tick_ = 0;
};

class CountingListener : public RegistryListener {
 public:
  void OnVersionReady(const ModelVersionPtr&) override { ready++; }
  void OnVersionUnloaded(const std::string&, int64_t) override { unloaded++; }
  void OnLoadFailed(const std::string&, int64_t, const absl::Status&) override { failed++; }
  std::atomic<int> ready{0}, unloaded{0}, failed{0};
};

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    xgb_ = FindCaseWith("model.json");
    xgb2_ = FindCaseWith("model.json", 1);
    lgb_ = FindCaseWith("model.txt");
    if (xgb_.empty() || xgb2_.empty() || lgb_.empty()) GTEST_SKIP() << "no corpus models";
  }
  // `factory`: DefaultServableFactory's when null.
  std::unique_ptr<ModelRegistry> Make(const TempRepo& repo, ModelConfig defaults = {},
                                      ServableFactory factory = nullptr) {
    RegistryOptions o;
    o.repository = repo.path();
    o.default_config = defaults;
    o.servable_factory = factory ? std::move(factory) : DefaultServableFactory(&pool_);
    o.listener = &listener_;
    auto r = ModelRegistry::Create(o);
    EXPECT_TRUE(r.ok()) << r.status();
    return std::move(*r);
  }
  // Predicts one NaN row with `m` (checks the servable is usable).
  static void PredictOnce(const ModelVersionPtr& m) {
    std::vector<float> row(m->forest().num_features, NAN);
    RunParams params;
    std::vector<float> out(m->servable->Width(Operation::kPredict, params));
    RunInfo info;
    ASSERT_TRUE(m->servable
                    ->Run(Operation::kPredict, params,
                          MakeRowsView(row.data(), 1, m->forest().num_features),
                          MakeMatrixView(out.data(), 1, static_cast<int64_t>(out.size())), &info)
                    .ok());
  }

  std::string xgb_, xgb2_, lgb_;
  ThreadPool pool_{2};
  CountingListener listener_;
};

TEST_F(RegistryTest, CreateNeedsADirectory) {
  RegistryOptions o;
  o.repository = "/nonexistent/grove";
  o.servable_factory = DefaultServableFactory(nullptr);
  EXPECT_EQ(ModelRegistry::Create(o).status().code(), absl::StatusCode::kNotFound);
  o.servable_factory = nullptr;
  EXPECT_EQ(ModelRegistry::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RegistryTest, LoadAllServesLatestVersionByDefault) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  repo.Put("a", 2, xgb2_);
  repo.Put("b", 7, lgb_);
  repo.Write("not a model name!/1/model.json", "{}");  // ignored: invalid name
  auto reg = Make(repo);
  ASSERT_TRUE(reg->LoadAll().ok());
  auto a = reg->Get("a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->version, 2);
  EXPECT_EQ((*a)->name, "a");
  PredictOnce(*a);
  EXPECT_EQ(reg->Get("a", 1).status().code(), absl::StatusCode::kNotFound);
  auto b = reg->Get("b", 7);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->forest().format, ModelFormat::kLightgbmText);
  EXPECT_EQ(reg->Get("zzz").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(reg->Get("b", 8).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(reg->AllReady());
  auto list = reg->List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name, "a");
  EXPECT_TRUE(list[0].ready);
  EXPECT_EQ(listener_.ready.load(), 2);
}

TEST_F(RegistryTest, ConfigSelectsVersionsAndLimits) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  repo.Put("a", 2, xgb2_);
  repo.Put("a", 3, xgb_);
  repo.Write("a/config.json", R"({"versions": [1, 3], "max_request_rows": 10,
      "default_outputs": ["margin", "leaf"],
      "batching": {"predict": {"max_batch_rows": 8, "max_delay_us": 0}}})");
  auto reg = Make(repo);
  ASSERT_TRUE(reg->LoadAll().ok());
  EXPECT_TRUE(reg->Get("a", 1).ok());
  EXPECT_EQ(reg->Get("a", 2).status().code(), absl::StatusCode::kNotFound);
  auto latest = reg->Get("a");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ((*latest)->version, 3);
  const ModelConfig& c = *(*latest)->config;
  EXPECT_EQ(c.max_request_rows, 10);
  EXPECT_EQ(c.Batching(Operation::kPredict).max_batch_rows, 8);
  EXPECT_EQ(c.Batching(Operation::kPredict).max_delay, absl::ZeroDuration());
  EXPECT_EQ(c.Batching(Operation::kExplain).max_batch_rows, 1024);  // default kept
  EXPECT_EQ(c.default_outputs,
            (std::vector<OutputKind>{OutputKind::kMargin, OutputKind::kLeaf}));
}

TEST_F(RegistryTest, BadModelFailsAloneWithItsError) {
  TempRepo repo;
  repo.Put("good", 1, xgb_);
  repo.Write("bad/1/model.json", "{ this is not a model");
  repo.Put("two", 1, xgb_);
  repo.Put("two", 1, lgb_);  // two model files in one version
  auto reg = Make(repo);
  absl::Status all = reg->LoadAll();
  EXPECT_FALSE(all.ok());
  EXPECT_NE(all.message().find("bad"), absl::string_view::npos) << all;
  EXPECT_TRUE(reg->Get("good").ok());
  auto bad = reg->Get("bad");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kUnavailable);
  auto st = reg->GetStatus("bad");
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->versions.size(), 1u);
  EXPECT_EQ(st->versions[0].state, VersionState::kFailed);
  EXPECT_FALSE(st->versions[0].error.empty());
  auto two = reg->GetStatus("two");
  ASSERT_TRUE(two.ok());
  EXPECT_NE(two->versions[0].error.find("several model files"), std::string::npos);
  EXPECT_FALSE(reg->AllReady());
  EXPECT_GE(listener_.failed.load(), 1);
}

// A CatBoost JSON export loads as catboost.json (and as model.json: the content decides); a native
// .cbm fails its version, naming the JSON export.
TEST_F(RegistryTest, CatboostJsonLoadsAndCbmIsRefused) {
  const std::string cb = GROVE_SOURCE_DIR "/tests/golden/cb_multiclass3/catboost.json";
  TempRepo repo;
  repo.PutAs("claims", 1, cb, "catboost.json");
  repo.PutAs("claims_json", 1, cb, "model.json");
  repo.Write("native/1/model.cbm", "CBM1 flatbuffers");
  auto reg = Make(repo);
  EXPECT_FALSE(reg->LoadAll().ok());
  for (const char* name : {"claims", "claims_json"}) {
    auto m = reg->Get(name);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    EXPECT_EQ((*m)->forest().format, ModelFormat::kCatboostJson);
    PredictOnce(*m);
  }
  auto st = reg->GetStatus("native");
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->versions.size(), 1u);
  EXPECT_EQ(st->versions[0].state, VersionState::kFailed);
  EXPECT_THAT(st->versions[0].error, ::testing::HasSubstr("model.cbm is CatBoost's native binary"));
  EXPECT_THAT(st->versions[0].error, ::testing::HasSubstr("catboost.json"));
}

// A Triton FIL backend repository: its default file names of the formats Grove reads load as they
// are (config.pbtxt beside them is not read); its other formats fail their version with an error
// naming the file and what to do.
TEST_F(RegistryTest, TritonFilRepositoryLoadsUnchanged) {
  const std::string ubj = FindCaseWith("model.ubj");
  TempRepo repo;
  const std::string pbtxt = R"(backend: "fil"
max_batch_size: 32768
parameters [ { key: "model_type" value: { string_value: "xgboost_json" } } ]
)";
  repo.PutAs("fil_json", 1, xgb_, "xgboost.json");
  repo.Write("fil_json/config.pbtxt", pbtxt);
  repo.PutAs("fil_lightgbm", 1, lgb_, "model.txt");
  repo.Write("fil_lightgbm/config.pbtxt", pbtxt);
  if (!ubj.empty()) repo.PutAs("fil_ubj", 1, ubj, "xgboost.ubj");
  // XGBoost >= 2.1 writes UBJSON into the FIL backend's xgboost.model: the content decides.
  if (!ubj.empty()) repo.PutAs("fil_model", 1, ubj, "xgboost.model");
  const std::string checkpoint = FindCaseWith("checkpoint.tl");
  ASSERT_FALSE(checkpoint.empty()) << "tests/golden/tl_* (scripts/make_treelite_corpus.py)";
  repo.PutAs("fil_checkpoint", 1, checkpoint, "checkpoint.tl");
  repo.Write("fil_checkpoint/config.pbtxt", pbtxt);
  repo.Write("legacy/1/xgboost.model", std::string("\0\0\0?binf", 10));
  repo.Write("treelite/1/checkpoint.tl", "TREELITE");
  repo.Write("sklearn/1/model.pkl", "\x80\x04pickle");
  repo.PutAs("both", 1, xgb_, "model.json");
  repo.PutAs("both", 1, xgb2_, "xgboost.json");
  repo.Write("empty/1/notes.txt", "not a model");
  auto reg = Make(repo);
  EXPECT_FALSE(reg->LoadAll().ok());

  for (const char* name : {"fil_json", "fil_lightgbm", "fil_checkpoint"}) {
    auto m = reg->Get(name);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    PredictOnce(*m);
  }
  EXPECT_EQ((*reg->Get("fil_json"))->forest().format, ModelFormat::kXgboostJson);
  EXPECT_EQ((*reg->Get("fil_lightgbm"))->forest().format, ModelFormat::kLightgbmText);
  EXPECT_EQ((*reg->Get("fil_checkpoint"))->forest().format, ModelFormat::kTreeliteCheckpoint);
  if (!ubj.empty()) {
    for (const char* name : {"fil_ubj", "fil_model"}) {
      auto m = reg->Get(name);
      ASSERT_TRUE(m.ok()) << name << ": " << m.status();
      EXPECT_EQ((*m)->forest().format, ModelFormat::kXgboostUbjson);
      PredictOnce(*m);
    }
  }
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"legacy", "xgboost.model: neither XGBoost JSON nor UBJSON: XGBoost's legacy binary format"},
      {"treelite", "checkpoint.tl: the Treelite checkpoint ends inside the patch version"},
      {"sklearn", "model.pkl is a Python pickle"}};
  for (const auto& [name, why] : refused) {
    EXPECT_EQ(reg->Get(name).status().code(), absl::StatusCode::kUnavailable) << name;
    auto st = reg->GetStatus(name);
    ASSERT_TRUE(st.ok()) << name;
    ASSERT_EQ(st->versions.size(), 1u) << name;
    EXPECT_EQ(st->versions[0].state, VersionState::kFailed) << name;
    EXPECT_THAT(st->versions[0].error, ::testing::HasSubstr(why));
    EXPECT_THAT(st->versions[0].error, ::testing::StartsWith(absl::StrCat(name, "/1/")));
  }
  auto both = reg->GetStatus("both");
  ASSERT_TRUE(both.ok());
  ASSERT_EQ(both->versions.size(), 1u);
  EXPECT_THAT(both->versions[0].error,
              ::testing::HasSubstr("several model files (model.json, xgboost.json)"));
  auto empty = reg->GetStatus("empty");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->versions.empty());
  EXPECT_THAT(empty->error, ::testing::HasSubstr("xgboost.json"));

  // Replacing the unreadable file with a readable one loads the version at the next poll.
  repo.Remove("treelite/1/checkpoint.tl");
  repo.PutAs("treelite", 1, xgb_, "xgboost.json");
  reg->Poll();  // the new file is seen
  reg->Poll();  // and stable
  EXPECT_TRUE(reg->Get("treelite").ok()) << reg->Get("treelite").status();
}

TEST_F(RegistryTest, BadConfigNamesTheField) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  repo.Write("a/config.json", R"({"batching": {"predict": {"max_batch_rows": -1}}})");
  auto reg = Make(repo);
  EXPECT_FALSE(reg->LoadAll().ok());
  auto st = reg->GetStatus("a");
  ASSERT_TRUE(st.ok());
  EXPECT_NE(st->error.find("batching.predict.max_batch_rows"), std::string::npos) << st->error;
  EXPECT_EQ(reg->Get("a").status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(RegistryTest, ReloadOnChangeWaitsForAStableFileAndSwapsAtomically) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  auto reg = Make(repo);
  ASSERT_TRUE(reg->LoadAll().ok());
  ModelVersionPtr old = *reg->Get("a");
  reg->Poll();
  EXPECT_EQ(*reg->Get("a"), old);  // nothing changed
  // Replace the file with another model.
  fs::remove(fs::path(repo.path()) / "a/1/model.json");
  repo.Put("a", 1, xgb2_);
  reg->Poll();  // first sighting: not yet stable
  EXPECT_EQ(*reg->Get("a"), old);
  reg->Poll();  // stable: reloaded
  ModelVersionPtr now = *reg->Get("a");
  EXPECT_NE(now, old);
  EXPECT_EQ(now->version, 1);
  // The old copy stays fully usable by whoever still holds it.
  PredictOnce(old);
  PredictOnce(now);
  EXPECT_EQ(listener_.ready.load(), 2);
}

TEST_F(RegistryTest, FailedReloadKeepsThePreviousCopyServing) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  auto reg = Make(repo);
  ASSERT_TRUE(reg->LoadAll().ok());
  ModelVersionPtr old = *reg->Get("a");
  repo.Write("a/1/model.json", "{\"truncated\": ");
  reg->Poll();
  reg->Poll();
  auto now = reg->Get("a");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(*now, old);
  auto st = reg->GetStatus("a");
  EXPECT_EQ(st->versions[0].state, VersionState::kFailed);
  EXPECT_TRUE(st->versions[0].serving);
  EXPECT_TRUE(st->ready);
  // Not retried while the file stays the same.
  const int failed = listener_.failed.load();
  reg->Poll();
  EXPECT_EQ(listener_.failed.load(), failed);
  // The explicit Load reports the failure.
  EXPECT_EQ(reg->Load("a").code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(RegistryTest, NewVersionsAndRemovedModelsFollowTheRepository) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  auto reg = Make(repo);
  ASSERT_TRUE(reg->LoadAll().ok());
  repo.Put("a", 2, xgb2_);
  repo.Put("c", 1, lgb_);
  reg->Poll();
  EXPECT_EQ((*reg->Get("a"))->version, 1);
  EXPECT_EQ(reg->Get("c").status().code(), absl::StatusCode::kUnavailable);  // seen, not loaded
  reg->Poll();
  EXPECT_EQ((*reg->Get("a"))->version, 2);
  EXPECT_TRUE(reg->Get("c").ok());
  EXPECT_FALSE(reg->Get("a", 1).ok());  // the latest policy unloaded v1
  repo.Remove("c");
  reg->Poll();
  EXPECT_EQ(reg->Get("c").status().code(), absl::StatusCode::kNotFound);
  EXPECT_GE(listener_.unloaded.load(), 2);

  // Deleting the newest version brings back the version it replaced at the next poll: the model
  // never stops serving, and the version is loaded once, not at every poll.
  repo.Remove("a/2");
  reg->Poll();
  absl::StatusOr<ModelVersionPtr> back = reg->Get("a");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->version, 1);
  PredictOnce(*back);
  absl::StatusOr<ModelStatus> st = reg->GetStatus("a");
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->versions.size(), 1u);
  EXPECT_EQ(st->versions[0].state, VersionState::kReady);
  reg->Poll();
  EXPECT_EQ(*reg->Get("a"), *back);
}

TEST_F(RegistryTest, ConfigChangeReloads) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  auto reg = Make(repo);
  ASSERT_TRUE(reg->LoadAll().ok());
  ModelVersionPtr old = *reg->Get("a");
  repo.Write("a/config.json", R"({"max_request_rows": 5})");
  reg->Poll();
  reg->Poll();
  ModelVersionPtr now = *reg->Get("a");
  EXPECT_NE(now, old);
  EXPECT_EQ(now->config->max_request_rows, 5);
}

TEST_F(RegistryTest, UnloadStaysUnloadedUntilLoad) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  auto reg = Make(repo);
  ASSERT_TRUE(reg->LoadAll().ok());
  ModelVersionPtr held = *reg->Get("a");
  ASSERT_TRUE(reg->Unload("a").ok());
  EXPECT_EQ(reg->Get("a").status().code(), absl::StatusCode::kUnavailable);
  PredictOnce(held);  // in-flight users are unaffected
  reg->Poll();
  reg->Poll();
  EXPECT_FALSE(reg->Get("a").ok());
  EXPECT_EQ(reg->Unload("nope").code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(reg->Load("a").ok());
  EXPECT_TRUE(reg->Get("a").ok());
  EXPECT_EQ(reg->Load("nope").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(reg->Load("../etc").code(), absl::StatusCode::kNotFound);
}

// A version that failed is tried again once when it is wanted again (the newer version deleted),
// then not again until its file changes.
TEST_F(RegistryTest, AFailedVersionWantedAgainIsRetriedOnce) {
  TempRepo repo;
  repo.Write("a/1/model.json", "{ not a model");
  auto reg = Make(repo);
  EXPECT_FALSE(reg->LoadAll().ok());
  repo.Put("a", 2, xgb_);
  reg->Poll();
  reg->Poll();
  ASSERT_EQ((*reg->Get("a"))->version, 2);
  const int failed = listener_.failed.load();
  repo.Remove("a/2");
  reg->Poll();
  EXPECT_EQ(listener_.failed.load(), failed + 1);
  absl::StatusOr<ModelVersionPtr> none = reg->Get("a");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(none.status().message(), ::testing::HasSubstr("model.json"));
  reg->Poll();
  reg->Poll();
  EXPECT_EQ(listener_.failed.load(), failed + 1);
  repo.Put("a", 1, xgb_);  // fixed
  reg->Poll();
  reg->Poll();
  absl::StatusOr<ModelVersionPtr> fixed = reg->Get("a");
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ((*fixed)->version, 1);
}

// CPU prediction engines only: which versions serve is all that the tests below look at, and the
// explain engines' set-up, or on a GPU host the GPU engine's load-time probes of every version
// loaded, would be most of their time.
ServableFactory PredictOnlyFactory(ThreadPool* pool) {
  return [pool](const ForestPtr& forest, std::shared_ptr<const Background> background,
                EngineOptions options) -> absl::StatusOr<ServablePtr> {
    options.build = EngineBuild::kOnFirstUse;
    options.device = Device::kCpu;
    absl::StatusOr<ServablePtr> servable = BuildServable(forest, background, options, pool);
    if (!servable.ok()) return servable.status();
    if (absl::Status s = (*servable)->Available(Operation::kPredict); !s.ok()) return s;
    return servable;
  };
}

// What a version policy wants of the versions present.
struct PolicyCase {
  const char* name;
  const char* config;  // config.json
  std::function<std::set<int>(const std::set<int>&)> wanted;
};

std::vector<PolicyCase> PolicyCases() {
  return {
      {"latest", R"({"versions": "latest"})",
       [](const std::set<int>& present) {
         return present.empty() ? std::set<int>{} : std::set<int>{*present.rbegin()};
       }},
      {"all", R"({"versions": "all"})", [](const std::set<int>& present) { return present; }},
      {"specific [1, 2]", R"({"versions": [1, 2]})",
       [](const std::set<int>& present) {
         std::set<int> out;
         for (int v : present) {
           if (v <= 2) out.insert(v);
         }
         return out;
       }},
  };
}

enum class Change { kAdd, kDelete, kReplace };
struct VersionChange {
  Change change;
  int version;
};

std::string Describe(const std::vector<VersionChange>& changes) {
  std::string out;
  for (const VersionChange& c : changes) {
    const char* what = c.change == Change::kAdd      ? "add "
                       : c.change == Change::kDelete ? "delete "
                                                     : "replace ";
    absl::StrAppend(&out, out.empty() ? "" : ", ", what, c.version);
  }
  return out;
}

// Every sequence of `steps` changes of versions 1..`versions` starting from `present`: a version
// present may be deleted or replaced, an absent one added.
void ChangeOrders(std::set<int> present, int versions, int steps,
                  std::vector<VersionChange>* prefix,
                  std::vector<std::vector<VersionChange>>* out) {
  if (steps == 0) {
    out->push_back(*prefix);
    return;
  }
  for (int v = 1; v <= versions; ++v) {
    std::vector<Change> changes = {Change::kAdd};
    if (present.count(v)) changes = {Change::kDelete, Change::kReplace};
    for (Change c : changes) {
      std::set<int> next = present;
      if (c == Change::kAdd) next.insert(v);
      if (c == Change::kDelete) next.erase(v);
      prefix->push_back({c, v});
      ChangeOrders(next, versions, steps - 1, prefix, out);
      prefix->pop_back();
    }
  }
}

// What tells the two model files of these tests apart.
using Fingerprint = std::pair<int, size_t>;  // features, trees
Fingerprint PrintOf(const Forest& forest) { return {forest.num_features, forest.trees.size()}; }

// "" when model "m" serves exactly the versions `want`, each from the file `content` names (an
// index into `prints`) and Get without a version gives the highest; else what differs.
std::string ServingMismatch(const ModelRegistry& reg, const std::set<int>& want,
                            const std::map<int, int>& content,
                            const std::vector<Fingerprint>& prints) {
  std::set<int> serving;
  if (absl::StatusOr<ModelStatus> st = reg.GetStatus("m"); st.ok()) {
    for (const VersionStatus& v : st->versions) {
      if (v.serving) serving.insert(static_cast<int>(v.version));
    }
  }
  if (serving != want) {
    return absl::StrCat("serving versions [", absl::StrJoin(serving, ", "), "], wanted [",
                        absl::StrJoin(want, ", "), "]");
  }
  for (int v : want) {
    absl::StatusOr<ModelVersionPtr> m = reg.Get("m", v);
    if (!m.ok()) return absl::StrCat("version ", v, ": ", m.status().ToString());
    if (PrintOf((*m)->forest()) != prints[content.at(v)]) {
      return absl::StrCat("version ", v, " serves a copy of its previous file");
    }
  }
  absl::StatusOr<ModelVersionPtr> latest = reg.Get("m");
  if (want.empty() != !latest.ok()) {
    return absl::StrCat("Get without a version: ", latest.status().ToString());
  }
  if (latest.ok() && (*latest)->version != *want.rbegin()) {
    return absl::StrCat("Get without a version gives version ", (*latest)->version);
  }
  return "";
}

std::map<int, ModelVersionPtr> ServingCopies(const ModelRegistry& reg) {
  std::map<int, ModelVersionPtr> out;
  for (int v = 1; v <= 3; ++v) {
    if (absl::StatusOr<ModelVersionPtr> m = reg.Get("m", v); m.ok()) out[v] = *m;
  }
  return out;
}

// Every order of three adds, deletes and replaces of versions 1 to 3 (version 1 present at the
// start), under each version policy: two polls after each change, the model serves exactly the
// versions the policy wants of those present, from their current files, and a version whose file
// did not change keeps its copy. The same orders made faster than the polls see a file settle
// (one poll between changes) end in the same state two polls after the last.
TEST_F(RegistryTest, EveryAddDeleteReplaceOrderServesWhatThePolicyWants) {
  const std::vector<std::string> files = {xgb_, xgb2_};
  std::vector<Fingerprint> prints;
  for (const std::string& file : files) {
    absl::StatusOr<ForestPtr> forest = LoadModelFile(file);
    ASSERT_TRUE(forest.ok()) << forest.status();
    prints.push_back(PrintOf(**forest));
  }
  if (prints[0] == prints[1]) GTEST_SKIP() << "the two corpus models cannot be told apart";
  std::vector<std::vector<VersionChange>> orders;
  std::vector<VersionChange> prefix;
  ChangeOrders({1}, /*versions=*/3, /*steps=*/3, &prefix, &orders);
  for (const PolicyCase& policy : PolicyCases()) {
    for (const std::vector<VersionChange>& order : orders) {
      for (const bool settle : {true, false}) {
        const std::string scenario = absl::StrCat("policy ", policy.name, ": ", Describe(order),
                                                  settle ? "" : " (one poll between changes)");
        TempRepo repo;
        repo.Write("m/config.json", policy.config);
        std::map<int, int> content = {{1, 0}};  // version -> index into files
        repo.Put("m", 1, files[0]);
        auto reg = Make(repo, {}, PredictOnlyFactory(&pool_));
        ASSERT_TRUE(reg->LoadAll().ok()) << scenario;
        std::map<int, ModelVersionPtr> before = ServingCopies(*reg);
        std::string mismatch;
        for (size_t i = 0; i < order.size() && mismatch.empty(); ++i) {
          const VersionChange& c = order[i];
          if (c.change == Change::kDelete) {
            repo.Remove(absl::StrCat("m/", c.version));
            content.erase(c.version);
          } else {
            const int file =
                c.change == Change::kAdd ? (c.version + 1) % 2 : 1 - content.at(c.version);
            repo.Put("m", c.version, files[file]);
            content[c.version] = file;
          }
          reg->Poll();
          if (!settle) continue;
          reg->Poll();
          std::set<int> present;
          for (const auto& [v, file] : content) present.insert(v);
          const std::set<int> want = policy.wanted(present);
          mismatch = ServingMismatch(*reg, want, content, prints);
          std::map<int, ModelVersionPtr> now = ServingCopies(*reg);
          for (const auto& [v, copy] : now) {
            if (mismatch.empty() && v != c.version && before.count(v) && before[v] != copy) {
              mismatch = absl::StrCat("version ", v, " was reloaded though its file is the same");
            }
          }
          before = std::move(now);
          if (!mismatch.empty()) mismatch = absl::StrCat("after ", Describe({c}), ": ", mismatch);
        }
        if (!settle) {
          reg->Poll();
          reg->Poll();
          std::set<int> present;
          for (const auto& [v, file] : content) present.insert(v);
          mismatch = ServingMismatch(*reg, policy.wanted(present), content, prints);
        }
        EXPECT_EQ(mismatch, "") << scenario;
      }
    }
  }
}

TEST_F(RegistryTest, EngineFactoryFailureFailsTheLoad) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  RegistryOptions o;
  o.repository = repo.path();
  o.servable_factory = [](const ForestPtr&, std::shared_ptr<const Background>,
                          const EngineOptions&) -> absl::StatusOr<ServablePtr> {
    return absl::ResourceExhaustedError("no GPU memory");
  };
  auto reg = *ModelRegistry::Create(o);
  EXPECT_FALSE(reg->LoadAll().ok());
  auto st = reg->GetStatus("a");
  EXPECT_EQ(st->versions[0].error, "no GPU memory");
}

// `rows` CSV rows of `features` values (row r: r, r + 0.5, ..., missing in the last column).
std::string BackgroundCsv(int rows, int features) {
  std::string text;
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < features; ++c) {
      absl::StrAppend(&text, c ? "," : "", c + 1 == features ? "" : absl::StrCat(r + 0.5 * c));
    }
    text += "\n";
  }
  return text;
}

TEST_F(RegistryTest, BackgroundLoadsWithTheModelAndReloadsWhenItChanges) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  auto reg = Make(repo);
  ASSERT_TRUE(reg->LoadAll().ok());
  ModelVersionPtr none = *reg->Get("a");
  const absl::Status no_background = none->servable->Available(Operation::kInterventional);
  EXPECT_EQ(no_background.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(no_background.message(),
              ::testing::HasSubstr("add a/background.csv (or background.npy: 1 to 10000 rows"));
  const int features = none->forest().num_features;

  repo.Write("a/background.csv", BackgroundCsv(4, features));
  reg->Poll();  // first sighting: not yet stable
  EXPECT_EQ(*reg->Get("a"), none);
  reg->Poll();
  ModelVersionPtr with = *reg->Get("a");
  EXPECT_TRUE(with->servable->Available(Operation::kInterventional).ok());
  EXPECT_EQ(with->servable->background_rows(), 4);
  EXPECT_EQ(with->servable->background_path(), repo.path() + "/a/background.csv");
  EXPECT_THAT(with->servable->Describe(Operation::kInterventional),
              ::testing::HasSubstr("4 background rows, "));

  repo.Write("a/background.csv", BackgroundCsv(7, features));
  reg->Poll();
  reg->Poll();
  EXPECT_EQ((*reg->Get("a"))->servable->background_rows(), 7);
  reg->Poll();
  EXPECT_EQ((*reg->Get("a"))->servable->background_rows(), 7);  // unchanged: not reloaded again

  repo.Remove("a/background.csv");
  reg->Poll();
  reg->Poll();
  EXPECT_FALSE((*reg->Get("a"))->servable->Available(Operation::kInterventional).ok());
  EXPECT_EQ((*reg->Get("a"))->servable->background_rows(), 0);
}

TEST_F(RegistryTest, BadBackgroundFailsTheLoadNamingTheFile) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  repo.Write("a/background.csv", "1,2\n");
  auto reg = Make(repo);
  EXPECT_FALSE(reg->LoadAll().ok());
  absl::StatusOr<ModelStatus> st = reg->GetStatus("a");
  ASSERT_TRUE(st.ok());
  EXPECT_THAT(st->versions[0].error,
              ::testing::StartsWith("a/background.csv:1: expected"));

  // Removed: loads at the next stable poll. A second background file is ambiguous: the reload
  // fails and the previous copy keeps serving.
  repo.Remove("a/background.csv");
  reg->Poll();
  reg->Poll();
  ASSERT_TRUE(reg->Get("a").ok());
  const int features = (*reg->Get("a"))->forest().num_features;
  repo.Write("a/background.csv", BackgroundCsv(2, features));
  reg->Poll();
  reg->Poll();
  EXPECT_EQ((*reg->Get("a"))->servable->background_rows(), 2);
  repo.Write("a/background.npy", "x");
  reg->Poll();
  reg->Poll();
  EXPECT_EQ((*reg->Get("a"))->servable->background_rows(), 2);
  st = reg->GetStatus("a");
  EXPECT_THAT(st->versions[0].error,
              ::testing::HasSubstr("holds background.csv and background.npy; keep one"));
}

TEST_F(RegistryTest, GroupsLoadWithTheModelAndReloadWhenTheyChange) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  auto reg = Make(repo);
  ASSERT_TRUE(reg->LoadAll().ok());
  ModelVersionPtr none = *reg->Get("a");
  EXPECT_EQ(none->groups, nullptr);
  ASSERT_GE(none->forest().num_features, 3);

  repo.Write("a/groups.json", R"({"first_two": [0, 1]})");
  reg->Poll();  // first sighting: not yet stable
  EXPECT_EQ(*reg->Get("a"), none);
  reg->Poll();
  ModelVersionPtr with = *reg->Get("a");
  ASSERT_NE(with->groups, nullptr);
  EXPECT_EQ(with->groups->names[0], "first_two");
  EXPECT_EQ(with->groups->num_groups(), with->forest().num_features - 1);
  // Only the groups changed: the same engines serve the new copy (nothing is rebuilt).
  EXPECT_EQ(with->servable, none->servable);
  EXPECT_EQ(reg->GetStatus("a")->versions[0].state, VersionState::kReady);

  repo.Write("a/groups.json", R"({"last_two": [1, 2]})");
  reg->Poll();
  reg->Poll();
  ModelVersionPtr other = *reg->Get("a");
  ASSERT_NE(other->groups, nullptr);
  EXPECT_EQ(other->groups->names[1], "last_two");
  EXPECT_EQ(other->servable, none->servable);
  with = other;

  // A bad file fails the reload naming it; the previous copy keeps serving.
  repo.Write("a/groups.json", R"({"first_two": [0, 100000]})");
  reg->Poll();
  reg->Poll();
  EXPECT_EQ(*reg->Get("a"), with);
  absl::StatusOr<ModelStatus> st = reg->GetStatus("a");
  ASSERT_TRUE(st.ok());
  EXPECT_THAT(st->versions[0].error,
              ::testing::StartsWith("a/groups.json: group \"first_two\": feature 100000 is not"));

  repo.Remove("a/groups.json");
  reg->Poll();
  reg->Poll();
  EXPECT_EQ((*reg->Get("a"))->groups, nullptr);
  EXPECT_EQ((*reg->Get("a"))->servable, none->servable);
  EXPECT_EQ(reg->GetStatus("a")->versions[0].state, VersionState::kReady);
}

// A change of groups.json republishes the version with the same engines whatever the previous
// groups.json was (valid, absent or bad), and READY again once the file is good.
TEST_F(RegistryTest, GroupsChangesKeepTheEnginesAfterABadFile) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  auto reg = Make(repo);
  ASSERT_TRUE(reg->LoadAll().ok());
  const ServablePtr engines = (*reg->Get("a"))->servable;
  auto change = [&](const char* text) {
    if (text == nullptr) {
      repo.Remove("a/groups.json");
    } else {
      repo.Write("a/groups.json", text);
    }
    reg->Poll();
    reg->Poll();
    return reg->GetStatus("a")->versions[0].state;
  };
  const char* kBad = R"({"first_two": [0, 100000]})";
  const char* kGood = R"({"first_two": [0, 1]})";
  const char* kOther = R"({"last_two": [1, 2]})";
  // absent -> bad -> valid -> bad -> absent -> valid -> valid
  EXPECT_EQ(change(kBad), VersionState::kFailed);
  EXPECT_EQ((*reg->Get("a"))->groups, nullptr);  // the previous copy serves
  EXPECT_EQ(change(kGood), VersionState::kReady);
  EXPECT_EQ((*reg->Get("a"))->groups->names[0], "first_two");
  EXPECT_EQ(change(kBad), VersionState::kFailed);
  EXPECT_EQ((*reg->Get("a"))->groups->names[0], "first_two");
  EXPECT_EQ(change(nullptr), VersionState::kReady);
  EXPECT_EQ((*reg->Get("a"))->groups, nullptr);
  EXPECT_EQ(change(kGood), VersionState::kReady);
  EXPECT_EQ(change(kOther), VersionState::kReady);
  EXPECT_EQ((*reg->Get("a"))->groups->names[1], "last_two");
  EXPECT_EQ((*reg->Get("a"))->servable, engines);
  EXPECT_TRUE(reg->GetStatus("a")->versions[0].error.empty());
}

// The model's grouping is built at load and pinned, and a regroup publishes the new one pinned:
// requests with the model's grouping build nothing.
TEST_F(RegistryTest, TheModelsGroupingIsBuiltAtLoadAndPinned) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  repo.Write("a/groups.json", R"({"first_two": [0, 1]})");
  auto reg = Make(repo);
  ASSERT_TRUE(reg->LoadAll().ok());
  ModelVersionPtr v = *reg->Get("a");
  ASSERT_NE(v->groups, nullptr);
  EXPECT_NE(v->groups_pin, nullptr);
  const Servable& servable = *v->servable;
  EXPECT_EQ(servable.GroupedLayouts().builds, 1);
  EXPECT_EQ(servable.GroupedLayouts().pinned, 1);
  auto explain = [&](const FeatureGroupsPtr& groups) {
    RunParams p;
    p.groups = groups;
    const int f = servable.forest().num_features;
    const std::vector<float> rows(static_cast<size_t>(2 * f), 0.5f);
    std::vector<float> out(2 * servable.Width(Operation::kExplain, p));
    ASSERT_TRUE(servable.Run(Operation::kExplain, p, MakeRowsView(rows.data(), 2, f),
                             MakeMatrixView(out.data(), 2, out.size() / 2), nullptr)
                    .ok());
  };
  explain(v->groups);
  EXPECT_EQ(servable.GroupedLayouts().builds, 1);

  repo.Write("a/groups.json", R"({"last_two": [1, 2]})");
  reg->Poll();
  reg->Poll();
  ModelVersionPtr regrouped = *reg->Get("a");
  ASSERT_NE(regrouped, v);
  EXPECT_EQ(regrouped->servable, v->servable);
  EXPECT_EQ(servable.GroupedLayouts().builds, 2);  // built by the regroup, not by a request
  EXPECT_EQ(servable.GroupedLayouts().pinned, 2);  // `v` is still held here
  v.reset();
  EXPECT_EQ(servable.GroupedLayouts().pinned, 1);
  explain(regrouped->groups);
  EXPECT_EQ(servable.GroupedLayouts().builds, 2);
}

// Readers never see a failure while a writer reloads the same model over and over.
TEST_F(RegistryTest, ConcurrentGetDuringReloadsNeverFails) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  auto reg = Make(repo);
  ASSERT_TRUE(reg->LoadAll().ok());
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0}, reads{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        auto m = reg->Get("a");
        if (!m.ok()) {
          failures++;
          continue;
        }
        PredictOnce(*m);
        reads++;
      }
    });
  }
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(reg->Load("a").ok());
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(reads.load(), 0);
}

TEST_F(RegistryTest, WatcherThreadPicksUpChanges) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  auto reg = Make(repo);
  ASSERT_TRUE(reg->LoadAll().ok());
  reg->StartWatching(absl::Milliseconds(5));
  repo.Put("b", 1, lgb_);
  // Bounded wait for the watcher (two polls).
  for (int i = 0; i < 2000 && !reg->Get("b").ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(reg->Get("b").ok());
  reg->StopWatching();
}

TEST(ModelConfigTest, ParsesAndRejects) {
  ModelConfig d;
  auto c = ParseModelConfig(R"({"versions": "all", "device": "cpu",
      "batching": {"explain": {"max_queue_requests": 7, "max_concurrent_batches": 3}}})", d, "x");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->version_policy, VersionPolicy::kAll);
  EXPECT_EQ(c->device, Device::kCpu);
  EXPECT_EQ(c->Batching(Operation::kExplain).max_queue_tasks, 7);
  EXPECT_EQ(c->Batching(Operation::kExplain).max_concurrent_batches, 3);
  for (const char* bad : {R"({"nope": 1})", R"({"device": "tpu"})", R"({"versions": []})",
                          R"({"batching": {"predict": {"max_batch_rows": "x"}}})",
                          R"({"batching": {"train": {}}})", R"({"default_outputs": ["proba"]})",
                          "[1]", "{"}) {
    auto r = ParseModelConfig(bad, d, "cfg.json");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("cfg.json"), absl::string_view::npos);
  }
}

// Every operation has batching limits before config.json sets any: its own, or an expensive
// operation's (one batch at a time) when it has none; an unknown operation's name is refused with
// every known one listed.
TEST(ModelConfigTest, EveryOperationHasDefaultBatching) {
  const ModelConfig d;
  // max_batch_rows, max_queue_rows, max_queue_tasks, max_concurrent_batches; no delay.
  const std::pair<Operation, std::array<int64_t, 4>> want[] = {
      {Operation::kPredict, {4096, int64_t{1} << 20, 4096, 4}},
      {Operation::kExplain, {1024, int64_t{1} << 18, 4096, 2}},
      {Operation::kInteractions, {64, int64_t{1} << 14, 1024, 1}},
      {Operation::kInterventional, {256, int64_t{1} << 16, 1024, 1}},
      {Operation::kInterventionalInteractions, {16, int64_t{1} << 12, 1024, 1}},
      {Operation::kBanzhaf, {1024, int64_t{1} << 18, 4096, 2}},
      {Operation::kBanzhafInteractions, {64, int64_t{1} << 14, 1024, 1}},
      {Operation::kInterventionalBanzhaf, {256, int64_t{1} << 16, 1024, 1}},
      {Operation::kInterventionalBanzhafInteractions, {16, int64_t{1} << 12, 1024, 1}},
      {Operation::kSaabas, {4096, int64_t{1} << 20, 4096, 2}},
      // Not an operation yet: an expensive operation's limits.
      {static_cast<Operation>(kNumOperations), {16, int64_t{1} << 12, 1024, 1}},
  };
  for (const auto& [op, limits] : want) {
    const batching::BatcherOptions b =
        static_cast<int>(op) < kNumOperations ? d.Batching(op) : DefaultBatching(op);
    const std::string what = std::to_string(static_cast<int>(op));
    EXPECT_TRUE(batching::ValidateBatcherOptions(b).ok()) << what;
    EXPECT_EQ(b.max_batch_rows, limits[0]) << what;
    EXPECT_EQ(b.max_queue_rows, limits[1]) << what;
    EXPECT_EQ(b.max_queue_tasks, limits[2]) << what;
    EXPECT_EQ(b.max_concurrent_batches, limits[3]) << what;
    EXPECT_EQ(b.max_delay, absl::ZeroDuration()) << what;
  }
  auto r = ParseModelConfig(R"({"batching": {"train": {}}})", d, "cfg.json");
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  for (int i = 0; i < kNumOperations; ++i) {
    EXPECT_NE(r.status().message().find(OperationName(static_cast<Operation>(i))),
              absl::string_view::npos)
        << r.status().message();
  }
}

// A key given twice in one object is refused naming it (JSON parsers differ on which copy wins, so
// an operator could read one value while groved served the other), at any depth.
TEST(ModelConfigTest, RejectsDuplicateKeys) {
  ModelConfig d;
  const std::pair<const char*, const char*> cases[] = {
      {R"({"max_request_rows": 10, "max_request_rows": 20})", "'max_request_rows'"},
      {R"({"device": "cpu", "versions": "all", "device": "gpu"})", "'device'"},
      {R"({"batching": {"predict": {"max_batch_rows": 4, "max_batch_rows": 8}}})",
       "'batching.predict.max_batch_rows'"},
      {R"({"batching": {"predict": {}, "predict": {}}})", "'batching.predict'"},
  };
  for (const auto& [text, key] : cases) {
    auto r = ParseModelConfig(text, d, "cfg.json");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("cfg.json")) << text;
    EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr(key)) << r.status();
    EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("more than once"))
        << r.status();
  }
  // The same key in different objects is fine.
  auto ok = ParseModelConfig(
      R"({"batching": {"predict": {"max_batch_rows": 4}, "explain": {"max_batch_rows": 4}}})", d,
      "cfg.json");
  EXPECT_TRUE(ok.ok()) << ok.status();
}

// Every numeric field has bounds: absurd values (a 2^62 row limit whose products overflow, a delay of
// centuries that never lets a batch go) are refused naming the field and the bound.
TEST(ModelConfigTest, RejectsOutOfBoundsNumbers) {
  ModelConfig d;
  for (const char* bad : {
           R"({"max_request_rows": 4611686018427387904})",
           R"({"max_request_rows": 18446744073709551615})",
           R"({"max_interaction_values_per_row": 4611686018427387904})",
           R"({"batching": {"predict": {"max_delay_us": 9000000000000000000}}})",
           R"({"batching": {"predict": {"max_batch_rows": 4611686018427387904}}})",
           R"({"batching": {"explain": {"max_queue_rows": 9223372036854775807}}})",
           R"({"batching": {"explain": {"max_queue_requests": 4611686018427387904}}})",
           R"({"batching": {"interactions": {"max_concurrent_batches": 4294967297}}})",
           R"({"versions": [1000000000000000000000]})",
       }) {
    auto r = ParseModelConfig(bad, d, "cfg.json");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("at most"), absl::string_view::npos)
        << bad << ": " << r.status();
  }
  // The largest accepted values are accepted.
  auto top = ParseModelConfig(R"({"max_request_rows": 1073741824,
      "batching": {"predict": {"max_delay_us": 600000000, "max_concurrent_batches": 1024}}})",
                              d, "cfg.json");
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_EQ(top->max_request_rows, int64_t{1} << 30);
  EXPECT_EQ(top->Batching(Operation::kPredict).max_delay, absl::Seconds(600));
}

// Runs `fn` on a thread of its own and waits for it up to `limit`: a loader that blocks fails the
// test instead of hanging it (`unblock` then releases it so that the thread can be joined).
bool FinishesWithin(std::function<void()> fn, std::chrono::seconds limit,
                    std::function<void()> unblock) {
  std::promise<void> done;
  std::future<void> finished = done.get_future();
  std::thread t([&] {
    fn();
    done.set_value();
  });
  const bool in_time = finished.wait_for(limit) == std::future_status::ready;
  // A blocked thread may block again on the next file: release until it is done.
  while (finished.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) unblock();
  t.join();
  return in_time;
}

// Opens the FIFO for writing and closes it, so that a reader blocked in open() returns.
void ReleaseFifo(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
  if (fd >= 0) ::close(fd);
}

// A FIFO named model.json (or config.json) is refused without being opened for a blocking read:
// the load finishes, other models load, and Load / Unload / Poll stay responsive.
TEST_F(RegistryTest, FifoModelAndConfigAreRefusedWithoutBlocking) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  fs::create_directories(fs::path(repo.path()) / "fifo" / "1");
  const std::string model_fifo = (fs::path(repo.path()) / "fifo" / "1" / "model.json").string();
  ASSERT_EQ(::mkfifo(model_fifo.c_str(), 0600), 0);
  repo.Put("cfg", 1, xgb_);
  const std::string config_fifo = (fs::path(repo.path()) / "cfg" / "config.json").string();
  ASSERT_EQ(::mkfifo(config_fifo.c_str(), 0600), 0);
  repo.Put("z", 1, lgb_);
  auto reg = Make(repo);
  auto unblock = [&] {
    for (int i = 0; i < 4; ++i) {
      ReleaseFifo(model_fifo);
      ReleaseFifo(config_fifo);
    }
  };
  absl::Status all;
  ASSERT_TRUE(FinishesWithin([&] { all = reg->LoadAll(); }, std::chrono::seconds(20), unblock))
      << "LoadAll blocked on a FIFO";
  EXPECT_FALSE(all.ok());
  EXPECT_TRUE(reg->Get("a").ok());
  EXPECT_TRUE(reg->Get("z").ok());
  auto fifo = reg->GetStatus("fifo");
  ASSERT_TRUE(fifo.ok());
  ASSERT_EQ(fifo->versions.size(), 1u);
  EXPECT_NE(fifo->versions[0].error.find("not a regular file"), std::string::npos)
      << fifo->versions[0].error;
  auto cfg = reg->GetStatus("cfg");
  ASSERT_TRUE(cfg.ok());
  EXPECT_NE(cfg->error.find("not a regular file"), std::string::npos) << cfg->error;
  ASSERT_TRUE(FinishesWithin(
      [&] {
        reg->Poll();
        reg->Poll();
        EXPECT_FALSE(reg->Load("fifo").ok());
        EXPECT_TRUE(reg->Unload("a").ok());
        EXPECT_TRUE(reg->Load("a").ok());
      },
      std::chrono::seconds(20), unblock))
      << "Poll / Load / Unload blocked on a FIFO";
}

// A version directory that is a symbolic link to a model outside the repository is refused.
TEST_F(RegistryTest, PathsResolvingOutsideTheRepositoryAreRefused) {
  TempRepo repo;
  TempRepo outside;
  repo.Put("a", 1, xgb_);
  outside.Put("elsewhere", 2, xgb2_);
  fs::create_symlink(fs::path(outside.path()) / "elsewhere" / "2", fs::path(repo.path()) / "a" / "2");
  // A link that stays inside the repository is fine.
  repo.Put("b", 1, lgb_);
  fs::create_directories(fs::path(repo.path()) / "c");
  fs::create_directory_symlink(fs::path(repo.path()) / "b" / "1", fs::path(repo.path()) / "c" / "4");
  auto reg = Make(repo);
  EXPECT_FALSE(reg->LoadAll().ok());
  EXPECT_EQ(reg->Get("a", 2).status().code(), absl::StatusCode::kUnavailable);
  auto st = reg->GetStatus("a");
  ASSERT_TRUE(st.ok());
  std::string errors;
  for (const VersionStatus& v : st->versions) errors += v.error;
  EXPECT_NE(errors.find("outside the model repository"), std::string::npos) << errors;
  auto c = reg->Get("c", 4);
  EXPECT_TRUE(c.ok()) << c.status();
}

TEST_F(RegistryTest, NegativeVersionIsInvalid) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  auto reg = Make(repo);
  ASSERT_TRUE(reg->LoadAll().ok());
  auto r = reg->Get("a", -1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("-1"), absl::string_view::npos) << r.status();
  EXPECT_TRUE(reg->Get("a", 0).ok());
}

int CountOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A bad config.json is reported once per distinct file content, not at every poll.
TEST_F(RegistryTest, BadConfigIsLoggedOncePerChange) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  repo.Write("a/config.json", R"({"max_request_rows": 0})");
  auto reg = Make(repo);
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(reg->LoadAll().ok());
  for (int i = 0; i < 5; ++i) reg->Poll();
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(CountOf(log, "bad model config"), 1) << log;
  // Another mistake is a new error: logged once more.
  repo.Write("a/config.json", R"({"max_request_rows": "many"})");
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 5; ++i) reg->Poll();
  log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(CountOf(log, "bad model config"), 1) << log;
  EXPECT_NE(reg->GetStatus("a")->error.find("max_request_rows"), std::string::npos);
}

// Directories that cannot be a model (a name with a space, a leading dot) or a version (not a
// positive number) are not served; each is logged once, naming it, so that a typo does
// not look like a model that never appeared.
TEST_F(RegistryTest, OddlyNamedDirectoriesAreLoggedOnce) {
  TempRepo repo;
  repo.Put("a", 1, xgb_);
  repo.Put("my model", 1, xgb_);
  repo.Write("a/v2/model.json", "{}");
  repo.Write(".hidden/1/model.json", "{}");
  auto reg = Make(repo);
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(reg->LoadAll().ok());
  for (int i = 0; i < 3; ++i) reg->Poll();
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(CountOf(log, "my model"), 1) << log;
  EXPECT_EQ(CountOf(log, "a/v2"), 1) << log;
  EXPECT_EQ(CountOf(log, "hidden"), 0) << "hidden directories are the operator's own: " << log;
  EXPECT_TRUE(reg->Get("a", 1).ok());
  EXPECT_FALSE(reg->Contains("my model"));
}

// What the registry reports goes to callers (statuses, errors of calls to a model that is not
// ready): files are named within the repository, never by the server's own paths.
TEST_F(RegistryTest, ReportedPathsAreRelativeToTheRepository) {
  TempRepo repo;
  TempRepo outside;
  repo.Put("a", 1, xgb_);
  repo.Put("bad_config", 1, xgb_);
  repo.Write("bad_config/config.json", R"({"max_request_rows": 0})");
  repo.Write("bad_model/1/model.json", "{\"learner\": 1}");
  outside.Put("elsewhere", 2, xgb2_);
  fs::create_directories(fs::path(repo.path()) / "linked");
  fs::create_directory_symlink(fs::path(outside.path()) / "elsewhere" / "2",
                               fs::path(repo.path()) / "linked" / "2");
  auto reg = Make(repo);
  EXPECT_FALSE(reg->LoadAll().ok());
  std::string shown;
  for (const ModelStatus& m : reg->List()) {
    absl::StrAppend(&shown, m.name, ": ", m.error, "\n");
    for (const VersionStatus& v : m.versions) absl::StrAppend(&shown, v.path, " ", v.error, "\n");
  }
  for (const char* name : {"a", "bad_config", "bad_model", "linked"}) {
    absl::StrAppend(&shown, reg->Get(name).status().message(), "\n");
  }
  auto a = reg->Get("a");
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StrAppend(&shown, (*a)->servable->Available(Operation::kInterventional).message(), "\n");
  EXPECT_EQ(shown.find(repo.path()), std::string::npos) << shown;
  EXPECT_EQ(shown.find(outside.path()), std::string::npos) << shown;
  EXPECT_EQ(shown.find(fs::canonical(repo.path()).string()), std::string::npos) << shown;
  EXPECT_THAT(shown, ::testing::HasSubstr("bad_config/config.json: max_request_rows"));
  EXPECT_THAT(shown, ::testing::HasSubstr("bad_model/1/model.json"));
  EXPECT_THAT(shown, ::testing::HasSubstr("outside the model repository"));
  EXPECT_THAT(shown, ::testing::HasSubstr("add a/background.csv"));
  auto status = reg->GetStatus("a");
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(status->versions.size(), 1u);
  EXPECT_EQ(status->versions[0].path, "a/1/model.json");
}

}  // namespace
}  // namespace grove::registry
