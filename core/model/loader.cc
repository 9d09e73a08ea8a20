// Model file dispatch: sniff the content, then fall back on the extension.
#include "core/model/loader.h"

#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/io/file.h"

namespace grove {
namespace {

enum class Kind { kUnknown, kJson, kUbjson, kLightgbm };

absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

Kind SniffContent(std::string_view bytes) {
  // UBJSON: '{' then a key-length marker (or a count/type/no-op marker); never whitespace.
  if (bytes.size() >= 2 && bytes[0] == '{') {
    switch (bytes[1]) {
      case 'i': case 'U': case 'I': case 'l': case 'L':  // key length
      case '#': case '$':                                // counted / typed object
      case 'N':                                          // no-op
      case 'S':                                          // key with a string marker
        return Kind::kUbjson;
      default:
        break;
    }
  }
  std::string_view text = bytes;
  if (absl::StartsWith(Av(text), "\xEF\xBB\xBF")) text.remove_prefix(3);  // UTF-8 BOM
  while (!text.empty() && IsSpace(text.front())) text.remove_prefix(1);
  if (!text.empty() && text.front() == '{') {
    text.remove_prefix(1);
    while (!text.empty() && IsSpace(text.front())) text.remove_prefix(1);
    if (text.empty() || text.front() == '"' || text.front() == '}') return Kind::kJson;
    return Kind::kUnknown;
  }
  // LightGBM text: a "tree" line first, or a "version=" line among the first ones.
  if (text == "tree" || absl::StartsWith(Av(text), "tree\n") || absl::StartsWith(Av(text), "tree\r\n") ||
      absl::StartsWith(Av(text), "version=")) {
    return Kind::kLightgbm;
  }
  const std::string_view head = text.substr(0, 4096);
  if (absl::StrContains(Av(head), "\nversion=") && absl::StrContains(Av(head), "\nnum_class=")) {
    return Kind::kLightgbm;
  }
  return Kind::kUnknown;
}

Kind FromExtension(std::string_view source) {
  const std::string lower = absl::AsciiStrToLower(Av(source));
  if (absl::EndsWith(Av(lower), ".json")) return Kind::kJson;
  if (absl::EndsWith(Av(lower), ".ubj") || absl::EndsWith(Av(lower), ".ubjson")) return Kind::kUbjson;
  if (absl::EndsWith(Av(lower), ".txt") || absl::EndsWith(Av(lower), ".lgb")) return Kind::kLightgbm;
  return Kind::kUnknown;
}

}  // namespace

absl::StatusOr<ForestPtr> LoadModelBytes(std::string_view bytes, std::string source) {
  Kind kind = SniffContent(bytes);
  if (kind == Kind::kUnknown) kind = FromExtension(source);
  switch (kind) {
    case Kind::kJson: return LoadXgboostJson(bytes, std::move(source));
    case Kind::kUbjson: return LoadXgboostUbjson(bytes, std::move(source));
    case Kind::kLightgbm: return LoadLightgbmText(bytes, std::move(source));
    case Kind::kUnknown: break;
  }
  if (absl::EndsWith(source, ".model") || absl::EndsWith(source, ".bin") ||
      bytes.substr(0, 16).find("binf") != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        source.empty() ? std::string("<memory>") : source,
        ": neither XGBoost JSON nor UBJSON: XGBoost's legacy binary format (written before "
        "XGBoost 2.1 into .model / .bin files), which Grove does not read: load it with XGBoost "
        "and save it as UBJSON or JSON (xgboost.Booster(model_file=PATH).save_model("
        "\"xgboost.ubj\"))"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(source.empty() ? std::string("<memory>") : source,
                   ": unrecognised model format (expected XGBoost JSON or UBJSON, or LightGBM "
                   "text)"));
}

absl::StatusOr<ForestPtr> LoadModelFile(const std::string& path) {
  int64_t file_size = 0;
  absl::StatusOr<ScopedFd> fd = OpenRegularFile(path, &file_size);
  if (!fd.ok()) return fd.status();
  const size_t size = static_cast<size_t>(file_size);
  // new char[] leaves the buffer uninitialised: no zero-filling of a 250 MB model.
  std::unique_ptr<char[]> buffer(new char[size == 0 ? 1 : size]);
  size_t done = 0;
  while (done < size) {
    const ssize_t got = ::read(fd->get(), buffer.get() + done, size - done);
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, path, "cannot read");
    }
    if (got == 0) break;  // the file shrank while being read
    done += static_cast<size_t>(got);
  }
  return LoadModelBytes(std::string_view(buffer.get(), done), path);
}

}  // namespace grove
