// The path layout's shared GPU copy (core/explain/path_layout_gpu.h): one copy per layout object and
// GPU whoever asks (the SHAP and interventional engines of one model), its contents, its lifetime,
// the accounting of engines that own their layouts, and that engines on a shared copy explain
// exactly as engines on copies of their own. Label gpu: every test skips cleanly when no CUDA device
// is visible.
#include <cuda_runtime.h>

#include <cstring>
#include <memory>
#include <vector>

#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/explain_engine.h"
#include "core/explain/interventional/interventional_gpu.h"
#include "core/explain/interventional/interventional_paths.h"
#include "core/explain/path_layout_gpu.h"
#include "core/explain/paths.h"
#include "core/explain/treeshap/treeshap_gpu.h"
#include "core/gpu/device_set.h"
#include "core/model/feature_groups.h"
#include "gtest/gtest.h"
#include "tests/testing/gpu_skip.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

ForestPtr TestForest(bool grouped_categories = false) {
  RandomForestOptions o;
  o.num_trees = 24;
  o.max_depth = 6;
  o.num_features = 12;
  o.num_outputs = 2;
  o.categorical_fraction = grouped_categories ? 0.3 : 0.0;
  o.seed = 7;
  return MakeRandomForest(o);
}

PathLayoutPtr Layout(const Forest& f) {
  absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(f);
  EXPECT_TRUE(l.ok()) << l.status();
  return l.ok() ? *l : nullptr;
}

template <typename T>
std::vector<T> Download(const T* d, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

TEST(ResidentPathLayoutTest, TheCopyHoldsTheLayoutsArrays) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = TestForest(true);
  PathLayoutPtr l = Layout(*f);
  ASSERT_NE(l, nullptr);
  absl::StatusOr<ResidentPathLayoutPtr> r = ResidentPathLayout::On(l, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  const ResidentPathLayout& copy = **r;
  EXPECT_EQ(copy.device(), 0);
  EXPECT_EQ(&copy.layout(), l.get());
  const std::vector<PathElement> elements = Download(copy.arrays().elements, l->elements.size());
  ASSERT_EQ(std::memcmp(elements.data(), l->elements.data(), elements.size() * sizeof(PathElement)),
            0);
  const std::vector<PathInfo> paths = Download(copy.arrays().paths, l->paths.size());
  ASSERT_EQ(std::memcmp(paths.data(), l->paths.data(), paths.size() * sizeof(PathInfo)), 0);
  EXPECT_EQ(Download(copy.arrays().bin_offsets, l->bin_offsets.size()), l->bin_offsets);
  EXPECT_EQ(Download(copy.arrays().values, l->values.size()), l->values);
  EXPECT_EQ(Download(copy.arrays().category_bits, l->category_bits.size()), l->category_bits);
  EXPECT_EQ(Download(copy.bias(), l->bias.size()), l->bias);
  for (bool interactions : {false, true}) {
    const std::vector<double> want = FixedPointScales(*l, interactions);
    EXPECT_EQ(Download(copy.scale(interactions), want.size()), want) << interactions;
  }
  EXPECT_EQ(copy.player_of(), nullptr);  // a layout of the features
  EXPECT_GT(copy.bytes(), 0);
}

TEST(ResidentPathLayoutTest, OneCopyPerLayoutObjectAndDeviceWhileHeld) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = TestForest();
  PathLayoutPtr l = Layout(*f);
  PathLayoutPtr same_contents = Layout(*f);
  ASSERT_NE(l, nullptr);
  ASSERT_NE(same_contents, nullptr);
  EXPECT_EQ(ResidentPathLayout::ResidentBytes(*l), 0);
  {
    absl::StatusOr<ResidentPathLayoutPtr> a = ResidentPathLayout::On(l, 0);
    absl::StatusOr<ResidentPathLayoutPtr> b = ResidentPathLayout::On(l, 0);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->get(), b->get());
    EXPECT_EQ(ResidentPathLayout::ResidentBytes(*l), (*a)->bytes());
    // Another layout object is another copy, even of the same contents.
    absl::StatusOr<ResidentPathLayoutPtr> c = ResidentPathLayout::On(same_contents, 0);
    ASSERT_TRUE(c.ok());
    EXPECT_NE(a->get(), c->get());
    EXPECT_EQ(ResidentPathLayout::ResidentBytes(*same_contents), (*c)->bytes());
    EXPECT_EQ(ResidentPathLayout::ResidentBytes(*l), (*a)->bytes());
  }
  // Freed with the last holder; the next caller uploads again.
  EXPECT_EQ(ResidentPathLayout::ResidentBytes(*l), 0);
  EXPECT_EQ(ResidentPathLayout::ResidentBytes(*same_contents), 0);
  absl::StatusOr<ResidentPathLayoutPtr> again = ResidentPathLayout::On(l, 0);
  ASSERT_TRUE(again.ok());
  EXPECT_GT(ResidentPathLayout::ResidentBytes(*l), 0);
}

