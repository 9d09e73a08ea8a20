// A Parquet page's compression codecs: UNCOMPRESSED, SNAPPY (core/io/snappy.h), GZIP (zlib) and
// ZSTD (libzstd). The output size is the page header's declared size, which the caller bounds; a
// page that decompresses to any other size is refused, so an untrusted page never makes more
// output than it declares.
//
// Thread-safe (no shared state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace grove {

// The codec's name as parquet.thrift spells it ("SNAPPY"; "codec 9" when unknown).
std::string ParquetCodecName(int32_t codec);

// Decompresses `in` with `codec` into `out` (replaced), exactly `expected_size` bytes.
// UNIMPLEMENTED for LZO, BROTLI, LZ4 and unknown codecs (naming the codec); INVALID_ARGUMENT for
// bytes that are not a valid stream of the codec or decompress to another size.
absl::Status DecompressParquetPage(int32_t codec, absl::string_view in, size_t expected_size,
                                   std::string* out);

}  // namespace grove
