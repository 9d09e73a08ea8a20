// Warp-level TreeSHAP throughput on the GPU: Grove's treeshap_gpu against GPUTreeShap's
// path-dependent kernels on the same paths (Grove's own extraction) and the same rows, in one
// process.
//
//   grove_treeshap_bench --model M.ubj --rows R.csv [--name LABEL] [--shap-rows 10000]
//                        [--interaction-rows 200] [--reps 5] [--rows-per-warp N]
//                        [--bins-per-warp N] [--table-max-elements N]
//
// Rows: the CSV's rows (a trailing label column is dropped, as in explain_bench; decompress .gz
// first); the first --shap-rows for SHAP values, the first --interaction-rows for interactions.
// Grove: TreeShapGpu::ExplainOnDevice (engine level: layout resident, rows on the device, results
// left there as float: zeroing the fixed-point accumulator, the kernel, the conversion), once per
// path arithmetic: float and double with the composite UNWIND, float and double top-down, table
// (SHAP values of the bins whose paths have pattern tables read them, the rest as auto) and auto
// (the load-time choice from the error bounds, shown in the note column).
// GPUTreeShap (built only when CMake finds gpu_treeshap.h, GROVE_GPUTREESHAP_DIR): Grove's binned
// paths converted element by element (numeric intervals and the NaN direction; models with
// LightGBM zero-as-missing or categorical elements, or vector leaves, cannot be expressed), its
// PreprocessPaths run once (cached), then per repetition the zeroing of its double output and
// detail::ComputeShap / detail::ComputeShapInteractions -- the kernels GPUTreeShap() and
// GPUTreeShapInteractions() run per call, minus the preprocessing and the bias. max |diff|: the
// largest difference between Grove (float, double) and GPUTreeShap over the feature entries.
// Timing: one warm-up run, then the median of --reps runs, CUDA events.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/common/cuda_bench.cuh"
#include "bench/common/flags.h"
#include "bench/common/main.h"
#include "bench/common/rows.h"
#include "core/explain/explain.h"
#include "core/explain/paths.h"
#include "core/explain/treeshap/treeshap_gpu.h"
#include "core/model/loader.h"

#if defined(GROVE_WITH_GPUTREESHAP)
#include <thrust/device_vector.h>
#endif

