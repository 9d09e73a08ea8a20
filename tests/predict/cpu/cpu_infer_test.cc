// The CPU engine (core/predict/cpu/) against the CPU reference (PredictCpu): the same leaves and
// the same sums, bit for bit, for every output kind, on seeded forests of every rule set (NaNs,
// categorical splits, LightGBM missing types, vector leaves, tree weights, deep unbalanced trees),
// every block shape (1 row to several blocks, strided rows), iteration ranges, trees out of round
// order, and the library corpus; PredictRow (its own walk across trees) likewise.
#include "core/predict/cpu/cpu_infer.h"

#include "core/predict/cpu/cpu_walk.h"
#include "core/predict/cpu/cpu_walk_avx2.h"
#include "core/predict/cpu/cpu_walk_simd.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/common/thread_pool.h"
#include "core/model/loader.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"
#include "tests/testing/predict_reference.h"
#include "tests/testing/random_forest.h"

namespace grove::cpu {
namespace {

std::vector<float> Engine(const CpuForest& cf, const std::vector<float>& rows,
                          const PredictOptions& o, ThreadPool* pool) {
  const Forest& f = cf.forest();
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  const int64_t width = PredictWidth(f, o);
  std::vector<float> out(n * width, -12345.0f);
  const absl::Status s =
      Predict(cf, MakeRowsView(rows.data(), n, f.num_features), o, MakeMatrixView(out.data(), n, width), pool);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

std::vector<float> EngineRows(const CpuForest& cf, const std::vector<float>& rows,
                              const PredictOptions& o) {
  const Forest& f = cf.forest();
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  const int64_t width = PredictWidth(f, o);
  std::vector<float> out(n * width, -12345.0f);
  for (int64_t r = 0; r < n; ++r) {
    const absl::Status s = PredictRow(cf, rows.data() + r * f.num_features, o, out.data() + r * width);
    EXPECT_TRUE(s.ok()) << s;
  }
  return out;
}

// Bitwise equality, NaN equal to NaN (a float compare would call two NaNs different).
void ExpectSame(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != got[i] && want[i] != want[i]) continue;
    ASSERT_EQ(got[i], want[i]) << what << " entry " << i;
  }
}

CpuForestOptions WalkOptions(CpuForestOptions::Walk walk) {
  CpuForestOptions o;
  o.walk = walk;
  return o;
}

void CheckLayout(const CpuForestPtr& cf, const ForestPtr& f, const std::string& name) {
  ThreadPool pool(2);
  for (int64_t n : {1, 3, 63, 64, 65, 200, 1000}) {
    for (double nan : {0.0, 0.1}) {
      const std::vector<float> x = MakeRandomRows(*f, n, 17 + n, nan);
      for (OutputKind kind : {OutputKind::kMargin, OutputKind::kPrediction, OutputKind::kLeaf}) {
        std::vector<PredictOptions> options = {Kind(kind)};
        if (f->num_iterations > 2) {
          options.push_back(Kind(kind, 1, f->num_iterations - 1));
          options.push_back(Kind(kind, 0, 1));
        }
        for (const PredictOptions& o : options) {
          const std::string what = name + " rows=" + std::to_string(n) + " nan=" +
                                   std::to_string(nan) + " kind=" + OutputKindName(kind) +
                                   " range=[" + std::to_string(o.iteration_begin) + "," +
                                   std::to_string(o.iteration_end) + ")";
          const std::vector<float> want = ReferencePrediction(*f, x, o);
          ExpectSame(Engine(*cf, x, o, &pool), want, what + " pool");
          ExpectSame(Engine(*cf, x, o, nullptr), want, what + " inline");
          if (n <= 65) ExpectSame(EngineRows(*cf, x, o), want, what + " rows");
        }
      }
    }
  }
}

// Both walks (the AVX-512 one where the processor has it) and block sizes with and without whole
// vectors of rows.
std::vector<std::pair<std::string, CpuForestOptions>> Layouts() {
  std::vector<std::pair<std::string, CpuForestOptions>> out;
  CpuForestOptions o;
  o.walk = CpuForestOptions::Walk::kScalar;
  out.emplace_back("scalar", o);
  if (HaveSimdWalk()) {
    for (CpuForestOptions::Walk walk :
         {CpuForestOptions::Walk::kSimd, CpuForestOptions::Walk::kDense,
          CpuForestOptions::Walk::kBitvector}) {
      const std::string name = WalkName(walk);
      o.walk = walk;
      o.block_rows = 0;
      out.emplace_back(name, o);
      o.block_rows = 16;  // every block through the fused walk where its trees allow, 4 trees at once
      out.emplace_back(name + "-16", o);
      o.block_rows = 32;  // 2 trees at once
      out.emplace_back(name + "-32", o);
      o.block_rows = 7;  // no block through it
      out.emplace_back(name + "-7", o);
      o.block_rows = 128;  // chunks of trees over the block: the complete layout's runs without
                           // trees that go on below it in one 128-row sub-block, the rest by 64
      out.emplace_back(name + "-128", o);
      o.block_rows = kMaxBlockRows;
      out.emplace_back(name + "-" + std::to_string(kMaxBlockRows), o);
    }
  }
  if (HaveAvx2Walk()) {
    // Forced, so that it is checked on processors with AVX-512 too.
    o.walk = CpuForestOptions::Walk::kDenseAvx2;
    for (int rows : {0, 8, 24, 12, 7, 128, kMaxBlockRows}) {
      // 8 and 24: one and three vectors per block, several trees at once; 12 and 7: the scalar
      // walk for the blocks that are not whole vectors; 128 and up: chunks of trees over 64-row
      // sub-blocks.
      o.block_rows = rows;
      out.emplace_back("avx2-" + std::to_string(rows), o);
    }
  }
  return out;
}

void CheckForest(const ForestPtr& f, const std::string& name) {
  for (const auto& [layout, options] : Layouts()) {
    absl::StatusOr<CpuForestPtr> cf = CpuForest::Build(f, options);
    ASSERT_TRUE(cf.ok()) << cf.status();
    const bool avx2 = options.walk == CpuForestOptions::Walk::kDenseAvx2;
    EXPECT_EQ((*cf)->simd_walk(), options.walk != CpuForestOptions::Walk::kScalar && !avx2);
    // The complete layout where some tree has scalar leaves and no general split: its levels
    // those of the deepest tree of at most kDenseMaxDepth, at least kDenseTopLevels where a tree
    // is deeper (whose rows go on below it). The row layout for runs of at least kRowBlockTrees
    // consecutive trees that fit it whole.
    bool fits = false, deep = false;
    int levels = 0;
    for (int t = 0; t < (*cf)->num_trees(); ++t) {
      const CpuTree& tree = (*cf)->trees()[t];
      if (!(tree.scalar && !tree.general && tree.depth >= 1)) continue;
      fits = true;
      if (tree.depth > kDenseMaxDepth) deep = true;
      else levels = std::max(levels, tree.depth);
    }
    if (deep) levels = std::max(levels, kDenseTopLevels);
    int run = 0, longest = 0;
    for (int t = 0; t < (*cf)->num_trees(); ++t) {
      const CpuTree& tree = (*cf)->trees()[t];
      const bool whole = tree.scalar && !tree.general && tree.depth >= 1 && tree.depth <= levels;
      run = whole ? run + 1 : 0;
      longest = std::max(longest, run);
      if ((*cf)->dense_walk() && tree.dense >= 0) {
        EXPECT_EQ((*cf)->dense_depth(), levels) << name;
        EXPECT_EQ(tree.continues, tree.depth > levels) << name << " tree " << t;
      }
    }
    // The bitvector layout where some tree has at most kBitvectorMaxLeaves leaves and no general
    // or categorical split; the complete layout beside it for the trees that fit that.
    bool small = false;
    for (int t = 0; t < (*cf)->num_trees(); ++t) {
      const CpuTree& tree = (*cf)->trees()[t];
      int leaves = 0;
      const Tree& ft = f->trees[t];
      for (uint32_t k = 0; k < ft.num_nodes; ++k) leaves += f->nodes[ft.node_begin + k].is_leaf();
      const bool fit = tree.scalar && !tree.general && !tree.categorical &&
                       leaves <= kBitvectorMaxLeaves &&
                       (tree.dense < 0 || tree.continues ||
                        leaves - 1 < kBitvectorSplitsPerLevel * (*cf)->dense_depth());
      small |= fit;
      if (options.walk == CpuForestOptions::Walk::kBitvector) {
        EXPECT_EQ(tree.bitvector >= 0, fit) << name << " tree " << t;
      }
    }
    const bool bitvector = options.walk == CpuForestOptions::Walk::kBitvector && small;
    EXPECT_EQ((*cf)->bitvector_walk(), bitvector) << name;
    EXPECT_EQ((*cf)->dense_walk(),
              ((options.walk == CpuForestOptions::Walk::kDense ||
                options.walk == CpuForestOptions::Walk::kBitvector) &&
               (fits || bitvector)) ||
                  (avx2 && fits))
        << name;
    EXPECT_EQ((*cf)->avx2_walk(), avx2 && fits) << name;
    EXPECT_EQ((*cf)->row_depth() > 0,
              options.walk != CpuForestOptions::Walk::kScalar && !avx2 &&
                  longest >= kRowBlockTrees)
        << name;
    CheckLayout(*cf, f, name + " " + layout);
  }
}


// The walks' names: every walk parses back from its name; an unknown name is refused, not read
// as kAuto.
TEST(CpuForestTest, WalkNamesRoundTripAndUnknownNamesAreRefused) {
  using Walk = CpuForestOptions::Walk;
  for (Walk w : {Walk::kAuto, Walk::kScalar, Walk::kSimd, Walk::kDense, Walk::kBitvector,
                 Walk::kDenseAvx2}) {
    absl::StatusOr<Walk> parsed = ParseWalk(WalkName(w));
    ASSERT_TRUE(parsed.ok()) << WalkName(w);
    EXPECT_EQ(*parsed, w) << WalkName(w);
  }
  EXPECT_STREQ(WalkName(Walk::kDenseAvx2), "dense_avx2");
  absl::StatusOr<Walk> unknown = ParseWalk("avx2");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CpuInferTest, SeededForestsOfEveryRuleSet) {
  struct Case {
    const char* name;
    RandomForestOptions o;
  };
  std::vector<Case> cases;
  for (uint64_t seed : {1, 2, 3}) {
    RandomForestOptions o;
    o.seed = seed;
    o.num_trees = 40;
    cases.push_back({"numeric", o});
    o.categorical_fraction = 0.4;
    cases.push_back({"categorical", o});
    // Every set within categories 0..63 (a two-word stride; the case above reaches four words).
    o.max_categories = 64;
    cases.push_back({"categorical-64", o});
    o.lightgbm_rules = true;
    o.missing_zero = false;
    cases.push_back({"lightgbm-categorical-64", o});
    o.max_categories = 0;
    o.missing_zero = true;
    cases.push_back({"lightgbm", o});
    o.categorical_fraction = 0.0;
    cases.push_back({"lightgbm-numeric", o});
    RandomForestOptions m;
    m.seed = seed;
    m.num_trees = 30;
    m.num_outputs = 3;
    cases.push_back({"multiclass", m});
    m.vector_leaves = true;
    m.num_trees = 10;
    cases.push_back({"vector-leaves", m});
    RandomForestOptions deep;
    deep.seed = seed;
    deep.num_trees = 12;
    deep.max_depth = 24;  // past kCheckDepth: the early stop
    deep.leaf_probability = 0.3;
    deep.lightgbm_rules = seed == 2;
    cases.push_back({"deep", deep});
    // Deep trees of several outputs in one call: rows that go on below the complete layout
    // beside trees it holds whole, their leaves added in tree order.
    deep.num_trees = 45;
    deep.num_outputs = 3;
    deep.max_depth = 14;
    deep.leaf_probability = 0.15;
    deep.missing_zero = false;
    cases.push_back({"deep-multiclass", deep});
    // Categorical splits in the complete layout's gathered levels and below it.
    deep.num_outputs = 1;
    deep.num_trees = 20;
    deep.categorical_fraction = 0.4;
    deep.max_categories = 64;
    cases.push_back({"deep-categorical", deep});
    // More values per row than the call's trees visit nodes: the complete layout reads the rows
    // as they are, not by column (most other cases read them by column where no tree of a chunk
    // goes on below the layout).
    RandomForestOptions wide;
    wide.seed = seed;
    wide.num_features = 300;
    wide.num_trees = 8;
    wide.categorical_fraction = seed == 3 ? 0.3 : 0.0;
    cases.push_back({"wide-few-trees", wide});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    CheckForest(MakeRandomForest(c.o), std::string(c.name) + "/" + std::to_string(c.o.seed));
  }
}

// Leaf values that are all floats (XGBoost's) are gathered as floats, sixteen to a gather, and
// give the same sums; double leaves (the seeded forests') keep the doubles. Depth 8: the levels of
// 64 and 128 nodes selected from registers; 40 features: rows transposed in two whole chunks of
// sixteen values and a partial one, with categorical splits in one forest.
TEST(CpuInferTest, FloatLeafValuesAndDeepRegisterLevels) {
  if (!HaveSimdWalk()) GTEST_SKIP() << "no AVX-512: no complete layout";
  for (double categorical : {0.0, 0.3}) {
    RandomForestOptions o;
    o.seed = 11;
    o.num_trees = 24;
    o.num_outputs = 2;
    o.max_depth = 8;
    o.leaf_probability = 0.1;
    o.num_features = 40;
    o.categorical_fraction = categorical;
    const ForestPtr doubles = MakeRandomForest(o);
    Forest rounded = *doubles;
    for (double& v : rounded.leaf_values) v = static_cast<float>(v);
    for (Tree& t : rounded.trees) t.weight = 1.0;  // weight x leaf is what the layout keeps
    const ForestPtr floats = std::make_shared<const Forest>(std::move(rounded));
    const CpuForestOptions dense = WalkOptions(CpuForestOptions::Walk::kDense);
    const absl::StatusOr<CpuForestPtr> with_floats = CpuForest::Build(floats, dense);
    const absl::StatusOr<CpuForestPtr> with_doubles = CpuForest::Build(doubles, dense);
    ASSERT_TRUE(with_floats.ok() && with_doubles.ok());
    ASSERT_EQ((*with_floats)->dense_depth(), 8);
    EXPECT_NE((*with_floats)->dense_values32(), nullptr);
    EXPECT_EQ((*with_doubles)->dense_values32(), nullptr);
    const std::string name = categorical > 0 ? "categorical" : "numeric";
    CheckForest(floats, "float leaves, " + name);
    CheckForest(doubles, "double leaves, " + name);
  }
}

TEST(CpuInferTest, BitvectorLayoutTakesNarrowAndWideMasks) {
  // Unbalanced trees deeper than the complete layout holds, of 12 to 64 leaves: 32-bit and 64-bit
  // masks both walked; complete trees of depth 8 (256 leaves) are left to the other walks.
  if (!HaveSimdWalk()) GTEST_SKIP() << "no AVX-512: no bitvector layout";
  RandomForestOptions o;
  o.num_trees = 60;
  o.seed = 21;
  o.max_depth = kDenseMaxDepth + 2;
  o.leaf_probability = 0.3;
  const ForestPtr shallow = MakeRandomForest(o);
  o.max_depth = 8;
  o.leaf_probability = 0.0;
  o.num_trees = 3;
  const ForestPtr deep = MakeRandomForest(o);
  const CpuForestOptions bv = WalkOptions(CpuForestOptions::Walk::kBitvector);
  absl::StatusOr<CpuForestPtr> cf = CpuForest::Build(shallow, bv);
  ASSERT_TRUE(cf.ok()) << cf.status();
  ASSERT_TRUE((*cf)->bitvector_walk());
  int narrow = 0, wide = 0;
  for (int t = 0; t < (*cf)->num_trees(); ++t) {
    const int32_t b = (*cf)->trees()[t].bitvector;
    if (b >= 0) ((*cf)->bitvector_trees()[b].wide ? wide : narrow)++;
  }
  EXPECT_GT(narrow, 0);
  EXPECT_GT(wide, 0);
  CheckLayout(*cf, shallow, "bitvector narrow and wide");
  absl::StatusOr<CpuForestPtr> big = CpuForest::Build(deep, bv);
  ASSERT_TRUE(big.ok());
  EXPECT_FALSE((*big)->bitvector_walk());  // 256 leaves: no tree fits, the complete layout walks
}

// Trees deeper than the complete layout, whose rows go on in their nodes, take the clustered node
// order (a pair, its children's pairs, then each grandchild's cluster); the others breadth-first.
TEST(CpuForestTest, DeepTreesTakeClusteredNodes) {
  RandomForestOptions o;
  o.num_trees = 1;
  o.seed = 5;
  o.leaf_probability = 0.0;
  o.max_depth = kDenseMaxDepth + 2;
  const ForestPtr deep = MakeRandomForest(o);
  o.max_depth = kDenseMaxDepth;
  const ForestPtr shallow = MakeRandomForest(o);
  const absl::StatusOr<CpuForestPtr> d = CpuForest::Build(deep);
  const absl::StatusOr<CpuForestPtr> s = CpuForest::Build(shallow);
  ASSERT_TRUE(d.ok() && s.ok());
  // The left child's position of the node at each position.
  auto left = [](const CpuForest& cf, int p) {
    return cf.nodes()[p].left / static_cast<int32_t>(sizeof(CpuNode));
  };
  // Root, its children, the leftmost grandchild: the same in both orders.
  for (const CpuForestPtr& cf : {*d, *s}) {
    EXPECT_EQ(left(*cf, 0), 1);
    EXPECT_EQ(left(*cf, 1), 3);
    EXPECT_EQ(left(*cf, 2), 5);
    EXPECT_EQ(left(*cf, 3), 7);
  }
  // Below: the grandchild's children's pairs follow its own pair when clustered, and follow the
  // rest of their level breadth-first.
  EXPECT_EQ(left(**d, 7), 9);
  EXPECT_EQ(left(**d, 8), 11);
  EXPECT_EQ(left(**s, 7), 15);
  CheckForest(deep, "clustered");
}

// Rows too wide for a block of 64 in L1 still take blocks of 64 rows in the bitvector walk, which
// reads a block's rows once (to lay out its columns); the complete layout's walk keeps the block
// that fits L1. Both give the reference's sums; the load timed the walk per row.
TEST(CpuInferTest, BitvectorWalkTakesWideRowsSixtyFourAtATime) {
  if (!HaveSimdWalk()) GTEST_SKIP() << "no AVX-512: no bitvector layout";
  RandomForestOptions o;
  o.num_trees = 30;
  o.num_outputs = 3;
  o.seed = 8;
  o.max_depth = 3;
  o.num_features = 600;
  const ForestPtr f = MakeRandomForest(o);
  const absl::StatusOr<CpuForestPtr> with_bitvector =
      CpuForest::Build(f, WalkOptions(CpuForestOptions::Walk::kBitvector));
  const absl::StatusOr<CpuForestPtr> with_dense =
      CpuForest::Build(f, WalkOptions(CpuForestOptions::Walk::kDense));
  ASSERT_TRUE(with_bitvector.ok() && with_dense.ok());
  ASSERT_TRUE((*with_bitvector)->bitvector_walk());
  EXPECT_EQ((*with_bitvector)->block_rows(), kMaxLanes);
  EXPECT_EQ((*with_dense)->block_rows(), DefaultBlockRows(o.num_features));
  EXPECT_LT(DefaultBlockRows(o.num_features), kMaxLanes);
  EXPECT_GT((*with_bitvector)->row_seconds(), 0);
  CheckLayout(*with_bitvector, f, "bitvector, 600 features");
  CheckLayout(*with_dense, f, "complete layout, 600 features");
}

TEST(CpuInferTest, LinksGiveTheReferencePrediction) {
  const ForestPtr f = MakeRandomForest({.num_trees = 20, .num_outputs = 4, .seed = 9});
  for (Link link : {Link::kSigmoid, Link::kSoftmax, Link::kExp, Link::kArgmax}) {
    CheckForest(testing::WithLink(*f, link), LinkName(link));
  }
}

TEST(CpuInferTest, TreesOutOfRoundOrder) {
  HandForest h(2);
  // Round 1's tree first, then round 0's: a range must still pick trees by round.
  h.AddTree({h.Split(0, 0.5f, 1, 2, 10), h.Leaf(1.0, 6), h.Leaf(2.0, 4)}, 0, 1.0, 1, 1);
  h.AddTree({h.Split(1, 0.5f, 1, 2, 10), h.Leaf(10.0, 6), h.Leaf(20.0, 4)}, 0, 0.5, 1, 0);
  h.AddTree({h.Leaf(100.0, 10)}, 0, 1.0, 1, 2);
  const ForestPtr f = h.Build();
  absl::StatusOr<CpuForestPtr> cf = CpuForest::Build(f);
  ASSERT_TRUE(cf.ok());
  EXPECT_FALSE((*cf)->iterations_sorted());
  CheckForest(f, "unsorted");
}

// A model whose complete layout exceeds a core's L2 walks as many rows per block as fit 800 KB
// (its trees are read from L3 once per block), and gives the reference's sums; a smaller one
// keeps the block that fits L1, an explicit block size wins, and another walk keeps the default
// block.
TEST(CpuInferTest, LargeCompleteLayoutsTakeLargeBlocks) {
  if (!HaveSimdWalk()) GTEST_SKIP() << "no AVX-512: no complete layout";
  RandomForestOptions o;
  o.num_features = 600;  // a 16-row block of 600 features fits L1
  o.max_depth = 8;
  o.leaf_probability = 0.0;
  o.num_trees = 2200;  // 2,200 x (255 nodes + 256 values) x 8 bytes: 9 MB
  const ForestPtr large = MakeRandomForest(o);
  CpuForestOptions dense = WalkOptions(CpuForestOptions::Walk::kDense);
  absl::StatusOr<CpuForestPtr> cf = CpuForest::Build(large, dense);
  ASSERT_TRUE(cf.ok()) << cf.status();
  ASSERT_EQ((*cf)->dense_depth(), 8);
  EXPECT_EQ((*cf)->block_rows(), LargeLayoutBlockRows(600));
  EXPECT_EQ(LargeLayoutBlockRows(600), kMaxBlockRows);  // 800 KB of rows: 341, at most 256
  EXPECT_EQ(LargeLayoutBlockRows(1024), 192);            // 800 KB of rows: 200
  EXPECT_EQ(LargeLayoutBlockRows(8), kMaxBlockRows);
  EXPECT_EQ(LargeLayoutBlockRows(100000), 16);
  {
    // Its blocks give the reference's sums (1,000 rows: three whole blocks and a partial one).
    ThreadPool pool(2);
    const std::vector<float> x = MakeRandomRows(*large, 1000, 5, 0.05);
    const PredictOptions margin = Kind(OutputKind::kMargin);
    ExpectSame(Engine(**cf, x, margin, &pool), ReferencePrediction(*large, x, margin),
               "large layout, large blocks");
  }
  dense.block_rows = 16;
  EXPECT_EQ((*CpuForest::Build(large, dense))->block_rows(), 16);
  // The node walk of the same model keeps the default block: the rule is the complete layout's.
  EXPECT_EQ((*CpuForest::Build(large, WalkOptions(CpuForestOptions::Walk::kSimd)))->block_rows(),
            16);
  o.num_trees = 100;
  dense.block_rows = 0;
  EXPECT_EQ((*CpuForest::Build(MakeRandomForest(o), dense))->block_rows(), 16);
}

// The row layout's geometry: every node of every slot in its own place within size(), the first
// interleaved() levels where TopNode says, and below them the nodes of a path through a group of
// levels within one 64-byte line.
TEST(CpuForestTest, RowGeometryPlacesEveryNodeOnceAndPathsWithinLines) {
  for (int depth = 1; depth <= kDenseMaxDepth; ++depth) {
    for (int interleaved : {kRowTopLevels, depth}) {
      SCOPED_TRACE("depth " + std::to_string(depth) + " interleaved " +
                   std::to_string(interleaved));
      constexpr int64_t kSlots = 40;
      const RowGeometry g(depth, kSlots, interleaved);
      EXPECT_EQ(g.interleaved(), std::min(depth, std::max(interleaved, kRowTopLevels)));
      EXPECT_EQ(g.deep_base() % 8, 0);
      EXPECT_EQ(g.tree_nodes() % 8, 0);
      EXPECT_EQ(g.tree_nodes() == 0, g.interleaved() == depth);
      if (g.interleaved() == kRowTopLevels && depth > kRowTopLevels) {
        // Slots of 8 nodes for each full group, 4 for two levels, 1 for one: no gap, no excess.
        const int32_t expected[] = {0, 0, 0, 0, 8, 32, 64, 64 + 64, 64 + 256, 64 + 512,
                                    64 + 512 + 512};
        EXPECT_EQ(g.tree_nodes(), expected[depth]);
      }
      std::vector<int> used(static_cast<size_t>(g.size()), 0);
      for (int64_t s = 0; s < kSlots; ++s) {
        for (int d = 0; d < depth; ++d) {
          for (int64_t q = 0; q < (int64_t{1} << d); ++q) {
            const int64_t at = d < g.interleaved() ? g.TopNode(s, (int64_t{1} << d) - 1 + q)
                                                   : g.DeepNode(s, d, q);
            ASSERT_GE(at, 0);
            ASSERT_LT(at, g.size());
            ++used[static_cast<size_t>(at)];
            if (d < g.interleaved()) {
              EXPECT_LT(at, g.deep_base());
            } else if (d > g.interleaved() && (d - g.interleaved()) % 3 != 0) {
              // Its parent, one level up in the same group, shares its line.
              EXPECT_EQ(at / 8, g.DeepNode(s, d - 1, q / 2) / 8) << "slot " << s << " q " << q;
            }
          }
        }
      }
      EXPECT_EQ(*std::max_element(used.begin(), used.end()), 1);
    }
  }
}

// Row layouts past a core's L2 keep their levels below the top ones in line-sized subtrees, the
// others interleave every level; a single row gives the reference's answer either way, for every
// depth of the complete layout (groups of three, two and one levels under the top), with missing
// values, categorical splits, several outputs and ranges.
TEST(CpuInferTest, LargeRowLayoutsTakeLineSizedSubtrees) {
  if (!HaveSimdWalk()) GTEST_SKIP() << "no AVX-512: no row layout";
  for (int depth = 4; depth <= kDenseMaxDepth; ++depth) {
    SCOPED_TRACE("depth " + std::to_string(depth));
    RandomForestOptions o;
    o.num_features = 30;
    o.max_depth = depth;
    o.leaf_probability = 0.0;
    o.categorical_fraction = depth % 2 == 0 ? 0.2 : 0.0;
    o.max_categories = 64;
    o.num_outputs = depth == 8 ? 3 : 1;
    o.seed = 40 + depth;
    // (2^(depth + 1) - 1) x 8 bytes a tree: 1.6 MB, past the 1.5 MB rule; a tenth (rounded up to
    // 48 trees) well under it.
    const int large_trees = static_cast<int>(
        (int64_t{1600} << 10) / (((int64_t{1} << (depth + 1)) - 1) * 8) / 48 * 48 + 48);
    for (int trees : {large_trees, large_trees / 10 / 48 * 48 + 48}) {
      o.num_trees = trees;
      const ForestPtr f = MakeRandomForest(o);
      absl::StatusOr<CpuForestPtr> cf =
          CpuForest::Build(f, WalkOptions(CpuForestOptions::Walk::kDense));
      ASSERT_TRUE(cf.ok()) << cf.status();
      ASSERT_EQ((*cf)->row_depth(), depth);
      EXPECT_EQ((*cf)->row_geometry().interleaved(), trees == large_trees ? kRowTopLevels : depth)
          << trees << " trees";
      EXPECT_EQ(reinterpret_cast<uintptr_t>((*cf)->row_nodes()) % 64, 0u);
      for (double nan : {0.0, 0.2}) {
        const std::vector<float> x = MakeRandomRows(*f, 24, 7 + depth, nan);
        for (const PredictOptions& po :
             {Kind(OutputKind::kMargin), Kind(OutputKind::kLeaf),
              Kind(OutputKind::kMargin, 1, f->num_iterations - 1)}) {
          ExpectSame(EngineRows(**cf, x, po), ReferencePrediction(*f, x, po),
                     std::to_string(trees) + " trees nan=" + std::to_string(nan));
        }
      }
    }
  }
}

// Runs of trees that take the row layout (at least kRowBlockTrees consecutive trees of the
// complete layout) between trees that do not (a categorical set listing a category past
// 4,095, which takes the general decision; a run too short): a single
// row's walk changes layout from run to run, over whole and partial blocks, with ranges.
TEST(CpuInferTest, RowWalkAcrossRunsOfLayouts) {
  HandForest h(3);
  int tree = 0;
  auto numeric = [&] {
    const float a = 0.1f * (tree % 7) - 0.3f, b = 0.05f * (tree % 5), c = -0.2f + 0.03f * tree;
    const double v = 0.25 * tree;
    h.AddTree({h.Split(0, a, 1, 2, 10), h.Split(1, b, 3, 4, 6), h.Split(2, c, 5, 6, 4),
               h.Leaf(v + 1, 2), h.Leaf(v - 2, 4), h.Leaf(v + 3, 1), h.Leaf(-v, 3)},
              0, tree % 3 == 0 ? 0.5 : 1.0);
    ++tree;
  };
  auto categorical = [&] {
    h.AddTree({h.CategoricalSplit(2, {0, 2, 5000}, 1, 2, 10), h.Leaf(7.0, 5), h.Leaf(-7.0, 5)});
    ++tree;
  };
  for (int i = 0; i < 20; ++i) numeric();
  categorical();
  for (int i = 0; i < 17; ++i) numeric();
  categorical();
  for (int i = 0; i < 3; ++i) numeric();
  const ForestPtr f = h.Build();
  CpuForestOptions o;
  o.walk = CpuForestOptions::Walk::kSimd;
  absl::StatusOr<CpuForestPtr> cf = CpuForest::Build(f, o);
  ASSERT_TRUE(cf.ok()) << cf.status();
  if (HaveSimdWalk()) {
    for (int t = 0; t < (*cf)->num_trees(); ++t) {
      const bool in_layout = t < 20 || (t > 20 && t < 38);
      EXPECT_EQ((*cf)->trees()[t].row >= 0, in_layout) << "tree " << t;
    }
  }
  CheckForest(f, "runs of layouts");
}

// Categorical splits are decided by the vector walks (their trees neither general nor in the
// bitvector layout) in sets of one stride of words, the fewest that hold the widest (here the
// largest, 128 words: categories up to 4,095), under both truncation rules with the listed categories on either
// side, for values at every edge of the rules: missing, infinite, beyond the int range, negative,
// in (-1, 0), fractional, at and past each word of a set and the stride. A set listing a category
// past 4,095, or following another rule than the model's first set the walks decide (a set
// before it that they do not decide sets no rule), keeps the general decision.
TEST(CpuInferTest, CategoricalSetsTakeTheVectorWalks) {
  const float kNan = std::numeric_limits<float>::quiet_NaN();
  const float kInf = std::numeric_limits<float>::infinity();
  const std::vector<float> values = {kNan,  kInf,  -kInf, 3e9f,  -3e9f, -1.5f, -1.0f, -0.5f,
                                     -0.0f, 0.0f,  0.5f,  1.0f,  2.0f,  5.0f,  31.0f, 31.5f,
                                     32.0f, 33.0f, 40.0f, 62.0f, 63.0f, 63.9f, 64.0f, 64.5f,
                                     65.0f, 95.0f, 100.0f, 200.0f, 254.0f, 255.0f, 255.5f,
                                     256.0f, 300.0f, 4094.0f, 4095.0f, 4095.5f, 4096.0f,
                                     4127.0f, 5000.0f, 6000.0f};
  const std::vector<std::vector<int>> sets = {
      {0, 2}, {0, 31, 32, 63, 100, 255}, {33, 40, 62}, {1, 5, 31, 200, 4095}};
  for (const uint16_t rule : {uint16_t{0}, uint16_t{kNodeCategoryInSetGoesLeft},
                              uint16_t{kNodeCategoryTruncate},
                              uint16_t{kNodeCategoryInSetGoesLeft | kNodeCategoryTruncate}}) {
    SCOPED_TRACE("rule flags " + std::to_string(rule));
    const uint16_t other = rule ^ kNodeCategoryTruncate;
    HandForest h(2);
    h.AddTree({h.CategoricalSplit(0, {3, 5000}, 1, 2, 10, other), h.Leaf(4.0, 5), h.Leaf(-4.0, 5)});
    constexpr int kVectorTrees = 40;
    for (int t = 0; t < kVectorTrees; ++t) {
      const uint16_t nan_left = (t % 2 == 0) ? kNodeDefaultLeft : 0;
      const double v = 0.5 * t;
      h.AddTree({h.CategoricalSplit(0, sets[t % 4], 1, 2, 10, rule | nan_left),
                 h.Split(1, 0.5f, 3, 4, 6, kNodeDefaultLeft),
                 h.CategoricalSplit(0, sets[(t + 1) % 4], 5, 6, 4, rule),
                 h.Leaf(v + 1, 2), h.Leaf(v - 2, 4), h.Leaf(v + 3, 1), h.Leaf(-v, 3)});
    }
    // A set stored with more words than the stride, the extra ones empty: still decided by the
    // walks (what counts is its highest listed category).
    Node padded = h.CategoricalSplit(0, {7, 40}, 1, 2, 10, rule);
    h.forest.category_bits.resize(h.forest.category_bits.size() + 200, 0u);
    padded.aux += 200;
    h.AddTree({padded, h.Leaf(3.0, 5), h.Leaf(-3.0, 5)});
    h.AddTree({h.CategoricalSplit(0, {3, 5000}, 1, 2, 10, rule), h.Leaf(1.0, 5), h.Leaf(-1.0, 5)});
    h.AddTree({h.CategoricalSplit(0, {3}, 1, 2, 10, other), h.Leaf(2.0, 5), h.Leaf(-2.0, 5)});
    const ForestPtr f = h.Build();
    absl::StatusOr<CpuForestPtr> built = CpuForest::Build(f);
    ASSERT_TRUE(built.ok()) << built.status();
    for (int t = 0; t < (*built)->num_trees(); ++t) {
      const CpuTree& tree = (*built)->trees()[t];
      const bool vector = t >= 1 && t <= kVectorTrees + 1;
      EXPECT_EQ(tree.categorical, vector) << "tree " << t;
      EXPECT_EQ(tree.general, !vector) << "tree " << t;
    }
    EXPECT_EQ((*built)->category_truncate(), (rule & kNodeCategoryTruncate) != 0);
    EXPECT_EQ((*built)->category_stride(), kMaxCategoryWords);
    EXPECT_EQ((*built)->category_limit(), 4096);
    // Every value beside each of the other feature's; then every value but NaN in rows of no
    // missing value (the walks' path for blocks without one).
    std::vector<float> x, complete;
    for (float a : values) {
      for (float b : {0.2f, 0.7f, kNan}) x.insert(x.end(), {a, b});
      if (a == a) {
        for (int r = 0; r < 16; ++r) complete.insert(complete.end(), {a, r % 2 ? 0.2f : 0.7f});
      }
    }
    ThreadPool pool(2);
    for (const auto& [layout, options] : Layouts()) {
      absl::StatusOr<CpuForestPtr> cf = CpuForest::Build(f, options);
      ASSERT_TRUE(cf.ok()) << cf.status();
      if ((*cf)->dense_walk()) {
        for (int t = 1; t <= kVectorTrees + 1; ++t) {
          EXPECT_GE((*cf)->trees()[t].dense, 0) << layout;
        }
      }
      for (OutputKind kind : {OutputKind::kMargin, OutputKind::kLeaf}) {
        const PredictOptions o = Kind(kind);
        const std::string what = layout + " " + OutputKindName(kind);
        for (const std::vector<float>* rows : {&x, &complete}) {
          const std::vector<float> want = ReferencePrediction(*f, *rows, o);
          ExpectSame(Engine(**cf, *rows, o, &pool), want, what);
          ExpectSame(EngineRows(**cf, *rows, o), want, what + " rows");
        }
      }
    }
  }
}

TEST(CpuInferTest, StridedRowsAndErrors) {
  const ForestPtr f = MakeRandomForest({.num_trees = 15, .seed = 4});
  absl::StatusOr<CpuForestPtr> cf = CpuForest::Build(f);
  ASSERT_TRUE(cf.ok());
  const int64_t n = 130, cols = f->num_features, stride = cols + 3;
  const std::vector<float> dense = MakeRandomRows(*f, n, 5);
  std::vector<float> strided(n * stride, 7.0f);
  for (int64_t r = 0; r < n; ++r) {
    std::copy(dense.begin() + r * cols, dense.begin() + (r + 1) * cols, strided.begin() + r * stride);
  }
  const PredictOptions p = Kind(OutputKind::kMargin);
  std::vector<float> out(n);
  ThreadPool pool(2);
  ASSERT_TRUE(Predict(**cf, RowsView{strided.data(), n, cols, stride}, p, MakeMatrixView(out.data(), n, 1),
                      &pool)
                  .ok());
  ExpectSame(out, ReferencePrediction(*f, dense, p), "strided");

  // The reference's errors, word for word.
  std::vector<float> ref_out(n);
  for (const auto& [rows, view] :
       {std::pair{RowsView{dense.data(), n, cols - 1, cols - 1}, MakeMatrixView(out.data(), n, 1)},
        std::pair{MakeRowsView(dense.data(), n, cols), MakeMatrixView(out.data(), n - 1, 1)}}) {
    const absl::Status got = Predict(**cf, rows, p, view, &pool);
    const absl::Status want = PredictCpu(*f, rows, p, view, &pool);
    EXPECT_TRUE(absl::IsInvalidArgument(got)) << got;
    EXPECT_EQ(got, want);
  }
  const absl::Status range = Predict(**cf, MakeRowsView(dense.data(), n, cols), Kind(OutputKind::kMargin, 5, 3),
                                     MakeMatrixView(out.data(), n, 1), &pool);
  EXPECT_TRUE(absl::IsInvalidArgument(range)) << range;
  EXPECT_TRUE(PredictRow(**cf, dense.data(), Kind(OutputKind::kMargin, 5, 3), out.data()).code() ==
              absl::StatusCode::kInvalidArgument);
  for (int block_rows : {-1, kMaxBlockRows + 1}) {
    CpuForestOptions bad;
    bad.block_rows = block_rows;
    const absl::Status s = CpuForest::Build(f, bad).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << block_rows << ": " << s;
  }
}

TEST(CpuInferTest, EveryCorpusModelMatchesTheReference) {
  const std::vector<std::string> dirs = testing::CorpusCaseDirs();
  if (dirs.empty()) GTEST_SKIP() << "no corpus found (GROVE_SOURCE_DIR/../shared/testdata)";
  ThreadPool pool(2);
  for (const std::string& dir : dirs) {
    absl::StatusOr<testing::CorpusCase> c = testing::LoadCorpusCase(dir);
    ASSERT_TRUE(c.ok()) << c.status();
    for (const std::string& path : c->model_paths) {
      SCOPED_TRACE(path);
      absl::StatusOr<ForestPtr> f = LoadModelFile(path);
      ASSERT_TRUE(f.ok()) << f.status();
      const std::vector<float> x = testing::GroveRows(*c, **f);
      for (const auto& [layout, options] : Layouts()) {
        absl::StatusOr<CpuForestPtr> cf = CpuForest::Build(*f, options);
        ASSERT_TRUE(cf.ok()) << cf.status();
        for (OutputKind kind : {OutputKind::kMargin, OutputKind::kPrediction, OutputKind::kLeaf}) {
          const PredictOptions o = Kind(kind);
          const std::vector<float> want = ReferencePrediction(**f, x, o);
          const std::string what = path + " " + layout + " " + OutputKindName(kind);
          ExpectSame(Engine(**cf, x, o, &pool), want, what);
          ExpectSame(EngineRows(**cf, x, o), want, what + " rows");
        }
      }
    }
  }
}

}  // namespace
}  // namespace grove::cpu
