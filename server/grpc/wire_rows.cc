#include "server/grpc/wire_rows.h"

#include <algorithm>
#include <limits>

namespace grove::server {
namespace {

constexpr int kLengthDelimited = 2;

// Reads the concatenation of the pieces by absolute offset.
class WireReader {
 public:
  explicit WireReader(absl::Span<const WirePiece> pieces) : pieces_(pieces) {
    starts_.reserve(pieces.size() + 1);
    size_t at = 0;
    for (const WirePiece& p : pieces) {
      starts_.push_back(at);
      at += p.size;
    }
    starts_.push_back(at);
  }

  size_t total() const { return starts_.back(); }

  // A varint of at most `max_bytes` bytes at *pos, before `limit`; advances *pos. False when it is
  // longer or runs past the limit.
  bool Varint(size_t* pos, size_t limit, int max_bytes, uint64_t* value) const {
    uint64_t v = 0;
    for (int i = 0; i < max_bytes; ++i) {
      if (*pos >= limit) return false;
      const uint8_t byte = Byte((*pos)++);
      v |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
      if ((byte & 0x80) == 0) {
        *value = v;
        return true;
      }
    }
    return false;
  }

  // Appends bytes [begin, end) to *out.
  void Append(size_t begin, size_t end, std::string* out) const {
    ForEach(begin, end, [out](const char* data, size_t n) { out->append(data, n); });
  }
  // Appends the pieces of bytes [begin, end) to *out.
  void Pieces(size_t begin, size_t end, std::vector<WirePiece>* out) const {
    ForEach(begin, end, [out](const char* data, size_t n) { out->push_back(WirePiece{data, n}); });
  }

 private:
  // The piece holding byte `pos` (< total): the last one starting at or before it (empty pieces
  // share their start with the next one, so this is never an empty piece).
  size_t PieceAt(size_t pos) const {
    if (hint_ < pieces_.size() && starts_[hint_] <= pos && pos < starts_[hint_ + 1]) return hint_;
    hint_ = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), pos) -
                                starts_.begin()) - 1;
    return hint_;
  }
  uint8_t Byte(size_t pos) const {
    const size_t i = PieceAt(pos);
    return static_cast<uint8_t>(pieces_[i].data[pos - starts_[i]]);
  }
  template <typename Fn>
  void ForEach(size_t begin, size_t end, Fn fn) const {
    if (begin >= end) return;
    for (size_t i = PieceAt(begin); begin < end; ++i) {
      const size_t from = begin - starts_[i];
      const size_t n = std::min(end, starts_[i + 1]) - begin;
      if (n > 0) fn(pieces_[i].data + from, n);
      begin += n;
    }
  }

  absl::Span<const WirePiece> pieces_;
  std::vector<size_t> starts_;  // starts_[i]: offset of piece i; back(): the total
  mutable size_t hint_ = 0;
};

// One field of a message: its tag's first byte, its payload [begin, end) for length-delimited
// fields, its number and wire type.
struct Field {
  size_t tag_begin = 0;
  size_t begin = 0;
  size_t end = 0;
  uint32_t number = 0;
  int wire_type = 0;
};

// Reads the field at *pos (before `limit`) the way Protobuf accepts it, advancing past it; false
// for what this scanner does not split (groups, unknown wire types) or what is malformed.
bool NextField(const WireReader& r, size_t* pos, size_t limit, Field* f) {
  f->tag_begin = *pos;
  uint64_t tag = 0;
  if (!r.Varint(pos, limit, 5, &tag) || tag > std::numeric_limits<uint32_t>::max()) return false;
  f->number = static_cast<uint32_t>(tag >> 3);
  f->wire_type = static_cast<int>(tag & 7);
  if (f->number == 0) return false;
  uint64_t value = 0;
  switch (f->wire_type) {
    case 0:  // varint
      if (!r.Varint(pos, limit, 10, &value)) return false;
      break;
    case 1:  // fixed64
      if (limit - *pos < 8) return false;
      *pos += 8;
      break;
    case 5:  // fixed32
      if (limit - *pos < 4) return false;
      *pos += 4;
      break;
    case kLengthDelimited:
      if (!r.Varint(pos, limit, 5, &value) ||
          value > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()) ||
          value > limit - *pos) {
        return false;
      }
      break;
    default:  // groups (3, 4) and invalid types
      return false;
  }
  f->begin = *pos;
  if (f->wire_type == kLengthDelimited) *pos += static_cast<size_t>(value);
  f->end = *pos;
  return true;
}

// The only field numbered `number` among the fields of [begin, end), which must be
// length-delimited; false when the bytes are malformed, it appears twice or with another wire
// type; *found false when it is absent.
bool OnlyField(const WireReader& r, size_t begin, size_t end, uint32_t number, Field* only,
               bool* found) {
  *found = false;
  for (size_t pos = begin; pos < end;) {
    Field f;
    if (!NextField(r, &pos, end, &f)) return false;
    if (f.number != number) continue;
    if (*found || f.wire_type != kLengthDelimited) return false;
    *only = f;
    *found = true;
  }
  return true;
}

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

}  // namespace

std::optional<RawRowsSplit> SplitRawRows(absl::Span<const WirePiece> pieces, RawRowsField where,
                                         size_t min_payload) {
  if (where.field <= 0 || where.inner < 0) return std::nullopt;
  const WireReader r(pieces);
  Field outer, raw;
  bool found = false;
  if (!OnlyField(r, 0, r.total(), static_cast<uint32_t>(where.field), &outer, &found) || !found) {
    return std::nullopt;
  }
  if (where.inner == 0) {
    raw = outer;
  } else if (!OnlyField(r, outer.begin, outer.end, static_cast<uint32_t>(where.inner), &raw,
                        &found) ||
             !found) {
    return std::nullopt;
  }
  const size_t payload = raw.end - raw.begin;
  if (payload < min_payload || payload == 0) return std::nullopt;

  RawRowsSplit split;
  split.rest.reserve(r.total() - payload);
  if (where.inner == 0) {
    r.Append(0, raw.tag_begin, &split.rest);
    r.Append(raw.end, r.total(), &split.rest);
  } else {
    const size_t kept = (outer.end - outer.begin) - (raw.end - raw.tag_begin);
    r.Append(0, outer.tag_begin, &split.rest);
    // The enclosing field's tag as it came, then its new length.
    size_t tag_end = outer.tag_begin;
    uint64_t tag = 0;
    r.Varint(&tag_end, outer.begin, 5, &tag);
    r.Append(outer.tag_begin, tag_end, &split.rest);
    AppendVarint(kept, &split.rest);
    r.Append(outer.begin, raw.tag_begin, &split.rest);
    r.Append(raw.end, outer.end, &split.rest);
    r.Append(outer.end, r.total(), &split.rest);
  }
  r.Pieces(raw.begin, raw.end, &split.payload);
  split.payload_bytes = payload;
  return split;
}

}  // namespace grove::server
