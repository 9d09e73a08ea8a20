// KServe v2 columnar requests: one input tensor per feature, named by the model's feature name
// (FeatureNamesOrDefault: f0, f1, ... for a model without names), as a DataFrame's columns are
// sent -- the form that lets a request carry category names (BYTES) next to numbers. The other
// form, one FP32/FP64 tensor input__0 [rows, F], is parsed by ParseKserveInput (kserve_convert.h),
// which hands every other request here.
//
// Each input: shape [rows] or [rows, 1] (the same rows for all), every feature exactly once,
// contents typed (contents.*_contents of its datatype) or raw (raw_input_contents, one entry per
// input in input order, little-endian; BYTES elements are a 4-byte little-endian length and then
// the bytes, as Triton lays them out), never in shared memory. Datatypes:
//  * BYTES: category names of a feature whose categories the model file records, mapped by
//    CategoryCodes (core/model/category_codes.h): the empty string is missing; an unknown name is
//    missing (LightGBM) or INVALID_ARGUMENT (XGBoost);
//  * BOOL (0/1), INT8/16/32/64, UINT8/16/32/64, FP32, FP64: the numbers the model sees (category
//    codes for a categorical feature, as in input__0), converted like Matrix.values_f64 (the float
//    rows that route as the model's library routes these doubles).
// Every error is INVALID_ARGUMENT naming the input.
//
// Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/registry/model_registry.h"
#include "inference/grpc_service.pb.h"

namespace grove::server {

// The elements of a raw BYTES tensor: exactly `count` of them, filling `raw` (INVALID_ARGUMENT
// naming `what` otherwise); the views point into `raw`.
absl::StatusOr<std::vector<absl::string_view>> SplitKserveBytes(absl::string_view raw,
                                                                int64_t count,
                                                                absl::string_view what);

// The rows of a columnar request, row-major [rows, F] into `*out` (resized). `received_raw`
// (non-empty): the request's one raw_input_contents entry received apart from the message.
absl::Status ParseKserveColumns(const registry::ModelVersion& model,
                                const inference::ModelInferRequest& request,
                                absl::string_view received_raw, int64_t* rows,
                                std::vector<float>* out);

}  // namespace grove::server
