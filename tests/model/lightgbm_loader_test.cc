// LightGBM text loader: the library corpus, hand-written tiny models for every routing rule,
// malformed and truncated inputs, and the float threshold normalisation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/model/decision.h"
#include "core/model/double_rows.h"
#include "core/model/forest.h"
#include "core/model/lightgbm_threshold.h"
#include "core/model/loader.h"

namespace grove {
namespace {

namespace fs = std::filesystem;
using lightgbm_internal::LightgbmNumericThreshold;

constexpr float kNanF = std::numeric_limits<float>::quiet_NaN();
constexpr float kInfF = std::numeric_limits<float>::infinity();

// ---------------------------------------------------------------------------------------------
// Helpers: files, CSV, traversal.

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Comma-separated numbers (strtod: "nan", "inf" included), one row per line.
struct Csv {
  std::vector<double> v;
  int64_t rows = 0;
  int64_t cols = 0;
  double At(int64_t r, int64_t c) const { return v[static_cast<size_t>(r * cols + c)]; }
};

bool ReadCsv(const fs::path& path, Csv* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    int64_t n = 0;
    const char* p = line.c_str();
    for (;;) {
      char* end = nullptr;
      out->v.push_back(std::strtod(p, &end));
      if (end == p) return false;
      ++n;
      if (*end == ',') {
        p = end + 1;
      } else if (*end == '\0') {
        break;
      } else {
        return false;
      }
    }
    if (out->rows == 0) out->cols = n;
    if (n != out->cols) return false;
    ++out->rows;
  }
  return out->rows > 0;
}

fs::path CorpusRoot() {
  if (const char* env = std::getenv("GROVE_TESTDATA"); env && *env) return env;
  return fs::path(GROVE_SOURCE_DIR "/../shared/testdata");
}

// Every LightGBM case directory (lgb_* and real/lgb_*) holding a model.txt.
std::vector<fs::path> LightgbmCaseDirs() {
  std::vector<fs::path> dirs;
  const fs::path root = CorpusRoot();
  std::error_code ec;
  for (const fs::path& base : {root, root / "real"}) {
    if (!fs::is_directory(base, ec)) continue;
    std::vector<fs::path> found;
    for (const auto& entry : fs::directory_iterator(base, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("lgb_", 0) == 0 && fs::exists(entry.path() / "model.txt", ec)) {
        found.push_back(entry.path());
      }
    }
    std::sort(found.begin(), found.end());
    dirs.insert(dirs.end(), found.begin(), found.end());
  }
  return dirs;
}

// Grove's routing with the shared decision function: the node index of the leaf reached.
int32_t GroveLeafNode(const Forest& f, int t, const float* x) {
  const Node* nodes = f.TreeNodes(t);
  int32_t i = 0;
  for (int steps = 0; !nodes[i].is_leaf(); ++steps) {
    if (steps > kMaxTreeDepth) return -1;
    const Node& n = nodes[i];
    i = GoesLeft(n.flags, n.threshold, n.payload, n.aux, f.category_bits.data(), x[n.feature])
            ? n.left
            : n.right;
  }
  return i;
}

// Value of a leaf for row x (linear leaves included), as Grove's engines compute it.
double GroveLeafValue(const Forest& f, int t, int32_t node, const float* x) {
  const Node& leaf = f.TreeNodes(t)[node];
  const double plain = f.leaf_values[leaf.payload] * f.trees[t].weight;
  if (leaf.aux == 0) return plain;
  const LinearLeaf& ll = f.linear_leaves[leaf.aux - 1];
  double v = ll.constant;
  for (uint32_t k = ll.begin; k < ll.begin + ll.count; ++k) {
    const float xv = x[f.linear_features[k]];
    if (std::isnan(xv)) return plain;
    v += f.linear_coeffs[k] * static_cast<double>(xv);
  }
  return v;
}

int LeafId(const Forest& f, int t, const std::vector<float>& x) {
  const int32_t node = GroveLeafNode(f, t, x.data());
  return node < 0 ? -1 : f.TreeNodes(t)[node].leaf_id;
}

// Sum of every tree's value into each output (the margin).
std::vector<double> Margin(const Forest& f, const std::vector<float>& x) {
  std::vector<double> m(f.num_outputs, 0.0);
  for (int t = 0; t < static_cast<int>(f.trees.size()); ++t) {
    m[f.trees[t].group] += GroveLeafValue(f, t, GroveLeafNode(f, t, x.data()), x.data());
  }
  for (int k = 0; k < f.num_outputs; ++k) m[k] += f.base_margin[k];
  return m;
}

// The prediction from a margin, following Objective (README: average_output divides first).
std::vector<double> ApplyLink(const Forest& f, std::vector<double> m) {
  const Objective& o = f.objective;
  if (o.average_output) {
    for (double& v : m) v /= f.num_iterations;
  }
  switch (o.link) {
    case Link::kIdentity: break;
    case Link::kSigmoid:
      for (double& v : m) v = 1.0 / (1.0 + std::exp(-o.sigmoid_alpha * v));
      break;
    case Link::kSoftmax: {
      const double mx = *std::max_element(m.begin(), m.end());
      double sum = 0;
      for (double& v : m) sum += (v = std::exp(v - mx));
      for (double& v : m) v /= sum;
      break;
    }
    case Link::kExp:
      for (double& v : m) v = std::exp(v);
      break;
    case Link::kLog1pExp:
      for (double& v : m) v = std::log1p(std::exp(v));
      break;
    case Link::kSignedSquare:
      for (double& v : m) v = std::copysign(v * v, v);
      break;
    default: ADD_FAILURE() << "unexpected link " << LinkName(o.link);
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// An independent reading of model.txt and LightGBM 4.6's own traversal on double inputs
// (Tree::NumericalDecision / CategoricalDecision / linear Predict), used as the reference.

struct RefTree {
  int num_leaves = 0;
  std::vector<int> split_feature, decision_type, left, right, cat_boundaries;
  std::vector<double> threshold, leaf_value, leaf_const;
  std::vector<uint32_t> cat_threshold;
  bool linear = false;
  std::vector<std::vector<int>> leaf_features;
  std::vector<std::vector<double>> leaf_coeff;
};

template <typename T>
std::vector<T> Tokens(const std::string& s) {
  std::istringstream in(s);
  std::vector<T> out;
  std::string tok;
  while (in >> tok) out.push_back(static_cast<T>(std::strtod(tok.c_str(), nullptr)));
  return out;
}

std::vector<RefTree> ReadRefTrees(const std::string& text) {
  std::vector<RefTree> trees;
  std::istringstream in(text);
  std::string line;
  std::map<std::string, std::string> kv;
  bool in_tree = false;
  auto flush = [&] {
    if (!in_tree) return;
    RefTree t;
    t.num_leaves = std::atoi(kv["num_leaves"].c_str());
    t.split_feature = Tokens<int>(kv["split_feature"]);
    t.decision_type = Tokens<int>(kv["decision_type"]);
    t.left = Tokens<int>(kv["left_child"]);
    t.right = Tokens<int>(kv["right_child"]);
    t.threshold = Tokens<double>(kv["threshold"]);
    t.leaf_value = Tokens<double>(kv["leaf_value"]);
    t.cat_boundaries = Tokens<int>(kv["cat_boundaries"]);
    t.cat_threshold = Tokens<uint32_t>(kv["cat_threshold"]);
    t.linear = kv["is_linear"] == "1";
    if (t.linear) {
      t.leaf_const = Tokens<double>(kv["leaf_const"]);
      const std::vector<int> nf = Tokens<int>(kv["num_features"]);
      const std::vector<int> feats = Tokens<int>(kv["leaf_features"]);
      const std::vector<double> coeffs = Tokens<double>(kv["leaf_coeff"]);
      size_t at = 0;
      for (int n : nf) {
        t.leaf_features.emplace_back(feats.begin() + at, feats.begin() + at + n);
        t.leaf_coeff.emplace_back(coeffs.begin() + at, coeffs.begin() + at + n);
        at += n;
      }
    }
    trees.push_back(std::move(t));
    kv.clear();
    in_tree = false;
  };
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("Tree=", 0) == 0) {
      flush();
      in_tree = true;
    } else if (line == "end of trees") {
      flush();
      break;
    } else if (in_tree && !line.empty()) {
      const size_t eq = line.find('=');
      kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
  }
  return trees;
}

int RefLeaf(const RefTree& t, const double* x) {
  if (t.num_leaves <= 1) return 0;
  int node = 0;
  while (node >= 0) {
    const int dt = t.decision_type[node];
    double v = x[t.split_feature[node]];
    bool left;
    if (dt & 1) {
      if (std::isnan(v) || v <= -1.0 || v >= 2147483648.0) {
        left = false;
      } else {
        const int c = static_cast<int>(v);
        const int idx = static_cast<int>(t.threshold[node]);
        const int begin = t.cat_boundaries[idx], n = t.cat_boundaries[idx + 1] - begin;
        left = c / 32 < n && ((t.cat_threshold[begin + c / 32] >> (c % 32)) & 1);
      }
    } else {
      const int missing = (dt >> 2) & 3;
      if (std::isnan(v) && missing != 2) v = 0.0;
      const bool is_zero = v >= -static_cast<double>(1e-35f) && v <= static_cast<double>(1e-35f);
      if ((missing == 1 && is_zero) || (missing == 2 && std::isnan(v))) {
        left = dt & 2;
      } else {
        left = v <= t.threshold[node];
      }
    }
    node = left ? t.left[node] : t.right[node];
  }
  return ~node;
}

double RefValue(const RefTree& t, int leaf, const double* x) {
  if (!t.linear) return t.leaf_value[leaf];
  double v = t.leaf_const[leaf];
  for (size_t k = 0; k < t.leaf_features[leaf].size(); ++k) {
    const double xv = x[t.leaf_features[leaf][k]];
    if (std::isnan(xv)) return t.leaf_value[leaf];
    v += t.leaf_coeff[leaf][k] * xv;
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// The library corpus.

TEST(LightgbmLoaderCorpus, ReproducesLeavesMarginsAndPredictions) {
  const std::vector<fs::path> dirs = LightgbmCaseDirs();
  if (dirs.empty()) GTEST_SKIP() << "no LightGBM cases under " << CorpusRoot();
  for (const fs::path& dir : dirs) {
    const std::string name = dir.filename().string();
    SCOPED_TRACE(name);
    const std::string text = ReadFile(dir / "model.txt");
    absl::StatusOr<ForestPtr> loaded = LoadLightgbmText(text, (dir / "model.txt").string());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const Forest& f = **loaded;
    const std::vector<RefTree> ref = ReadRefTrees(text);
    Csv X, leaf, margin, pred;
    ASSERT_TRUE(ReadCsv(dir / "X.csv", &X));
    ASSERT_TRUE(ReadCsv(dir / "leaf.csv", &leaf));
    ASSERT_TRUE(ReadCsv(dir / "margin.csv", &margin));
    const bool has_pred = ReadCsv(dir / "pred.csv", &pred);
    ASSERT_EQ(X.cols, f.num_features);
    ASSERT_EQ(margin.cols, f.num_outputs);
    ASSERT_EQ(leaf.cols, static_cast<int64_t>(f.trees.size()));
    ASSERT_EQ(ref.size(), f.trees.size());
    ASSERT_EQ(leaf.rows, X.rows);
    EXPECT_EQ(f.format, ModelFormat::kLightgbmText);
    EXPECT_EQ(f.library_version, "v4");
    EXPECT_EQ(static_cast<int>(f.feature_names.size()), f.num_features);
    EXPECT_EQ(f.objective.average_output, name == "lgb_rf");
    EXPECT_EQ(f.has_categorical, name == "lgb_categorical");
    EXPECT_EQ(f.has_linear_leaves, name == "lgb_linear_tree");
    for (double b : f.base_margin) EXPECT_EQ(b, 0.0);

    // Grove's rows are float32; LightGBM compared the doubles of X.csv. A value such as 0.28 (<= the
    // threshold 0.2800000000000001) rounds to the float 0.2800000011920929, above the threshold.
    // DoubleRowConverter (what `grove` uses on CSV input) picks the float on the double's side of
    // every threshold, so Grove must reproduce LightGBM on the doubles at every split: the row's own
    // path (leaf.csv) and every other node (TreeSHAP evaluates all of them).
    const DoubleRowConverter converter(f);
    int64_t ref_mismatches = 0, leaf_mismatches = 0, split_mismatches = 0, splits_checked = 0;
    double max_margin_err = 0, max_ref_margin_err = 0, max_pred_err = 0;
    std::vector<float> xf(X.cols);
    std::vector<double> xd(X.cols), xfd(X.cols);
    for (int64_t r = 0; r < X.rows; ++r) {
      for (int64_t c = 0; c < X.cols; ++c) {
        xd[c] = X.At(r, c);
        xf[c] = converter.Convert(static_cast<int>(c), xd[c]);
        xfd[c] = static_cast<double>(xf[c]);
      }
      std::vector<double> ref_margin(f.num_outputs, 0.0);
      for (int t = 0; t < static_cast<int>(f.trees.size()); ++t) {
        const int want = static_cast<int>(leaf.At(r, t));
        // The independent reference on the library's own double input reproduces leaf.csv ...
        const int ref_leaf = RefLeaf(ref[t], xd.data());
        if (ref_leaf != want) ++ref_mismatches;
        // Linear leaves see Grove's float inputs: their value is exact given those.
        ref_margin[f.trees[t].group] += RefValue(ref[t], ref_leaf, xfd.data());
        // ... and so does Grove on float rows.
        const int32_t node = GroveLeafNode(f, t, xf.data());
        ASSERT_GE(node, 0);
        const int got = f.TreeNodes(t)[node].leaf_id;
        if (got != want) {
          ++leaf_mismatches;
          std::printf("  routing difference: row %lld tree %d leaf %d (LightGBM: %d)\n",
                      static_cast<long long>(r), t, got, want);
        }
        // Every numeric split of the tree, on or off the row's path.
        const Node* nodes = f.TreeNodes(t);
        for (int i = 0; i < static_cast<int>(ref[t].threshold.size()); ++i) {
          const Node& n = nodes[i];
          if (n.is_categorical()) continue;
          const double v = xd[n.feature];
          if (std::isnan(v)) continue;
          const int dt = static_cast<int>(ref[t].decision_type[i]);
          if (((dt >> 2) & 3) == 1 && std::abs(v) <= 1e-35) continue;  // missing type Zero
          const bool lightgbm_left = v <= ref[t].threshold[i];
          const bool grove_left = GoesLeft(n.flags, n.threshold, n.payload, n.aux,
                                           f.category_bits.data(), xf[n.feature]);
          ++splits_checked;
          if (lightgbm_left != grove_left) {
            ++split_mismatches;
            std::printf("  split difference: row %lld tree %d node %d x=%.17g threshold=%.17g\n",
                        static_cast<long long>(r), t, i, v, ref[t].threshold[i]);
          }
        }
      }
      const std::vector<double> m = Margin(f, xf);
      for (int k = 0; k < f.num_outputs; ++k) {
        max_ref_margin_err = std::max(max_ref_margin_err, std::abs(m[k] - ref_margin[k]) /
                                                              std::max(1.0, std::abs(ref_margin[k])));
        const double want = margin.At(r, k);
        max_margin_err = std::max(max_margin_err, std::abs(m[k] - want) / std::max(1.0, std::abs(want)));
      }
      if (has_pred) {
        std::vector<double> mref(f.num_outputs);
        for (int k = 0; k < f.num_outputs; ++k) mref[k] = margin.At(r, k);
        const std::vector<double> p = ApplyLink(f, mref);
        for (int k = 0; k < f.num_outputs; ++k) {
          const double want = pred.At(r, k);
          max_pred_err = std::max(max_pred_err, std::abs(p[k] - want) / std::max(1.0, std::abs(want)));
        }
      }
    }
    std::printf("[ %-30s ] trees %zu leaves %lld: %lld numeric splits checked, margin max rel err "
                "%.3g, pred-from-margin max rel err %.3g\n",
                name.c_str(), f.trees.size(), static_cast<long long>(f.num_leaves),
                static_cast<long long>(splits_checked), max_margin_err, max_pred_err);
    EXPECT_EQ(ref_mismatches, 0) << "the test's reference traversal disagrees with leaf.csv";
    EXPECT_EQ(leaf_mismatches, 0) << "Grove on float rows reaches other leaves than LightGBM";
    EXPECT_EQ(split_mismatches, 0) << "Grove's float thresholds route differently from LightGBM";
    EXPECT_GT(splits_checked, 0);
    EXPECT_LE(max_ref_margin_err, 1e-12);
    EXPECT_LE(max_margin_err, 1e-5);
    if (has_pred) EXPECT_LE(max_pred_err, 1e-5);
  }
}

// Every corpus model cut short anywhere before its "end of trees" line is refused cleanly.
TEST(LightgbmLoaderCorpus, TruncatedModelsAreRefused) {
  const std::vector<fs::path> dirs = LightgbmCaseDirs();
  if (dirs.empty()) GTEST_SKIP() << "no LightGBM cases under " << CorpusRoot();
  for (const fs::path& dir : dirs) {
    SCOPED_TRACE(dir.filename().string());
    const std::string text = ReadFile(dir / "model.txt");
    const size_t end = text.find("end of trees");
    ASSERT_NE(end, std::string::npos);
    const size_t complete = end + std::strlen("end of trees");
    std::vector<size_t> cuts;
    for (size_t i = 0; i < 400; ++i) cuts.push_back(i * text.size() / 400);
    for (size_t i = 0; i < 64 && i <= complete; ++i) cuts.push_back(complete - i);
    for (size_t i = 0; i < 200 && i < complete; ++i) cuts.push_back(i);  // inside the header
    for (size_t cut : cuts) {
      absl::StatusOr<ForestPtr> r = LoadLightgbmText(std::string_view(text).substr(0, cut), "cut");
      if (cut >= complete) {
        EXPECT_TRUE(r.ok()) << "cut at " << cut << ": " << r.status();
      } else {
        ASSERT_FALSE(r.ok()) << "cut at " << cut << " of " << text.size() << " loaded";
        EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Hand-written models.

std::string Header(int num_features, const std::string& objective = "regression",
                   int num_class = 1, const std::string& extra = "") {
  std::string names, infos;
  for (int i = 0; i < num_features; ++i) {
    names += (i ? " f" : "f") + std::to_string(i);
    infos += i ? " [-1:1]" : "[-1:1]";
  }
  std::string h = "tree\nversion=v4\nnum_class=" + std::to_string(num_class) +
                  "\nnum_tree_per_iteration=" + std::to_string(num_class) +
                  "\nlabel_index=0\nmax_feature_idx=" + std::to_string(num_features - 1) + "\n";
  if (!objective.empty()) h += "objective=" + objective + "\n";
  return h + extra + "feature_names=" + names + "\nfeature_infos=" + infos + "\n\n";
}

// A tree body (the lines after "Tree=N").
std::string Stump(int feature, const std::string& threshold, int decision_type,
                  const std::string& leaf_values = "1 2") {
  return "num_leaves=2\nnum_cat=0\nsplit_feature=" + std::to_string(feature) +
         "\nsplit_gain=1\nthreshold=" + threshold +
         "\ndecision_type=" + std::to_string(decision_type) +
         "\nleft_child=-1\nright_child=-2\nleaf_value=" + leaf_values +
         "\nleaf_weight=1 1\nleaf_count=10 20\ninternal_value=0\ninternal_weight=2\n"
         "internal_count=30\nis_linear=0\nshrinkage=1\n";
}

// One categorical split on feature 0 over the bitset words `words` (leaf 0 = in set).
std::string CatStump(const std::string& words, int decision_type = 1) {
  const int n = static_cast<int>(std::count(words.begin(), words.end(), ' ')) + (words.empty() ? 0 : 1);
  return "num_leaves=2\nnum_cat=1\nsplit_feature=0\nsplit_gain=1\nthreshold=0\ndecision_type=" +
         std::to_string(decision_type) +
         "\nleft_child=-1\nright_child=-2\nleaf_value=1 2\nleaf_weight=1 1\nleaf_count=10 20\n"
         "internal_value=0\ninternal_weight=2\ninternal_count=30\ncat_boundaries=0 " +
         std::to_string(n) + "\ncat_threshold=" + words + "\nis_linear=0\nshrinkage=1\n";
}

std::string Model(const std::string& header, const std::vector<std::string>& trees) {
  std::string s = header;
  for (size_t i = 0; i < trees.size(); ++i) {
    s += "Tree=" + std::to_string(i) + "\n" + trees[i] + "\n\n";
  }
  return s + "end of trees\n\nfeature_importances:\nf0=1\n\nparameters:\n[boosting: gbdt]\n"
             "end of parameters\n\npandas_categorical:null\n";
}

ForestPtr MustLoad(const std::string& text) {
  absl::StatusOr<ForestPtr> r = LoadLightgbmText(text, "mem.txt");
  EXPECT_TRUE(r.ok()) << r.status() << "\n" << text;
  return r.ok() ? *r : nullptr;
}

TEST(LightgbmLoader, StumpLayoutAndCovers) {
  ForestPtr f = MustLoad(Model(Header(2), {Stump(1, "0.5", 10, "-1.25 3.5")}));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->num_features, 2);
  EXPECT_EQ(f->num_outputs, 1);
  EXPECT_EQ(f->num_iterations, 1);
  EXPECT_EQ(f->objective.name, "regression");
  EXPECT_EQ(f->objective.link, Link::kIdentity);
  EXPECT_FALSE(f->objective.average_output);
  EXPECT_EQ(f->feature_names, (std::vector<std::string>{"f0", "f1"}));
  ASSERT_EQ(f->trees.size(), 1u);
  ASSERT_EQ(f->trees[0].num_nodes, 3u);
  const Node* n = f->TreeNodes(0);
  EXPECT_FALSE(n[0].is_leaf());
  EXPECT_EQ(n[0].feature, 1);
  EXPECT_EQ(n[0].left, 1);
  EXPECT_EQ(n[0].right, 2);
  EXPECT_EQ(n[0].cover, 30);
  EXPECT_EQ(n[0].threshold, std::nextafter(0.5f, kInfF));
  EXPECT_EQ(n[0].flags, kNodeDefaultLeft);  // decision_type 10: missing NaN, default left
  EXPECT_TRUE(n[1].is_leaf());
  EXPECT_EQ(n[1].leaf_id, 0);
  EXPECT_EQ(n[1].cover, 10);
  EXPECT_EQ(f->leaf_values[n[1].payload], -1.25);
  EXPECT_EQ(n[2].leaf_id, 1);
  EXPECT_EQ(n[2].cover, 20);
  EXPECT_EQ(f->leaf_values[n[2].payload], 3.5);
  EXPECT_EQ(f->base_margin, std::vector<double>{0.0});
}

// Names are UTF-8 wherever they are shown (protobuf strings, JSON): a byte that is not part of valid
// UTF-8 (a Latin-1 'é' written by a Latin-1 tool) is written as the text \xHH, so that every
// interface shows the same distinct names; valid UTF-8 is kept as written.
TEST(LightgbmLoader, NamesThatAreNotUtf8AreEscaped) {
  std::string text = Model(Header(3), {Stump(1, "0.5", 10)});
  const std::string from = "feature_names=f0 f1 f2";
  text.replace(text.find(from), from.size(), "feature_names=caf\xE9 na\xC3\xAFve x\xC3");
  ForestPtr f = MustLoad(text);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->feature_names,
            (std::vector<std::string>{"caf\\xE9", "na\xC3\xAFve", "x\\xC3"}));
}

TEST(LightgbmLoader, MissingTypeNoneComparesNanAsZero) {
  // decision_type 0 (missing None, default right) and 2 (missing None, default left bit set):
  // NaN is 0.0 and compared; the default bit plays no part.
  for (int dt : {0, 2}) {
    ForestPtr f = MustLoad(Model(Header(1), {Stump(0, "0.5", dt), Stump(0, "-0.5", dt)}));
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->TreeNodes(0)[0].flags & (kNodeNanAsZero | kNodeMissingZero), kNodeNanAsZero);
    EXPECT_EQ(LeafId(*f, 0, {0.5f}), 0) << "x == threshold goes left (<=)";
    EXPECT_EQ(LeafId(*f, 0, {std::nextafter(0.5f, 1.0f)}), 1);
    EXPECT_EQ(LeafId(*f, 0, {0.25f}), 0);
    EXPECT_EQ(LeafId(*f, 0, {0.0f}), 0);
    EXPECT_EQ(LeafId(*f, 0, {kNanF}), 0) << "NaN compares as 0 <= 0.5";
    EXPECT_EQ(LeafId(*f, 0, {-kInfF}), 0);
    EXPECT_EQ(LeafId(*f, 0, {kInfF}), 1);
    EXPECT_EQ(LeafId(*f, 1, {-0.5f}), 0);
    EXPECT_EQ(LeafId(*f, 1, {0.0f}), 1);
    EXPECT_EQ(LeafId(*f, 1, {kNanF}), 1) << "NaN compares as 0 > -0.5, even with default left";
  }
}

TEST(LightgbmLoader, MissingTypeZeroSendsZeroAndNanToDefault) {
  // 4: missing Zero, default right; 6: missing Zero, default left.
  ForestPtr f = MustLoad(Model(Header(1), {Stump(0, "1", 4), Stump(0, "-1", 6)}));
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->TreeNodes(0)[0].flags & kNodeMissingZero);
  EXPECT_FALSE(f->TreeNodes(0)[0].flags & kNodeNanAsZero);
  EXPECT_EQ(LeafId(*f, 0, {0.0f}), 1) << "zero is missing: default right although 0 <= 1";
  EXPECT_EQ(LeafId(*f, 0, {-0.0f}), 1);
  EXPECT_EQ(LeafId(*f, 0, {1e-36f}), 1);
  EXPECT_EQ(LeafId(*f, 0, {1e-35f}), 1);
  EXPECT_EQ(LeafId(*f, 0, {-1e-35f}), 1);
  EXPECT_EQ(LeafId(*f, 0, {2e-35f}), 0);
  EXPECT_EQ(LeafId(*f, 0, {kNanF}), 1) << "NaN becomes 0, which is missing";
  EXPECT_EQ(LeafId(*f, 0, {1.0f}), 0) << "x == threshold";
  EXPECT_EQ(LeafId(*f, 0, {0.5f}), 0);
  EXPECT_EQ(LeafId(*f, 0, {1.5f}), 1);
  EXPECT_EQ(LeafId(*f, 1, {0.0f}), 0) << "zero is missing: default left although 0 > -1";
  EXPECT_EQ(LeafId(*f, 1, {kNanF}), 0);
  EXPECT_EQ(LeafId(*f, 1, {-1.0f}), 0);
  EXPECT_EQ(LeafId(*f, 1, {-0.5f}), 1);
}

TEST(LightgbmLoader, MissingTypeNanSendsNanToDefault) {
  // 8: missing NaN, default right; 10: missing NaN, default left.
  ForestPtr f = MustLoad(Model(Header(1), {Stump(0, "0", 8), Stump(0, "0", 10)}));
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(f->TreeNodes(0)[0].flags & (kNodeMissingZero | kNodeNanAsZero));
  EXPECT_EQ(LeafId(*f, 0, {kNanF}), 1);
  EXPECT_EQ(LeafId(*f, 1, {kNanF}), 0);
  for (int t : {0, 1}) {
    EXPECT_EQ(LeafId(*f, t, {0.0f}), 0) << "x == threshold, zero is a plain value";
    EXPECT_EQ(LeafId(*f, t, {-0.0f}), 0);
    EXPECT_EQ(LeafId(*f, t, {1e-40f}), 1);
    EXPECT_EQ(LeafId(*f, t, {-1e-40f}), 0);
  }
}

TEST(LightgbmLoader, ThresholdsThatAreNotFloats) {
  // 0.1 as a double lies between two floats: 0.1f is above it and must go right.
  ForestPtr f = MustLoad(Model(Header(1), {Stump(0, "0.10000000000000001", 8),
                                           Stump(0, "1.0000000180025095e-35", 8),
                                           Stump(0, "inf", 8), Stump(0, "-inf", 8),
                                           Stump(0, "1e300", 8), Stump(0, "-1e300", 8)}));
  ASSERT_NE(f, nullptr);
  EXPECT_GT(static_cast<double>(0.1f), 0.1);
  EXPECT_EQ(LeafId(*f, 0, {0.1f}), 1);
  EXPECT_EQ(LeafId(*f, 0, {std::nextafter(0.1f, 0.0f)}), 0);
  EXPECT_EQ(LeafId(*f, 1, {1e-35f}), 0);
  EXPECT_EQ(LeafId(*f, 1, {std::nextafter(1e-35f, 1.0f)}), 1);
  for (float x : {-kInfF, -FLT_MAX, 0.0f, FLT_MAX}) {
    EXPECT_EQ(LeafId(*f, 2, {x}), 0) << x;  // <= +inf
    EXPECT_EQ(LeafId(*f, 4, {x}), 0) << x;  // <= 1e300
  }
  EXPECT_EQ(LeafId(*f, 4, {kInfF}), 1);
  EXPECT_EQ(LeafId(*f, 3, {-kInfF}), 0);
  EXPECT_EQ(LeafId(*f, 3, {-FLT_MAX}), 1);
  EXPECT_EQ(LeafId(*f, 5, {-kInfF}), 0);
  EXPECT_EQ(LeafId(*f, 5, {-FLT_MAX}), 1);
}

TEST(LightgbmLoader, CategoricalSplits) {
  // Words "10 2": categories 1, 3 (word 0) and 33 (word 1) go left; decision types 1 (plain),
  // 3 (default-left bit), 9 (missing NaN), 11, 5 (missing Zero): NaN goes right in every case.
  for (int dt : {1, 3, 5, 9, 11}) {
    SCOPED_TRACE(dt);
    ForestPtr f = MustLoad(Model(Header(1), {CatStump("10 2", dt), CatStump("1", dt)}));
    ASSERT_NE(f, nullptr);
    EXPECT_TRUE(f->has_categorical);
    const Node& n = f->TreeNodes(0)[0];
    EXPECT_EQ(n.flags, kNodeCategorical | kNodeCategoryInSetGoesLeft | kNodeCategoryTruncate);
    EXPECT_EQ(n.aux, 2u);
    EXPECT_EQ(f->category_bits[n.payload], 10u);
    EXPECT_EQ(f->category_bits[n.payload + 1], 2u);
    for (float x : {1.0f, 3.0f, 3.9f, 33.0f, 33.5f}) EXPECT_EQ(LeafId(*f, 0, {x}), 0) << x;
    for (float x : {0.0f, 2.0f, 4.0f, 32.0f, 34.0f, 63.0f, 64.0f, 65.0f, 1e9f, 3e9f, kInfF,
                    -kInfF, -1.0f, -1.5f, -0.5f, -0.0f, kNanF}) {
      EXPECT_EQ(LeafId(*f, 0, {x}), 1) << x;
    }
    // Category 0 in the set: (int)x truncates, so (-1, 0) is category 0.
    for (float x : {0.0f, -0.0f, -0.5f, -0.999f, 0.999f}) EXPECT_EQ(LeafId(*f, 1, {x}), 0) << x;
    for (float x : {-1.0f, -1.5f, 1.0f, 32.0f, kNanF, -kInfF}) EXPECT_EQ(LeafId(*f, 1, {x}), 1) << x;
  }
}

TEST(LightgbmLoader, CategoricalEmptyBitsetSendsEverythingRight) {
  const std::string tree =
      "num_leaves=2\nnum_cat=1\nsplit_feature=0\nthreshold=0\ndecision_type=1\n"
      "left_child=-1\nright_child=-2\nleaf_value=1 2\ncat_boundaries=0 0\ncat_threshold=\n";
  ForestPtr f = MustLoad(Model(Header(1), {tree}));
  ASSERT_NE(f, nullptr);
  for (float x : {0.0f, 1.0f, 5.0f, kNanF}) EXPECT_EQ(LeafId(*f, 0, {x}), 1) << x;
}

TEST(LightgbmLoader, CategoricalAndNumericInOneTree) {
  // node 0: categorical on f0 (bitset 1: {1, 5}), node 1: numeric f1 <= 0.
  const std::string tree =
      "num_leaves=3\nnum_cat=2\nsplit_feature=0 1\nsplit_gain=1 1\nthreshold=1 0\n"
      "decision_type=1 10\nleft_child=1 -2\nright_child=-1 -3\nleaf_value=10 20 30\n"
      "leaf_count=5 6 7\ninternal_count=18 11\ncat_boundaries=0 1 2\ncat_threshold=4 34\n";
  ForestPtr f = MustLoad(Model(Header(2), {tree}));
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->trees[0].num_nodes, 5u);
  const Node* n = f->TreeNodes(0);
  EXPECT_EQ(n[0].left, 1);
  EXPECT_EQ(n[0].right, 2);  // leaf 0
  EXPECT_EQ(n[1].left, 3);   // leaf 1
  EXPECT_EQ(n[1].right, 4);  // leaf 2
  EXPECT_EQ(n[1].cover, 11);
  EXPECT_EQ(n[4].cover, 7);
  EXPECT_EQ(f->category_bits[n[0].payload], 34u);
  EXPECT_EQ(LeafId(*f, 0, {1.0f, -1.0f}), 1);
  EXPECT_EQ(LeafId(*f, 0, {5.0f, 1.0f}), 2);
  EXPECT_EQ(LeafId(*f, 0, {5.0f, kNanF}), 1);  // missing NaN, default left
  EXPECT_EQ(LeafId(*f, 0, {2.0f, -1.0f}), 0);
  EXPECT_EQ(LeafId(*f, 0, {kNanF, -1.0f}), 0);
}

TEST(LightgbmLoader, ConstantTree) {
  // As LightGBM 4.6 writes a tree without splits: empty per-node lists, empty leaf_weight.
  const std::string constant =
      "num_leaves=1\nnum_cat=0\nsplit_feature=\nsplit_gain=\nthreshold=\ndecision_type=\n"
      "left_child=\nright_child=\nleaf_value=0.44\nleaf_weight=\nleaf_count=300\n"
      "internal_value=\ninternal_weight=\ninternal_count=\nis_linear=0\nshrinkage=1\n";
  ForestPtr f = MustLoad(Model(Header(3), {constant, Stump(2, "0", 8, "1 2")}));
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->trees[0].num_nodes, 1u);
  const Node& leaf = f->TreeNodes(0)[0];
  EXPECT_TRUE(leaf.is_leaf());
  EXPECT_EQ(leaf.leaf_id, 0);
  EXPECT_EQ(leaf.cover, 300);
  EXPECT_EQ(f->trees[0].depth, 0);
  EXPECT_EQ(f->trees[0].iteration, 0);
  EXPECT_EQ(f->trees[1].iteration, 1);
  EXPECT_EQ(LeafId(*f, 0, {kNanF, kNanF, kNanF}), 0);
  EXPECT_DOUBLE_EQ(Margin(*f, {0, 0, 1})[0], 0.44 + 2);
  // The minimal form: only the three required keys.
  ForestPtr g = MustLoad(Model(Header(1), {"num_leaves=1\nnum_cat=0\nleaf_value=-3\n"}));
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->TreeNodes(0)[0].cover, 0);
  EXPECT_EQ(Margin(*g, {1})[0], -3);
}

TEST(LightgbmLoader, LinearLeavesFallBackOnNan) {
  // leaf 0: 1 + 0.5 * x0; leaf 1: 2 - x0 + 2 * x1 (LightGBM's spacing: two spaces between leaves).
  const std::string tree =
      "num_leaves=2\nnum_cat=0\nsplit_feature=0\nsplit_gain=1\nthreshold=0\ndecision_type=2\n"
      "left_child=-1\nright_child=-2\nleaf_value=7 8\nleaf_weight=1 1\nleaf_count=3 4\n"
      "internal_value=0\ninternal_weight=2\ninternal_count=7\nis_linear=1\nleaf_const=1 2\n"
      "num_features=1 2\nleaf_features=0  0 1  \nleaf_coeff=0.5  -1 2  \nshrinkage=1\n";
  const std::string constant_linear =
      "num_leaves=1\nnum_cat=0\nsplit_feature=\nthreshold=\ndecision_type=\nleft_child=\n"
      "right_child=\nleaf_value=5\nleaf_count=7\nis_linear=1\nleaf_const=0.25\n"
      "num_features=1\nleaf_features=1  \nleaf_coeff=3  \n";
  ForestPtr f = MustLoad(Model(Header(2), {tree, constant_linear}));
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->has_linear_leaves);
  ASSERT_EQ(f->linear_leaves.size(), 3u);
  EXPECT_EQ(f->linear_features, (std::vector<int32_t>{0, 0, 1, 1}));
  EXPECT_EQ(f->linear_coeffs, (std::vector<double>{0.5, -1, 2, 3}));
  auto value = [&](int t, std::vector<float> x) {
    const int32_t node = GroveLeafNode(*f, t, x.data());
    return GroveLeafValue(*f, t, node, x.data());
  };
  EXPECT_DOUBLE_EQ(value(0, {-2, 0}), 1 + 0.5 * -2);
  EXPECT_DOUBLE_EQ(value(0, {-2, kNanF}), 0.0) << "x1 is not a term of leaf 0";
  EXPECT_DOUBLE_EQ(value(0, {3, 4}), 2 - 3 + 2 * 4);
  EXPECT_DOUBLE_EQ(value(0, {3, kNanF}), 8) << "NaN term: the leaf's plain value";
  EXPECT_DOUBLE_EQ(value(0, {kNanF, 1}), 7) << "routed as 0 <= 0, but its term x0 is NaN";
  EXPECT_DOUBLE_EQ(value(1, {0, 2}), 0.25 + 3 * 2);
  EXPECT_DOUBLE_EQ(value(1, {0, kNanF}), 5);
}

