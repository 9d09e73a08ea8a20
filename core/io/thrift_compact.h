// A reader of Thrift's compact protocol (the encoding of Parquet's footer and page headers), over
// bytes the caller holds and does not trust.
//
// Errors are sticky: the first malformed or truncated value sets error() and every later read
// returns zero values, so that a decoder reads a whole struct and checks ok() once. Every length
// and count is checked against the bytes left (an element takes at least one byte), and nesting
// is limited to kMaxThriftDepth, so that no input allocates more than it holds or recurses deeply.
//
// Thread safety: a reader is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace grove {

inline constexpr int kMaxThriftDepth = 32;

// The compact protocol's type codes (a field's type; a list's element type).
enum ThriftType : uint8_t {
  kThriftStop = 0,
  kThriftTrue = 1,   // a bool field holding true; in a list, any bool
  kThriftFalse = 2,  // a bool field holding false
  kThriftByte = 3,
  kThriftI16 = 4,
  kThriftI32 = 5,
  kThriftI64 = 6,
  kThriftDouble = 7,
  kThriftBinary = 8,
  kThriftList = 9,
  kThriftSet = 10,
  kThriftMap = 11,
  kThriftStruct = 12,
};

class ThriftCompactReader {
 public:
  explicit ThriftCompactReader(absl::string_view bytes) : data_(bytes) {}

  // The next field of the struct being read: its id and type; false at the struct's stop byte (or
  // after an error). `last_id` is the struct's previous field id (0 before the first), updated.
  bool NextField(int16_t* last_id, int16_t* id, uint8_t* type);

  // A field's value of `type` (as NextField gave it). Integer reads accept any integer type and
  // fail when the value does not fit; a bool reads its type (fields) or one byte (lists).
  int32_t ReadI32(uint8_t type);
  int64_t ReadI64(uint8_t type);
  bool ReadBool(uint8_t type);
  std::string ReadBinary(uint8_t type);
  // A list (or set) header of `type`: its element type and size (bounded by the bytes left).
  int64_t ReadListHeader(uint8_t type, uint8_t* element_type);
  // Steps over a value of `type` (structs, lists and maps recursively).
  void Skip(uint8_t type) { Skip(type, 0); }

  // Entering a nested struct: false (and an error) past kMaxThriftDepth. Leave with ExitStruct.
  bool EnterStruct();
  void ExitStruct() { --depth_; }

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // Bytes consumed so far.
  size_t position() const { return pos_; }
  // Sets the error (the first one wins); for decoders that find a value invalid.
  void Fail(std::string what);

 private:
  uint64_t ReadVarint();
  int64_t ReadZigZag() {
    const uint64_t v = ReadVarint();
    return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
  }
  uint8_t ReadByte();
  void Skip(uint8_t type, int depth);

  absl::string_view data_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::string error_;
};

}  // namespace grove
