// Merged root-to-leaf path layouts: the model representation of the path-based TreeSHAP engines
// (GPUTreeShap paper, section 3: CPU path engine, GPU warp kernels, quadrature strategies).
//
// A PathLayout is built once per model (BuildPathLayout) and is immutable afterwards; share it
// read-only between threads. Stable API: other strategies read this layout, so fields are only
// ever added, never re-purposed.
//
// ## Paths
// Every leaf of every tree gives one path (PathInfo). A path is a contiguous run of
// PathInfo::length PathElements in PathLayout::elements, starting at PathInfo::element_begin:
//   * element 0 is the root element: feature -1, zero_fraction 1, matches every row;
//   * elements 1..length-1 are the distinct features split on between root and leaf, in order of
//     first appearance (root first). All splits on one feature along the path are merged into one
//     element (see "Merging"). So length - 1 <= tree depth, and length - 1 is the path's "unique
//     depth" of Algorithm 1.
// For an element e and a row x, the one fraction of Algorithm 1 is
//   o = PathElementMatches(e, category_bits, x[e.feature]) ? 1 : 0
// and the zero fraction is e.zero_fraction (the product of child cover / parent cover over the
// merged splits; a parent of cover 0 gives 0, as in the CPU reference core/explain/explain_cpu.cc).
// A row reaches the path's leaf iff every element matches (exactly GoesLeft of core/model/decision.h
// applied at every node, for every routing rule the loaders produce).
//
// Values: a path of a scalar-leaf tree carries one value (width 1) for output group `group`; a path
// of a vector-leaf tree carries `width` values for groups group..group+width-1 (group 0). Values are
// the leaf values multiplied by the tree weight, in double: PathLayout::values[value_begin + k].
//
// Paths with zero_fraction == 0 on some element are kept (they contribute when the row matches).
//
// ## Binning
// Paths of length <= kWarpLanes are packed into bins of at most kWarpLanes elements (one GPU warp,
// one element per lane). A bin is a contiguous range of `elements`: bin b covers
// [bin_offsets[b], bin_offsets[b+1]), and holds whole paths only. Paths longer than kWarpLanes
// ("long paths": more than 31 distinct features on one path) are not binned; their elements
// follow all binned elements, and long_paths lists them; engines must explain them with an
// unbounded-length algorithm (e.g. ExplainPathsCpu on those paths only) and add the results.
//
// Element order in `elements`: bins in order, then long paths. Path ids (PathElement::path) index
// `paths`, which is in the same order as the elements (paths[i].element_begin is increasing).
//
// ## Merging (exactness)
// For each feature on a path the element stores the conjunction of the splits on that feature:
//   * numeric splits: non-NaN x outside the LightGBM zero zone (|x| <= kZeroThreshold) must lie in
//     [lower, upper) -- lower/upper present only with kElemHasLower/kElemHasUpper. Inside the zero
//     zone, splits with missing type Zero (kNodeMissingZero) send x their default way: they fold into
//     kElemZeroPass; the other splits compare x to their threshold: [zero_lower, zero_upper).
//   * NaN: kElemNanPass = every merged split sends NaN this way (default direction, or for
//     kNodeNanAsZero splits the decision for 0.0, missing-zero included).
//   * categorical splits: categories c in [0, 32 * cat_words) match iff bit c of the merged bitset
//     (category_bits[cat_begin...]) is set; that bitset is the intersection of the path's sides of
//     every categorical split on the feature (a category outside a split's bitset is "not in set").
//     x in (-1, 0) (category 0 under LightGBM's truncation, invalid for XGBoost) matches iff
//     kElemNegFracPass; every other value (negative, >= 32 * cat_words, infinite) iff
//     kElemInvalidPass. A feature with both kinds of split needs both parts to match.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/common/hd.h"
#include "core/model/decision.h"

