// Per-lane path arithmetic of the warp-level TreeSHAP kernels (treeshap_gpu.cuh), written once as
// GROVE_HD code so that the CPU can run exactly the GPU's float or double operations (tests of the
// error bound, the precision choice at load). Plain data and free functions; thread-safe.
//
// ## The algorithm in the "w basis" (division-free EXTEND, stable UNWIND)
// For a path whose non-root elements j = 1..n have zero fraction z_j and one fraction o_j in {0,1},
// let W(t) = prod_j (z_j + o_j t) = sum_k W_k t^k. GPUTreeShap's subset weights are
// pw_k = W_k k! (n-k)! / (n+1)!; keeping W_k instead makes EXTEND one fused multiply-add per
// element and lane, W_k <- z_u W_k + o_u W_{k-1}, with no division (every term is >= 0: no
// cancellation, relative error <= gamma_2n including the rounding of z to T).
// UNWIND of element i divides W by (z_i + o_i t): R = W / (z_i + o_i t), and the lane's unwound sum
// is total_i = sum_{k<n} r_k k! (n-1-k)! / n!  (the Shapley weights, a table built at load).
//  * o_i = 0: r_k = W_k / z_i (1/z_i hoisted: one multiplication, no cancellation).
//  * o_i = 1: synthetic division. Top-down (r_{k-1} = W_k - z_i r_k) is stable for the indices
//    above the mode of a_k = r_k z_i^k and bottom-up (r_k = (W_k - r_{k-1}) / z_i) below it, so
//    each lane runs top-down while a_k does not decrease (r_k >= z_i r_{k+1}, checked on the value
//    just computed), then bottom-up for the indices left ("composite deflation"). The a_k are
//    log-concave (R has real non-positive roots), so every r_k is computed with condition number
//    kappa_k = 1 + 2 sum_{j beyond k} a_j / a_k <= 2n - 1.
// A lane needs n + 1 steps at most (n values, plus the one rejected at the switch); each step
// fetches one W coefficient from another lane.
//
// ## Floor (operations per path element per row; n = path's non-root elements)
// EXTEND: n steps x (1 shuffle of W, 1 FMA, 1 select); UNWIND: <= n + 1 steps x (1 shuffle of W,
// 1 load of the Shapley weight, 2 FMA, 1 multiply, compare and selects). That is 2n shuffles and
// ~4n floating-point operations per element and row for SHAP values (GPUTreeShap: 4n shuffles --
// its z/o broadcast is a 64-bit shuffle -- and 2 approximate divisions per UNWIND step), and
// (n - 1) times that again for interactions (one EXTEND + UNWIND per conditioning element). The o_u
// of EXTEND come from one ballot per row and the z_u from registers loaded once per bin.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/common/hd.h"
#include "core/explain/paths.h"

