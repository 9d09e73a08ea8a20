// libFuzzer target for the KServe v2 request converter (server/kserve/kserve_convert.h): arbitrary
// bytes parsed as a ModelInferRequest, then version, input tensor, outputs and the explanation's
// request parameters (method, output_space) converted and checked as ModelInfer does, for
// several models and row limits, with a registered shared memory region that tensors may name
// (Triton's shared_memory_* parameters). Every step answers OK or INVALID_ARGUMENT (NOT_FOUND for
// an unknown region); an input that passes is a rows x cols view that can be read whole (raw,
// typed or in shared memory, FP32 or FP64; one tensor or a column per feature, the raw bytes also
// as the transport hands them over apart from the message), an output range one inside its region,
// feature groups a partition of the model's features. Never a crash, a
// sanitizer report or an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/kserve/kserve_convert.h"
#include "tests/fuzz/request_fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<int64_t> version = grove::server::ParseKserveVersion(req.model_version());
  grove::fuzz::CheckRequestStatus(version.status());
  if (version.ok() && *version < 0) std::abort();
  absl::StatusOr<grove::server::KserveOutputs> outputs = grove::server::ParseKserveOutputs(req);
  grove::fuzz::CheckRequestStatus(outputs.status());
  // Output ranges in shared memory resolve to bytes inside their region.
  if (outputs.ok()) {
    for (const auto& ref : {outputs->prediction_shared_memory, outputs->shap_shared_memory}) {
      if (!ref.has_value()) continue;
      absl::StatusOr<grove::serving::SharedMemorySpan> span =
          grove::fuzz::RequestSharedMemory().Get(ref->region, ref->offset, ref->byte_size, "out");
      grove::fuzz::CheckRequestStatus(span.status());
      if (span.ok()) grove::fuzz::TouchSpan(*span);
    }
  }
  absl::StatusOr<grove::server::ExplainChoice> choice = grove::server::ExplainChoiceFromKserve(req);
  grove::fuzz::CheckRequestStatus(choice.status());
  for (const auto& m : grove::fuzz::RequestModels()) {
    if (choice.ok()) {
      grove::fuzz::CheckRequestStatus(grove::server::CheckExplainChoice(*m, *choice, false));
    }
    absl::StatusOr<grove::server::KserveInput> input =
        grove::server::ParseKserveInput(*m, req, &grove::fuzz::RequestSharedMemory());
    grove::fuzz::CheckRequestStatus(input.status());
    if (input.ok()) grove::fuzz::TouchRows(input->rows, m->forest().num_features);
    // The first raw entry as the transport hands it over apart from the message (the gRPC wire
    // reader), for the one-tensor and the columnar forms alike.
    if (req.raw_input_contents_size() == 1) {
      inference::ModelInferRequest stripped = req;
      const std::string raw = stripped.raw_input_contents(0);
      stripped.clear_raw_input_contents();
      absl::StatusOr<grove::server::KserveInput> apart =
          grove::server::ParseKserveInput(*m, stripped, &grove::fuzz::RequestSharedMemory(), raw);
      grove::fuzz::CheckRequestStatus(apart.status());
      if (apart.ok()) grove::fuzz::TouchRows(apart->rows, m->forest().num_features);
    }
    // The request's feature groups (a JSON parameter), resolved against the model.
    absl::StatusOr<grove::FeatureGroupsPtr> groups = grove::server::GroupsFromKserve(*m, req);
    grove::fuzz::CheckRequestStatus(groups.status());
    if (groups.ok() && *groups != nullptr) {
      const grove::FeatureGroups& g = **groups;
      if (static_cast<int>(g.group_of.size()) != m->forest().num_features) std::abort();
      for (int32_t group : g.group_of) {
        if (group < 0 || group >= g.num_groups()) std::abort();
      }
      if (grove::server::KserveGroupsParameter(g).empty()) std::abort();
    }
  }
  return 0;
}
