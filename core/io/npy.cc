#include "core/io/npy.h"

#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace grove {
namespace {

constexpr absl::string_view kMagic = "\x93NUMPY";

struct Dtype {
  const char* descr;
  int bytes;
  double (*load)(const unsigned char* p);
};

template <typename T>
double Load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // little-endian hosts only (x86-64, aarch64), as the build
  return static_cast<double>(v);
}

double LoadBool(const unsigned char* p) { return *p != 0 ? 1.0 : 0.0; }

constexpr Dtype kDtypes[] = {
    {"<f4", 4, &Load<float>},    {"<f8", 8, &Load<double>},   {"<i4", 4, &Load<int32_t>},
    {"<i8", 8, &Load<int64_t>},  {"|i1", 1, &Load<int8_t>},   {"|u1", 1, &Load<uint8_t>},
    {"<i2", 2, &Load<int16_t>},  {"<u2", 2, &Load<uint16_t>}, {"<u4", 4, &Load<uint32_t>},
    {"<u8", 8, &Load<uint64_t>}, {"|b1", 1, &LoadBool},
};

// The header fields, as numpy writes them.
struct Header {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<int64_t>> shape;
};

// Parser of the header's Python dict literal: strings, True/False, tuples of integers.
class HeaderParser {
 public:
  HeaderParser(absl::string_view text, absl::string_view source) : text_(text), source_(source) {}

  absl::StatusOr<Header> Parse() {
    Header h;
    if (!Eat('{')) return Error("the header is not a dict");
    while (!Eat('}')) {
      absl::StatusOr<std::string> key = String();
      if (!key.ok()) return key.status();
      if (!Eat(':')) return Error(absl::StrCat("no ':' after '", *key, "'"));
      if (absl::Status s = Field(*key, &h); !s.ok()) return s;
      if (!Eat(',') && !Peek('}')) return Error("expected ',' or '}' in the header");
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("characters after the header's dict");
    if (!h.descr || !h.fortran_order || !h.shape) {
      return Error("the header lacks 'descr', 'fortran_order' or 'shape'");
    }
    return h;
  }

 private:
  absl::Status Field(const std::string& key, Header* h) {
    if (key == "descr" && !h->descr) {
      absl::StatusOr<std::string> s = String();
      if (!s.ok()) return s.status();
      h->descr = *s;
    } else if (key == "fortran_order" && !h->fortran_order) {
      absl::StatusOr<bool> b = Bool();
      if (!b.ok()) return b.status();
      h->fortran_order = *b;
    } else if (key == "shape" && !h->shape) {
      absl::StatusOr<std::vector<int64_t>> t = Tuple();
      if (!t.ok()) return t.status();
      h->shape = std::move(*t);
    } else {
      return Error(absl::StrCat("unexpected or repeated header key '", key, "'"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> String() {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      return Error("expected a quoted string in the header");
    }
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == absl::string_view::npos) return Error("unterminated string in the header");
    std::string s(text_.substr(pos_, end - pos_));
    if (s.find('\\') != std::string::npos) return Error("escapes in header strings are refused");
    pos_ = end + 1;
    return s;
  }

  absl::StatusOr<bool> Bool() {
    SkipSpace();
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    return Error("'fortran_order' must be True or False");
  }

  absl::StatusOr<std::vector<int64_t>> Tuple() {
    if (!Eat('(')) return Error("'shape' must be a tuple");
    std::vector<int64_t> dims;
    while (!Eat(')')) {
      SkipSpace();
      int64_t d = 0;
      size_t digits = 0;
      for (; pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9'; ++pos_, ++digits) {
        if (d > (std::numeric_limits<int64_t>::max() - 9) / 10) {
          return Error("a 'shape' dimension is too large");
        }
        d = d * 10 + (text_[pos_] - '0');
      }
      if (digits == 0) return Error("'shape' must hold non-negative integers");
      if (dims.size() >= 32) return Error("'shape' has more than 32 dimensions");
      dims.push_back(d);
      if (!Eat(',') && !Peek(')')) return Error("expected ',' or ')' in 'shape'");
    }
    return dims;
  }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n')) ++pos_;
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  bool Eat(char c) {
    if (!Peek(c)) return false;
    ++pos_;
    return true;
  }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": not a valid .npy file: ", what));
  }

