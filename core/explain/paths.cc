// Path extraction, merging and bin packing (see paths.h).
#include "core/explain/paths.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/explain/cover_fraction.h"
#include "core/explain/explain.h"
#include "core/model/feature_groups.h"
#include "core/model/forest.h"

namespace grove {
namespace {

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One split on the path: the node and whether the path takes its left child.
struct Step {
  const Node* node;
  bool left;
  double fraction;
};

bool Decide(const Node& n, const uint32_t* category_bits, float x) {
  return GoesLeft(n.flags, n.threshold, n.payload, n.aux, category_bits, x);
}

// Builds the merged element of `steps` (all on one feature).
PathElement MergeSteps(int32_t feature, const std::vector<Step>& steps,
                       const std::vector<uint32_t>& forest_bits,
                       std::vector<uint32_t>* merged_bits) {
  PathElement e;
  e.feature = feature;
  e.zero_fraction = 1.0;
  uint16_t flags = kElemNanPass;
  bool zero_pass = true;
  bool any_zero_zone = false;
  float lower = -std::numeric_limits<float>::infinity(), upper = 0, zlower = 0, zupper = 0;
  bool has_lower = false, has_upper = false, zhas_lower = false, zhas_upper = false;
  uint32_t max_words = 0;
  bool any_categorical = false;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Step& s : steps) {
    const Node& n = *s.node;
    e.zero_fraction *= s.fraction;
    if (Decide(n, forest_bits.data(), nan) != s.left) flags &= ~kElemNanPass;
    if (n.is_categorical()) {
      any_categorical = true;
      max_words = std::max(max_words, n.aux);
      continue;
    }
    const float t = n.threshold;
    if (s.left) {
      if (!has_upper || t < upper) upper = t;
      has_upper = true;
    } else {
      if (!has_lower || t > lower) lower = t;
      has_lower = true;
    }
    if (n.flags & kNodeMissingZero) {
      any_zero_zone = true;
      if (n.default_left() != s.left) zero_pass = false;
    } else if (s.left) {
      if (!zhas_upper || t < zupper) zupper = t;
      zhas_upper = true;
    } else {
      if (!zhas_lower || t > zlower) zlower = t;
      zhas_lower = true;
    }
  }
  if (has_lower) { flags |= kElemHasLower; e.lower = lower; }
  if (has_upper) { flags |= kElemHasUpper; e.upper = upper; }
  if (any_zero_zone) {
    flags |= kElemZeroZone;
    if (zero_pass) flags |= kElemZeroPass;
    if (zhas_lower) { flags |= kElemZeroHasLower; e.zero_lower = zlower; }
    if (zhas_upper) { flags |= kElemZeroHasUpper; e.zero_upper = zupper; }
  }
  if (any_categorical) {
    flags |= kElemCategorical;
    bool neg_frac = true, invalid = true;
    std::vector<uint32_t> bits(max_words, ~0u);
    for (const Step& s : steps) {
      const Node& n = *s.node;
      if (!n.is_categorical()) continue;
      if (Decide(n, forest_bits.data(), -0.5f) != s.left) neg_frac = false;
      if (Decide(n, forest_bits.data(), -2.0f) != s.left) invalid = false;
      for (uint32_t c = 0; c < max_words * 32; ++c) {
        if (Decide(n, forest_bits.data(), static_cast<float>(c)) != s.left) {
          bits[c >> 5] &= ~(1u << (c & 31u));
        }
      }
    }
    if (neg_frac) flags |= kElemNegFracPass;
    if (invalid) flags |= kElemInvalidPass;
    e.cat_begin = static_cast<uint32_t>(merged_bits->size());
    e.cat_words = static_cast<uint16_t>(max_words);
    merged_bits->insert(merged_bits->end(), bits.begin(), bits.end());
  }
  e.flags = flags;
  return e;
}

// A path before packing.
struct RawPath {
  PathInfo info;
  std::vector<PathElement> elements;
};

// `group_of`: null, or per feature its group (the elements of one group are made consecutive).
void ExtractTree(const Forest& forest, int32_t t, const int32_t* group_of,
                 std::vector<RawPath>* out, std::vector<double>* values,
                 std::vector<uint32_t>* merged_bits) {
  const Tree& tree = forest.trees[t];
  const Node* nodes = forest.TreeNodes(t);
  std::vector<Step> steps;
  // Iterative DFS; an entry is (node, number of edges from the root to it).
  std::vector<std::pair<int32_t, int32_t>> stack = {{0, 0}};
  std::vector<std::pair<int32_t, bool>> edge_of(tree.num_nodes, {-1, false});  // parent, left
  while (!stack.empty()) {
    const auto [i, depth] = stack.back();
    stack.pop_back();
    steps.resize(depth > 0 ? depth - 1 : 0);
    if (depth > 0) {
      const auto [parent, left] = edge_of[i];
      const Node& p = nodes[parent];
      steps.push_back({&p, left, CoverFraction(nodes[i].cover, p.cover)});
    }
    const Node& n = nodes[i];
    if (!n.is_leaf()) {
      edge_of[n.right] = {i, false};
      edge_of[n.left] = {i, true};
      stack.push_back({n.right, depth + 1});
      stack.push_back({n.left, depth + 1});
      continue;
    }
    RawPath path;
    path.info.width = static_cast<uint16_t>(tree.leaf_width);
    path.info.group = tree.leaf_width == 1 ? tree.group : 0;
    path.info.tree = t;
    path.info.iteration = tree.iteration;
    path.info.leaf = i;
    path.info.value_begin = static_cast<uint32_t>(values->size());
    for (int k = 0; k < tree.leaf_width; ++k) {
      values->push_back(tree.weight * forest.leaf_values[n.payload + k]);
    }
    PathElement root;
    root.flags = kElemRoot | kElemNanPass;
    path.elements.push_back(root);
    // Features in order of first appearance.
    std::vector<int32_t> order;
    for (const Step& s : steps) {
      if (std::find(order.begin(), order.end(), s.node->feature) == order.end()) {
        order.push_back(s.node->feature);
      }
    }
    if (group_of != nullptr) {
      // Groups in order of first appearance, each group's features in theirs.
      std::vector<int32_t> groups;
      for (int32_t feature : order) {
        if (std::find(groups.begin(), groups.end(), group_of[feature]) == groups.end()) {
          groups.push_back(group_of[feature]);
        }
      }
      std::vector<int32_t> grouped;
      for (int32_t g : groups) {
        for (int32_t feature : order) {
          if (group_of[feature] == g) grouped.push_back(feature);
        }
      }
      order.swap(grouped);
    }
    std::vector<Step> same;
    size_t leader = 0;
    for (int32_t feature : order) {
      same.clear();
      for (const Step& s : steps) {
        if (s.node->feature == feature) same.push_back(s);
      }
      PathElement e = MergeSteps(feature, same, forest.category_bits, merged_bits);
      const size_t at = path.elements.size();
      if (group_of != nullptr && at > 1 &&
          group_of[path.elements[leader].feature] == group_of[feature]) {
        // The run's zero fraction is the product over its features: the player's, held first.
        path.elements[leader].zero_fraction *= e.zero_fraction;
        e.zero_fraction = 1.0;
        e.flags |= kElemGroupMember;
      } else {
        leader = at;
      }
      path.elements.push_back(e);
    }
    path.info.length = static_cast<uint16_t>(path.elements.size());
    out->push_back(std::move(path));
  }
}

}  // namespace

