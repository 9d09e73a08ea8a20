// libFuzzer target for the wire scanner of large requests (server/grpc/wire_rows.h): arbitrary bytes,
// cut into pieces of a size taken from the first byte (as gRPC's slices cut a message), split as
// a PredictRequest, an ExplainRequest and a KServe ModelInferRequest. Whatever is split must be split exactly: parsing the
// rest fails exactly when parsing the whole bytes fails, and otherwise, with raw_f32 set to the
// payload, equals the whole parse. Never a crash or a sanitizer report.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "google/protobuf/stubs/logging.h"
#include "grove/v1/grove.pb.h"
#include "inference/grpc_service.pb.h"
#include "server/grpc/wire_rows.h"
#include "tests/testing/canonical_proto.h"

namespace {

// Sets the payload field of a parsed rest: grove.v1's Matrix.raw_f32, KServe's raw_input_contents.
void SetPayload(grove::v1::PredictRequest* m, const std::string& p) {
  m->mutable_rows()->set_raw_f32(p);
}
void SetPayload(grove::v1::ExplainRequest* m, const std::string& p) {
  m->mutable_rows()->set_raw_f32(p);
}
void SetPayload(inference::ModelInferRequest* m, const std::string& p) {
  m->add_raw_input_contents(p);
}
bool PayloadEmpty(const grove::v1::PredictRequest& m) { return m.rows().raw_f32().empty(); }
bool PayloadEmpty(const grove::v1::ExplainRequest& m) { return m.rows().raw_f32().empty(); }
bool PayloadEmpty(const inference::ModelInferRequest& m) { return m.raw_input_contents_size() == 0; }

template <typename Message>
void CheckExact(const std::string& bytes, const std::vector<grove::server::WirePiece>& pieces,
                grove::server::RawRowsField where) {
  std::optional<grove::server::RawRowsSplit> split =
      grove::server::SplitRawRows(pieces, where, /*min_payload=*/1);
  if (!split.has_value()) return;
  std::string payload;
  for (const grove::server::WirePiece& p : split->payload) payload.append(p.data, p.size);
  if (payload.size() != split->payload_bytes || payload.empty()) std::abort();
  Message whole, parts;
  const bool whole_ok = whole.ParseFromString(bytes);
  if (whole_ok != parts.ParseFromString(split->rest)) std::abort();
  if (!whole_ok) return;
  if (!PayloadEmpty(parts)) std::abort();
  SetPayload(&parts, payload);
  // As bytes: field by field, a NaN value would differ from itself.
  if (grove::testing::CanonicalBytes(whole) != grove::testing::CanonicalBytes(parts)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 in strings is logged per parse
    return true;
  }();
  (void)quiet;
  if (size == 0) return 0;
  const size_t piece = 1 + data[0];
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<grove::server::WirePiece> pieces;
  for (size_t at = 0; at < bytes.size(); at += piece) {
    pieces.push_back(grove::server::WirePiece{bytes.data() + at, std::min(piece, bytes.size() - at)});
  }
  CheckExact<grove::v1::PredictRequest>(bytes, pieces, grove::server::kGroveRawRows);
  CheckExact<grove::v1::ExplainRequest>(bytes, pieces, grove::server::kGroveRawRows);
  CheckExact<inference::ModelInferRequest>(bytes, pieces, grove::server::kKserveRawRows);
  return 0;
}
