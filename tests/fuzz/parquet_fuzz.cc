// libFuzzer target for the Parquet reader (core/io/parquet.h, the Thrift compact decoder, the
// page codecs and encodings under it) and the rows made of a file (core/io/parquet_rows.h): any
// bytes, opened as a file whose every column of every row group is decoded, then read as rows
// (the first readable columns as values, a string column decoded as a categorical feature's,
// another kept as text), must give values or a status of the reader's codes. Never a crash, a
// sanitizer report, or an allocation beyond the page and row group bounds.
//
// Seed corpus: tests/common/data/parquet/*.parquet (scripts/make_parquet_corpus.py: every type,
// codec, page version, dictionaries, nulls, refused columns).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/io/parquet.h"
#include "core/io/parquet_rows.h"

namespace {

bool Allowed(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kResourceExhausted:
      return true;
    default:
      return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  grove::ParquetLimits limits;
  limits.max_page_bytes = int64_t{1} << 22;
  limits.max_row_group_rows = int64_t{1} << 16;
  absl::StatusOr<grove::ParquetFile> file = grove::ParquetFile::Open(bytes, "fuzz", limits);
  if (!file.ok()) {
    if (!Allowed(file.status())) std::abort();
    return 0;
  }
  std::vector<std::string> names, keep;
  std::vector<grove::CsvCellDecoder> decoders;
  for (int g = 0; g < file->num_row_groups() && g < 16; ++g) {
    for (size_t c = 0; c < file->columns().size() && c < 32; ++c) {
      absl::StatusOr<grove::ParquetColumnValues> v = file->ReadColumn(g, static_cast<int>(c));
      if (!v.ok()) {
        if (!Allowed(v.status())) std::abort();
        continue;
      }
      const size_t n =
          v->kind == grove::ParquetValueKind::kString ? v->strings.size() : v->numbers.size();
      if (n != static_cast<size_t>(file->row_group_rows(g))) std::abort();
    }
  }
  for (const grove::ParquetColumn& c : file->columns()) {
    if (!c.unsupported.empty() || names.size() >= 8) continue;
    if (c.kind == grove::ParquetValueKind::kString && keep.empty()) {
      keep.push_back(c.name);
      continue;
    }
    names.push_back(c.name);
    decoders.push_back(
        c.kind == grove::ParquetValueKind::kString
            ? grove::CsvCellDecoder([](std::string_view cell) -> absl::StatusOr<double> {
                return static_cast<double>(cell.size());
              })
            : grove::CsvCellDecoder());
  }
  absl::StatusOr<std::unique_ptr<grove::ParquetRowReader>> reader =
      grove::ParquetRowReader::FromBytes(bytes, "fuzz", names, keep, limits);
  if (!reader.ok()) {
    if (!Allowed(reader.status())) std::abort();
    return 0;
  }
  (*reader)->SetCellDecoders(decoders);
  std::vector<float> rows;
  std::vector<std::string> kept;
  for (int i = 0; i < 64; ++i) {
    absl::StatusOr<int64_t> n = (*reader)->ReadRows(4096, &rows, &kept);
    if (!n.ok()) {
      if (!Allowed(n.status())) std::abort();
      break;
    }
    if (*n == 0) break;
    if (rows.size() != static_cast<size_t>(*n) * names.size()) std::abort();
    if (!keep.empty() && kept.size() != static_cast<size_t>(*n)) std::abort();
  }
  return 0;
}
