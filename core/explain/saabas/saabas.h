// Saabas attributions ("interpreting random forests"; XGBoost's pred_contribs with
// approx_contribs): for each row and output, each split on the row's decision path credits its
// feature with (expected value of the child the row took) minus (expected value of the node).
// A node's expected value is the cover-weighted mean of the leaf values below it (XGBoost's
// FillNodeMeanValues), with the fractions of the reference TreeSHAP (explain_cpu.cc): child cover
// over node cover, 0 under a node of cover 0. Laid out as SHAP values (output blocks of F + 1
// columns, bias last), margin space; the bias is the SHAP values' bias, base_margin[k] plus the
// sum over the trees in range of weight * the root's expected value. The values along a path
// telescope, so a row's values and bias sum to its margin. Path-dependent only: no background,
// no interaction values.
//
// SaabasModel holds the per-node steps of expected value, built once per model; SaabasEngine runs
// them over a call's rows on the CPU pool.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/rows.h"
#include "core/common/run_info.h"
#include "core/explain/explain.h"
#include "core/model/forest.h"

namespace grove {

class ThreadPool;

// Per tree, per node: the tree weight times (expected value of the node) minus (expected value
// of its parent), leaf_width values per node (0 at the root), and the tree weight times the
// root's expected value. One double per node and leaf value: the compact array the walk reads.
struct SaabasModel {
  std::vector<double> steps;          // tree t's nodes at step_begin[t], leaf_width values each
  std::vector<int64_t> step_begin;    // per tree
  std::vector<double> root_expected;  // per tree, leaf_width values at root_begin[t]
  std::vector<int64_t> root_begin;    // per tree
  int64_t Bytes() const;
};

// FAILED_PRECONDITION for a model that cannot be explained (CheckExplainable, as TreeSHAP) and
// for one saved without node covers (a tree with splits whose root has cover 0).
absl::StatusOr<SaabasModel> BuildSaabasModel(const Forest& forest);

class SaabasEngine {
 public:
  // `pool` is not owned and must outlive the engine (null: the calling thread only).
  static absl::StatusOr<std::unique_ptr<SaabasEngine>> Create(ForestPtr forest, ThreadPool* pool);

  // Host rows in, host results out: rows.rows x ExplainWidth(forest, false, options.groups).
  // options.groups: each split credits its feature's group; options.attribution is not read.
  // CheckExplainCall's errors; INVALID_ARGUMENT for interactions. Rows are split over the pool; no
  // allocation per call beyond each pool thread's first. Deterministic. Thread-safe.
  absl::Status Explain(RowsView rows, const ExplainOptions& options, MatrixView<float> out,
                       RunInfo* info) const;
  std::string Describe() const;

 private:
  SaabasEngine(ForestPtr forest, SaabasModel model, ThreadPool* pool);
  ForestPtr forest_;
  SaabasModel model_;
  ThreadPool* pool_;
};

}  // namespace grove
