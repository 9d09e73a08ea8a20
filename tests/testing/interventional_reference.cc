#include "tests/testing/interventional_reference.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/explain/explain.h"
#include "core/model/loader.h"
#include "gtest/gtest.h"

namespace grove::testing {

std::vector<RandomForestOptions> InterventionalForestOptions() {
  std::vector<RandomForestOptions> all;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    RandomForestOptions o;
    o.seed = seed;
    o.num_trees = 8 + static_cast<int>(seed);
    o.max_depth = 4 + static_cast<int>(seed % 5);
    o.num_features = 6 + static_cast<int>(seed % 4) * 5;
    o.categorical_fraction = seed % 2 ? 0.3 : 0.0;
    o.lightgbm_rules = seed % 3 == 0;
    o.num_outputs = seed % 4 == 1 ? 3 : 1;
    o.vector_leaves = seed == 6;
    if (o.vector_leaves) o.num_outputs = 2;
    all.push_back(o);
  }
  RandomForestOptions deep;  // paths of up to 31 distinct features: the widest a warp takes
  deep.seed = 77;
  deep.num_trees = 4;
  deep.max_depth = 31;
  deep.num_features = 64;
  deep.leaf_probability = 0.45;  // a forced deep path, bushy elsewhere only a little
  all.push_back(deep);
  return all;
}

std::vector<Link> ProbabilityLinks(const RandomForestOptions& options, OutputSpace space) {
  if (space == OutputSpace::kProbability && options.num_outputs > 1) return {Link::kSoftmax};
  return {Link::kSigmoid, Link::kExp};
}

std::vector<Link> AllLinks(const RandomForestOptions& options) {
  std::vector<Link> links = {Link::kIdentity};
  for (OutputSpace space : {OutputSpace::kProbabilityLinearized, OutputSpace::kProbability}) {
    for (Link l : ProbabilityLinks(options, space)) {
      if (std::find(links.begin(), links.end(), l) == links.end()) links.push_back(l);
    }
  }
  return links;
}

std::vector<SpaceCase> PathFormSpaceCases(Link link) {
  if (link == Link::kIdentity) {
    return {{OutputSpace::kMargin, false}, {OutputSpace::kMargin, true},
            {OutputSpace::kProbability, false}, {OutputSpace::kProbability, true}};
  }
  std::vector<SpaceCase> cases = {{OutputSpace::kProbability, false},
                                   {OutputSpace::kProbability, true}};
  if (link != Link::kSoftmax) cases.push_back({OutputSpace::kProbabilityLinearized, false});
  return cases;
}

std::unique_ptr<InterventionalEngine> MakeInterventionalEngine(ForestPtr forest,
                                                               const std::vector<float>& background,
                                                               const std::string& strategy,
                                                               bool use_gpu, ThreadPool* pool) {
  InterventionalEngineOptions o;
  o.use_gpu = use_gpu;
  o.strategy = strategy;
  const int F = forest->num_features;
  absl::StatusOr<std::unique_ptr<InterventionalEngine>> e = InterventionalEngine::Create(
      forest, nullptr,
      MakeRowsView(background.data(), static_cast<int64_t>(background.size()) / F, F), o, pool);
  EXPECT_TRUE(e.ok()) << strategy << ": " << e.status();
  return e.ok() ? *std::move(e) : nullptr;
}

absl::StatusOr<std::vector<float>> ExplainWithEngine(const InterventionalEngine& engine,
                                                     const Forest& forest,
                                                     const std::vector<float>& rows,
                                                     const InterventionalOptions& options,
                                                     RunInfo* info) {
  const int64_t n = static_cast<int64_t>(rows.size()) / forest.num_features;
  const int64_t width = ExplainWidth(forest, options.interactions, options.groups);
  std::vector<float> out(n * width, std::nanf(""));
  absl::Status s = engine.Explain(MakeRowsView(rows.data(), n, forest.num_features), options,
                                  MakeMatrixView(out.data(), n, width), info);
  if (!s.ok()) return s;
  return out;
}

void ExpectSingletonsAreTheFeatures(const InterventionalEngine& engine, const Forest& forest,
                                    const std::vector<float>& rows, Link link,
                                    const std::string& strategy) {
  absl::StatusOr<FeatureGroupsPtr> singletons = ResolveFeatureGroups({}, forest.num_features, {});
  ASSERT_TRUE(singletons.ok()) << singletons.status();
  for (const SpaceCase& sc : PathFormSpaceCases(link)) {
    InterventionalOptions plain;
    plain.output_space = sc.space;
    plain.interactions = sc.interactions;
    InterventionalOptions grouped = plain;
    grouped.groups = singletons->get();
    RunInfo info;
    const absl::StatusOr<std::vector<float>> want =
        ExplainWithEngine(engine, forest, rows, plain, nullptr);
    const absl::StatusOr<std::vector<float>> got =
        ExplainWithEngine(engine, forest, rows, grouped, &info);
    const absl::StatusOr<std::vector<float>> again =
        ExplainWithEngine(engine, forest, rows, grouped, nullptr);
    const absl::StatusOr<std::vector<float>> after =
        ExplainWithEngine(engine, forest, rows, plain, nullptr);
    ASSERT_TRUE(want.ok() && got.ok() && again.ok() && after.ok()) << Describe(plain);
    EXPECT_EQ(info.strategy, strategy) << Describe(plain);
    EXPECT_EQ(*got, *want) << Describe(plain);
    EXPECT_EQ(*again, *got) << Describe(plain);
    EXPECT_EQ(*after, *want) << Describe(plain);
  }
}

