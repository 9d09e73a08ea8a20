#include "core/predict/tahoe/tahoe_forest.h"
#include "core/predict/tahoe/tahoe_lane.h"

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/model/traverse.h"

namespace grove {
namespace {

// splitmix64 finaliser: the token hash (the paper uses SHA-1; any well-mixed hash serves SimHash).
inline uint64_t Mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct Checksum {
  uint64_t w[2] = {0, 0};
};

// Number of equal chunks (chunk width a power of two) between two normalised checksums: the number
// of LSH buckets the two trees share.
inline int Collisions(const Checksum& a, const Checksum& b, int chunk_bits, int chunks) {
  int differing = 0;
  uint64_t low_mask = 0;
  for (int i = 0; i < 64; i += chunk_bits) low_mask |= 1ull << i;
  for (int k = 0; k < 2; ++k) {
    uint64_t y = a.w[k] ^ b.w[k];
    for (int s = 1; s < chunk_bits; s <<= 1) y |= y >> s;
    differing += std::popcount(y & low_mask);
  }
  return chunks - differing;
}

double Probability(const Node& parent_left, const Node& parent_right, bool left) {
  const double l = parent_left.cover, r = parent_right.cover;
  if (!(l + r > 0)) return 0.5;
  return (left ? l : r) / (l + r);
}

int BitsFor(uint64_t n_values) {  // bits to index n_values values (at least 1)
  int b = 1;
  while ((uint64_t{1} << b) < n_values) ++b;
  return b;
}

double Cv(const std::vector<double>& loads) {
  if (loads.empty()) return 0;
  const double mean = std::accumulate(loads.begin(), loads.end(), 0.0) / loads.size();
  if (!(mean > 0)) return 0;
  double var = 0;
  for (double l : loads) var += (l - mean) * (l - mean);
  return std::sqrt(var / loads.size()) / mean;
}

}  // namespace

class TahoeBuilder {
 public:
  TahoeBuilder(const Forest& f, const TahoeFormatOptions& o, TahoeForest& out)
      : f_(f), o_(o), out_(out) {}

  absl::Status Run();

 private:
  // Probability of reaching each node of tree t (relative indices) and its expected visits.
  void NodeProbabilities(int t, std::vector<double>& prob) const;
  bool HotIsRight(const Node* nodes, const Node& n) const {
    if (!o_.node_rearrangement) return false;
    return nodes[n.right].cover > nodes[n.left].cover;
  }
  // Whether a categorical split's set lists no category above 31 (the set fits in the node).
  bool FitsOneWord(const Node& n) const {
    for (uint32_t w = 1; w < n.aux; ++w) {
      if (f_.category_bits[n.payload + w] != 0) return false;
    }
    return true;
  }
  Checksum SimHash(int t, const std::vector<double>& prob) const;
  std::vector<int> TreeOrder();
  void BuildAssignments(const std::vector<int>& order);
  void BuildClassAssignments();

  const Forest& f_;
  const TahoeFormatOptions& o_;
  TahoeForest& out_;
  std::vector<double> orig_work_;  // per model tree
};

void TahoeBuilder::NodeProbabilities(int t, std::vector<double>& prob) const {
  const Tree& tree = f_.trees[t];
  const Node* nodes = f_.TreeNodes(t);
  prob.assign(tree.num_nodes, 0.0);
  prob[0] = 1.0;
  // Preorder indices are not guaranteed; walk with a stack.
  std::vector<int32_t> stack = {0};
  while (!stack.empty()) {
    const int32_t i = stack.back();
    stack.pop_back();
    const Node& n = nodes[i];
    if (n.is_leaf()) continue;
    prob[n.left] = prob[i] * Probability(nodes[n.left], nodes[n.right], true);
    prob[n.right] = prob[i] * Probability(nodes[n.left], nodes[n.right], false);
    stack.push_back(n.left);
    stack.push_back(n.right);
  }
}

// SimHash over the tree's tokens: windows of token_nodes nodes along root-to-leaf paths, cut at
// depths that are multiples of token_nodes (each distinct window once), weighted by the probability
// of the window's last node. A node contributes its feature (or "leaf") and whether it is the hot
// or the cold child, so trees that route rows alike on the same features hash alike.
Checksum TahoeBuilder::SimHash(int t, const std::vector<double>& prob) const {
  const Node* nodes = f_.TreeNodes(t);
  const int T = std::max(1, o_.token_nodes);
  std::array<double, 128> v{};
  struct Item {
    int32_t node;
    int depth;
    uint64_t h;
    uint32_t dir;
  };
  std::vector<Item> stack = {{0, 0, 0, 0}};
  while (!stack.empty()) {
    Item it = stack.back();
    stack.pop_back();
    const Node& n = nodes[it.node];
    uint64_t h = (it.depth % T == 0) ? Mix(static_cast<uint64_t>(it.depth / T) + 0x51ED27ull) : it.h;
    const uint64_t sym = n.is_leaf() ? 0xFFFFFFull : static_cast<uint64_t>(n.feature);
    h = Mix(h ^ (sym * 4 + it.dir + 1));
    if (n.is_leaf() || it.depth % T == T - 1) {
      const double w = prob[it.node];
      const uint64_t h1 = Mix(h ^ 0xA5A5A5A5ull), h2 = Mix(h ^ 0x5A5A5A5A00ull);
      for (int b = 0; b < 64; ++b) {
        v[b] += ((h1 >> b) & 1) ? w : -w;
        v[64 + b] += ((h2 >> b) & 1) ? w : -w;
      }
    }
    if (n.is_leaf()) continue;
    const bool hot_right = HotIsRight(nodes, n);
    const int32_t hot = hot_right ? n.right : n.left, cold = hot_right ? n.left : n.right;
    stack.push_back({cold, it.depth + 1, h, 1});
    stack.push_back({hot, it.depth + 1, h, 0});
  }
  Checksum c;
  for (int b = 0; b < 128; ++b) {
    if (v[b] >= 0) c.w[b / 64] |= 1ull << (b % 64);
  }
  return c;
}

// Trees grouped by output (scalar groups 0..K-1, then vector-leaf trees) so that a thread flushes
// each output about once; within a group, a nearest-neighbour chain over LSH collision counts.
std::vector<int> TahoeBuilder::TreeOrder() {
  const int n = static_cast<int>(f_.trees.size());
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (!o_.tree_rearrangement) return order;

  int chunks = o_.lsh_chunks;
  if (chunks <= 0 || chunks > 128 || 128 % chunks != 0 || !std::has_single_bit(unsigned(chunks))) {
    chunks = 64;
  }
  const int chunk_bits = 128 / chunks;
  std::vector<Checksum> sums(n);
  std::vector<double> prob;
  for (int t = 0; t < n; ++t) {
    NodeProbabilities(t, prob);
    sums[t] = SimHash(t, prob);
  }
  auto key = [&](int t) { return f_.trees[t].leaf_width > 1 ? f_.num_outputs : f_.trees[t].group; };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });

  std::vector<int> result;
  result.reserve(n);
  for (size_t begin = 0; begin < order.size();) {
    size_t end = begin;
    while (end < order.size() && key(order[end]) == key(order[begin])) ++end;
    std::vector<int> g(order.begin() + begin, order.begin() + end);
    const size_t m = g.size();
    if (m > 16384) {
      // Too many trees for the quadratic chain: LSH-bucket order (sort by checksum).
      std::stable_sort(g.begin(), g.end(), [&](int a, int b) {
        return std::make_pair(sums[a].w[1], sums[a].w[0]) < std::make_pair(sums[b].w[1], sums[b].w[0]);
      });
      result.insert(result.end(), g.begin(), g.end());
    } else if (m > 0) {
      // Start from the pair with the most collisions, then repeatedly place the unplaced tree that
      // collides most with the last placed one (ties: model order).
      int best = -1;
      size_t start = 0;
      for (size_t i = 0; i < m && m > 1; ++i) {
        for (size_t j = i + 1; j < m; ++j) {
          const int c = Collisions(sums[g[i]], sums[g[j]], chunk_bits, chunks);
          if (c > best) {
            best = c;
            start = i;
          }
        }
      }
      std::vector<char> used(m, 0);
      size_t cur = start;
      used[cur] = 1;
      result.push_back(g[cur]);
      for (size_t placed = 1; placed < m; ++placed) {
        int best_c = -1;
        size_t next = 0;
        for (size_t j = 0; j < m; ++j) {
          if (used[j]) continue;
          const int c = Collisions(sums[g[cur]], sums[g[j]], chunk_bits, chunks);
          if (c > best_c) {
            best_c = c;
            next = j;
          }
        }
        used[next] = 1;
        result.push_back(g[next]);
        cur = next;
      }
    }
    begin = end;
  }
  return result;
}

