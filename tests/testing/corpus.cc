#include "tests/testing/corpus.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/io/csv.h"
#include "core/model/double_rows.h"
#include "core/model/forest.h"
#include "core/model/loader.h"

#ifndef GROVE_SOURCE_DIR
#error "GROVE_SOURCE_DIR must be defined by the build"
#endif

namespace grove::testing {
namespace fs = std::filesystem;

namespace {

bool IsCaseDir(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p / "meta.json", ec);
}

// Case directories directly under `root`, and one level further (real/*), sorted.
void CollectCases(const fs::path& root, std::vector<std::string>* out,
                  std::set<std::string>* seen) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return;
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (!entry.is_directory(ec)) continue;
    if (IsCaseDir(entry.path())) {
      found.push_back(entry.path());
      continue;
    }
    for (const auto& sub : fs::directory_iterator(entry.path(), ec)) {
      if (sub.is_directory(ec) && IsCaseDir(sub.path())) found.push_back(sub.path());
    }
  }
  std::sort(found.begin(), found.end());
  for (const fs::path& p : found) {
    const std::string key = fs::weakly_canonical(p, ec).string();
    if (seen->insert(key).second) out->push_back(p.lexically_normal().string());
  }
}

std::vector<fs::path> SharedRoots() {
  std::vector<fs::path> roots;
  if (const char* env = std::getenv("GROVE_TESTDATA"); env != nullptr && *env != '\0') {
    roots.emplace_back(env);
  }
  roots.push_back(fs::path(GROVE_SOURCE_DIR) / ".." / "shared" / "testdata");
  return roots;
}

absl::StatusOr<RefMatrix> ReadRef(const fs::path& path, const nlohmann::json& shape) {
  absl::StatusOr<CsvMatrix<double>> m = ReadCsvDoubles(path.string());
  if (!m.ok()) return m.status();
  RefMatrix r;
  r.values = std::move(m->values);
  r.rows = m->rows;
  r.cols = m->cols;
  if (shape.is_array() && shape.size() == 2) {
    const int64_t want_rows = shape[0].get<int64_t>();
    const int64_t want_cols = shape[1].get<int64_t>();
    if (r.rows != want_rows || (r.rows > 0 && r.cols != want_cols)) {
      return absl::InvalidArgumentError(absl::StrCat(path.string(), ": shape ", r.rows, "x",
                                                     r.cols, ", meta.json says ", want_rows, "x",
                                                     want_cols));
    }
    r.cols = want_cols;
  }
  return r;
}

template <typename T>
ErrorReport MaxError(absl::Span<const T> got, const RefMatrix& ref, const RefMatrix* margin,
                     int num_outputs) {
  ErrorReport rep;
  if (static_cast<int64_t>(got.size()) != ref.rows * ref.cols) {
    rep.max_error = std::numeric_limits<double>::infinity();
    return rep;
  }
  const int64_t block = num_outputs > 0 ? std::max<int64_t>(1, ref.cols / num_outputs) : ref.cols;
  for (int64_t r = 0; r < ref.rows; ++r) {
    for (int64_t c = 0; c < ref.cols; ++c) {
      const double want = ref.At(r, c);
      const double g = static_cast<double>(got[static_cast<size_t>(r * ref.cols + c)]);
      double err;
      if (std::isnan(want) || std::isnan(g)) {
        err = (std::isnan(want) && std::isnan(g)) ? 0.0 : std::numeric_limits<double>::infinity();
      } else {
        double scale = std::abs(want);
        if (margin != nullptr) {
          const int64_t k = std::min<int64_t>(c / block, margin->cols - 1);
          scale = r < margin->rows ? std::abs(margin->At(r, k))
                                   : std::numeric_limits<double>::quiet_NaN();
        }
        err = std::abs(g - want) / std::max(1.0, scale);
        if (std::isnan(err)) err = std::numeric_limits<double>::infinity();
      }
      if (err > rep.max_error || (rep.row < 0 && err == rep.max_error)) {
        rep.max_error = err;
        rep.row = r;
        rep.col = c;
        rep.got = g;
        rep.want = want;
      }
    }
  }
  return rep;
}

template <typename T>
int64_t Mismatches(absl::Span<const T> got, const RefMatrix& ref) {
  if (static_cast<int64_t>(got.size()) != ref.rows * ref.cols) {
    return std::max<int64_t>(1, ref.rows * ref.cols);
  }
  int64_t n = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]);
    const double w = ref.values[i];
    if (std::isnan(g) && std::isnan(w)) continue;
    n += (g != w);
  }
  return n;
}

}  // namespace

std::vector<std::string> SharedCaseDirs() {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const fs::path& root : SharedRoots()) CollectCases(root, &out, &seen);
  return out;
}

