// Quadrature SHAP interaction values path by path on the CPU, each unordered pair of a path's
// features computed once and summed per tree before it reaches the row's matrix.
//
// For a path with factors f_l(t) = z_l + t d_l, the pair integral I_ij = int prod_{l != i, j} f_l
// is symmetric, so phi_ij = phi_ji = v/2 d_i d_j I_ij (core/explain/quadrature/quadrature.h). At
// each Gauss-Legendre node the prefix products pre_i = prod_{l < i} f_l and the suffix products
// suf_j = w prod_{l > j} f_l give I_ij = pre_i (prod_{i < l < j} f_l) suf_j for i < j: one multiply-
// add per unordered pair and node, the middle product grown as j moves right. No division runs,
// so factors of 0 (or that underflow) are exact, as in the per-path kernel.
//
// Writing n^2 values per path into the row's (F + 1)^2 matrix is what costs on wide models (a
// 1,024-feature matrix is 8.4 MB: nearly every write misses L1 and L2). The paths of one tree
// share most of their pairs (an ancestor split and a descendant split are on every path below
// both), so a group of a tree's paths adds into a small dense matrix over the group's own
// features (numbered at load, at most kQuadraturePairLocalFeatures of them unless one path has
// more), and only the group's distinct pairs are added to the upper triangle of the row's matrix,
// once per group; the lower triangle is its mirror, written once per row.
//
// Immutable after BuildQuadraturePairProgram; share it read-only between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/common/rows.h"

