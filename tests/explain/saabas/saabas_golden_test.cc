// Saabas attributions against XGBoost's own (pred_contribs=True, approx_contribs=True, XGBoost
// 3.2) on the XGBoost models of the golden corpus and of the shared corpus: references in
// tests/golden/saabas/ (make_saabas_golden.py, which lists the cases in cases.json), the first 32
// rows of each case, every round and rounds [0, last).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "core/explain/explain.h"
#include "core/explain/saabas/saabas.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"

namespace grove {
namespace {

const std::string kGolden = std::string(GROVE_SOURCE_DIR) + "/tests/golden/saabas/";

std::string SharedRoot() {
  const char* env = std::getenv("GROVE_TESTDATA");
  return env != nullptr ? env : std::string(GROVE_SOURCE_DIR) + "/../shared/testdata";
}

testing::RefMatrix ReadCsv(const std::string& path) {
  testing::RefMatrix m;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    int64_t cols = 0;
    for (absl::string_view cell : absl::StrSplit(line, ',')) {
      double v = 0;
      EXPECT_TRUE(absl::SimpleAtod(cell, &v)) << path << ": " << cell;
      m.values.push_back(v);
      ++cols;
    }
    m.cols = cols;
    ++m.rows;
  }
  return m;
}

TEST(SaabasGoldenTest, MatchesXgboostApproxContribs) {
  std::ifstream in(kGolden + "cases.json");
  ASSERT_TRUE(in) << kGolden << "cases.json";
  const nlohmann::json cases = nlohmann::json::parse(in);
  int compared = 0, shared_missing = 0;
  for (const nlohmann::json& c : cases["cases"]) {
    const std::string name = c["case"];
    const std::string model = c["model"];
    const std::string root = c["where"] == "repository" ? std::string(GROVE_SOURCE_DIR)
                                                        : SharedRoot();
    const std::string dir = root + "/" + model.substr(0, model.rfind('/'));
    if (c["where"] != "repository" && !std::ifstream(dir + "/meta.json")) {
      ++shared_missing;  // no shared corpus here (the repository's cases still run)
      continue;
    }
    absl::StatusOr<testing::CorpusModel> m = testing::LoadCorpusModel(dir);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    const Forest& f = *m->forest;
    const testing::RefMatrix want = ReadCsv(kGolden + c["reference"].get<std::string>());
    const int64_t n = c["rows"];
    ASSERT_EQ(want.rows, n) << name;
    ASSERT_EQ(want.cols, ExplainWidth(f, false)) << name;
    std::vector<float> rows = testing::GroveRows(m->c, f);
    rows.resize(n * f.num_features);
    auto engine = SaabasEngine::Create(m->forest, nullptr);
    ASSERT_TRUE(engine.ok()) << name << ": " << engine.status();
    ExplainOptions o;
    o.iteration_begin = c["iteration_begin"];
    o.iteration_end = c["iteration_end"];
    std::vector<float> got(n * want.cols);
    ASSERT_TRUE((*engine)
                    ->Explain(MakeRowsView(rows.data(), n, f.num_features), o,
                              MakeMatrixView(got.data(), n, want.cols), nullptr)
                    .ok());
    ASSERT_TRUE(m->c.margin.has_value()) << name;
    // XGBoost keeps node means in float32: its values carry float32 rounding of the margin's
    // scale, the tolerance of the SHAP corpus tests.
    const testing::ExplainComparison cmp =
        testing::CompareExplanations(got, want, *m->c.margin, f.num_outputs, 1e-5, true);
    EXPECT_TRUE(cmp.ok()) << name << ": " << cmp.ToString();
    ++compared;
  }
  EXPECT_GE(compared, 6) << "compared no case";
  if (shared_missing > 0) {
    std::printf("%d shared-corpus cases skipped (no corpus)\n", shared_missing);
  }
}

}  // namespace
}  // namespace grove
