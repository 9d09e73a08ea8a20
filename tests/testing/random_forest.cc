#include "tests/testing/random_forest.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <utility>

namespace grove::testing {
namespace {

// splitmix64: tiny, portable, good enough for test data.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  bool Bernoulli(double p) { return Uniform() < p; }
  int Int(int n) { return static_cast<int>(Next() % static_cast<uint64_t>(n)); }  // [0, n)

 private:
  uint64_t state_;
};

struct FeatureInfo {
  bool categorical = false;
  int num_categories = 0;          // categorical: categories 0..num_categories-1
  std::vector<float> thresholds;   // numeric: pool the splits draw from
};

class TreeMaker {
 public:
  TreeMaker(const RandomForestOptions& o, const std::vector<FeatureInfo>& features, Forest& f,
            Rng& rng)
      : o_(o), features_(features), f_(f), rng_(rng) {}

  // Appends one tree's nodes to f_.nodes and returns its Tree.
  Tree Make(int leaf_width, bool force_deep) {
    Tree tree;
    tree.node_begin = static_cast<uint32_t>(f_.nodes.size());
    tree.leaf_width = leaf_width;
    leaf_width_ = leaf_width;
    begin_ = tree.node_begin;
    leaf_counter_ = 0;
    path_features_.clear();
    const double root_cover = rng_.Uniform(50.0, 1000.0);
    Grow(0, force_deep, root_cover);
    tree.num_nodes = static_cast<uint32_t>(f_.nodes.size()) - tree.node_begin;
    FixCovers(0);
    return tree;
  }

 private:
  Node& At(int32_t i) { return f_.nodes[begin_ + i]; }

  // Builds the subtree at a new node index (preorder) and returns that index.
  int32_t Grow(int depth, bool forced, double cover) {
    const int32_t index = static_cast<int32_t>(f_.nodes.size() - begin_);
    f_.nodes.emplace_back();
    bool leaf = depth >= o_.max_depth;
    if (!leaf && !forced) leaf = rng_.Bernoulli(o_.leaf_probability);
    if (leaf) {
      Node& n = At(index);
      n.flags = kNodeLeaf;
      n.cover = cover;
      n.payload = static_cast<uint32_t>(f_.leaf_values.size());
      for (int k = 0; k < leaf_width_; ++k) f_.leaf_values.push_back(rng_.Uniform(-1.0, 1.0));
      n.leaf_id = o_.lightgbm_rules ? leaf_counter_++ : index;
      return index;
    }
    // Split feature: often one already on the path, to exercise repeated features.
    int feature;
    if (!path_features_.empty() && rng_.Bernoulli(0.3)) {
      feature = path_features_[rng_.Int(static_cast<int>(path_features_.size()))];
    } else {
      feature = rng_.Int(o_.num_features);
    }
    const FeatureInfo& info = features_[feature];
    Node split;
    split.feature = feature;
    split.cover = cover;
    if (rng_.Bernoulli(0.5)) split.flags |= kNodeDefaultLeft;
    if (info.categorical) {
      split.flags |= kNodeCategorical;
      if (o_.lightgbm_rules) split.flags |= kNodeCategoryInSetGoesLeft | kNodeCategoryTruncate;
      const uint32_t words = static_cast<uint32_t>((info.num_categories + 31) / 32);
      split.payload = static_cast<uint32_t>(f_.category_bits.size());
      split.aux = words;
      // One-hot (a single category) or a random partition; never empty.
      std::vector<uint32_t> bits(words, 0);
      if (rng_.Bernoulli(0.3)) {
        const int c = rng_.Int(info.num_categories);
        bits[c >> 5] |= 1u << (c & 31);
      } else {
        for (int c = 0; c < info.num_categories; ++c) {
          if (rng_.Bernoulli(0.5)) bits[c >> 5] |= 1u << (c & 31);
        }
        bits[0] |= 1u << rng_.Int(std::min(info.num_categories, 32));
      }
      f_.category_bits.insert(f_.category_bits.end(), bits.begin(), bits.end());
    } else {
      split.threshold = info.thresholds[rng_.Int(static_cast<int>(info.thresholds.size()))];
      if (o_.lightgbm_rules) {
        const int missing_type = rng_.Int(3);  // 0 None, 1 Zero, 2 NaN
        if (missing_type == 0) split.flags |= kNodeNanAsZero;
        if (missing_type == 1 && o_.missing_zero) split.flags |= kNodeMissingZero;
      }
    }
    At(index) = split;
    // Covers of the children (made exactly consistent by FixCovers afterwards).
    double fraction = rng_.Uniform(0.05, 0.95);
    if (rng_.Bernoulli(o_.extreme_cover_probability)) fraction = rng_.Bernoulli(0.5) ? 1e-6 : 1 - 1e-6;
    // The forced deep path continues on a random side.
    const bool forced_left = forced && rng_.Bernoulli(0.5);
    path_features_.push_back(feature);
    const int32_t left = Grow(depth + 1, forced_left, cover * fraction);
    const int32_t right = Grow(depth + 1, forced && !forced_left, cover * (1 - fraction));
    path_features_.pop_back();
    At(index).left = left;
    At(index).right = right;
    return index;
  }

