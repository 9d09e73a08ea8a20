// BuildForest: validation of hand-assembled forests (what every loader relies on) and derived fields.
#include "core/model/forest.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

using ::testing::HasSubstr;
using testing::LeafNode;
using testing::SplitNode;

// Two trees: a depth-2 tree (5 nodes) and a stump; 2 features, 1 output.
Forest Good() {
  Forest f;
  f.source = "hand.json";
  f.num_features = 2;
  f.num_outputs = 1;
  f.base_margin = {0.5};
  f.nodes = {SplitNode(0, 0.5f, 1, 2, 10), SplitNode(1, 1.5f, 3, 4, 6), LeafNode(0, 4, 2),
             LeafNode(1, 2, 3), LeafNode(2, 4, 4),
             SplitNode(1, -1.0f, 1, 2, 10), LeafNode(3, 5, 1), LeafNode(4, 5, 2)};
  f.leaf_values = {1, 2, 3, 4, 5};
  Tree t0;
  t0.node_begin = 0;
  t0.num_nodes = 5;
  Tree t1;
  t1.node_begin = 5;
  t1.num_nodes = 3;
  t1.iteration = 1;
  t1.weight = 0.5;
  f.trees = {t0, t1};
  return f;
}

TEST(BuildForest, DerivedFields) {
  absl::StatusOr<ForestPtr> f = BuildForest(Good());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->trees[0].depth, 2);
  EXPECT_EQ((*f)->trees[0].num_leaves, 3);
  EXPECT_EQ((*f)->trees[1].depth, 1);
  EXPECT_EQ((*f)->max_depth, 2);
  EXPECT_EQ((*f)->num_leaves, 5);
  EXPECT_EQ((*f)->num_iterations, 2);
  EXPECT_FALSE((*f)->has_categorical);
  EXPECT_FALSE((*f)->has_vector_leaves);
  EXPECT_GT((*f)->MemoryBytes(), 0);
}

struct BadCase {
  std::string name;
  std::function<void(Forest&)> mutate;
  std::string message;  // substring of the error
};

