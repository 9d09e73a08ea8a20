// Host side of the warp TreeSHAP arithmetic (see treeshap_arith.h).
#include "core/explain/treeshap_arith.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace grove {

const char* TreeShapPrecisionName(TreeShapPrecision precision) {
  switch (precision) {
    case TreeShapPrecision::kAuto: return "auto";
    case TreeShapPrecision::kFloat: return "float";
    case TreeShapPrecision::kDouble: return "double";
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

void PathFractions(const PathLayout& layout, const PathInfo& path, const float* row, double* z,
                   bool* o) {
  const PathElement* e = layout.elements.data() + path.element_begin;
  for (int i = 0; i < path.length; ++i) {
    z[i] = e[i].zero_fraction;
    o[i] = PathElementMatches(e[i], layout.category_bits.data(),
                              i == 0 ? 0.0f : row[e[i].feature]);
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

FloatErrorBounds TreeShapFloatErrorBounds(const PathLayout& layout) {
  FloatErrorBounds b;
  b.shap.assign(layout.num_outputs, 0.0);
  std::vector<TreeExtent> trees(layout.num_trees);
  for (TreeExtent& t : trees) t.max_value.assign(layout.num_outputs, 0.0);
  for (const PathInfo& p : layout.paths) {
    if (p.bin != UINT32_MAX) AddPath(layout, p, &trees[p.tree]);
  }
  for (const TreeExtent& t : trees) {
    const bool unsafe = t.z_growth > 1e30 || t.min_product < kFloatMinZeroProduct;
    const double per_value = unsafe ? std::numeric_limits<double>::infinity()
                                    : FloatUnwoundSumBound(t.degree) * 2 * t.z_growth;
    for (int k = 0; k < layout.num_outputs; ++k) {
      if (t.max_value[k] > 0) b.shap[k] += per_value * t.max_value[k];
    }
  }
  b.interactions = b.shap;
  for (double& v : b.interactions) v *= std::max(layout.max_length, 1);
  return b;
}

PrecisionChoice ChoosePrecision(const PathLayout& layout, TreeShapPrecision precision,
                                double limit) {
  PrecisionChoice c;
  const FloatErrorBounds b = TreeShapFloatErrorBounds(layout);
  for (int kind = 0; kind < 2; ++kind) {
    const std::vector<double>& v = kind == 0 ? b.shap : b.interactions;
    c.bound[kind] = v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
    c.use_float[kind] = precision == TreeShapPrecision::kFloat ||
                        (precision == TreeShapPrecision::kAuto && c.bound[kind] <= limit);
  }
  return c;
}

}  // namespace treeshap_arith
}  // namespace grove