  double FixCovers(int32_t i) {
    Node& n = At(i);
    if (n.is_leaf()) return n.cover;
    const int32_t l = n.left, r = n.right;
    const double c = FixCovers(l) + FixCovers(r);
    At(i).cover = c;
    return c;
  }

  const RandomForestOptions& o_;
  const std::vector<FeatureInfo>& features_;
  Forest& f_;
  Rng& rng_;
  uint32_t begin_ = 0;
  int leaf_width_ = 1;
  int32_t leaf_counter_ = 0;
  std::vector<int> path_features_;
};

}  // namespace

grove::ForestPtr MakeRandomForest(const RandomForestOptions& o) {
  Rng rng(o.seed);
  Forest f;
  f.num_features = std::max(1, o.num_features);
  f.num_outputs = std::max(1, o.num_outputs);
  f.format = o.lightgbm_rules ? ModelFormat::kLightgbmText : ModelFormat::kXgboostJson;
  f.source = "<random forest>";
  f.objective.name = "random";
  f.objective.link = Link::kIdentity;

  std::vector<FeatureInfo> features(f.num_features);
  bool any_categorical = false;
  for (FeatureInfo& info : features) {
    info.categorical = rng.Bernoulli(o.categorical_fraction);
    if (info.categorical) {
      any_categorical = true;
      const int sizes[] = {2, 5, 17, 40, 70};
      info.num_categories = sizes[rng.Int(5)];
      if (o.max_categories > 0) {
        info.num_categories = std::min(info.num_categories, o.max_categories);
      }
    } else {
      const int n = 1 + rng.Int(8);
      for (int k = 0; k < n; ++k) {
        // Some thresholds at 0 and tiny values, where missing type Zero matters.
        float t = static_cast<float>(std::round(rng.Uniform(-3.0, 3.0) * 1000.0) / 1000.0);
        if (rng.Bernoulli(0.1)) t = 0.0f;
        info.thresholds.push_back(t);
      }
    }
  }
  if (any_categorical) {
    for (const FeatureInfo& info : features) f.feature_types.push_back(info.categorical ? "c" : "float");
  }

  for (int k = 0; k < f.num_outputs; ++k) f.base_margin.push_back(rng.Uniform(-0.5, 0.5));

  TreeMaker maker(o, features, f, rng);
  for (int t = 0; t < std::max(1, o.num_trees); ++t) {
    const int width = o.vector_leaves ? f.num_outputs : 1;
    const bool force_deep = t == 0 || rng.Bernoulli(0.5);
    Tree tree = maker.Make(width, force_deep);
    if (o.vector_leaves) {
      tree.group = 0;
      tree.iteration = t;
    } else {
      tree.group = t % f.num_outputs;
      tree.iteration = t / f.num_outputs;
    }
    if (rng.Bernoulli(1.0 / 3.0)) tree.weight = rng.Uniform(0.1, 1.5);
    f.trees.push_back(tree);
  }

  absl::StatusOr<ForestPtr> built = BuildForest(std::move(f));
  if (!built.ok()) {
    std::fprintf(stderr, "MakeRandomForest: BuildForest failed: %s\n",
                 std::string(built.status().message()).c_str());
    std::abort();
  }
  return *std::move(built);
}

