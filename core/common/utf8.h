// Text shown through protobuf strings and JSON must be valid UTF-8; names read from model and CSV
// files are bytes. EscapeInvalidUtf8 is the one mapping between them, so that a name reads the
// same in every interface. Thread-safe (pure functions).
#pragma once

#include <string>
#include <string_view>

namespace grove {

// `text` with each byte that is not part of a valid UTF-8 sequence (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF) written as the four characters \xHH (upper-case hex), e.g.
// Latin-1 "caf\xE9" becomes "caf\\xE9"; valid UTF-8 is returned unchanged.
std::string EscapeInvalidUtf8(std::string_view text);

}  // namespace grove