namespace grove {

enum class TreeShapPrecision : uint8_t {
  kAuto,           // the cheapest arithmetic the load-time error bounds allow, per kind of request
  kFloat,          // float, composite UNWIND, always (not checked: benchmarks and ablations)
  kDouble,         // double, composite UNWIND, always (safe for every model)
  kFloatTopDown,   // float, top-down UNWIND, always (not checked: benchmarks and tests)
  kDoubleTopDown,  // double, top-down UNWIND, always (not checked: benchmarks and tests)
  // SHAP values of bins whose paths all have pattern tables (ShapTable) read them; the other bins
  // and interactions take auto's arithmetic. kAuto does the same wherever a table is built.
  kTable,
};
// "auto", "float", "double", "float_top_down", "double_top_down", "table".
const char* TreeShapPrecisionName(TreeShapPrecision precision);

namespace treeshap_arith {

// Shapley-weight table: entry WeightIndex(n, k) = k! (n-1-k)! / n! for 1 <= n <= kWarpLanes - 1,
// 0 <= k < n. Stride kWarpLanes + 1 so that lanes of one path (same n, different k) read different
// shared-memory banks.
inline constexpr int kWeightStride = kWarpLanes + 1;
inline constexpr int kWeightEntries = kWarpLanes * kWeightStride;
GROVE_HD int WeightIndex(int n, int k) { return n * kWeightStride + k; }

// The table in double (built on the host; the float table rounds it).
std::vector<double> ShapleyWeightTable();

// ## Error bound of float path arithmetic (chooses float or double at load)
// With u = 2^-24 and a path of n non-root elements, every lane's float unwound sum is within
// FloatUnwoundSumBound(n) x (its exact value) of the exact value, for every row:
//   W_k: n roundings of z to float and n FMA roundings of non-negative terms: gamma_2n;
//   r_k: kappa_k <= 2n - 1 times (gamma_2n + the 2n + 2 roundings of the deflation, z and 1/z);
//   sum of n non-negative weighted terms, table rounded: gamma_(n+1).
// Second-order terms (products of two u) are covered by the 1% slack. The bound assumes no
// underflow: it holds for paths whose MinZeroProduct is at least kFloatMinZeroProduct (every
// non-zero W_k, r_k is at least that product, every weighted term at least 2e-10 times it, so
// all stay normal floats).
double FloatUnwoundSumBound(int n);
inline constexpr double kFloatMinZeroProduct = 1e-27;
// The same for double arithmetic (TopDownUnwoundSumBound in double).
inline constexpr double kDoubleMinZeroProduct = 1e-250;
// prod over the path's elements with z > 0 of min(1, z) (z[0..len), the root's z = 1 included).
double MinZeroProduct(const double* z, int len);

// Per output k, a bound on |float - double path arithmetic| of any SHAP value (shap) and any
// interaction value (interactions), in the output's units. Per tree the contributions of its
// leaves to one feature add up to at most 2 max|leaf value| x Z (Z = largest product over a path of
// max(1, z), which is 1 for consistent covers), so the bound is the sum over trees of
// FloatUnwoundSumBound(longest path) x 2 max|leaf value| x Z; interactions add up to max_length
// conditioned contributions per entry (the diagonal), hence the factor. Infinite where float could
// overflow (Z > 1e30) or underflow (a path's MinZeroProduct below kFloatMinZeroProduct). Long paths
// (CPU fallback, double) are left out.
struct FloatErrorBounds {
  std::vector<double> shap;
  std::vector<double> interactions;
};
FloatErrorBounds TreeShapFloatErrorBounds(const PathLayout& layout);

// The same bounds for TopDownUnwinder's arithmetic in float or double (per lane:
// TopDownUnwoundSumBound; infinite for trees with an element whose z > 1).
FloatErrorBounds TreeShapTopDownErrorBounds(const PathLayout& layout, bool in_float);

// The path arithmetic of each kind of request ([0] SHAP values, [1] interactions): float or double,
// UNWIND top-down (TopDownUnwinder) or composite (Unwinder). kAuto takes the cheapest whose bound
// over outputs is <= limit: float top-down, float composite, double top-down, double composite
// (always safe). The other values force what they name.
struct ShapTable;
struct PrecisionChoice {
  bool table = false;  // SHAP values of ShapTable::table_bins read the table (the rest as below)
  double table_bound = 0;  // largest bound over outputs of the table's own error (SHAP values)
  bool use_float[2] = {false, false};
  bool top_down[2] = {false, false};
  double bound[2] = {0, 0};                    // largest float composite error bound over outputs
  double top_down_bound[2][2] = {{0, 0}, {0, 0}};  // [kind][0: float, 1: double]
};
// With a non-empty `table` and precision kAuto or kTable, SHAP values of the table's bins read
// it and the SHAP arithmetic (and its bounds) covers the other bins only, the table's bound added;
// kTable otherwise chooses as kAuto.
PrecisionChoice ChoosePrecision(const PathLayout& layout, TreeShapPrecision precision,
                                double limit, const ShapTable* table = nullptr);

template <typename T>
GROVE_HD T Fma(T a, T b, T c) {
  return fma(a, b, c);  // float overload on the device; std::fma(float...) on the host
}

// One EXTEND step for the lane holding coefficient w (its left neighbour holds `left`).
template <typename T>
GROVE_HD T ExtendStep(T w, T left, T z, bool o) {
  return Fma(z, w, o ? left : T(0));
}

// 1/z hoisted out of the row loop (0 for z == 0: such a lane is either dead -- o = 0, every W is 0
// -- or unwinds top-down only, where 1/z is never used).
template <typename T>
GROVE_HD T InverseZero(T z) {
  return z > T(0) ? T(1) / z : T(0);
}

// UNWIND state of one lane: feed it W[Source()] until Done(); Total() is the unwound sum.
template <typename T>
struct Unwinder {
  // Steps beyond the degree a lane may need (the value rejected at the direction switch).
  static constexpr int kExtraSteps = 1;
  static constexpr bool kStraightLine = false;  // per-lane state machine (GPU: UnwindRowsComposite)
  T z = 0, inv_z = 0, r = 0, total = 0;
  int n = 0;      // degree of W (non-root elements of the path, the lane's own included)
  int idx = 0;    // W coefficient to fetch next
  int stop = 0;   // bottom-up: last r index to compute
  bool top = false, done = true;
  bool carry = false;  // bottom-up subtracts the previous r (o = 1 lanes only)