std::vector<std::string> GoldenCaseDirs() {
  std::vector<std::string> out;
  std::set<std::string> seen;
  CollectCases(fs::path(GROVE_SOURCE_DIR) / "tests" / "golden", &out, &seen);
  return out;
}

std::vector<std::string> GoldenCaseDirs(std::string_view prefix) {
  std::vector<std::string> out;
  for (std::string& dir : GoldenCaseDirs()) {
    if (fs::path(dir).filename().string().starts_with(prefix)) out.push_back(std::move(dir));
  }
  return out;
}

std::vector<std::string> CorpusCaseDirs() {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const fs::path& root : SharedRoots()) CollectCases(root, &out, &seen);
  CollectCases(fs::path(GROVE_SOURCE_DIR) / "tests" / "golden", &out, &seen);
  return out;
}

absl::StatusOr<CorpusModel> LoadCorpusModel(const std::string& dir) {
  absl::StatusOr<CorpusCase> c = LoadCorpusCase(dir);
  if (!c.ok()) return c.status();
  absl::StatusOr<ForestPtr> forest = LoadModelFile(c->model_path);
  if (!forest.ok()) return forest.status();
  return CorpusModel{*std::move(c), *std::move(forest)};
}

absl::StatusOr<CorpusCase> LoadCorpusCase(const std::string& dir) {
  const fs::path d(dir);
  const fs::path meta_path = d / "meta.json";
  std::ifstream in(meta_path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", meta_path.string()));
  std::stringstream text;
  text << in.rdbuf();
  auto meta = std::make_shared<nlohmann::json>(
      nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false));
  if (meta->is_discarded() || !meta->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(meta_path.string(), ": not a JSON object"));
  }
  const nlohmann::json& m = *meta;

  CorpusCase c;
  c.dir = dir;
  c.name = m.value("case", d.filename().string());
  c.library = m.value("library", std::string());
  c.num_features = m.value("num_features", 0);
  c.num_outputs = m.value("num_outputs", 1);
  c.n_interaction_rows = m.value("n_interaction_rows", 0);
  if (c.num_features <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(meta_path.string(), ": no num_features"));
  }

  std::vector<std::string> files;
  if (m.contains("model_files") && m["model_files"].is_array()) {
    for (const auto& f : m["model_files"]) files.push_back(f.get<std::string>());
  } else {
    files = {"model.json", "model.ubj", "model.txt"};
  }
  std::error_code ec;
  for (const std::string& f : files) {
    if (fs::is_regular_file(d / f, ec)) c.model_paths.push_back((d / f).string());
  }
  if (c.model_paths.empty()) {
    return absl::NotFoundError(absl::StrCat(dir, ": no model file"));
  }
  c.model_path = c.model_paths.front();
  for (const std::string& p : c.model_paths) {
    if (p.size() >= 5 && (p.ends_with(".json") || p.ends_with(".txt"))) {
      c.model_path = p;
      break;
    }
  }
  if (c.library.empty()) c.library = c.model_path.ends_with(".txt") ? "lightgbm" : "xgboost";
  c.trained_by = m.value("trained_by", c.library);
  c.float32_reference = c.trained_by == "xgboost";

  absl::StatusOr<CsvMatrix<float>> x = ReadCsvFloats((d / "X.csv").string(), c.num_features);
  if (!x.ok()) return x.status();
  c.X = std::move(x->values);
  c.rows = x->rows;
  absl::StatusOr<CsvMatrix<double>> x64 = ReadCsvDoubles((d / "X.csv").string(), c.num_features);
  if (!x64.ok()) return x64.status();
  c.X64 = std::move(x64->values);

  const nlohmann::json outputs = m.value("outputs", nlohmann::json::object());
  auto load = [&](const char* key, const char* file,
                  std::optional<RefMatrix>* slot) -> absl::Status {
    nlohmann::json shape;
    std::string name = file;
    if (outputs.contains(key)) {
      shape = outputs[key].value("shape", nlohmann::json());
      name = outputs[key].value("file", name);
    } else if (!fs::is_regular_file(d / name, ec)) {
      return absl::OkStatus();
    }
    absl::StatusOr<RefMatrix> r = ReadRef(d / name, shape);
    if (!r.ok()) return r.status();
    *slot = std::move(*r);
    return absl::OkStatus();
  };
  for (auto [key, file, slot] :
       {std::tuple{"margin", "margin.csv", &c.margin}, std::tuple{"pred", "pred.csv", &c.pred},
        std::tuple{"contribs", "contribs.csv", &c.contribs},
        std::tuple{"interactions", "interactions.csv", &c.interactions},
        std::tuple{"leaf", "leaf.csv", &c.leaf}}) {
    absl::Status s = load(key, file, slot);
    if (!s.ok()) return s;
  }
  if (c.interactions.has_value() && c.n_interaction_rows == 0) {
    c.n_interaction_rows = static_cast<int>(c.interactions->rows);
  }
  if (m.contains("unsupported") && m["unsupported"].is_object()) {
    for (const auto& [k, v] : m["unsupported"].items()) {
      c.unsupported[k] = v.is_string() ? v.get<std::string>() : v.dump();
    }
  }
  c.meta = std::move(meta);
  return c;
}

