// Quadrature SHAP values by one recursion per tree (CPU): the per-path quadrature of
// core/explain/quadrature/quadrature.h, regrouped so that paths sharing a prefix share its arithmetic.
//
// For a path l, feature i with merged factor G_i(t) = Z_i (1 - t) + O_i t and the path's product
// P_l(t) = prod_j G_j(t), the path's SHAP value of i is v_l sum_k w_k (d_i / G_i)(t_k) P_l(t_k)
// (d_i = O_i - Z_i), with the path's own Gauss-Legendre rule. Along the path, d_i / G_i telescopes
// over the splits on i: with D^m the ratio after the m-th split on i (D^0 = 0),
// d_i / G_i = sum_m (D^m - D^(m-1)). Each term belongs to one edge e of the tree and is shared by
// every leaf below it, so
//   phi_i = sum over edges e on i of  sum_k w_k T_e(t_k) A_e(t_k) B_e(t_k),
//   A_e = product of the merged factors from the root down to e's child (top-down),
//   B_e = sum over leaves below e of v_l * the factor ratios from e's child down to l (bottom-up),
// with T_e = D^m - D^(m-1): O(nodes x Q) per tree and row instead of O(leaves x depth x Q) per path.
// The identity holds at every quadrature node t_k, so the sum is the per-path quadrature
// rearranged: exact for every path when Q >= QuadraturePoints(longest path of the tree).
//
// Everything that depends on the covers alone is precomputed at load, per edge and node t_k
// (docs/quadrature.md, "Tree recursion"): with O in {0, 1} for the row, the ratio and T of an edge
// take one of three values each, chosen by the row's O before and after the edge. No division runs
// per row: the only divisions are by G with O = 1 (G >= t_k > 0) at load.
//
// Immutable after BuildQuadratureTreeProgram; share it read-only between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/common/rows.h"
#include "core/explain/attribution.h"
#include "core/model/forest.h"