// A grouped layout's copy carries its player map.
TEST(ResidentPathLayoutTest, AGroupedLayoutsCopyHoldsItsPlayers) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = TestForest(true);
  std::vector<GroupSpec> spec = {{"low", {FeatureRef{0, ""}, FeatureRef{2, ""}}},
                                 {"high", {FeatureRef{11, ""}, FeatureRef{10, ""}}}};
  absl::StatusOr<FeatureGroupsPtr> groups = ResolveFeatureGroups(spec, f->num_features, {});
  ASSERT_TRUE(groups.ok()) << groups.status();
  PathLayoutOptions o;
  o.groups = groups->get();
  absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(*f, o);
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_FALSE((*l)->player_of.empty());
  absl::StatusOr<ResidentPathLayoutPtr> r = ResidentPathLayout::On(*l, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_NE((*r)->player_of(), nullptr);
  EXPECT_EQ(Download((*r)->player_of(), (*l)->player_of.size()), (*l)->player_of);
}

// One copy per GPU of the same layout, each on its own device.
TEST(ResidentPathLayoutTest, EachGpuHasItsOwnCopy) {
  SKIP_WITHOUT_GPU();
  if (gpu::VisibleGpuCount() < 2) GTEST_SKIP() << "one GPU visible";
  PathLayoutPtr l = Layout(*TestForest());
  TreeShapGpuOptions options;
  options.max_devices = 2;
  absl::StatusOr<std::unique_ptr<TreeShapGpu>> shap = TreeShapGpu::Create(l, options);
  ASSERT_TRUE(shap.ok()) << shap.status();
  ASSERT_EQ((*shap)->num_devices(), 2);
  absl::StatusOr<ResidentPathLayoutPtr> first = ResidentPathLayout::On(l, 0);
  absl::StatusOr<ResidentPathLayoutPtr> second = ResidentPathLayout::On(l, 1);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ((*second)->device(), 1);
  cudaPointerAttributes attributes;
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, (*second)->arrays().elements), cudaSuccess);
  EXPECT_EQ(attributes.device, 1);
  EXPECT_EQ(ResidentPathLayout::ResidentBytes(*l), (*first)->bytes() + (*second)->bytes());
}

TEST(ResidentPathLayoutTest, RefusesWhatItCannotCopy) {
  SKIP_WITHOUT_GPU();
  EXPECT_TRUE(absl::IsInvalidArgument(ResidentPathLayout::On(nullptr, 0).status()));
  PathLayoutPtr l = Layout(*TestForest());
  EXPECT_TRUE(absl::IsUnavailable(ResidentPathLayout::On(l, gpu::VisibleGpuCount()).status()));
  EXPECT_TRUE(absl::IsUnavailable(ResidentPathLayout::On(l, -1).status()));
  EXPECT_EQ(ResidentPathLayout::ResidentBytes(*l), 0);
}

