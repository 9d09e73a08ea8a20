#include "core/io/parquet_rows.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/io/file.h"

namespace grove {
namespace {

// The cell decoders' and the CSV parser's view type (absl's is its own class in this Abseil).
std::string_view StdView(absl::string_view s) { return std::string_view(s.data(), s.size()); }

// A text of the kept columns, quoted when it would break the output line.
void AppendKept(absl::string_view text, std::string* out) {
  if (text.find_first_of(",\"\r\n") == absl::string_view::npos) {
    out->append(text.data(), text.size());
    return;
  }
  out->push_back('"');
  for (char c : text) {
    if (c == '"') out->push_back('"');
    out->push_back(c);
  }
  out->push_back('"');
}

}  // namespace

std::string ParquetCellText(ParquetValueKind kind, int32_t physical, double value) {
  if (std::isnan(value)) return "";
  if (kind == ParquetValueKind::kBoolean) return value != 0 ? "True" : "False";
  if (kind == ParquetValueKind::kInteger && std::fabs(value) < 9.2e18) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  char buf[64];
  const std::to_chars_result r =
      physical == kParquetFloat ? std::to_chars(buf, buf + sizeof(buf), static_cast<float>(value))
                                : std::to_chars(buf, buf + sizeof(buf), value);
  std::string text(buf, r.ptr);
  // Python's repr (what pandas.to_csv writes) marks an integral float: "3.0".
  if (text.find_first_of(".eni") == std::string::npos) text += ".0";
  return text;
}

absl::StatusOr<std::unique_ptr<ParquetRowReader>> ParquetRowReader::Open(
    const std::string& path, const std::vector<std::string>& value_names,
    const std::vector<std::string>& keep, ParquetLimits limits) {
  absl::StatusOr<std::string> bytes = ReadRegularFile(path);
  if (!bytes.ok()) return bytes.status();
  return FromBytes(*std::move(bytes), path, value_names, keep, limits);
}

absl::StatusOr<std::unique_ptr<ParquetRowReader>> ParquetRowReader::FromBytes(
    std::string bytes, std::string source, const std::vector<std::string>& value_names,
    const std::vector<std::string>& keep, ParquetLimits limits) {
  std::unique_ptr<ParquetRowReader> reader(new ParquetRowReader());
  reader->bytes_ = std::move(bytes);
  if (absl::Status s = reader->Init(std::move(source), value_names, keep, limits); !s.ok()) {
    return s;
  }
  return reader;
}

absl::Status ParquetRowReader::Init(std::string source, const std::vector<std::string>& value_names,
                                    const std::vector<std::string>& keep, ParquetLimits limits) {
  source_ = std::move(source);
  absl::StatusOr<ParquetFile> file = ParquetFile::Open(bytes_, source_, limits);
  if (!file.ok()) return file.status();
  file_ = *std::move(file);
  std::vector<std::string> names;
  absl::flat_hash_set<std::string> seen;
  for (const ParquetColumn& c : file_.columns()) {
    if (!seen.insert(c.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_, ": the column name '", c.name, "' is given twice"));
    }
    names.push_back(c.name);
  }
  absl::StatusOr<CsvLayout> layout = MatchCsvHeader(std::move(names), value_names, keep, source_);
  if (!layout.ok()) return layout.status();
  layout_ = *std::move(layout);
  // A used column that cannot be read is refused now, before any row is computed.
  for (size_t c = 0; c < file_.columns().size(); ++c) {
    const bool kept = std::find(layout_.keep.begin(), layout_.keep.end(),
                                static_cast<int64_t>(c)) != layout_.keep.end();
    const ParquetColumn& column = file_.columns()[c];
    if ((layout_.target[c] >= 0 || kept) && !column.unsupported.empty()) {
      return absl::UnimplementedError(absl::StrCat(source_, ": column '", column.name, "' is ",
                                                   column.unsupported,
                                                   ", which grove does not read"));
    }
  }
  return absl::OkStatus();
}

int64_t ParquetRowReader::bytes_consumed() const {
  const int64_t rows = file_.num_rows();
  if (rows <= 0) return total_bytes();
  return static_cast<int64_t>(static_cast<double>(total_bytes()) * rows_read_ / rows);
}

