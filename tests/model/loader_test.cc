// LoadModelFile / LoadModelBytes: content sniffing, extension fallback, file errors.
#include "core/model/loader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"

namespace grove {
namespace {

namespace fs = std::filesystem;

const std::string kCorpus = GROVE_SOURCE_DIR "/../shared/testdata";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A temporary directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("grove_loader_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string Write(const std::string& name, const std::string& content) const {
    const fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// A minimal valid XGBoost JSON model: one stump over 2 features.
const char* kTinyJson = R"({"learner": {
  "gradient_booster": {"name": "gbtree", "model": {
    "gbtree_model_param": {"num_parallel_tree": "1", "num_trees": "1"},
    "tree_info": [0],
    "trees": [{"default_left": [0, 0, 0], "left_children": [1, -1, -1],
               "right_children": [2, -1, -1], "split_conditions": [0.5, -1.0, 1.0],
               "split_indices": [1, 0, 0], "sum_hessian": [2.0, 1.0, 1.0],
               "tree_param": {"num_nodes": "3", "size_leaf_vector": "1"}}]}},
  "learner_model_param": {"base_score": "5E-1", "num_class": "0", "num_feature": "2"},
  "objective": {"name": "reg:squarederror"}},
  "version": [2, 1, 0]})";

TEST(ModelLoader, SniffsJsonWhateverTheName) {
  for (const std::string& name : {"model.json", "model.ubj", "model.txt", "model", ""}) {
    absl::StatusOr<ForestPtr> f = LoadModelBytes(kTinyJson, name);
    ASSERT_TRUE(f.ok()) << name << ": " << f.status();
    EXPECT_EQ((*f)->format, ModelFormat::kXgboostJson);
    EXPECT_EQ((*f)->source, name);
  }
  // Leading whitespace and a byte order mark are fine.
  absl::StatusOr<ForestPtr> f = LoadModelBytes("\xEF\xBB\xBF \n\t" + std::string(kTinyJson), "m");
  ASSERT_TRUE(f.ok()) << f.status();
}

TEST(ModelLoader, CorpusFilesOfEveryFormat) {
  const std::vector<std::pair<std::string, ModelFormat>> cases = {
      {kCorpus + "/xgb_reg_small/model.json", ModelFormat::kXgboostJson},
      {kCorpus + "/xgb_reg_small/model.ubj", ModelFormat::kXgboostUbjson},
      {kCorpus + "/lgb_regression/model.txt", ModelFormat::kLightgbmText},
  };
  if (!fs::exists(cases[0].first)) GTEST_SKIP() << "no corpus at " << kCorpus;
  TempDir tmp;
  for (const auto& [path, format] : cases) {
    absl::StatusOr<ForestPtr> f = LoadModelFile(path);
    ASSERT_TRUE(f.ok()) << path << ": " << f.status();
    EXPECT_EQ((*f)->format, format) << path;
    EXPECT_EQ((*f)->source, path);
    // Content wins over a misleading name.
    const std::string bytes = ReadAll(path);
    for (const std::string& name : {"renamed.json", "renamed.ubj", "renamed.txt", "renamed"}) {
      absl::StatusOr<ForestPtr> g = LoadModelBytes(bytes, name);
      ASSERT_TRUE(g.ok()) << name << ": " << g.status();
      EXPECT_EQ((*g)->format, format) << name;
      EXPECT_EQ((*g)->trees.size(), (*f)->trees.size());
    }
    const std::string copy = tmp.Write("copy_without_extension", bytes);
    absl::StatusOr<ForestPtr> g = LoadModelFile(copy);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ((*g)->format, format);
  }
}

TEST(ModelLoader, UnknownContentFallsBackOnTheExtension) {
  // Not recognisable: the extension picks the parser, whose error names the file.
  absl::StatusOr<ForestPtr> j = LoadModelBytes("garbage", "m.json");
  EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(j.status().message().find("m.json: invalid JSON"), std::string::npos) << j.status();
  absl::StatusOr<ForestPtr> u = LoadModelBytes("garbage", "m.UBJ");
  EXPECT_EQ(u.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(u.status().message().find("m.UBJ: invalid UBJSON"), std::string::npos) << u.status();
  absl::StatusOr<ForestPtr> none = LoadModelBytes("garbage", "m.dat");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("m.dat: unrecognised model format"), std::string::npos)
      << none.status();
  EXPECT_EQ(LoadModelBytes("", "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadModelBytes("{", "").status().code(), absl::StatusCode::kInvalidArgument);
  // UBJSON sniffing: '{' then a key length marker.
  absl::StatusOr<ForestPtr> ubj = LoadModelBytes(std::string("{i\x01" "aZ}", 6), "x");
  EXPECT_EQ(ubj.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ubj.status().message().find("learner"), std::string::npos) << ubj.status();
}

TEST(ModelLoader, FileErrors) {
  TempDir tmp;
  absl::StatusOr<ForestPtr> missing = LoadModelFile(tmp.path() + "/absent.json");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_NE(missing.status().message().find("absent.json"), std::string::npos);
  EXPECT_EQ(LoadModelFile(tmp.path() + "/no/such/dir.json").status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<ForestPtr> dir = LoadModelFile(tmp.path());
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kInvalidArgument) << dir.status();
  // A FIFO without a writer: refused at once, not waited on.
  const std::string fifo = tmp.path() + "/fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<ForestPtr> pipe = LoadModelFile(fifo);
  EXPECT_EQ(pipe.status().code(), absl::StatusCode::kInvalidArgument) << pipe.status();
  EXPECT_NE(pipe.status().message().find("not a regular file"), std::string::npos);
  const std::string empty = tmp.Write("empty.json", "");
  EXPECT_EQ(LoadModelFile(empty).status().code(), absl::StatusCode::kInvalidArgument);
  const std::string tiny = tmp.Write("tiny.json", kTinyJson);
  absl::StatusOr<ForestPtr> ok = LoadModelFile(tiny);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->source, tiny);
  EXPECT_EQ((*ok)->library_version, "2.1.0");
  if (::geteuid() != 0) {
    fs::permissions(tiny, fs::perms::none);
    EXPECT_EQ(LoadModelFile(tiny).status().code(), absl::StatusCode::kPermissionDenied);
  }
}

}  // namespace
}  // namespace grove
