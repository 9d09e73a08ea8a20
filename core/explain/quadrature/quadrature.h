// Exact quadrature SHAP: SHAP values and SHAP interaction values of path-dependent TreeSHAP computed
// as integrals over t in [0, 1] of products of linear factors, evaluated by Gauss-Legendre rules
// that are exact for the polynomial degree of every path (docs/quadrature.md derives it).
//
// For a merged root-to-leaf path (core/explain/paths.h) with unique features j (zero fraction z_j,
// one fraction o_j in {0, 1} for the row) and leaf value v:
//   phi_i      = v (o_i - z_i) * I_i,         I_i  = int_0^1 prod_{j != i} (z_j + t (o_j - z_j)) dt
//   phi_ij     = v/2 (o_i - z_i)(o_j - z_j) * I_ij,  I_ij = int_0^1 prod_{k != i, j} (...) dt
//   phi_ii     = phi_i - sum_{j != i} phi_ij
// A path with n unique features has an integrand of degree n - 1, so the Q-point Gauss-Legendre
// rule with Q = QuadraturePoints(n) = max(1, ceil(n / 2)) (exact up to degree 2Q - 1) integrates it
// exactly: results differ from the exact values by floating-point rounding only.
//
// Layers:
//   * GaussLegendre01: rules on [0, 1] computed in double at model load.
//   * QuadratureLeaveOneOut (GROVE_HD): the per-row, per-path arithmetic, shared by the CPU loops
//     and the GPU kernels. Leave-one-out products use prefix / suffix products (no division, so
//     factors that are 0 or underflow are handled exactly).
//   * QuadratureModel: per-model preprocessing (paths sorted into register-capacity buckets,
//     rules, fixed-point scale), built once from a PathLayout and immutable afterwards.
//   * ExplainQuadratureCpu: multi-threaded CPU strategy; QuadratureGpu: device-resident copy and
//     kernels (quadrature_gpu.cu; quadrature_nocuda.cc answers UNAVAILABLE without CUDA).
//   * QuadratureStrategy: an explanation strategy (name, supports, estimate, run) for the engine's
//     selector, with costs calibrated on the running machine at load.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/free_list.h"
#include "core/common/hd.h"
#include "core/common/rows.h"
#include "core/common/run_info.h"
#include "core/explain/attribution.h"
#include "core/explain/explain.h"
#include "core/explain/paths.h"
#include "core/gpu/stream.h"
#include "core/model/forest.h"

namespace grove {

class ThreadPool;
struct QuadratureTreeProgram;  // core/explain/quadrature/quadrature_tree.h
struct QuadraturePairProgram;  // core/explain/quadrature/quadrature_pairs.h

// ---------------------------------------------------------------------------------------------
// Gauss-Legendre rules on [0, 1].

struct GaussLegendreRule {
  std::vector<double> nodes;    // ascending, strictly inside (0, 1)
  std::vector<double> weights;  // positive, summing to 1
};

// The `points`-point rule (points >= 1), nodes by Newton iteration on the Legendre polynomial
// P_points (three-term recurrence) in double. Exact for polynomials of degree <= 2 * points - 1.
GaussLegendreRule GaussLegendre01(int points);

// Smallest rule exact for a path of `unique_features` features (integrand degree unique - 1).
inline int QuadraturePoints(int unique_features) {
  return unique_features <= 2 ? 1 : (unique_features + 1) / 2;
}

// Banzhaf values are the same integrand evaluated at t = 1/2, not integrated: each other feature
// of a path joins the coalition with probability 1/2, so a path's value of feature i is
// v (o_i - z_i) prod_{j != i} (z_j + o_j) / 2 (attribution.h). Its "rule" is that one point with
// weight 1, for every path; the prefix / suffix products, kernels and tree recursion are unchanged.
// Points of `attribution`'s rule for a path of `unique_features` features.
inline int AttributionPoints(Attribution attribution, int unique_features) {
  return attribution == Attribution::kBanzhaf ? 1 : QuadraturePoints(unique_features);
}
// The `points`-point rule of `attribution`: GaussLegendre01 for Shapley, {1/2} weight 1 for
// Banzhaf (points must be 1).
GaussLegendreRule AttributionRule(Attribution attribution, int points);

// Register-capacity bucket of a path: the smallest of 4, 8, 16, 32 holding `unique_features`
// elements; 0 for longer paths (explained with run-time-sized arrays on the CPU).
inline int QuadratureBucket(int unique_features) {
  for (int capacity : {4, 8, 16, 32}) {
    if (unique_features <= capacity) return capacity;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Per-row, per-path arithmetic (host and device).

// For the factors f_j(t) = z[j] + t * d[j] of one path (d = o - z), computes
//   acc[i] = sum_k w_k prod_{j != i, j != skip} f_j(t_k)      for every i < len
// over the rule (t, w) of `q` points; `skip` (-1 for none) is left out of every product
// (interactions). Padding elements carry z = 1, d = 0 (factor 1). N > 0: compile-time length N
// (unrolled; the arrays stay in registers on the GPU); N == 0: run-time length `n` with caller
// scratch `pre` of n entries. Leave-one-out products are prefix * suffix products, so a factor of 0
// (or one that underflows) never divides anything. Summation order is fixed: deterministic.
template <int N, typename Real>
GROVE_HD void QuadratureLeaveOneOut(const Real* z, const Real* d, int n, int skip, const Real* t,
                                    const Real* w, int q, Real* pre, Real* acc) {
  const int len = N > 0 ? N : n;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int i = 0; i < (N > 0 ? N : len); ++i) acc[i] = Real(0);
  for (int k = 0; k < q; ++k) {
    const Real tk = t[k];
    Real p = Real(1);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int i = 0; i < (N > 0 ? N : len); ++i) {
      pre[i] = p;
      if (i != skip) p *= z[i] + tk * d[i];
    }
    Real s = w[k];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int i = (N > 0 ? N : len) - 1; i >= 0; --i) {
      acc[i] += pre[i] * s;
      if (i != skip) s *= z[i] + tk * d[i];
    }
  }
}

