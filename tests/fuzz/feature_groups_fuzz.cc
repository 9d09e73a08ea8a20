// libFuzzer target for declared feature groups (core/model/feature_groups.h: groups.json, a
// request's groups): any text parses into groups or is INVALID_ARGUMENT naming the source; groups
// that resolve against a model partition its features (every feature in exactly one group, the
// groups numbered by their smallest member, distinct names); never a crash, a sanitizer report
// or an exception.
//
// Seeds: tests/fuzz/seeds/feature_groups/ (tests/fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "core/model/feature_groups.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<std::vector<grove::GroupSpec>> spec =
      grove::ParseFeatureGroupsJson(text, "<fuzz>");
  if (!spec.ok()) {
    if (spec.status().code() != absl::StatusCode::kInvalidArgument ||
        spec.status().message().find("<fuzz>") == absl::string_view::npos) {
      std::abort();
    }
    return 0;
  }
  // A model of 8 features, some named (the others are f<i>).
  const std::vector<std::string> names = {"street", "zip", "city", "f3", "red", "green", "blue"};
  for (int num_features : {1, 8}) {
    absl::StatusOr<grove::FeatureGroupsPtr> g =
        grove::ResolveFeatureGroups(*spec, num_features, names);
    if (!g.ok()) {
      if (g.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
      continue;
    }
    const grove::FeatureGroups& groups = **g;
    if (static_cast<int>(groups.group_of.size()) != num_features) std::abort();
    if (groups.members.size() != groups.names.size()) std::abort();
    std::set<std::string> distinct(groups.names.begin(), groups.names.end());
    if (distinct.size() != groups.names.size()) std::abort();
    int seen = 0;
    int previous_first = -1;
    for (int k = 0; k < groups.num_groups(); ++k) {
      const std::vector<int32_t>& m = groups.members[k];
      if (m.empty() || m.front() <= previous_first) std::abort();
      previous_first = m.front();
      for (size_t i = 0; i < m.size(); ++i) {
        if (m[i] < 0 || m[i] >= num_features || groups.group_of[m[i]] != k) std::abort();
        if (i > 0 && m[i] <= m[i - 1]) std::abort();
        ++seen;
      }
    }
    if (seen != num_features) std::abort();
  }
  return 0;
}
