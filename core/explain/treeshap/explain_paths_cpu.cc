#include "core/explain/treeshap/explain_paths_cpu.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/thread_pool.h"

namespace grove {
namespace {

// 1/k for k = 0..n (entry 0 unused), so that the inner loops multiply instead of divide.
std::vector<double> Reciprocals(int n) {
  std::vector<double> r(n + 1, 0.0);
  for (int k = 1; k <= n; ++k) r[k] = 1.0 / k;
  return r;
}

// Subset weights of a path of `n` elements (z, o) after EXTENDing each in order (the first is the
// root: z = o = 1). pw has n entries; inv[k] = 1/k.
void ExtendAll(const double* z, const double* o, int n, const double* inv, double* pw) {
  pw[0] = 1.0;
  for (int u = 1; u < n; ++u) {
    pw[u] = 0.0;
    const double zu = z[u] * inv[u + 1];
    const double ou = o[u] * inv[u + 1];
    for (int i = u - 1; i >= 0; --i) {
      pw[i + 1] += ou * pw[i] * (i + 1);
      pw[i] = zu * pw[i] * (u - i);
    }
  }
}

// sum(UNWIND(path, i).w) for a path of n elements (unique depth d = n - 1), o in {0, 1}.
double UnwoundSum(const double* pw, int n, double z, double o, const double* inv) {
  const int d = n - 1;
  double total = 0;
  if (o != 0) {
    double next = pw[d];
    const double z_scaled = z * inv[d + 1];
    for (int i = d - 1; i >= 0; --i) {
      const double tmp = next * (d + 1) * inv[i + 1];
      total += tmp;
      next = pw[i] - tmp * z_scaled * (d - i);
    }
  } else {
    const double scale = (d + 1) / z;
    for (int i = d - 1; i >= 0; --i) total += pw[i] * inv[d - i];
    total *= scale;
  }
  return total;
}

}  // namespace

absl::Status PreparePathExplain(const PathLayout& layout, RowsView rows,
                                const ExplainOptions& options, MatrixView<float> out,
                                std::vector<uint8_t>* use_path, std::vector<double>* bias) {
  if (rows.cols != layout.num_features) {
    return absl::InvalidArgumentError(absl::StrCat("rows have ", rows.cols,
                                                   " columns; the model has ",
                                                   layout.num_features, " features"));
  }
  if (rows.rows < 0 || rows.stride < rows.cols || (rows.rows > 0 && rows.data == nullptr)) {
    return absl::InvalidArgumentError("malformed rows view");
  }
  const int end = options.iteration_end <= 0 ? layout.num_iterations : options.iteration_end;
  if (options.iteration_begin < 0 || end > layout.num_iterations ||
      options.iteration_begin >= end) {
    return absl::InvalidArgumentError(absl::StrCat(
        "iteration range [", options.iteration_begin, ", ", options.iteration_end,
        ") is not a non-empty part of the model's ", layout.num_iterations,
        " boosting rounds (end <= 0 means the last round)"));
  }
  // A grouped layout explains the grouping it was built for, an ungrouped one the features.
  const bool grouped = !layout.player_of.empty();
  if (grouped != (options.groups != nullptr) ||
      (grouped && (options.groups->group_of != layout.player_of ||
                   options.groups->num_groups() != layout.num_players))) {
    return absl::InvalidArgumentError(
        options.groups != nullptr
            ? "the path layout was not built for these feature groups"
            : "the path layout is of feature groups; the call explains the model's features");
  }
  const int64_t f1 = layout.num_players + 1;
  const int64_t width = layout.num_outputs * (options.interactions ? f1 * f1 : f1);
  if (out.rows != rows.rows || out.cols != width || out.stride < out.cols ||
      (out.rows > 0 && out.data == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("output is ", out.rows, " x ", out.cols,
                                                   "; expected ", rows.rows, " x ", width));
  }
  const bool full = options.iteration_begin == 0 && end == layout.num_iterations;
  use_path->assign(layout.paths.size(), 1);
  if (full) {
    *bias = layout.bias;
    return absl::OkStatus();
  }
  *bias = layout.base_margin;
  for (size_t p = 0; p < layout.paths.size(); ++p) {
    const PathInfo& info = layout.paths[p];
    const bool in = info.iteration >= options.iteration_begin && info.iteration < end;
    (*use_path)[p] = in;
    if (!in) continue;
    double z = 1.0;
    for (int i = 0; i < info.length; ++i) z *= layout.elements[info.element_begin + i].zero_fraction;
    for (int k = 0; k < info.width; ++k) {
      (*bias)[info.group + k] += z * layout.values[info.value_begin + k];
    }
  }
  return absl::OkStatus();
}

void AddPathContributions(const PathLayout& layout, const uint32_t* path_ids, int64_t n,
                          const float* row, bool interactions, double* acc) {
  const int64_t f1 = layout.num_players + 1;
  const int max_len = std::max(layout.max_length, 1);
  std::vector<double> z(max_len), o(max_len), pw(max_len), zc(max_len), oc(max_len);
  std::vector<int32_t> feat(max_len), featc(max_len);
  const std::vector<double> inv_table = Reciprocals(max_len + 1);
  const double* inv = inv_table.data();
  const uint32_t* bits = layout.category_bits.data();
  for (int64_t k = 0; k < n; ++k) {
    const PathInfo& info = layout.paths[path_ids[k]];
    const PathElement* e = layout.elements.data() + info.element_begin;
    const int len = info.length;
    bool dead = false;
    int leader = 0;
    for (int i = 0; i < len; ++i) {
      z[i] = e[i].zero_fraction;
      o[i] = PathElementMatches(e[i], bits, i == 0 ? 0.0f : row[e[i].feature]) ? 1.0 : 0.0;
      feat[i] = i == 0 ? -1 : PlayerOf(layout, e[i]);
      if (e[i].flags & kElemGroupMember) {
        // One player: its first element matches iff all of its elements do; the rest are null.
        if (o[i] == 0) o[leader] = 0;
        o[i] = 1.0;
      } else {
        leader = i;
      }
    }
    for (int i = 0; i < len; ++i) {
      // All subset weights vanish: the path contributes nothing (and UNWIND would divide by 0).
      if (z[i] == 0 && o[i] == 0) dead = true;
    }
    if (dead || len < 2) continue;
    const double* v = layout.values.data() + info.value_begin;
    ExtendAll(z.data(), o.data(), len, inv, pw.data());
    if (!interactions) {
      for (int i = 1; i < len; ++i) {
        const double c = UnwoundSum(pw.data(), len, z[i], o[i], inv) * (o[i] - z[i]);
        for (int w = 0; w < info.width; ++w) acc[(info.group + w) * f1 + feat[i]] += c * v[w];
      }
      continue;
    }
    const int64_t block = f1 * f1;
    for (int i = 1; i < len; ++i) {
      const double c = UnwoundSum(pw.data(), len, z[i], o[i], inv) * (o[i] - z[i]);
      for (int w = 0; w < info.width; ++w) {
        acc[(info.group + w) * block + feat[i] * f1 + feat[i]] += c * v[w];
      }
    }
    // Condition on each path feature: present (x o_c) minus absent (x z_c), halved.
    for (int c = 1; c < len; ++c) {
      const double scale = 0.5 * (o[c] - z[c]);
      if (scale == 0) continue;
      int m = 0;
      for (int i = 0; i < len; ++i) {
        if (i == c) continue;
        zc[m] = z[i];
        oc[m] = o[i];
        featc[m] = feat[i];
        ++m;
      }
      ExtendAll(zc.data(), oc.data(), m, inv, pw.data());
      for (int j = 1; j < m; ++j) {
        const double t = UnwoundSum(pw.data(), m, zc[j], oc[j], inv) * (oc[j] - zc[j]) * scale;
        for (int w = 0; w < info.width; ++w) {
          double* mk = acc + (info.group + w) * block + feat[c] * f1;
          mk[featc[j]] += t * v[w];
          mk[feat[c]] -= t * v[w];
        }
      }
    }
  }
}

absl::Status ExplainPathsCpu(const PathLayout& layout, RowsView rows, const ExplainOptions& options,
                             MatrixView<float> out, ThreadPool* pool) {
  std::vector<uint8_t> use_path;
  std::vector<double> bias;
  if (absl::Status s = PreparePathExplain(layout, rows, options, out, &use_path, &bias); !s.ok()) {
    return s;
  }
  if (rows.rows == 0) return absl::OkStatus();
  std::vector<uint32_t> ids;
  ids.reserve(layout.paths.size());
  for (uint32_t p = 0; p < layout.paths.size(); ++p) {
    if (use_path[p]) ids.push_back(p);
  }
  const bool interactions = options.interactions;
  const int F = layout.num_players;
  const int64_t f1 = F + 1;
  if (!interactions) {
    auto work = [&](int64_t begin, int64_t end) {
      std::vector<double> acc(layout.num_outputs * f1);
      for (int64_t r = begin; r < end; ++r) {
        std::fill(acc.begin(), acc.end(), 0.0);
        AddPathContributions(layout, ids.data(), static_cast<int64_t>(ids.size()), rows.Row(r),
                             false, acc.data());
        float* o = out.Row(r);
        for (int k = 0; k < layout.num_outputs; ++k) {
          double* a = acc.data() + k * f1;
          a[F] = bias[k];
          for (int64_t c = 0; c < f1; ++c) o[k * f1 + c] = static_cast<float>(a[c]);
        }
      }
    };
    ParallelFor(pool, rows.rows, 4, work);
    return absl::OkStatus();
  }
  // Interaction values: an output's matrix is nonzero only in the rows and columns of the players
  // on its paths (and the bias cell), often a few of thousands of features. So each row's output
  // is zeroed as floats and only those cells are summed in doubles, copied and cleared. The
  // accumulator is therefore all zeros between rows: each thread keeps one between calls, grown
  // (zeroed by the system, pages of cells never touched never written) to the largest call it has
  // served, up to kKeptAccumulatorBytes; a larger one is released when its call ends, so a
  // server's threads do not each hold the widest model's pages for good.
  const int64_t block = f1 * f1;
  std::vector<std::vector<int32_t>> players(layout.num_outputs);
  {
    std::vector<uint8_t> seen(static_cast<size_t>(layout.num_outputs) * F, 0);
    for (uint32_t id : ids) {
      const PathInfo& info = layout.paths[id];
      const PathElement* e = layout.elements.data() + info.element_begin;
      for (int i = 1; i < info.length; ++i) {
        const int32_t p = PlayerOf(layout, e[i]);
        for (int w = 0; w < info.width; ++w) {
          uint8_t& s = seen[static_cast<size_t>(info.group + w) * F + p];
          if (!s) players[info.group + w].push_back(p);
          s = 1;
        }
      }
    }
    for (std::vector<int32_t>& ps : players) std::sort(ps.begin(), ps.end());
  }
  std::atomic<bool> out_of_memory{false};
  // 64 MiB: a 784-feature 10-class model's accumulator (49 MB) stays.
  constexpr size_t kKeptAccumulatorBytes = size_t{64} << 20;
  auto work = [&](int64_t begin, int64_t end) {
    struct Free {
      void operator()(double* p) const { std::free(p); }
    };
    thread_local std::unique_ptr<double, Free> acc;
    thread_local size_t acc_cells = 0;
    const size_t cells = static_cast<size_t>(layout.num_outputs) * block;
    if (acc_cells < cells) {
      acc.reset(static_cast<double*>(std::calloc(cells, sizeof(double))));
      acc_cells = acc == nullptr ? 0 : cells;
      if (acc == nullptr) {
        out_of_memory = true;
        return;
      }
    }
    for (int64_t r = begin; r < end; ++r) {
      AddPathContributions(layout, ids.data(), static_cast<int64_t>(ids.size()), rows.Row(r),
                           true, acc.get());
      float* o = out.Row(r);
      std::fill(o, o + cells, 0.0f);
      for (int k = 0; k < layout.num_outputs; ++k) {
        double* a = acc.get() + k * block;
        float* matrix = o + k * block;
        for (int32_t i : players[k]) {
          for (int32_t j : players[k]) {
            matrix[i * f1 + j] = static_cast<float>(a[i * f1 + j]);
            a[i * f1 + j] = 0.0;
          }
        }
        matrix[F * f1 + F] = static_cast<float>(bias[k]);
      }
    }
    if (cells * sizeof(double) > kKeptAccumulatorBytes) {
      acc.reset();
      acc_cells = 0;
    }
  };
  ParallelFor(pool, rows.rows, 1, work);
  if (out_of_memory) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "interaction values: no memory for an accumulator of ", layout.num_outputs, " x ", f1,
        " x ", f1, " doubles"));
  }
  return absl::OkStatus();
}

}  // namespace grove
