#include "core/model/catboost_ctr.h"

#include <cstddef>

namespace grove {
namespace {

struct CtrTypeName {
  CatboostCtrType type;
  absl::string_view name;
};
constexpr CtrTypeName kCtrTypeNames[] = {
    {CatboostCtrType::kBorders, "Borders"},
    {CatboostCtrType::kBuckets, "Buckets"},
    {CatboostCtrType::kCounter, "Counter"},
    {CatboostCtrType::kBinarizedTargetMeanValue, "BinarizedTargetMeanValue"},
};

}  // namespace

const char* CatboostCtrTypeName(CatboostCtrType type) {
  for (const CtrTypeName& t : kCtrTypeNames) {
    if (t.type == type) return t.name.data();
  }
  return "unknown";
}

std::optional<CatboostCtrType> ParseCatboostCtrType(absl::string_view name) {
  for (const CtrTypeName& t : kCtrTypeNames) {
    if (t.name == name) return t.type;
  }
  return std::nullopt;
}

const char* CatboostCtrTypeNames() { return "Borders, Buckets, Counter, BinarizedTargetMeanValue"; }

int CatboostCtrRecordWidth(CatboostCtrType type, int64_t stride) {
  switch (type) {
    case CatboostCtrType::kBorders:
    case CatboostCtrType::kBuckets:
      return stride >= 3 && stride <= (int64_t{1} << 20) ? static_cast<int>(stride - 1) : 0;
    case CatboostCtrType::kCounter:
      return stride == 2 ? 1 : 0;
    case CatboostCtrType::kBinarizedTargetMeanValue:
      return stride == 3 ? 2 : 0;
  }
  return 0;
}

float CatboostCtrValue(const CatboostCtr& ctr, absl::Span<const double> record,
                       double counter_denominator) {
  float numerator = 0;
  float denominator = 0;
  if (!record.empty()) {
    switch (ctr.type) {
      case CatboostCtrType::kBorders:
      case CatboostCtrType::kBuckets: {
        // Integer counts: summed exactly, then made floats once.
        uint64_t good = 0;
        uint64_t total = 0;
        for (size_t c = 0; c < record.size(); ++c) {
          const uint64_t count = static_cast<uint64_t>(record[c]);
          total += count;
          const bool counted = ctr.type == CatboostCtrType::kBorders
                                   ? c > static_cast<size_t>(ctr.target_border_idx)
                                   : c == static_cast<size_t>(ctr.target_border_idx);
          if (counted) good += count;
        }
        numerator = static_cast<float>(good);
        denominator = static_cast<float>(total);
        break;
      }
      case CatboostCtrType::kCounter:
        numerator = static_cast<float>(record[0]);
        break;
      case CatboostCtrType::kBinarizedTargetMeanValue:
        numerator = static_cast<float>(record[0]);
        denominator = static_cast<float>(record[1]);
        break;
    }
  }
  if (ctr.type == CatboostCtrType::kCounter) {
    denominator = static_cast<float>(counter_denominator);
  }
  const float value = (numerator + ctr.prior_numerator) / (denominator + ctr.prior_denominator);
  return (value + ctr.shift) * ctr.scale;
}

}  // namespace grove
