#include "core/model/feature_groups.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/io/file.h"
#include "core/model/input_schema.h"

namespace grove {
namespace {

std::string Describe(const FeatureRef& ref) {
  return ref.index >= 0 ? absl::StrCat("feature ", ref.index)
                        : absl::StrCat("feature \"", ref.name, "\"");
}

// Thrown by the parse callback to stop at once (caught in ParseFeatureGroupsJson).
struct TooDeep : std::runtime_error {
  TooDeep() : std::runtime_error("too deep") {}
};
struct DuplicateName : std::runtime_error {
  explicit DuplicateName(const std::string& name) : std::runtime_error(name) {}
};

}  // namespace

std::string FeatureGroups::Key() const {
  std::string key;
  for (int g = 0; g < num_groups(); ++g) {
    absl::StrAppend(&key, names[g].size(), ":", names[g], "=", absl::StrJoin(members[g], ","), ";");
  }
  return key;
}

absl::StatusOr<FeatureGroupsPtr> ResolveFeatureGroups(
    const std::vector<GroupSpec>& spec, int num_features,
    const std::vector<std::string>& feature_names) {
  if (static_cast<int64_t>(spec.size()) > num_features) {
    return absl::InvalidArgumentError(absl::StrCat(spec.size(), " groups were declared; the model has ",
                                                   num_features, " features"));
  }
  const std::vector<std::string> name_of = FeatureNamesOrDefault(feature_names, num_features);
  absl::flat_hash_map<std::string, int32_t> index_of_name;
  for (int f = num_features - 1; f >= 0; --f) index_of_name[name_of[f]] = f;
  std::vector<int32_t> declared(num_features, -1);  // per feature: its declared group
  std::set<std::string> names;
  for (size_t g = 0; g < spec.size(); ++g) {
    const GroupSpec& group = spec[g];
    if (group.name.empty() || group.name.size() > kMaxGroupNameBytes) {
      return absl::InvalidArgumentError(absl::StrCat("group ", g, ": a group name has 1 to ",
                                                     kMaxGroupNameBytes, " bytes (got ",
                                                     group.name.size(), ")"));
    }
    if (!names.insert(group.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("group \"", group.name, "\" is declared twice"));
    }
    if (group.members.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("group \"", group.name, "\" has no feature"));
    }
    if (static_cast<int64_t>(group.members.size()) > num_features) {
      return absl::InvalidArgumentError(absl::StrCat("group \"", group.name, "\" has ",
                                                     group.members.size(), " members; the model has ",
                                                     num_features, " features"));
    }
    for (const FeatureRef& ref : group.members) {
      int32_t f = -1;
      if (ref.index >= 0) {
        if (ref.index < num_features) f = static_cast<int32_t>(ref.index);
      } else if (auto it = index_of_name.find(ref.name); it != index_of_name.end()) {
        f = it->second;
      }
      if (f < 0) {
        return absl::InvalidArgumentError(absl::StrCat("group \"", group.name, "\": ",
                                                       Describe(ref),
                                                       " is not a feature of the model (it has ",
                                                       num_features, " features)"));
      }
      if (declared[f] >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "feature ", f, " (\"", name_of[f], "\") is in group \"",
            spec[declared[f]].name, "\"", declared[f] == static_cast<int32_t>(g) ? " twice" : "",
            declared[f] == static_cast<int32_t>(g) ? "" : absl::StrCat(" and in group \"", group.name, "\"")));
      }
      declared[f] = static_cast<int32_t>(g);
    }
  }
  // A singleton's name must not be a declared group's name.
  for (int f = 0; f < num_features; ++f) {
    if (declared[f] >= 0) continue;
    const std::string name = name_of[f];
    if (names.count(name) > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "group \"", name, "\" has the name of feature ", f,
          ", which is in no group (its own group would have the same name)"));
    }
  }
  // Number the groups by their smallest feature.
  auto groups = std::make_shared<FeatureGroups>();
  groups->group_of.assign(num_features, -1);
  std::vector<int32_t> number_of_declared(spec.size(), -1);
  for (int f = 0; f < num_features; ++f) {
    int32_t g = -1;
    if (declared[f] < 0) {
      g = groups->num_groups();
      groups->names.push_back(name_of[f]);
      groups->members.emplace_back();
    } else if (number_of_declared[declared[f]] < 0) {
      g = groups->num_groups();
      number_of_declared[declared[f]] = g;
      groups->names.push_back(spec[declared[f]].name);
      groups->members.emplace_back();
    } else {
      g = number_of_declared[declared[f]];
    }
    groups->group_of[f] = g;
    groups->members[g].push_back(f);
  }
  return FeatureGroupsPtr(std::move(groups));
}

absl::StatusOr<std::vector<GroupSpec>> ParseFeatureGroupsJson(absl::string_view text,
                                                              absl::string_view source) {
  using nlohmann::json;
  if (static_cast<int64_t>(text.size()) > kMaxGroupsJsonBytes) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", text.size(),
                                                   " bytes; groups take at most ",
                                                   kMaxGroupsJsonBytes));
  }
  // Depth 0 is the object, 1 a group's array, 2 its members: nothing deeper is valid, so the
  // parse stops there instead of building a deep tree. Names are checked for repeats here
  // since the parsed object keeps only one value per name.
  std::set<std::string> keys;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > 2) throw TooDeep();
    if (event == json::parse_event_t::key && depth == 1) {
      const std::string key = parsed.get<std::string>();
      if (!keys.insert(key).second) throw DuplicateName(key);
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), callback);
  } catch (const TooDeep&) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": groups are an object of arrays of feature names or indices; nested deeper"));
  } catch (const DuplicateName& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": group \"", e.what(), "\" is declared twice"));
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not JSON: ", e.what()));
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": groups are a JSON object of group names to arrays of feature names or indices"));
  }
  std::vector<GroupSpec> spec;
  for (const auto& [name, members] : j.items()) {
    if (!members.is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": group \"", name, "\": an array of feature names or indices was expected"));
    }
    GroupSpec group;
    group.name = name;
    for (const json& m : members) {
      FeatureRef ref;
      if (m.is_string()) {
        ref.name = m.get<std::string>();
      } else if (m.is_number_unsigned() ||
                 (m.is_number_integer() && m.get<int64_t>() >= 0)) {
        ref.index = m.get<uint64_t>() > static_cast<uint64_t>(INT32_MAX)
                        ? INT32_MAX
                        : static_cast<int64_t>(m.get<uint64_t>());
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ": group \"", name, "\": ", m.dump(),
            " is neither a feature name nor a feature index"));
      }
      group.members.push_back(std::move(ref));
    }
    spec.push_back(std::move(group));
  }
  return spec;
}

absl::StatusOr<FeatureGroupsPtr> LoadFeatureGroupsFile(
    const std::string& path, int num_features, const std::vector<std::string>& feature_names) {
  absl::StatusOr<std::string> text = ReadRegularFile(path, kMaxGroupsJsonBytes);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<GroupSpec>> spec = ParseFeatureGroupsJson(*text, path);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<FeatureGroupsPtr> groups = ResolveFeatureGroups(*spec, num_features, feature_names);
  if (!groups.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", groups.status().message()));
  }
  return groups;
}

}  // namespace grove