// Assignments of the Tahoe order to G thread groups: rounds of G consecutive trees (similar trees,
// run at the same time by different groups), each round's heaviest tree to the least loaded group.
void TahoeBuilder::BuildAssignments(const std::vector<int>& order) {
  const int n = static_cast<int>(order.size());
  out_.assignments_.clear();
  BuildClassAssignments();
  for (int groups = 1; groups <= TahoeForest::kMaxGroups; groups *= 2) {
    TahoeAssignment a;
    a.groups = groups;
    std::vector<std::vector<uint32_t>> lists(groups);
    std::vector<double> load(groups, 0.0);
    if (!o_.tree_rearrangement) {
      for (int i = 0; i < n; ++i) lists[i % groups].push_back(i);  // FIL: round-robin
    } else {
      std::vector<int> by_load(groups);
      for (int r = 0; r < n; r += groups) {
        const int e = std::min(n, r + groups);
        std::vector<int> round(e - r);
        std::iota(round.begin(), round.end(), r);
        std::stable_sort(round.begin(), round.end(), [&](int x, int y) {
          return out_.tree_work_[x] > out_.tree_work_[y];
        });
        std::iota(by_load.begin(), by_load.end(), 0);
        std::stable_sort(by_load.begin(), by_load.end(),
                         [&](int x, int y) { return load[x] < load[y]; });
        for (size_t k = 0; k < round.size(); ++k) {
          const int g = by_load[k];
          lists[g].push_back(round[k]);
          load[g] += out_.tree_work_[round[k]];
        }
      }
    }
    a.offsets.push_back(0);
    for (int g = 0; g < groups; ++g) {
      a.order.insert(a.order.end(), lists[g].begin(), lists[g].end());
      a.offsets.push_back(static_cast<uint32_t>(a.order.size()));
    }
    out_.assignments_.push_back(std::move(a));
  }
}

// Class-aware assignments: the G groups are dealt to the K outputs (group g to output g % K) and
// each output's trees, in Tahoe order, each to the least loaded of its groups.
void TahoeBuilder::BuildClassAssignments() {
  out_.class_assignments_.clear();
  const int K = f_.num_outputs;
  bool scalar = K > 1;
  for (const TahoeTree& t : out_.trees_) scalar = scalar && t.group >= 0 && t.group < K;
  for (int groups = 1; groups <= TahoeForest::kMaxGroups; groups *= 2) {
    TahoeAssignment a;
    if (scalar && groups >= K) {
      a.groups = groups;
      std::vector<std::vector<uint32_t>> lists(groups);
      std::vector<double> load(groups, 0.0);
      for (int k = 0; k < K; ++k) {
        for (uint32_t i = 0; i < out_.trees_.size(); ++i) {
          if (out_.trees_[i].group != k) continue;
          int best = k;
          for (int g = k + K; g < groups; g += K) {
            if (load[g] < load[best]) best = g;
          }
          lists[best].push_back(i);
          load[best] += out_.tree_work_[i];
        }
      }
      a.offsets.push_back(0);
      for (int g = 0; g < groups; ++g) {
        a.order.insert(a.order.end(), lists[g].begin(), lists[g].end());
        a.offsets.push_back(static_cast<uint32_t>(a.order.size()));
      }
    }
    out_.class_assignments_.push_back(std::move(a));
  }
}

