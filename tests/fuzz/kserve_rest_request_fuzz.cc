// libFuzzer target for the KServe v2 REST request parser (server/kserve/kserve_rest.h): arbitrary bytes as
// an infer request body, with the first input byte choosing an Inference-Header-Content-Length
// (absent, or a position in the body), then converted as ModelInfer does for several models; the
// answers it would send are encoded too. Every step answers OK or INVALID_ARGUMENT; what parses
// converts into a rows x cols view that can be read whole. Routes and repository request bodies
// and shared memory registration bodies are parsed from the same bytes; inputs may name the
// registered shared memory region of request_fuzz_common.h.
// Never a crash, a sanitizer report or an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/kserve/kserve_convert.h"
#include "server/kserve/kserve_rest.h"
#include "tests/fuzz/request_fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int64_t header_length = data[0] == 0 ? -1 : static_cast<int64_t>(data[0]) - 1;
  const absl::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  absl::StatusOr<grove::server::RestRoute> route =
      grove::server::ParseRestRoute(data[0] % 2 ? "GET" : "POST", body.substr(0, 64));
  if (!route.ok() && route.status().code() != absl::StatusCode::kNotFound) {
    grove::fuzz::CheckRequestStatus(route.status());
  }
  // The same bytes as a repository request body (index, or load / unload parameters).
  inference::RepositoryIndexRequest index;
  inference::RepositoryModelLoadRequest control;
  const grove::server::RestOp op = data[0] % 2 ? grove::server::RestOp::kRepositoryIndex
                                               : grove::server::RestOp::kRepositoryModelLoad;
  grove::fuzz::CheckRequestStatus(
      grove::server::ParseRestRepositoryRequest(body, op, &index, &control));
  // The same bytes as a shared memory registration body.
  inference::SystemSharedMemoryRegisterRequest reg;
  grove::fuzz::CheckRequestStatus(grove::server::ParseRestSharedMemoryRegister(body, &reg));
  inference::ModelInferRequest req;
  absl::Status parsed = grove::server::ParseRestInferRequest(body, header_length, 1 << 20, &req);
  grove::fuzz::CheckRequestStatus(parsed);
  if (!parsed.ok()) return 0;
  grove::fuzz::CheckRequestStatus(grove::server::ParseKserveOutputs(req).status());
  for (const auto& m : grove::fuzz::RequestModels()) {
    absl::StatusOr<grove::server::KserveInput> input =
        grove::server::ParseKserveInput(*m, req, &grove::fuzz::RequestSharedMemory());
    grove::fuzz::CheckRequestStatus(input.status());
    if (input.ok()) grove::fuzz::TouchRows(input->rows, m->forest().num_features);
  }
  // The request's outputs encoded as a response (JSON or binary as the request asks).
  inference::ModelInferResponse resp;
  for (const auto& o : req.outputs()) {
    resp.add_outputs()->set_name(o.name());
    resp.add_raw_output_contents(std::string(8, '\x7f'));
  }
  int64_t json_length = 0;
  const std::string out = grove::server::RestInferResponse(req, resp, &json_length);
  if (json_length > static_cast<int64_t>(out.size())) std::abort();
  return 0;
}
