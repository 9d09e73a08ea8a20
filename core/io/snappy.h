// Snappy's raw block format (not the framing format), decompressed from untrusted bytes: written
// from the public format description (google/snappy's format_description.txt): a varint of the
// uncompressed length, then literals and back-references (copies) of 1, 2 or 4 offset bytes.
//
// Thread-safe (no shared state).
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace grove {

// Decompresses `in` into `out` (replaced), which must come out exactly `expected_size` bytes (the
// caller's declared size, bounded by the caller): the block's own length must say the same.
// INVALID_ARGUMENT saying what is malformed: a truncated element, a copy reaching before the
// start, output past the length, or a length that differs from `expected_size`.
absl::Status SnappyDecompress(absl::string_view in, size_t expected_size, std::string* out);

}  // namespace grove
