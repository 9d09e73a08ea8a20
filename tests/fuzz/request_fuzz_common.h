// Shared by the request converter fuzz targets: the models requests are converted for (a binary
// XGBoost model, a multiclass one and a LightGBM one, whose float64 rows convert differently, and
// an XGBoost and a LightGBM model that record category names, for KServe's BYTES columns and
// grove.v1's category_columns, whose unknown categories differ), each
// with the default limits and with the largest row limit a config.json may set, so that shape
// products near the bounds are exercised.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "google/protobuf/stubs/logging.h"
#include "core/common/rows.h"
#include "core/model/loader.h"
#include "core/registry/model_config.h"
#include "core/registry/model_registry.h"
#include "core/serving/shared_memory.h"

namespace grove::fuzz {

inline const std::vector<registry::ModelVersionPtr>& RequestModels() {
  static const std::vector<registry::ModelVersionPtr>* models = [] {
    // Invalid UTF-8 in string fields is a parse failure the fuzzer meets all the time; Protobuf's
    // log line for each would drown the run.
    google::protobuf::SetLogHandler(nullptr);
    auto* out = new std::vector<registry::ModelVersionPtr>();
    const std::string root = GROVE_SOURCE_DIR;
    for (const char* file : {"/examples/models/demo/1/model.json",
                             "/tests/golden/xgb_multiclass3/model.json",
                             "/tests/golden/lgb_zero_as_missing/model.txt",
                             "/tests/model/data/categories/xgb.json",
                             "/tests/model/data/categories/lgb.txt"}) {
      absl::StatusOr<ForestPtr> forest = LoadModelFile(root + file);
      if (!forest.ok()) std::abort();  // the fuzzer needs its models
      for (int64_t max_rows : {int64_t{65536}, registry::kMaxRequestRows}) {
        auto m = std::make_shared<registry::ModelVersion>();
        m->name = "fuzz";
        m->version = 1;
        EngineOptions options;
        options.device = Device::kCpu;
        options.build = EngineBuild::kOnFirstUse;
        m->servable = *BuildServable(*forest, nullptr, options, nullptr);
        registry::ModelConfig config;
        config.max_request_rows = max_rows;
        m->config = std::make_shared<const registry::ModelConfig>(config);
        out->push_back(std::move(m));
      }
    }
    return out;
  }();
  return *models;
}

// Shared memory the fuzzed requests may name: a 64 KiB object registered whole as region "fuzz"
// and from its byte 3 as region "odd" (unaligned rows and results). The object is unlinked at once
// (the mappings keep it), so runs leave nothing in /dev/shm. Both belong to the owner "" (a server
// without access control), which is what the access returned uses.
inline const serving::SharedMemoryAccess& RequestSharedMemory() {
  static const serving::SharedMemoryAccess* access = [] {
    auto* r = new serving::SharedMemoryRegistry(serving::SharedMemoryOptions());
    const std::string key = "/grove-fuzz-" + std::to_string(getpid());
    const int fd = shm_open(key.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, 65536) != 0) std::abort();
    close(fd);
    if (!r->Register("fuzz", key, 0, 65536, "").ok() ||
        !r->Register("odd", key, 3, 65533, "").ok()) {
      std::abort();
    }
    shm_unlink(key.c_str());
    return new serving::SharedMemoryAccess(r, "");
  }();
  return *access;
}

// Aborts unless `s` is OK or one of the codes a request check may answer (NOT_FOUND: a shared
// memory region that is not registered).
inline void CheckRequestStatus(const absl::Status& s) {
  if (s.ok() || s.code() == absl::StatusCode::kInvalidArgument ||
      s.code() == absl::StatusCode::kFailedPrecondition ||
      s.code() == absl::StatusCode::kNotFound) {
    return;
  }
  std::abort();
}

// Reads and writes every byte of `span` (a range the registry promised is inside its region).
inline void TouchSpan(const serving::SharedMemorySpan& span) {
  volatile char* p = span.data;
  for (uint64_t i = 0; i < span.byte_size; ++i) p[i] = p[i];
}

// Reads every value of `rows` (a view the converter promised is rows x cols): an out-of-bounds
// view is a sanitizer report.
inline void TouchRows(const RowsView& rows, int64_t num_features) {
  if (rows.rows <= 0 || rows.cols != num_features) std::abort();
  double sum = 0;
  for (int64_t r = 0; r < rows.rows; ++r) {
    for (int64_t c = 0; c < rows.cols; ++c) sum += rows.At(r, c);
  }
  if (sum == 12345.678) std::abort();  // keeps `sum` alive; never true in practice
}

}  // namespace grove::fuzz
