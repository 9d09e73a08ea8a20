#include "core/servable/result_columns.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace grove {

int64_t AutoChunkRows(int64_t in_cols, int64_t out_cols) {
  constexpr int64_t kValuesPerBuffer = int64_t{1} << 23;
  const int64_t widest = std::max<int64_t>({1, in_cols, out_cols});
  return std::clamp<int64_t>(kValuesPerBuffer / widest, 1, int64_t{1} << 18);
}

std::vector<NamedCategories> RecordedCategories(const Forest& forest) {
  std::vector<NamedCategories> out;
  if (forest.categories.empty()) return out;
  const std::vector<std::string> names =
      FeatureNamesOrDefault(forest.feature_names, forest.num_features);
  for (size_t i = 0; i < forest.categories.size(); ++i) {
    if (forest.categories[i].empty()) continue;
    out.push_back({static_cast<int>(i), names[i], &forest.categories[i]});
  }
  return out;
}

std::vector<std::string> ResultColumnNames(const ResultColumns& c) {
  std::vector<std::string> names;
  if (!c.explain) {
    const char* base = c.kind == OutputKind::kMargin ? "margin"
                       : c.kind == OutputKind::kLeaf ? "leaf"
                                                     : "prediction";
    if (c.width == 1 && c.kind != OutputKind::kLeaf) return {base};
    for (int64_t j = 0; j < c.width; ++j) names.push_back(absl::StrCat(base, "_", j));
    return names;
  }
  std::vector<std::string> block = c.groups.empty() ? c.feature_names : c.groups;
  if (c.top_k > 0) {
    const int k = std::min<int>(c.top_k, static_cast<int>(block.size()));
    block.clear();
    for (int i = 1; i <= k; ++i) {
      block.push_back(absl::StrCat("top", i, "_feature"));
      block.push_back(absl::StrCat("top", i, "_value"));
    }
  } else {
    block.push_back("bias");
  }
  for (int k = 0; k < c.num_outputs; ++k) {
    const std::string prefix = c.num_outputs > 1 ? absl::StrCat("out", k, ".") : "";
    for (const std::string& a : block) {
      if (!c.interactions) {
        names.push_back(prefix + a);
        continue;
      }
      for (const std::string& b : block) names.push_back(absl::StrCat(prefix, a, "*", b));
    }
  }
  for (int k = 0; c.residuals && k < c.num_outputs; ++k) {
    names.push_back(c.num_outputs > 1 ? absl::StrCat("out", k, ".residual") : "residual");
  }
  return names;
}

}  // namespace grove
