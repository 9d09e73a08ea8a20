// libFuzzer target for the KServe v2 request converter (server/convert.h): arbitrary bytes parsed as
// a ModelInferRequest, then version, input tensor, outputs and the explanation's request
// parameters (method, output_space) converted and checked as ModelInfer does, for
// several models and row limits. Every step answers OK or INVALID_ARGUMENT; an input that passes is
// a rows x cols view that can be read whole (raw or typed, FP32 or FP64). Never a crash, a sanitizer
// report or an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "server/convert.h"
#include "tests/fuzz/request_fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<int64_t> version = grove::server::ParseKserveVersion(req.model_version());
  grove::fuzz::CheckRequestStatus(version.status());
  if (version.ok() && *version < 0) std::abort();
  grove::fuzz::CheckRequestStatus(grove::server::ParseKserveOutputs(req).status());
  absl::StatusOr<grove::server::ExplainChoice> choice = grove::server::ExplainChoiceFromKserve(req);
  grove::fuzz::CheckRequestStatus(choice.status());
  for (const auto& m : grove::fuzz::RequestModels()) {
    if (choice.ok()) {
      grove::fuzz::CheckRequestStatus(grove::server::CheckExplainChoice(*m, *choice, false));
    }
    absl::StatusOr<grove::server::KserveInput> input = grove::server::ParseKserveInput(*m, req);
    grove::fuzz::CheckRequestStatus(input.status());
    if (input.ok()) grove::fuzz::TouchRows(input->rows, m->forest->num_features);
  }
  return 0;
}