std::vector<double> FixedPointScales(const PathLayout& layout, bool interactions) {
  std::vector<double> scale(layout.num_outputs);
  const double factor = interactions ? 2.0 * (layout.max_length + 1) : 2.0;
  for (int k = 0; k < layout.num_outputs; ++k) {
    const double bound = std::max(layout.contribution_bound[k] * factor, 1e-30);
    const int e = 61 - static_cast<int>(std::ceil(std::log2(bound)));
    scale[k] = std::ldexp(1.0, std::clamp(e, -900, 900));
  }
  return scale;
}

const char* BinPackingName(BinPacking packing) {
  switch (packing) {
    case BinPacking::kBestFitDecreasing: return "bfd";
    case BinPacking::kFirstFitDecreasing: return "ffd";
    case BinPacking::kNextFit: return "nf";
  }
  return "?";
}

absl::StatusOr<BinPacking> ParseBinPacking(const std::string& name) {
  if (name == "bfd" || name == "best_fit_decreasing") return BinPacking::kBestFitDecreasing;
  if (name == "ffd" || name == "first_fit_decreasing") return BinPacking::kFirstFitDecreasing;
  if (name == "nf" || name == "next_fit") return BinPacking::kNextFit;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown bin packing '", name, "' (bfd, ffd or nf)"));
}