namespace grove {
namespace {

// One side's result for one kind of request.
struct Side {
  std::string label;
  double seconds = 0;
  std::vector<double> values;  // rows x width (feature entries compared)
  std::string note;            // why it did not run, or what it chose
};

#if defined(GROVE_WITH_GPUTREESHAP)
using bench::DenseDataset;
using bench::GtsElement;

// Grove's binned paths as GPUTreeShap elements; empty message when every element converts.
std::string ConvertPaths(const PathLayout& l, std::vector<GtsElement>* out) {
  const float inf = std::numeric_limits<float>::infinity();
  for (size_t id = 0; id < l.paths.size(); ++id) {
    const PathInfo& p = l.paths[id];
    if (p.bin == UINT32_MAX) continue;  // long path: neither side's warp kernel takes it
    if (p.width != 1) return "vector leaves";
    const float v = static_cast<float>(l.values[p.value_begin]);
    for (int i = 0; i < p.length; ++i) {
      const PathElement& e = l.elements[p.element_begin + i];
      if (e.flags & (kElemZeroZone | kElemCategorical)) return "zero-as-missing or categorical";
      const gpu_treeshap::XgboostSplitCondition split(
          (e.flags & kElemHasLower) ? e.lower : -inf, (e.flags & kElemHasUpper) ? e.upper : inf,
          (e.flags & kElemNanPass) != 0);
      out->emplace_back(id, i == 0 ? -1 : e.feature, p.group, split, e.zero_fraction, v);
    }
  }
  return "";
}

// GPUTreeShap's kernel for both kinds on Grove's paths (preprocessing done once, before timing).
void RunGpuTreeShap(const PathLayout& l, const float* d_rows, const int64_t (&n)[2], int reps,
                    Side (&side)[2]) {
  std::vector<GtsElement> host;
  const std::string why = ConvertPaths(l, &host);
  for (Side& s : side) s.label = "gputreeshap", s.note = "2220de9, paths preprocessed once";
  if (!why.empty()) {
    for (Side& s : side) s.note = why;
    return;
  }
  thrust::device_vector<GtsElement> paths(host.begin(), host.end()), dedup;
  thrust::device_vector<size_t> bins;
  gpu_treeshap::detail::PreprocessPaths<thrust::device_allocator<int>,
                                        gpu_treeshap::XgboostSplitCondition>(&paths, &dedup, &bins);
  const size_t F = l.num_features, K = l.num_outputs;
  for (int kind = 0; kind < 2; ++kind) {
    const size_t width = K * (kind == 1 ? (F + 1) * (F + 1) : F + 1);
    thrust::device_vector<double> phi(n[kind] * width);
    const DenseDataset X{d_rows, static_cast<size_t>(n[kind]), F};
    side[kind].seconds = bench::TimeDevice(reps, [&] {
      cudaMemsetAsync(phi.data().get(), 0, phi.size() * sizeof(double));
      if (kind == 1) {
        gpu_treeshap::detail::ComputeShapInteractions(X, bins, dedup, K, phi.data().get());
      } else {
        gpu_treeshap::detail::ComputeShap(X, bins, dedup, K, phi.data().get());
      }
    });
    side[kind].values.resize(phi.size());
    thrust::copy(phi.begin(), phi.end(), side[kind].values.begin());
  }
}
#endif

// Grove's engine in one precision for both kinds.
void RunGrove(const PathLayoutPtr& layout, TreeShapPrecision precision, const float* d_rows,
              const int64_t (&n)[2], int reps, int rows_per_warp, int bins_per_warp,
              int table_max_elements, Side (&side)[2]) {
  TreeShapGpuOptions o;
  o.precision = precision;
  o.rows_per_warp = rows_per_warp;
  o.bins_per_warp = bins_per_warp;
  if (table_max_elements >= 0) o.table_max_elements = table_max_elements;
  o.max_devices = 1;
  absl::StatusOr<std::unique_ptr<TreeShapGpu>> gpu = TreeShapGpu::Create(layout, o);
  if (gpu.ok() && precision == TreeShapPrecision::kAuto) {
    std::fprintf(stderr, "%s\n", (*gpu)->Describe().c_str());
  }
  for (int kind = 0; kind < 2; ++kind) {
    Side& s = side[kind];
    s.label = absl::StrCat("grove ", TreeShapPrecisionName(precision));
    if (!gpu.ok()) {
      s.note = std::string(gpu.status().message());
      continue;
    }
    const bool inter = kind == 1;
    s.note = absl::StrCat((*gpu)->UsesTable(inter) ? "table, other bins " : "",
                          (*gpu)->UsesFloat(inter) ? "float" : "double",
                          (*gpu)->UsesTopDown(inter) ? " top-down" : "");
    const int64_t f1 = layout->num_features + 1;
    const int64_t width = layout->num_outputs * (inter ? f1 * f1 : f1);
    float* d_out = nullptr;
    cudaMalloc(&d_out, n[kind] * width * sizeof(float));
    absl::Status status;
    s.seconds = bench::TimeDevice(reps, [&] {
      status.Update((*gpu)->ExplainOnDevice(0, d_rows, n[kind], inter, d_out, nullptr));
    });
    if (!status.ok()) s.note = std::string(status.message());
    std::vector<float> out(n[kind] * width);
    cudaMemcpy(out.data(), d_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost);
    s.values.assign(out.begin(), out.end());
    cudaFree(d_out);
  }
}

// Largest |a - b| over feature entries (the bias row and column left out: GPUTreeShap's kernels
// do not add the bias).
double MaxDiff(const std::vector<double>& a, const std::vector<double>& b, int64_t f1,
               bool interactions) {
  if (a.size() != b.size() || a.empty()) return std::nan("");
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const int64_t c = static_cast<int64_t>(i) % (interactions ? f1 * f1 : f1);
    const bool bias = interactions ? (c / f1 == f1 - 1 || c % f1 == f1 - 1) : c == f1 - 1;
    if (!bias) d = std::max(d, std::abs(a[i] - b[i]));
  }
  return d;
}

int Main(int argc, char** argv) {
  bench::ModelRowsFlags flags;
  // --rows-per-warp: TreeShapGpuOptions::rows_per_warp (0: the engine's choice).
  // --bins-per-warp: TreeShapGpuOptions::bins_per_warp (0: the engine's choice).
  // --table-max-elements: TreeShapGpuOptions::table_max_elements (absent: the default).
  flags.counts = {{"--shap-rows", 10000}, {"--interaction-rows", 200}, {"--reps", 5},
                  {"--rows-per-warp", 0}, {"--bins-per-warp", 0}, {"--table-max-elements", -1}};
  if (!bench::ParseModelRowsFlags(argc, argv, &flags)) {
    std::fprintf(stderr, "usage: grove_treeshap_bench --model M --rows R.csv [--name L] "
                         "[--shap-rows N] [--interaction-rows N] [--reps N] [--rows-per-warp N] "
                         "[--bins-per-warp N] [--table-max-elements N]\n");
    return 2;
  }
  absl::StatusOr<ForestPtr> forest = LoadModelFile(flags.model);
  absl::StatusOr<PathLayoutPtr> layout =
      forest.ok() ? BuildPathLayout(**forest) : absl::StatusOr<PathLayoutPtr>(forest.status());
  absl::StatusOr<std::vector<float>> rows =
      layout.ok() ? bench::ReadFeatureRows(flags.rows, (*forest)->num_features)
                  : absl::StatusOr<std::vector<float>>(layout.status());
  if (!rows.ok()) {
    std::fprintf(stderr, "%s\n", rows.status().ToString().c_str());
    return 1;
  }
  const int F = (*forest)->num_features;
  const int64_t available = static_cast<int64_t>(rows->size()) / F;
  const int64_t n[2] = {std::min(flags.count("--shap-rows"), available),
                        std::min(flags.count("--interaction-rows"), available)};
  const int reps = static_cast<int>(flags.count("--reps"));
  float* d_rows = nullptr;
  cudaMalloc(&d_rows, std::max(n[0], n[1]) * F * sizeof(float));
  cudaMemcpy(d_rows, rows->data(), std::max(n[0], n[1]) * F * sizeof(float), cudaMemcpyHostToDevice);
  // Grove in each arithmetic (composite float and double, top-down float and double, the pattern
  // table, the load-time choice), then GPUTreeShap.
  constexpr int kGrove = 6;
  Side sides[kGrove + 1][2];
  const TreeShapPrecision precisions[kGrove] = {
      TreeShapPrecision::kFloat,         TreeShapPrecision::kDouble,
      TreeShapPrecision::kFloatTopDown,  TreeShapPrecision::kDoubleTopDown,
      TreeShapPrecision::kTable,         TreeShapPrecision::kAuto};
  const int rows_per_warp = static_cast<int>(flags.count("--rows-per-warp"));
  const int bins_per_warp = static_cast<int>(flags.count("--bins-per-warp"));
  const int table_max_elements = static_cast<int>(flags.count("--table-max-elements"));
  for (int i = 0; i < kGrove; ++i) {
    RunGrove(*layout, precisions[i], d_rows, n, reps, rows_per_warp, bins_per_warp,
             table_max_elements, sides[i]);
  }
  Side (&gts_side)[2] = sides[kGrove];
  gts_side[0].label = gts_side[1].label = "gputreeshap";
  gts_side[0].note = gts_side[1].note = "not built (GROVE_GPUTREESHAP_DIR)";
#if defined(GROVE_WITH_GPUTREESHAP)
  RunGpuTreeShap(**layout, d_rows, n, reps, gts_side);
#endif
  cudaFree(d_rows);
  const char* name = flags.label().c_str();
  std::printf("| model | kind | rows | side | rows/s | / gputreeshap | max |diff| vs gputreeshap | "
              "note |\n|---|---|---|---|---|---|---|---|\n");
  for (int kind = 0; kind < 2; ++kind) {
    const Side& gts = gts_side[kind];
    for (const auto& side : sides) {
      const Side& s = side[kind];
      const bool ran = s.seconds > 0;
      const bool gts_ran = gts.seconds > 0;
      std::printf("| %s | %s | %lld | %s | %s | %s | %s | %s |\n", name,
                  kind == 1 ? "interactions" : "shap", static_cast<long long>(n[kind]),
                  s.label.c_str(), ran ? absl::StrFormat("%.4g", n[kind] / s.seconds).c_str() : "-",
                  ran && gts_ran ? absl::StrFormat("%.2fx", gts.seconds / s.seconds).c_str() : "-",
                  ran && gts_ran && &s != &gts
                      ? absl::StrFormat("%.3g", MaxDiff(s.values, gts.values, F + 1, kind == 1)).c_str()
                      : "-",
                  s.note.c_str());
    }
  }
  return 0;
}

}  // namespace
}  // namespace grove

int main(int argc, char** argv) { return grove::bench::RunMain(argc, argv, &grove::Main); }