namespace grove {

class Forest;
struct FeatureGroups;

inline constexpr int kWarpLanes = 32;

// PathElement::flags.
enum PathElementFlag : uint16_t {
  kElemHasLower = 1u << 0,      // numeric: x >= lower required
  kElemHasUpper = 1u << 1,      // numeric: x < upper required
  kElemZeroZone = 1u << 2,      // some merged numeric split has missing type Zero
  kElemZeroPass = 1u << 3,      // ... and all of those send the zero zone this way
  kElemZeroHasLower = 1u << 4,  // zero zone: x >= zero_lower required
  kElemZeroHasUpper = 1u << 5,  // zero zone: x < zero_upper required
  kElemNanPass = 1u << 6,       // NaN matches
  kElemCategorical = 1u << 7,   // categorical part present (cat_begin / cat_words)
  kElemNegFracPass = 1u << 8,   // categorical: x in (-1, 0) matches
  kElemInvalidPass = 1u << 9,   // categorical: other non-category values match
  kElemRoot = 1u << 10,         // the root element (feature -1): matches everything
  // Grouped layouts (PathLayout::player_of): a further element of the player of the element
  // before it. The player's element (the first of the run) matches iff every element of the run
  // matches; this one is then a null player (zero_fraction 1, one fraction 1), which changes no
  // other player's Shapley value or interaction value.
  kElemGroupMember = 1u << 11,
};

// One merged element of a path; 40 bytes, plain data (uploaded to the GPU as is).
struct PathElement {
  int32_t path = -1;      // index into PathLayout::paths
  int32_t feature = -1;   // -1 for the root element
  double zero_fraction = 1.0;
  float lower = 0, upper = 0;            // numeric interval [lower, upper), see flags
  float zero_lower = 0, zero_upper = 0;  // interval applied inside the zero zone
  uint32_t cat_begin = 0;  // first word of the merged bitset in PathLayout::category_bits
  uint16_t cat_words = 0;
  uint16_t flags = 0;
};
static_assert(sizeof(PathElement) == 40, "PathElement is uploaded as is");

// Does the row's value `x` of element `e`'s feature follow the path? Exactly the conjunction of
// GoesLeft (core/model/decision.h) over the merged splits. `category_bits` is
// PathLayout::category_bits (host or device copy).
GROVE_HD bool PathElementMatches(const PathElement& e, const uint32_t* category_bits, float x) {
  const uint16_t f = e.flags;
  if (f & kElemRoot) return true;
  if (IsNan(x)) return f & kElemNanPass;
  if ((f & kElemZeroZone) && x >= -1e-35f && x <= 1e-35f) {
    if (!(f & kElemZeroPass)) return false;
    if ((f & kElemZeroHasLower) && !(x >= e.zero_lower)) return false;
    if ((f & kElemZeroHasUpper) && !(x < e.zero_upper)) return false;
  } else {
    if ((f & kElemHasLower) && !(x >= e.lower)) return false;
    if ((f & kElemHasUpper) && !(x < e.upper)) return false;
  }
  if (!(f & kElemCategorical)) return true;
  const float limit = static_cast<float>(e.cat_words) * 32.0f;
  if (x >= 0.0f && x < limit) {
    const uint32_t c = static_cast<uint32_t>(x);
    return (category_bits[e.cat_begin + (c >> 5)] >> (c & 31u)) & 1u;
  }
  if (x > -1.0f && x < 0.0f) return f & kElemNegFracPass;
  return f & kElemInvalidPass;
}

// One root-to-leaf path.
struct PathInfo {
  uint32_t element_begin = 0;  // first element (the root element) in PathLayout::elements
  uint16_t length = 0;         // elements, root included
  uint16_t width = 1;          // values (outputs) carried
  int32_t group = 0;           // first output group
  int32_t tree = 0;            // tree index in the Forest
  int32_t iteration = 0;       // the tree's boosting round (for iteration ranges)
  int32_t leaf = 0;            // leaf node index within the tree
  uint32_t value_begin = 0;    // first value in PathLayout::values
  uint32_t bin = 0;            // bin holding the path; UINT32_MAX for a long path
};

enum class BinPacking : uint8_t { kBestFitDecreasing, kFirstFitDecreasing, kNextFit };
const char* BinPackingName(BinPacking packing);
// "bfd", "ffd", "nf" (also the long names "best_fit_decreasing", ...).
absl::StatusOr<BinPacking> ParseBinPacking(const std::string& name);

struct PathLayoutStats {
  BinPacking packing = BinPacking::kBestFitDecreasing;
  int64_t num_paths = 0;
  int64_t num_elements = 0;          // root elements included
  int64_t num_bins = 0;
  int64_t num_long_paths = 0;        // paths with more than kWarpLanes elements (CPU fallback)
  int64_t long_path_elements = 0;
  double utilisation = 0;            // binned elements / (num_bins * kWarpLanes)
  std::vector<int64_t> length_histogram;  // [n] = paths with n elements (root included)
  int max_length = 0;
  double extract_seconds = 0;        // path extraction + merging
  double packing_seconds = 0;        // bin packing
  int64_t host_bytes = 0;            // bytes of the layout's arrays
  // Multi-line human-readable summary for `grove inspect` and logs.
  std::string Describe() const;
};

struct PathLayout {
  std::vector<PathElement> elements;
  std::vector<PathInfo> paths;
  std::vector<uint32_t> bin_offsets;  // num_bins + 1 entries into elements
  std::vector<uint32_t> long_paths;   // path ids of long paths
  std::vector<double> values;         // leaf values * tree weight
  std::vector<uint32_t> category_bits;  // merged category bitsets
  std::vector<double> bias;           // per output: base_margin + expected value of every tree
  std::vector<double> base_margin;    // per output (the forest's)
  int num_features = 0;
  int num_outputs = 1;
  int num_trees = 0;
  int max_length = 0;  // longest path (elements, root included)
  int num_iterations = 0;  // the forest's boosting rounds
  // Grouped layouts (PathLayoutOptions::groups): per model feature, its player (the column of its
  // group); the players number num_players. Empty, and num_players == num_features, otherwise.
  // In a grouped layout the elements of one player on a path are consecutive, the first holding
  // the product of their zero fractions and the rest flagged kElemGroupMember.
  std::vector<int32_t> player_of;
  int num_players = 0;
  // Per output: sum over trees of 2 * max |weighted leaf value|. Bounds every SHAP value, every
  // single path's contribution, and (times max_length) every interaction value: engines scale
  // fixed-point accumulators with it.
  std::vector<double> contribution_bound;
  PathLayoutStats stats;

