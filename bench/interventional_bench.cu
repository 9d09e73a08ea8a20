// Interventional SHAP throughput on the GPU: Grove's InterventionalGpu against
// GPUTreeShap's interventional kernel, same model, rows and background, in one process.
//
//   grove_interventional_bench --model M.ubj --rows R.csv [--name LABEL] [--shap-rows 10000]
//                              [--background-rows 100] [--reps 5] [--interactions-rows 1000]
//                              [--cpu-rows 100] [--cpu-threads 16]
//
// Rows: the CSV's rows (a trailing label column is dropped, as in explain_bench); the first
// --shap-rows are explained, the next --background-rows are the background (the first ones when
// the file is too short).
// Grove: InterventionalGpu::ExplainOnDevice, rows on the device, results left there, workspace
// preallocated; per-model preprocessing (path layout, background masks, upload) done once, before
// timing, and reported separately.
// GPUTreeShap (built only when CMake finds gpu_treeshap.h, GROVE_GPUTREESHAP_DIR): its paths from
// the same forest, PreprocessPaths run once (cached), then per repetition the zeroing of its double
// output and detail::ComputeShapInterventional -- the work GPUTreeShapInterventional does per call
// minus its preprocessing. Numeric-split models with scalar leaves only (its split condition has no
// categories). The two results are compared (max |difference| over feature columns).
// Then, where the model's link has them, the probability spaces (probability_linearized and the
// exact probability; GPUTreeShap has neither), same rows, one "# model space: rows/s" line each.
// Then interaction values (margin space, Shapley): the first --interactions-rows rows (0: skip) on
// the GPU (ExplainOnDevice, as above) against the CPU reference (ExplainInterventionalCpu, the
// oracle, over --cpu-threads threads) and the CPU path form on the first --cpu-rows of them (the
// CPU side runs once, on fewer rows by default: the reference takes minutes for 1,000 rows of a
// medium model against 1,000 background rows; a rate is per row either way); "# model
// interactions:" lines give rows/s of each, the GPU's speedup over each, and the max |difference| over the rows both ran.
// Timing: one warm-up run, then the median of --reps runs, CUDA events.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/interventional/interventional_gpu.h"
#include "core/explain/interventional/interventional_interactions.h"
#include "core/explain/interventional/interventional_paths.h"
#include "core/explain/paths.h"
#include "core/model/loader.h"

#include "bench/common/cuda_bench.cuh"
#include "bench/common/flags.h"
#include "bench/common/main.h"
#include "bench/common/rows.h"

#if defined(GROVE_WITH_GPUTREESHAP)
#include <thrust/device_vector.h>
#endif

