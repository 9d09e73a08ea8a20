// GPU interventional SHAP engine: the bitmask formulation of interventional_paths.h on one GPU.
// Plain C++: compiles with g++; kernels in interventional_gpu.cuh / interventional_gpu.cu;
// interventional_gpu_nocuda.cc stands in without CUDA (Create fails with UNAVAILABLE).
//
// Resident per model from Create on: the PathLayout's copy on the GPU (its elements, paths, bins,
// values, category bitsets and fixed-point scales), shared with the other engines built on the
// same layout object (path_layout_gpu.h); and the engine's own (DeviceBytes): the
// InterventionalLayout's per-path background masks and counts and the weight tables, and
// per-iteration prefix sums of the background's tree means (the bias of any iteration range). A
// request moves only its rows and results.
//
// Kernel: one warp per bin (a path element per lane, as TreeShapGpu), kRowsPerWarp rows per warp
// whose X masks (one ballot per row) and per-lane accumulators stay in registers while the lane
// walks its path's background masks; each lane then adds one 64-bit fixed-point value per (row,
// output) with an integer atomic. Integer addition commutes exactly, so results are bitwise
// identical from run to run (deterministic); the conversion to float adds the bias in double.
//
// Linearized output space (EnableLinearized): the margins of the rows and of the background by
// paths (fixed point, as the SHAP values), each pair's LinearizedFactor in the workspace, and a
// kernel that weights each mask's background rows by their factors instead of counting them (cost
// per (row, path element, mask) grows with the mask's rows); the bias is the mean link of the
// background's margins. Deterministic as the margin space.
//
// Exact probability space (kProbability, EnableLinearized first): one warp per row runs
// interventional_exact.h's pair algorithm against every background row in turn (its paths' masks,
// the Möbius table of the pair's 2^d hybrids and the Shapley sums in a per-warp scratch of the
// workspace; d <= kMaxExactDifferingFeatures); the bias is the mean link of the background's
// margins. Deterministic; an identity link's is the margin space over the average divisor.
//
// Interaction values (options.interactions; interventional_interactions_gpu.cuh): the margin space
// and an identity link's probability space (PathFormExplainsInteractions), and the exact
// probability space (its warp per row, interventional_exact.h step 5, double accumulators per row
// in the workspace); the linearized space is refused with FAILED_PRECONDITION (the CPU
// reference computes it). One warp per bin and rows per warp as above, each lane summing its
// masks for one row at a time, then one 64-bit fixed-point atomic per (row, output, unordered
// element pair): deterministic. Workspace: rows x ExplainWidth(forest, true) x 8 bytes.
//
// Attribution: Shapley or Banzhaf values and interaction values alike (the attribution's weight
// table, both resident), in every space the attribution's kernels above serve.
//
// Feature groups: an engine built on a grouping's grouped layout (PathLayoutOptions::groups) and
// the background's masks on it explains that grouping (one column per group; every kernel above,
// each lane folding its path's group members into their leader, FoldGroupMembers) and refuses
// other players (CheckLayoutPlayers).
//
// Scope: models whose paths have at most kWarpLanes elements (Create refuses others with
// FAILED_PRECONDITION; the CPU strategies serve them); any iteration range.
// Thread-safety: Explain may be called concurrently (serialised on the engine's workspace);
// ExplainOnDevice is reentrant (the caller owns the workspace and the stream).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/common/rows.h"
#include "core/explain/interventional/interventional.h"
#include "core/explain/interventional/interventional_paths.h"
#include "core/explain/paths.h"
#include "core/gpu/stream.h"
#include "core/model/forest.h"

namespace grove {

class InterventionalGpu {
 public:
  // Uploads the layouts to GPU 0 (the path layout through ResidentPathLayout::On). UNAVAILABLE
  // without a GPU; FAILED_PRECONDITION for a layout with long paths; RESOURCE_EXHAUSTED when they
  // do not fit.
  static absl::StatusOr<std::unique_ptr<InterventionalGpu>> Create(ForestPtr forest,
                                                                    PathLayoutPtr layout,
                                                                    InterventionalLayoutPtr il);
  virtual ~InterventionalGpu() = default;

  // Device bytes of the workspace ExplainOnDevice needs for `num_rows` rows of `options` (its
  // output space and whether interactions are asked).
  virtual int64_t WorkspaceBytes(int64_t num_rows, const InterventionalOptions& options) const = 0;
  int64_t WorkspaceBytes(int64_t num_rows, OutputSpace space) const {
    InterventionalOptions options;
    options.output_space = space;
    return WorkspaceBytes(num_rows, options);
  }
  int64_t WorkspaceBytes(int64_t num_rows) const {
    return WorkspaceBytes(num_rows, OutputSpace::kMargin);
  }

  // The probability spaces (kProbabilityLinearized; kProbability unless the link is the identity)
  // need `ll` (built from this engine's layouts and background) on the device: the first call
  // uploads it, later ones return at once. Until then ExplainOnDevice refuses those spaces
  // (FAILED_PRECONDITION). Thread-safe.
  virtual absl::Status EnableLinearized(LinearizedLayoutPtr ll) = 0;
  virtual bool linearized_enabled() const = 0;

  // Device-level entry: d_rows (num_rows x num_features, dense) and d_out (num_rows x
  // ExplainWidth(forest, options.interactions, options.groups), dense) on this engine's GPU;
  // d_workspace holds at least WorkspaceBytes(num_rows, options) bytes. Enqueued on `stream` (a
  // cudaStream_t of that GPU); returns once enqueued, without synchronising -- except the exact
  // probability space, which waits for `stream` to learn whether a pair was over the limit
  // (ExactPairTooWideError; `d_out` is then incomplete). Checks options (INVALID_ARGUMENT /
  // FAILED_PRECONDITION) before enqueuing anything. Deterministic.
  virtual absl::Status ExplainOnDevice(const float* d_rows, int64_t num_rows,
                                       const InterventionalOptions& options, void* d_workspace,
                                       int64_t workspace_bytes, float* d_out,
                                       CUstream_st* stream) const = 0;

  // Host rows in, host results out (rows x ExplainWidth(forest, options.interactions,
  // options.groups)), through the engine's own pinned buffers and workspace (grown to the largest
  // request seen, then reused). Synchronous.
  virtual absl::Status Explain(RowsView rows, const InterventionalOptions& options,
                               MatrixView<float> out) = 0;

  // The engine's own resident arrays and workspace (not the shared path layout copy:
  // ResidentPathLayout::ResidentBytes of the layout).
  virtual int64_t DeviceBytes() const = 0;
  virtual const PathLayoutPtr& layout() const = 0;  // the layout Create was given
  virtual std::string Describe() const = 0;  // e.g. "interventional_gpu on cuda:0, 12.3 MB"
  virtual std::string DeviceName() const = 0;
};

}  // namespace grove
