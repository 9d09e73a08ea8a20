// libFuzzer target for the grove.v1 request converter (server/grove_v1/grove_convert.h): arbitrary
// bytes parsed as a PredictRequest and as an ExplainRequest, then validated and converted as Predict / Explain do,
// for several models and row limits, with a registered shared memory region the requests may name
// (rows in shared_memory_f32 / _f64, results in output_shared_memory). Every check answers OK or
// INVALID_ARGUMENT / FAILED_PRECONDITION / NOT_FOUND (an unknown region); whatever passes is a
// rows x cols view that can be read whole, and every explain_rows index is a row of it; results
// come back in the rows' form (raw_f32 for raw and shared memory rows), and a shared memory output
// range that passes holds every result. Never a crash, a sanitizer report or an unbounded
// allocation.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/explain/explain.h"
#include "server/grove_v1/grove_convert.h"
#include "tests/fuzz/request_fuzz_common.h"

namespace {

using grove::fuzz::CheckRequestStatus;

// Results go back in the rows' form: a raw request's results are raw_f32 bytes of rows x 2 floats
// that MatrixData reads back, a repeated-field request's are `values`.
void ResultsInRowsForm(const grove::v1::Matrix& rows_matrix, int64_t rows) {
  const bool raw = grove::server::IsRawMatrix(rows_matrix);
  grove::v1::Matrix result;
  grove::MatrixView<float> out = grove::server::ResizeMatrix(&result, rows, 2, raw);
  out.data[0] = 1.5f;
  out.data[rows * 2 - 1] = 2.5f;
  if (raw != !result.raw_f32().empty() || raw == (result.values_size() > 0)) std::abort();
  const float* data = grove::server::MatrixData(result);
  if (data[0] != 1.5f || data[rows * 2 - 1] != 2.5f) std::abort();
}

// output_shared_memory: resolved and checked as Predict / Explain do, for results of the given
// shapes; every result view is written whole and copied into the region.
void SharedResults(const grove::v1::SharedMemoryRange& range,
                   const std::vector<grove::server::ResultShape>& shapes,
                   const grove::serving::SharedMemorySpan& rows) {
  absl::StatusOr<grove::serving::SharedMemorySpan> span = grove::server::ResolveSharedMemory(
      grove::fuzz::RequestSharedMemory(), range, "output_shared_memory");
  CheckRequestStatus(span.status());
  if (!span.ok()) return;
  absl::StatusOr<grove::server::SharedMemoryResults> results =
      grove::server::SharedMemoryResults::Create(range, *span, shapes, rows);
  CheckRequestStatus(results.status());
  if (!results.ok()) return;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const grove::MatrixView<float> v = results->View(i);
    for (int64_t r = 0; r < v.rows; ++r) {
      for (int64_t c = 0; c < v.cols; ++c) v.At(r, c) = 1.0f;
    }
    grove::v1::Matrix described;
    results->Describe(i, &described);
    if (described.shared_memory_f32().offset() < range.offset()) std::abort();
  }
  results->Flush();
}

void Predict(const grove::registry::ModelVersion& model, const grove::v1::PredictRequest& req) {
  std::vector<float> converted;
  grove::serving::SharedMemorySpan span;
  absl::StatusOr<grove::RowsView> rows = grove::server::RowsFromMatrix(
      model, req.rows(), &converted, &grove::fuzz::RequestSharedMemory(), &span);
  CheckRequestStatus(rows.status());
  CheckRequestStatus(grove::server::CheckIterationRange(model.forest(), req.iteration_begin(),
                                                        req.iteration_end()));
  CheckRequestStatus(grove::server::ResolveOutputs(model, req).status());
  if (!rows.ok()) return;
  grove::fuzz::TouchRows(*rows, model.forest().num_features);
  ResultsInRowsForm(req.rows(), rows->rows);
  if (req.has_output_shared_memory() && rows->rows <= 4096) {
    SharedResults(req.output_shared_memory(),
                  {{rows->rows, model.forest().num_outputs}, {rows->rows, 1}}, span);
  }
  const absl::Status explain_rows = grove::server::CheckExplainRows(model, req, rows->rows);
  CheckRequestStatus(explain_rows);
  if (!explain_rows.ok()) return;
  if (req.explain_rows_size() > model.config->max_request_rows) std::abort();
  float sink = 0;
  for (int64_t r : req.explain_rows()) sink += rows->Row(r)[rows->cols - 1];
  if (sink == 12345.678f) std::abort();
}

void Explain(const grove::registry::ModelVersion& model, const grove::v1::ExplainRequest& req) {
  std::vector<float> converted;
  grove::serving::SharedMemorySpan span;
  absl::StatusOr<grove::RowsView> rows = grove::server::RowsFromMatrix(
      model, req.rows(), &converted, &grove::fuzz::RequestSharedMemory(), &span);
  CheckRequestStatus(rows.status());
  if (rows.ok()) grove::fuzz::TouchRows(*rows, model.forest().num_features);
  if (rows.ok() && req.has_output_shared_memory() && rows->rows <= 4096) {
    SharedResults(req.output_shared_memory(),
                  {{rows->rows, grove::ExplainWidth(model.forest(), false)}}, span);
  }
  CheckRequestStatus(grove::server::CheckIterationRange(model.forest(), req.iteration_begin(),
                                                        req.iteration_end()));
  absl::StatusOr<grove::server::ExplainChoice> choice =
      grove::server::ExplainChoiceFromRequest(req);
  CheckRequestStatus(choice.status());
  if (choice.ok()) {
    CheckRequestStatus(grove::server::CheckExplainChoice(model, *choice, req.interactions()));
  }
  absl::StatusOr<grove::FeatureGroupsPtr> groups = grove::server::GroupsFromRequest(model, req);
  CheckRequestStatus(groups.status());
  if (groups.ok() && *groups != nullptr) {
    const grove::FeatureGroups& g = **groups;
    if (static_cast<int>(g.group_of.size()) != model.forest().num_features) std::abort();
    for (int32_t group : g.group_of) {
      if (group < 0 || group >= g.num_groups()) std::abort();
    }
    grove::v1::ExplainResponse response;
    grove::server::DescribeGroups(g, response.mutable_groups());
    if (response.groups_size() != g.num_groups()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& models = grove::fuzz::RequestModels();
  grove::v1::PredictRequest predict;
  if (predict.ParseFromArray(data, static_cast<int>(size))) {
    for (const auto& m : models) Predict(*m, predict);
  }
  grove::v1::ExplainRequest explain;
  if (explain.ParseFromArray(data, static_cast<int>(size))) {
    for (const auto& m : models) Explain(*m, explain);
  }
  return 0;
}
