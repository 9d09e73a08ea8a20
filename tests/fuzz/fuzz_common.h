// Shared by the loader fuzz targets: checks the status contract of a load and runs every engine
// the CPU has over a forest that loaded, so that each index and value BuildForest accepted is
// exercised by the real consumers (traversal, prediction, TreeSHAP).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "core/explain/explain.h"
#include "core/model/forest.h"
#include "core/predict/predict.h"

namespace grove::fuzz {

// Aborts (a finding) unless `loaded` is a forest or an error of one of the allowed codes.
inline const Forest* CheckLoad(const absl::StatusOr<ForestPtr>& loaded,
                               std::initializer_list<absl::StatusCode> allowed) {
  if (loaded.ok()) {
    if (*loaded == nullptr) std::abort();
    return loaded->get();
  }
  for (absl::StatusCode code : allowed) {
    if (loaded.status().code() == code) return nullptr;
  }
  std::abort();
}

// Predicts every output kind and, for small forests, explains (SHAP values and interactions) a
// few rows of special values.
inline void Exercise(const Forest& f) {
  if (f.num_features <= 0 || f.num_features > (1 << 16)) return;  // rows would be huge
  const float fills[] = {0.0f, -0.5f, 1.0f, 3.0f, 1e30f, -1e-36f,
                         std::numeric_limits<float>::quiet_NaN()};
  constexpr int64_t kRows = sizeof(fills) / sizeof(fills[0]);
  std::vector<float> rows(static_cast<size_t>(kRows * f.num_features));
  for (int64_t r = 0; r < kRows; ++r) {
    for (int c = 0; c < f.num_features; ++c) {
      rows[static_cast<size_t>(r * f.num_features + c)] = c % 2 ? fills[r] : fills[(r + 1) % kRows];
    }
  }
  const RowsView view = MakeRowsView(rows.data(), kRows, f.num_features);
  double sink = 0;
  for (OutputKind kind : {OutputKind::kMargin, OutputKind::kPrediction, OutputKind::kLeaf}) {
    PredictOptions o;
    o.kind = kind;
    const int64_t width = PredictWidth(f, o);
    if (width <= 0 || width > (1 << 20)) continue;
    std::vector<float> out(static_cast<size_t>(kRows * width));
    if (PredictCpu(f, view, o, MakeMatrixView(out.data(), kRows, width), nullptr).ok()) {
      for (float v : out) sink += v;
    }
  }
  // TreeSHAP is O(leaves * depth^2) per row (interactions: * depth more): keep it bounded.
  if (f.max_depth <= 24 && f.nodes.size() <= 20000 && f.num_outputs <= 16 &&
      f.num_features <= 64 && CheckExplainable(f).ok()) {
    for (bool interactions : {false, true}) {
      ExplainOptions o;
      o.interactions = interactions;
      const int64_t width = ExplainWidth(f, interactions);
      std::vector<float> out(static_cast<size_t>(2 * width));
      if (!ExplainCpuReference(f, MakeRowsView(rows.data(), 2, f.num_features), o,
                               MakeMatrixView(out.data(), 2, width), nullptr)
               .ok()) {
        std::abort();  // a validated forest and well-formed rows must explain
      }
      for (float v : out) sink += v;
    }
  }
  if (sink == 12345.678) std::abort();  // keeps `sink` alive; never true in practice
}

}  // namespace grove::fuzz
