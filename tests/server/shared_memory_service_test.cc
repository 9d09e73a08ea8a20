// System shared memory through groved's services (an in-process server with --shared_memory on,
// called through the generated stubs and over REST): rows read from a registered region and results
// written into one are bit-identical to the same request sent inline, for grove.v1 Predict and
// Explain and for KServe ModelInfer, aligned or not, float32 or float64; every range a request
// names is checked; the registration RPCs of both APIs; and a region unregistered while a request
// that uses it waits in its queue stays mapped until that request is answered.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/io/csv.h"
#include "gmock/gmock.h"
#include "grove/v1/grove.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "inference/grpc_service.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "server/server.h"
#include "tests/server/server_testing.h"
#include "tests/testing/shared_memory_object.h"

namespace grove::server {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::SharedMemoryObject;

const std::string kSource = GROVE_SOURCE_DIR;
const std::string kDemo = kSource + "/examples/models/demo/1/model.json";
const std::string kDemoRows = kSource + "/examples/rows.csv";
const std::string kMulti = kSource + "/tests/golden/xgb_multiclass3/model.json";
const std::string kMultiRows = kSource + "/tests/golden/xgb_multiclass3/X.csv";
const std::string kLgb = kSource + "/tests/golden/lgb_zero_as_missing/model.txt";
const std::string kLgbRows = kSource + "/tests/golden/lgb_zero_as_missing/X.csv";

void Put(const fs::path& root, const std::string& name, const std::string& from) {
  fs::create_directories(root / name / "1");
  fs::copy_file(from, root / name / "1" / fs::path(from).filename(),
                fs::copy_options::overwrite_existing);
}

std::vector<float> Floats(const std::string& csv, int64_t* rows, int64_t* cols) {
  absl::StatusOr<CsvMatrix<float>> m = ReadCsvFloats(csv);
  EXPECT_TRUE(m.ok()) << m.status();
  *rows = m->rows;
  *cols = m->cols;
  return m->values;
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

grove::v1::SharedMemoryRange Range(const std::string& region, uint64_t offset, uint64_t bytes) {
  grove::v1::SharedMemoryRange r;
  r.set_region(region);
  r.set_offset(offset);
  r.set_byte_size(bytes);
  return r;
}

// A grove.v1 Predict or Explain request of `model` carrying n x cols rows inline (raw_f32 /
// raw_f64).
template <typename Request, typename T>
Request Inline(const std::string& model, const std::vector<T>& rows, int64_t n, int64_t cols) {
  Request r;
  r.set_model(model);
  r.mutable_rows()->set_rows(n);
  r.mutable_rows()->set_cols(cols);
  if constexpr (std::is_same_v<T, double>) {
    r.mutable_rows()->set_raw_f64(Bytes(rows));
  } else {
    r.mutable_rows()->set_raw_f32(Bytes(rows));
  }
  return r;
}

// `request` with its rows named in shared memory instead (shared_memory_f32 / _f64, as they were
// raw) and, when `output` has a region, its results sent there.
template <typename Request>
Request Shared(Request request, const grove::v1::SharedMemoryRange& rows,
               const grove::v1::SharedMemoryRange& output = {}) {
  grove::v1::Matrix* m = request.mutable_rows();
  *(m->raw_f64().empty() ? m->mutable_shared_memory_f32() : m->mutable_shared_memory_f64()) = rows;
  m->clear_raw_f32();
  m->clear_raw_f64();
  if (!output.region().empty()) *request.mutable_output_shared_memory() = output;
  return request;
}

// A KServe ModelInfer of `model` with input__0 inline (raw_input_contents, FP32).
inference::ModelInferRequest InlineInfer(const std::string& model, const std::vector<float>& rows,
                                         int64_t n, int64_t cols) {
  inference::ModelInferRequest r;
  r.set_model_name(model);
  AddInput0(&r, n, cols);
  r.add_raw_input_contents(Bytes(rows));
  return r;
}

class SharedMemoryServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::temp_directory_path() /
                         absl::StrCat("grove_shm_service_test_", ::getpid()));
    fs::remove_all(*root_);
    Put(*root_, "demo", kDemo);
    Put(*root_, "multi", kMulti);
    Put(*root_, "lgbz", kLgb);
    // A batch waits a minute for company unless 32 rows are queued: a lone request of the 16 rows
    // of examples/rows.csv stays in its queue until a second one arrives.
    Put(*root_, "held", kDemo);
    std::ofstream(*root_ / "held" / "config.json")
        << R"({"batching": {"predict": {"max_delay_us": 60000000, "max_batch_rows": 32}}})";
    ServerOptions o = LoopbackServerOptions(root_->string());
    o.runtime.shared_memory_enabled = true;
    o.metrics_port = -1;
    loopback_ = new LoopbackServer(StartLoopbackServer(o));
    ASSERT_NE(loopback_->server, nullptr);
    server_ = loopback_->server.get();
  }
  static void TearDownTestSuite() {
    delete loopback_;  // the server stops
    fs::remove_all(*root_);
    delete root_;
  }
  void TearDown() override { server_->runtime().shared_memory().Unregister("", ""); }

  std::unique_ptr<grove::v1::Grove::Stub> Grove() {
    return grove::v1::Grove::NewStub(loopback_->channel);
  }
  std::unique_ptr<inference::GRPCInferenceService::Stub> Kserve() {
    return inference::GRPCInferenceService::NewStub(loopback_->channel);
  }

  // grove.v1 RegisterSharedMemory of the whole object, or of its bytes [offset, offset + bytes).
  void Register(const std::string& name, const SharedMemoryObject& object, uint64_t offset = 0,
                uint64_t bytes = 0) {
    grove::v1::RegisterSharedMemoryRequest req;
    req.set_name(name);
    req.set_key(object.key());
    req.set_offset(offset);
    req.set_byte_size(bytes > 0 ? bytes : object.size() - offset);
    grpc::ClientContext ctx;
    grove::v1::RegisterSharedMemoryResponse resp;
    grpc::Status s = Grove()->RegisterSharedMemory(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  template <typename Request, typename Response>
  grpc::Status Call(grpc::Status (grove::v1::Grove::Stub::*rpc)(grpc::ClientContext*,
                                                               const Request&, Response*),
                    const Request& request, Response* response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return (Grove().get()->*rpc)(&ctx, request, response);
  }

  grpc::Status Infer(const inference::ModelInferRequest& request,
                     inference::ModelInferResponse* response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return Kserve()->ModelInfer(&ctx, request, response);
  }

  static inline fs::path* root_ = nullptr;
  static inline LoopbackServer* loopback_ = nullptr;
  static inline GroveServer* server_ = nullptr;  // loopback_'s
};

// The bytes a response Matrix placed in shared memory, read from the object the region maps at
// `region_offset` bytes into it.
std::string Placed(const grove::v1::Matrix& m, const SharedMemoryObject& object,
                   uint64_t region_offset = 0) {
  EXPECT_TRUE(m.has_shared_memory_f32());
  EXPECT_EQ(m.values_size(), 0);
  EXPECT_TRUE(m.raw_f32().empty());
  const grove::v1::SharedMemoryRange& r = m.shared_memory_f32();
  EXPECT_EQ(r.byte_size(), static_cast<uint64_t>(m.rows() * m.cols()) * sizeof(float));
  return std::string(object.data() + region_offset + r.offset(), r.byte_size());
}

TEST_F(SharedMemoryServiceTest, PredictFromAndIntoSharedMemoryIsBitIdenticalToInline) {
  int64_t n, cols;
  std::vector<float> rows = Floats(kMultiRows, &n, &cols);
  n = std::min<int64_t>(n, 50);
  rows.resize(n * cols);
  SharedMemoryObject object(1 << 20);
  std::memcpy(object.data(), rows.data(), rows.size() * sizeof(float));
  Register("r", object);

  auto inline_req = Inline<grove::v1::PredictRequest>("multi", rows, n, cols);
  // Asked for out of the placement order: the results still go margin, prediction, leaf, SHAP.
  inline_req.add_outputs(grove::v1::OUTPUT_LEAF);
  inline_req.add_outputs(grove::v1::OUTPUT_MARGIN);
  inline_req.add_outputs(grove::v1::OUTPUT_PREDICTION);
  inline_req.set_explain(true);
  grove::v1::PredictResponse want;
  ASSERT_TRUE(Call(&grove::v1::Grove::Stub::Predict, inline_req, &want).ok());

  grove::v1::PredictRequest req = Shared(inline_req, Range("r", 0, rows.size() * sizeof(float)),
                                         Range("r", 65536, 1 << 19));
  grove::v1::PredictResponse got;
  grpc::Status s = Call(&grove::v1::Grove::Stub::Predict, req, &got);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(Placed(got.margin(), object), want.margin().raw_f32());
  EXPECT_EQ(Placed(got.prediction(), object), want.prediction().raw_f32());
  EXPECT_EQ(Placed(got.leaf(), object), want.leaf().raw_f32());
  EXPECT_EQ(Placed(got.shap_values(), object), want.shap_values().raw_f32());
  EXPECT_EQ(got.margin().shared_memory_f32().offset(), 65536u);
  EXPECT_EQ(got.margin().shared_memory_f32().region(), "r");
  for (const grove::v1::Matrix* m : {&got.prediction(), &got.leaf(), &got.shap_values()}) {
    EXPECT_EQ(m->shared_memory_f32().offset() % 64, 0u);
  }
  auto at = [](const grove::v1::Matrix& m) { return m.shared_memory_f32().offset(); };
  EXPECT_LT(at(got.margin()), at(got.prediction()));
  EXPECT_LT(at(got.prediction()), at(got.leaf()));
  EXPECT_LT(at(got.leaf()), at(got.shap_values()));
  EXPECT_EQ(got.explained_rows_size(), n);

  // Rows from shared memory, results inline: raw_f32, as for raw rows.
  req.clear_output_shared_memory();
  grove::v1::PredictResponse mixed;
  ASSERT_TRUE(Call(&grove::v1::Grove::Stub::Predict, req, &mixed).ok());
  EXPECT_EQ(mixed.margin().raw_f32(), want.margin().raw_f32());
  EXPECT_EQ(mixed.shap_values().raw_f32(), want.shap_values().raw_f32());

  // Inline rows, results into shared memory.
  grove::v1::PredictRequest out_only = inline_req;
  *out_only.mutable_output_shared_memory() = Range("r", 0, 1 << 20);
  grove::v1::PredictResponse placed;
  ASSERT_TRUE(Call(&grove::v1::Grove::Stub::Predict, out_only, &placed).ok());
  EXPECT_EQ(Placed(placed.prediction(), object), want.prediction().raw_f32());
}

// A region at an odd offset of its object, rows at an odd offset of the region: the rows are
// copied once and the results written through scratch; the bytes are the same.
TEST_F(SharedMemoryServiceTest, UnalignedRangesGiveTheSameBytes) {
  int64_t n, cols;
  const std::vector<float> rows = Floats(kDemoRows, &n, &cols);
  SharedMemoryObject object(1 << 16);
  Register("odd", object, 1);
  std::memcpy(object.data() + 1 + 2, rows.data(), rows.size() * sizeof(float));

  auto inline_req = Inline<grove::v1::PredictRequest>("demo", rows, n, cols);
  inline_req.add_outputs(grove::v1::OUTPUT_MARGIN);
  inline_req.set_explain(true);
  grove::v1::PredictResponse want;
  ASSERT_TRUE(Call(&grove::v1::Grove::Stub::Predict, inline_req, &want).ok());

  grove::v1::PredictRequest req = Shared(inline_req, Range("odd", 2, rows.size() * sizeof(float)),
                                         Range("odd", 4097, 8192));
  grove::v1::PredictResponse got;
  grpc::Status s = Call(&grove::v1::Grove::Stub::Predict, req, &got);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(Placed(got.margin(), object, 1), want.margin().raw_f32());
  EXPECT_EQ(Placed(got.shap_values(), object, 1), want.shap_values().raw_f32());
}

// float64 rows in shared memory are converted as raw_f64 is (LightGBM compares doubles).
TEST_F(SharedMemoryServiceTest, Float64RowsAsRawF64) {
  absl::StatusOr<CsvMatrix<double>> x = ReadCsvDoubles(kLgbRows);
  ASSERT_TRUE(x.ok()) << x.status();
  SharedMemoryObject object(1 << 20);
  std::memcpy(object.data(), x->values.data(), x->values.size() * sizeof(double));
  Register("f64", object);
  auto inline_req = Inline<grove::v1::PredictRequest>("lgbz", x->values, x->rows, x->cols);
  inline_req.add_outputs(grove::v1::OUTPUT_MARGIN);
  grove::v1::PredictResponse want;
  ASSERT_TRUE(Call(&grove::v1::Grove::Stub::Predict, inline_req, &want).ok());
  grove::v1::PredictRequest req =
      Shared(inline_req, Range("f64", 0, x->values.size() * sizeof(double)));
  EXPECT_TRUE(req.rows().has_shared_memory_f64());
  grove::v1::PredictResponse got;
  grpc::Status s = Call(&grove::v1::Grove::Stub::Predict, req, &got);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(got.margin().raw_f32(), want.margin().raw_f32());
}

TEST_F(SharedMemoryServiceTest, ExplainValuesInteractionsAndTopK) {
  int64_t n, cols;
  const std::vector<float> rows = Floats(kDemoRows, &n, &cols);
  SharedMemoryObject object(1 << 20);
  std::memcpy(object.data(), rows.data(), rows.size() * sizeof(float));
  Register("e", object);
  auto inline_req = Inline<grove::v1::ExplainRequest>("demo", rows, n, cols);
  inline_req.set_interactions(true);
  inline_req.set_top_k(3);
  grove::v1::ExplainResponse want;
  ASSERT_TRUE(Call(&grove::v1::Grove::Stub::Explain, inline_req, &want).ok());

  grove::v1::ExplainRequest req = Shared(inline_req, Range("e", 0, rows.size() * sizeof(float)),
                                         Range("e", 4096, 65536));
  grove::v1::ExplainResponse got;
  grpc::Status s = Call(&grove::v1::Grove::Stub::Explain, req, &got);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(Placed(got.values(), object), want.values().raw_f32());
  EXPECT_EQ(Placed(got.interactions(), object), want.interactions().raw_f32());
  EXPECT_EQ(got.values().shared_memory_f32().offset(), 4096u);
  EXPECT_EQ(got.bias(0), want.bias(0));
  EXPECT_EQ(got.top().SerializeAsString(), want.top().SerializeAsString());

  // omit_values: only the interactions go to shared memory (at the range's start); the top-k and
  // bias are still those of the values.
  req.set_omit_values(true);
  got.Clear();
  ASSERT_TRUE(Call(&grove::v1::Grove::Stub::Explain, req, &got).ok());
  EXPECT_FALSE(got.has_values());
  EXPECT_EQ(got.interactions().shared_memory_f32().offset(), 4096u);
  EXPECT_EQ(Placed(got.interactions(), object), want.interactions().raw_f32());
  EXPECT_EQ(got.top().SerializeAsString(), want.top().SerializeAsString());
  EXPECT_EQ(got.bias(0), want.bias(0));
}

TEST_F(SharedMemoryServiceTest, EveryRangeIsChecked) {
  SharedMemoryObject object(8192);
  Register("c", object);
  grove::v1::PredictRequest req;
  req.set_model("demo");
  req.mutable_rows()->set_rows(2);
  req.mutable_rows()->set_cols(8);
  auto status_of = [&](const grove::v1::PredictRequest& r) {
    grove::v1::PredictResponse resp;
    return Call(&grove::v1::Grove::Stub::Predict, r, &resp);
  };
  auto expect = [&](grpc::StatusCode code, const std::string& text) {
    const grpc::Status s = status_of(req);
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(text));
  };
  *req.mutable_rows()->mutable_shared_memory_f32() = Range("nope", 0, 64);
  expect(grpc::StatusCode::NOT_FOUND, "'nope' is not registered");
  *req.mutable_rows()->mutable_shared_memory_f32() = Range("c", 0, 60);
  expect(grpc::StatusCode::INVALID_ARGUMENT, "holds 60 bytes; a matrix of 2 x 8 needs 64");
  *req.mutable_rows()->mutable_shared_memory_f32() = Range("c", 8192 - 32, 64);
  expect(grpc::StatusCode::INVALID_ARGUMENT, "run past the end of shared memory region 'c'");
  *req.mutable_rows()->mutable_shared_memory_f32() = Range("c", ~uint64_t{0} - 8, 64);
  expect(grpc::StatusCode::INVALID_ARGUMENT, "run past the end");
  *req.mutable_rows()->mutable_shared_memory_f32() = Range("c", 0, 64);
  req.mutable_rows()->add_values(1.0f);
  expect(grpc::StatusCode::INVALID_ARGUMENT, "more than one of");
  req.mutable_rows()->clear_values();
  *req.mutable_output_shared_memory() = Range("c", 1024, 4);
  expect(grpc::StatusCode::INVALID_ARGUMENT, "output_shared_memory holds 4 bytes");
  *req.mutable_output_shared_memory() = Range("c", 32, 1024);
  expect(grpc::StatusCode::INVALID_ARGUMENT, "shares bytes with the rows");
  *req.mutable_output_shared_memory() = Range("c", 64, 1024);
  EXPECT_TRUE(status_of(req).ok());
  // A second registration of the same object overlaps by object bytes, not by names.
  Register("c2", object);
  *req.mutable_output_shared_memory() = Range("c2", 0, 1024);
  expect(grpc::StatusCode::INVALID_ARGUMENT, "shares bytes with the rows");
  // An object shrunk after registration is refused before it is read.
  req.clear_output_shared_memory();
  object.Truncate(1000);
  *req.mutable_rows()->mutable_shared_memory_f32() = Range("c", 0, 64);
  expect(grpc::StatusCode::INVALID_ARGUMENT, "was shrunk");
}