namespace grove {

struct QuadratureModel;  // core/explain/quadrature/quadrature.h

// Local features of a group: more paths per group share more pairs, a larger local matrix
// (L^2 doubles per output) leaves L1 / L2.
inline constexpr int kQuadraturePairLocalFeatures = 96;

// Consecutive paths of one tree with a local feature numbering.
struct QuadraturePairGroup {
  uint32_t path_begin = 0, path_end = 0;        // in QuadraturePairProgram::paths
  uint32_t feature_begin = 0, feature_end = 0;  // in QuadraturePairProgram::features: L of them
  uint32_t pair_begin = 0, pair_end = 0;        // in QuadraturePairProgram::pairs
  int32_t tree = 0;                             // index in the Forest
  int32_t iteration = 0;                        // boosting round
  int32_t output = 0;                           // first output group of its leaves
  int32_t width = 1;                            // values per leaf
};

struct QuadraturePairProgram {
  std::vector<QuadraturePairGroup> groups;  // tree by tree, in forest order
  // Ids in QuadratureModel::paths, group by group, in the layout's order within a tree.
  std::vector<uint32_t> paths;
  // Per element of QuadratureModel::elements: its feature's index among its group's features.
  std::vector<uint16_t> element_local;
  std::vector<int32_t> features;  // per group, its features ascending
  // Per group, its distinct pairs (a, b) of local indices with a <= b (a == b: the diagonal) that
  // some path of the group holds, ascending: a * 65536 + b.
  std::vector<uint32_t> pairs;
  // Output boundaries no group's leaves straddle, ascending from 0 to the model's num_outputs:
  // the outputs [output_splits[u], output_splits[u + 1]) of a row take only the groups whose
  // leaves write to them, so each such unit can be summed apart (one unit per class of a
  // multi-class model with one tree per class and round; one unit where leaves are vectors).
  std::vector<int32_t> output_splits;
  // Per unit u of outputs, the distinct upper-triangle cells (i, j), i <= j, as i << 32 | j,
  // that its groups' pairs reach, ascending:
  // unit_cells[unit_cell_begin[u], unit_cell_begin[u + 1]); and per pair (parallel to `pairs`),
  // its cell's index among its unit's cells. A unit's sums then live in a dense array of its
  // cells (a few hundred KB where its matrices are megabytes).
  std::vector<uint32_t> unit_cell_begin;
  std::vector<uint64_t> unit_cells;
  std::vector<uint32_t> pair_cell;
  // Per unit u, its groups in program order: unit_groups[unit_group_begin[u],
  // unit_group_begin[u + 1]); per group, an estimate of its cost (multiply-adds of its paths).
  std::vector<uint32_t> unit_group_begin;
  std::vector<uint32_t> unit_groups;
  std::vector<double> group_work;
  int max_local = 0;   // largest L
  int max_unique = 0;  // longest path (unique features)
  int max_width = 1;
  int64_t Bytes() const;
};

using QuadraturePairProgramPtr = std::shared_ptr<const QuadraturePairProgram>;

// Groups the paths of `model` and numbers their features and pairs (from its paths and elements;
// rules and values are read from `model` at run time, so a copy of the model with other rules may
// use the same program). Deterministic.
QuadraturePairProgramPtr BuildQuadraturePairProgram(const QuadratureModel& model);

// Per-thread buffers of the functions below, grown on demand and reused across calls.
struct QuadraturePairScratch {
  std::vector<double> z, d, factors, prefix, suffix, sums, pairs, local, cells;
};

// Writes the SHAP interaction values of `row` for the outputs [output_begin, output_end), two
// entries of program.output_splits, for the paths of the trees whose boosting round is in
// [iteration_begin, iteration_end) and for which `skip_tree` is null or 0 (trees another kernel
// explains) into `acc`: those outputs' (output_end - output_begin) * (F + 1)^2 doubles, row-major,
// which must be zero on entry (other kernels add theirs afterwards). Each pair is summed into the
// upper triangle (fi < fj) and the lower triangle is set from it at the end, so (i, j) and (j, i)
// are the same bits. Summed in a fixed order (groups in program order, paths in layout order
// within a group, then the group's pairs), and an output's entries take only the groups that
// write to it: the same bits whichever unit of outputs a call covers. `model` is the one the
// program was built from (or a copy with other rules). Thread-safe with distinct scratch.
void AddQuadraturePairInteractions(const QuadraturePairProgram& program,
                                   const QuadratureModel& model, const float* row,
                                   int iteration_begin, int iteration_end,
                                   const uint8_t* skip_tree, int output_begin, int output_end,
                                   QuadraturePairScratch* scratch, double* acc);

// The SHAP interaction values of `row` for the outputs of unit `unit` (outputs
// [output_splits[unit], output_splits[unit + 1])) where this program explains every tree of
// rounds [iteration_begin, iteration_end), written as float to `out`: those outputs'
// (F + 1)^2 entries each, row-major, every entry set (`bias[k]` at (F, F) of output k, 0 where no
// path reaches). Sums in the unit's cells (unit_cells) in AddQuadraturePairInteractions's order:
// the same bits as it followed by a conversion to float. Thread-safe with distinct scratch.
void WriteQuadraturePairInteractions(const QuadraturePairProgram& program,
                                     const QuadratureModel& model, const float* row,
                                     int iteration_begin, int iteration_end, int unit,
                                     const double* bias, QuadraturePairScratch* scratch,
                                     float* out);

// A unit's groups cut into `segments` ranges of about equal work, for tasks that share one row's
// unit: bounds[0..segments] are indices into the unit's groups (unit_groups, relative to
// unit_group_begin[unit]), bounds[0] = 0 and bounds[segments] = the unit's group count.
void QuadraturePairSegments(const QuadraturePairProgram& program, int unit, int segments,
                            uint32_t* bounds);

// The per-pair sums of `row` for the unit's groups [group_begin, group_end) (indices as in
// QuadraturePairSegments) in rounds [iteration_begin, iteration_end): pair q's `width` sums go to
// pair_values[q * max_width ..]; pairs of skipped groups are left as they are. Thread-safe with
// distinct scratch; tasks of one row may write one pair_values array concurrently (their pairs
// are disjoint).
void SumQuadraturePairSegment(const QuadraturePairProgram& program, const QuadratureModel& model,
                              const float* row, int iteration_begin, int iteration_end, int unit,
                              uint32_t group_begin, uint32_t group_end,
                              QuadraturePairScratch* scratch, double* pair_values);

// WriteQuadraturePairInteractions from the per-pair sums of all of the unit's groups
// (SumQuadraturePairSegment): adds them into the unit's cells group by group in program order,
// the order WriteQuadraturePairInteractions adds them in, so the results are the same bits.
void WriteQuadraturePairInteractionsFromPairs(const QuadraturePairProgram& program,
                                              const QuadratureModel& model, int iteration_begin,
                                              int iteration_end, int unit,
                                              const double* pair_values, const double* bias,
                                              QuadraturePairScratch* scratch, float* out);

}  // namespace grove