// SHAP values of one path for one row. z, d (= o - z), feature: the path's n elements, padded to N
// with z = 1, d = 0 (N > 0). `scratch`: 2 * (N > 0 ? N : n) entries. Emits
// sink(k, feature_i, value) for k < width: value = values[k] * d_i * I_i, in double.
template <int N, typename Real, typename Sink>
GROVE_HD void QuadraturePathShap(const Real* z, const Real* d, const int32_t* feature, int n,
                                 const Real* t, const Real* w, int q, const double* values,
                                 int width, Real* scratch, Sink& sink) {
  const int len = N > 0 ? N : n;
  Real* pre = scratch;
  Real* acc = scratch + len;
  QuadratureLeaveOneOut<N, Real>(z, d, n, -1, t, w, q, pre, acc);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int i = 0; i < (N > 0 ? N : len); ++i) {
    if (i < n) {
      const double c = static_cast<double>(d[i]) * static_cast<double>(acc[i]);
      if (c != 0) {
        for (int k = 0; k < width; ++k) sink(k, feature[i], values[k] * c);
      }
    }
  }
}

// SHAP interaction values of one path for one row (same inputs; `scratch`: 3 * len entries).
// Emits sink(k, feature_i, feature_j, value) for every ordered pair i != j of the path's elements
// (value = values[k] / 2 * d_i * d_j * I_ij) and for i == j (the path's part of the diagonal,
// phi_i - sum_{j != i} phi_ij). Every I_ij is computed as the leave-one-out integrals of the path
// with element i removed (factor 1), by the same prefix / suffix products.
template <int N, typename Real, typename Sink>
GROVE_HD void QuadraturePathInteractions(const Real* z, const Real* d, const int32_t* feature,
                                         int n, const Real* t, const Real* w, int q,
                                         const double* values, int width, Real* scratch,
                                         Sink& sink) {
  const int len = N > 0 ? N : n;
  Real* pre = scratch;
  Real* acc = scratch + len;
  Real* acc_i = scratch + 2 * len;
  QuadratureLeaveOneOut<N, Real>(z, d, n, -1, t, w, q, pre, acc);
  for (int i = 0; i < n; ++i) {
    double di = 0, ai = 0;
    int32_t fi = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int j = 0; j < (N > 0 ? N : len); ++j) {
      if (j == i) {
        di = static_cast<double>(d[j]);
        ai = static_cast<double>(acc[j]);
        fi = feature[j];
      }
    }
    if (di == 0) continue;  // o_i == z_i: the whole row and column of i vanish on this path
    QuadratureLeaveOneOut<N, Real>(z, d, n, i, t, w, q, pre, acc_i);
    double off_sum = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int j = 0; j < (N > 0 ? N : len); ++j) {
      if (j < n && j != i) {
        const double g = 0.5 * di * static_cast<double>(d[j]) * static_cast<double>(acc_i[j]);
        off_sum += g;
        if (g != 0) {
          for (int k = 0; k < width; ++k) sink(k, fi, feature[j], values[k] * g);
        }
      }
    }
    const double diag = di * ai - off_sum;
    if (diag != 0) {
      for (int k = 0; k < width; ++k) sink(k, fi, fi, values[k] * diag);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Per-model preprocessing.

// One path as the quadrature kernels read it (non-root elements only).
struct QuadraturePath {
  uint32_t element_begin = 0;  // first element in QuadratureModel::elements
  uint16_t n = 0;              // unique features (elements)
  uint16_t q = 0;              // Gauss-Legendre points, QuadraturePoints(n)
  uint32_t rule_begin = 0;     // offset of the q-point rule in rule_nodes / rule_weights
  uint32_t value_begin = 0;    // first value in PathLayout::values (tree weight applied)
  uint16_t width = 1;          // values carried (vector leaves: num_outputs)
  uint16_t capacity = 0;       // bucket: 4, 8, 16, 32, or 0 (longer)
  int32_t group = 0;           // first output group
  int32_t iteration = 0;       // boosting round of the tree
  int32_t tree = 0;            // tree index in the Forest
};
static_assert(sizeof(QuadraturePath) == 32, "QuadraturePath is uploaded as is");

struct QuadratureBucketRange {
  int capacity = 0;        // 4, 8, 16, 32, or 0
  uint32_t begin = 0;      // paths [begin, end) of QuadratureModel::paths
  uint32_t end = 0;
  int max_q = 0;
};

struct QuadratureModel {
  ForestPtr forest;
  PathLayoutPtr layout;                // values and category bitsets are read from it
  std::vector<QuadraturePath> paths;   // by bucket (ascending capacity, 0 last), stable
  std::vector<PathElement> elements;   // non-root elements of `paths`, contiguous per path
  std::vector<QuadratureBucketRange> buckets;  // non-empty buckets, in path order
  std::vector<double> rule_nodes;      // rules for q = 1..max_q, concatenated
  std::vector<double> rule_weights;
  std::vector<uint32_t> rule_offsets;  // [q] -> offset (q = 1..max_q)
  std::vector<double> tree_expected;   // [tree * num_outputs + k]: weight * expected leaf value
  // What the rules compute: Shapley values (Gauss-Legendre) or Banzhaf values (t = 1/2). The bias
  // is the expected value either way.
  Attribution attribution = Attribution::kShapley;
  int num_features = 0;
  int num_outputs = 1;
  int max_unique = 0;                  // longest path (unique features)
  int max_q = 0;
  int64_t skipped_paths = 0;           // paths with no features (single-leaf trees): bias only
  // Fixed-point accumulation (GPU): every partial sum of per-path contributions is bounded by
  // contribution_bound, and scale = 2^e with contribution_bound * scale <= 2^61.
  double contribution_bound = 0;
  double fixed_point_scale = 1;
  double build_seconds = 0;
  // The CPU's SHAP values of scalar-leaf trees: the same rules applied by one recursion per tree
  // (core/explain/quadrature/quadrature_tree.h); paths of the trees it does not serve run per path. Null:
  // every path runs per path.
  std::shared_ptr<const QuadratureTreeProgram> tree_program;
  // The CPU's interaction values of every path the tree program does not take: each unordered
  // pair once, summed per group of a tree's paths (core/explain/quadrature/quadrature_pairs.h).
  std::shared_ptr<const QuadraturePairProgram> pair_program;

  // Bias per output for boosting rounds [begin, end): base_margin + sum of tree expectations, as
  // the CPU reference computes it.
  std::vector<double> Bias(int iteration_begin, int iteration_end) const;
  // One line for logs and `grove inspect`.
  std::string Describe() const;
};

using QuadratureModelPtr = std::shared_ptr<const QuadratureModel>;

// Builds the quadrature preprocessing of `forest` from its path layout (which must have been built
// from the same forest), with the rules of `attribution`. Deterministic.
absl::StatusOr<QuadratureModelPtr> BuildQuadratureModel(
    ForestPtr forest, PathLayoutPtr layout, Attribution attribution = Attribution::kShapley);

// ---------------------------------------------------------------------------------------------
// CPU strategy. Multi-threaded on `pool` (may be nullptr) over rows; for SHAP values of fewer
// blocks than threads, over each block's tree groups too (QuadratureTreeShapGroupTasks); and for
// interaction values over parts of a row: where the pair kernel explains every tree, over (row,
// unit of outputs) (QuadraturePairUnitsPerRow), each cut into segments of its trees when there
// are fewer such tasks than threads (QuadraturePairSegmentsPerTask); with the tree program, over
// ranges of each block's matrix rows and, with few rows, its tree groups
// (QuadratureTreeInteractionTasksFor). Double arithmetic; deterministic: each output entry is
// summed in a fixed order, whatever the other rows of the batch and the number of threads: SHAP
// values the tree program's trees in groups, then the remaining paths in model order;
// interactions the pair kernel's paths first (by the pair program's groups), then the tree
// program's trees in groups. `out` is rows.rows x ExplainWidth(forest,
// options.interactions). Thread-safe.
//
// Each work item in flight holds a workspace (per-path scratch and the double accumulators of its
// rows: a few KB for narrow models, up to tens of MB for wide ones), kept for the call's later
// items. With `kept` (owned by the caller, e.g. the CPU strategy) they are taken from it and
// given back to it when the call ends, so that later calls do not allocate them and fault their
// pages in again; without, each call makes its own. Other per-call buffers (few-row group sums, at
// most kQuadratureGroupSumBytes; pair segments' sums, at most 64 MB) are the call's own.
//
// `ran` (may be null): where the tree program explains every path's interaction values, set to the
// tasks the call cut each block into (QuadratureTreeInteractionTasksFor's plan, the ranges as
// QuadratureTreeMatrixRowRanges cut them; the default otherwise), for checks against the planner.
class QuadratureCpuWorkspaces;
struct QuadratureTreeInteractionTasks;
absl::Status ExplainQuadratureCpu(const QuadratureModel& model, RowsView rows,
                                  const ExplainOptions& options, MatrixView<float> out,
                                  ThreadPool* pool, QuadratureCpuWorkspaces* kept = nullptr,
                                  QuadratureTreeInteractionTasks* ran = nullptr);

// Workspaces of ExplainQuadratureCpu kept between calls, at most `retain_bytes` of them (a
// workspace given back beyond that is freed; 0 keeps none): the memory a loaded model holds
// between requests is bounded, and calls that fit it run without allocating their workspaces.
// While calls run they hold what they need (up to a workspace per thread each), whatever the
// bound. Take and Give are ExplainQuadratureCpu's (the workspace type is its own); callers only
// own the pool and may read what it keeps. Thread-safe: calls on several threads take distinct
// workspaces.
struct QuadratureCpuWorkspace;
class QuadratureCpuWorkspaces {
 public:
  static constexpr int64_t kDefaultRetainBytes = int64_t{64} << 20;
  explicit QuadratureCpuWorkspaces(int64_t retain_bytes = kDefaultRetainBytes);
  ~QuadratureCpuWorkspaces();
  QuadratureCpuWorkspaces(const QuadratureCpuWorkspaces&) = delete;
  QuadratureCpuWorkspaces& operator=(const QuadratureCpuWorkspaces&) = delete;

  // A kept workspace (its buffers as the last call left them), or a new empty one.
  std::unique_ptr<QuadratureCpuWorkspace> Take();
  // Keeps `w` while the kept bytes stay within the bound; frees it otherwise.
  void Give(std::unique_ptr<QuadratureCpuWorkspace> w);
  // Bytes of the workspaces kept now, and how many.
  int64_t RetainedBytes() const;
  int RetainedCount() const;

 private:
  FreeList<QuadratureCpuWorkspace> kept_;
};

// Where the pair kernel explains every tree's interaction values (the tree program takes none):
// the units of outputs ExplainQuadratureCpu splits a row into (the classes of a multi-class
// model, 1 for a single output or vector leaves); 0 otherwise.
int QuadraturePairUnitsPerRow(const QuadratureModel& model);

// The segments ExplainQuadratureCpu cuts each (row, unit) task of `rows` rows into on `threads`
// threads, where QuadraturePairUnitsPerRow(model) > 0: 1 unless there are fewer tasks than
// threads (or the rows' per-pair sums would exceed 64 MB), then the fewest that minimise the
// rounds of segments per task (each segment charged 1% of a task for its merge and traffic).
int QuadraturePairSegmentsPerTask(const QuadratureModel& model, int64_t rows, int threads);

// Where the tree program explains every path's interaction values: the tasks ExplainQuadratureCpu
// cuts each block of kQuadratureTreeLanes rows into on `threads` threads. `ranges`: ranges of
// the block's matrix rows (QuadratureTreeMatrixRowRanges); each takes its rows' conditioned
// passes (two recursions per step), whose scattered adds stay in cache when its accumulators do.
// `group_tasks`: 1, or the program's interaction groups (QuadratureTreeInteractionGroups), each
// (group, range) a task of its own whose entries are added in group order afterwards (the same
// bits as one thread). The diagonals need the trees' SHAP pass: with one interaction group
// (QuadratureTreeDiagonalFromShap) and few rows, `diagonal_task`: a task per block beside its
// ranges, which then add off-diagonal entries only; otherwise in every task for its block and
// trees (many rows: one range per block's cache share; several groups: each (group, range) task
// its group's pass, whose small accumulators stay in cache). At least as many ranges as keep a
// range's accumulators within kQuadratureShareBytes; with fewer than twice as many blocks as
// threads, the fewest tasks whose rounds times a task's steps come within 5% of the least (group
// tasks only where their sums fit kQuadratureGroupSumBytes). Deterministic (counts, not
// timings).
inline constexpr int64_t kQuadratureShareBytes = int64_t{4} << 20;
inline constexpr int64_t kQuadratureGroupSumBytes = int64_t{64} << 20;
struct QuadratureTreeInteractionTasks {
  int group_tasks = 1;
  int ranges = 1;
  bool diagonal_task = false;
};
QuadratureTreeInteractionTasks QuadratureTreeInteractionTasksFor(
    const QuadratureTreeProgram& program, int64_t rows, int threads);

// SHAP values by the tree program with fewer blocks of kQuadratureTreeLanes rows than `threads`:
// the tree groups (QuadratureTreeShapGroups) ExplainQuadratureCpu runs as tasks of their own per
// block, their sums added in group order (the same bits as one thread); 1 otherwise, or where the
// groups' sums would exceed kQuadratureGroupSumBytes.
int QuadratureTreeShapGroupTasks(const QuadratureTreeProgram& program, int64_t rows, int threads);

// ---------------------------------------------------------------------------------------------
// GPU strategy.

enum class QuadraturePrecision : uint8_t { kFloat, kDouble };
const char* QuadraturePrecisionName(QuadraturePrecision precision);

// The model's quadrature layout resident on one GPU (uploaded once, at load). Immutable after
// Upload; Explain may run concurrently on different streams with different workspaces.
class QuadratureGpuModel {
 public:
  // UNAVAILABLE without CUDA or without a device; FAILED_PRECONDITION when the model has a path of
  // more than 32 unique features (the CPU strategy explains those).
  static absl::StatusOr<std::unique_ptr<QuadratureGpuModel>> Upload(QuadratureModelPtr model,
                                                                    int device);
  ~QuadratureGpuModel();
  QuadratureGpuModel(const QuadratureGpuModel&) = delete;
  QuadratureGpuModel& operator=(const QuadratureGpuModel&) = delete;

  const QuadratureModel& model() const { return *model_; }
  int device() const { return device_; }
  int64_t DeviceBytes() const { return device_bytes_; }

  // Workspace bytes for one call of `rows` rows.
  int64_t WorkspaceBytes(int64_t rows, bool interactions) const;

  // Device rows in (d_rows: rows x num_features, row stride `row_stride` floats), device results
  // out (d_out: rows x ExplainWidth, row stride `out_stride`), all on `stream`; d_workspace of at
  // least WorkspaceBytes(rows, interactions), caller-owned, not used concurrently by another call.
  // Asynchronous: returns after enqueueing. Deterministic: contributions are accumulated as 64-bit
  // fixed-point integers (order-independent sums), so results are bit-identical run to run.
  absl::Status Explain(const float* d_rows, int64_t rows, int64_t row_stride,
                       const ExplainOptions& options, QuadraturePrecision precision, float* d_out,
                       int64_t out_stride, void* d_workspace, int64_t workspace_bytes,
                       CUstream_st* stream) const;

 private:
  QuadratureGpuModel() = default;
  struct Device;  // device pointers (quadrature_gpu.cu)
  QuadratureModelPtr model_;
  int device_ = 0;
  int64_t device_bytes_ = 0;
  std::unique_ptr<Device> d_;
};

// Host rows in, host results out on one GPU: owns a stream, a device workspace and pinned staging
// buffers (grown on demand, reused; no allocation in the steady state), splits large requests into
// row batches that fit the workspace budget. Thread-safe (calls are serialised).
class QuadratureGpuExplainer {
 public:
  static absl::StatusOr<std::unique_ptr<QuadratureGpuExplainer>> Create(
      QuadratureModelPtr model, int device, QuadraturePrecision precision,
      int64_t workspace_budget_bytes = int64_t{2} << 30);
  ~QuadratureGpuExplainer();
  absl::Status Explain(RowsView rows, const ExplainOptions& options, MatrixView<float> out) const;
  const QuadratureGpuModel& gpu_model() const { return *gpu_; }
  QuadraturePrecision precision() const {
    std::lock_guard<std::mutex> lock(mu_);
    return precision_;
  }
  void set_precision(QuadraturePrecision precision) {
    std::lock_guard<std::mutex> lock(mu_);
    precision_ = precision;
  }

 private:
  QuadratureGpuExplainer() = default;
  struct Buffers;
  std::unique_ptr<QuadratureGpuModel> gpu_;
  QuadraturePrecision precision_ = QuadraturePrecision::kDouble;  // guarded by mu_
  int64_t workspace_budget_ = 0;
  mutable std::mutex mu_;
  std::unique_ptr<Buffers> buffers_;  // guarded by mu_
};

// ---------------------------------------------------------------------------------------------
// Strategies for the explanation engine's selector.

// A strategy's cost model, fitted on the running machine at load: seconds(rows) = fixed + rows *
// per_row, separately for SHAP values and interactions.
struct StrategyCost {
  double fixed_seconds = 0;
  double per_row_seconds = 0;
  double Seconds(int64_t rows) const { return fixed_seconds + per_row_seconds * rows; }
};

class QuadratureStrategy {
 public:
  virtual ~QuadratureStrategy() = default;
  virtual std::string name() const = 0;  // "quadrature_cpu" or "quadrature_gpu"
  virtual bool Supports(const ExplainOptions& options) const = 0;
  virtual double EstimateSeconds(int64_t rows, const ExplainOptions& options) const = 0;
  virtual absl::Status Run(RowsView rows, const ExplainOptions& options, MatrixView<float> out,
                           RunInfo* info) const = 0;
  virtual int64_t DeviceBytes() const = 0;
  virtual std::string Describe() const = 0;
  // Path arithmetic in use: "double" (CPU, or GPU by choice) or "float".
  virtual std::string Precision() const { return "double"; }
};

struct QuadratureStrategyOptions {
  bool calibrate = true;  // time small batches at creation (else: a static cost model)
  // GPU path arithmetic. With choose_precision (the default), the strategy measures at load, on
  // the model's calibration rows, float against double, and keeps float only when its error is
  // at most float_error_limit x max(1, |margin|) (a tenth of the 1e-5 tolerance) for SHAP values
  // and interactions; otherwise `precision` (docs/quadrature.md, "Precision").
  bool choose_precision = true;
  double float_error_limit = 1e-6;
  QuadraturePrecision precision = QuadraturePrecision::kDouble;
  int device = 0;
};

absl::StatusOr<std::unique_ptr<QuadratureStrategy>> MakeQuadratureCpuStrategy(
    QuadratureModelPtr model, ThreadPool* pool, const QuadratureStrategyOptions& options = {});
// UNAVAILABLE without CUDA / device; FAILED_PRECONDITION for paths longer than 32 features.
absl::StatusOr<std::unique_ptr<QuadratureStrategy>> MakeQuadratureGpuStrategy(
    QuadratureModelPtr model, const QuadratureStrategyOptions& options = {});

// Factories for the explanation engine's strategy table (core/explain/explain_engine.h):
// "quadrature_gpu" (nullptr when GPUs are disabled or absent, FAILED_PRECONDITION for paths
// longer than 32 features) and "quadrature_cpu". Both share one QuadratureModel per path layout.
struct StrategyContext;
class ExplainStrategy;
absl::StatusOr<std::unique_ptr<ExplainStrategy>> MakeQuadratureGpuExplainStrategy(
    const StrategyContext& context);
absl::StatusOr<std::unique_ptr<ExplainStrategy>> MakeQuadratureCpuExplainStrategy(
    const StrategyContext& context);

// Deterministic calibration rows for `forest`: values drawn around the model's split thresholds
// (both sides), some NaN. Used to time strategies at load; never zeros.
std::vector<float> QuadratureCalibrationRows(const Forest& forest, int64_t rows, uint64_t seed);

}  // namespace grove