TEST(LightgbmLoader, AverageOutputAndObjectives) {
  ForestPtr rf = MustLoad(Model(Header(1, "binary sigmoid:1", 1, "average_output\n"),
                                {Stump(0, "0", 8), Stump(0, "1", 8)}));
  ASSERT_NE(rf, nullptr);
  EXPECT_TRUE(rf->objective.average_output);
  EXPECT_EQ(rf->objective.link, Link::kSigmoid);
  EXPECT_EQ(rf->num_iterations, 2);
  EXPECT_EQ(Margin(*rf, {0.5f})[0], 2 + 1) << "the margin is the plain sum";

  struct Case {
    std::string objective;
    int classes;
    Link link;
    double alpha;
  };
  const Case cases[] = {
      {"regression", 1, Link::kIdentity, 1},
      {"regression sqrt", 1, Link::kSignedSquare, 1},
      {"regression reg_sqrt", 1, Link::kSignedSquare, 1},
      {"regression_l1", 1, Link::kIdentity, 1},
      {"huber", 1, Link::kIdentity, 1},
      {"fair", 1, Link::kIdentity, 1},
      {"quantile", 1, Link::kIdentity, 1},
      {"mape", 1, Link::kIdentity, 1},
      {"lambdarank", 1, Link::kIdentity, 1},
      {"rank_xendcg", 1, Link::kIdentity, 1},
      {"custom", 1, Link::kIdentity, 1},
      {"", 1, Link::kIdentity, 1},
      {"binary sigmoid:1", 1, Link::kSigmoid, 1},
      {"binary sigmoid:0.5", 1, Link::kSigmoid, 0.5},
      {"multiclass num_class:3", 3, Link::kSoftmax, 1},
      {"multiclassova num_class:3 sigmoid:2", 3, Link::kSigmoid, 2},
      {"cross_entropy", 1, Link::kSigmoid, 1},
      {"xentropy", 1, Link::kSigmoid, 1},
      {"cross_entropy_lambda", 1, Link::kLog1pExp, 1},
      {"xentlambda", 1, Link::kLog1pExp, 1},
      {"poisson", 1, Link::kExp, 1},
      {"gamma", 1, Link::kExp, 1},
      {"tweedie", 1, Link::kExp, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.objective);
    std::vector<std::string> trees(2 * c.classes, Stump(0, "0", 8));
    ForestPtr f = MustLoad(Model(Header(1, c.objective, c.classes), trees));
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->objective.name, c.objective);
    EXPECT_EQ(f->objective.link, c.link);
    EXPECT_EQ(f->objective.sigmoid_alpha, c.alpha);
    EXPECT_FALSE(f->objective.average_output);
    EXPECT_EQ(f->num_outputs, c.classes);
    EXPECT_EQ(f->num_iterations, 2);
    EXPECT_EQ(f->base_margin, std::vector<double>(c.classes, 0.0));
  }
}