std::vector<uint32_t> PackBins(const std::vector<int>& sizes, int capacity, BinPacking packing,
                               int64_t* num_bins) {
  const size_t n = sizes.size();
  std::vector<uint32_t> bin_of(n, 0);
  uint32_t bins = 0;
  if (packing == BinPacking::kNextFit) {
    int remaining = 0;
    for (size_t i = 0; i < n; ++i) {
      if (bins == 0 || sizes[i] > remaining) {
        ++bins;
        remaining = capacity;
      }
      bin_of[i] = bins - 1;
      remaining -= sizes[i];
    }
    *num_bins = bins;
    return bin_of;
  }
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return sizes[a] > sizes[b]; });
  if (packing == BinPacking::kBestFitDecreasing) {
    // Open bins by remaining capacity; the fullest bin that fits wins (ties: latest opened).
    std::vector<std::vector<uint32_t>> by_remaining(capacity + 1);
    for (uint32_t item : order) {
      const int s = sizes[item];
      int r = s;
      while (r <= capacity && by_remaining[r].empty()) ++r;
      uint32_t bin;
      if (r > capacity) {
        bin = bins++;
        r = capacity;
      } else {
        bin = by_remaining[r].back();
        by_remaining[r].pop_back();
      }
      bin_of[item] = bin;
      if (r - s > 0) by_remaining[r - s].push_back(bin);
    }
    *num_bins = bins;
    return bin_of;
  }
  // First-Fit-Decreasing: a max segment tree over bins (at most n) finds the first bin that fits.
  size_t leaves = 1;
  while (leaves < std::max<size_t>(n, 1)) leaves *= 2;
  std::vector<int> tree(2 * leaves, capacity);  // unopened bins have full capacity
  std::vector<int> remaining(leaves, capacity);
  for (uint32_t item : order) {
    const int s = sizes[item];
    size_t node = 1;
    while (node < leaves) node = tree[2 * node] >= s ? 2 * node : 2 * node + 1;
    const uint32_t bin = static_cast<uint32_t>(node - leaves);
    bins = std::max(bins, bin + 1);
    bin_of[item] = bin;
    remaining[bin] -= s;
    tree[node] = remaining[bin];
    for (node /= 2; node >= 1; node /= 2) tree[node] = std::max(tree[2 * node], tree[2 * node + 1]);
  }
  *num_bins = bins;
  return bin_of;
}

int64_t PathLayout::HostBytes() const {
  return static_cast<int64_t>(elements.size() * sizeof(PathElement) +
                              paths.size() * sizeof(PathInfo) +
                              bin_offsets.size() * sizeof(uint32_t) +
                              long_paths.size() * sizeof(uint32_t) + values.size() * sizeof(double) +
                              category_bits.size() * sizeof(uint32_t) +
                              bias.size() * sizeof(double));
}

std::string PathLayoutStats::Describe() const {
  std::string s = absl::StrFormat(
      "paths: %d (%d elements, longest %d incl. root)\n"
      "bins: %d x %d lanes, packing %s, utilisation %.1f%%, packing time %.3f ms "
      "(extraction %.3f ms)\n"
      "long paths (> %d elements, CPU fallback): %d (%d elements)\n"
      "layout bytes: %d\n"
      "path length histogram (elements incl. root: paths):",
      num_paths, num_elements, max_length, num_bins, kWarpLanes, BinPackingName(packing),
      100.0 * utilisation, 1e3 * packing_seconds, 1e3 * extract_seconds, kWarpLanes,
      num_long_paths, long_path_elements, host_bytes);
  for (size_t n = 0; n < length_histogram.size(); ++n) {
    if (length_histogram[n] != 0) absl::StrAppend(&s, " ", n, ":", length_histogram[n]);
  }
  return s;
}