grove::ForestPtr WithLink(const grove::Forest& forest, grove::Link link) {
  grove::Forest copy = forest;
  copy.objective.link = link;
  absl::StatusOr<grove::ForestPtr> built = grove::BuildForest(std::move(copy));
  if (!built.ok()) {
    std::fprintf(stderr, "WithLink: %s\n", std::string(built.status().message()).c_str());
    std::abort();
  }
  return *std::move(built);
}

std::vector<float> MakeRandomRows(const grove::Forest& forest, int64_t num_rows, uint64_t seed,
                                  double nan_fraction) {
  Rng rng(seed ^ 0xA5A5A5A5DEADBEEFull);
  const int nf = forest.num_features;
  // What the forest does with each feature.
  std::vector<std::vector<float>> thresholds(nf);
  std::vector<int> category_limit(nf, 0);  // categories covered by the widest bitset (0: numeric)
  std::vector<std::vector<uint32_t>> in_set(nf);  // some categories listed in its splits
  for (const Node& n : forest.nodes) {
    if (n.is_leaf() || n.feature < 0 || n.feature >= nf) continue;
    if (n.is_categorical()) {
      category_limit[n.feature] = std::max<int>(category_limit[n.feature], 32 * n.aux);
      for (uint32_t w = 0; w < n.aux && n.payload + w < forest.category_bits.size(); ++w) {
        const uint32_t bits = forest.category_bits[n.payload + w];
        for (int b = 0; b < 32; ++b) {
          if ((bits >> b) & 1u) in_set[n.feature].push_back(32 * w + b);
        }
      }
    } else {
      thresholds[n.feature].push_back(n.threshold);
    }
  }
  for (auto& v : thresholds) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  for (auto& v : in_set) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }

  std::vector<float> rows(static_cast<size_t>(num_rows) * nf);
  for (int64_t r = 0; r < num_rows; ++r) {
    for (int j = 0; j < nf; ++j) {
      float x;
      if (rng.Bernoulli(nan_fraction)) {
        x = std::numeric_limits<float>::quiet_NaN();
      } else if (category_limit[j] > 0) {
        const double u = rng.Uniform();
        if (u < 0.45 && !in_set[j].empty()) {
          x = static_cast<float>(in_set[j][rng.Int(static_cast<int>(in_set[j].size()))]);
        } else if (u < 0.8) {
          x = static_cast<float>(rng.Int(category_limit[j]));
        } else if (u < 0.85) {
          x = static_cast<float>(category_limit[j] + rng.Int(100));  // beyond every bitset
        } else if (u < 0.9) {
          x = -1.0f - static_cast<float>(rng.Int(3));  // negative: invalid category
        } else if (u < 0.95) {
          x = -0.5f;  // invalid for XGBoost, category 0 under LightGBM's (int)x
        } else {
          x = static_cast<float>(rng.Int(category_limit[j])) + 0.5f;  // fractional
        }
      } else {
        const double u = rng.Uniform();
        const std::vector<float>& ts = thresholds[j];
        if (u < 0.3 && !ts.empty()) {
          x = ts[rng.Int(static_cast<int>(ts.size()))];  // exactly a threshold
        } else if (u < 0.38 && !ts.empty()) {
          x = std::nextafter(ts[rng.Int(static_cast<int>(ts.size()))], -INFINITY);
        } else if (u < 0.43) {
          x = 0.0f;
        } else if (u < 0.46) {
          x = rng.Bernoulli(0.5) ? 1e-36f : -1e-36f;
        } else {
          x = static_cast<float>(rng.Uniform(-4.0, 4.0));
        }
      }
      rows[static_cast<size_t>(r) * nf + j] = x;
    }
  }
  return rows;
}