TEST(LightgbmLoader, MulticlassGroupsAndIterations) {
  std::vector<std::string> trees;
  for (int t = 0; t < 6; ++t) {
    trees.push_back(Stump(0, "0", 8, std::to_string(t) + " " + std::to_string(10 + t)));
  }
  ForestPtr f = MustLoad(Model(Header(1, "multiclass num_class:3", 3), trees));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->num_outputs, 3);
  EXPECT_EQ(f->num_iterations, 2);
  for (int t = 0; t < 6; ++t) {
    EXPECT_EQ(f->trees[t].group, t % 3);
    EXPECT_EQ(f->trees[t].iteration, t / 3);
  }
  EXPECT_EQ(Margin(*f, {-1}), (std::vector<double>{0 + 3, 1 + 4, 2 + 5}));
  EXPECT_TRUE(f->TreeInRange(4, 1, 2));
}

TEST(LightgbmLoader, FormatVariants) {
  const std::string plain = Model(Header(2), {Stump(0, "0.5", 8), Stump(1, "-2", 2)});
  ForestPtr a = MustLoad(plain);
  ASSERT_NE(a, nullptr);
  // CRLF line endings.
  std::string crlf;
  for (char c : plain) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  ForestPtr b = MustLoad(crlf);
  ASSERT_NE(b, nullptr);
  // tree_sizes (consistent count), no feature_infos / label_index / version, leading '+' numbers.
  std::string variant = plain;
  variant.replace(variant.find("feature_infos"), 0, "tree_sizes=100 200\n");
  variant.erase(variant.find("label_index=0\n"), 14);
  variant.erase(variant.find("version=v4\n"), 11);
  variant.replace(variant.find("threshold=0.5"), 13, "threshold=+5e-1");
  ForestPtr c = MustLoad(variant);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->library_version, "");
  for (const ForestPtr& f : {b, c}) {
    ASSERT_EQ(f->nodes.size(), a->nodes.size());
    for (size_t i = 0; i < a->nodes.size(); ++i) {
      EXPECT_EQ(std::memcmp(&f->nodes[i], &a->nodes[i], sizeof(Node)), 0) << i;
    }
    EXPECT_EQ(f->leaf_values, a->leaf_values);
  }
  // No "end of trees" tail beyond the marker, no trailing newline.
  const std::string bare = plain.substr(0, plain.find("end of trees") + 12);
  EXPECT_NE(MustLoad(bare), nullptr);
}

