// Receiving a large request's rows without the Protobuf copy: a scanner of the Protobuf wire format
// that finds a request's raw rows (grove.v1 Matrix.raw_f32, KServe raw_input_contents) in the
// pieces gRPC received it in (the slices of a grpc::ByteBuffer), so that the transport copies the
// rows once, from those slices into a reusable (page-locked, with a GPU) buffer, in parallel, and
// parses only the rest of the request as a message. Parsed whole, Protobuf would copy the payload
// into a std::string on the receiving thread and the GPU engines would copy it again into their
// staging buffers.
//
// The split is exact or not done: SplitRawRows handles the one form clients send (the payload
// field once -- and its enclosing message field once -- among well-formed fields) and answers
// nullopt for anything else -- a repeated field (Protobuf merges messages, keeps the last bytes,
// or appends to a repeated one), a group, a field whose wire type is not its declared one,
// malformed or truncated bytes -- which the caller parses whole as before. For every split,
// parsing `rest` and setting the payload field gives exactly the message that parsing the whole
// bytes gives, and parsing `rest` fails exactly when parsing the whole fails
// (tests/server/grpc/wire_rows_test.cc, tests/fuzz/wire_rows_fuzz.cc).
//
// No gRPC here (the fuzz preset builds it without). Thread-safe: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace grove::server {

// Requests of at least this many payload bytes are split (below, a copy is cheap next to the
// call's other costs and the whole parse is kept).
inline constexpr size_t kMinSplitPayloadBytes = size_t{256} << 10;

// One contiguous piece of serialized bytes.
struct WirePiece {
  const char* data;
  size_t size;
};

// Where a request keeps its raw rows: bytes field `inner` of its message field `field`, or, with
// `inner` 0, bytes field `field` of the request itself.
struct RawRowsField {
  int field = 0;
  int inner = 0;
};
// grove.v1 PredictRequest.rows / ExplainRequest.rows (3), Matrix.raw_f32 (5).
inline constexpr RawRowsField kGroveRawRows{3, 5};
// KServe ModelInferRequest.raw_input_contents (7).
inline constexpr RawRowsField kKserveRawRows{7, 0};

struct RawRowsSplit {
  // The request's bytes without the payload field (the enclosing message's length adjusted).
  std::string rest;
  // The payload, in order: pieces of the input (pointing into it).
  std::vector<WirePiece> payload;
  size_t payload_bytes = 0;
};

// Splits the serialized request held by `pieces` (in order) when its raw rows at `where` hold at
// least `min_payload` bytes; nullopt otherwise (see the top of this file).
std::optional<RawRowsSplit> SplitRawRows(absl::Span<const WirePiece> pieces, RawRowsField where,
                                         size_t min_payload = kMinSplitPayloadBytes);

}  // namespace grove::server