absl::Status ParquetRowReader::LoadGroup() {
  const int64_t rows = file_.row_group_rows(group_);
  const int64_t cols = layout_.row_cols;
  if (cols > 0 && rows > kMaxParquetRowGroupCells / cols) {
    return absl::ResourceExhaustedError(absl::StrCat(
        source_, ": row group ", group_, " has ", rows, " rows of ", cols, " values; at most ",
        kMaxParquetRowGroupCells,
        " values of a row group are read at once (write the file with smaller row groups)"));
  }
  group_rows_ = 0;  // until the group is read whole
  next_ = 0;
  // The rows x values buffer is sized once a column has decoded its rows, never by the declared
  // row count alone (a few bytes may declare millions of rows).
  bool sized = false;
  auto size_buffers = [&] {
    if (sized) return;
    values_.assign(static_cast<size_t>(rows * cols), 0.0);
    kept_.assign(layout_.keep.empty() ? 0 : static_cast<size_t>(rows), std::string());
    sized = true;
  };
  // Kept texts per kept column, joined per row at the end.
  std::vector<std::vector<std::string>> kept_texts(layout_.keep.size());
  for (size_t c = 0; c < layout_.target.size(); ++c) {
    const int64_t target = layout_.target[c];
    const auto kept_at =
        std::find(layout_.keep.begin(), layout_.keep.end(), static_cast<int64_t>(c));
    if (target < 0 && kept_at == layout_.keep.end()) continue;
    absl::StatusOr<ParquetColumnValues> column = file_.ReadColumn(group_, static_cast<int>(c));
    if (!column.ok()) return column.status();
    const ParquetColumn& info = file_.columns()[c];
    const bool strings = column->kind == ParquetValueKind::kString;
    if ((strings ? column->strings.size() : column->numbers.size()) != static_cast<size_t>(rows)) {
      return absl::InternalError(
          absl::StrCat(source_, ": column '", info.name, "' decoded to the wrong row count"));
    }
    size_buffers();
    auto text_of = [&](int64_t r) -> std::string {
      if (strings) return std::string(column->strings[static_cast<size_t>(r)]);
      return ParquetCellText(column->kind, info.physical, column->numbers[static_cast<size_t>(r)]);
    };
    if (kept_at != layout_.keep.end()) {
      std::vector<std::string>& texts =
          kept_texts[static_cast<size_t>(kept_at - layout_.keep.begin())];
      texts.resize(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) texts[static_cast<size_t>(r)] = text_of(r);
    }
    if (target < 0) continue;
    const CsvCellDecoder* decoder =
        static_cast<size_t>(target) < decoders_.size() && decoders_[static_cast<size_t>(target)]
            ? &decoders_[static_cast<size_t>(target)]
            : nullptr;
    auto cell_error = [&](int64_t r, const absl::Status& s) {
      return absl::Status(s.code(), absl::StrCat(source_, ": row ", rows_read_ + r + 1,
                                                 ", column '", info.name, "': ", s.message()));
    };
    double* out = values_.data() + target;
    for (int64_t r = 0; r < rows; ++r, out += cols) {
      const bool null = strings ? column->present[static_cast<size_t>(r)] == 0
                                : std::isnan(column->numbers[static_cast<size_t>(r)]);
      if (null && decoder == nullptr) {
        *out = std::numeric_limits<double>::quiet_NaN();
      } else if (decoder != nullptr) {
        // A string is decoded where it lies (category names: no copy per cell).
        absl::StatusOr<double> v =
            null      ? (*decoder)(std::string_view())
            : strings ? (*decoder)(StdView(column->strings[static_cast<size_t>(r)]))
                      : (*decoder)(text_of(r));
        if (!v.ok()) return cell_error(r, v.status());
        *out = *v;
      } else if (strings) {
        const absl::string_view text = column->strings[static_cast<size_t>(r)];
        if (!ParseCsvNumber(StdView(text), out)) {
          const std::string shown =
              text.size() > 64 ? absl::StrCat(text.substr(0, 64), "...") : std::string(text);
          return cell_error(
              r, absl::InvalidArgumentError(absl::StrCat("'", shown,
                                                         "' is not a number (the model records no "
                                                         "categories for this feature)")));
        }
      } else {
        *out = column->numbers[static_cast<size_t>(r)];
      }
    }
  }
  size_buffers();  // a group of no used column
  group_rows_ = rows;
  for (int64_t r = 0; r < static_cast<int64_t>(kept_.size()); ++r) {
    std::string& line = kept_[static_cast<size_t>(r)];
    for (size_t k = 0; k < kept_texts.size(); ++k) {
      if (k > 0) line.push_back(',');
      AppendKept(kept_texts[k][static_cast<size_t>(r)], &line);
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<int64_t> ParquetRowReader::ReadRowsImpl(int64_t max_rows, std::vector<T>* out,
                                                       std::vector<std::string>* kept) {
  out->clear();
  if (kept != nullptr) kept->clear();
  if (failed_) return absl::FailedPreconditionError(absl::StrCat(source_, ": read after an error"));
  while (next_ >= group_rows_) {
    if (group_ + 1 >= file_.num_row_groups()) return 0;
    ++group_;
    if (absl::Status s = LoadGroup(); !s.ok()) {
      failed_ = true;
      return s;
    }
  }
  const int64_t n = std::min(max_rows, group_rows_ - next_);
  const int64_t cols = layout_.row_cols;
  const double* first = values_.data() + next_ * cols;
  out->assign(first, first + n * cols);  // float: each double cast, as a CSV field is
  if (kept != nullptr && !kept_.empty()) {
    kept->assign(kept_.begin() + next_, kept_.begin() + next_ + n);
  }
  next_ += n;
  rows_read_ += n;
  return n;
}

absl::StatusOr<int64_t> ParquetRowReader::ReadRows(int64_t max_rows, std::vector<float>* out,
                                                   std::vector<std::string>* kept) {
  return ReadRowsImpl(max_rows, out, kept);
}

absl::StatusOr<int64_t> ParquetRowReader::ReadRows(int64_t max_rows, std::vector<double>* out,
                                                   std::vector<std::string>* kept) {
  return ReadRowsImpl(max_rows, out, kept);
}

}  // namespace grove
