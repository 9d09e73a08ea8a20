// Parquet's value and level encodings over untrusted page bytes: the RLE / bit-packed hybrid
// (definition levels, dictionary indices, RLE booleans) and PLAIN values of the physical types
// Grove reads. Each decodes exactly the count asked for and fails, saying what is short or out of
// range, instead of reading past the bytes it is given.
//
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace grove {

// Decodes `n` values of `bit_width` (0 to 32) bits from the hybrid runs in `data` into `out`
// (cleared, then grown as the runs decode: a count the runs do not hold allocates nothing). Runs
// may hold more values than asked for (a bit-packed group's padding); values
// after the n-th are ignored. `*used` (optional) receives the bytes consumed.
absl::Status DecodeRleHybrid(absl::string_view data, int bit_width, int64_t n,
                             std::vector<uint32_t>* out, size_t* used = nullptr);

// The hybrid runs preceded by their 4-byte little-endian length (data page v1 levels; RLE
// booleans): `*used` receives the length and the runs' bytes.
absl::Status DecodeLengthPrefixedRle(absl::string_view data, int bit_width, int64_t n,
                                     std::vector<uint32_t>* out, size_t* used);

// How a column's PLAIN values become numbers: the physical type and, for integers, the sign.
struct ParquetNumberType {
  int32_t physical = 0;  // ParquetType: BOOLEAN, INT32, INT64, FLOAT or DOUBLE
  bool is_unsigned = false;
};

// `n` PLAIN values of a number type as doubles (booleans 1 / 0, unsigned integers by their
// unsigned value, int64 rounded to nearest as a cast rounds), appended to `out`; `*used` receives
// the bytes consumed.
absl::Status DecodePlainNumbers(absl::string_view data, ParquetNumberType type, int64_t n,
                                std::vector<double>* out, size_t* used);

// `n` PLAIN BYTE_ARRAY values (4-byte length, bytes), appended to `out` as views into `data`.
absl::Status DecodePlainByteArrays(absl::string_view data, int64_t n,
                                   std::vector<absl::string_view>* out, size_t* used);

}  // namespace grove