// ---------------------------------------------------------------------------------------------
// Malformed input.

struct Bad {
  std::string what;
  std::string text;
  std::string expect;  // substring of the message
};

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

// A valid two-tree model whose second tree is `tree1`, for errors located in "tree 1".
std::string WithTree1(const std::string& tree1, const std::string& header = Header(2)) {
  return Model(header, {Stump(0, "0", 8), tree1});
}

TEST(LightgbmLoader, MalformedInputsAreInvalidArgument) {
  const std::string s2 = Stump(1, "0.5", 8);
  const std::string three =
      "num_leaves=3\nnum_cat=0\nsplit_feature=0 1\nthreshold=0 1\ndecision_type=8 8\n"
      "left_child=1 -1\nright_child=-2 -3\nleaf_value=1 2 3\n";
  const std::string cat = CatStump("10 2");
  const std::string linear =
      "num_leaves=2\nnum_cat=0\nsplit_feature=0\nthreshold=0\ndecision_type=8\n"
      "left_child=-1\nright_child=-2\nleaf_value=7 8\nis_linear=1\nleaf_const=1 2\n"
      "num_features=1 1\nleaf_features=0 1\nleaf_coeff=0.5 2\n";
  ASSERT_NE(MustLoad(WithTree1(three)), nullptr);
  ASSERT_NE(MustLoad(WithTree1(cat)), nullptr);
  ASSERT_NE(MustLoad(WithTree1(linear)), nullptr);
  const std::string good = WithTree1(s2);
  ASSERT_NE(MustLoad(good), nullptr);

  const std::vector<Bad> bad = {
      {"empty", "", "empty"},
      {"not a model", "hello world\n", "Tree="},
      {"json", "{\"learner\": {}}", "Tree="},
      {"no trees", Header(2) + "end of trees\n", "no trees"},
      {"missing end of trees", good.substr(0, good.find("end of trees")), "end of trees"},
      {"garbage between trees", Replace(good, "Tree=1", "garbage\nTree=1"), "garbage"},
      {"missing num_class", Replace(good, "num_class=1\n", ""), "num_class"},
      {"missing max_feature_idx", Replace(good, "max_feature_idx=1\n", ""), "max_feature_idx"},
      {"missing feature_names", Replace(good, "feature_names=f0 f1\n", ""), "feature_names"},
      {"feature_names count", Replace(good, "feature_names=f0 f1", "feature_names=f0"),
       "feature_names"},
      {"negative max_feature_idx", Replace(good, "max_feature_idx=1", "max_feature_idx=-1"),
       "max_feature_idx"},
      {"huge max_feature_idx", Replace(good, "max_feature_idx=1", "max_feature_idx=99999999999"),
       "max_feature_idx"},
      {"num_class zero", Replace(good, "num_class=1", "num_class=0"), "num_class"},
      {"num_tree_per_iteration mismatch",
       Replace(good, "num_tree_per_iteration=1", "num_tree_per_iteration=2"),
       "num_tree_per_iteration"},
      {"trees not a multiple of classes",
       Model(Header(2, "multiclass num_class:3", 3), {s2, s2, s2, s2}), "multiple"},
      {"objective num_class mismatch",
       Model(Header(2, "multiclass num_class:4", 3), {s2, s2, s2}), "num_class"},
      {"unknown objective", Model(Header(2, "frobnicate"), {s2}), "frobnicate"},
      {"bad sigmoid", Model(Header(2, "binary sigmoid:-1"), {s2}), "sigmoid"},
      {"non-numeric sigmoid", Model(Header(2, "binary sigmoid:abc"), {s2}), "sigmoid"},
      {"softmax with one class", Model(Header(2, "multiclass num_class:1"), {s2}), "softmax"},
      {"tree_sizes count", Replace(good, "feature_infos", "tree_sizes=1 2 3\nfeature_infos"),
       "tree_sizes"},
      {"missing num_leaves", WithTree1(Replace(s2, "num_leaves=2\n", "")), "tree 1"},
      {"missing num_cat", WithTree1(Replace(s2, "num_cat=0\n", "")), "num_cat"},
      {"missing leaf_value", WithTree1(Replace(s2, "leaf_value=1 2\n", "")), "leaf_value"},
      {"missing split_feature", WithTree1(Replace(s2, "split_feature=1\n", "")), "split_feature"},
      {"missing threshold", WithTree1(Replace(s2, "threshold=0.5\n", "")), "threshold"},
      {"missing left_child", WithTree1(Replace(s2, "left_child=-1\n", "")), "left_child"},
      {"num_leaves zero", WithTree1(Replace(s2, "num_leaves=2", "num_leaves=0")), "num_leaves"},
      {"num_leaves negative", WithTree1(Replace(s2, "num_leaves=2", "num_leaves=-5")), "num_leaves"},
      {"num_leaves text", WithTree1(Replace(s2, "num_leaves=2", "num_leaves=two")), "num_leaves"},
      {"huge num_leaves", WithTree1(Replace(s2, "num_leaves=2", "num_leaves=1000000000")),
       "leaf_value has 2 values"},
      {"overflowing num_leaves",
       WithTree1(Replace(s2, "num_leaves=2", "num_leaves=99999999999999999999")), "num_leaves"},
      {"split_feature short", WithTree1(Replace(three, "split_feature=0 1", "split_feature=0")),
       "split_feature has 1 values, expected 2"},
      {"leaf_value long", WithTree1(Replace(s2, "leaf_value=1 2", "leaf_value=1 2 3")),
       "leaf_value"},
      {"leaf_count short", WithTree1(Replace(s2, "leaf_count=10 20", "leaf_count=10")),
       "leaf_count"},
      {"internal_count long", WithTree1(Replace(s2, "internal_count=30", "internal_count=30 1")),
       "internal_count"},
      {"decision_type short", WithTree1(Replace(three, "decision_type=8 8", "decision_type=8")),
       "decision_type"},
      {"non-numeric threshold", WithTree1(Replace(s2, "threshold=0.5", "threshold=0.5x")),
       "threshold value 0 '0.5x'"},
      {"non-numeric leaf", WithTree1(Replace(s2, "leaf_value=1 2", "leaf_value=1 abc")),
       "leaf_value value 1 'abc'"},
      {"comma separated", WithTree1(Replace(s2, "leaf_value=1 2", "leaf_value=1,2")),
       "leaf_value"},
      {"float child", WithTree1(Replace(s2, "left_child=-1", "left_child=-1.5")), "left_child"},
      {"nan threshold", WithTree1(Replace(s2, "threshold=0.5", "threshold=nan")), "NaN"},
      {"inf leaf value", WithTree1(Replace(s2, "leaf_value=1 2", "leaf_value=1 inf")),
       "not finite"},
      {"nan leaf value", WithTree1(Replace(s2, "leaf_value=1 2", "leaf_value=nan 2")),
       "not finite"},
      {"out of range number", WithTree1(Replace(s2, "leaf_value=1 2", "leaf_value=1 1e999")),
       "leaf_value"},
      {"negative leaf_count", WithTree1(Replace(s2, "leaf_count=10 20", "leaf_count=10 -20")),
       "leaf_count"},
      {"left child out of range", WithTree1(Replace(three, "left_child=1 -1", "left_child=5 -1")),
       "node 0"},
      {"leaf out of range", WithTree1(Replace(s2, "right_child=-2", "right_child=-3")), "leaf 2"},
      {"min int child", WithTree1(Replace(s2, "right_child=-2", "right_child=-2147483648")),
       "right child"},
      {"cycle to root", WithTree1(Replace(three, "right_child=-2 -3", "right_child=-2 0")),
       "tree 1"},
      {"self loop",
       WithTree1(Replace(Replace(three, "left_child=1 -1", "left_child=1 1"), "right_child=-2 -3",
                         "right_child=-2 -1")),
       "tree 1"},
      {"shared leaf", WithTree1(Replace(s2, "right_child=-2", "right_child=-1")), "tree 1"},
      {"unreachable node",
       WithTree1(Replace(three, "left_child=1 -1", "left_child=-3 -1")), "unreachable"},
      {"split feature out of range", WithTree1(Replace(s2, "split_feature=1", "split_feature=2")),
       "split feature 2"},
      {"negative split feature", WithTree1(Replace(s2, "split_feature=1", "split_feature=-1")),
       "split feature -1"},
      {"missing type 3", WithTree1(Replace(s2, "decision_type=8", "decision_type=12")),
       "decision_type 12"},
      {"decision type bits", WithTree1(Replace(s2, "decision_type=8", "decision_type=16")),
       "decision_type 16"},
      {"duplicate key", WithTree1(Replace(s2, "num_cat=0\n", "num_cat=0\nnum_cat=0\n")),
       "duplicate"},
      {"line without =", WithTree1(Replace(s2, "num_cat=0\n", "num_cat=0\nbogus\n")), "bogus"},
      {"cat index out of range", WithTree1(Replace(cat, "threshold=0", "threshold=1")),
       "bitset index"},
      {"cat index fractional", WithTree1(Replace(cat, "threshold=0", "threshold=0.5")),
       "bitset index"},
      {"cat without num_cat", WithTree1(Replace(cat, "num_cat=1", "num_cat=0")), "bitset index"},
      {"cat_boundaries missing", WithTree1(Replace(cat, "cat_boundaries=0 2\n", "")),
       "cat_boundaries"},
      {"cat_threshold missing", WithTree1(Replace(cat, "cat_threshold=10 2\n", "")),
       "cat_threshold"},
      {"cat_boundaries length", WithTree1(Replace(cat, "cat_boundaries=0 2", "cat_boundaries=0 1 2")),
       "cat_boundaries"},
      {"cat_boundaries past the words", WithTree1(Replace(cat, "cat_boundaries=0 2", "cat_boundaries=0 3")),
       "cat_boundaries"},
      {"cat_boundaries decreasing",
       WithTree1(Replace(Replace(cat, "num_cat=1", "num_cat=2"), "cat_boundaries=0 2",
                         "cat_boundaries=0 2 1")),
       "cat_boundaries"},
      {"cat_threshold words short", WithTree1(Replace(cat, "cat_threshold=10 2", "cat_threshold=10")),
       "cat_boundaries"},
      {"cat word too large", WithTree1(Replace(cat, "cat_threshold=10 2", "cat_threshold=10 4294967296")),
       "cat_threshold"},
      {"linear without leaf_const", WithTree1(Replace(linear, "leaf_const=1 2\n", "")),
       "leaf_const"},
      {"linear without num_features", WithTree1(Replace(linear, "num_features=1 1\n", "")),
       "num_features"},
      {"linear features count", WithTree1(Replace(linear, "leaf_features=0 1", "leaf_features=0")),
       "leaf_features"},
      {"linear coeff count", WithTree1(Replace(linear, "leaf_coeff=0.5 2", "leaf_coeff=0.5 2 3")),
       "leaf_coeff"},
      {"linear feature out of range", WithTree1(Replace(linear, "leaf_features=0 1", "leaf_features=0 2")),
       "leaf_features"},
      {"linear negative num_features", WithTree1(Replace(linear, "num_features=1 1", "num_features=-1 3")),
       "num_features"},
      {"linear coeff inf", WithTree1(Replace(linear, "leaf_coeff=0.5 2", "leaf_coeff=0.5 inf")),
       "leaf_coeff"},
      {"is_linear 2", WithTree1(Replace(linear, "is_linear=1", "is_linear=2")), "is_linear"},
  };
  const ptrdiff_t first_tree1 =
      std::find_if(bad.begin(), bad.end(), [](const Bad& b) { return b.what == "missing num_leaves"; }) -
      bad.begin();
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.what);
    absl::StatusOr<ForestPtr> r = LoadLightgbmText(b.text, "mem.txt");
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    const std::string msg(r.status().message());
    EXPECT_EQ(msg.rfind("mem.txt", 0), 0u) << msg;
    EXPECT_NE(msg.find(b.expect), std::string::npos) << msg;
    // The entries from "missing num_leaves" on break the second tree: the message names it.
    if (&b - bad.data() >= first_tree1) EXPECT_NE(msg.find("tree 1"), std::string::npos) << msg;
  }
}

