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

enum class Kind { kUnknown, kJson, kUbjson, kLightgbm, kTreelite };

absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// A Treelite checkpoint starts with its version as three little-endian int32s: major 3 or 4, then
// a minor and a patch below 256 (no text or JSON format starts with a 3 or 4 byte and zeros).
bool IsTreeliteCheckpoint(std::string_view bytes) {
  if (bytes.size() < 12) return false;
  const auto u = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
  if ((u(0) != 3 && u(0) != 4) || u(1) != 0 || u(2) != 0 || u(3) != 0) return false;
  for (size_t word : {4, 8}) {
    if (u(word + 1) != 0 || u(word + 2) != 0 || u(word + 3) != 0) return false;
  }
  return true;
}

Kind SniffContent(std::string_view bytes) {
  if (IsTreeliteCheckpoint(bytes)) return Kind::kTreelite;
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

// Is this JSON object CatBoost's? Reads the top-level keys in order, skipping their values (strings
// and nesting tracked, no recursion), and stops at the first key that decides: XGBoost's "learner"
// (its first key) or one that only CatBoost writes. CatBoost sorts its keys, so "ctr_data" or
// "features_info" comes first and a large model is decided after a few bytes.
bool IsCatboostJson(std::string_view text) {
  if (absl::StartsWith(Av(text), "\xEF\xBB\xBF")) text.remove_prefix(3);
  size_t i = 0;
  const size_t n = text.size();
  auto skip_space = [&] {
    while (i < n && IsSpace(text[i])) ++i;
  };
  // Moves i past the string starting at text[i] == '"'; false when unterminated.
  auto skip_string = [&]() -> bool {
    for (++i; i < n; ++i) {
      if (text[i] == '\\') {
        ++i;
      } else if (text[i] == '"') {
        ++i;
        return true;
      }
    }
    return false;
  };
  skip_space();
  if (i >= n || text[i] != '{') return false;
  ++i;
  while (true) {
    skip_space();
    if (i >= n || text[i] != '"') return false;
    const size_t key_begin = i + 1;
    if (!skip_string()) return false;
    const std::string_view key = text.substr(key_begin, i - 1 - key_begin);
    if (key == "learner") return false;
    if (key == "features_info" || key == "oblivious_trees" || key == "scale_and_bias" ||
        key == "ctr_data" || key == "model_info") {
      return true;
    }
    skip_space();
    if (i >= n || text[i] != ':') return false;
    ++i;
    // Skip the value up to the ',' or '}' that ends it at this level.
    int depth = 0;
    for (; i < n; ++i) {
      const char c = text[i];
      if (c == '"') {
        if (!skip_string()) return false;
        --i;  // the loop's ++i
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (depth == 0) return false;  // the object ended: no deciding key
        --depth;
      } else if (c == ',' && depth == 0) {
        break;
      }
    }
    if (i >= n) return false;
    ++i;  // the ','
  }
}

Kind FromExtension(std::string_view source) {
  const std::string lower = absl::AsciiStrToLower(Av(source));
  if (absl::EndsWith(Av(lower), ".json")) return Kind::kJson;
  if (absl::EndsWith(Av(lower), ".ubj") || absl::EndsWith(Av(lower), ".ubjson")) return Kind::kUbjson;
  if (absl::EndsWith(Av(lower), ".txt") || absl::EndsWith(Av(lower), ".lgb")) return Kind::kLightgbm;
  if (absl::EndsWith(Av(lower), ".tl")) return Kind::kTreelite;
  return Kind::kUnknown;
}

}  // namespace

absl::StatusOr<ForestPtr> LoadModelBytes(std::string_view bytes, std::string source) {
  Kind kind = SniffContent(bytes);
  if (kind == Kind::kUnknown) kind = FromExtension(source);
  switch (kind) {
    case Kind::kJson:
      if (IsCatboostJson(bytes)) return LoadCatboostJson(bytes, std::move(source));
      return LoadXgboostJson(bytes, std::move(source));
    case Kind::kUbjson: return LoadXgboostUbjson(bytes, std::move(source));
    case Kind::kLightgbm: return LoadLightgbmText(bytes, std::move(source));
    case Kind::kTreelite: return LoadTreeliteCheckpoint(bytes, std::move(source));
    case Kind::kUnknown: break;
  }
  if (absl::EndsWith(source, ".cbm") || absl::StartsWith(Av(bytes), "CBM1")) {
    return absl::InvalidArgumentError(absl::StrCat(
        source.empty() ? std::string("<memory>") : source,
        ": CatBoost's native binary model (.cbm), which Grove does not read (its FlatBuffers "
        "schema is internal to CatBoost): save it as JSON "
        "(model.save_model(\"catboost.json\", format=\"json\"))"));
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
                   ": unrecognised model format (expected XGBoost JSON or UBJSON, LightGBM "
                   "text, CatBoost JSON or a Treelite checkpoint)"));
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