namespace grove {

// Rows the kernel explains side by side, one per SIMD lane: a call's rows run in blocks of this
// many (the last block padded), so cost is per started block.
inline constexpr int kQuadratureTreeLanes = 8;

// One edge (a non-root node) of a served tree, in the tree's preorder.
struct QuadratureTreeEdge {
  int32_t column = 0;      // output column of the parent's split: group * (F + 1) + feature
  int32_t feature = 0;     // the parent's split feature
  uint32_t split = 0;      // the parent's index among the tree's splits (decision slot)
  uint16_t depth = 0;      // edges from the root to this node, >= 1
  uint16_t prev_depth = 0; // depth of the nearest ancestor edge on the same feature; 0: none
  uint8_t left = 0;        // 1: the parent's left child
  uint8_t leaf = 0;
  uint16_t pops = 0;       // leaves: internal nodes whose subtrees end with this leaf (postorder)
  double value = 0;        // leaves: leaf value x tree weight
};

// One split (internal node) of a served tree, in preorder: the decision inputs of GoesLeft.
struct QuadratureTreeSplit {
  int32_t feature = 0;
  float threshold = 0;
  uint32_t payload = 0;
  uint32_t aux = 0;
  uint16_t flags = 0;
  uint8_t simple = 0;  // numeric, NaN takes the default side, no zero zone: x < threshold
};

// Interactions: one edge of a conditioned pass, with the internal nodes whose subtrees end with
// it (a leaf) in that pass's preorder.
struct QuadratureTreeStep {
  uint32_t edge = 0;  // index in QuadratureTreeProgram::edges
  uint16_t pops = 0;
};

// Interactions: a feature a tree splits on, and the edges of the paths through such a split
// (the edges of its conditioned passes; every other path cancels between present and absent).
struct QuadratureTreeCondition {
  int32_t feature = 0;
  uint32_t step_begin = 0, step_end = 0;  // in QuadratureTreeProgram::steps
};

struct QuadratureTreeInfo {
  uint32_t edge_begin = 0, edge_end = 0;    // in QuadratureTreeProgram::edges
  uint32_t split_begin = 0, split_end = 0;  // in QuadratureTreeProgram::splits
  uint32_t condition_begin = 0, condition_end = 0;  // in QuadratureTreeProgram::conditions
  uint64_t constant_begin = 0;              // in QuadratureTreeProgram::constants
  int q = 1;          // Gauss-Legendre points: QuadraturePoints(longest path, unique features)
  int depth = 0;      // deepest edge
  int iteration = 0;  // boosting round
  int tree = 0;       // index in the Forest
  int output = 0;     // output group (the outputs' matrices its interaction values add to)
};

struct QuadratureTreeProgram {
  // Served trees (scalar leaves, at least one split), in forest order. Trees with vector leaves
  // are left to the per-path kernels.
  std::vector<QuadratureTreeInfo> trees;
  std::vector<QuadratureTreeEdge> edges;
  std::vector<QuadratureTreeSplit> splits;
  // Per edge, 1 + 4 q doubles: r (the split's cover fraction: the ratio when O was 0 before the
  // edge), then per node t_k the ratio with O 1 -> 1 and 1 -> 0, then w_k T with O 1 -> 1 and
  // 1 -> 0 (T is 0 when O was 0 before the edge). Leaf edges hold v r, v R and v w_k T R (v: the
  // leaf value), so that a leaf costs one multiply-add and one add per node t_k.
  std::vector<double> constants;
  std::vector<QuadratureTreeCondition> conditions;  // per tree, ascending feature
  std::vector<QuadratureTreeStep> steps;
  std::vector<uint8_t> served;  // [forest tree]: 1 when the tree is in `trees`
  // Indices in `trees` by output, then forest order (stable); output k's trees are
  // output_order[output_tree_begin[k], output_tree_begin[k + 1]).
  std::vector<int32_t> output_order;
  std::vector<int32_t> output_tree_begin;
  // [feature]: the steps of every tree's conditioned passes on it, the interaction work of its
  // matrix row (features are far from equal: a model's trees split on a few far more often).
  std::vector<int64_t> condition_steps;
  int64_t max_condition_steps = 0;  // the largest of condition_steps
  int num_features = 0;
  int num_outputs = 1;
  int max_depth = 0;
  int max_q = 0;
  int max_splits = 0;  // splits of the largest tree
  int64_t Bytes() const;
};

using QuadratureTreeProgramPtr = std::shared_ptr<const QuadratureTreeProgram>;

// Builds the program of every scalar-leaf tree of `forest` with at least one split. Fractions are
// those of the path layout (child cover / parent cover, 0 under a parent of cover 0); leaf values
// are multiplied by the tree weight; the constants are those of `attribution`'s rule
// (AttributionRule: the recursion's identity holds at any node t). Deterministic.
QuadratureTreeProgramPtr BuildQuadratureTreeProgram(
    const Forest& forest, Attribution attribution = Attribution::kShapley);

// Per-thread buffers of AddQuadratureTreeShap, grown on demand and reused across calls.
struct QuadratureTreeScratch {
  std::vector<double> stack, decisions, accumulators, group_accumulators,
      interaction_accumulators;
  std::vector<int32_t> edge_columns;
  std::vector<float> columns;
};

// Rows handled per call of AddQuadratureTreeShap / AddQuadratureTreeInteractions (at most; any
// smaller count works).
int64_t QuadratureTreeChunkRows(const QuadratureTreeProgram& program, bool interactions);

// Whether AddQuadratureTreeInteractions takes the program's model: its per-row accumulators,
// num_outputs * (F + 1)^2 doubles per SIMD lane, must stay within a few tens of MB.
bool QuadratureTreeServesInteractions(const QuadratureTreeProgram& program);

// Cuts the interaction matrix's rows [0, F + 1) into `parts` ranges of about equal conditioned
// work (condition_steps) plus an equal share of rows, for callers that split a batch's matrix
// rows between threads: bounds[0] = 0 < bounds[1] < ... < bounds[parts] = F + 1 (parts is
// clamped to [1, max(F, 1)]: the bias row F ends the last range; bounds gets parts + 1 entries).
// Deterministic.
void QuadratureTreeMatrixRowRanges(const QuadratureTreeProgram& program, int parts,
                                   std::vector<int>* bounds);
// The share of the conditioned passes the busiest of `parts` such ranges holds, as modelled by
// those who choose the count: 1 / parts, but no less than the busiest feature's share (a matrix
// row is not cut).
double QuadratureTreeRangeShare(const QuadratureTreeProgram& program, int parts);

// SHAP values sum the program's trees in fixed groups of consecutive trees (at least
// kQuadratureTreesPerGroup trees and kQuadratureEdgesPerGroupColumn edges per output column each,
// at most kQuadratureMaxTreeGroups groups, fixed per program): each group's sum is added to a
// row's values in group order, so a caller can compute the groups of one row on several threads
// and add them in that order for the same bits as one thread.
inline constexpr int kQuadratureTreesPerGroup = 32;
inline constexpr int64_t kQuadratureEdgesPerGroupColumn = 32;
inline constexpr int kQuadratureMaxTreeGroups = 16;
int QuadratureTreeShapGroups(const QuadratureTreeProgram& program);
// The first tree (index in `trees`) of `group`; QuadratureTreeGroupBegin(p, groups) is the end.
int QuadratureTreeGroupBegin(const QuadratureTreeProgram& program, int group);

// Adds the SHAP values of the served trees of groups [group_begin, group_end) whose boosting round
// is in [iteration_begin, iteration_end) for the rows of `rows` (at most QuadratureTreeChunkRows
// rows) to `acc`, row-major rows.rows x num_outputs * (F + 1) doubles (bias columns untouched), a
// group's sum at a time. `category_bits` is the forest's bitset pool. Rows are processed in blocks
// of a few rows whose arithmetic runs side by side in SIMD lanes; each row's values are summed in
// a fixed order (groups; in a group, trees, then edges in postorder) whatever the block:
// deterministic, and independent of the other rows.
void AddQuadratureTreeShap(const QuadratureTreeProgram& program, const uint32_t* category_bits,
                           RowsView rows, int iteration_begin, int iteration_end, int group_begin,
                           int group_end, QuadratureTreeScratch* scratch, double* acc);

// Interaction values sum the program's trees in fixed groups of their own (fixed per program, at
// most kQuadratureMaxTreeGroups, at least kQuadratureTreesPerInteractionGroup trees each). One
// output: groups of consecutive trees, each with at least kQuadratureStepsPerGroupCell steps of
// the walk per cell of the matrix (a group's entries are zeroed and added per block: few groups
// for wide models). Several outputs: groups of consecutive outputs (at most one per output), each
// with the trees of its outputs, whose entries touch only its outputs' matrices. Each group's
// matrix entries are added to a row's in group order, so a caller can compute the groups of one
// row on several threads, each into zeroed doubles, and add them in that order for the same bits
// as one thread.
inline constexpr int kQuadratureTreesPerInteractionGroup = 4;
inline constexpr int64_t kQuadratureStepsPerGroupCell = 64;
int QuadratureTreeInteractionGroups(const QuadratureTreeProgram& program);
// Interaction group `group`'s trees, output_order[order_begin, order_end), and the outputs
// [output_begin, output_end) whose matrices they add to.
struct QuadratureTreeGroupSpan {
  int order_begin = 0, order_end = 0;
  int output_begin = 0, output_end = 1;
};
QuadratureTreeGroupSpan QuadratureTreeInteractionGroup(const QuadratureTreeProgram& program,
                                                       int group);

// Whether a caller that cuts few rows' matrices into ranges may run the program's SHAP pass once
// per block and set the diagonals itself (AddQuadratureTreeInteractions without `diagonal`, then
// AddQuadratureTreeInteractionShap): where the program has one interaction group. With several,
// each group's pass is a share of its (group, range) task.
bool QuadratureTreeDiagonalFromShap(const QuadratureTreeProgram& program);

// The SHAP values of the trees of interaction groups [group_begin, group_end) as
// AddQuadratureTreeInteractions' diagonal pass sums them (per group, its trees in output order),
// added to `acc` (rows.rows x num_outputs * (F + 1) doubles, those groups' outputs only; bias
// columns untouched): M[i][i] = acc[i] - sum_{j != i} M[i][j] of those groups' entries is then the
// diagonal AddQuadratureTreeInteractions with `diagonal` computes, bit for bit, where one group
// holds every tree.
void AddQuadratureTreeInteractionShap(const QuadratureTreeProgram& program,
                                      const uint32_t* category_bits, RowsView rows,
                                      int iteration_begin, int iteration_end, int group_begin,
                                      int group_end, QuadratureTreeScratch* scratch, double* acc);

// The same for SHAP interaction values (requires QuadratureTreeServesInteractions), of the trees
// of interaction groups [group_begin, group_end) (QuadratureTreeInteractionGroups), for the
// matrix rows i in [row_begin, row_end) of the matrices of those groups' outputs [o0, o1) (the
// first group's output_begin to the last's output_end: every output for all groups): `acc` is
// rows.rows x (o1 - o0) x (row_end - row_begin) x (F + 1) doubles, row-major, those outputs and
// rows only (the whole matrices for [0, F + 1); bias entries untouched). Per tree and feature i
// it splits on, M[i][j] += (phi_j | i present - phi_j | i absent) / 2 from two recursions
// (run side by side) with i's factors fixed to O and to Z; with `diagonal`, also M[i][i] +=
// phi_i - sum_{j != i} M[i][j] of the group's trees from the trees' SHAP pass: the reference's
// definition (it is linear in the trees). Without, the diagonal is left alone and no SHAP pass
// runs: a caller that cuts a one-group program's matrix rows into ranges sets each diagonal entry
// once, from AddQuadratureTreeInteractionShap's SHAP values less the row's final off-diagonal sum
// (the same bits as with `diagonal`), so that the ranges do not each repeat the pass. Each
// matrix row is computed whole by its own passes, so callers may split a batch's rows of the
// matrix between threads (each zeroes, fills and reads only its share of memory), and M[i][j] is
// the same bits whatever the split.
void AddQuadratureTreeInteractions(const QuadratureTreeProgram& program,
                                   const uint32_t* category_bits, RowsView rows,
                                   int iteration_begin, int iteration_end, int group_begin,
                                   int group_end, int row_begin, int row_end, bool diagonal,
                                   QuadratureTreeScratch* scratch, double* acc);

}  // namespace grove