absl::Status TahoeBuilder::Run() {
  const int n = static_cast<int>(f_.trees.size());
  if (n == 0) return absl::InvalidArgumentError("tahoe: model has no trees");
  if (f_.nodes.size() >= (uint64_t{1} << 31)) {
    return absl::InvalidArgumentError("tahoe: too many nodes for 32-bit indices");
  }
  // Expected visits per model tree.
  orig_work_.assign(n, 0.0);
  std::vector<double> prob;
  for (int t = 0; t < n; ++t) {
    NodeProbabilities(t, prob);
    orig_work_[t] = std::accumulate(prob.begin(), prob.end(), 0.0);
  }
  out_.iterations_sorted_ = true;
  for (int t = 1; t < n; ++t) {
    if (f_.trees[t].iteration < f_.trees[t - 1].iteration) out_.iterations_sorted_ = false;
  }

  // Scalar leaves inline as float32 when the total rounding of weight * value is far below the
  // 1e-5 tolerance; otherwise doubles in the leaf table.
  double rounding = 0;
  for (int t = 0; t < n && std::isfinite(rounding); ++t) {
    const Tree& tree = f_.trees[t];
    if (tree.leaf_width != 1) continue;
    const Node* nodes = f_.TreeNodes(t);
    double worst = 0;
    for (uint32_t i = 0; i < tree.num_nodes; ++i) {
      if (!nodes[i].is_leaf() || nodes[i].aux != 0) continue;
      const double wv = tree.weight * f_.leaf_values[nodes[i].payload];
      const float fv = static_cast<float>(wv);
      const double err = std::isfinite(fv) ? std::abs(wv - static_cast<double>(fv))
                                           : std::numeric_limits<double>::infinity();
      worst = std::max(worst, err);
    }
    rounding += worst;
  }
  const bool inline_leaves = rounding <= 1e-7;

  const std::vector<int> order = TreeOrder();
  out_.trees_.resize(n);
  out_.tree_work_.resize(n);
  std::vector<TahoeNode16> wide;
  wide.reserve(f_.nodes.size());
  out_.leaf_ids_.clear();
  out_.leaf_ids_.reserve(f_.nodes.size());
  out_.covers_.clear();
  out_.covers_.reserve(f_.nodes.size());
  // Categorical splits: the rule of the sets held in nodes and in a padded table (the first
  // categorical split's), and the table's width.
  bool any_categorical = false, mixed_rules = false;
  uint32_t table_words = 0;
  int64_t table_sets = 0;
  for (const Node& nd : f_.nodes) {
    if (nd.is_leaf() || !nd.is_categorical()) continue;
    const bool truncate = (nd.flags & kNodeCategoryTruncate) != 0;
    if (!any_categorical) out_.cat_truncate_ = truncate;
    any_categorical = true;
    mixed_rules |= truncate != out_.cat_truncate_;
    if (!FitsOneWord(nd)) {
      table_words = std::max(table_words, nd.aux);
      ++table_sets;
    }
  }
  // Table sets padded to one width let a split read one word of its set instead of its record and
  // then a word; not for sets of thousands of categories (every set would be padded to them).
  const bool padded = table_words > 0 && !mixed_rules &&
                      table_words <= TahoeForest::kMaxPaddedCatWords &&
                      table_sets * table_words <= TahoeForest::kMaxPaddedCatTotalWords;
  out_.cat_words_ = padded ? table_words : 0;
  if (!padded) out_.cat_bits_ = f_.category_bits;
  out_.linear_features_ = f_.linear_features;
  out_.linear_coeffs_ = f_.linear_coeffs;
  uint64_t max_distant = 0;
  double visits = 0;
  int max_depth = 0;

  struct Item {
    int32_t node;
    int64_t parent;  // new index of the parent when this is its distant child, else -1
  };
  std::vector<Item> stack;
  for (int i = 0; i < n; ++i) {
    const int t = order[i];
    const Tree& tree = f_.trees[t];
    const Node* nodes = f_.TreeNodes(t);
    TahoeTree& tt = out_.trees_[i];
    tt.root = static_cast<uint32_t>(wide.size());
    tt.orig = static_cast<uint32_t>(t);
    tt.group = tree.leaf_width > 1 ? -1 : tree.group;
    tt.iteration = tree.iteration;
    out_.tree_work_[i] = orig_work_[t];
    visits += orig_work_[t];
    max_depth = std::max(max_depth, tree.depth);
    stack.clear();
    stack.push_back({0, -1});
    while (!stack.empty()) {
      const Item it = stack.back();
      stack.pop_back();
      const int64_t j = static_cast<int64_t>(wide.size());
      if (it.parent >= 0) {
        const uint64_t d = static_cast<uint64_t>(j - it.parent);
        wide[it.parent].distant = static_cast<uint32_t>(d);
        max_distant = std::max(max_distant, d);
      }
      const Node& nd = nodes[it.node];
      TahoeNode16 w{0, 0, 0, 0};
      if (nd.is_leaf()) {
        w.flags = tahoe_bits::kLeaf;
        if (nd.aux != 0) {
          const LinearLeaf& ll = f_.linear_leaves[nd.aux - 1];
          w.flags |= tahoe_bits::kLeafTable | tahoe_bits::kLeafLinear;
          w.value = static_cast<uint32_t>(out_.linear_leaves_.size());
          out_.linear_leaves_.push_back(TahoeLinearLeaf{ll.constant, f_.leaf_values[nd.payload],
                                                        tree.weight, ll.begin, ll.count});
        } else if (tree.leaf_width > 1 || !inline_leaves) {
          w.flags |= tahoe_bits::kLeafTable;
          w.value = static_cast<uint32_t>(out_.leaf_table_.size());
          for (int k = 0; k < tree.leaf_width; ++k) {
            out_.leaf_table_.push_back(tree.weight * f_.leaf_values[nd.payload + k]);
          }
        } else {
          const float v = static_cast<float>(tree.weight * f_.leaf_values[nd.payload]);
          std::memcpy(&w.value, &v, sizeof v);
        }
        w.feature = static_cast<uint32_t>(f_.num_features);  // the padding feature: see TahoeWalkFixed
        out_.leaf_ids_.push_back(nd.leaf_id);
        out_.covers_.push_back(nd.cover);
        wide.push_back(w);
        continue;
      }
      const bool hot_right = HotIsRight(nodes, nd);
      w.feature = static_cast<uint32_t>(nd.feature);
      if (nd.is_categorical()) {
        // Normalised so that listed categories go left (tahoe_node.h): a split whose listed
        // categories go right (XGBoost) trades the names of its children, so its NaN direction
        // and which child is the hot one's side flip; the children themselves stay where they are.
        const bool swap = !(nd.flags & kNodeCategoryInSetGoesLeft);
        const bool nan_left = nd.default_left() != swap;
        const bool truncate = (nd.flags & kNodeCategoryTruncate) != 0;
        w.flags |= tahoe_bits::kCategorical;
        if (nan_left) w.flags |= tahoe_bits::kDefaultLeft;
        if (hot_right != swap) w.flags |= tahoe_bits::kHotRight;
        if (truncate == out_.cat_truncate_ && FitsOneWord(nd)) {
          w.value = nd.aux > 0 ? f_.category_bits[nd.payload] : 0u;
        } else if (out_.cat_words_ > 0) {
          w.flags |= tahoe_bits::kCatTable;
          w.value = static_cast<uint32_t>(out_.cat_bits_.size());
          out_.cat_bits_.insert(out_.cat_bits_.end(), f_.category_bits.begin() + nd.payload,
                                f_.category_bits.begin() + nd.payload + nd.aux);
          out_.cat_bits_.resize(out_.cat_bits_.size() + (out_.cat_words_ - nd.aux), 0u);
        } else {
          w.flags |= tahoe_bits::kCatTable;
          w.value = static_cast<uint32_t>(out_.cat_splits_.size());
          const uint32_t rule = decision_bits::kCategorical |
                                decision_bits::kCategoryInSetGoesLeft |
                                (nan_left ? decision_bits::kDefaultLeft : 0u) |
                                (truncate ? decision_bits::kCategoryTruncate : 0u);
          out_.cat_splits_.push_back(TahoeCatSplit{nd.payload, nd.aux, rule, 0});
        }
      } else {
        if (hot_right) w.flags |= tahoe_bits::kHotRight;
        bool nan_left = nd.default_left();
        if ((nd.flags & kNodeNanAsZero) && !(nd.flags & kNodeMissingZero)) {
          nan_left = 0.0f < nd.threshold;  // NaN compares as 0.0: a fixed direction
        }
        if (nan_left) w.flags |= tahoe_bits::kDefaultLeft;
        if (nd.flags & kNodeMissingZero) w.flags |= tahoe_bits::kMissingZero;
        std::memcpy(&w.value, &nd.threshold, sizeof w.value);
      }
      out_.leaf_ids_.push_back(-1);
      out_.covers_.push_back(nd.cover);
      wide.push_back(w);
      const int32_t hot = hot_right ? nd.right : nd.left, cold = hot_right ? nd.left : nd.right;
      stack.push_back({cold, j});
      stack.push_back({hot, -1});
    }
  }

  // Numeric splits with the missing-zero rule take the generic walk; categorical splits take the
  // fixed one too (TahoeFixedStep's kCat), but not the simple one.
  bool missing_zero = false;
  for (const TahoeNode16& w : wide) {
    if (!(w.flags & tahoe_bits::kLeaf) && !(w.flags & tahoe_bits::kCategorical) &&
        (w.flags & tahoe_bits::kMissingZero)) {
      missing_zero = true;
      break;
    }
  }
  out_.categorical_ = any_categorical;
  // Sets of up to 64 categories, the common case of LightGBM's categorical columns: every set is
  // read as 64 bits (a padded table of wider sets, or records, keeps the general test).
  // The features of categorical splits, and whether one of them is split numerically too (the
  // libraries never do; a feature of both kinds cannot be staged as category codes).
  const size_t feature_words = (static_cast<size_t>(f_.num_features) + 31) / 32;
  std::vector<uint32_t> cat_features(feature_words, 0u), num_features(feature_words, 0u);
  for (const Node& nd : f_.nodes) {
    if (nd.is_leaf() || nd.feature < 0 || nd.feature >= f_.num_features) continue;
    std::vector<uint32_t>& kind = nd.is_categorical() ? cat_features : num_features;
    kind[static_cast<size_t>(nd.feature) >> 5] |= 1u << (nd.feature & 31);
  }
  bool mixed_features = false;
  for (size_t i = 0; i < feature_words; ++i) {
    mixed_features |= (cat_features[i] & num_features[i]) != 0;
  }
  out_.cat_pairs_ = any_categorical && out_.cat_splits_.empty() && out_.cat_words_ <= 2 &&
                    !mixed_features;
  if (out_.cat_pairs_) out_.cat_features_ = std::move(cat_features);
  out_.simple_ = !missing_zero && !any_categorical;
  const int fbits = BitsFor(static_cast<uint64_t>(f_.num_features) + 1);
  const int dbits = 32 - tahoe_bits::kNumFlags - fbits;
  out_.wide_ = o_.force_wide_nodes || dbits < 1 || max_distant >= (uint64_t{1} << dbits);
  out_.feature_bits_ = out_.wide_ ? 0 : static_cast<uint32_t>(fbits);
  // The fixed walk needs leaves whose flags leave a split's routing bits clear (linear leaves reuse
  // kHotRight) and nodes whose word carries the padding feature (8-byte nodes).
  out_.fixed_walk_ = !missing_zero && !out_.wide_ && out_.linear_leaves_.empty();
  if (out_.wide_) {
    out_.nodes16_ = std::move(wide);
  } else {
    out_.nodes8_.resize(wide.size());
    for (size_t i = 0; i < wide.size(); ++i) {
      const TahoeNode16& w = wide[i];
      out_.nodes8_[i].value = w.value;
      out_.nodes8_[i].word = w.feature | (w.flags << fbits) |
                             (w.distant << (fbits + tahoe_bits::kNumFlags));
    }
  }
  BuildAssignments(order);

  TahoeFormatStats& s = out_.stats_;
  s.expected_visits_per_row = visits;
  s.mean_depth = visits / n;
  s.max_depth = max_depth;
  out_.fixed_steps_ =
      out_.fixed_walk_ && max_depth <= TahoeForest::kMaxFixedSteps ? std::max(1, max_depth) : 0;
  s.feature_bits = static_cast<int>(out_.feature_bits_);
  s.node_bytes = out_.node_bytes();
  const int64_t num_nodes = static_cast<int64_t>(out_.leaf_ids_.size());
  s.forest_smem_bytes = num_nodes * s.node_bytes + n * static_cast<int64_t>(sizeof(TahoeTree));
  int64_t assign_bytes = 0;
  for (const TahoeAssignment& a : out_.assignments_) {
    assign_bytes += static_cast<int64_t>((a.order.size() + a.offsets.size()) * sizeof(uint32_t));
  }
  s.format_bytes = s.forest_smem_bytes + num_nodes * 4 +
                   static_cast<int64_t>(out_.cat_splits_.size() * sizeof(TahoeCatSplit) +
                                        out_.cat_bits_.size() * 4 +
                                        out_.cat_features_.size() * 4 +
                                        out_.leaf_table_.size() * 8 +
                                        out_.linear_leaves_.size() * sizeof(TahoeLinearLeaf) +
                                        out_.linear_features_.size() * 4 +
                                        out_.linear_coeffs_.size() * 8 + f_.num_outputs * 8) +
                   assign_bytes;
  s.inline_leaves = inline_leaves;
  // Table 3 measure at 32 groups: FIL's round-robin over the model order vs this assignment.
  {
    const int groups = 32;
    std::vector<double> before(groups, 0.0);
    for (int t = 0; t < n; ++t) before[t % groups] += orig_work_[t];
    s.cv_before = Cv(before);
    s.cv_after = out_.AssignmentCv(out_.Assignment(groups));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const TahoeForest>> TahoeForest::Build(
    ForestPtr forest, const TahoeFormatOptions& options) {
  if (forest == nullptr) return absl::InvalidArgumentError("tahoe: no model");
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<TahoeForest> tf(new TahoeForest());
  tf->forest_ = forest;
  tf->options_ = options;
  TahoeBuilder builder(*forest, tf->options_, *tf);
  if (absl::Status s = builder.Run(); !s.ok()) return s;
  tf->stats_.build_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return std::shared_ptr<const TahoeForest>(std::move(tf));
}

TahoeForestView TahoeForest::HostView() const {
  TahoeForestView v;
  v.nodes = wide_ ? static_cast<const void*>(nodes16_.data())
                  : static_cast<const void*>(nodes8_.data());
  v.trees = trees_.data();
  v.cat_splits = cat_splits_.data();
  v.cat_bits = cat_bits_.data();
  v.cat_features = cat_features_.empty() ? nullptr : cat_features_.data();
  v.leaf_table = leaf_table_.data();
  v.linear_leaves = linear_leaves_.data();
  v.linear_features = linear_features_.data();
  v.linear_coeffs = linear_coeffs_.data();
  v.leaf_ids = leaf_ids_.data();
  v.base_margin = forest_->base_margin.data();
  v.num_trees = static_cast<int32_t>(trees_.size());
  v.num_nodes = static_cast<int32_t>(leaf_ids_.size());
  v.num_features = forest_->num_features;
  v.num_outputs = forest_->num_outputs;
  v.feature_bits = feature_bits_;
  v.fixed_steps = fixed_steps_;
  v.cat_truncate = cat_truncate_;
  v.cat_words = cat_words_;
  v.cat_low = cat_truncate_ ? -0.99999994f : 0.0f;
  v.cat_word_bit = tahoe_bits::kCategorical << feature_bits_;
  v.cat_word_test = (tahoe_bits::kCategorical | tahoe_bits::kLeaf) << feature_bits_;
  v.cat_word_table = tahoe_bits::kCatTable << feature_bits_;
  v.word_feature_mask = (1u << feature_bits_) - 1u;
  v.word_leaf_bit = tahoe_bits::kLeaf << feature_bits_;
  v.word_default_left_bit = tahoe_bits::kDefaultLeft << feature_bits_;
  v.word_hot_right_bit = tahoe_bits::kHotRight << feature_bits_;
  v.word_distant_shift = feature_bits_ + tahoe_bits::kNumFlags;
  return v;
}

const TahoeAssignment& TahoeForest::Assignment(int groups) const {
  size_t i = 0;
  while (i + 1 < assignments_.size() && assignments_[i].groups < groups) ++i;
  return assignments_[i];
}

double TahoeForest::AssignmentCv(const TahoeAssignment& a) const {
  std::vector<double> loads(a.groups, 0.0);
  for (int g = 0; g < a.groups; ++g) {
    for (uint32_t i = a.offsets[g]; i < a.offsets[g + 1]; ++i) loads[g] += tree_work_[a.order[i]];
  }
  return Cv(loads);
}

absl::StatusOr<std::vector<TahoePart>> TahoeForest::SplitIntoParts(int64_t max_bytes) const {
  std::vector<TahoePart> parts;
  const int64_t nb = node_bytes();
  const uint32_t n = static_cast<uint32_t>(trees_.size());
  const uint32_t total_nodes = static_cast<uint32_t>(leaf_ids_.size());
  auto tree_end_node = [&](uint32_t i) { return i + 1 < n ? trees_[i + 1].root : total_nodes; };
  uint32_t i = 0;
  while (i < n) {
    TahoePart p{i, i, trees_[i].root, trees_[i].root};
    while (p.tree_end < n) {
      const uint32_t node_end = tree_end_node(p.tree_end);
      const int64_t bytes = static_cast<int64_t>(node_end - p.node_begin) * nb +
                            static_cast<int64_t>(p.tree_end + 1 - p.tree_begin) * 16;
      if (bytes > max_bytes) break;
      p.node_end = node_end;
      ++p.tree_end;
    }
    if (p.tree_end == p.tree_begin) {
      return absl::InvalidArgumentError(absl::StrCat("tahoe: tree ", trees_[i].orig, " needs ",
                                                     (tree_end_node(i) - trees_[i].root) * nb,
                                                     " bytes, more than ", max_bytes,
                                                     " bytes of shared memory"));
    }
    parts.push_back(p);
    i = p.tree_end;
  }
  return parts;
}

double TahoeForest::ExpectedVisits(int it_begin, int it_end) const {
  double v = 0;
  for (size_t i = 0; i < trees_.size(); ++i) {
    if (trees_[i].iteration >= it_begin && trees_[i].iteration < it_end) v += tree_work_[i];
  }
  return v;
}

bool TahoeForest::LeafColumnBase(int it_begin, int it_end, int32_t* base) const {
  const Forest& f = *forest_;
  if (it_begin <= 0 && it_end >= f.num_iterations) {
    *base = 0;
    return true;
  }
  if (!iterations_sorted_) return false;
  int32_t first = 0;
  while (first < static_cast<int32_t>(f.trees.size()) && f.trees[first].iteration < it_begin) {
    ++first;
  }
  *base = first;
  return true;
}

std::string TahoeForest::Describe() const {
  const TahoeFormatStats& s = stats_;
  return absl::StrFormat(
      "tahoe format: %d trees, %d nodes of %d bytes (feature index %d bits), %.1f visits/row, "
      "max depth %d, %s leaves, %s walk, %.2f MB; tree balance CV at 32 groups %.1f%% -> %.1f%%; node "
      "rearrangement %s, tree rearrangement %s; built in %.1f ms",
      static_cast<int>(trees_.size()), static_cast<int>(leaf_ids_.size()), s.node_bytes,
      s.feature_bits, s.expected_visits_per_row, s.max_depth,
      s.inline_leaves ? "inline float" : "double-table",
      fixed_walk_ ? (!categorical_ ? "fixed (branch-free)"
                     : cat_pairs_  ? "fixed (branch-free, categorical sets of 64 bits)"
                                   : "fixed (branch-free, categorical)")
                  : simple_ ? "simple" : "general", s.format_bytes / 1e6, 100 * s.cv_before,
      100 * s.cv_after, options_.node_rearrangement ? "on" : "off",
      options_.tree_rearrangement ? "on" : "off", 1e3 * s.build_seconds);
}

absl::StatusOr<TahoeCall> TahoePrepareCall(const TahoeForest& tf, RowsView rows,
                                           const PredictOptions& options, MatrixView<float> out) {
  const Forest& forest = tf.forest();
  if (rows.cols != forest.num_features) {
    return absl::InvalidArgumentError(absl::StrCat("rows have ", rows.cols,
                                                   " columns; the model has ",
                                                   forest.num_features, " features"));
  }
  if (rows.rows < 0 || rows.stride < rows.cols || (rows.rows > 0 && rows.data == nullptr)) {
    return absl::InvalidArgumentError("malformed rows view");
  }
  IterationRange range;
  if (absl::Status s = ResolveIterationRange(forest, options.iteration_begin,
                                             options.iteration_end, &range);
      !s.ok()) {
    return s;
  }
  TahoeCall call;
  call.kind = options.kind;
  call.width = PredictWidth(forest, options);
  if (out.rows != rows.rows || out.cols != call.width || out.stride < out.cols ||
      (out.rows > 0 && out.data == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("output is ", out.rows, " x ", out.cols,
                                                   "; expected ", rows.rows, " x ", call.width,
                                                   " for ", OutputKindName(options.kind)));
  }
  call.row_params.it_begin = range.begin;
  call.row_params.it_end = range.end;
  if (options.kind == OutputKind::kLeaf &&
      !tf.LeafColumnBase(range.begin, range.end, &call.row_params.leaf_col_base)) {
    return absl::FailedPreconditionError(
        "tahoe: leaf output over part of the rounds of a model whose trees are not in round order");
  }
  call.transform = MakeTransformParams(forest, range.size());
  return call;
}

absl::Status TahoePredictHost(const TahoeForest& tf, RowsView rows, const PredictOptions& options,
                              MatrixView<float> out, int groups) {
  absl::StatusOr<TahoeCall> call = TahoePrepareCall(tf, rows, options, out);
  if (!call.ok()) return call.status();
  const TahoeForestView v = tf.HostView();
  const TahoeAssignment& a = tf.Assignment(std::max(1, groups));
  const int K = v.num_outputs;
  const bool multi = K > 1;
  const bool prediction = call->kind == OutputKind::kPrediction;
  std::vector<double> m(K), part(K);
  const uint32_t nf = static_cast<uint32_t>(v.num_features);
  for (int64_t r = 0; r < rows.rows; ++r) {
    const TahoePlainRow row{rows.Row(r)};
    const TahoeNanPaddedRow<TahoePlainRow> padded{row, nf};
    float* o = out.Row(r);
    float* leaf_out = call->kind == OutputKind::kLeaf ? o : nullptr;
    std::fill(m.begin(), m.end(), 0.0);
    double sum = 0;
    for (int g = 0; g < a.groups; ++g) {
      auto run = [&](auto& acc) {
        auto walk = [&](const auto* nodes) {
          if (tf.fixed_walk() && tf.cat_pairs()) {
            TahoeAccumulateTrees<kTahoeWalkFixedCatPairs>(v, nodes, 0, v.trees, a.order.data(),
                                                          a.offsets[g], a.offsets[g + 1],
                                                          call->row_params, padded, acc, leaf_out);
          } else if (tf.fixed_walk() && tf.categorical()) {
            TahoeAccumulateTrees<kTahoeWalkFixedCat>(v, nodes, 0, v.trees, a.order.data(),
                                                     a.offsets[g], a.offsets[g + 1],
                                                     call->row_params, padded, acc, leaf_out);
          } else if (tf.fixed_walk()) {
            TahoeAccumulateTrees<kTahoeWalkFixed>(v, nodes, 0, v.trees, a.order.data(),
                                                  a.offsets[g], a.offsets[g + 1], call->row_params,
                                                  padded, acc, leaf_out);
          } else if (tf.simple()) {
            TahoeAccumulateTrees<kTahoeWalkSimple>(v, nodes, 0, v.trees, a.order.data(),
                                                   a.offsets[g], a.offsets[g + 1],
                                                   call->row_params, row, acc, leaf_out);
          } else {
            TahoeAccumulateTrees<kTahoeWalkGeneric>(v, nodes, 0, v.trees, a.order.data(),
                                                    a.offsets[g], a.offsets[g + 1],
                                                    call->row_params, row, acc, leaf_out);
          }
        };
        if (tf.wide()) {
          walk(tf.nodes16().data());
        } else {
          walk(tf.nodes8().data());
        }
      };
      if (multi) {
        std::fill(part.begin(), part.end(), 0.0);
        TahoeGroupAcc acc(part.data());
        run(acc);
        for (int k = 0; k < K; ++k) m[k] += part[k];
      } else {
        TahoeScalarAcc acc;
        run(acc);
        sum += acc.sum;
      }
    }
    if (leaf_out != nullptr) continue;
    if (multi) {
      TahoeFinalizeRow(v, call->transform, prediction, m.data(), o);
    } else {
      TahoeFinalizeScalar(v, call->transform, prediction, sum, o);
    }
  }
  return absl::OkStatus();
}

bool TahoeLaneEligible(const TahoeForest& tf) {
  const Forest& f = tf.forest();
  // The lane walk's step is numeric only.
  if (!tf.fixed_walk() || tf.categorical() || f.num_outputs != 1 || !tf.stats().inline_leaves) {
    return false;
  }
  const uint32_t fb = tf.HostView().feature_bits;
  for (const TahoeNode8& n : tf.nodes8()) {
    const TahoeDecoded d = TahoeDecode(n, fb);
    // A NaN read as +-inf must fall on its default side of every threshold.
    if (!(d.flags & tahoe_bits::kLeaf) && !std::isfinite(TahoeBitsToFloat(d.value))) return false;
  }
  return true;
}

namespace {

// The slots of one lane part being filled: rows of kTahoeLaneTrees slots, and per virtual column
// (single: column j; paired: 2 per column pair) the next free row. A tree is placed as chains, each
// a node and its left descendants in consecutive rows of one virtual column; right children start
// new chains later, and their parents' deltas are filled in then (signed: a chain may start in a row
// above its parent's).
class LanePart {
 public:
  LanePart(const TahoeForest& tf, bool paired, uint32_t nan_column, uint32_t column_bits)
      : tf_(&tf),
        paired_(paired),
        nan_column_(nan_column),
        column_bits_(column_bits),
        feature_bits_(tf.HostView().feature_bits),
        cursor_(kTahoeLaneTrees, 0) {}

  uint32_t rows() const { return static_cast<uint32_t>(cells_.size() / kTahoeLaneTrees); }
  const std::vector<TahoeLaneNode>& cells() const { return cells_; }
  uint32_t nodes() const { return nodes_; }

  // Places the tree whose root is Tahoe node `root` (kNoTree: a zero leaf) for lane `lane`; returns
  // the root's slot within the part.
  static constexpr uint32_t kNoTree = ~0u;
  absl::StatusOr<uint32_t> PlaceTree(uint32_t root, int lane) {
    const int h = lane >= kTahoeLaneTrees / 2 ? 1 : 0;
    const int group = paired_ ? lane % (kTahoeLaneTrees / 2) : lane;
    struct Pending {
      uint32_t node, depth, parent_slot;
    };
    constexpr uint32_t kRoot = ~0u;
    std::vector<Pending> pending{{root, 0, kRoot}};
    uint32_t root_slot = 0;
    while (!pending.empty()) {
      // Of the latest pending chains, the one that starts lowest (a paired chain's first row must
      // have its depth's parity: a mismatch costs a padding cell).
      constexpr size_t kLook = 32;
      size_t best = pending.size() - 1;
      int best_v = 0;
      uint32_t best_row = ~0u;
      for (size_t k = pending.size(); k-- > pending.size() - std::min(kLook, pending.size());) {
        for (int v = 0; v < (paired_ ? 2 : 1); ++v) {
          uint32_t r = cursor_[VirtualColumn(group, v)];
          if (paired_ && ((r + v + pending[k].depth + h) & 1)) ++r;
          if (r < best_row) best = k, best_v = v, best_row = r;
        }
      }
      const Pending item = pending[best];
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(best));
      const int vcol = VirtualColumn(group, best_v);
      uint32_t row = best_row;
      uint32_t x = item.node, depth = item.depth;
      for (;; ++row, ++depth) {
        const uint32_t slot = Slot(group, best_v, row);
        if (cells_.size() <= slot) cells_.resize((row + 1) * size_t{kTahoeLaneTrees}, Filler());
        if (x == item.node) {
          if (item.parent_slot == kRoot) {
            root_slot = slot;
          } else if (absl::Status st = SetDelta(item.parent_slot, slot); !st.ok()) {
            return st;
          }
        }
        TahoeLaneNode& c = cells_[slot];
        ++nodes_;
        if (x == kNoTree) {
          c = Filler();
          break;
        }
        const TahoeDecoded d = TahoeDecode(tf_->nodes8()[x], feature_bits_);
        c.value = d.value;
        if (d.flags & tahoe_bits::kLeaf) {
          c.word = nan_column_;
          break;
        }
        c.word = 2 * d.feature + ((d.flags & tahoe_bits::kDefaultLeft) ? 0u : 1u);
        const bool hot_right = (d.flags & tahoe_bits::kHotRight) != 0;
        const uint32_t left = hot_right ? x + d.distant : x + 1;
        const uint32_t right = hot_right ? x + 1 : x + d.distant;
        pending.push_back({right, depth + 1, slot});
        x = left;
      }
      cursor_[vcol] = row + 1;
    }
    return root_slot;
  }

 private:
  int VirtualColumn(int group, int v) const { return paired_ ? 2 * group + v : group; }
  // Slot of row `row` of virtual column v of `group` (a column, or a column pair).
  uint32_t Slot(int group, int v, uint32_t row) const {
    const uint32_t column = paired_ ? group + (kTahoeLaneTrees / 2) * ((row + v) & 1) : group;
    return row * kTahoeLaneTrees + column;
  }
  TahoeLaneNode Filler() const { return TahoeLaneNode{0u, nan_column_}; }
  absl::Status SetDelta(uint32_t from, uint32_t to) {
    const int64_t delta = (int64_t{to} - int64_t{from}) * int64_t{sizeof(TahoeLaneNode)};
    const int64_t limit = int64_t{1} << (31 - column_bits_);
    if (delta < -limit || delta >= limit) {
      return absl::InvalidArgumentError("tahoe: a tree is too large for the lane layout");
    }
    cells_[from].word |= static_cast<uint32_t>(delta) << column_bits_;
    return absl::OkStatus();
  }

  const TahoeForest* tf_;
  bool paired_;
  uint32_t nan_column_, column_bits_, feature_bits_;
  std::vector<uint32_t> cursor_;  // single: column j; paired: 2 * pair + v
  std::vector<TahoeLaneNode> cells_;
  uint32_t nodes_ = 0;
};

absl::StatusOr<TahoeLaneLayout> BuildLanes(const TahoeForest& tf, int64_t max_part_bytes,
                                           bool paired) {
  const Forest& f = tf.forest();
  const std::vector<TahoeTree>& trees = tf.trees();
  const uint32_t n = static_cast<uint32_t>(trees.size());
  const uint32_t total_nodes = static_cast<uint32_t>(tf.nodes8().size());
  TahoeLaneLayout out;
  out.paired = paired;
  out.columns = 2 * f.num_features + 1;
  out.column_bits = static_cast<uint32_t>(BitsFor(static_cast<uint64_t>(out.columns)));
  const uint32_t nan_column = static_cast<uint32_t>(2 * f.num_features);
  auto size = [&](uint32_t i) { return (i + 1 < n ? trees[i + 1].root : total_nodes) - trees[i].root; };
  auto depth = [&](uint32_t i) { return f.trees[trees[i].orig].depth; };
  auto steps_of = [&](uint32_t i) {
    return (static_cast<uint32_t>(depth(i)) + kTahoeLaneUnroll - 1) / kTahoeLaneUnroll * kTahoeLaneUnroll;
  };
  // Deepest first, then largest: bundles of like trees waste few steps and, in the single layout,
  // few slots (a column stacks tree j of every bundle).
  std::vector<uint32_t> sorted(n);
  std::iota(sorted.begin(), sorted.end(), 0u);
  std::stable_sort(sorted.begin(), sorted.end(), [&](uint32_t a, uint32_t b) {
    return depth(a) != depth(b) ? depth(a) > depth(b) : size(a) > size(b);
  });
  const int T = kTahoeLaneTrees;
  constexpr uint32_t kNone = LanePart::kNoTree;
  // order[b * T + j]: tree j of bundle b (kNone: a zero leaf).
  std::vector<uint32_t> order;
  if (!paired) {
    order = sorted;
  } else {
    // A column pair holds two lanes' trees: within each run of trees taking the same steps, the
    // i-th largest goes to lane j < 8 and the i-th smallest to lane j + 8 of the same bundle, so
    // every pair holds about the same number of nodes and a tree up to two columns tall fits.
    for (uint32_t i = 0; i < n;) {
      uint32_t e = i;
      while (e < n && steps_of(sorted[e]) == steps_of(sorted[i])) ++e;
      std::vector<std::pair<uint32_t, uint32_t>> pairs;
      for (uint32_t lo = i, hi = e; lo < hi; ++lo) {
        --hi;
        pairs.emplace_back(sorted[lo], lo < hi ? sorted[hi] : kNone);
      }
      for (size_t p = 0; p < pairs.size(); p += T / 2) {
        for (int j = 0; j < T; ++j) {
          const size_t k = p + static_cast<size_t>(j % (T / 2));
          order.push_back(k >= pairs.size() ? kNone : j < T / 2 ? pairs[k].first : pairs[k].second);
        }
      }
      i = e;
    }
  }
  const uint32_t num_bundles =
      std::max<uint32_t>(1, static_cast<uint32_t>((order.size() + T - 1) / T));
  order.resize(static_cast<size_t>(num_bundles) * T, kNone);
  // A part takes bundles while its rows and its records fit the budget.
  out.bundles.resize(static_cast<size_t>(num_bundles) * T);
  int64_t used = 0;
  for (uint32_t b = 0; b < num_bundles;) {
    const uint32_t begin = b;
    LanePart part(tf, paired, nan_column, out.column_bits);
    for (; b < num_bundles; ++b) {
      LanePart trial = part;
      uint32_t deepest = 0;
      for (int j = 0; j < T; ++j) {
        const uint32_t k = b * T + j;
        absl::StatusOr<uint32_t> root =
            trial.PlaceTree(order[k] != kNone ? trees[order[k]].root : kNone, j);
        if (!root.ok()) return root.status();
        out.bundles[k].slot_begin = *root;
        if (order[k] != kNone) deepest = std::max<uint32_t>(deepest, steps_of(order[k]));
      }
      if (TahoeLanePartBytes(int64_t{trial.rows()} * T, b + 1 - begin) > max_part_bytes) break;
      for (int j = 0; j < T; ++j) out.bundles[b * T + j].steps = deepest;
      part = std::move(trial);
    }
    if (b == begin) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tahoe: a lane bundle needs more than ", max_part_bytes, " bytes"));
    }
    TahoeLanePart p{begin, b, static_cast<uint32_t>(out.slots.size()), 0};
    out.slots.insert(out.slots.end(), part.cells().begin(), part.cells().end());
    p.slot_end = static_cast<uint32_t>(out.slots.size());
    for (uint32_t k = begin * T; k < b * T; ++k) out.bundles[k].slot_begin += p.slot_begin;
    used += part.nodes();
    out.part_bytes = std::max(out.part_bytes, TahoeLanePartBytes(p.slot_end - p.slot_begin, b - begin));
    out.parts.push_back(p);
  }
  out.padding = out.slots.empty() ? 0 : 1.0 - static_cast<double>(used) / out.slots.size();
  return out;
}

}  // namespace

