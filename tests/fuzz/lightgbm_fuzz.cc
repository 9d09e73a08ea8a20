// libFuzzer target for the LightGBM text loader: any input must give a validated forest or
// INVALID_ARGUMENT, never a crash, a sanitizer report or an unbounded allocation. A forest that
// loads is walked with a few rows so that every index BuildForest accepted is exercised.
//
// Seed corpus: the model.txt files of /work/shared/testdata/lgb_* (see tests/fuzz/CMakeLists.txt).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/decision.h"
#include "core/model/forest.h"
#include "core/model/loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<grove::ForestPtr> loaded = grove::LoadLightgbmText(text, "<fuzz>");
  if (!loaded.ok()) {
    if (loaded.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  const grove::Forest& f = **loaded;
  const float fills[] = {0.0f, -0.5f, 1.0f, 1e30f, std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> row(static_cast<size_t>(f.num_features));
  double sink = 0;
  for (float fill : fills) {
    row.assign(row.size(), fill);
    for (size_t t = 0; t < f.trees.size(); ++t) {
      const grove::Node* nodes = f.TreeNodes(static_cast<int>(t));
      int32_t i = 0;
      for (int steps = 0; !nodes[i].is_leaf(); ++steps) {
        if (steps > grove::kMaxTreeDepth) std::abort();  // BuildForest bounds the depth
        const grove::Node& n = nodes[i];
        i = grove::GoesLeft(n.flags, n.threshold, n.payload, n.aux, f.category_bits.data(),
                            row[static_cast<size_t>(n.feature)])
                ? n.left
                : n.right;
      }
      const grove::Node& leaf = nodes[i];
      sink += f.leaf_values[leaf.payload];
      if (leaf.aux != 0) {
        const grove::LinearLeaf& ll = f.linear_leaves[leaf.aux - 1];
        for (uint32_t k = ll.begin; k < ll.begin + ll.count; ++k) {
          sink += f.linear_coeffs[k] * row[static_cast<size_t>(f.linear_features[k])];
        }
      }
    }
  }
  if (std::isnan(sink) && sink == 0) std::abort();  // keeps `sink` alive; never true
  return 0;
}
