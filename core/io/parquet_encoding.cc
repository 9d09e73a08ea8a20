#include "core/io/parquet_encoding.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/io/parquet_metadata.h"

namespace grove {
namespace {

uint32_t LoadLe32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // Parquet is little-endian, as every machine Grove runs on
  return v;
}

}  // namespace

absl::Status DecodeRleHybrid(absl::string_view data, int bit_width, int64_t n,
                             std::vector<uint32_t>* out, size_t* used) {
  if (bit_width < 0 || bit_width > 32) {
    return absl::InvalidArgumentError(absl::StrCat("a bit width of ", bit_width, " (at most 32)"));
  }
  if (n < 0) return absl::InvalidArgumentError("a negative value count");
  // Grown run by run: a count the runs do not hold allocates nothing.
  out->clear();
  const uint64_t mask = bit_width == 32 ? 0xffffffffu : (uint64_t{1} << bit_width) - 1;
  size_t pos = 0;
  int64_t i = 0;
  while (i < n) {
    uint64_t header = 0;
    for (int shift = 0;; shift += 7) {
      if (pos >= data.size() || shift > 28) {
        return absl::InvalidArgumentError(
            absl::StrCat("RLE runs end after ", i, " of ", n, " values"));
      }
      const uint8_t b = static_cast<uint8_t>(data[pos++]);
      header |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) break;
    }
    const uint64_t count_field = header >> 1;
    if (header & 1) {  // bit-packed: count_field groups of 8 values
      const uint64_t bytes = count_field * static_cast<uint64_t>(bit_width);
      if (bytes > data.size() - pos) {
        return absl::InvalidArgumentError("a bit-packed run past the end of the page");
      }
      const uint64_t take = std::min<uint64_t>(count_field * 8, static_cast<uint64_t>(n - i));
      const unsigned char* p = reinterpret_cast<const unsigned char*>(data.data() + pos);
      uint64_t bit = 0;
      for (uint64_t k = 0; k < take; ++k, bit += static_cast<uint64_t>(bit_width)) {
        uint64_t v = 0;
        // The value's bits span at most 5 bytes, starting at bit % 8 of byte bit / 8.
        const uint64_t first = bit / 8, last = (bit + bit_width + 7) / 8;
        for (uint64_t b = first; b < last; ++b)
          v |= static_cast<uint64_t>(p[b]) << (8 * (b - first));
        out->push_back(static_cast<uint32_t>((v >> (bit % 8)) & mask));
        ++i;
      }
      pos += bytes;
    } else {  // a run of one value in ceil(bit_width / 8) bytes
      const size_t width = static_cast<size_t>((bit_width + 7) / 8);
      if (width > data.size() - pos) return absl::InvalidArgumentError("an RLE run past the end");
      uint64_t v = 0;
      for (size_t b = 0; b < width; ++b)
        v |= static_cast<uint64_t>(static_cast<uint8_t>(data[pos + b])) << (8 * b);
      pos += width;
      if (v > mask) {
        return absl::InvalidArgumentError(
            absl::StrCat("an RLE value ", v, " wider than ", bit_width, " bits"));
      }
      const uint64_t take = std::min<uint64_t>(count_field, static_cast<uint64_t>(n - i));
      out->insert(out->end(), static_cast<size_t>(take), static_cast<uint32_t>(v));
      i += static_cast<int64_t>(take);
    }
  }
  if (used != nullptr) *used = pos;
  return absl::OkStatus();
}

absl::Status DecodeLengthPrefixedRle(absl::string_view data, int bit_width, int64_t n,
                                     std::vector<uint32_t>* out, size_t* used) {
  if (data.size() < 4) return absl::InvalidArgumentError("RLE data without its length");
  const uint32_t length = LoadLe32(data.data());
  if (length > data.size() - 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("RLE data of ", length, " bytes in ", data.size() - 4));
  }
  *used = 4 + static_cast<size_t>(length);
  return DecodeRleHybrid(data.substr(4, length), bit_width, n, out);
}

absl::Status DecodePlainNumbers(absl::string_view data, ParquetNumberType type, int64_t n,
                                std::vector<double>* out, size_t* used) {
  if (n < 0) return absl::InvalidArgumentError("a negative value count");
  const uint64_t count = static_cast<uint64_t>(n);
  uint64_t bytes;
  switch (type.physical) {
    case kParquetBoolean:
      bytes = (count + 7) / 8;
      break;
    case kParquetInt32:
    case kParquetFloat:
      bytes = count * 4;
      break;
    case kParquetInt64:
    case kParquetDouble:
      bytes = count * 8;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("type ", type.physical, " is not a number"));
  }
  if (count > (uint64_t{1} << 40) || bytes > data.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(n, " PLAIN values need ", bytes, " bytes; the page holds ", data.size()));
  }
  const char* p = data.data();
  const size_t start = out->size();
  out->resize(start + static_cast<size_t>(n));
  double* o = out->data() + start;
  for (uint64_t i = 0; i < count; ++i) {
    switch (type.physical) {
      case kParquetBoolean:
        o[i] = (static_cast<uint8_t>(p[i / 8]) >> (i % 8)) & 1;
        break;
      case kParquetInt32: {
        const uint32_t u = LoadLe32(p + 4 * i);
        o[i] = type.is_unsigned ? static_cast<double>(u)
                                : static_cast<double>(static_cast<int32_t>(u));
        break;
      }
      case kParquetFloat: {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        o[i] = f;
        break;
      }
      case kParquetInt64: {
        uint64_t u;
        std::memcpy(&u, p + 8 * i, 8);
        o[i] = type.is_unsigned ? static_cast<double>(u)
                                : static_cast<double>(static_cast<int64_t>(u));
        break;
      }
      default:
        std::memcpy(&o[i], p + 8 * i, 8);
    }
  }
  *used = static_cast<size_t>(bytes);
  return absl::OkStatus();
}

absl::Status DecodePlainByteArrays(absl::string_view data, int64_t n,
                                   std::vector<absl::string_view>* out, size_t* used) {
  if (n < 0 || static_cast<uint64_t>(n) > data.size() / 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(n, " PLAIN strings cannot fit in ", data.size(), " bytes"));
  }
  out->reserve(out->size() + static_cast<size_t>(n));
  size_t pos = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (data.size() - pos < 4)
      return absl::InvalidArgumentError("a string past the end of the page");
    const uint32_t length = LoadLe32(data.data() + pos);
    pos += 4;
    if (length > data.size() - pos) {
      return absl::InvalidArgumentError(
          absl::StrCat("a string of ", length, " bytes past the end of the page"));
    }
    out->push_back(data.substr(pos, length));
    pos += length;
  }
  *used = pos;
  return absl::OkStatus();
}

}  // namespace grove