absl::StatusOr<TahoeLaneLayout> BuildTahoeLaneLayout(const TahoeForest& tf, int64_t max_part_bytes,
                                                     TahoeLaneMode mode) {
  if (!TahoeLaneEligible(tf)) {
    return absl::InvalidArgumentError("tahoe: the forest does not allow the lane layout");
  }
  if (mode != TahoeLaneMode::kAuto) return BuildLanes(tf, max_part_bytes, mode == TahoeLaneMode::kPaired);
  absl::StatusOr<TahoeLaneLayout> single = BuildLanes(tf, max_part_bytes, false);
  if (single.ok()) return single;
  return BuildLanes(tf, max_part_bytes, true);
}

absl::Status TahoeLaneSumsHost(const TahoeLaneLayout& layout, RowsView rows,
                               std::vector<double>* sums) {
  const int64_t nf = rows.cols;
  if (layout.columns != 2 * nf + 1) return absl::InvalidArgumentError("rows do not fit the layout");
  sums->assign(static_cast<size_t>(rows.rows), 0.0);
  std::vector<float> staged(static_cast<size_t>(layout.columns));
  for (int64_t r = 0; r < rows.rows; ++r) {
    const float* x = rows.Row(r);
    for (int64_t c = 0; c < nf; ++c) TahoeLaneStage(x[c], staged.data() + 2 * c);
    staged[2 * nf] = TahoeNan();
    for (const TahoeLanePart& p : layout.parts) {
      double lane[kTahoeLaneTrees] = {};
      for (uint32_t b = p.bundle_begin; b < p.bundle_end; ++b) {
        for (int l = 0; l < kTahoeLaneTrees; ++l) {
          const TahoeLaneBundle& tree = layout.bundles[b * kTahoeLaneTrees + l];
          lane[l] += TahoeLaneWalk(reinterpret_cast<const char*>(layout.slots.data() + tree.slot_begin),
                                   tree.steps, reinterpret_cast<const char*>(staged.data()),
                                   layout.column_bits, TahoeLaneAdvanceFor(layout.paired, l));
        }
      }
      for (int o = kTahoeLaneTrees / 2; o > 0; o >>= 1) {  // the kernel's butterfly
        double next[kTahoeLaneTrees];
        for (int l = 0; l < kTahoeLaneTrees; ++l) next[l] = lane[l] + lane[l ^ o];
        std::copy(next, next + kTahoeLaneTrees, lane);
      }
      (*sums)[r] += lane[0];
    }
  }
  return absl::OkStatus();
}

}  // namespace grove