  int64_t num_bins() const { return static_cast<int64_t>(bin_offsets.size()) - 1; }
  int64_t HostBytes() const;
};

using PathLayoutPtr = std::shared_ptr<const PathLayout>;

// A PathLayout's arrays as the GPU engines' kernels read them: device copies of elements, paths,
// bin_offsets, values and category_bits, owned by the engine; passed by value in kernel arguments.
struct DevicePathArrays {
  const PathElement* elements = nullptr;
  const PathInfo* paths = nullptr;
  const uint32_t* bin_offsets = nullptr;  // num_bins + 1 entries into elements
  const double* values = nullptr;
  const uint32_t* category_bits = nullptr;
};

// Fixed-point scale per output for the GPU engines' integer accumulators: 2^e with
// |value| * scale < 2^61 for |value| <= contribution_bound * factor, where factor is 2 for SHAP
// values and 2 * (max_length + 1) for interactions.
std::vector<double> FixedPointScales(const PathLayout& layout, bool interactions);

struct PathLayoutOptions {
  BinPacking packing = BinPacking::kBestFitDecreasing;
  // Non-null: the layout of the game over these groups (resolved for the forest; not owned, read
  // during the build only): path-dependent Shapley values of the groups, as ExplainCpuReference
  // computes them with ExplainOptions::groups.
  const FeatureGroups* groups = nullptr;
};

// The output column of element `e` (not the root) in `layout`'s results.
inline int32_t PlayerOf(const PathLayout& layout, const PathElement& e) {
  return layout.player_of.empty() ? e.feature : layout.player_of[static_cast<size_t>(e.feature)];
}

// Extracts, merges and packs the paths of every tree of `forest` (which must pass
// CheckExplainable). Deterministic: the same forest and options give the same layout.
absl::StatusOr<PathLayoutPtr> BuildPathLayout(const Forest& forest,
                                              const PathLayoutOptions& options = {});

// Packs items of the given sizes (each in [1, capacity]) into bins of `capacity`; returns the
// bin of each item; bins are numbered in order of creation. Exposed for tests and inspection.
std::vector<uint32_t> PackBins(const std::vector<int>& sizes, int capacity, BinPacking packing,
                               int64_t* num_bins);

}  // namespace grove
