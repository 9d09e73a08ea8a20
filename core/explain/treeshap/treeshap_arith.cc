// Host side of the warp TreeSHAP arithmetic (see treeshap_arith.h).
#include "core/explain/treeshap/treeshap_arith.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace grove {

const char* TreeShapPrecisionName(TreeShapPrecision precision) {
  switch (precision) {
    case TreeShapPrecision::kAuto: return "auto";
    case TreeShapPrecision::kFloat: return "float";
    case TreeShapPrecision::kDouble: return "double";
    case TreeShapPrecision::kFloatTopDown: return "float_top_down";
    case TreeShapPrecision::kDoubleTopDown: return "double_top_down";
    case TreeShapPrecision::kTable: return "table";
  }
  return "?";
}

namespace treeshap_arith {

std::vector<double> ShapleyWeightTable() {
  std::vector<double> table(kWeightEntries, 0.0);
  for (int n = 1; n < kWarpLanes; ++n) {
    for (int k = 0; k < n; ++k) {
      // k! (n-1-k)! / n! = exp(lgamma) would round; the product form is exact to a few ulps.
      double w = 1.0 / n;
      for (int j = 1; j <= k; ++j) w *= static_cast<double>(j) / (n - j);
      table[WeightIndex(n, k)] = w;
    }
  }
  return table;
}

double FloatUnwoundSumBound(int n) {
  const double u = std::ldexp(1.0, -24);
  const double kappa = std::max(1, 2 * n - 1);
  const double extend = 2.0 * n;        // gamma_2n / u
  const double deflate = 2.0 * n + 2;   // deflation roundings, z and 1/z
  const double sum = n + 1.0;           // weighted sum, table rounding
  return 1.01 * u * (kappa * (extend + deflate) + sum);
}

double TopDownUnwoundSumBound(int n, double u) {
  const int m = std::max(n, 1);
  double worst = 1;  // M(n): largest sum_{k <= j} C(n-1, j) / C(n-1, k)
  for (int j = 0; j < m; ++j) {
    double sum = 0, ratio = 1;  // ratio = C(m-1, j) / C(m-1, k), k from j down to 0
    for (int k = j; k >= 0; --k) {
      sum += ratio;
      if (k > 0) ratio *= static_cast<double>(m - k) / k;  // C(m-1,k) / C(m-1,k-1)
    }
    worst = std::max(worst, sum);
  }
  const double extend = 2.0 * m * u;  // gamma_2n to first order
  return 1.01 * (2 * (u + extend) * worst + (m + 2.0) * u);
}

void PathFractions(const PathLayout& layout, const PathInfo& path, const float* row, double* z,
                   bool* o) {
  const PathElement* e = layout.elements.data() + path.element_begin;
  int leader = 0;
  for (int i = 0; i < path.length; ++i) {
    z[i] = e[i].zero_fraction;
    o[i] = PathElementMatches(e[i], layout.category_bits.data(),
                              i == 0 ? 0.0f : row[e[i].feature]);
    if (e[i].flags & kElemGroupMember) {  // one player with the elements before it (paths.h)
      o[leader] = o[leader] && o[i];
      o[i] = true;
    } else {
      leader = i;
    }
  }
}

double MinZeroProduct(const double* z, int len) {
  double p = 1;
  for (int i = 0; i < len; ++i) {
    if (z[i] > 0) p *= std::min(1.0, z[i]);
  }
  return p;
}

namespace {

// Per tree, in layout order of its paths: longest path, largest |value| per output, largest Z.
struct TreeExtent {
  int degree = 0;
  double z_growth = 1;
  double min_product = 1;  // smallest MinZeroProduct of its paths
  std::vector<double> max_value;  // per output
};

void AddPath(const PathLayout& l, const PathInfo& p, TreeExtent* t) {
  t->degree = std::max(t->degree, p.length - 1);
  double z = 1, small = 1;
  for (int i = 0; i < p.length; ++i) {
    const double zi = l.elements[p.element_begin + i].zero_fraction;
    z *= std::max(1.0, zi);
    if (zi > 0) small *= std::min(1.0, zi);
  }
  t->z_growth = std::max(t->z_growth, z);
  t->min_product = std::min(t->min_product, small);
  for (int w = 0; w < p.width; ++w) {
    double& m = t->max_value[p.group + w];
    m = std::max(m, std::fabs(l.values[p.value_begin + w]));
  }
}

}  // namespace

namespace {

// Per output, sum over trees of per_lane(the tree's longest path) x 2 max|leaf| x Z (interactions:
// times max_length), infinite for a tree whose paths could underflow (MinZeroProduct below
// `min_product`) or overflow, or -- `z_at_most_one` -- have an element with z > 1. Binned paths
// only; with `in_table`, only those of the bins whose entry equals `want`.
template <typename PerLane>
FloatErrorBounds ModelBounds(const PathLayout& layout, PerLane per_lane, double min_product,
                             bool z_at_most_one, const std::vector<uint8_t>* in_table = nullptr,
                             uint8_t want = 0) {
  FloatErrorBounds b;
  b.shap.assign(layout.num_outputs, 0.0);
  std::vector<TreeExtent> trees(layout.num_trees);
  for (TreeExtent& t : trees) t.max_value.assign(layout.num_outputs, 0.0);
  bool any = false;
  for (const PathInfo& p : layout.paths) {
    if (p.bin == UINT32_MAX) continue;
    if (in_table != nullptr && (*in_table)[p.bin] != want) continue;
    AddPath(layout, p, &trees[p.tree]);
    any = true;
  }
  if (!any) {
    b.interactions = b.shap;
    return b;
  }
  for (const TreeExtent& t : trees) {
    const bool unsafe = t.z_growth > 1e30 || t.min_product < min_product ||
                        (z_at_most_one && t.z_growth > 1.0);
    const double per_value = unsafe ? std::numeric_limits<double>::infinity()
                                    : per_lane(t.degree) * 2 * t.z_growth;
    for (int k = 0; k < layout.num_outputs; ++k) {
      if (t.max_value[k] > 0) b.shap[k] += per_value * t.max_value[k];
    }
  }
  b.interactions = b.shap;
  for (double& v : b.interactions) v *= std::max(layout.max_length, 1);
  return b;
}

double Largest(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
}

}  // namespace

FloatErrorBounds TreeShapFloatErrorBounds(const PathLayout& layout) {
  return ModelBounds(layout, FloatUnwoundSumBound, kFloatMinZeroProduct, false);
}

FloatErrorBounds TreeShapTopDownErrorBounds(const PathLayout& layout, bool in_float) {
  const double u = std::ldexp(1.0, in_float ? -24 : -53);
  return ModelBounds(layout, [u](int n) { return TopDownUnwoundSumBound(n, u); },
                     in_float ? kFloatMinZeroProduct : kDoubleMinZeroProduct, true);
}

double TableFactorBound(int n) {
  return FloatUnwoundSumBound(n) * std::ldexp(1.0, -29) + std::ldexp(1.0, -52);
}

ShapTable BuildShapTable(const PathLayout& layout, int max_elements, int64_t max_bytes) {
  ShapTable t;
  const int cap = std::min(max_elements, kTableMaxElements);
  // Offsets are 32-bit.
  const int64_t max_factors =
      std::min<int64_t>(std::max<int64_t>(max_bytes, 0) / 8, int64_t{UINT32_MAX} - 1);
  t.path_offset.assign(layout.paths.size(), kNoTable);
  t.bin_in_table.assign(std::max<int64_t>(layout.num_bins(), 0), 0);
  const std::vector<double> weights = ShapleyWeightTable();
  double z[kWarpLanes], totals[kWarpLanes];
  bool o[kWarpLanes];
  std::vector<uint32_t> paths;
  for (int64_t bin = 0; bin < layout.num_bins(); ++bin) {
    paths.clear();
    int64_t size = 0;
    bool fits = cap >= 0;
    for (uint32_t e = layout.bin_offsets[bin]; e < layout.bin_offsets[bin + 1]; ++e) {
      const PathElement& el = layout.elements[e];
      const PathInfo& p = layout.paths[el.path];
      if (p.element_begin != e) continue;  // not the path's root element
      const int n = p.length - 1;
      if (n > cap) fits = false;
      paths.push_back(static_cast<uint32_t>(el.path));
      size += (int64_t{1} << std::min(n, 30)) * n;
    }
    if (!fits || static_cast<int64_t>(t.factors.size()) + size > max_factors) {
      t.other_bins.push_back(static_cast<uint32_t>(bin));
      continue;
    }
    t.bin_in_table[bin] = 1;
    t.table_bins.push_back(static_cast<uint32_t>(bin));
    for (uint32_t id : paths) {
      const PathInfo& p = layout.paths[id];
      const int n = p.length - 1;
      t.path_offset[id] = static_cast<uint32_t>(t.factors.size());
      for (int i = 0; i < p.length; ++i) z[i] = layout.elements[p.element_begin + i].zero_fraction;
      o[0] = true;
      for (unsigned pattern = 0; pattern < (1u << n); ++pattern) {
        for (int i = 1; i <= n; ++i) o[i] = (pattern >> (i - 1)) & 1u;
        EmulatePath<double>(z, o, p.length, 0, weights.data(), totals);
        for (int i = 1; i <= n; ++i) t.factors.push_back(totals[i] * ((o[i] ? 1.0 : 0.0) - z[i]));
      }
    }
  }
  return t;
}

PrecisionChoice ChoosePrecision(const PathLayout& layout, TreeShapPrecision precision,
                                double limit, const ShapTable* table) {
  PrecisionChoice c;
  const bool use_table = table != nullptr && !table->empty() &&
                         (precision == TreeShapPrecision::kAuto ||
                          precision == TreeShapPrecision::kTable);
  if (precision == TreeShapPrecision::kTable) precision = TreeShapPrecision::kAuto;
  const FloatErrorBounds composite = TreeShapFloatErrorBounds(layout);
  const FloatErrorBounds top_float = TreeShapTopDownErrorBounds(layout, true);
  const FloatErrorBounds top_double = TreeShapTopDownErrorBounds(layout, false);
  // SHAP values with the table: the arithmetic's bounds over the other bins, plus the table's.
  FloatErrorBounds rest[3];
  double table_bound = 0;
  if (use_table) {
    const std::vector<uint8_t>* in = &table->bin_in_table;
    rest[0] = ModelBounds(layout, FloatUnwoundSumBound, kFloatMinZeroProduct, false, in, 0);
    const double uf = std::ldexp(1.0, -24), ud = std::ldexp(1.0, -53);
    rest[1] = ModelBounds(layout, [uf](int n) { return TopDownUnwoundSumBound(n, uf); },
                          kFloatMinZeroProduct, true, in, 0);
    rest[2] = ModelBounds(layout, [ud](int n) { return TopDownUnwoundSumBound(n, ud); },
                          kDoubleMinZeroProduct, true, in, 0);
    // Stored factors are finite doubles: no underflow or overflow limit applies.
    table_bound = Largest(ModelBounds(layout, TableFactorBound, 0.0, false, in, 1).shap);
    c.table = true;
    c.table_bound = table_bound;
  }
  for (int kind = 0; kind < 2; ++kind) {
    const bool tabled = use_table && kind == 0;
    auto pick = [kind, tabled, table_bound](const FloatErrorBounds& b) {
      return Largest(kind == 0 ? b.shap : b.interactions) + (tabled ? table_bound : 0.0);
    };
    c.bound[kind] = pick(tabled ? rest[0] : composite);
    c.top_down_bound[kind][0] = pick(tabled ? rest[1] : top_float);
    c.top_down_bound[kind][1] = pick(tabled ? rest[2] : top_double);
    if (precision != TreeShapPrecision::kAuto) {
      c.use_float[kind] = precision == TreeShapPrecision::kFloat ||
                          precision == TreeShapPrecision::kFloatTopDown;
      c.top_down[kind] = precision == TreeShapPrecision::kFloatTopDown ||
                         precision == TreeShapPrecision::kDoubleTopDown;
    } else {
      // The cheapest arithmetic whose bound is within the limit.
      if (c.top_down_bound[kind][0] <= limit) {
        c.use_float[kind] = c.top_down[kind] = true;
      } else if (c.bound[kind] <= limit) {
        c.use_float[kind] = true;
      } else {
        c.top_down[kind] = c.top_down_bound[kind][1] <= limit;
      }
    }
  }
  return c;
}

}  // namespace treeshap_arith
}  // namespace grove
