// CatBoost CTRs (target statistics of a categorical feature) as a CatBoost JSON
// model records them: the kinds Grove computes exactly and the value of one for
// a category, from the counts its table (ctr_data) files under the category's
// key (CatboostCtrKey, core/model/catboost_hash.h).
//
// A CTR over one categorical feature is a function of that feature's category
// alone (the counts of the category's key, or the prior alone for a category
// the table does not hold), so the loader turns each split `ctr > border` on it
// into a categorical split of the feature (core/model/catboost_loader.cc).
//
// Value (float arithmetic throughout, as CatBoost computes it: a border placed
// between the float and the double result routes as the float one does):
//   ctr = (numerator + prior_numerator) / (denominator + prior_denominator)
//   value = (ctr + shift) * scale
// with, from the category's record (the numbers after its key in hash_map; an
// absent category has numerator 0 and denominator 0, except Counter's
// denominator):
//   Borders: one count per target class; numerator the counts of classes above
//            target_border_idx, denominator their total;
//   Buckets: one count per target class; numerator the count of class
//   target_border_idx,
//            denominator their total;
//   Counter: one count; numerator it, denominator the table's
//   counter_denominator; BinarizedTargetMeanValue: [sum of binarized targets,
//   count]; numerator the sum, denominator
//            the count.
// Other kinds (FloatTargetMeanValue and the GPU-only frequency CTRs) are not
// computed: their values could not be checked against CatBoost here.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace grove {

enum class CatboostCtrType : uint8_t {
  kBorders,
  kBuckets,
  kCounter,
  kBinarizedTargetMeanValue,
};
// The name CatBoost writes (ctr_type), and its parse; nullopt for a kind Grove
// does not compute.
const char* CatboostCtrTypeName(CatboostCtrType type);
std::optional<CatboostCtrType> ParseCatboostCtrType(absl::string_view name);
// The comma-separated names of the kinds Grove computes, for errors and docs.
const char* CatboostCtrTypeNames();
// Numbers a record of `type` holds after its key for a table of `stride`
// (hash_stride: the key and the numbers): Borders and Buckets stride - 1 >= 2
// (one per class), Counter 1, BinarizedTargetMeanValue 2; 0 when the stride
// does not fit the kind.
int CatboostCtrRecordWidth(CatboostCtrType type, int64_t stride);

struct CatboostCtr {
  CatboostCtrType type = CatboostCtrType::kBorders;
  int32_t target_border_idx = 0;
  float prior_numerator = 0;
  float prior_denominator = 1;
  float shift = 0;
  float scale = 1;
};

// The CTR's value for a category whose record is `record`
// (CatboostCtrRecordWidth numbers; empty for a category the table does not
// hold). `counter_denominator` is the table's (Counter only). Preconditions
// (the loader checks them): the record has the kind's width, target_border_idx
// is one of its classes (Borders: below the last one).
float CatboostCtrValue(const CatboostCtr& ctr, absl::Span<const double> record,
                       double counter_denominator);

}  // namespace grove
