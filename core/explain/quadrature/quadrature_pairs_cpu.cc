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
                              features.size() * sizeof(int32_t) + pairs.size() * sizeof(uint32_t) +
                              unit_cell_begin.size() * sizeof(uint32_t) +
                              unit_cells.size() * sizeof(uint64_t) +
                              pair_cell.size() * sizeof(uint32_t) +
                              (unit_group_begin.size() + unit_groups.size()) * sizeof(uint32_t) +
                              group_work.size() * sizeof(double));
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
  // Each unit's groups, and each group's work: per path and rule point, n (n + 1) products of
  // the integrals and n (n + 1) / 2 pair additions.
  program->unit_group_begin.push_back(0);
  for (size_t u = 0; u + 1 < program->output_splits.size(); ++u) {
    for (uint32_t g = 0; g < program->groups.size(); ++g) {
      const int32_t output = program->groups[g].output;
      if (output >= program->output_splits[u] && output < program->output_splits[u + 1]) {
        program->unit_groups.push_back(g);
      }
    }
    program->unit_group_begin.push_back(static_cast<uint32_t>(program->unit_groups.size()));
  }
  program->group_work.assign(program->groups.size(), 0.0);
  for (size_t g = 0; g < program->groups.size(); ++g) {
    const QuadraturePairGroup& group = program->groups[g];
    double work = group.pair_end - group.pair_begin;
    for (uint32_t i = group.path_begin; i < group.path_end; ++i) {
      const QuadraturePath& path = model.paths[program->paths[i]];
      work += 1.5 * path.q * path.n * (path.n + 1.0) * group.width;
    }
    program->group_work[g] = work;
  }
  // Each unit's cells: its pairs' global cells sorted (ties by pair), then numbered.
  program->pair_cell.assign(program->pairs.size(), 0);
  program->unit_cell_begin.push_back(0);
  std::vector<std::pair<uint64_t, uint32_t>> keyed;
  for (size_t u = 0; u + 1 < program->output_splits.size(); ++u) {
    keyed.clear();
    for (const QuadraturePairGroup& group : program->groups) {
      if (group.output < program->output_splits[u] ||
          group.output >= program->output_splits[u + 1]) {
        continue;
      }
      const int32_t* features = program->features.data() + group.feature_begin;
      for (uint32_t q = group.pair_begin; q < group.pair_end; ++q) {
        const uint64_t cell = static_cast<uint64_t>(features[program->pairs[q] >> 16]) << 32 |
                              static_cast<uint32_t>(features[program->pairs[q] & 0xffff]);
        keyed.emplace_back(cell, q);
      }
    }
    std::sort(keyed.begin(), keyed.end());
    for (size_t i = 0; i < keyed.size(); ++i) {
      if (i == 0 || keyed[i].first != keyed[i - 1].first) {
        program->unit_cells.push_back(keyed[i].first);
      }
      program->pair_cell[keyed[i].second] =
          static_cast<uint32_t>(program->unit_cells.size() - program->unit_cell_begin.back() - 1);
    }
    program->unit_cell_begin.push_back(static_cast<uint32_t>(program->unit_cells.size()));
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

// Sums the paths of the groups `group_ids` (null: every group) of outputs [output_begin,
// output_end) in the rounds
// [iteration_begin, iteration_end), not skipped, group by group into the local matrix, and hands
// each of the group's pairs to flush(group, q, cell): the group's `width` local sums of pair q,
// which flush must add to its accumulators and set to zero. prefetch(group) runs before a group's
// paths are summed.
template <typename Prefetch, typename Flush>
void SumGroups(const QuadraturePairProgram& program, const QuadratureModel& model,
               const float* row, int iteration_begin, int iteration_end,
               const uint8_t* skip_tree, int output_begin, int output_end,
               const uint32_t* group_ids, size_t num_groups, QuadraturePairScratch* scratch,
               Prefetch&& prefetch, Flush&& flush) {
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

  for (size_t id = 0; id < num_groups; ++id) {
    const QuadraturePairGroup& group = program.groups[group_ids != nullptr ? group_ids[id] : id];
    if (group.iteration < iteration_begin || group.iteration >= iteration_end) continue;
    if (skip_tree != nullptr && skip_tree[group.tree]) continue;
    if (group.output < output_begin || group.output >= output_end) continue;
    const int64_t num_local = group.feature_end - group.feature_begin;
    const int width = group.width;
    prefetch(group);
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
    for (uint32_t q = group.pair_begin; q < group.pair_end; ++q) {
      const int64_t a = program.pairs[q] >> 16, b = program.pairs[q] & 0xffff;
      flush(group, q, local + (a * num_local + b) * width);
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
  const auto block_of = [&](const QuadraturePairGroup& group) {
    return acc + static_cast<int64_t>(group.output - output_begin) * block_size;
  };
  const auto cell_offset = [&](const QuadraturePairGroup& group, uint32_t q) {
    const int32_t* features = program.features.data() + group.feature_begin;
    return features[program.pairs[q] >> 16] * f1 + features[program.pairs[q] & 0xffff];
  };
  SumGroups(
      program, model, row, iteration_begin, iteration_end, skip_tree, output_begin, output_end,
      nullptr, program.groups.size(), scratch,
      [&](const QuadraturePairGroup& group) {
        // The group's cells of the row's matrix are scattered over megabytes: request them now,
        // so that they are in cache by the time the group's paths are summed.
        double* block = block_of(group);
        for (uint32_t q = group.pair_begin; q < group.pair_end; ++q) {
          const int64_t offset = cell_offset(group, q);
          for (int k = 0; k < group.width; ++k) {
            __builtin_prefetch(block + k * block_size + offset, 1);
          }
        }
      },
      [&](const QuadraturePairGroup& group, uint32_t q, double* cell) {
        double* target = block_of(group) + cell_offset(group, q);
        for (int k = 0; k < group.width; ++k) {
          target[k * block_size] += cell[k];
          cell[k] = 0.0;
        }
      });
  for (int k = 0; k < output_end - output_begin; ++k) MirrorUpper(f1, acc + k * block_size);
}

namespace {

// Writes the unit's float matrices from its cell sums (`sums`: per output of the unit, its cells).
void WriteUnitMatrices(const QuadraturePairProgram& program, const QuadratureModel& model, int unit,
                       const double* sums, const double* bias, float* out) {
  const int64_t f1 = model.num_features + 1;
  const int64_t block_size = f1 * f1;
  const int output_begin = program.output_splits[unit];
  const int output_end = program.output_splits[unit + 1];
  const uint64_t* cells = program.unit_cells.data() + program.unit_cell_begin[unit];
  const int64_t num_cells = program.unit_cell_begin[unit + 1] - program.unit_cell_begin[unit];
  std::fill(out, out + (output_end - output_begin) * block_size, 0.0f);
  for (int k = output_begin; k < output_end; ++k) {
    float* block = out + (k - output_begin) * block_size;
    const double* unit_sums = sums + (k - output_begin) * num_cells;
    for (int64_t c = 0; c < num_cells; ++c) {
      const int64_t i = static_cast<int64_t>(cells[c] >> 32);
      const int64_t j = static_cast<int64_t>(cells[c] & 0xffffffffu);
      const float value = static_cast<float>(unit_sums[c]);
      block[i * f1 + j] = value;
      block[j * f1 + i] = value;
    }
    block[(f1 - 1) * f1 + (f1 - 1)] = static_cast<float>(bias[k]);
  }
}

// The unit's zeroed cell sums in scratch->cells.
double* UnitSums(const QuadraturePairProgram& program, int unit, QuadraturePairScratch* scratch) {
  const int64_t num_cells = program.unit_cell_begin[unit + 1] - program.unit_cell_begin[unit];
  const size_t size = static_cast<size_t>(
      (program.output_splits[unit + 1] - program.output_splits[unit]) * num_cells);
  std::vector<double>& sums = scratch->cells;
  if (sums.size() < size) sums.resize(size);
  std::fill(sums.begin(), sums.begin() + size, 0.0);
  return sums.data();
}

}  // namespace

void WriteQuadraturePairInteractions(const QuadraturePairProgram& program,
                                     const QuadratureModel& model, const float* row,
                                     int iteration_begin, int iteration_end, int unit,
                                     const double* bias, QuadraturePairScratch* scratch,
                                     float* out) {
  const int output_begin = program.output_splits[unit];
  const int output_end = program.output_splits[unit + 1];
  const int64_t num_cells = program.unit_cell_begin[unit + 1] - program.unit_cell_begin[unit];
  double* sums = UnitSums(program, unit, scratch);
  const uint32_t* groups = program.unit_groups.data() + program.unit_group_begin[unit];
  const size_t num_groups = program.unit_group_begin[unit + 1] - program.unit_group_begin[unit];
  SumGroups(program, model, row, iteration_begin, iteration_end, nullptr, output_begin,
            output_end, groups, num_groups, scratch, [](const QuadraturePairGroup&) {},
            [&](const QuadraturePairGroup& group, uint32_t q, double* cell) {
              double* target =
                  sums + (group.output - output_begin) * num_cells + program.pair_cell[q];
              for (int k = 0; k < group.width; ++k) {
                target[k * num_cells] += cell[k];
                cell[k] = 0.0;
              }
            });
  WriteUnitMatrices(program, model, unit, sums, bias, out);
}

void QuadraturePairSegments(const QuadraturePairProgram& program, int unit, int segments,
                            uint32_t* bounds) {
  const uint32_t* groups = program.unit_groups.data() + program.unit_group_begin[unit];
  const uint32_t num_groups = program.unit_group_begin[unit + 1] - program.unit_group_begin[unit];
  double total = 0;
  for (uint32_t i = 0; i < num_groups; ++i) total += program.group_work[groups[i]];
  // Segment s ends at the first group whose cumulative work reaches (s + 1) / segments of it.
  double work = 0;
  uint32_t i = 0;
  bounds[0] = 0;
  for (int s = 1; s < segments; ++s) {
    const double target = total * s / segments;
    while (i < num_groups && work + program.group_work[groups[i]] <= target) {
      work += program.group_work[groups[i]];
      ++i;
    }
    bounds[s] = i;
  }
  bounds[segments] = num_groups;
}

void SumQuadraturePairSegment(const QuadraturePairProgram& program, const QuadratureModel& model,
                              const float* row, int iteration_begin, int iteration_end, int unit,
                              uint32_t group_begin, uint32_t group_end,
                              QuadraturePairScratch* scratch, double* pair_values) {
  const uint32_t* groups = program.unit_groups.data() + program.unit_group_begin[unit];
  const int64_t max_width = program.max_width;
  SumGroups(program, model, row, iteration_begin, iteration_end, nullptr,
            program.output_splits[unit], program.output_splits[unit + 1], groups + group_begin,
            group_end - group_begin, scratch, [](const QuadraturePairGroup&) {},
            [&](const QuadraturePairGroup& group, uint32_t q, double* cell) {
              double* target = pair_values + q * max_width;
              for (int k = 0; k < group.width; ++k) {
                target[k] = cell[k];
                cell[k] = 0.0;
              }
            });
}

void WriteQuadraturePairInteractionsFromPairs(const QuadraturePairProgram& program,
                                              const QuadratureModel& model, int iteration_begin,
                                              int iteration_end, int unit,
                                              const double* pair_values, const double* bias,
                                              QuadraturePairScratch* scratch, float* out) {
  const int output_begin = program.output_splits[unit];
  const int64_t num_cells = program.unit_cell_begin[unit + 1] - program.unit_cell_begin[unit];
  const int64_t max_width = program.max_width;
  double* sums = UnitSums(program, unit, scratch);
  for (uint32_t i = program.unit_group_begin[unit]; i < program.unit_group_begin[unit + 1]; ++i) {
    const QuadraturePairGroup& group = program.groups[program.unit_groups[i]];
    if (group.iteration < iteration_begin || group.iteration >= iteration_end) continue;
    for (uint32_t q = group.pair_begin; q < group.pair_end; ++q) {
      double* target = sums + (group.output - output_begin) * num_cells + program.pair_cell[q];
      const double* value = pair_values + q * max_width;
      for (int k = 0; k < group.width; ++k) target[k * num_cells] += value[k];
    }
  }
  WriteUnitMatrices(program, model, unit, sums, bias, out);
}

}  // namespace grove