std::vector<float> GroveRows(const CorpusCase& c, const Forest& forest) {
  std::vector<float> rows(c.X64.size());
  DoubleRowConverter(forest).ConvertRows(c.X64.data(), c.rows, rows.data());
  return rows;
}

namespace {

template <typename T>
ExplainComparison Compare(absl::Span<const T> got, const RefMatrix& ref, const RefMatrix& margin,
                          int num_outputs, double tolerance, bool float32_reference) {
  ExplainComparison out;
  out.spec = MaxError(got, ref, &margin, num_outputs);
  out.entries = ref.rows * ref.cols;
  if (static_cast<int64_t>(got.size()) != out.entries) {
    out.failures = std::max<int64_t>(1, out.entries);
    out.worst_failure = out.spec;
    return out;
  }
  const int64_t block = num_outputs > 0 ? std::max<int64_t>(1, ref.cols / num_outputs) : ref.cols;
  for (int64_t r = 0; r < ref.rows; ++r) {
    for (int64_t c = 0; c < ref.cols; ++c) {
      const double want = ref.At(r, c);
      const double g = static_cast<double>(got[static_cast<size_t>(r * ref.cols + c)]);
      if (std::isnan(want) && std::isnan(g)) continue;
      const int64_t k = std::min<int64_t>(c / block, margin.cols - 1);
      const double scale = std::max(1.0, std::abs(margin.At(std::min(r, margin.rows - 1), k)));
      const double diff = std::abs(g - want);
      if (diff <= tolerance * scale) continue;  // also false for NaN on one side
      if (float32_reference && diff <= kFloat32ReferenceUlps * 0x1p-24 * std::abs(want)) {
        ++out.float32_noise_entries;
        continue;
      }
      ++out.failures;
      const double err = std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff / scale;
      if (out.failures == 1 || err > out.worst_failure.max_error) {
        out.worst_failure = ErrorReport{err, r, c, g, want};
      }
    }
  }
  return out;
}

}  // namespace

bool ExplainComparison::ok() const {
  return failures == 0 && float32_noise_entries <= std::max<int64_t>(2, entries / 200);
}

std::string ExplainComparison::ToString() const {
  return absl::StrFormat(
      "%d entries: spec measure %s; %d beyond the spec within %g float32 ulps of the reference; "
      "%d failures%s",
      entries, spec.ToString(), float32_noise_entries, kFloat32ReferenceUlps, failures,
      failures > 0 ? absl::StrCat(", worst ", worst_failure.ToString()) : std::string());
}

ExplainComparison CompareExplanations(absl::Span<const float> got, const RefMatrix& ref,
                                      const RefMatrix& margin, int num_outputs, double tolerance,
                                      bool float32_reference) {
  return Compare(got, ref, margin, num_outputs, tolerance, float32_reference);
}
ExplainComparison CompareExplanations(absl::Span<const double> got, const RefMatrix& ref,
                                      const RefMatrix& margin, int num_outputs, double tolerance,
                                      bool float32_reference) {
  return Compare(got, ref, margin, num_outputs, tolerance, float32_reference);
}

std::string ErrorReport::ToString() const {
  if (row < 0) return absl::StrFormat("max err %g", max_error);
  return absl::StrFormat("max err %.3g at row %d col %d (got %.9g, want %.9g)", max_error, row, col,
                         got, want);
}

ErrorReport MaxRelError(absl::Span<const float> got, const RefMatrix& ref) {
  return MaxError(got, ref, nullptr, 0);
}
ErrorReport MaxRelError(absl::Span<const double> got, const RefMatrix& ref) {
  return MaxError(got, ref, nullptr, 0);
}
ErrorReport MaxMarginRelError(absl::Span<const float> got, const RefMatrix& ref,
                              const RefMatrix& margin, int num_outputs) {
  return MaxError(got, ref, &margin, num_outputs);
}
ErrorReport MaxMarginRelError(absl::Span<const double> got, const RefMatrix& ref,
                              const RefMatrix& margin, int num_outputs) {
  return MaxError(got, ref, &margin, num_outputs);
}
int64_t CountMismatches(absl::Span<const float> got, const RefMatrix& ref) {
  return Mismatches(got, ref);
}
int64_t CountMismatches(absl::Span<const double> got, const RefMatrix& ref) {
  return Mismatches(got, ref);
}

}  // namespace grove::testing
