// Quadrature SHAP values by one recursion per tree: program building and the CPU kernel.
// See core/explain/quadrature/quadrature_tree.h for the contract and docs/quadrature.md for the derivation.
#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "core/explain/cover_fraction.h"
#include "core/explain/quadrature/quadrature.h"
#include "core/explain/quadrature/quadrature_tree.h"
#include "core/model/decision.h"

// The kernel is compiled for AVX-512 and AVX2 + FMA besides the baseline, picked at run time
// (GCC function multi-versioning): its lane loops vectorize across rows.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define GROVE_KERNEL_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GROVE_KERNEL_CLONES
#endif
#if defined(__GNUC__)
// Lane vectors are only passed between always-inlined functions of this file: no ABI crosses.
#pragma GCC diagnostic ignored "-Wpsabi"
#define GROVE_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define GROVE_ALWAYS_INLINE inline
#endif

namespace grove {
namespace {

// Rows explained side by side, one SIMD lane each: 8 doubles are one AVX-512 register, two AVX2
// ones, four SSE2 ones (the compiler splits the vector type as the target needs).
constexpr int kLanes = kQuadratureTreeLanes;
using Lanes = double __attribute__((vector_size(kLanes * sizeof(double))));
using FloatLanes = float __attribute__((vector_size(kLanes * sizeof(float))));
static_assert(sizeof(Lanes) == kLanes * sizeof(double), "one double per lane");
// Blocks of kLanes rows that run through one tree before the next tree: the tree's program
// stays in L1 / L2 across them.
constexpr int kBlocksPerChunk = 8;

// Bytes of accumulators a thread may hold for one chunk (one block at least).
constexpr int64_t kAccumulatorBudget = int64_t{16} << 20;

// Interactions run by the tree kernel when a block's accumulators, num_outputs * (F + 1)^2
// doubles per lane, stay within a few budgets.
bool InteractionsFit(int64_t num_features, int64_t num_outputs) {
  const int64_t f1 = num_features + 1;
  return num_outputs * f1 * f1 * static_cast<int64_t>(sizeof(Lanes)) <= 4 * kAccumulatorBudget;
}

// Lanes{} + x rather than a plain broadcast: GCC 12 turns the selections below into long chains
// of masked broadcasts for the latter (measured 2x slower on AVX-512).
GROVE_ALWAYS_INLINE Lanes Splat(double x) { return Lanes{} + x; }

// Per-thread stack of the recursion for one block: per depth d (0 = root) and node t_k, the
// top-down product A, the edge's ratio R, w_k T A and the bottom-up sum B; per depth the row's O
// (1 at the root: "no split on the feature yet") and the edge's output column.
struct Stack {
  Lanes* a;
  Lanes* r;
  Lanes* ta;
  Lanes* b;
  Lanes* o;
  int32_t* column;
};

// The decision of every split of `tree` for the block's rows: 1.0 (left) or 0.0 per lane.
GROVE_ALWAYS_INLINE void Decide(const QuadratureTreeProgram& p, const QuadratureTreeInfo& tree,
                                const FloatLanes* columns, const uint32_t* category_bits,
                                Lanes* decisions) {
  const Lanes one = Splat(1.0), zero = Splat(0.0);
  for (uint32_t s = tree.split_begin; s < tree.split_end; ++s) {
    const QuadratureTreeSplit& split = p.splits[s];
    const FloatLanes xf = columns[split.feature];
    Lanes& out = decisions[s - tree.split_begin];
    if (split.simple) {
      // float x < float threshold exactly when their (exact) double conversions compare so.
      const Lanes x = __builtin_convertvector(xf, Lanes);
      const Lanes nan_side = (split.flags & decision_bits::kDefaultLeft) ? one : zero;
      out = x < static_cast<double>(split.threshold) ? one : (x != x ? nan_side : zero);
    } else {
      for (int l = 0; l < kLanes; ++l) {
        out[l] = GoesLeft(split.flags, split.threshold, split.payload, split.aux, category_bits,
                          xf[l])
                     ? 1.0
                     : 0.0;
      }
    }
  }
}

// Closes the internal node at depth `d`: its edge's contribution sum_k w_k T A B goes to its
// column, and R B to its parent's B.
template <int Q>
GROVE_ALWAYS_INLINE void Close(int d, int q, const Stack& s, Lanes* acc, int64_t acc_stride) {
  const int qs = Q > 0 ? Q : q;
  Lanes sum = Splat(0.0);
  const int64_t at = static_cast<int64_t>(d) * qs;
  for (int k = 0; k < qs; ++k) {
    const Lanes b = s.b[at + k];
    sum += s.ta[at + k] * b;
    s.b[at - qs + k] += s.r[at + k] * b;
  }
  acc[s.column[d] * acc_stride] += sum;
}

// The selections of an edge for the block's rows: by the row's O before and after the edge (in
// {0, 1}), the edge's ratio and w_k T (leaves: v R and v w_k T R) for node t_k. Exact.
struct EdgeCase {
  Lanes o_before, o_after, r00;
  const double* c;  // the edge's constants
  int q;
  GROVE_ALWAYS_INLINE Lanes Ratio(int k) const {
    return o_after != 0 ? Splat(c[1 + k]) : (o_before != 0 ? Splat(c[1 + q + k]) : r00);
  }
  GROVE_ALWAYS_INLINE Lanes T(int k) const {
    return o_after != 0 ? Splat(c[1 + 2 * q + k])
                        : (o_before != 0 ? Splat(c[1 + 3 * q + k]) : Splat(0.0));
  }
};

// The row's case at edge `e` (O before from the stack, the edge's decision).
GROVE_ALWAYS_INLINE EdgeCase CaseOf(const QuadratureTreeEdge& e, const double* c, int q,
                                   const Lanes* o, const Lanes* decisions) {
  const Lanes dec = decisions[e.split];
  const Lanes o_before = o[e.prev_depth];
  const Lanes o_after = o_before * (e.left ? dec : Splat(1.0) - dec);
  return EdgeCase{o_before, o_after, Splat(c[0]), c, q};
}

// SHAP values: the recursion over `tree` for one block of kLanes rows, given the block's
// decisions, every edge in preorder; contributions to acc[edge column * acc_stride]. Q > 0:
// compile-time point count; 0: tree.q at run time.
template <int Q>
GROVE_ALWAYS_INLINE void Pass(const QuadratureTreeProgram& p, const QuadratureTreeInfo& tree,
                              const Lanes* decisions, const Stack& s, Lanes* acc,
                              int64_t acc_stride) {
  const int q = Q > 0 ? Q : tree.q;
  const int64_t stride = 1 + 4 * static_cast<int64_t>(q);
  const Lanes one = Splat(1.0), zero = Splat(0.0);
  s.o[0] = one;
  for (int k = 0; k < q; ++k) s.a[k] = one;
  const double* constants = p.constants.data() + tree.constant_begin;
  for (uint32_t i = tree.edge_begin; i < tree.edge_end; ++i) {
    const QuadratureTreeEdge& e = p.edges[i];
    const EdgeCase x = CaseOf(e, constants + (i - tree.edge_begin) * stride, q, s.o, decisions);
    const int d = e.depth;
    const Lanes* a_parent = s.a + static_cast<int64_t>(d - 1) * q;
    Lanes* b_parent = s.b + static_cast<int64_t>(d - 1) * q;
    if (e.leaf) {
      Lanes sum = zero;
      for (int k = 0; k < q; ++k) {
        sum += a_parent[k] * x.T(k);
        b_parent[k] += x.Ratio(k);
      }
      acc[e.column * acc_stride] += sum;
      for (int closed = 0; closed < e.pops; ++closed) {
        Close<Q>(d - 1 - closed, q, s, acc, acc_stride);
      }
      continue;
    }
    const int64_t at = static_cast<int64_t>(d) * q;
    for (int k = 0; k < q; ++k) {
      const Lanes ratio = x.Ratio(k);
      const Lanes a = a_parent[k] * ratio;
      s.a[at + k] = a;
      s.r[at + k] = ratio;
      s.ta[at + k] = x.T(k) * a;
      s.b[at + k] = zero;
    }
    s.o[d] = x.o_after;
    s.column[d] = e.column;
  }
}

// Interactions: the stack of the two conditioned recursions run side by side, present (the
// conditioned feature's factors are O) and absent (they are Z); the row's O is shared.
struct PairStack {
  Stack present, absent;
};

// Closes the internal node at depth `d` of both recursions: half the difference of their
// contributions goes to the node's column; each R B to its parent's B.
template <int Q>
GROVE_ALWAYS_INLINE void ClosePair(int d, int q, const PairStack& s, Lanes* acc,
                                   int64_t acc_stride) {
  const int qs = Q > 0 ? Q : q;
  Lanes sum = Splat(0.0);
  const int64_t at = static_cast<int64_t>(d) * qs;
  for (int k = 0; k < qs; ++k) {
    const Lanes bp = s.present.b[at + k], ba = s.absent.b[at + k];
    sum += s.present.ta[at + k] * bp - s.absent.ta[at + k] * ba;
    s.present.b[at - qs + k] += s.present.r[at + k] * bp;
    s.absent.b[at - qs + k] += s.absent.r[at + k] * ba;
  }
  acc[s.present.column[d] * acc_stride] += 0.5 * sum;
}

// Interactions for the feature `condition`: the tree with it no longer a player but fixed
// present and fixed absent, over `steps` only (the edges of paths through a split on it: the
// others cancel between the two), half the difference of the contributions to the interaction
// column [condition][feature] of the edge's output block. On the conditioned feature's edges the
// ratio is O^m / O^(m-1) = O after the edge (when O was 0 before, every product below is 0
// already) present, Z^m / Z^(m-1) = r absent, and there is no contribution.
template <int Q>
GROVE_ALWAYS_INLINE void ConditionedPass(const QuadratureTreeProgram& p,
                                         const QuadratureTreeInfo& tree, const Lanes* decisions,
                                         const PairStack& s, const QuadratureTreeStep* steps,
                                         uint32_t num_steps, int condition,
                                         int64_t condition_base, Lanes* acc,
                                         int64_t acc_stride) {
  const int q = Q > 0 ? Q : tree.q;
  const int64_t stride = 1 + 4 * static_cast<int64_t>(q);
  const Lanes one = Splat(1.0), zero = Splat(0.0);
  const Stack& sp = s.present;
  const Stack& sa = s.absent;
  sp.o[0] = one;
  for (int k = 0; k < q; ++k) sp.a[k] = sa.a[k] = one;
  const double* constants = p.constants.data() + tree.constant_begin;
  for (uint32_t n = 0; n < num_steps; ++n) {
    const QuadratureTreeEdge& e = p.edges[steps[n].edge];
    const EdgeCase x =
        CaseOf(e, constants + (steps[n].edge - tree.edge_begin) * stride, q, sp.o, decisions);
    const int d = e.depth;
    const int64_t up = static_cast<int64_t>(d - 1) * q;
    const int64_t column = condition_base + e.column;
    const bool fixed = e.feature == condition;
    if (e.leaf) {
      if (fixed) {
        // Leaf constants carry the value: r00 is v r.
        const Lanes v_present = e.value * x.o_after;
        for (int k = 0; k < q; ++k) {
          sp.b[up + k] += v_present;
          sa.b[up + k] += x.r00;
        }
      } else {
        Lanes sum = zero;
        for (int k = 0; k < q; ++k) {
          sum += (sp.a[up + k] - sa.a[up + k]) * x.T(k);
          const Lanes v_ratio = x.Ratio(k);
          sp.b[up + k] += v_ratio;
          sa.b[up + k] += v_ratio;
        }
        acc[column * acc_stride] += 0.5 * sum;
      }
      for (int closed = 0; closed < steps[n].pops; ++closed) {
        ClosePair<Q>(d - 1 - closed, q, s, acc, acc_stride);
      }
      continue;
    }
    const int64_t at = static_cast<int64_t>(d) * q;
    for (int k = 0; k < q; ++k) {
      const Lanes ratio_present = fixed ? x.o_after : x.Ratio(k);
      const Lanes ratio_absent = fixed ? x.r00 : ratio_present;
      const Lanes t = fixed ? zero : x.T(k);
      const Lanes a_present = sp.a[up + k] * ratio_present;
      const Lanes a_absent = sa.a[up + k] * ratio_absent;
      sp.a[at + k] = a_present;
      sa.a[at + k] = a_absent;
      sp.r[at + k] = ratio_present;
      sa.r[at + k] = ratio_absent;
      sp.ta[at + k] = t * a_present;
      sa.ta[at + k] = t * a_absent;
      sp.b[at + k] = zero;
      sa.b[at + k] = zero;
    }
    sp.o[d] = x.o_after;
    sp.column[d] = static_cast<int32_t>(column);
  }
}

// One tree for one block: SHAP values into shap (acc_stride apart per column; null: no SHAP
// pass); with `interactions`, also, per feature the tree splits on, half the difference of the
// conditioned passes (present minus absent) into interactions.
template <int Q>
GROVE_ALWAYS_INLINE void RunTreeQ(const QuadratureTreeProgram& p, const QuadratureTreeInfo& tree,
                                  const FloatLanes* columns, const uint32_t* category_bits,
                                  Lanes* decisions, const PairStack& s, Lanes* shap,
                                  Lanes* interactions, int64_t acc_stride, int feature_begin,
                                  int feature_end) {
  Decide(p, tree, columns, category_bits, decisions);
  if (shap != nullptr) Pass<Q>(p, tree, decisions, s.present, shap, acc_stride);
  if (interactions == nullptr) return;
  // The accumulators of [feature_begin, feature_end) only, as [condition][output][feature].
  const int64_t row_width = static_cast<int64_t>(p.num_outputs) * (p.num_features + 1);
  for (uint32_t c = tree.condition_begin; c < tree.condition_end; ++c) {
    const QuadratureTreeCondition& condition = p.conditions[c];
    if (condition.feature < feature_begin || condition.feature >= feature_end) continue;
    ConditionedPass<Q>(p, tree, decisions, s, p.steps.data() + condition.step_begin,
                       condition.step_end - condition.step_begin, condition.feature,
                       (condition.feature - feature_begin) * row_width, interactions, acc_stride);
  }
}

// Dispatch on the tree's point count: depth-8 trees need at most 4 points, depth-16 at most 8.
GROVE_KERNEL_CLONES
void RunTree(const QuadratureTreeProgram& p, const QuadratureTreeInfo& tree,
             const FloatLanes* columns, const uint32_t* category_bits, Lanes* decisions,
             const PairStack& s, Lanes* shap, Lanes* interactions, int64_t acc_stride,
             int feature_begin, int feature_end) {
#define GROVE_RUN_TREE(Q)                                                                     \
  RunTreeQ<Q>(p, tree, columns, category_bits, decisions, s, shap, interactions, acc_stride, \
              feature_begin, feature_end)
  switch (tree.q) {
    case 1: GROVE_RUN_TREE(1); break;
    case 2: GROVE_RUN_TREE(2); break;
    case 3: GROVE_RUN_TREE(3); break;
    case 4: GROVE_RUN_TREE(4); break;
    case 5: GROVE_RUN_TREE(5); break;
    case 6: GROVE_RUN_TREE(6); break;
    case 7: GROVE_RUN_TREE(7); break;
    case 8: GROVE_RUN_TREE(8); break;
    default: GROVE_RUN_TREE(0); break;
  }
#undef GROVE_RUN_TREE
}

}  // namespace

int64_t QuadratureTreeProgram::Bytes() const {
  return static_cast<int64_t>(trees.size() * sizeof(QuadratureTreeInfo) +
                              edges.size() * sizeof(QuadratureTreeEdge) +
                              splits.size() * sizeof(QuadratureTreeSplit) +
                              constants.size() * sizeof(double) +
                              conditions.size() * sizeof(QuadratureTreeCondition) +
                              steps.size() * sizeof(QuadratureTreeStep) + served.size() +
                              condition_steps.size() * sizeof(int64_t) +
                              (output_order.size() + output_tree_begin.size()) * sizeof(int32_t));
}

QuadratureTreeProgramPtr BuildQuadratureTreeProgram(const Forest& forest,
                                                    Attribution attribution) {
  auto program = std::make_shared<QuadratureTreeProgram>();
  program->num_features = forest.num_features;
  program->num_outputs = forest.num_outputs;
  program->served.assign(forest.trees.size(), 0);
  program->condition_steps.assign(std::max(forest.num_features, 0), 0);
  std::map<int, GaussLegendreRule> rules;
  const int64_t f1 = forest.num_features + 1;
  const bool interactions = InteractionsFit(forest.num_features, forest.num_outputs);
  // Per node of the current tree: parent, depth, merged zero fraction of the edge into it, unique
  // features from the root, and the depth of the previous edge on the same feature.
  std::vector<int32_t> parent, order;
  std::vector<int> depth, unique, prev_depth, prev_node;
  std::vector<double> merged;
  std::vector<int32_t> stack;
  for (int t = 0; t < static_cast<int>(forest.trees.size()); ++t) {
    const Tree& tree = forest.trees[t];
    const Node* nodes = forest.TreeNodes(t);
    if (tree.leaf_width != 1 || nodes[0].is_leaf()) continue;
    const int n = static_cast<int>(tree.num_nodes);
    parent.assign(n, -1);
    depth.assign(n, 0);
    unique.assign(n, 0);
    prev_depth.assign(n, 0);
    prev_node.assign(n, -1);
    merged.assign(n, 1.0);
    order.clear();
    // Preorder, left child first.
    stack.assign(1, 0);
    while (!stack.empty()) {
      const int32_t i = stack.back();
      stack.pop_back();
      order.push_back(i);
      const Node& node = nodes[i];
      if (node.is_leaf()) continue;
      for (int32_t child : {node.right, node.left}) {
        parent[child] = i;
        depth[child] = depth[i] + 1;
        stack.push_back(child);
      }
    }
    QuadratureTreeInfo info;
    info.tree = t;
    info.iteration = tree.iteration;
    info.edge_begin = static_cast<uint32_t>(program->edges.size());
    info.split_begin = static_cast<uint32_t>(program->splits.size());
    std::vector<int32_t> split_slot(n, -1);
    int max_unique = 0;
    for (int32_t i : order) {
      const Node& node = nodes[i];
      if (!node.is_leaf()) {
        split_slot[i] = static_cast<int32_t>(program->splits.size()) - info.split_begin;
        QuadratureTreeSplit split;
        split.feature = node.feature;
        split.threshold = node.threshold;
        split.payload = node.payload;
        split.aux = node.aux;
        split.flags = node.flags;
        split.simple = !(node.flags & (decision_bits::kCategorical | decision_bits::kMissingZero |
                                       decision_bits::kNanAsZero));
        program->splits.push_back(split);
      }
      if (i == 0) continue;
      const int32_t p = parent[i];
      const int32_t feature = nodes[p].feature;
      // The nearest ancestor edge on the same feature: an edge (x -> y) above p with x on it.
      int32_t y = p;
      while (y != 0 && nodes[parent[y]].feature != feature) y = parent[y];
      const bool first = y == 0;
      const double fraction = CoverFraction(node.cover, nodes[p].cover);
      merged[i] = (first ? 1.0 : merged[y]) * fraction;
      prev_depth[i] = first ? 0 : depth[y];
      prev_node[i] = first ? -1 : y;
      unique[i] = unique[p] + (first ? 1 : 0);
      if (node.is_leaf()) max_unique = std::max(max_unique, unique[i]);
    }
    info.q = AttributionPoints(attribution, max_unique);
    info.constant_begin = program->constants.size();
    auto rule_it = rules.find(info.q);
    if (rule_it == rules.end()) {
      rule_it = rules.emplace(info.q, AttributionRule(attribution, info.q)).first;
    }
    const GaussLegendreRule& rule = rule_it->second;
    const int q = info.q;
    for (size_t pos = 1; pos < order.size(); ++pos) {
      const int32_t i = order[pos];
      const Node& node = nodes[i];
      const int32_t p = parent[i];
      QuadratureTreeEdge e;
      e.column = static_cast<int32_t>(tree.group * f1 + nodes[p].feature);
      e.feature = nodes[p].feature;
      e.split = static_cast<uint32_t>(split_slot[p]);
      e.depth = static_cast<uint16_t>(depth[i]);
      e.prev_depth = static_cast<uint16_t>(prev_depth[i]);
      e.left = nodes[p].left == i ? 1 : 0;
      e.leaf = node.is_leaf() ? 1 : 0;
      if (e.leaf) {
        e.value = tree.weight * forest.leaf_values[node.payload];
        const int next_depth = pos + 1 < order.size() ? depth[order[pos + 1]] : 1;
        e.pops = static_cast<uint16_t>(depth[i] - next_depth);
      }
      info.depth = std::max(info.depth, depth[i]);
      program->edges.push_back(e);
      // G1 = Z (1 - t) + t and D1 = (1 - Z) / G1 for O = 1; G0 = Z (1 - t) and D0 = -1 / (1 - t)
      // for O = 0 (for every Z: when Z = 0 the edge's factor is 0 and so is every product that
      // D0 multiplies). Before the first split on a feature, G = 1 and D = 0 (Z = 1, O = 1).
      const double z = merged[i];
      const double z_before = prev_node[i] < 0 ? 1.0 : merged[prev_node[i]];
      const size_t base = program->constants.size();
      program->constants.resize(base + 1 + 4 * q);
      double* c = program->constants.data() + base;
      // A leaf's B is its value: its constants carry it (v r, v R, v w T R).
      const double v = e.leaf ? e.value : 1.0;
      c[0] = v * CoverFraction(node.cover, nodes[p].cover);
      for (int k = 0; k < q; ++k) {
        const double tk = rule.nodes[k], wk = rule.weights[k];
        const double g1 = z * (1.0 - tk) + tk;
        const double g0 = z * (1.0 - tk);
        const double g1_before = prev_node[i] < 0 ? 1.0 : z_before * (1.0 - tk) + tk;
        const double d1 = (1.0 - z) / g1;
        const double d0 = -1.0 / (1.0 - tk);
        const double d1_before = prev_node[i] < 0 ? 0.0 : (1.0 - z_before) / g1_before;
        const double r11 = g1 / g1_before, r10 = g0 / g1_before;
        const double t11 = wk * (d1 - d1_before), t10 = wk * (d0 - d1_before);
        c[1 + k] = v * r11;
        c[1 + q + k] = v * r10;
        c[1 + 2 * q + k] = e.leaf ? v * t11 * r11 : t11;
        c[1 + 3 * q + k] = e.leaf ? v * t10 * r10 : t10;
      }
    }
    info.edge_end = static_cast<uint32_t>(program->edges.size());
    // Interactions: per feature the tree splits on, the edges of the paths through such a split
    // (a split on it above the edge's child, or in the child's subtree), in preorder. None where
    // the per-path kernel takes the interactions.
    std::vector<int32_t> features;
    for (int32_t i : order) {
      if (interactions && !nodes[i].is_leaf()) features.push_back(nodes[i].feature);
    }
    std::sort(features.begin(), features.end());
    features.erase(std::unique(features.begin(), features.end()), features.end());
    info.condition_begin = static_cast<uint32_t>(program->conditions.size());
    std::vector<uint8_t> above(n), below(n);
    std::vector<size_t> kept;
    for (int32_t feature : features) {
      for (size_t pos = order.size(); pos-- > 0;) {
        const int32_t i = order[pos];
        const Node& node = nodes[i];
        below[i] = !node.is_leaf() &&
                   (node.feature == feature || below[node.left] || below[node.right]);
      }
      kept.clear();
      for (size_t pos = 1; pos < order.size(); ++pos) {
        const int32_t i = order[pos];
        const int32_t p = parent[i];
        above[i] = (p != 0 && above[p]) || nodes[p].feature == feature;
        if (above[i] || below[i]) kept.push_back(pos);
      }
      QuadratureTreeCondition condition;
      condition.feature = feature;
      condition.step_begin = static_cast<uint32_t>(program->steps.size());
      for (size_t k = 0; k < kept.size(); ++k) {
        const int32_t i = order[kept[k]];
        QuadratureTreeStep step;
        step.edge = info.edge_begin + static_cast<uint32_t>(kept[k] - 1);
        if (nodes[i].is_leaf()) {
          const int next_depth = k + 1 < kept.size() ? depth[order[kept[k + 1]]] : 1;
          step.pops = static_cast<uint16_t>(depth[i] - next_depth);
        }
        program->steps.push_back(step);
      }
      condition.step_end = static_cast<uint32_t>(program->steps.size());
      program->conditions.push_back(condition);
      program->condition_steps[feature] += static_cast<int64_t>(kept.size());
    }
    info.condition_end = static_cast<uint32_t>(program->conditions.size());
    info.split_end = static_cast<uint32_t>(program->splits.size());
    program->max_depth = std::max(program->max_depth, info.depth);
    program->max_q = std::max(program->max_q, q);
    program->max_splits =
        std::max(program->max_splits, static_cast<int>(info.split_end - info.split_begin));
    info.output = tree.group;
    program->trees.push_back(info);
    program->served[t] = 1;
  }
  for (int64_t c : program->condition_steps) {
    program->max_condition_steps = std::max(program->max_condition_steps, c);
  }
  const int num_trees = static_cast<int>(program->trees.size());
  const int outputs = std::max(program->num_outputs, 1);
  program->output_order.resize(num_trees);
  for (int i = 0; i < num_trees; ++i) program->output_order[i] = i;
  std::stable_sort(program->output_order.begin(), program->output_order.end(),
                   [&](int32_t a, int32_t b) {
                     return program->trees[a].output < program->trees[b].output;
                   });
  program->output_tree_begin.assign(outputs + 1, 0);
  for (const QuadratureTreeInfo& info : program->trees) {
    ++program->output_tree_begin[std::clamp(info.output, 0, outputs - 1) + 1];
  }
  for (int k = 0; k < outputs; ++k) {
    program->output_tree_begin[k + 1] += program->output_tree_begin[k];
  }
  return program;
}

namespace {


int64_t Width(const QuadratureTreeProgram& p, bool interactions) {
  const int64_t f1 = p.num_features + 1;
  return static_cast<int64_t>(p.num_outputs) * (interactions ? f1 * f1 : f1);
}

// Aligned lane vectors over a scratch vector of doubles (grown as needed).
Lanes* LanesOf(std::vector<double>* v, int64_t count) {
  v->resize(static_cast<size_t>((count + 1) * kLanes));
  const uintptr_t at = reinterpret_cast<uintptr_t>(v->data());
  return reinterpret_cast<Lanes*>((at + sizeof(Lanes) - 1) / sizeof(Lanes) * sizeof(Lanes));
}

// Adds the interaction entries of outputs [k0, k1) of one sum of trees (`shap` [column][block]
// and `inter` [row - row_begin][output][feature][block] lanes) to `acc`, n rows x (o1 - o0) x
// (row_end - row_begin) x (F + 1) doubles for outputs [o0, o1) (which hold [k0, k1)): M[i][j]
// for j != i, and with `shap` M[i][i] = phi_i less the row's off-diagonal sum (null: the
// diagonal is left alone). The bias row has no entries here.
void AddInteractionLanes(const QuadratureTreeProgram& p, int64_t n, int64_t blocks,
                         const Lanes* shap, const Lanes* inter, int row_begin, int row_end, int k0,
                         int k1, int o0, int o1, double* acc) {
  const int64_t f1 = p.num_features + 1;
  const int64_t shap_width = Width(p, false);
  const int64_t matrix_rows = row_end - row_begin;
  const int64_t feature_rows =
      std::max<int64_t>(0, std::min<int64_t>(row_end, p.num_features) - row_begin);
  for (int64_t r = 0; r < n; ++r) {
    const int64_t b = r / kLanes;
    const int l = static_cast<int>(r % kLanes);
    double* out = acc + r * (o1 - o0) * matrix_rows * f1;
    for (int k = k0; k < k1; ++k) {
      for (int64_t i = row_begin; i < row_begin + feature_rows; ++i) {
        double* out_row = out + ((k - o0) * matrix_rows + i - row_begin) * f1;
        const Lanes* m_row = inter + ((i - row_begin) * shap_width + k * f1) * blocks + b;
        double off_diagonal = 0;
        for (int64_t j = 0; j < f1; ++j) {
          if (j == i) continue;
          const double m = m_row[j * blocks][l];
          off_diagonal += m;
          out_row[j] += m;
        }
        if (shap != nullptr) out_row[i] += shap[(k * f1 + i) * blocks + b][l] - off_diagonal;
      }
    }
  }
}

// The first tree of `group` of `groups` (equal counts of consecutive trees).
int GroupBegin(const QuadratureTreeProgram& p, int group, int groups) {
  return static_cast<int>(static_cast<int64_t>(p.trees.size()) * group / std::max(groups, 1));
}

// What AddTrees sums: SHAP values (by SHAP tree groups), interaction entries with or without the
// diagonal (by interaction groups), or the SHAP values the diagonal pass of the interaction
// groups sums (the same lanes kInteractions turns into its diagonal).
enum class Sums { kShap, kInteractions, kOffDiagonal, kDiagonalShap };

// Adds the SHAP lanes of columns [c0, c1) (`shap` [column][block]) to the rows' doubles of
// `acc`, n rows x shap_width.
void AddShapLanes(const Lanes* shap, int64_t n, int64_t blocks, int64_t c0, int64_t c1,
                  int64_t shap_width, double* acc) {
  for (int64_t r = 0; r < n; ++r) {
    const int64_t b = r / kLanes;
    const int l = static_cast<int>(r % kLanes);
    double* out = acc + r * shap_width;
    for (int64_t c = c0; c < c1; ++c) out[c] += shap[c * blocks + b][l];
  }
}

// The trees of groups [group_begin, group_end), each group summed on its own and added in group
// order. SHAP values (QuadratureTreeShapGroups): the groups' lanes are added to a total, which is
// then added to `acc`. Interactions (QuadratureTreeInteractionGroups): each group's lanes are
// turned into matrix entries (its off-diagonal sums and its diagonal) and those added to `acc`,
// so that a caller that runs the groups apart, each into zeroed doubles, and adds those to its
// own in group order gets the same bits (with or without the pair kernel's entries already in
// `acc`).
void AddTrees(const QuadratureTreeProgram& p, const uint32_t* category_bits, RowsView rows,
              int iteration_begin, int iteration_end, int group_begin, int group_end, Sums sums,
              int row_begin, int row_end, QuadratureTreeScratch* scratch, double* acc) {
  const bool interactions = sums == Sums::kInteractions || sums == Sums::kOffDiagonal;
  const int64_t n = rows.rows;
  if (n <= 0 || p.trees.empty() || group_begin >= group_end) return;
  const int64_t features = std::max(p.num_features, 1);
  const int64_t f1 = p.num_features + 1;
  const int64_t shap_width = Width(p, false);
  const int64_t blocks = (n + kLanes - 1) / kLanes;
  // Rows as [block][feature] lanes; lanes past the last row repeat it (their results are dropped).
  scratch->columns.resize(static_cast<size_t>((blocks * features + 1) * kLanes));
  FloatLanes* columns = reinterpret_cast<FloatLanes*>(
      (reinterpret_cast<uintptr_t>(scratch->columns.data()) + sizeof(FloatLanes) - 1) /
      sizeof(FloatLanes) * sizeof(FloatLanes));
  for (int64_t b = 0; b < blocks; ++b) {
    FloatLanes* block = columns + b * features;
    for (int l = 0; l < kLanes; ++l) {
      const float* x = rows.Row(std::min(b * kLanes + l, n - 1));
      for (int64_t f = 0; f < p.num_features; ++f) block[f][l] = x[f];
    }
  }
  // Accumulators as [column][block] lanes (by interaction groups: each group zeroes its outputs'
  // below; none without the diagonal, which needs no SHAP pass).
  Lanes* shap = sums != Sums::kOffDiagonal
                    ? LanesOf(&scratch->accumulators, shap_width * blocks)
                    : nullptr;
  if (sums == Sums::kShap) std::fill(shap, shap + shap_width * blocks, Splat(0.0));
  // Interactions: only the matrix rows [row_begin, row_end) of each output, so that a caller
  // that splits them between threads has each zero, fill and read its share alone. The
  // accumulators hold the rows that are features, as [row][output][feature] (a conditioned
  // pass's columns are then its row's offset plus the edge's SHAP column); `acc` takes a row's
  // [output][row][column].
  const int64_t feature_rows =
      interactions ? std::max<int64_t>(0, std::min<int64_t>(row_end, p.num_features) - row_begin)
                   : 0;
  const int64_t inter_width = feature_rows * shap_width;
  Lanes* inter = nullptr;
  if (interactions) inter = LanesOf(&scratch->interaction_accumulators, inter_width * blocks);
  const int64_t depths = p.max_depth + 1;
  const int64_t slab = depths * std::max(p.max_q, 1);
  Lanes* base = LanesOf(&scratch->stack, 8 * slab + depths);
  scratch->edge_columns.resize(static_cast<size_t>(depths));
  Lanes* o = base + 8 * slab;
  int32_t* edge_columns = scratch->edge_columns.data();
  const PairStack s{{base, base + slab, base + 2 * slab, base + 3 * slab, o, edge_columns},
                    {base + 4 * slab, base + 5 * slab, base + 6 * slab, base + 7 * slab, o,
                     edge_columns}};
  Lanes* decisions = LanesOf(&scratch->decisions, std::max(p.max_splits, 1));
  auto run = [&](int tree_begin, int tree_end, Lanes* target) {
    for (int ti = tree_begin; ti < tree_end; ++ti) {
      const QuadratureTreeInfo& tree = p.trees[ti];
      if (tree.iteration < iteration_begin || tree.iteration >= iteration_end) continue;
      for (int64_t b = 0; b < blocks; ++b) {
        RunTree(p, tree, columns + b * features, category_bits, decisions, s,
                target != nullptr ? target + b : nullptr, interactions ? inter + b : nullptr,
                blocks, row_begin, row_end);
      }
    }
  };
  if (sums != Sums::kShap) {
    // Each group zeroes and reads the lanes of its outputs only (a group of a multi-output model
    // adds to its outputs' matrices alone).
    const int o0 = QuadratureTreeInteractionGroup(p, group_begin).output_begin;
    const int o1 = QuadratureTreeInteractionGroup(p, group_end - 1).output_end;
    for (int g = group_begin; g < group_end; ++g) {
      const QuadratureTreeGroupSpan span = QuadratureTreeInteractionGroup(p, g);
      const int64_t c0 = span.output_begin * f1 * blocks, c1 = span.output_end * f1 * blocks;
      if (shap != nullptr) std::fill(shap + c0, shap + c1, Splat(0.0));
      for (int64_t r = 0; r < feature_rows; ++r) {
        std::fill(inter + r * shap_width * blocks + c0, inter + r * shap_width * blocks + c1,
                  Splat(0.0));
      }
      for (int o = span.order_begin; o < span.order_end; ++o) {
        const int ti = p.output_order[o];
        run(ti, ti + 1, shap);
      }
      if (sums == Sums::kDiagonalShap) {
        AddShapLanes(shap, n, blocks, span.output_begin * f1, span.output_end * f1, shap_width,
                     acc);
        continue;
      }
      AddInteractionLanes(p, n, blocks, shap, inter, row_begin, row_end, span.output_begin,
                          span.output_end, o0, o1, acc);
    }
    return;
  }
  // SHAP values: each group into its own lanes, then added to the total: 0 + g0 + g1 + ... in
  // group order, the bits of a caller that sums groups apart and adds them in that order. The
  // first group sums straight into the zeroed total (0 + g0 is g0).
  run(QuadratureTreeGroupBegin(p, group_begin), QuadratureTreeGroupBegin(p, group_begin + 1), shap);
  if (group_end - group_begin > 1) {
    Lanes* part = LanesOf(&scratch->group_accumulators, shap_width * blocks);
    for (int g = group_begin + 1; g < group_end; ++g) {
      std::fill(part, part + shap_width * blocks, Splat(0.0));
      run(QuadratureTreeGroupBegin(p, g), QuadratureTreeGroupBegin(p, g + 1), part);
      for (int64_t i = 0; i < shap_width * blocks; ++i) shap[i] += part[i];
    }
  }
  AddShapLanes(shap, n, blocks, 0, shap_width, shap_width, acc);
}

}  // namespace

int64_t QuadratureTreeChunkRows(const QuadratureTreeProgram& program, bool interactions) {
  const int64_t block_bytes =
      (Width(program, false) + (interactions ? Width(program, true) : 0)) * sizeof(Lanes);
  return kLanes * std::clamp<int64_t>(kAccumulatorBudget / block_bytes, 1, kBlocksPerChunk);
}

void QuadratureTreeMatrixRowRanges(const QuadratureTreeProgram& p, int parts,
                                   std::vector<int>* bounds) {
  // The feature rows [0, F) are cut; the bias row F, which has no conditioned passes, ends the
  // last range rather than taking one of its own.
  const int rows = std::max(p.num_features, 1);
  parts = std::clamp(parts, 1, rows);
  // A row's cost: its conditioned steps (every step is one feature's), plus a share of the whole
  // so that rows without any still spread rather than all land in one part.
  const double per_row = std::max(1.0, static_cast<double>(p.steps.size()) / rows);
  auto cost = [&](int i) {
    return per_row + (i < static_cast<int>(p.condition_steps.size())
                          ? static_cast<double>(p.condition_steps[i])
                          : 0.0);
  };
  double total = 0;
  for (int i = 0; i < rows; ++i) total += cost(i);
  bounds->assign(parts + 1, p.num_features + 1);
  (*bounds)[0] = 0;
  double sum = 0;
  int i = 0;
  for (int k = 1; k < parts; ++k) {
    const double target = total * k / parts;
    // At least one row per part, and enough rows left for the parts after this one.
    sum += cost(i++);
    while (i < rows - (parts - k) && sum + 0.5 * cost(i) < target) sum += cost(i++);
    (*bounds)[k] = i;
  }
}

double QuadratureTreeRangeShare(const QuadratureTreeProgram& p, int parts) {
  const double busiest = p.steps.empty() ? 0.0
                                         : static_cast<double>(p.max_condition_steps) /
                                               static_cast<double>(p.steps.size());
  return std::max(1.0 / std::max(parts, 1), busiest);
}

int QuadratureTreeShapGroups(const QuadratureTreeProgram& p) {
  const int64_t trees = static_cast<int64_t>(p.trees.size());
  // A group's sum is zeroed and added to the total per block: one SIMD vector per column each.
  // Each group keeps at least kQuadratureEdgesPerGroupColumn edges per column, so that this stays
  // a few percent of its walk (wide multi-output models get few groups or one).
  const int64_t width = static_cast<int64_t>(p.num_outputs) * (p.num_features + 1);
  const int64_t by_edges = static_cast<int64_t>(p.edges.size()) /
                           (kQuadratureEdgesPerGroupColumn * std::max<int64_t>(width, 1));
  return static_cast<int>(std::clamp<int64_t>(
      std::min(trees / kQuadratureTreesPerGroup, by_edges), 1, kQuadratureMaxTreeGroups));
}

int QuadratureTreeGroupBegin(const QuadratureTreeProgram& p, int group) {
  return GroupBegin(p, group, QuadratureTreeShapGroups(p));
}

int QuadratureTreeInteractionGroups(const QuadratureTreeProgram& p) {
  const int64_t trees = static_cast<int64_t>(p.trees.size());
  if (p.num_outputs > 1) {
    // Groups of outputs: each cell is zeroed and added once in all, however many groups (one
    // group for a program without its output order).
    if (p.output_tree_begin.size() != static_cast<size_t>(p.num_outputs) + 1) return 1;
    return static_cast<int>(std::clamp<int64_t>(
        std::min<int64_t>(p.num_outputs, trees / kQuadratureTreesPerInteractionGroup), 1,
        kQuadratureMaxTreeGroups));
  }
  // Per group and block, the sums are zeroed and turned into matrix entries, and where groups
  // run as tasks, written and added again: a few cache lines per cell of every output's matrix,
  // as much as several steps of the walk where they miss the cache. Each group keeps at least
  // kQuadratureStepsPerGroupCell steps of its walk (edges of the SHAP pass, two recursions per
  // conditioned step) per cell, so that this stays a few percent (wide models get one group).
  const int64_t f1 = p.num_features + 1;
  const int64_t cells = static_cast<int64_t>(p.num_outputs) * f1 * f1;
  const int64_t steps =
      static_cast<int64_t>(p.edges.size()) + 2 * static_cast<int64_t>(p.steps.size());
  const int64_t by_steps = steps / (kQuadratureStepsPerGroupCell * std::max<int64_t>(cells, 1));
  return static_cast<int>(std::clamp<int64_t>(
      std::min(trees / kQuadratureTreesPerInteractionGroup, by_steps), 1,
      kQuadratureMaxTreeGroups));
}

bool QuadratureTreeDiagonalFromShap(const QuadratureTreeProgram& program) {
  return QuadratureTreeInteractionGroups(program) == 1;
}

bool QuadratureTreeServesInteractions(const QuadratureTreeProgram& program) {
  return InteractionsFit(program.num_features, program.num_outputs);
}

void AddQuadratureTreeShap(const QuadratureTreeProgram& p, const uint32_t* category_bits,
                           RowsView rows, int iteration_begin, int iteration_end, int group_begin,
                           int group_end, QuadratureTreeScratch* scratch, double* acc) {
  const int groups = QuadratureTreeShapGroups(p);
  const int g0 = std::clamp(group_begin, 0, groups), g1 = std::clamp(group_end, g0, groups);
  AddTrees(p, category_bits, rows, iteration_begin, iteration_end, g0, g1, Sums::kShap, 0, 0,
           scratch, acc);
}

QuadratureTreeGroupSpan QuadratureTreeInteractionGroup(const QuadratureTreeProgram& p, int group) {
  const int groups = QuadratureTreeInteractionGroups(p);
  QuadratureTreeGroupSpan span;
  group = std::clamp(group, 0, groups - 1);
  const int outputs = p.num_outputs;
  if (outputs <= 1 || groups == 1) {  // consecutive trees (all of them in one group)
    span.order_begin = GroupBegin(p, group, groups);
    span.order_end = GroupBegin(p, group + 1, groups);
    span.output_begin = 0;
    span.output_end = std::max(outputs, 1);
    return span;
  }
  span.output_begin = static_cast<int>(int64_t{outputs} * group / groups);
  span.output_end = static_cast<int>(int64_t{outputs} * (group + 1) / groups);
  span.order_begin = p.output_tree_begin[span.output_begin];
  span.order_end = p.output_tree_begin[span.output_end];
  return span;
}

void AddQuadratureTreeInteractions(const QuadratureTreeProgram& p, const uint32_t* category_bits,
                                   RowsView rows, int iteration_begin, int iteration_end,
                                   int group_begin, int group_end, int row_begin, int row_end,
                                   bool diagonal, QuadratureTreeScratch* scratch, double* acc) {
  const int groups = QuadratureTreeInteractionGroups(p);
  const int g0 = std::clamp(group_begin, 0, groups), g1 = std::clamp(group_end, g0, groups);
  AddTrees(p, category_bits, rows, iteration_begin, iteration_end, g0, g1,
           diagonal ? Sums::kInteractions : Sums::kOffDiagonal, row_begin, row_end, scratch, acc);
}

void AddQuadratureTreeInteractionShap(const QuadratureTreeProgram& p,
                                      const uint32_t* category_bits, RowsView rows,
                                      int iteration_begin, int iteration_end, int group_begin,
                                      int group_end, QuadratureTreeScratch* scratch, double* acc) {
  const int groups = QuadratureTreeInteractionGroups(p);
  const int g0 = std::clamp(group_begin, 0, groups), g1 = std::clamp(group_end, g0, groups);
  AddTrees(p, category_bits, rows, iteration_begin, iteration_end, g0, g1, Sums::kDiagonalShap,
           0, 0, scratch, acc);
}

}  // namespace grove
