// A small, bounds-checked Universal Binary JSON (UBJSON, draft 12) reader for model files.
//
// Document::Parse builds a compact DOM over the caller's bytes: strings, keys and the payload of
// typed numeric arrays (`[$d#L<n>...`) are not copied but referenced, so the bytes must outlive the
// Document. Typed numeric arrays stay packed (big-endian) and are decoded on access, which keeps a
// 3-million-node XGBoost model at a few DOM nodes per tree.
//
// Safety contract: Parse never reads outside `bytes`, never recurses deeper than `max_depth`, and
// never allocates for a declared count that the remaining bytes cannot hold (every element costs at
// least one byte; typed arrays cost count * element size). Malformed input is INVALID_ARGUMENT with
// the byte offset. Supported: null Z, no-op N (skipped), T/F, integers i U I l L, floats d D,
// high-precision numbers H (kept as text), char C, strings S, arrays and objects, plain (ended by
// ']' / '}') or counted (`#`), optionally typed (`$`). Typed containers of T/F/Z/N (elements without
// payload) are refused. Keys may carry an 'S' marker before their length (not standard, accepted).
//
// Thread safety: a Document is immutable after Parse; concurrent reads are safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace grove::ubjson {

enum class Type : uint8_t {
  kNull,
  kBool,
  kInt,
  kFloat,
  kString,         // also 'C' (one char)
  kHighPrecision,  // 'H': a number written as text
  kArray,          // elements are DOM nodes
  kTypedArray,     // packed big-endian numbers of one marker type
  kObject,
};

class Document;

// A cheap handle to one value of a Document (valid while the Document lives).
class Value {
 public:
  Value() = default;  // a null handle; only assign to it
  Type type() const;
  bool is_object() const { return type() == Type::kObject; }
  bool is_array() const { return type() == Type::kArray || type() == Type::kTypedArray; }

  // Scalars. GetInt/GetDouble accept kInt and kFloat; GetBool accepts kBool only.
  bool GetBool(bool* out) const;
  bool GetInt(int64_t* out) const;
  bool GetDouble(double* out) const;
  // kString and kHighPrecision: the text.
  bool GetString(std::string_view* out) const;

  // Arrays and objects: number of elements / members.
  size_t size() const;
  // kArray: element i (i < size()).
  Value Element(size_t i) const;
  // kTypedArray: the element marker ('i','U','I','l','L','d','D') and the packed payload.
  char typed_marker() const;
  const uint8_t* typed_data() const;

  // kObject: member i's key and value (i < size()); Find returns the first member named `key`.
  std::string_view Key(size_t i) const;
  Value Member(size_t i) const;
  bool Find(std::string_view key, Value* out) const;

 private:
  friend class Document;
  Value(const Document* doc, uint32_t node) : doc_(doc), node_(node) {}
  const Document* doc_ = nullptr;
  uint32_t node_ = 0;
};

class Document {
 public:
  static constexpr int kDefaultMaxDepth = 128;

  // Parses exactly one value; only no-op markers may follow it.
  static absl::StatusOr<Document> Parse(std::string_view bytes, int max_depth = kDefaultMaxDepth);

  Value root() const { return Value(this, 0); }

  // Size in bytes of one element of a typed numeric array with marker `m` (0 if not numeric).
  static size_t TypedElementSize(char m);

 private:
  friend class Value;
  friend class Parser;
  struct Node {
    Type type = Type::kNull;
    char marker = 0;     // kTypedArray: element marker
    uint64_t a = 0;      // string/H/typed array: byte offset; array/object: first entry
    uint64_t n = 0;      // length in bytes (strings) or elements (containers)
    union {
      int64_t i;
      double d;
    } v{0};
  };
  struct Entry {
    uint64_t key_offset = 0;  // objects only
    uint64_t key_length = 0;
    uint32_t node = 0;
  };
  const uint8_t* bytes_ = nullptr;
  std::vector<Node> nodes_;
  std::vector<Entry> entries_;
};

// Decodes element i of a typed numeric array payload (big-endian). `m` is an integer marker for
// DecodeInt and any numeric marker for DecodeDouble.
int64_t DecodeInt(char m, const uint8_t* p, size_t i);
double DecodeDouble(char m, const uint8_t* p, size_t i);

}  // namespace grove::ubjson
