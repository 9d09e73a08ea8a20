#include "core/model/ubjson.h"

#include <cstring>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace grove::ubjson {

namespace {

uint64_t LoadBigEndian(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t k = 0; k < n; ++k) v = (v << 8) | p[k];
  return v;
}

float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

double BitsToDouble(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof(d));
  return d;
}

bool IsIntMarker(char m) {
  return m == 'i' || m == 'U' || m == 'I' || m == 'l' || m == 'L';
}

int64_t DecodeIntAt(char m, const uint8_t* p) {
  switch (m) {
    case 'i': return static_cast<int8_t>(p[0]);
    case 'U': return p[0];
    case 'I': return static_cast<int16_t>(static_cast<uint16_t>(LoadBigEndian(p, 2)));
    case 'l': return static_cast<int32_t>(static_cast<uint32_t>(LoadBigEndian(p, 4)));
    case 'L': return static_cast<int64_t>(LoadBigEndian(p, 8));
    default: return 0;
  }
}

}  // namespace

size_t Document::TypedElementSize(char m) {
  switch (m) {
    case 'i': case 'U': return 1;
    case 'I': return 2;
    case 'l': case 'd': return 4;
    case 'L': case 'D': return 8;
    default: return 0;
  }
}

int64_t DecodeInt(char m, const uint8_t* p, size_t i) {
  return DecodeIntAt(m, p + i * Document::TypedElementSize(m));
}

double DecodeDouble(char m, const uint8_t* p, size_t i) {
  const uint8_t* q = p + i * Document::TypedElementSize(m);
  if (m == 'd') return BitsToFloat(static_cast<uint32_t>(LoadBigEndian(q, 4)));
  if (m == 'D') return BitsToDouble(LoadBigEndian(q, 8));
  return static_cast<double>(DecodeIntAt(m, q));
}

// Recursive-descent parser; recursion depth is bounded by max_depth.
class Parser {
 public:
  Parser(std::string_view bytes, int max_depth, Document* doc)
      : p_(reinterpret_cast<const uint8_t*>(bytes.data())),
        size_(bytes.size()),
        max_depth_(max_depth),
        doc_(doc) {}