TEST_F(SharedMemoryServiceTest, RegistrationRpcs) {
  SharedMemoryObject object(4096);
  Register("a", object, 100, 200);
  grove::v1::RegisterSharedMemoryRequest again;
  again.set_name("a");
  again.set_key(object.key());
  again.set_byte_size(10);
  grove::v1::RegisterSharedMemoryResponse ignored;
  EXPECT_EQ(Call(&grove::v1::Grove::Stub::RegisterSharedMemory, again, &ignored).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
  again.set_name("b");
  again.set_key("/bad/key");
  EXPECT_EQ(Call(&grove::v1::Grove::Stub::RegisterSharedMemory, again, &ignored).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  again.set_key(object.key());
  again.set_offset(4000);
  again.set_byte_size(200);
  const grpc::Status past = Call(&grove::v1::Grove::Stub::RegisterSharedMemory, again, &ignored);
  EXPECT_EQ(past.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(past.error_message(), HasSubstr("holds 4096 bytes"));

  grove::v1::SharedMemoryStatusResponse status;
  ASSERT_TRUE(Call(&grove::v1::Grove::Stub::GetSharedMemoryStatus,
                   grove::v1::SharedMemoryStatusRequest(), &status)
                  .ok());
  ASSERT_EQ(status.regions_size(), 1);
  EXPECT_EQ(status.regions(0).name(), "a");
  EXPECT_EQ(status.regions(0).key(), object.key());
  EXPECT_EQ(status.regions(0).offset(), 100u);
  EXPECT_EQ(status.regions(0).byte_size(), 200u);
  grove::v1::SharedMemoryStatusRequest one;
  one.set_name("zzz");
  EXPECT_EQ(Call(&grove::v1::Grove::Stub::GetSharedMemoryStatus, one, &status).error_code(),
            grpc::StatusCode::NOT_FOUND);

  grove::v1::GetModelMetadataRequest meta_req;
  meta_req.set_model("demo");
  grove::v1::ModelMetadata meta;
  ASSERT_TRUE(Call(&grove::v1::Grove::Stub::GetModelMetadata, meta_req, &meta).ok());
  EXPECT_TRUE(meta.shared_memory());

  grove::v1::UnregisterSharedMemoryRequest unreg;
  unreg.set_name("a");
  grove::v1::UnregisterSharedMemoryResponse removed;
  ASSERT_TRUE(Call(&grove::v1::Grove::Stub::UnregisterSharedMemory, unreg, &removed).ok());
  EXPECT_THAT(removed.unregistered(), ElementsAre("a"));
  removed.Clear();
  ASSERT_TRUE(Call(&grove::v1::Grove::Stub::UnregisterSharedMemory, unreg, &removed).ok());
  EXPECT_EQ(removed.unregistered_size(), 0);  // idempotent
}

// Triton's RPCs: register, status (a map by name), unregister; CUDA shared memory is refused with
// what is supported; ServerMetadata names the extension.
TEST_F(SharedMemoryServiceTest, KserveRegistrationRpcs) {
  SharedMemoryObject object(4096);
  auto call = [&](auto rpc, const auto& request, auto* response) {
    grpc::ClientContext ctx;
    return (Kserve().get()->*rpc)(&ctx, request, response);
  };
  inference::SystemSharedMemoryRegisterRequest reg;
  reg.set_name("k");
  reg.set_key(object.key());
  reg.set_offset(64);
  reg.set_byte_size(1024);
  inference::SystemSharedMemoryRegisterResponse reg_resp;
  ASSERT_TRUE(call(&inference::GRPCInferenceService::Stub::SystemSharedMemoryRegister, reg,
                   &reg_resp)
                  .ok());
  inference::SystemSharedMemoryStatusResponse status;
  ASSERT_TRUE(call(&inference::GRPCInferenceService::Stub::SystemSharedMemoryStatus,
                   inference::SystemSharedMemoryStatusRequest(), &status)
                  .ok());
  ASSERT_EQ(status.regions().count("k"), 1u);
  EXPECT_EQ(status.regions().at("k").key(), object.key());
  EXPECT_EQ(status.regions().at("k").offset(), 64u);
  EXPECT_EQ(status.regions().at("k").byte_size(), 1024u);
  inference::SystemSharedMemoryUnregisterResponse unreg_resp;
  ASSERT_TRUE(call(&inference::GRPCInferenceService::Stub::SystemSharedMemoryUnregister,
                   inference::SystemSharedMemoryUnregisterRequest(), &unreg_resp)
                  .ok());
  EXPECT_TRUE(server_->runtime().shared_memory().Status("", "").value().empty());

  inference::CudaSharedMemoryRegisterResponse cuda_resp;
  const grpc::Status cuda =
      call(&inference::GRPCInferenceService::Stub::CudaSharedMemoryRegister,
           inference::CudaSharedMemoryRegisterRequest(), &cuda_resp);
  EXPECT_EQ(cuda.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(cuda.error_message(), HasSubstr("CUDA shared memory is not supported"));
  EXPECT_THAT(cuda.error_message(), HasSubstr("system shared memory"));

  inference::ServerMetadataResponse meta;
  ASSERT_TRUE(call(&inference::GRPCInferenceService::Stub::ServerMetadata,
                   inference::ServerMetadataRequest(), &meta)
                  .ok());
  EXPECT_THAT(meta.extensions(), ::testing::Contains("system_shared_memory"));
}

void SetShm(google::protobuf::Map<std::string, inference::InferParameter>* p,
            const std::string& region, int64_t offset, int64_t bytes) {
  (*p)["shared_memory_region"].set_string_param(region);
  (*p)["shared_memory_offset"].set_int64_param(offset);
  (*p)["shared_memory_byte_size"].set_int64_param(bytes);
}

// ModelInfer with input__0 and both outputs in shared memory: the bytes Triton's raw contents
// would carry, written into the region; raw_output_contents keeps one (empty) entry per output.
TEST_F(SharedMemoryServiceTest, KserveInferIsBitIdenticalToRawContents) {
  for (const std::string& model : {std::string("demo"), std::string("multi")}) {
    SCOPED_TRACE(model);
    int64_t n, cols;
    std::vector<float> rows = Floats(model == "demo" ? kDemoRows : kMultiRows, &n, &cols);
    SharedMemoryObject object(1 << 20);
    std::memcpy(object.data(), rows.data(), rows.size() * sizeof(float));
    Register("ki", object);
    inference::ModelInferRequest inline_req = InlineInfer(model, rows, n, cols);
    inline_req.add_outputs()->set_name("output__0");
    inline_req.add_outputs()->set_name("treeshap_output");
    inference::ModelInferResponse want;
    ASSERT_TRUE(Infer(inline_req, &want).ok());

    inference::ModelInferRequest req = inline_req;
    req.clear_raw_input_contents();
    SetShm(req.mutable_inputs(0)->mutable_parameters(), "ki", 0,
           static_cast<int64_t>(rows.size() * sizeof(float)));
    const int64_t pred_bytes = static_cast<int64_t>(want.raw_output_contents(0).size());
    const int64_t shap_bytes = static_cast<int64_t>(want.raw_output_contents(1).size());
    SetShm(req.mutable_outputs(0)->mutable_parameters(), "ki", 65536, pred_bytes);
    SetShm(req.mutable_outputs(1)->mutable_parameters(), "ki", 131072, shap_bytes + 100);
    inference::ModelInferResponse got;
    grpc::Status s = Infer(req, &got);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(got.raw_output_contents_size(), 2);
    EXPECT_TRUE(got.raw_output_contents(0).empty());
    EXPECT_TRUE(got.raw_output_contents(1).empty());
    ASSERT_EQ(got.outputs_size(), 2);
    EXPECT_EQ(got.outputs(0).SerializeAsString(), want.outputs(0).SerializeAsString());
    EXPECT_EQ(got.outputs(1).SerializeAsString(), want.outputs(1).SerializeAsString());
    EXPECT_EQ(std::string(object.data() + 65536, pred_bytes), want.raw_output_contents(0));
    EXPECT_EQ(std::string(object.data() + 131072, shap_bytes), want.raw_output_contents(1));

    // One output in shared memory, the other inline.
    req.mutable_outputs(1)->clear_parameters();
    got.Clear();
    ASSERT_TRUE(Infer(req, &got).ok());
    EXPECT_TRUE(got.raw_output_contents(0).empty());
    EXPECT_EQ(got.raw_output_contents(1), want.raw_output_contents(1));

    // Refused: a byte size other than the tensor's, an output range too small or on the input,
    // classification into shared memory.
    auto refused = [&](const inference::ModelInferRequest& r, const std::string& text) {
      inference::ModelInferResponse ignored;
      const grpc::Status st = Infer(r, &ignored);
      EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << text;
      EXPECT_THAT(st.error_message(), HasSubstr(text));
    };
    inference::ModelInferRequest bad = req;
    SetShm(bad.mutable_inputs(0)->mutable_parameters(), "ki", 0,
           static_cast<int64_t>(rows.size() * sizeof(float)) - 4);
    refused(bad, "shared_memory_byte_size holds");
    bad = req;
    SetShm(bad.mutable_outputs(0)->mutable_parameters(), "ki", 65536, pred_bytes - 4);
    refused(bad, "is smaller than the");
    bad = req;
    SetShm(bad.mutable_outputs(0)->mutable_parameters(), "ki", 0, pred_bytes);
    refused(bad, "shares bytes with the input's range");
    bad = req;
    (*bad.mutable_outputs(0)->mutable_parameters())["classification"].set_int64_param(1);
    refused(bad, "both 'shared_memory_region' and 'classification'");
    bad = req;
    bad.add_raw_input_contents(Bytes(rows));
    refused(bad, "is in shared memory and also carries raw_input_contents");
    server_->runtime().shared_memory().Unregister("ki", "");
  }
}

// A region unregistered while a request that uses it waits in its queue: the request is answered
// from (and into) its region, which stays mapped until then and is released after.
TEST_F(SharedMemoryServiceTest, UnregisterWhileARequestUsesTheRegion) {
  int64_t n, cols;
  std::vector<float> rows = Floats(kDemoRows, &n, &cols);
  ASSERT_EQ(n, 16);  // two of these fill a batch of the "held" model
  SharedMemoryObject object(1 << 16);
  std::memcpy(object.data(), rows.data(), rows.size() * sizeof(float));
  Register("inflight", object);
  serving::SharedMemoryRegistry& registry = server_->runtime().shared_memory();
  ASSERT_EQ(registry.mapped_regions(), 1);

  const grove::v1::PredictRequest req =
      Shared(Inline<grove::v1::PredictRequest>("held", rows, n, cols),
             Range("inflight", 0, rows.size() * sizeof(float)), Range("inflight", 4096, 4096));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  grove::v1::PredictResponse resp;
  std::promise<grpc::Status> done;
  auto stub = Grove();
  stub->async()->Predict(&ctx, &req, &resp, [&](grpc::Status s) { done.set_value(s); });
  while (server_->runtime().QueueStats("held", Operation::kPredict).queued_tasks == 0) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  grove::v1::UnregisterSharedMemoryRequest unreg;
  unreg.set_name("inflight");
  grove::v1::UnregisterSharedMemoryResponse removed;
  ASSERT_TRUE(Call(&grove::v1::Grove::Stub::UnregisterSharedMemory, unreg, &removed).ok());
  EXPECT_THAT(removed.unregistered(), ElementsAre("inflight"));
  EXPECT_TRUE(registry.Status("", "").value().empty());
  EXPECT_EQ(registry.mapped_regions(), 1);  // held by the queued request
  // The name is free at once; the queued request keeps its own mapping.
  SharedMemoryObject other(4096);
  Register("inflight", other);
  EXPECT_EQ(registry.mapped_regions(), 2);

  // A second 16-row request fills the batch: both are computed.
  grove::v1::PredictResponse want;
  ASSERT_TRUE(Call(&grove::v1::Grove::Stub::Predict,
                   Inline<grove::v1::PredictRequest>("held", rows, n, cols), &want)
                  .ok());
  const grpc::Status s = done.get_future().get();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(Placed(resp.prediction(), object), want.prediction().raw_f32());
  // Released once the call is answered (the last reference may go just after the reply).
  for (int i = 0; i < 500 && registry.mapped_regions() != 1; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(registry.mapped_regions(), 1);
  EXPECT_EQ(registry.mapped_bytes(), 4096);
}

// An object shrunk by its owner while requests that read and write it wait in their queue: those
// requests fail with FAILED_PRECONDITION (grove.v1 and KServe), the server lives on and answers
// the next request, and the region is refused until it is registered again.
TEST_F(SharedMemoryServiceTest, AnObjectShrunkUnderQueuedRequestsFailsThemNotTheServer) {
  int64_t n, cols;
  std::vector<float> rows = Floats(kDemoRows, &n, &cols);
  ASSERT_EQ(n, 16);  // with 16 more rows they fill a batch of the "held" model
  SharedMemoryObject object(1 << 16);
  std::memcpy(object.data(), rows.data(), rows.size() * sizeof(float));
  std::memcpy(object.data() + 32768, rows.data(), rows.size() * sizeof(float));
  Register("shrinks", object);
  const int64_t row_bytes = static_cast<int64_t>(rows.size() * sizeof(float));

  const grove::v1::PredictRequest predict =
      Shared(Inline<grove::v1::PredictRequest>("held", rows, n, cols),
             Range("shrinks", 0, row_bytes), Range("shrinks", 4096, 4096));
  grpc::ClientContext predict_ctx;
  predict_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  grove::v1::PredictResponse predict_resp;
  std::promise<grpc::Status> predicted;
  auto stub = Grove();
  stub->async()->Predict(&predict_ctx, &predict, &predict_resp,
                         [&](grpc::Status s) { predicted.set_value(s); });
  while (server_->runtime().QueueStats("held", Operation::kPredict).queued_tasks == 0) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  // A KServe request of 8 of the rows, from the object's second half, waits with it.
  const std::vector<float> half(rows.begin(), rows.begin() + 8 * cols);
  inference::ModelInferRequest infer = InlineInfer("held", half, 8, cols);
  infer.clear_raw_input_contents();
  SetShm(infer.mutable_inputs(0)->mutable_parameters(), "shrinks", 32768, row_bytes / 2);
  infer.add_outputs()->set_name("output__0");
  SetShm(infer.mutable_outputs(0)->mutable_parameters(), "shrinks", 49152, 4096);
  grpc::ClientContext infer_ctx;
  infer_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  inference::ModelInferResponse infer_resp;
  std::promise<grpc::Status> inferred;
  auto kserve = Kserve();
  kserve->async()->ModelInfer(&infer_ctx, &infer, &infer_resp,
                              [&](grpc::Status s) { inferred.set_value(s); });
  while (server_->runtime().QueueStats("held", Operation::kPredict).queued_tasks < 2) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  object.Truncate(0);  // the owner shrinks the object under both queued requests

  // A request resolved after the shrink is refused before anything is read.
  inference::ModelInferResponse refused;
  const grpc::Status early = Infer(infer, &refused);
  EXPECT_EQ(early.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << early.error_message();
  EXPECT_THAT(early.error_message(), HasSubstr("was shrunk"));

  // 8 inline rows fill the batch: they are answered; those on the shrunk object fail.
  grove::v1::PredictResponse inline_resp;
  ASSERT_TRUE(Call(&grove::v1::Grove::Stub::Predict,
                   Inline<grove::v1::PredictRequest>("held", half, 8, cols), &inline_resp)
                  .ok());
  const grpc::Status k = inferred.get_future().get();
  EXPECT_EQ(k.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << k.error_message();
  EXPECT_THAT(k.error_message(), HasSubstr("lost pages"));
  const grpc::Status s = predicted.get_future().get();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("lost pages"));
  EXPECT_THAT(s.error_message(), HasSubstr("'shrinks'"));

  // The region stays refused, grown back or not, until it is registered again.
  object.Truncate(1 << 16);
  grove::v1::PredictResponse again;
  const grpc::Status refused_again = Call(
      &grove::v1::Grove::Stub::Predict,
      Shared(Inline<grove::v1::PredictRequest>("demo", rows, n, cols), Range("shrinks", 0, row_bytes)),
      &again);
  EXPECT_EQ(refused_again.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << refused_again.error_message();
  server_->runtime().shared_memory().Unregister("shrinks", "");
  std::memcpy(object.data(), rows.data(), rows.size() * sizeof(float));
  Register("shrinks", object);
  grove::v1::PredictResponse fresh;
  ASSERT_TRUE(Call(&grove::v1::Grove::Stub::Predict,
                   Shared(Inline<grove::v1::PredictRequest>("demo", rows, n, cols),
                          Range("shrinks", 0, row_bytes)),
                   &fresh)
                  .ok());
}

// The same over REST (Triton's routes and bodies): register, status, infer from and into shared
// memory (outputs without data), unregister; CUDA routes are 501.
TEST_F(SharedMemoryServiceTest, RestRoutes) {
  int64_t n, cols;
  std::vector<float> rows = Floats(kDemoRows, &n, &cols);
  SharedMemoryObject object(1 << 16);
  std::memcpy(object.data(), rows.data(), rows.size() * sizeof(float));
  httplib::Client http("127.0.0.1", server_->http_port());
  const nlohmann::json reg = {{"key", object.key()}, {"offset", 0}, {"byte_size", object.size()}};
  auto r = http.Post("/v2/systemsharedmemory/region/rest/register", reg.dump(),
                     "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  r = http.Get("/v2/systemsharedmemory/status");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const nlohmann::json status = nlohmann::json::parse(r->body);
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0]["name"], "rest");
  EXPECT_EQ(status[0]["key"], object.key());
  EXPECT_EQ(status[0]["byte_size"], object.size());
  r = http.Get("/v2/systemsharedmemory/region/none/status");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);

  const int64_t in_bytes = static_cast<int64_t>(rows.size() * sizeof(float));
  const nlohmann::json infer = {
      {"inputs",
       {{{"name", "input__0"},
         {"shape", {n, cols}},
         {"datatype", "FP32"},
         {"parameters",
          {{"shared_memory_region", "rest"}, {"shared_memory_byte_size", in_bytes}}}}}},
      {"outputs",
       {{{"name", "output__0"},
         {"parameters",
          {{"shared_memory_region", "rest"},
           {"shared_memory_offset", 8192},
           {"shared_memory_byte_size", 8192}}}}}}};
  r = http.Post("/v2/models/demo/infer", infer.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const nlohmann::json answer = nlohmann::json::parse(r->body);
  ASSERT_EQ(answer["outputs"].size(), 1u);
  EXPECT_FALSE(answer["outputs"][0].contains("data"));
  EXPECT_EQ(answer["outputs"][0]["shape"], nlohmann::json({n, 2}));
  inference::ModelInferResponse want;
  ASSERT_TRUE(Infer(InlineInfer("demo", rows, n, cols), &want).ok());
  EXPECT_EQ(std::string(object.data() + 8192, want.raw_output_contents(0).size()),
            want.raw_output_contents(0));

  // An input with data as well as a region is refused.
  nlohmann::json both = infer;
  both["inputs"][0]["data"] = rows;
  r = http.Post("/v2/models/demo/infer", both.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("more than one of data, binary_data_size and "
                                 "shared_memory_region"));

  r = http.Post("/v2/systemsharedmemory/region/rest/unregister", "", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(server_->runtime().shared_memory().Status("", "").value().empty());
  r = http.Get("/v2/cudasharedmemory/status");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 501);
  EXPECT_THAT(r->body, HasSubstr("CUDA shared memory is not supported"));
}

}  // namespace
}  // namespace grove::server