namespace grove {
namespace {

#if defined(GROVE_WITH_GPUTREESHAP)
using bench::DenseDataset;
using bench::GtsElement;

// One GPUTreeShap path per leaf: the root (feature -1) and one element per split on the way.
void AppendPaths(const Forest& f, int t, int32_t node, std::vector<GtsElement>* stack,
                 std::vector<GtsElement>* out, size_t* path) {
  const Node* nodes = f.TreeNodes(t);
  const Node& n = nodes[node];
  if (n.is_leaf()) {
    const double v = f.trees[t].weight * f.leaf_values[n.payload];
    out->emplace_back(*path, -1, f.trees[t].group, gpu_treeshap::XgboostSplitCondition(), 1.0,
                      static_cast<float>(v));
    for (GtsElement e : *stack) {
      e.path_idx = *path;
      e.v = static_cast<float>(v);
      out->push_back(e);
    }
    ++*path;
    return;
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (bool left : {true, false}) {
    const int32_t child = left ? n.left : n.right;
    const double z = n.cover > 0 ? nodes[child].cover / n.cover : 0.0;
    stack->emplace_back(0, n.feature, f.trees[t].group,
                        gpu_treeshap::XgboostSplitCondition(left ? -inf : n.threshold,
                                                            left ? n.threshold : inf,
                                                            n.default_left() == left),
                        z, 0.0f);
    AppendPaths(f, t, child, stack, out, path);
    stack->pop_back();
  }
}

// Seconds per run of GPUTreeShap's interventional kernel (preprocessing cached); fills `phis`
// (rows x groups x (F + 1)) with its result. Empty message when it ran.
std::string TimeGpuTreeShap(const Forest& f, const float* d_rows, int64_t n, const float* d_bg,
                            int64_t nb, int reps, double* seconds, std::vector<double>* phis) {
  if (f.has_categorical || f.has_vector_leaves) return "categorical splits or vector leaves";
  std::vector<GtsElement> host, stack;
  size_t path = 0;
  for (int t = 0; t < static_cast<int>(f.trees.size()); ++t) AppendPaths(f, t, 0, &stack, &host, &path);
  thrust::device_vector<GtsElement> paths(host.begin(), host.end()), dedup;
  thrust::device_vector<size_t> bins;
  gpu_treeshap::detail::PreprocessPaths<thrust::device_allocator<int>,
                                        gpu_treeshap::XgboostSplitCondition>(&paths, &dedup, &bins);
  const size_t F = f.num_features;
  thrust::device_vector<double> phi(n * f.num_outputs * (F + 1));
  DenseDataset X{d_rows, static_cast<size_t>(n), F}, R{d_bg, static_cast<size_t>(nb), F};
  *seconds = bench::TimeDevice(reps, [&] {
    cudaMemsetAsync(phi.data().get(), 0, phi.size() * sizeof(double));
    gpu_treeshap::detail::ComputeShapInterventional(X, R, bins, dedup, f.num_outputs,
                                                    phi.data().get());
  });
  phis->resize(phi.size());
  thrust::copy(phi.begin(), phi.end(), phis->begin());
  return "";
}
#endif

double Seconds(const std::function<absl::Status()>& run, absl::Status* status) {
  const auto t0 = std::chrono::steady_clock::now();
  status->Update(run());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Interaction values of the first `ni` rows (d_rows on the device, `all` on the host) on the GPU,
// and of the first `nc` on the CPU reference and the CPU path form, over `threads` threads.
void TimeInteractions(const Forest& f, const PathLayout& layout, const InterventionalLayout& il,
                      InterventionalGpu& gpu, const std::vector<float>& all, const float* d_rows,
                      int64_t ni, int64_t nc, const std::vector<float>& bg, int reps, int threads,
                      const std::string& label) {
  const int F = f.num_features;
  const int64_t nb = static_cast<int64_t>(bg.size()) / F;
  const int64_t width = ExplainWidth(f, true);
  InterventionalOptions o;
  o.interactions = true;
  const int64_t ws = gpu.WorkspaceBytes(ni, o);
  float* d_out = nullptr;
  void* d_ws = nullptr;
  if (cudaMalloc(&d_out, ni * width * 4) != cudaSuccess || cudaMalloc(&d_ws, ws) != cudaSuccess) {
    std::printf("# %s interactions: %lld rows need %.1f MB of device memory\n", label.c_str(),
                static_cast<long long>(ni), (ni * width * 4 + ws) / 1e6);
    cudaFree(d_out);
    return;
  }
  absl::Status status;
  const double gpu_s = bench::TimeDevice(reps, [&] {
    status.Update(gpu.ExplainOnDevice(d_rows, ni, o, d_ws, ws, d_out, nullptr));
  });
  std::vector<float> got(ni * width);
  cudaMemcpy(got.data(), d_out, got.size() * 4, cudaMemcpyDeviceToHost);
  cudaFree(d_out);
  cudaFree(d_ws);
  ThreadPool pool(threads);
  const RowsView rows = MakeRowsView(all.data(), nc, F);
  std::vector<float> reference(nc * width), paths(nc * width);
  const double reference_s = Seconds([&] {
    return ExplainInterventionalCpu(f, MakeRowsView(bg.data(), nb, F), rows, o,
                                    MakeMatrixView(reference.data(), nc, width), &pool);
  }, &status);
  const double paths_s = Seconds([&] {
    return ExplainInterventionalInteractionsPathsCpu(
        f, layout, il, rows, o, MakeMatrixView(paths.data(), nc, width), &pool);
  }, &status);
  double diff = 0, paths_diff = 0;
  for (int64_t i = 0; i < nc * width; ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(got[i] - reference[i])));
    paths_diff = std::max(paths_diff, static_cast<double>(std::abs(paths[i] - reference[i])));
  }
  const double gpu_rate = ni / gpu_s, reference_rate = nc / reference_s, paths_rate = nc / paths_s;
  std::printf("# %s interactions: %lld rows x %lld background rows, %d features; gpu %.4g rows/s "
              "(%.3f s); cpu reference %.4g rows/s (%lld rows, %d threads, %.2f s), gpu %.1fx; "
              "cpu paths %.4g rows/s (%.2f s), gpu %.1fx; max |gpu - reference| %.3g, max "
              "|paths - reference| %.3g; %s\n",
              label.c_str(), static_cast<long long>(ni), static_cast<long long>(nb), F, gpu_rate,
              gpu_s, reference_rate, static_cast<long long>(nc), threads, reference_s,
              gpu_rate / reference_rate, paths_rate, paths_s, gpu_rate / paths_rate, diff,
              paths_diff, status.ok() ? "ok" : status.ToString().c_str());
}

int Main(int argc, char** argv) {
  bench::ModelRowsFlags flags;
  flags.counts = {{"--shap-rows", 10000},       {"--background-rows", 100}, {"--reps", 5},
                  {"--interactions-rows", 1000}, {"--cpu-rows", 100},        {"--cpu-threads", 16}};
  flags.may_be_zero = {"--interactions-rows"};
  if (!bench::ParseModelRowsFlags(argc, argv, &flags)) {
    std::fprintf(stderr, "usage: grove_interventional_bench --model M --rows R.csv [--name L] "
                         "[--shap-rows N] [--background-rows N] [--reps N] "
                         "[--interactions-rows N] [--cpu-rows N] [--cpu-threads N]\n");
    return 2;
  }
  absl::StatusOr<ForestPtr> forest = LoadModelFile(flags.model);
  if (!forest.ok()) {
    std::fprintf(stderr, "%s\n", forest.status().ToString().c_str());
    return 1;
  }
  const Forest& f = **forest;
  const int F = f.num_features;
  absl::StatusOr<std::vector<float>> rows = bench::ReadFeatureRows(flags.rows, F);
  if (!rows.ok()) {
    std::fprintf(stderr, "rows: %s\n", rows.status().ToString().c_str());
    return 1;
  }
  const std::vector<float>& all = *rows;
  const int64_t available = static_cast<int64_t>(all.size()) / F;
  const int64_t n = std::min(flags.count("--shap-rows"), available);
  const int64_t nb = std::min(flags.count("--background-rows"), available);
  const int reps = static_cast<int>(flags.count("--reps"));
  const int64_t bg_begin = n + nb <= available ? n : 0;
  const std::vector<float> bg(all.begin() + bg_begin * F, all.begin() + (bg_begin + nb) * F);

  const auto prep_start = std::chrono::steady_clock::now();
  absl::StatusOr<PathLayoutPtr> layout = BuildPathLayout(f);
  absl::StatusOr<InterventionalLayoutPtr> il =
      layout.ok() ? BuildInterventionalLayout(f, **layout, MakeRowsView(bg.data(), nb, F), nullptr)
                  : absl::StatusOr<InterventionalLayoutPtr>(layout.status());
  absl::StatusOr<std::unique_ptr<InterventionalGpu>> gpu =
      il.ok() ? InterventionalGpu::Create(*forest, *layout, *il)
              : absl::StatusOr<std::unique_ptr<InterventionalGpu>>(il.status());
  if (!gpu.ok()) {
    std::fprintf(stderr, "%s\n", gpu.status().ToString().c_str());
    return 1;
  }
  const double prep =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - prep_start).count();
  const int64_t width = ExplainWidth(f, false);
  float *d_rows = nullptr, *d_bg = nullptr, *d_out = nullptr;
  void* d_ws = nullptr;
  const int64_t ws = (*gpu)->WorkspaceBytes(n);
  cudaMalloc(&d_rows, n * F * 4);
  cudaMalloc(&d_bg, nb * F * 4);
  cudaMalloc(&d_out, n * width * 4);
  cudaMalloc(&d_ws, ws);
  cudaMemcpy(d_rows, all.data(), n * F * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(d_bg, bg.data(), nb * F * 4, cudaMemcpyHostToDevice);
  absl::Status status;
  const double grove = bench::TimeDevice(reps, [&] {
    status.Update((*gpu)->ExplainOnDevice(d_rows, n, {}, d_ws, ws, d_out, nullptr));
  });
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  std::vector<float> out(n * width);
  cudaMemcpy(out.data(), d_out, out.size() * 4, cudaMemcpyDeviceToHost);
  std::printf("| model | rows | background | masks | preprocessing s | grove rows/s | "
              "gputreeshap rows/s | speedup | max |diff| |\n|---|---|---|---|---|---|---|---|---|\n");
  std::string gts = "not built (GROVE_GPUTREESHAP_DIR)";
  double gts_seconds = 0, diff = 0;
#if defined(GROVE_WITH_GPUTREESHAP)
  std::vector<double> phis;
  gts = TimeGpuTreeShap(f, d_rows, n, d_bg, nb, reps, &gts_seconds, &phis);
  for (int64_t i = 0; gts.empty() && i < n * width; ++i) {
    if (i % (F + 1) != F) diff = std::max(diff, std::abs(phis[i] - out[i]));
  }
#endif
  std::printf("| %s | %lld | %lld | %zu | %.3f | %.4g | %s | %s | %s |\n",
              flags.label().c_str(),
              static_cast<long long>(n), static_cast<long long>(nb), (*il)->masks.size(), prep,
              n / grove, gts.empty() ? std::to_string(n / gts_seconds).c_str() : gts.c_str(),
              gts.empty() ? std::to_string(gts_seconds / grove).c_str() : "-",
              gts.empty() ? std::to_string(diff).c_str() : "-");
  // The probability spaces where the link allows: shap's model_output="probability"
  // (probability_linearized) and the exact one; both need the linearized layout.
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<LinearizedLayoutPtr> ll =
      BuildLinearizedLayout(**layout, **il, MakeRowsView(bg.data(), nb, F), nullptr);
  if (ll.ok()) status.Update((*gpu)->EnableLinearized(*ll));
  const double layout_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (OutputSpace space : {OutputSpace::kProbabilityLinearized, OutputSpace::kProbability}) {
    InterventionalOptions o;
    o.output_space = space;
    if (!CheckOutputSpace(f, space).ok() || f.objective.link == Link::kIdentity) continue;
    const int64_t space_ws = (*gpu)->WorkspaceBytes(n, space);
    void* d_space_ws = nullptr;
    if (ll.ok() && status.ok() && cudaMalloc(&d_space_ws, space_ws) == cudaSuccess) {
      absl::Status run;
      const double t = bench::TimeDevice(reps, [&] {
        run.Update((*gpu)->ExplainOnDevice(d_rows, n, o, d_space_ws, space_ws, d_out, nullptr));
      });
      std::printf("# %s %s: %.4g rows/s (%.3f ms), layout %.3f s, workspace %.1f MB, %s\n",
                  flags.label().c_str(), OutputSpaceName(space), n / t, t * 1e3, layout_s,
                  space_ws / 1e6, run.ok() ? "ok" : run.ToString().c_str());
      cudaFree(d_space_ws);
    } else {
      std::printf("# %s %s: %s\n", flags.label().c_str(), OutputSpaceName(space),
                  ll.ok() ? status.ToString().c_str() : ll.status().ToString().c_str());
    }
  }
  cudaFree(d_out);
  cudaFree(d_ws);
  const int64_t ni = std::min(flags.count("--interactions-rows"), n);
  if (ni > 0) {
    const int64_t nc = std::clamp<int64_t>(flags.count("--cpu-rows"), 1, ni);
    const int threads = static_cast<int>(std::max<int64_t>(1, flags.count("--cpu-threads")));
    TimeInteractions(f, **layout, **il, **gpu, all, d_rows, ni, nc, bg, reps, threads,
                     flags.label());
  }
  cudaFree(d_rows);
  cudaFree(d_bg);
  return 0;
}

}  // namespace
}  // namespace grove

int main(int argc, char** argv) { return grove::bench::RunMain(argc, argv, &grove::Main); }
