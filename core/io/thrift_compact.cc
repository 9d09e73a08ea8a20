#include "core/io/thrift_compact.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace grove {

void ThriftCompactReader::Fail(std::string what) {
  if (error_.empty()) error_ = absl::StrCat(std::move(what), " (at byte ", pos_, ")");
  pos_ = data_.size();
}

uint8_t ThriftCompactReader::ReadByte() {
  if (pos_ >= data_.size()) {
    Fail("truncated");
    return 0;
  }
  return static_cast<uint8_t>(data_[pos_++]);
}

uint64_t ThriftCompactReader::ReadVarint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    const uint8_t b = ReadByte();
    if (!ok()) return 0;
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return v;
  }
  Fail("a varint longer than 10 bytes");
  return 0;
}

bool ThriftCompactReader::NextField(int16_t* last_id, int16_t* id, uint8_t* type) {
  if (!ok()) return false;
  const uint8_t b = ReadByte();
  if (!ok()) return false;
  *type = b & 0x0f;
  if (*type == kThriftStop) return false;
  if (*type > kThriftStruct) {
    Fail(absl::StrCat("unknown field type ", *type));
    return false;
  }
  const int delta = b >> 4;
  if (delta != 0) {
    *id = static_cast<int16_t>(*last_id + delta);
  } else {
    const int64_t v = ReadZigZag();
    if (v < std::numeric_limits<int16_t>::min() || v > std::numeric_limits<int16_t>::max()) {
      Fail("a field id out of range");
    }
    *id = static_cast<int16_t>(v);
  }
  *last_id = *id;
  return ok();
}

int64_t ThriftCompactReader::ReadI64(uint8_t type) {
  switch (type) {
    case kThriftByte:
      return static_cast<int8_t>(ReadByte());
    case kThriftI16:
    case kThriftI32:
    case kThriftI64:
      return ReadZigZag();
    default:
      Fail(absl::StrCat("an integer expected, found type ", type));
      return 0;
  }
}

int32_t ThriftCompactReader::ReadI32(uint8_t type) {
  const int64_t v = ReadI64(type);
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    Fail(absl::StrCat("the value ", v, " does not fit in 32 bits"));
    return 0;
  }
  return static_cast<int32_t>(v);
}

bool ThriftCompactReader::ReadBool(uint8_t type) {
  if (type == kThriftTrue) return true;
  if (type == kThriftFalse) return false;
  Fail(absl::StrCat("a bool expected, found type ", type));
  return false;
}

std::string ThriftCompactReader::ReadBinary(uint8_t type) {
  if (type != kThriftBinary) {
    Fail(absl::StrCat("a string expected, found type ", type));
    return {};
  }
  const uint64_t n = ReadVarint();
  if (!ok()) return {};
  if (n > data_.size() - pos_) {
    Fail(absl::StrCat("a string of ", n, " bytes past the end"));
    return {};
  }
  std::string s(data_.substr(pos_, n));
  pos_ += n;
  return s;
}

int64_t ThriftCompactReader::ReadListHeader(uint8_t type, uint8_t* element_type) {
  if (type != kThriftList && type != kThriftSet) {
    Fail(absl::StrCat("a list expected, found type ", type));
    return 0;
  }
  const uint8_t b = ReadByte();
  *element_type = b & 0x0f;
  uint64_t n = b >> 4;
  if (n == 15) n = ReadVarint();
  if (!ok()) return 0;
  if (*element_type == kThriftStop || *element_type > kThriftStruct) {
    Fail(absl::StrCat("unknown list element type ", *element_type));
    return 0;
  }
  if (n > data_.size() - pos_) {  // every element takes a byte at least
    Fail(absl::StrCat("a list of ", n, " elements in ", data_.size() - pos_, " bytes"));
    return 0;
  }
  return static_cast<int64_t>(n);
}

bool ThriftCompactReader::EnterStruct() {
  if (++depth_ > kMaxThriftDepth) {
    Fail(absl::StrCat("nested deeper than ", kMaxThriftDepth));
    return false;
  }
  return ok();
}

void ThriftCompactReader::Skip(uint8_t type, int depth) {
  if (!ok()) return;
  if (depth + depth_ > kMaxThriftDepth) {
    Fail(absl::StrCat("nested deeper than ", kMaxThriftDepth));
    return;
  }
  switch (type) {
    case kThriftTrue:
    case kThriftFalse:
      return;
    case kThriftByte:
      ReadByte();
      return;
    case kThriftI16:
    case kThriftI32:
    case kThriftI64:
      ReadVarint();
      return;
    case kThriftDouble:
      if (data_.size() - pos_ < 8)
        Fail("truncated");
      else
        pos_ += 8;
      return;
    case kThriftBinary: {
      const uint64_t n = ReadVarint();
      if (ok() && n > data_.size() - pos_)
        Fail("a string past the end");
      else if (ok())
        pos_ += n;
      return;
    }
    case kThriftList:
    case kThriftSet: {
      uint8_t element;
      const int64_t n = ReadListHeader(type, &element);
      // A bool element is one byte in a list.
      const uint8_t t =
          element == kThriftTrue || element == kThriftFalse ? uint8_t{kThriftByte} : element;
      for (int64_t i = 0; i < n && ok(); ++i) Skip(t, depth + 1);
      return;
    }
    case kThriftMap: {
      const uint64_t n = ReadVarint();
      if (!ok() || n == 0) return;
      if (n > data_.size() - pos_) {
        Fail("a map past the end");
        return;
      }
      const uint8_t kv = ReadByte();
      uint8_t k = kv >> 4, v = kv & 0x0f;
      if (k == kThriftTrue || k == kThriftFalse) k = kThriftByte;
      if (v == kThriftTrue || v == kThriftFalse) v = kThriftByte;
      if (k == kThriftStop || k > kThriftStruct || v == kThriftStop || v > kThriftStruct) {
        Fail("unknown map element type");
        return;
      }
      for (uint64_t i = 0; i < n && ok(); ++i) {
        Skip(k, depth + 1);
        Skip(v, depth + 1);
      }
      return;
    }
    case kThriftStruct: {
      int16_t last = 0, id;
      uint8_t t;
      while (NextField(&last, &id, &t)) Skip(t, depth + 1);
      return;
    }
    default:
      Fail(absl::StrCat("unknown type ", type));
  }
}

}  // namespace grove