// The SHAP and interventional engines of one layout hold one copy between them, outside their
// own DeviceBytes, and explain exactly as engines on a layout of their own.
TEST(ResidentPathLayoutTest, TheSHAPAndInterventionalEnginesShareOneCopy) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = TestForest(true);
  PathLayoutPtr shared = Layout(*f);
  PathLayoutPtr own = Layout(*f);
  const int64_t n = 53;
  const std::vector<float> rows = MakeRandomRows(*f, n, 11);
  const std::vector<float> background = MakeRandomRows(*f, 40, 12);
  const RowsView bg = MakeRowsView(background.data(), 40, f->num_features);
  TreeShapGpuOptions options;
  options.max_devices = 1;

  absl::StatusOr<std::unique_ptr<TreeShapGpu>> shap = TreeShapGpu::Create(shared, options);
  ASSERT_TRUE(shap.ok()) << shap.status();
  const int64_t one_copy = ResidentPathLayout::ResidentBytes(*shared);
  EXPECT_GT(one_copy, 0);
  absl::StatusOr<InterventionalLayoutPtr> il =
      BuildInterventionalLayout(*f, *shared, bg, nullptr);
  ASSERT_TRUE(il.ok()) << il.status();
  absl::StatusOr<std::unique_ptr<InterventionalGpu>> inter =
      InterventionalGpu::Create(f, shared, *il);
  ASSERT_TRUE(inter.ok()) << inter.status();
  EXPECT_EQ(ResidentPathLayout::ResidentBytes(*shared), one_copy);
  absl::StatusOr<ResidentPathLayoutPtr> held = ResidentPathLayout::On(shared, 0);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ((*held)->bytes(), one_copy);

  // Engines of a layout of their own: the same own bytes (the copy is in neither's), the same
  // values bit for bit.
  absl::StatusOr<std::unique_ptr<TreeShapGpu>> shap_own = TreeShapGpu::Create(own, options);
  ASSERT_TRUE(shap_own.ok()) << shap_own.status();
  absl::StatusOr<InterventionalLayoutPtr> il_own = BuildInterventionalLayout(*f, *own, bg, nullptr);
  ASSERT_TRUE(il_own.ok()) << il_own.status();
  absl::StatusOr<std::unique_ptr<InterventionalGpu>> inter_own =
      InterventionalGpu::Create(f, own, *il_own);
  ASSERT_TRUE(inter_own.ok()) << inter_own.status();
  EXPECT_EQ(ResidentPathLayout::ResidentBytes(*own), one_copy);
  EXPECT_EQ((*shap)->DeviceBytes(), (*shap_own)->DeviceBytes());
  EXPECT_EQ((*inter)->DeviceBytes(), (*inter_own)->DeviceBytes());
  const RowsView view = MakeRowsView(rows.data(), n, f->num_features);
  for (bool interactions : {false, true}) {
    const int64_t width = ExplainWidth(*f, interactions);
    std::vector<float> a(n * width), b(n * width);
    ASSERT_TRUE((*shap)->Explain(view, interactions, MakeMatrixView(a.data(), n, width), nullptr).ok());
    ASSERT_TRUE(
        (*shap_own)->Explain(view, interactions, MakeMatrixView(b.data(), n, width), nullptr).ok());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << interactions;
    InterventionalOptions o;
    o.interactions = interactions;
    ASSERT_TRUE((*inter)->Explain(view, o, MakeMatrixView(a.data(), n, width)).ok());
    ASSERT_TRUE((*inter_own)->Explain(view, o, MakeMatrixView(b.data(), n, width)).ok());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << interactions;
  }
  // Each engine holds the copy: it goes with the last of them.
  held->reset();
  EXPECT_EQ(ResidentPathLayout::ResidentBytes(*shared), one_copy);
  shap->reset();
  EXPECT_EQ(ResidentPathLayout::ResidentBytes(*shared), one_copy);  // the interventional engine's
  inter->reset();
  EXPECT_EQ(ResidentPathLayout::ResidentBytes(*shared), 0);
}

// An engine that builds its own layout counts that layout's copy in its DeviceBytes.
TEST(ResidentPathLayoutTest, AnEngineThatBuildsItsLayoutCountsItsCopy) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = TestForest();
  ThreadPool pool(2);
  ExplainEngineOptions o;
  o.strategy = "treeshap_gpu";
  o.measure_costs = false;  // no timing runs: no workspaces, so the bytes below are exact
  absl::StatusOr<std::unique_ptr<ExplainEngine>> built = ExplainEngine::Create(f, o, &pool);
  ASSERT_TRUE(built.ok()) << built.status();
  const int64_t copy = ResidentPathLayout::ResidentBytes(*(*built)->layout());
  EXPECT_GT(copy, 0);
  EXPECT_GT((*built)->DeviceBytes(), copy);
  // Given the caller's layout, the engine leaves the copy to the caller.
  PathLayoutPtr l = Layout(*f);
  absl::StatusOr<std::unique_ptr<ExplainEngine>> given = ExplainEngine::Create(f, o, &pool, l);
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ((*given)->DeviceBytes() + copy, (*built)->DeviceBytes());
}

}  // namespace
}  // namespace grove