  absl::Status Run() {
    doc_->bytes_ = p_;
    doc_->nodes_.emplace_back();  // the root is node 0
    char m = 0;
    if (absl::Status s = NextMarker(&m); !s.ok()) return s;
    if (absl::Status s = ParseValue(m, 0, 0); !s.ok()) return s;
    while (pos_ < size_ && p_[pos_] == 'N') ++pos_;
    if (pos_ != size_) return Error("unexpected bytes after the document");
    return absl::OkStatus();
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("UBJSON at byte ", pos_, ": ", absl::string_view(what.data(), what.size())));
  }
  size_t remaining() const { return size_ - pos_; }

  // Next marker, skipping no-ops.
  absl::Status NextMarker(char* m) {
    while (pos_ < size_ && p_[pos_] == 'N') ++pos_;
    if (pos_ >= size_) return Error("truncated (expected a type marker)");
    *m = static_cast<char>(p_[pos_++]);
    return absl::OkStatus();
  }

  absl::Status ReadInt(char m, int64_t* out) {
    const size_t n = Document::TypedElementSize(m);
    if (!IsIntMarker(m)) return Error(absl::StrCat("expected an integer marker, got 0x",
                                                   absl::Hex(static_cast<uint8_t>(m))));
    if (remaining() < n) return Error("truncated integer");
    *out = DecodeIntAt(m, p_ + pos_);
    pos_ += n;
    return absl::OkStatus();
  }

  // A length or count: integer marker then a non-negative value.
  absl::Status ReadLength(uint64_t* out) {
    if (pos_ >= size_) return Error("truncated (expected a length)");
    const char m = static_cast<char>(p_[pos_++]);
    int64_t v = 0;
    if (absl::Status s = ReadInt(m, &v); !s.ok()) return s;
    if (v < 0) return Error(absl::StrCat("negative length ", v));
    *out = static_cast<uint64_t>(v);
    return absl::OkStatus();
  }

  absl::Status NewNode(uint32_t* index) {
    if (doc_->nodes_.size() >= std::numeric_limits<uint32_t>::max()) {
      return Error("too many values");
    }
    *index = static_cast<uint32_t>(doc_->nodes_.size());
    doc_->nodes_.emplace_back();
    return absl::OkStatus();
  }

  // Parses the value introduced by marker `m` into node `index`.
  absl::Status ParseValue(char m, uint32_t index, int depth) {
    Document::Node node;
    switch (m) {
      case 'Z': node.type = Type::kNull; break;
      case 'T': case 'F':
        node.type = Type::kBool;
        node.v.i = m == 'T';
        break;
      case 'i': case 'U': case 'I': case 'l': case 'L': {
        node.type = Type::kInt;
        if (absl::Status s = ReadInt(m, &node.v.i); !s.ok()) return s;
        break;
      }
      case 'd': case 'D': {
        const size_t n = Document::TypedElementSize(m);
        if (remaining() < n) return Error("truncated float");
        node.type = Type::kFloat;
        node.v.d = DecodeDouble(m, p_ + pos_, 0);
        pos_ += n;
        break;
      }
      case 'C':
        if (remaining() < 1) return Error("truncated char");
        node.type = Type::kString;
        node.a = pos_;
        node.n = 1;
        ++pos_;
        break;
      case 'S': case 'H': {
        uint64_t len;
        if (absl::Status s = ReadLength(&len); !s.ok()) return s;
        if (len > remaining()) return Error(absl::StrCat("string length ", len, " exceeds the input"));
        node.type = m == 'S' ? Type::kString : Type::kHighPrecision;
        node.a = pos_;
        node.n = len;
        pos_ += len;
        break;
      }
      case '[':
      case '{':
        if (depth >= max_depth_) return Error("nesting too deep");
        return ParseContainer(m == '{', index, depth + 1);
      default:
        return Error(absl::StrCat("unknown type marker 0x", absl::Hex(static_cast<uint8_t>(m))));
    }
    doc_->nodes_[index] = node;
    return absl::OkStatus();
  }

  // After '[' or '{': optional `$type`, optional `#count`, then the elements.
  absl::Status ParseContainer(bool object, uint32_t index, int depth) {
    char type = 0;
    bool counted = false;
    uint64_t count = 0;
    if (pos_ < size_ && p_[pos_] == '$') {
      ++pos_;
      if (pos_ >= size_) return Error("truncated container type");
      type = static_cast<char>(p_[pos_++]);
      if (pos_ >= size_ || p_[pos_] != '#') return Error("typed container without a count");
    }
    if (pos_ < size_ && p_[pos_] == '#') {
      ++pos_;
      counted = true;
      if (absl::Status s = ReadLength(&count); !s.ok()) return s;
    }
    if (type == 'T' || type == 'F' || type == 'Z' || type == 'N') {
      return Error("typed containers of T/F/Z/N are not supported");
    }
    const size_t typed_size = Document::TypedElementSize(type);
    if (!object && typed_size > 0) {
      // Packed numbers: keep a reference to the payload.
      if (count > remaining() / typed_size) {
        return Error(absl::StrCat("typed array of ", count, " elements exceeds the input"));
      }
      Document::Node node;
      node.type = Type::kTypedArray;
      node.marker = type;
      node.a = pos_;
      node.n = count;
      pos_ += count * typed_size;
      doc_->nodes_[index] = node;
      return absl::OkStatus();
    }
    // Every element (and every key) costs at least one byte.
    if (counted && count > remaining()) {
      return Error(absl::StrCat("container of ", count, " elements exceeds the input"));
    }
    const size_t mark = scratch_.size();
    for (uint64_t k = 0;; ++k) {
      if (counted && k == count) break;
      Document::Entry entry;
      if (object) {
        // Key: [S] length string. No-ops may precede it in a plain object.
        if (!counted) {
          while (pos_ < size_ && p_[pos_] == 'N') ++pos_;
          if (pos_ >= size_) return Error("truncated object (missing '}')");
          if (p_[pos_] == '}') {
            ++pos_;
            break;
          }
        }
        if (pos_ < size_ && p_[pos_] == 'S') ++pos_;
        uint64_t len;
        if (absl::Status s = ReadLength(&len); !s.ok()) return s;
        if (len > remaining()) return Error(absl::StrCat("key length ", len, " exceeds the input"));
        entry.key_offset = pos_;
        entry.key_length = len;
        pos_ += len;
      }
      char m = type;
      if (m == 0) {
        if (absl::Status s = NextMarker(&m); !s.ok()) return s;
        if (!object && !counted && m == ']') break;
      }
      uint32_t child = 0;
      if (absl::Status s = NewNode(&child); !s.ok()) return s;
      if (absl::Status s = ParseValue(m, child, depth); !s.ok()) return s;
      entry.node = child;
      scratch_.push_back(entry);
    }
    Document::Node node;
    node.type = object ? Type::kObject : Type::kArray;
    node.a = doc_->entries_.size();
    node.n = scratch_.size() - mark;
    doc_->entries_.insert(doc_->entries_.end(), scratch_.begin() + mark, scratch_.end());
    scratch_.resize(mark);
    doc_->nodes_[index] = node;
    return absl::OkStatus();
  }

  const uint8_t* p_;
  size_t size_;
  size_t pos_ = 0;
  int max_depth_;
  Document* doc_;
  std::vector<Document::Entry> scratch_;
};

