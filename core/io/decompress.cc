#include "core/io/decompress.h"

#include <zlib.h>
#include <zstd.h>

#include <limits>

#include "absl/strings/str_cat.h"
#include "core/io/parquet_metadata.h"
#include "core/io/snappy.h"

namespace grove {
namespace {

absl::Status Inflate(absl::string_view in, size_t expected_size, std::string* out) {
  if (in.size() > std::numeric_limits<uInt>::max() ||
      expected_size > std::numeric_limits<uInt>::max()) {
    return absl::InvalidArgumentError("gzip: a page over 4 GiB");
  }
  out->resize(expected_size);
  z_stream z{};
  // 32 + MAX_WBITS: a gzip or a zlib header, detected (writers differ).
  if (inflateInit2(&z, 32 + MAX_WBITS) != Z_OK) {
    return absl::ResourceExhaustedError("gzip: cannot initialize zlib");
  }
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out->data());
  z.avail_out = static_cast<uInt>(expected_size);
  int rc = Z_OK;
  // Concatenated gzip members (some writers emit several) are read one after the other.
  while (true) {
    rc = inflate(&z, Z_FINISH);
    if (rc == Z_STREAM_END && z.avail_in > 0 && z.avail_out > 0) {
      if (inflateReset(&z) != Z_OK) break;
      continue;
    }
    break;
  }
  const size_t produced = expected_size - z.avail_out;
  const bool complete = rc == Z_STREAM_END && z.avail_in == 0;
  inflateEnd(&z);
  if (!complete) {
    return absl::InvalidArgumentError(
        rc == Z_STREAM_END || rc == Z_BUF_ERROR
            ? absl::StrCat("gzip: the page does not decompress to its declared ", expected_size,
                           " bytes")
            : absl::StrCat("gzip: malformed stream (zlib error ", rc, ")"));
  }
  if (produced != expected_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("gzip: ", produced, " bytes decompressed, ", expected_size, " declared"));
  }
  return absl::OkStatus();
}

absl::Status Unzstd(absl::string_view in, size_t expected_size, std::string* out) {
  out->resize(expected_size);
  const size_t n = ZSTD_decompress(out->data(), expected_size, in.data(), in.size());
  if (ZSTD_isError(n)) {
    return absl::InvalidArgumentError(absl::StrCat("zstd: ", ZSTD_getErrorName(n)));
  }
  if (n != expected_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("zstd: ", n, " bytes decompressed, ", expected_size, " declared"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string ParquetCodecName(int32_t codec) {
  static const char* const kNames[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO",
                                       "BROTLI",       "LZ4",    "ZSTD", "LZ4_RAW"};
  if (codec >= 0 && codec < 8) return kNames[codec];
  return absl::StrCat("codec ", codec);
}

absl::Status DecompressParquetPage(int32_t codec, absl::string_view in, size_t expected_size,
                                   std::string* out) {
  switch (codec) {
    case kParquetUncompressed:
      if (in.size() != expected_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("an uncompressed page of ", in.size(), " bytes declares ", expected_size));
      }
      out->assign(in.data(), in.size());
      return absl::OkStatus();
    case kParquetSnappy:
      return SnappyDecompress(in, expected_size, out);
    case kParquetGzip:
      return Inflate(in, expected_size, out);
    case kParquetZstd:
      return Unzstd(in, expected_size, out);
    default:
      return absl::UnimplementedError(
          absl::StrCat("compression ", ParquetCodecName(codec),
                       " is not supported (UNCOMPRESSED, SNAPPY, GZIP and ZSTD are)"));
  }
}

}  // namespace grove