absl::StatusOr<PathLayoutPtr> BuildPathLayout(const Forest& forest,
                                              const PathLayoutOptions& options) {
  if (absl::Status s = CheckExplainable(forest); !s.ok()) return s;
  const auto extract_start = std::chrono::steady_clock::now();
  auto layout = std::make_shared<PathLayout>();
  layout->num_features = forest.num_features;
  layout->num_players = forest.num_features;
  layout->num_outputs = forest.num_outputs;
  layout->num_trees = static_cast<int>(forest.trees.size());
  const int32_t* group_of = nullptr;
  if (options.groups != nullptr) {
    if (static_cast<int64_t>(options.groups->group_of.size()) != forest.num_features) {
      return absl::InvalidArgumentError(absl::StrCat(
          "feature groups resolved for ", options.groups->group_of.size(),
          " features; the model has ", forest.num_features));
    }
    layout->player_of = options.groups->group_of;
    layout->num_players = options.groups->num_groups();
    group_of = layout->player_of.data();
  }
  std::vector<RawPath> raw;
  for (int32_t t = 0; t < static_cast<int32_t>(forest.trees.size()); ++t) {
    ExtractTree(forest, t, group_of, &raw, &layout->values, &layout->category_bits);
  }
  // Bias and contribution bounds.
  layout->bias.assign(forest.base_margin.begin(), forest.base_margin.end());
  layout->bias.resize(forest.num_outputs, 0.0);
  layout->base_margin = layout->bias;
  layout->num_iterations = forest.num_iterations;
  layout->contribution_bound.assign(forest.num_outputs, 0.0);
  {
    std::vector<double> lo, hi;
    int32_t current = -1;
    auto flush = [&](int32_t t) {
      if (t < 0) return;
      const Tree& tree = forest.trees[t];
      const int first = tree.leaf_width == 1 ? tree.group : 0;
      for (int k = 0; k < tree.leaf_width; ++k) {
        layout->contribution_bound[first + k] += 2 * std::max(std::fabs(hi[k]), std::fabs(lo[k]));
      }
    };
    for (const RawPath& p : raw) {
      double z = 1.0;
      for (const PathElement& e : p.elements) z *= e.zero_fraction;
      if (p.info.tree != current) {
        flush(current);
        current = p.info.tree;
        lo.assign(p.info.width, std::numeric_limits<double>::infinity());
        hi.assign(p.info.width, -std::numeric_limits<double>::infinity());
      }
      for (int k = 0; k < p.info.width; ++k) {
        const double v = layout->values[p.info.value_begin + k];
        layout->bias[p.info.group + k] += z * v;
        lo[k] = std::min(lo[k], v);
        hi[k] = std::max(hi[k], v);
      }
    }
    flush(current);
  }
  PathLayoutStats& stats = layout->stats;
  stats.extract_seconds = Seconds(extract_start);

  // Pack.
  const auto pack_start = std::chrono::steady_clock::now();
  std::vector<int> sizes;
  std::vector<uint32_t> binned;  // raw path ids, in sizes order
  std::vector<uint32_t> long_ids;
  for (uint32_t i = 0; i < raw.size(); ++i) {
    if (raw[i].info.length <= kWarpLanes) {
      sizes.push_back(raw[i].info.length);
      binned.push_back(i);
    } else {
      long_ids.push_back(i);
    }
  }
  int64_t num_bins = 0;
  std::vector<uint32_t> bin_of = PackBins(sizes, kWarpLanes, options.packing, &num_bins);
  // Paths of each bin in raw order (deterministic).
  std::vector<uint32_t> bin_count(num_bins + 1, 0);
  for (uint32_t b : bin_of) ++bin_count[b + 1];
  std::partial_sum(bin_count.begin(), bin_count.end(), bin_count.begin());
  std::vector<uint32_t> by_bin(binned.size());
  {
    std::vector<uint32_t> cursor(bin_count.begin(), bin_count.end() - 1);
    for (size_t k = 0; k < binned.size(); ++k) by_bin[cursor[bin_of[k]]++] = binned[k];
  }
  stats.packing_seconds = Seconds(pack_start);

  auto append = [&](uint32_t raw_id, uint32_t bin) {
    RawPath& p = raw[raw_id];
    const int32_t id = static_cast<int32_t>(layout->paths.size());
    p.info.element_begin = static_cast<uint32_t>(layout->elements.size());
    p.info.bin = bin;
    for (PathElement& e : p.elements) {
      e.path = id;
      layout->elements.push_back(e);
    }
    layout->paths.push_back(p.info);
    layout->max_length = std::max<int>(layout->max_length, p.info.length);
  };
  layout->bin_offsets.push_back(0);
  for (int64_t b = 0; b < num_bins; ++b) {
    for (uint32_t k = bin_count[b]; k < bin_count[b + 1]; ++k) {
      append(by_bin[k], static_cast<uint32_t>(b));
    }
    layout->bin_offsets.push_back(static_cast<uint32_t>(layout->elements.size()));
  }
  const int64_t binned_elements = static_cast<int64_t>(layout->elements.size());
  for (uint32_t raw_id : long_ids) {
    layout->long_paths.push_back(static_cast<uint32_t>(layout->paths.size()));
    append(raw_id, UINT32_MAX);
  }

  stats.packing = options.packing;
  stats.num_paths = static_cast<int64_t>(layout->paths.size());
  stats.num_elements = static_cast<int64_t>(layout->elements.size());
  stats.num_bins = num_bins;
  stats.num_long_paths = static_cast<int64_t>(long_ids.size());
  stats.long_path_elements = stats.num_elements - binned_elements;
  stats.utilisation =
      num_bins > 0 ? static_cast<double>(binned_elements) / (num_bins * kWarpLanes) : 0.0;
  stats.max_length = layout->max_length;
  stats.length_histogram.assign(layout->max_length + 1, 0);
  for (const PathInfo& p : layout->paths) ++stats.length_histogram[p.length];
  stats.host_bytes = layout->HostBytes();
  return PathLayoutPtr(std::move(layout));
}

}  // namespace grove