// Every prefix of a small model and thousands of random mutations: never a crash, always OK or
// INVALID_ARGUMENT, and a forest that loads can be traversed.
void CheckSurvives(const std::string& text) {
  absl::StatusOr<ForestPtr> r = LoadLightgbmText(text, "fuzz");
  if (!r.ok()) {
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    return;
  }
  const Forest& f = **r;
  for (float fill : {0.0f, kNanF, -1.0f, 1e30f}) {
    std::vector<float> row(f.num_features, fill);
    for (int t = 0; t < static_cast<int>(f.trees.size()); ++t) {
      const int32_t node = GroveLeafNode(f, t, row.data());
      ASSERT_GE(node, 0);
      ASSERT_LT(static_cast<uint32_t>(node), f.trees[t].num_nodes);
      (void)GroveLeafValue(f, t, node, row.data());
    }
  }
}

TEST(LightgbmLoader, EveryPrefixOfASmallModel) {
  const std::string tree =
      "num_leaves=3\nnum_cat=1\nsplit_feature=0 1\nsplit_gain=1 1\nthreshold=0 0.25\n"
      "decision_type=1 10\nleft_child=1 -2\nright_child=-1 -3\nleaf_value=10 20 30\n"
      "leaf_count=5 6 7\ninternal_count=18 11\ncat_boundaries=0 1\ncat_threshold=34\n"
      "is_linear=1\nleaf_const=1 2 3\nnum_features=1 0 2\nleaf_features=0   0 1  \n"
      "leaf_coeff=0.5   1 -1  \nshrinkage=1\n";
  const std::string text = Model(Header(2, "binary sigmoid:1"), {tree, Stump(1, "1", 4)});
  ASSERT_NE(MustLoad(text), nullptr);
  const size_t complete = text.find("end of trees") + 12;
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    absl::StatusOr<ForestPtr> r = LoadLightgbmText(std::string_view(text).substr(0, cut), "cut");
    EXPECT_EQ(r.ok(), cut >= complete) << cut << ": " << r.status();
    if (!r.ok()) EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(LightgbmLoader, RandomMutationsNeverCrash) {
  std::vector<std::string> seeds = {
      Model(Header(2, "multiclass num_class:2", 2),
            {CatStump("10 2", 9), Stump(1, "0.5", 2), Stump(0, "-1", 6), CatStump("1", 1)}),
  };
  for (const fs::path& dir : LightgbmCaseDirs()) {
    const std::string text = ReadFile(dir / "model.txt");
    // Keep the runtime small: the header and first trees of every corpus model.
    const size_t at = text.find("Tree=3");
    seeds.push_back(at == std::string::npos ? text : text.substr(0, at) + "end of trees\n");
  }
  std::mt19937_64 rng(12345);
  const std::string alphabet = "0123456789-+.eE =\n\r\tTree=naifx,:[]";
  for (const std::string& seed : seeds) {
    for (int iter = 0; iter < 1500; ++iter) {
      std::string s = seed;
      const int edits = 1 + static_cast<int>(rng() % 6);
      for (int e = 0; e < edits && !s.empty(); ++e) {
        const size_t pos = rng() % s.size();
        switch (rng() % 5) {
          case 0: s[pos] = alphabet[rng() % alphabet.size()]; break;
          case 1: s[pos] = static_cast<char>(rng() & 0xff); break;
          case 2: s.erase(pos, 1 + rng() % 16); break;
          case 3: s.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
          case 4: {  // duplicate a slice (repeats keys, lines, tokens)
            const size_t len = std::min<size_t>(1 + rng() % 64, s.size() - pos);
            s.insert(rng() % s.size(), s.substr(pos, len));
            break;
          }
        }
      }
      CheckSurvives(s);
      if (HasFatalFailure()) return;
    }
  }
  for (int iter = 0; iter < 2000; ++iter) {
    std::string s(rng() % 300, '\0');
    for (char& c : s) c = iter % 2 ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng());
    CheckSurvives(s);
    CheckSurvives(Header(1) + "Tree=0\n" + s + "\nend of trees\n");
    if (HasFatalFailure()) return;
  }
}

