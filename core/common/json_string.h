// JSON string literals: the one escaper of the code base (structured logs, the CLI's --json and
// bench reports). Thread-safe: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace grove {

// Appends `s` to `out` as a JSON string literal: quoted, with '"', '\\', '\n', '\t' and '\r'
// escaped by name and the other control characters as \u00XX; other bytes (UTF-8 included) as
// they are.
void AppendJsonString(std::string& out, std::string_view s);
// The same as a new string.
std::string JsonString(std::string_view s);

}  // namespace grove
