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
// `min_product`) or overflow, or -- `z_at_most_one` -- have an element with z > 1.
template <typename PerLane>
FloatErrorBounds ModelBounds(const PathLayout& layout, PerLane per_lane, double min_product,
                             bool z_at_most_one) {
  FloatErrorBounds b;
  b.shap.assign(layout.num_outputs, 0.0);
  std::vector<TreeExtent> trees(layout.num_trees);
  for (TreeExtent& t : trees) t.max_value.assign(layout.num_outputs, 0.0);
  for (const PathInfo& p : layout.paths) {
    if (p.bin != UINT32_MAX) AddPath(layout, p, &trees[p.tree]);
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

PrecisionChoice ChoosePrecision(const PathLayout& layout, TreeShapPrecision precision,
                                double limit) {
  PrecisionChoice c;
  const FloatErrorBounds composite = TreeShapFloatErrorBounds(layout);
  const FloatErrorBounds top_float = TreeShapTopDownErrorBounds(layout, true);
  const FloatErrorBounds top_double = TreeShapTopDownErrorBounds(layout, false);
  for (int kind = 0; kind < 2; ++kind) {
    auto pick = [kind](const FloatErrorBounds& b) { return Largest(kind == 0 ? b.shap : b.interactions); };
    c.bound[kind] = pick(composite);
    c.top_down_bound[kind][0] = pick(top_float);
    c.top_down_bound[kind][1] = pick(top_double);
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