  GROVE_HD void Begin(int degree, T zero, T inverse_zero, bool one) {
    z = zero;
    inv_z = inverse_zero;
    n = degree;
    r = T(0);
    total = T(0);
    top = one;  // o = 0 lanes never subtract: "bottom-up" without the carry
    idx = one ? degree : 0;
    stop = degree - 1;
    done = degree < 1;
    carry = false;
  }
  GROVE_HD int Source() const { return idx; }
  GROVE_HD bool Done() const { return done; }
  GROVE_HD T Total() const { return total; }

  // One step with w = W[Source()]; `weights` is the Shapley-weight table (WeightIndex).
  GROVE_HD void Step(T w, const T* weights) {
    if (done) return;
    if (top) {
      const T next = Fma(-z, r, w);  // r_{idx-1}
      if (idx == n || next >= z * r) {
        total = Fma(weights[WeightIndex(n, idx - 1)], next, total);
        r = next;
        done = --idx == 0;
        return;
      }
      // a_{idx-1} < a_idx: past the mode; r_0 .. r_{idx-1} bottom-up.
      top = false;
      stop = idx - 1;
      idx = 0;
      r = T(0);
      carry = true;
      return;
    }
    const T next = (carry ? w - r : w) * inv_z;
    total = Fma(weights[WeightIndex(n, idx)], next, total);
    r = next;
    done = idx++ == stop;
  }
};

// UNWIND by plain top-down deflation (o = 1: r_{k-1} = W_k - z r_k, from r_{n-1} = W_n) or scaling
// (o = 0: r_k = W_k / z), as GPUTreeShap does: every step is the same straight-line operations on
// every lane (no direction switch, no divergence), fetching W[n - 1 - s + o] at step s and adding
// the weight of r_{n-1-s}. Same interface as Unwinder. Stable enough only where
// TopDownUnwoundSumBound says so: past the mode of a_k = r_k z^k each step can lose what the
// composite deflation keeps.
template <typename T>
struct TopDownUnwinder {
  static constexpr bool kStraightLine = true;  // the same steps on every lane (UnwindRowsTopDown)
  T z = 0, inv_z = 0, r = 0, total = 0;
  int n = 0;  // degree of W
  int s = 0;  // steps taken
  bool one = false;