absl::StatusOr<Document> Document::Parse(std::string_view bytes, int max_depth) {
  Document doc;
  Parser parser(bytes, max_depth, &doc);
  if (absl::Status s = parser.Run(); !s.ok()) return s;
  return doc;
}

Type Value::type() const { return doc_->nodes_[node_].type; }

bool Value::GetBool(bool* out) const {
  const auto& n = doc_->nodes_[node_];
  if (n.type != Type::kBool) return false;
  *out = n.v.i != 0;
  return true;
}

bool Value::GetInt(int64_t* out) const {
  const auto& n = doc_->nodes_[node_];
  if (n.type == Type::kInt) {
    *out = n.v.i;
    return true;
  }
  return false;
}

bool Value::GetDouble(double* out) const {
  const auto& n = doc_->nodes_[node_];
  if (n.type == Type::kFloat) {
    *out = n.v.d;
    return true;
  }
  if (n.type == Type::kInt) {
    *out = static_cast<double>(n.v.i);
    return true;
  }
  return false;
}

bool Value::GetString(std::string_view* out) const {
  const auto& n = doc_->nodes_[node_];
  if (n.type != Type::kString && n.type != Type::kHighPrecision) return false;
  *out = std::string_view(reinterpret_cast<const char*>(doc_->bytes_ + n.a), n.n);
  return true;
}

size_t Value::size() const {
  const auto& n = doc_->nodes_[node_];
  switch (n.type) {
    case Type::kArray: case Type::kTypedArray: case Type::kObject: return n.n;
    default: return 0;
  }
}

Value Value::Element(size_t i) const {
  const auto& n = doc_->nodes_[node_];
  return Value(doc_, doc_->entries_[n.a + i].node);
}

char Value::typed_marker() const { return doc_->nodes_[node_].marker; }

const uint8_t* Value::typed_data() const { return doc_->bytes_ + doc_->nodes_[node_].a; }

std::string_view Value::Key(size_t i) const {
  const auto& e = doc_->entries_[doc_->nodes_[node_].a + i];
  return std::string_view(reinterpret_cast<const char*>(doc_->bytes_ + e.key_offset),
                          e.key_length);
}

Value Value::Member(size_t i) const { return Element(i); }

bool Value::Find(std::string_view key, Value* out) const {
  const auto& n = doc_->nodes_[node_];
  if (n.type != Type::kObject) return false;
  for (size_t i = 0; i < n.n; ++i) {
    if (Key(i) == key) {
      *out = Member(i);
      return true;
    }
  }
  return false;
}

}  // namespace grove::ubjson