// ---------------------------------------------------------------------------------------------
// The float threshold normalisation: `(double)x <= t` == `x < LightgbmNumericThreshold(t)`.

TEST(LightgbmThreshold, EquivalentToDoubleComparisonForEveryFloat) {
  std::mt19937_64 rng(7);
  auto random_float = [&] {
    float f;
    uint32_t bits = static_cast<uint32_t>(rng());
    std::memcpy(&f, &bits, sizeof f);
    return f;
  };
  auto random_double = [&] {
    double d;
    uint64_t bits = rng();
    std::memcpy(&d, &bits, sizeof d);
    return d;
  };
  std::vector<double> ts = {0.0, -0.0, 1e-45, -1e-45, 1.4e-45, 1e-46, -1e-46, 1e-35,
                            1.0000000180025095e-35, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX,
                            FLT_MAX * (1 + 1e-12), -FLT_MAX * (1 + 1e-12),
                            static_cast<double>(FLT_MAX) + std::ldexp(1.0, 103),
                            std::nextafter(static_cast<double>(FLT_MAX), 0.0), 1e300, -1e300,
                            DBL_MAX, -DBL_MAX, -std::numeric_limits<double>::infinity(), 0.1,
                            0.5, 16777216.0, 16777217.0, -16777217.0, DBL_MIN, -DBL_MIN};
  for (int i = 0; i < 200000; ++i) {
    const double f = static_cast<double>(random_float());
    switch (i % 5) {
      case 0: ts.push_back(random_double()); break;
      case 1: ts.push_back(f); break;
      case 2: ts.push_back(std::nextafter(f, 1e308)); break;
      case 3: ts.push_back(std::nextafter(f, -1e308)); break;
      case 4: {  // midpoint between adjacent floats, and random 4-decimal values
        const float g = random_float();
        ts.push_back(i % 10 == 4 ? (static_cast<double>(g) + std::nextafter(g, kInfF)) / 2
                                 : static_cast<double>(static_cast<int64_t>(rng() % 200000) - 100000) / 1e4);
        break;
      }
    }
  }
  int64_t checked = 0;
  for (double t : ts) {
    if (std::isnan(t) || t == std::numeric_limits<double>::infinity()) continue;
    const float thr = LightgbmNumericThreshold(t);
    ASSERT_FALSE(std::isnan(thr)) << t;
    // Floats around t, plus random and special ones.
    float around = t > FLT_MAX ? FLT_MAX : t < -FLT_MAX ? -FLT_MAX : static_cast<float>(t);
    std::vector<float> xs = {around, std::nextafter(around, kInfF), std::nextafter(around, -kInfF),
                             std::nextafter(std::nextafter(around, kInfF), kInfF),
                             std::nextafter(std::nextafter(around, -kInfF), -kInfF),
                             thr, std::nextafter(thr, -kInfF), 0.0f, -0.0f, kInfF, -kInfF,
                             FLT_MAX, -FLT_MAX, 1e-45f, -1e-45f, random_float(), random_float()};
    for (float x : xs) {
      if (std::isnan(x)) continue;
      ASSERT_EQ(static_cast<double>(x) <= t, x < thr)
          << "t=" << t << " x=" << x << " threshold=" << thr;
      ++checked;
    }
  }
  EXPECT_GT(checked, 3000000);
  // t = +inf has no exact float form: every finite x goes left; x = +inf goes right (documented).
  const float thr = LightgbmNumericThreshold(std::numeric_limits<double>::infinity());
  EXPECT_TRUE(FLT_MAX < thr);
  EXPECT_TRUE(-kInfF < thr);
  EXPECT_TRUE(std::isnan(LightgbmNumericThreshold(std::nan(""))));
}

}  // namespace
}  // namespace grove