HandForest::HandForest(int num_features, int num_outputs) {
  forest.num_features = num_features;
  forest.num_outputs = num_outputs;
  forest.base_margin.assign(num_outputs, 0.0);
  forest.source = "<hand-built>";
}

Node SplitNode(int feature, float threshold, int left, int right, double cover, uint16_t flags) {
  Node n;
  n.feature = feature;
  n.threshold = threshold;
  n.left = left;
  n.right = right;
  n.cover = cover;
  n.flags = flags;
  return n;
}

Node HandForest::CategoricalSplit(int feature, const std::vector<int>& categories, int left,
                                  int right, double cover, uint16_t flags) {
  int max_category = 0;
  for (int c : categories) max_category = std::max(max_category, c);
  const uint32_t words = static_cast<uint32_t>(max_category / 32 + 1);
  Node n = Split(feature, 0.0f, left, right, cover, static_cast<uint16_t>(flags | kNodeCategorical));
  n.payload = static_cast<uint32_t>(forest.category_bits.size());
  n.aux = words;
  forest.category_bits.resize(forest.category_bits.size() + words, 0u);
  for (int c : categories) forest.category_bits[n.payload + c / 32] |= 1u << (c % 32);
  return n;
}

Node LeafNode(uint32_t payload, double cover, int leaf_id) {
  Node n;
  n.flags = kNodeLeaf;
  n.payload = payload;
  n.cover = cover;
  n.leaf_id = leaf_id;
  return n;
}

Node HandForest::Leaf(std::vector<double> values, double cover, int leaf_id) {
  const Node n = LeafNode(static_cast<uint32_t>(forest.leaf_values.size()), cover, leaf_id);
  forest.leaf_values.insert(forest.leaf_values.end(), values.begin(), values.end());
  return n;
}

void HandForest::AddTree(std::vector<Node> nodes, int group, double weight, int leaf_width,
                         int iteration) {
  Tree tree;
  tree.node_begin = static_cast<uint32_t>(forest.nodes.size());
  tree.num_nodes = static_cast<uint32_t>(nodes.size());
  tree.group = group;
  tree.weight = weight;
  tree.leaf_width = leaf_width;
  const int index = static_cast<int>(forest.trees.size());
  tree.iteration = iteration >= 0 ? iteration
                                  : (leaf_width == 1 ? index / forest.num_outputs : index);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].is_leaf() && nodes[i].leaf_id < 0) nodes[i].leaf_id = static_cast<int32_t>(i);
  }
  forest.nodes.insert(forest.nodes.end(), nodes.begin(), nodes.end());
  forest.trees.push_back(tree);
}

ForestPtr HandForest::Build() {
  absl::StatusOr<ForestPtr> built = BuildForest(forest);
  if (!built.ok()) {
    std::fprintf(stderr, "HandForest: BuildForest failed: %s\n",
                 std::string(built.status().message()).c_str());
    std::abort();
  }
  return *std::move(built);
}

ForestPtr MakeDepth2Tree() {
  HandForest h(2);
  h.AddTree({h.Split(0, 0.5f, 1, 2, 10), h.Split(1, 0.5f, 3, 4, 6), h.Split(1, 0.5f, 5, 6, 4),
             h.Leaf(1.0, 2), h.Leaf(2.0, 4), h.Leaf(3.0, 1), h.Leaf(5.0, 3)});
  return h.Build();
}

}  // namespace grove::testing