std::vector<InterventionalCorpusCase> InterventionalCorpus(int64_t background_rows,
                                                           int64_t explained_rows,
                                                           int max_features) {
  std::vector<InterventionalCorpusCase> cases;
  for (const std::string& dir : CorpusCaseDirs()) {
    absl::StatusOr<CorpusCase> c = LoadCorpusCase(dir);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok() || c->unsupported.count("contribs") ||
        c->rows < background_rows + explained_rows ||
        (max_features > 0 && c->num_features > max_features)) {
      continue;
    }
    absl::StatusOr<ForestPtr> f = LoadModelFile(c->model_path);
    EXPECT_TRUE(f.ok()) << f.status();
    if (!f.ok()) continue;
    const std::vector<float> all = GroveRows(*c, **f);
    const auto split = all.begin() + background_rows * c->num_features;
    InterventionalCorpusCase k{std::move(*c), *f, std::vector<float>(all.begin(), split), {}};
    k.rows.assign(split, split + explained_rows * k.c.num_features);
    cases.push_back(std::move(k));
  }
  return cases;
}

LinearizedLayoutPtr BuildLinearized(const Forest& forest, const InterventionalLayouts& layouts,
                                    const std::vector<float>& background) {
  const int F = forest.num_features;
  absl::StatusOr<LinearizedLayoutPtr> ll = BuildLinearizedLayout(
      *layouts.layout, *layouts.il,
      MakeRowsView(background.data(), static_cast<int64_t>(background.size()) / F, F), nullptr);
  EXPECT_TRUE(ll.ok()) << ll.status();
  return ll.ok() ? *ll : nullptr;
}

std::vector<InterventionalOptions> InteractionCases() {
  std::vector<InterventionalOptions> cases;
  for (Attribution attribution : {Attribution::kShapley, Attribution::kBanzhaf}) {
    for (int begin : {0, 1}) {
      InterventionalOptions o;
      o.interactions = true;
      o.attribution = attribution;
      o.iteration_begin = begin;
      o.iteration_end = begin == 0 ? 0 : 3;
      cases.push_back(o);
    }
  }
  return cases;
}

std::string Describe(const InterventionalOptions& o) {
  return absl::StrCat(AttributionName(o.attribution), o.interactions ? " interactions" : "", " ",
                      OutputSpaceName(o.output_space), " rounds [", o.iteration_begin, ", ",
                      o.iteration_end, ")");
}

InterventionalLayouts BuildInterventionalLayouts(const Forest& forest,
                                                 const std::vector<float>& background,
                                                 ThreadPool* pool) {
  absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(forest);
  EXPECT_TRUE(l.ok()) << l.status();
  if (!l.ok()) return {};
  const int F = forest.num_features;
  absl::StatusOr<InterventionalLayoutPtr> il = BuildInterventionalLayout(
      forest, **l, MakeRowsView(background.data(), static_cast<int64_t>(background.size()) / F, F),
      pool);
  EXPECT_TRUE(il.ok()) << il.status();
  return {*l, il.ok() ? *il : nullptr};
}

absl::StatusOr<std::vector<float>> InterventionalReferenceOrStatus(
    const Forest& forest, const std::vector<float>& rows, const std::vector<float>& background,
    const InterventionalOptions& options) {
  const int F = forest.num_features;
  const int64_t n = static_cast<int64_t>(rows.size()) / F;
  const int64_t width = ExplainWidth(forest, options.interactions, options.groups);
  std::vector<float> out(n * width);
  absl::Status s = ExplainInterventionalCpu(
      forest, MakeRowsView(background.data(), static_cast<int64_t>(background.size()) / F, F),
      MakeRowsView(rows.data(), n, F), options, MakeMatrixView(out.data(), n, width), nullptr);
  if (!s.ok()) return s;
  return out;
}

std::vector<float> InterventionalReference(const Forest& forest, const std::vector<float>& rows,
                                           const std::vector<float>& background,
                                           const InterventionalOptions& options) {
  absl::StatusOr<std::vector<float>> out =
      InterventionalReferenceOrStatus(forest, rows, background, options);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *std::move(out) : std::vector<float>();
}

bool ExpectLikeTheReference(const absl::StatusOr<std::vector<float>>& got, const Forest& forest,
                            const std::vector<float>& rows, const std::vector<float>& background,
                            const InterventionalOptions& options, double tol,
                            const std::string& what) {
  const absl::StatusOr<std::vector<float>> want =
      InterventionalReferenceOrStatus(forest, rows, background, options);
  EXPECT_EQ(got.status(), want.status()) << what;
  if (!got.ok() || !want.ok()) return false;
  ExpectNearReference(*got, *want, tol, what);
  return true;
}

void ExpectNearReference(const std::vector<float>& got, const std::vector<float>& want, double tol,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < want.size() && failures < 10; ++i) {
    const double w = want[i];
    if (!(std::abs(got[i] - w) <= tol * std::max(1.0, std::abs(w)))) {
      ADD_FAILURE() << what << ": entry " << i << " got " << got[i] << " want " << w;
      ++failures;
    }
  }
}

}  // namespace grove::testing
