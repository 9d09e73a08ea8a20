// Quadrature interaction values by unordered pairs, summed per group of a tree's paths (CPU). See
// core/explain/quadrature/quadrature_pairs.h.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/explain/paths.h"
#include "core/explain/quadrature/quadrature.h"
#include "core/explain/quadrature/quadrature_pairs.h"

namespace grove {

int64_t QuadraturePairProgram::Bytes() const {
  return static_cast<int64_t>(groups.size() * sizeof(QuadraturePairGroup) +
                              paths.size() * sizeof(uint32_t) +
                              element_local.size() * sizeof(uint16_t) +
                              features.size() * sizeof(int32_t) + pairs.size() * sizeof(uint32_t));
}

QuadraturePairProgramPtr BuildQuadraturePairProgram(const QuadratureModel& model) {
  auto program = std::make_shared<QuadraturePairProgram>();
  program->element_local.assign(model.elements.size(), 0);
  // A tree's paths in the layout's order (leaf by leaf, depth first): neighbours share prefixes,
  // so consecutive paths share most of their features and pairs.
  std::vector<uint32_t> order(model.paths.size());
  for (uint32_t p = 0; p < order.size(); ++p) order[p] = p;
  const auto layout_index = [&](uint32_t p) {
    return model.elements[model.paths[p].element_begin].path;
  };
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (model.paths[a].tree != model.paths[b].tree) {
      return model.paths[a].tree < model.paths[b].tree;
    }
    return layout_index(a) < layout_index(b);
  });

  std::vector<int32_t> features;  // the open group's features, in arrival order
  std::vector<int32_t> path_features;
  std::vector<uint8_t> held;
  std::vector<int32_t> local_of(model.num_features, -1);
  QuadraturePairGroup group;
  const auto close = [&] {
    if (group.path_begin == program->paths.size()) return;
    group.path_end = static_cast<uint32_t>(program->paths.size());
    // Local indices ascending with the feature, so that a <= b orders pairs like (fi <= fj).
    std::vector<int32_t> sorted = features;
    std::sort(sorted.begin(), sorted.end());
    for (size_t l = 0; l < sorted.size(); ++l) local_of[sorted[l]] = static_cast<int32_t>(l);
    group.feature_begin = static_cast<uint32_t>(program->features.size());
    program->features.insert(program->features.end(), sorted.begin(), sorted.end());
    group.feature_end = static_cast<uint32_t>(program->features.size());
    // The pairs some path holds, marked in an L x L table and read back in ascending order.
    const size_t num_local = sorted.size();
    held.assign(num_local * num_local, 0);
    for (uint32_t i = group.path_begin; i < group.path_end; ++i) {
      const QuadraturePath& path = model.paths[program->paths[i]];
      for (int a = 0; a < path.n; ++a) {
        const uint32_t e = path.element_begin + a;
        const int32_t la = local_of[model.elements[e].feature];
        program->element_local[e] = static_cast<uint16_t>(la);
        for (int b = 0; b < path.n; ++b) {
          const int32_t lb = local_of[model.elements[path.element_begin + b].feature];
          if (la <= lb) held[la * num_local + lb] = 1;
        }
      }
    }
    group.pair_begin = static_cast<uint32_t>(program->pairs.size());
    for (size_t a = 0; a < num_local; ++a) {
      for (size_t b = a; b < num_local; ++b) {
        if (held[a * num_local + b]) {
          program->pairs.push_back(static_cast<uint32_t>(a) << 16 | static_cast<uint32_t>(b));
        }
      }
    }
    group.pair_end = static_cast<uint32_t>(program->pairs.size());
    for (int32_t f : features) local_of[f] = -1;
    program->max_local = std::max<int>(program->max_local, static_cast<int>(features.size()));
    program->max_width = std::max<int>(program->max_width, group.width);
    program->groups.push_back(group);
    features.clear();
  };
  for (uint32_t id : order) {
    const QuadraturePath& path = model.paths[id];
    program->max_unique = std::max<int>(program->max_unique, path.n);
    // The path's features not yet in the open group (local_of marks members with 0).
    path_features.clear();
    for (int a = 0; a < path.n; ++a) {
      const int32_t f = model.elements[path.element_begin + a].feature;
      if (local_of[f] < 0) path_features.push_back(f);
    }
    const bool same_tree = group.path_begin < program->paths.size() && group.tree == path.tree;
    if (!same_tree || features.size() + path_features.size() >
                          static_cast<size_t>(kQuadraturePairLocalFeatures)) {
      close();
      group = QuadraturePairGroup{};
      group.path_begin = static_cast<uint32_t>(program->paths.size());
      group.tree = path.tree;
      group.iteration = path.iteration;
      group.output = path.group;
      group.width = path.width;
      path_features.clear();
      for (int a = 0; a < path.n; ++a) {
        path_features.push_back(model.elements[path.element_begin + a].feature);
      }
    }
    for (int32_t f : path_features) {
      local_of[f] = 0;
      features.push_back(f);
    }
    program->paths.push_back(id);
  }
  close();
  // A boundary k is kept unless some group's leaves write to both output k - 1 and output k.
  std::vector<uint8_t> straddled(model.num_outputs + 1, 0);
  for (const QuadraturePairGroup& g : program->groups) {
    for (int k = g.output + 1; k < g.output + g.width; ++k) straddled[k] = 1;
  }
  for (int k = 0; k <= model.num_outputs; ++k) {
    if (!straddled[k]) program->output_splits.push_back(k);
  }
  return program;
}

