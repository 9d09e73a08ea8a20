// Feature groups: the players of a grouped explanation. A caller declares groups (a name and its
// member features, by name or by index); every feature in no group is a group of its own, named
// by the feature. The explanation engines then compute the Shapley (or Banzhaf) values of the game
// whose players are the groups: the value function is the model's (path-dependent or
// interventional), and a coalition of groups stands for the set of their member features. For a
// tree this is the same as relabelling every split's feature by its group, which is how the
// engines compute it (FeatureGroups::group_of). A group's value is not the sum of its members'
// values in general.
//
// Groups are declared per model (groups.json in the model repository, ParseFeatureGroupsJson) or
// per request (the protocols' fields, groveml's `groups=`), and resolved against the model by
// ResolveFeatureGroups, which checks them: what comes from a request or a file is untrusted.
//
// Output order: groups are numbered by their smallest member feature, so a grouping gives the same
// columns however it was declared (JSON objects and protobuf maps have no order), and a grouping of
// singletons is the model's feature order. Immutable once resolved; share it read-only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grove {

// Bounds on declared groups (untrusted input).
inline constexpr int kMaxGroupNameBytes = 256;
inline constexpr int64_t kMaxGroupsJsonBytes = int64_t{1} << 20;  // groups.json, a request's text

// A member of a declared group: a feature index, or a feature name.
struct FeatureRef {
  int64_t index = -1;  // >= 0: by index
  std::string name;    // index < 0: by name
};

// One declared group, as written by the caller (unchecked).
struct GroupSpec {
  std::string name;
  std::vector<FeatureRef> members;
};

// Resolved groups of one model.
struct FeatureGroups {
  std::vector<std::string> names;             // per group, in output order (see above)
  std::vector<std::vector<int32_t>> members;  // per group: its features, ascending
  std::vector<int32_t> group_of;              // per model feature: its group

  int num_groups() const { return static_cast<int>(names.size()); }
  // A canonical text of the grouping (names and members): equal groupings have equal keys.
  std::string Key() const;
};

// The players of an explanation, the columns of each output's block before its bias: the groups'
// count, or the model's features where `groups` is null.
inline int NumPlayers(int num_features, const FeatureGroups* groups) {
  return groups != nullptr ? groups->num_groups() : num_features;
}

using FeatureGroupsPtr = std::shared_ptr<const FeatureGroups>;

// Resolves `spec` for a model of `num_features` features named `feature_names` (may be empty;
// names are FeatureNameOf's, core/model/input_schema.h).
// INVALID_ARGUMENT naming the group and member when: there are more groups than features, a name
// is empty or longer than kMaxGroupNameBytes or declared twice, a group has no member, a member is
// not a feature of the model (an index out of range, an unknown name), a feature is in two groups
// (or twice in one), or a group's name is the name of a feature outside it (its singleton group
// would have the same name).
absl::StatusOr<FeatureGroupsPtr> ResolveFeatureGroups(const std::vector<GroupSpec>& spec,
                                                      int num_features,
                                                      const std::vector<std::string>& feature_names);

// Parses a JSON object of groups, {"address": ["street", "zip"], "onehot_color": [3, 4, 5]}:
// names to arrays of feature names (strings) or indices (non-negative integers). At most
// kMaxGroupsJsonBytes. INVALID_ARGUMENT saying where the text is wrong (prefixed by `source`, a
// file name or "groups").
absl::StatusOr<std::vector<GroupSpec>> ParseFeatureGroupsJson(absl::string_view text,
                                                              absl::string_view source);

// Reads, parses and resolves a groups file (groups.json, `grove explain --groups FILE`): a regular
// file of at most kMaxGroupsJsonBytes. Errors name the file.
absl::StatusOr<FeatureGroupsPtr> LoadFeatureGroupsFile(
    const std::string& path, int num_features, const std::vector<std::string>& feature_names);

}  // namespace grove
