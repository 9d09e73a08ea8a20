#include "core/io/snappy.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace grove {

absl::Status SnappyDecompress(absl::string_view in, size_t expected_size, std::string* out) {
  size_t pos = 0;
  uint64_t length = 0;
  for (int shift = 0;; shift += 7) {
    if (pos >= in.size() || shift > 28) {
      return absl::InvalidArgumentError("snappy: malformed length");
    }
    const uint8_t b = static_cast<uint8_t>(in[pos++]);
    length |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) break;
  }
  if (length != expected_size) {
    return absl::InvalidArgumentError(absl::StrCat("snappy: the block holds ", length,
                                                   " bytes, the page header says ", expected_size));
  }
  out->resize(expected_size);
  char* dst = out->data();
  size_t done = 0;
  auto take = [&](size_t n, uint32_t* v) {  // n little-endian bytes
    if (in.size() - pos < n) return false;
    *v = 0;
    for (size_t i = 0; i < n; ++i)
      *v |= static_cast<uint32_t>(static_cast<uint8_t>(in[pos + i])) << (8 * i);
    pos += n;
    return true;
  };
  while (pos < in.size()) {
    const uint8_t tag = static_cast<uint8_t>(in[pos++]);
    uint32_t extra = 0;
    size_t len, offset;
    switch (tag & 3) {
      case 0: {  // literal: length - 1 in the tag, or in the next 1-4 bytes
        len = tag >> 2;
        if (len >= 60) {
          if (!take(len - 59, &extra))
            return absl::InvalidArgumentError("snappy: truncated literal");
          len = extra;
        }
        len += 1;
        if (in.size() - pos < len) return absl::InvalidArgumentError("snappy: truncated literal");
        if (expected_size - done < len) {
          return absl::InvalidArgumentError("snappy: output past the declared length");
        }
        std::memcpy(dst + done, in.data() + pos, len);
        pos += len;
        done += len;
        continue;
      }
      case 1:
        if (!take(1, &extra)) return absl::InvalidArgumentError("snappy: truncated copy");
        len = 4 + ((tag >> 2) & 7);
        offset = (static_cast<size_t>(tag >> 5) << 8) | extra;
        break;
      case 2:
        if (!take(2, &extra)) return absl::InvalidArgumentError("snappy: truncated copy");
        len = (tag >> 2) + 1;
        offset = extra;
        break;
      default:
        if (!take(4, &extra)) return absl::InvalidArgumentError("snappy: truncated copy");
        len = (tag >> 2) + 1;
        offset = extra;
        break;
    }
    if (offset == 0 || offset > done) {
      return absl::InvalidArgumentError(
          absl::StrCat("snappy: a copy at offset ", offset, " after ", done, " bytes"));
    }
    if (expected_size - done < len) {
      return absl::InvalidArgumentError("snappy: output past the declared length");
    }
    // Byte by byte: a copy may overlap its own output (a run).
    const char* src = dst + done - offset;
    for (size_t i = 0; i < len; ++i) dst[done + i] = src[i];
    done += len;
  }
  if (done != expected_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("snappy: ", done, " bytes decompressed, ", expected_size, " declared"));
  }
  return absl::OkStatus();
}

}  // namespace grove