namespace {

// The packed integrals of one path at the rule (t, w) of q points: tri[i]: I_i, then I_ij for
// j > i, element by element (n (n + 1) / 2 entries). N > 0: n == N, unrolled; N == 0: run-time n.
// `f`, `pre`, `suf`: n entries of scratch.
template <int N>
inline void PathIntegrals(const double* z, const double* d, int n_dynamic, const double* t,
                          const double* w, int q, double* f, double* pre, double* suf,
                          double* tri) {
  const int n = N > 0 ? N : n_dynamic;
  const int entries = n * (n + 1) / 2;
#pragma GCC unroll 36
  for (int e = 0; e < entries; ++e) tri[e] = 0.0;
  for (int k = 0; k < q; ++k) {
    double p = 1.0;
#pragma GCC unroll 8
    for (int i = 0; i < n; ++i) {
      f[i] = z[i] + t[k] * d[i];
      pre[i] = p;
      p *= f[i];
    }
    double sfx = w[k];
#pragma GCC unroll 8
    for (int i = n - 1; i >= 0; --i) {
      suf[i] = sfx;
      sfx *= f[i];
    }
    double* out = tri;
#pragma GCC unroll 8
    for (int i = 0; i < n; ++i) {
      double m = pre[i];
      *out++ += m * suf[i];
#pragma GCC unroll 8
      for (int j = i + 1; j < n; ++j) {
        *out++ += m * suf[j];
        m *= f[j];
      }
    }
  }
}

// phi_ij = v/2 d_i d_j I_ij added to the local matrix at (min, max) of the local indices, and the
// diagonal phi_i - sum_{j != i} phi_ij. `sums`: n entries of scratch.
template <int N>
inline void AddPathPairs(const double* d, int n_dynamic, const double* tri,
                         const uint16_t* local_index, int64_t num_local, const double* values,
                         int width, double* sums, double* local) {
  const int n = N > 0 ? N : n_dynamic;
#pragma GCC unroll 8
  for (int i = 0; i < n; ++i) sums[i] = 0.0;
  const double* in = tri;
#pragma GCC unroll 8
  for (int i = 0; i < n; ++i) {
    ++in;
    const int64_t a = local_index[i];
#pragma GCC unroll 8
    for (int j = i + 1; j < n; ++j) {
      const double gij = 0.5 * d[i] * d[j] * *in++;
      sums[i] += gij;
      sums[j] += gij;
      const int64_t b = local_index[j];
      double* cell = local + (std::min(a, b) * num_local + std::max(a, b)) * width;
      if (width == 1) {
        cell[0] += values[0] * gij;
      } else {
        for (int k = 0; k < width; ++k) cell[k] += values[k] * gij;
      }
    }
  }
  in = tri;
#pragma GCC unroll 8
  for (int i = 0; i < n; ++i) {
    const double diag = d[i] * *in - sums[i];
    in += n - i;
    double* cell = local + (local_index[i] * (num_local + 1)) * width;
    if (width == 1) {
      cell[0] += values[0] * diag;
    } else {
      for (int k = 0; k < width; ++k) cell[k] += values[k] * diag;
    }
  }
}

// Calls fn(std::integral_constant<int, N>) with N = n for the short paths that dominate boosted
// models, 0 (run-time length) for longer ones.
template <typename Fn>
inline void WithLength(int n, Fn&& fn) {
  switch (n) {
    case 1: fn(std::integral_constant<int, 1>{}); break;
    case 2: fn(std::integral_constant<int, 2>{}); break;
    case 3: fn(std::integral_constant<int, 3>{}); break;
    case 4: fn(std::integral_constant<int, 4>{}); break;
    case 5: fn(std::integral_constant<int, 5>{}); break;
    case 6: fn(std::integral_constant<int, 6>{}); break;
    case 7: fn(std::integral_constant<int, 7>{}); break;
    case 8: fn(std::integral_constant<int, 8>{}); break;
    default: fn(std::integral_constant<int, 0>{}); break;
  }
}

// M[j][i] = M[i][j] for i < j of one (F + 1) x (F + 1) block, tile by tile (the lower
// triangle's writes and the upper's reads stay within a few rows of cache lines).
void MirrorUpper(int64_t f1, double* block) {
  constexpr int64_t kTile = 32;
  for (int64_t i0 = 0; i0 < f1; i0 += kTile) {
    const int64_t i1 = std::min(f1, i0 + kTile);
    for (int64_t j0 = i0; j0 < f1; j0 += kTile) {
      const int64_t j1 = std::min(f1, j0 + kTile);
      for (int64_t j = j0; j < j1; ++j) {
        double* lower = block + j * f1;
        for (int64_t i = i0; i < std::min(i1, j); ++i) lower[i] = block[i * f1 + j];
      }
    }
  }
}

}  // namespace