TEST(BuildForest, EveryMalformedForestIsInvalidArgumentNamingTreeAndNode) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<BadCase> cases = {
      {"no features", [](Forest& f) { f.num_features = 0; }, "no features"},
      {"no outputs", [](Forest& f) { f.num_outputs = 0; }, "no outputs"},
      {"no trees", [](Forest& f) { f.trees.clear(); }, "no trees"},
      {"base margin size", [](Forest& f) { f.base_margin = {0, 0}; }, "base margin"},
      {"base margin NaN", [nan](Forest& f) { f.base_margin = {nan}; }, "not finite"},
      {"child out of range", [](Forest& f) { f.nodes[1].right = 9; }, "tree 0 node 1: child 9"},
      {"negative child", [](Forest& f) { f.nodes[0].left = -1; }, "tree 0 node 0: child -1"},
      {"child is the root", [](Forest& f) { f.nodes[1].left = 0; }, "tree 0 node 1"},
      {"cycle", [](Forest& f) { f.nodes[1].right = 1; }, "reached twice"},
      {"shared child", [](Forest& f) { f.nodes[1].left = 2; }, "reached twice"},
      {"unreachable node",
       [](Forest& f) {
         f.nodes[1] = LeafNode(0, 6, 1);  // nodes 3 and 4 are now orphans
       },
       "unreachable"},
      {"node range", [](Forest& f) { f.trees[1].num_nodes = 4; }, "tree 1: node range"},
      {"empty tree", [](Forest& f) { f.trees[1].num_nodes = 0; }, "tree 1: tree has no nodes"},
      {"feature out of range", [](Forest& f) { f.nodes[5].feature = 2; }, "tree 1 node 0: split feature 2"},
      {"negative feature", [](Forest& f) { f.nodes[0].feature = -3; }, "split feature -3"},
      {"NaN threshold", [nan](Forest& f) { f.nodes[0].threshold = nan; }, "threshold is NaN"},
      {"leaf value NaN", [nan](Forest& f) { f.leaf_values[2] = nan; }, "tree 0 node 4: leaf value"},
      {"leaf value inf", [inf](Forest& f) { f.leaf_values[4] = inf; }, "tree 1 node 2: leaf value"},
      {"leaf payload", [](Forest& f) { f.nodes[7].payload = 5; }, "leaf value index"},
      {"negative cover", [](Forest& f) { f.nodes[2].cover = -1; }, "cover"},
      {"infinite cover", [inf](Forest& f) { f.nodes[0].cover = inf; }, "cover"},
      {"weight", [inf](Forest& f) { f.trees[1].weight = inf; }, "tree 1: tree weight"},
      {"group", [](Forest& f) { f.trees[0].group = 1; }, "output group 1"},
      {"leaf width", [](Forest& f) { f.trees[0].leaf_width = 3; }, "leaf width 3"},
      {"negative iteration", [](Forest& f) { f.trees[0].iteration = -1; }, "negative iteration"},
      {"category bitset",
       [](Forest& f) {
         f.nodes[0].flags |= kNodeCategorical;
         f.nodes[0].payload = 0;
         f.nodes[0].aux = 2;  // no bitset words at all
       },
       "category bitset"},
      {"linear leaf index", [](Forest& f) { f.nodes[2].aux = 1; }, "linear leaf index"},
      {"feature names", [](Forest& f) { f.feature_names = {"a"}; }, "feature name count"},
      {"softmax with one output",
       [](Forest& f) { f.objective.link = Link::kSoftmax; }, "softmax"},
      {"double thresholds unsorted",
       [](Forest& f) {
         f.double_thresholds = {2.0, 1.0};
         f.double_threshold_offsets = {0, 2, 2};
       },
       "double thresholds"},
      {"double threshold offsets",
       [](Forest& f) {
         f.double_thresholds = {1.0};
         f.double_threshold_offsets = {0, 1};
       },
       "double threshold offsets"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    Forest f = Good();
    c.mutate(f);
    absl::StatusOr<ForestPtr> built = BuildForest(std::move(f));
    ASSERT_FALSE(built.ok());
    EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(built.status().message()), HasSubstr("hand.json"));
    EXPECT_THAT(std::string(built.status().message()), HasSubstr(c.message));
  }
}

TEST(BuildForest, DepthIsBoundedWithoutRecursion) {
  // A chain of kMaxTreeDepth + 1 splits: refused (not truncated), and validated iteratively.
  Forest f;
  f.source = "deep";
  f.num_features = 1;
  f.base_margin = {0};
  const int splits = kMaxTreeDepth + 1;
  // Node 2i is a split, node 2i+1 is a leaf, node 2i+2 the next split (the last one a leaf).
  std::vector<Node> nodes(2 * splits + 1);
  for (int i = 0; i < splits; ++i) {
    nodes[2 * i] = SplitNode(0, 0.0f, 2 * i + 1, 2 * i + 2, 1);
    nodes[2 * i + 1] = LeafNode(0, 1, 2 * i + 1);
  }
  nodes[2 * splits] = LeafNode(0, 1, 2 * splits);
  f.nodes = nodes;
  f.leaf_values = {1};
  Tree t;
  t.num_nodes = static_cast<uint32_t>(nodes.size());
  f.trees = {t};
  absl::StatusOr<ForestPtr> built = BuildForest(f);
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(std::string(built.status().message()), HasSubstr("deeper than"));
  // One level less is fine.
  Forest ok = f;
  ok.nodes.resize(nodes.size() - 2);
  ok.nodes[2 * (splits - 1)] = LeafNode(0, 1, 0);
  ok.trees[0].num_nodes = static_cast<uint32_t>(ok.nodes.size());
  absl::StatusOr<ForestPtr> built_ok = BuildForest(ok);
  ASSERT_TRUE(built_ok.ok()) << built_ok.status();
  EXPECT_EQ((*built_ok)->max_depth, kMaxTreeDepth);
}

}  // namespace
}  // namespace grove
