// Model statistics: what `grove inspect` prints and groveml's Model.inspect returns, as (key,
// value) pairs in display order.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/model/forest.h"

namespace grove {

// Model statistics for `grove inspect`: (key, value) pairs in display order. In JSON, numbers are
// JSON numbers, yes/no answers JSON booleans, everything else a string.
enum class StatKind { kText, kNumber, kBool, kList };
struct Stat {
  Stat(std::string k, std::string v, StatKind kd, std::vector<std::string> l = {})
      : key(std::move(k)), value(std::move(v)), kind(kd), list(std::move(l)) {}
  std::string key;    // snake_case, used as the JSON key
  std::string value;  // display text ("yes" / "no" for kBool; unused for kList)
  StatKind kind = StatKind::kText;
  std::vector<std::string> list;  // kList: a JSON array of strings, ", "-joined as text
};
// The feature_names and feature_types lists (empty lists when the model stores none).
void AppendFeatureStats(const std::vector<std::string>& names,
                        const std::vector<std::string>& types, std::vector<Stat>* stats);
std::vector<Stat> ForestStats(const Forest& forest);
}  // namespace grove