void AddQuadraturePairInteractions(const QuadraturePairProgram& program,
                                   const QuadratureModel& model, const float* row,
                                   int iteration_begin, int iteration_end,
                                   const uint8_t* skip_tree, int output_begin, int output_end,
                                   QuadraturePairScratch* scratch, double* acc) {
  const int64_t f1 = model.num_features + 1;
  const int64_t block_size = f1 * f1;
  const uint32_t* category_bits = model.layout->category_bits.data();
  const size_t n_max = static_cast<size_t>(std::max(program.max_unique, 1));
  QuadraturePairScratch& s = *scratch;
  if (s.z.size() < n_max) {
    s.z.resize(n_max);
    s.d.resize(n_max);
    s.factors.resize(n_max);
    s.prefix.resize(n_max);
    s.suffix.resize(n_max);
    s.sums.resize(n_max);
    s.pairs.resize(n_max * (n_max + 1) / 2);
  }
  const size_t local_max = static_cast<size_t>(program.max_local) * program.max_local *
                           static_cast<size_t>(program.max_width);
  // The local matrix is zero between groups: each group's flush clears what it read.
  if (s.local.size() < local_max) s.local.assign(local_max, 0.0);
  double* z = s.z.data();
  double* d = s.d.data();
  double* local = s.local.data();

  for (const QuadraturePairGroup& group : program.groups) {
    if (group.iteration < iteration_begin || group.iteration >= iteration_end) continue;
    if (skip_tree != nullptr && skip_tree[group.tree]) continue;
    if (group.output < output_begin || group.output >= output_end) continue;
    const int64_t num_local = group.feature_end - group.feature_begin;
    const int width = group.width;
    const int32_t* features = program.features.data() + group.feature_begin;
    double* block = acc + static_cast<int64_t>(group.output - output_begin) * block_size;
    // The group's cells of the row's matrix are scattered over megabytes: request them now, so
    // that they are in cache by the time the group's paths are summed (a few microseconds).
    for (uint32_t q = group.pair_begin; q < group.pair_end; ++q) {
      const int64_t cell_offset =
          features[program.pairs[q] >> 16] * f1 + features[program.pairs[q] & 0xffff];
      for (int k = 0; k < width; ++k) __builtin_prefetch(block + k * block_size + cell_offset, 1);
    }
    for (uint32_t g = group.path_begin; g < group.path_end; ++g) {
      const QuadraturePath& path = model.paths[program.paths[g]];
      const int n = path.n;
      const PathElement* e = model.elements.data() + path.element_begin;
      for (int i = 0; i < n; ++i) {
        const double o = PathElementMatches(e[i], category_bits, row[e[i].feature]) ? 1.0 : 0.0;
        z[i] = e[i].zero_fraction;
        d[i] = o - e[i].zero_fraction;
      }
      const double* t = model.rule_nodes.data() + path.rule_begin;
      const double* w = model.rule_weights.data() + path.rule_begin;
      const double* values = model.layout->values.data() + path.value_begin;
      const uint16_t* local_index = program.element_local.data() + path.element_begin;
      WithLength(n, [&](auto length) {
        constexpr int N = decltype(length)::value;
        PathIntegrals<N>(z, d, n, t, w, path.q, s.factors.data(), s.prefix.data(),
                         s.suffix.data(), s.pairs.data());
        AddPathPairs<N>(d, n, s.pairs.data(), local_index, num_local, values, width,
                        s.sums.data(), local);
      });
    }
    // The group's pairs into the upper triangle of the row's matrix.
    for (uint32_t q = group.pair_begin; q < group.pair_end; ++q) {
      const int64_t a = program.pairs[q] >> 16, b = program.pairs[q] & 0xffff;
      const int64_t cell_offset = features[a] * f1 + features[b];
      double* cell = local + (a * num_local + b) * width;
      for (int k = 0; k < width; ++k) {
        block[k * block_size + cell_offset] += cell[k];
        cell[k] = 0.0;
      }
    }
  }
  for (int k = 0; k < output_end - output_begin; ++k) MirrorUpper(f1, acc + k * block_size);
}

}  // namespace grove
