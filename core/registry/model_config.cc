#include "core/registry/model_config.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/io/file.h"

namespace grove::registry {
namespace {

using nlohmann::json;

absl::Status Bad(absl::string_view source, absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", field, ": ", why));
}

// An integer in [min, max]; anything else (a float, a string, a value that does not fit int64)
// names the field and the bounds.
absl::StatusOr<int64_t> BoundedInt(const json& v, absl::string_view source, absl::string_view field,
                                   int64_t min, int64_t max) {
  const bool fits = (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(max)) ||
                    (v.is_number_integer() && !v.is_number_unsigned());
  if (!fits || v.get<int64_t>() < min || v.get<int64_t>() > max) {
    return Bad(source, field, absl::StrCat("must be an integer of at least ", min, " and at most ",
                                           max, " (got ", v.dump(), ")"));
  }
  return v.get<int64_t>();
}

absl::Status ParseBatching(const json& j, absl::string_view source, const std::string& field,
                           batching::BatcherOptions* out) {
  if (!j.is_object()) return Bad(source, field, "must be an object");
  for (const auto& [key, value] : j.items()) {
    const std::string name = absl::StrCat(field, ".", key);
    if (key == "max_delay_us") {
      absl::StatusOr<int64_t> us = BoundedInt(value, source, name, 0, kMaxDelayMicros);
      if (!us.ok()) return us.status();
      out->max_delay = absl::Microseconds(*us);
      continue;
    }
    int64_t max = 0;
    if (key == "max_batch_rows") {
      max = kMaxBatchRows;
    } else if (key == "max_queue_rows") {
      max = kMaxQueueRows;
    } else if (key == "max_queue_requests") {
      max = kMaxQueueRequests;
    } else if (key == "max_concurrent_batches") {
      max = kMaxConcurrentBatches;
    } else {
      return Bad(source, name, "unknown field");
    }
    absl::StatusOr<int64_t> n = BoundedInt(value, source, name, 1, max);
    if (!n.ok()) return n.status();
    if (key == "max_batch_rows") {
      out->max_batch_rows = *n;
    } else if (key == "max_queue_rows") {
      out->max_queue_rows = *n;
    } else if (key == "max_queue_requests") {
      out->max_queue_tasks = *n;
    } else {
      out->max_concurrent_batches = static_cast<int>(*n);
    }
  }
  return batching::ValidateBatcherOptions(*out);
}

}  // namespace

batching::BatcherOptions DefaultBatching(Operation op) {
  const absl::Duration none = absl::ZeroDuration();
  switch (op) {
    case Operation::kPredict:  // four at once, as many as a GPU has staging lanes
      return {4096, none, int64_t{1} << 20, 4096, 4};
    case Operation::kExplain:
    case Operation::kBanzhaf:  // the same kernels, one point per path
      return {1024, none, int64_t{1} << 18, 4096, 2};
    case Operation::kInteractions:
    case Operation::kBanzhafInteractions:
      return {64, none, int64_t{1} << 14, 1024, 1};
    case Operation::kInterventional:
    case Operation::kInterventionalBanzhaf:
      return {256, none, int64_t{1} << 16, 1024, 1};
    case Operation::kSaabas:  // about a prediction: one walk per tree, F + 1 values
      return {4096, none, int64_t{1} << 20, 4096, 2};
    case Operation::kInterventionalInteractions:
    case Operation::kInterventionalBanzhafInteractions:
    default:  // and an operation not tuned yet
      return {16, none, int64_t{1} << 12, 1024, 1};
  }
}

std::array<batching::BatcherOptions, kNumOperations> DefaultBatchingTable() {
  std::array<batching::BatcherOptions, kNumOperations> table;
  for (int i = 0; i < kNumOperations; ++i) table[i] = DefaultBatching(static_cast<Operation>(i));
  return table;
}

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view text, const ModelConfig& defaults,
                                             absl::string_view source) {
  // nlohmann keeps the last of two equal keys, other readers the first: a key given twice in one
  // object is refused, naming it by its path ("batching.predict.max_batch_rows"), so that the value
  // an operator reads is the one served.
  struct OpenObject {
    std::string path;  // "" for the top level, else "a.b."
    std::set<std::string> keys;
    std::string last_key;
  };
  std::vector<OpenObject> open;
  std::string duplicate;
  const json::parser_callback_t check_keys = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open.push_back(OpenObject{
          open.empty() ? "" : absl::StrCat(open.back().path, open.back().last_key, "."), {}, ""});
    } else if (event == json::parse_event_t::object_end && !open.empty()) {
      open.pop_back();
    } else if (event == json::parse_event_t::key && !open.empty()) {
      std::string key = parsed.get<std::string>();
      if (!open.back().keys.insert(key).second && duplicate.empty()) {
        duplicate = absl::StrCat(open.back().path, key);
      }
      open.back().last_key = std::move(key);
    }
    return true;
  };
  json j = json::parse(text.begin(), text.end(), check_keys, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON"));
  if (!duplicate.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": '", duplicate, "' is given more than once; give each key once"));
  }
  if (!j.is_object()) return Bad(source, "config", "must be a JSON object");
  ModelConfig c = defaults;
  for (const auto& [key, value] : j.items()) {
    if (key == "versions") {
      if (value.is_string() && value.get<std::string>() == "latest") {
        c.version_policy = VersionPolicy::kLatest;
      } else if (value.is_string() && value.get<std::string>() == "all") {
        c.version_policy = VersionPolicy::kAll;
      } else if (value.is_array() && !value.empty()) {
        c.version_policy = VersionPolicy::kSpecific;
        c.specific_versions.clear();
        for (const json& v : value) {
          absl::StatusOr<int64_t> n = BoundedInt(v, source, "versions[]", 1, kMaxVersion);
          if (!n.ok()) return n.status();
          c.specific_versions.push_back(*n);
        }
      } else {
        return Bad(source, key, "must be \"latest\", \"all\" or a non-empty list of versions");
      }
    } else if (key == "device") {
      absl::StatusOr<Device> device =
          value.is_string() ? ParseDevice(value.get<std::string>()) : absl::InvalidArgumentError("");
      if (!device.ok()) return Bad(source, key, "must be \"auto\", \"cpu\" or \"gpu\"");
      c.device = *device;
    } else if (key == "predict_strategy" || key == "explain_strategy") {
      if (!value.is_string() || value.get<std::string>().empty()) {
        return Bad(source, key, "must be a strategy name");
      }
      (key == "predict_strategy" ? c.predict_strategy : c.explain_strategy) =
          value.get<std::string>();
    } else if (key == "default_outputs") {
      if (!value.is_array() || value.empty()) {
        return Bad(source, key, "must be a non-empty list of \"margin\", \"prediction\", \"leaf\"");
      }
      c.default_outputs.clear();
      for (const json& v : value) {
        absl::StatusOr<OutputKind> kind =
            v.is_string() ? ParseOutputKind(v.get<std::string>()) : absl::InvalidArgumentError("");
        if (!kind.ok()) {
          return Bad(source, key, "entries must be \"margin\", \"prediction\" or \"leaf\"");
        }
        c.default_outputs.push_back(*kind);
      }
    } else if (key == "max_request_rows") {
      absl::StatusOr<int64_t> n = BoundedInt(value, source, key, 1, kMaxRequestRows);
      if (!n.ok()) return n.status();
      c.max_request_rows = *n;
    } else if (key == "max_interaction_values_per_row") {
      absl::StatusOr<int64_t> n = BoundedInt(value, source, key, 1, kMaxInteractionValuesPerRow);
      if (!n.ok()) return n.status();
      c.max_interaction_values_per_row = *n;
    } else if (key == "batching") {
      if (!value.is_object()) return Bad(source, key, "must be an object");
      for (const auto& [op, limits] : value.items()) {
        int index = -1;
        for (int i = 0; i < kNumOperations; ++i) {
          if (op == OperationName(static_cast<Operation>(i))) index = i;
        }
        if (index < 0) {
          std::string names;
          for (int i = 0; i < kNumOperations; ++i) {
            absl::StrAppend(&names, i > 0 ? ", " : "", OperationName(static_cast<Operation>(i)));
          }
          return Bad(source, absl::StrCat("batching.", op),
                     absl::StrCat("unknown operation (", names, ")"));
        }
        absl::Status s = ParseBatching(limits, source, absl::StrCat("batching.", op),
                                       &c.batching[index]);
        if (!s.ok()) return s;
      }
    } else {
      return Bad(source, key, "unknown field");
    }
  }
  return c;
}

absl::StatusOr<ModelConfig> LoadModelConfigFile(const std::string& path,
                                                const ModelConfig& defaults) {
  absl::StatusOr<std::string> text = ReadRegularFile(path, kMaxConfigFileBytes);
  if (!text.ok()) return text.status();
  return ParseModelConfig(*text, defaults, path);
}

}  // namespace grove::registry