  absl::string_view text_;
  absl::string_view source_;
  size_t pos_ = 0;
};

absl::Status Bad(absl::string_view source, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": not a valid .npy file: ", what));
}

// The header's text and where the data starts.
absl::Status SplitHeader(absl::string_view bytes, absl::string_view source, absl::string_view* header,
                         size_t* data_begin) {
  if (bytes.size() < kMagic.size() + 2 || bytes.substr(0, kMagic.size()) != kMagic) {
    return Bad(source, "no \\x93NUMPY magic string");
  }
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  const int major = u[6];
  size_t len_bytes;
  if (major == 1) {
    len_bytes = 2;
  } else if (major == 2 || major == 3) {
    len_bytes = 4;
  } else {
    return Bad(source, absl::StrCat("format version ", major, ".", int{u[7]},
                                    " (1.0, 2.0 and 3.0 are read)"));
  }
  const size_t start = kMagic.size() + 2 + len_bytes;
  if (bytes.size() < start) return Bad(source, "truncated header length");
  uint64_t len = 0;
  for (size_t i = 0; i < len_bytes; ++i) len |= uint64_t{u[8 + i]} << (8 * i);
  if (len > bytes.size() - start) return Bad(source, "the header runs past the end of the file");
  *header = bytes.substr(start, len);
  *data_begin = start + len;
  return absl::OkStatus();
}

// Values in the file's order -> C order.
void Transpose(const std::vector<int64_t>& shape, std::vector<double>* values) {
  if (shape.size() < 2) return;
  std::vector<double> c(values->size());
  std::vector<int64_t> index(shape.size(), 0);
  // Fortran order: the first index varies fastest; walk the file in that order.
  for (size_t f = 0; f < values->size(); ++f) {
    int64_t offset = 0;
    for (size_t d = 0; d < shape.size(); ++d) offset = offset * shape[d] + index[d];
    c[offset] = (*values)[f];
    for (size_t d = 0; d < shape.size() && ++index[d] == shape[d]; ++d) index[d] = 0;
  }
  *values = std::move(c);
}

}  // namespace

absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, absl::string_view source,
                                  int64_t max_values) {
  absl::string_view header_text;
  size_t data_begin = 0;
  if (absl::Status s = SplitHeader(bytes, source, &header_text, &data_begin); !s.ok()) return s;
  absl::StatusOr<Header> header = HeaderParser(header_text, source).Parse();
  if (!header.ok()) return header.status();
  const Dtype* dtype = nullptr;
  for (const Dtype& d : kDtypes) {
    if (*header->descr == d.descr) dtype = &d;
  }
  if (dtype == nullptr) {
    return Bad(source, absl::StrCat("dtype '", *header->descr,
                                    "' (read: <f4, <f8, |i1, <i2, <i4, <i8, |u1, <u2, <u4, "
                                    "<u8, |b1; save with astype('<f8') for others)"));
  }
  int64_t count = 1;
  for (int64_t d : *header->shape) {
    if (d != 0 && count > max_values / d) {
      return Bad(source, absl::StrCat("the shape holds more than ", max_values, " values"));
    }
    count *= d;
  }
  const absl::string_view data = bytes.substr(data_begin);
  if (static_cast<uint64_t>(data.size()) != static_cast<uint64_t>(count) * dtype->bytes) {
    return Bad(source, absl::StrCat("the shape needs ", count * dtype->bytes, " bytes of data, ",
                                    data.size(), " follow the header"));
  }
  NpyArray out;
  out.shape = *header->shape;
  out.values.resize(static_cast<size_t>(count));
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  for (int64_t i = 0; i < count; ++i) out.values[i] = dtype->load(p + i * dtype->bytes);
  if (*header->fortran_order) Transpose(out.shape, &out.values);
  return out;
}

}  // namespace grove