  GROVE_HD void Begin(int degree, T zero, T inverse_zero, bool o) {
    z = zero;
    inv_z = inverse_zero;
    n = degree;
    s = 0;
    one = o;
    r = T(0);
    total = T(0);
  }
  GROVE_HD int Source() const { return n - 1 - s + (one ? 1 : 0); }
  GROVE_HD bool Done() const { return s >= n; }
  GROVE_HD T Total() const { return total; }
  GROVE_HD void Step(T w, const T* weights) {
    if (s >= n) return;
    const T next = one ? Fma(-z, r, w) : w * inv_z;
    total = Fma(weights[WeightIndex(n, n - 1 - s)], next, total);
    r = next;
    ++s;
  }
};

// Relative error bound of TopDownUnwinder's unwound sum in a type of unit roundoff u, for a path of
// n non-root elements whose zero fractions are all <= 1 (else there is none). With FMA each r_k
// is rounded once; its error, carried down by z <= 1, is at most 2 (u + gamma_2n) sum_{j >= k} r_j
// (gamma_2n: EXTEND's W_k), so the weighted sum's error is at most 2 (u + gamma_2n) M(n) times the
// sum, M(n) = max_j sum_{k <= j} C(n-1, j) / C(n-1, k) (the Shapley weights are 1 / (n C(n-1, k))),
// plus gamma_(n+1) for the sum itself and u for the weight table. M grows like 2^(n-1) / sqrt(n):
// fine in double for the paths of most models, hopeless in float beyond a few elements.
double TopDownUnwoundSumBound(int n, double u);

// z[0..len) and o[0..len) of `path` for `row` (element 0: the root, z = o = 1).
void PathFractions(const PathLayout& layout, const PathInfo& path, const float* row, double* z,
                   bool* o);

// The warp's arithmetic for one path, run sequentially on the CPU (bit-identical to the kernel for
// the same T and Unwind): z[0..len), o[0..len) with element 0 the root; element `skip` (> 0) left
// out, or none (skip <= 0). totals[i] = unwound sum of element i (0 for the root and the skipped
// element).
template <typename T, typename Unwind = Unwinder<T>>
void EmulatePath(const double* z, const bool* o, int len, int skip, const T* weights, T* totals) {
  T w[kWarpLanes + 1] = {T(1)};
  int n = 0;  // degree so far
  for (int u = 1; u < len; ++u) {
    if (u == skip) continue;
    ++n;
    for (int k = n; k >= 1; --k) w[k] = ExtendStep(w[k], w[k - 1], static_cast<T>(z[u]), o[u]);
    w[0] = ExtendStep(w[0], T(0), static_cast<T>(z[u]), o[u]);
  }
  totals[0] = T(0);
  for (int i = 1; i < len; ++i) {
    totals[i] = T(0);
    if (i == skip) continue;
    const T zi = static_cast<T>(z[i]);
    Unwind un;
    un.Begin(n, zi, InverseZero(zi), o[i]);
    while (!un.Done()) un.Step(w[un.Source()], weights);
    totals[i] = un.Total();
  }
}

// For one row, every binned path of `layout` and each of its non-root elements:
// add(path, player, c) with c = the element's unwound sum in T (EmulatePath) x (o - z), in double
// -- what the SHAP kernel multiplies by the leaf values (tests, error studies).
template <typename T, typename Unwind = Unwinder<T>, typename Add>
void EmulateRowContributions(const PathLayout& layout, const float* row, const T* weights, Add add) {
  double z[kWarpLanes];
  bool o[kWarpLanes];
  T totals[kWarpLanes];
  for (const PathInfo& p : layout.paths) {
    if (p.bin == UINT32_MAX) continue;
    PathFractions(layout, p, row, z, o);
    EmulatePath<T, Unwind>(z, o, p.length, 0, weights, totals);
    for (int i = 1; i < p.length; ++i) {
      add(p, PlayerOf(layout, layout.elements[p.element_begin + i]),
          static_cast<double>(totals[i]) * ((o[i] ? 1.0 : 0.0) - z[i]));
    }
  }
}

// ## Pattern tables: SHAP values of short paths without EXTEND or UNWIND
// For a path of n non-root elements, element i's contribution factor total_i x (o_i - z_i)
// depends on the row only through its pattern of one fractions p = sum_i o_i 2^(i-1) (group
// members folded as PathFractions folds them: their bit is 1). For n <= kTableMaxElements every
// pattern's factors are computed at load in double by the composite arithmetic
// (EmulatePath<double>, stable always) and stored; a lane then reads its factor (one 8-byte load)
// instead of the ~2n shuffles and ~4n floating-point operations of EXTEND and UNWIND.
// Layout: factors[path_offset[path] + p n + (i - 1)] -- the lanes of one path read n consecutive
// doubles. 2^n n doubles per path: 128 B at n = 4, 3 KB at n = 6.
// Error: each factor is the double composite sum (FloatUnwoundSumBound(n) scaled to u = 2^-53)
// times (o - z), rounded once more: TableFactorBound(n) relative, ~1e-14 for n <= 6.
inline constexpr int kTableMaxElements = 6;
inline constexpr uint32_t kNoTable = UINT32_MAX;

struct ShapTable {
  std::vector<double> factors;
  std::vector<uint32_t> path_offset;  // per path of the layout: first factor, or kNoTable
  std::vector<uint8_t> bin_in_table;  // per bin: 1 when every path of the bin has a table
  std::vector<uint32_t> table_bins;   // bins with bin_in_table, ascending
  std::vector<uint32_t> other_bins;   // the other bins, ascending
  int64_t Bytes() const { return static_cast<int64_t>(factors.size()) * 8; }
  bool empty() const { return table_bins.empty(); }
};

// Tables for the bins, in bin order, whose paths all have at most max_elements (clamped to
// kTableMaxElements) non-root elements, as long as the factors stay within max_bytes (a bin that
// does not fit is left to the arithmetic; later, smaller ones may still fit). Deterministic.
ShapTable BuildShapTable(const PathLayout& layout, int max_elements, int64_t max_bytes);

// Relative error bound of one stored factor against the exact one.
double TableFactorBound(int n);

// Pattern of a path of n non-root elements from the one fractions o_bits (bit u: element u, bit
// 0 the root), and the index of element `rel` (1..n) under it.
GROVE_HD unsigned TablePattern(unsigned o_bits, int n) {
  return (o_bits >> 1) & ((1u << n) - 1u);
}
GROVE_HD int64_t TableIndex(uint32_t offset, int n, unsigned pattern, int rel) {
  return static_cast<int64_t>(offset) + static_cast<int64_t>(pattern) * n + (rel - 1);
}

// The table's SHAP contributions of one row, as EmulateRowContributions reports them: for every
// path of a table bin and each of its non-root elements, add(path, player, factor).
template <typename Add>
void TableRowContributions(const PathLayout& layout, const ShapTable& table, const float* row,
                           Add add) {
  double z[kWarpLanes];
  bool o[kWarpLanes];
  for (size_t id = 0; id < layout.paths.size(); ++id) {
    const PathInfo& p = layout.paths[id];
    if (p.bin == UINT32_MAX || !table.bin_in_table[p.bin]) continue;
    PathFractions(layout, p, row, z, o);
    unsigned bits = 0;
    for (int i = 0; i < p.length; ++i) bits |= (o[i] ? 1u : 0u) << i;
    const int n = p.length - 1;
    const unsigned pattern = TablePattern(bits, n);
    for (int i = 1; i < p.length; ++i) {
      add(p, PlayerOf(layout, layout.elements[p.element_begin + i]),
          table.factors[TableIndex(table.path_offset[id], n, pattern, i)]);
    }
  }
}

}  // namespace treeshap_arith
}  // namespace grove
