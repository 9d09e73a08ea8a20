// groved's services end to end in one process: a GroveServer on 127.0.0.1 (ephemeral ports) over a
// temporary model repository, called through the generated stubs. Answers are compared with the
// CPU reference engines run locally on the same model file.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "core/servable/background.h"
#include "core/servable/servable.h"
#include "core/explain/explain.h"
#include "core/explain/interventional/interventional.h"
#include "core/io/csv.h"
#include "core/model/loader.h"
#include "core/predict/predict.h"
#include "gmock/gmock.h"
#include "grove/v1/grove.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "inference/grpc_service.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "prometheus/text_serializer.h"
#include "server/server.h"
#include "server/grpc/wire_rows.h"
#include "tests/server/server_testing.h"
#include "tests/testing/coalition_games.h"

namespace grove::server {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kDemo = std::string(GROVE_SOURCE_DIR) + "/examples/models/demo/1/model.json";
const std::string kMulti = std::string(GROVE_SOURCE_DIR) + "/tests/golden/xgb_multiclass3/model.json";
const std::string kMultiRows = std::string(GROVE_SOURCE_DIR) + "/tests/golden/xgb_multiclass3/X.csv";
const std::string kLgb = std::string(GROVE_SOURCE_DIR) + "/tests/golden/lgb_zero_as_missing/model.txt";
const std::string kLgbDir = std::string(GROVE_SOURCE_DIR) + "/tests/golden/lgb_zero_as_missing";
const std::string kDemoRows = std::string(GROVE_SOURCE_DIR) + "/examples/rows.csv";

void Put(const fs::path& root, const std::string& name, int version, const std::string& from) {
  fs::create_directories(root / name / std::to_string(version));
  fs::copy_file(from, root / name / std::to_string(version) / fs::path(from).filename(),
                fs::copy_options::overwrite_existing);
}

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::trunc) << text;
}

std::vector<float> ReadRows(const std::string& path, int64_t* rows, int64_t* cols) {
  absl::StatusOr<CsvMatrix<float>> m = ReadCsvFloats(path);
  EXPECT_TRUE(m.ok()) << m.status();
  *rows = m->rows;
  *cols = m->cols;
  return m->values;
}

std::vector<float> LocalPredict(const std::string& model, const std::vector<float>& rows,
                                int64_t cols, OutputKind kind) {
  ForestPtr f = *LoadModelFile(model);
  const int64_t n = static_cast<int64_t>(rows.size()) / cols;
  PredictOptions o;
  o.kind = kind;
  const int64_t w = PredictWidth(*f, o);
  std::vector<float> out(n * w);
  EXPECT_TRUE(PredictCpu(*f, MakeRowsView(rows.data(), n, cols), o,
                         MakeMatrixView(out.data(), n, w), nullptr)
                  .ok());
  return out;
}

std::vector<float> LocalExplain(const std::string& model, const std::vector<float>& rows,
                                int64_t cols, bool interactions) {
  ForestPtr f = *LoadModelFile(model);
  const int64_t n = static_cast<int64_t>(rows.size()) / cols;
  const int64_t w = ExplainWidth(*f, interactions);
  std::vector<float> out(n * w);
  ExplainOptions o;
  o.interactions = interactions;
  EXPECT_TRUE(ExplainCpuReference(*f, MakeRowsView(rows.data(), n, cols), o,
                                  MakeMatrixView(out.data(), n, w), nullptr)
                  .ok());
  return out;
}

template <typename A, typename B>
void ExpectClose(const A& got, const B& want, double tol = 1e-5) {
  ASSERT_EQ(static_cast<size_t>(got.size()), static_cast<size_t>(want.size()));
  for (size_t i = 0; i < static_cast<size_t>(want.size()); ++i) {
    const double g = got[i], w = want[i];
    ASSERT_NEAR(g, w, tol * std::max(1.0, std::fabs(w))) << "at " << i;
  }
}

void SetRows(grove::v1::Matrix* m, const std::vector<float>& rows, int64_t cols) {
  m->set_rows(static_cast<int64_t>(rows.size()) / cols);
  m->set_cols(cols);
  m->mutable_values()->Assign(rows.begin(), rows.end());
}

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::temp_directory_path() /
                         absl::StrCat("grove_server_test_", ::getpid()));
    fs::remove_all(*root_);
    Put(*root_, "demo", 1, kDemo);
    Put(*root_, "multi", 2, kMulti);
    Write(*root_ / "multi" / "config.json", R"({"max_interaction_values_per_row": 40})");
    Put(*root_, "lgbz", 1, kLgb);
    Put(*root_, "tiny", 1, kDemo);
    Put(*root_, "demo_bg", 1, kDemo);
    fs::copy_file(kDemoRows, *root_ / "demo_bg" / "background.csv");
    Put(*root_, "demo_groups", 1, kDemo);
    Write(*root_ / "demo_groups" / "groups.json", R"({"head": ["f0", "f1", 2, 3]})");
    // One request at a time, and a batch waits 60 s for company: a second request is refused
    // and the first one is dropped at its deadline.
    Write(*root_ / "tiny" / "config.json",
          R"({"batching": {"predict": {"max_delay_us": 60000000, "max_queue_requests": 1}}})");
    ServerOptions o = LoopbackServerOptions(root_->string());
    o.model_control = true;  // LoadModel / UnloadModel tests (off by default)
    o.port_file = (*root_ / "ports.json").string();
    LoopbackServer s = StartLoopbackServer(o);
    ASSERT_NE(s.server, nullptr);
    server_ = s.server.release();
    channel_ = new std::shared_ptr<grpc::Channel>(s.channel);
  }
  static void TearDownTestSuite() {
    delete channel_;
    delete server_;
    fs::remove_all(*root_);
    delete root_;
  }

  std::unique_ptr<grove::v1::Grove::Stub> Grove() { return grove::v1::Grove::NewStub(*channel_); }
  std::unique_ptr<inference::GRPCInferenceService::Stub> Kserve() {
    return inference::GRPCInferenceService::NewStub(*channel_);
  }

  static inline fs::path* root_ = nullptr;
  static inline GroveServer* server_ = nullptr;
  static inline std::shared_ptr<grpc::Channel>* channel_ = nullptr;
};

TEST_F(ServerTest, PortFileAndReadiness) {
  std::ifstream in(*root_ / "ports.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr(absl::StrCat("\"grpc_port\":", server_->grpc_port())));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("\"metrics_port\":", server_->metrics_port())));
  EXPECT_GT(server_->metrics_port(), 0);
  EXPECT_THAT(text, HasSubstr(absl::StrCat("\"http_port\":", server_->http_port())));
  EXPECT_GT(server_->http_port(), 0);
  EXPECT_TRUE(server_->runtime().ServerReady());
}

TEST_F(ServerTest, PredictMatchesLocalEngine) {
  int64_t n, cols;
  std::vector<float> rows = ReadRows(kMultiRows, &n, &cols);
  rows.resize(std::min<int64_t>(n, 50) * cols);
  grove::v1::PredictRequest req;
  req.set_model("multi");
  SetRows(req.mutable_rows(), rows, cols);
  req.add_outputs(grove::v1::OUTPUT_MARGIN);
  req.add_outputs(grove::v1::OUTPUT_PREDICTION);
  req.add_outputs(grove::v1::OUTPUT_LEAF);
  req.set_explain(true);
  req.add_explain_rows(7);
  req.add_explain_rows(2);
  grpc::ClientContext ctx;
  grove::v1::PredictResponse resp;
  grpc::Status s = Grove()->Predict(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.model(), "multi");
  EXPECT_EQ(resp.version(), 2);
  ExpectClose(resp.margin().values(), LocalPredict(kMulti, rows, cols, OutputKind::kMargin));
  ExpectClose(resp.prediction().values(),
              LocalPredict(kMulti, rows, cols, OutputKind::kPrediction));
  ExpectClose(resp.leaf().values(), LocalPredict(kMulti, rows, cols, OutputKind::kLeaf), 0);
  ASSERT_EQ(resp.explained_rows_size(), 2);
  EXPECT_EQ(resp.explained_rows(0), 7);
  std::vector<float> picked(rows.begin() + 7 * cols, rows.begin() + 8 * cols);
  picked.insert(picked.end(), rows.begin() + 2 * cols, rows.begin() + 3 * cols);
  ExpectClose(resp.shap_values().values(), LocalExplain(kMulti, picked, cols, false), 1e-4);
  EXPECT_EQ(resp.shap_values().rows(), 2);
}

// Float64 rows are converted server-side as LightGBM routes doubles: margins equal the library's.
TEST_F(ServerTest, Float64RowsMatchTheLibrary) {
  absl::StatusOr<CsvMatrix<double>> x = ReadCsvDoubles(kLgbDir + "/X.csv");
  ASSERT_TRUE(x.ok()) << x.status();
  absl::StatusOr<CsvMatrix<double>> want = ReadCsvDoubles(kLgbDir + "/margin.csv");
  ASSERT_TRUE(want.ok()) << want.status();
  grove::v1::PredictRequest req;
  req.set_model("lgbz");
  req.mutable_rows()->set_rows(x->rows);
  req.mutable_rows()->set_cols(x->cols);
  req.mutable_rows()->mutable_values_f64()->Assign(x->values.begin(), x->values.end());
  req.add_outputs(grove::v1::OUTPUT_MARGIN);
  grpc::ClientContext ctx;
  grove::v1::PredictResponse resp;
  grpc::Status s = Grove()->Predict(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ExpectClose(resp.margin().values(), want->values, 1e-5);
}

std::vector<float> RawFloats(const grove::v1::Matrix& m) {
  std::vector<float> out(m.raw_f32().size() / sizeof(float));
  std::memcpy(out.data(), m.raw_f32().data(), out.size() * sizeof(float));
  return out;
}

// Raw rows (raw_f32 / raw_f64) get raw results equal to what the repeated fields get; the
// repeated form (the tests above) gets repeated results.
TEST_F(ServerTest, RawTensorsMirrorTheRequestForm) {
  int64_t n, cols;
  std::vector<float> rows = ReadRows(kMultiRows, &n, &cols);
  rows.resize(std::min<int64_t>(n, 40) * cols);
  n = static_cast<int64_t>(rows.size()) / cols;
  grove::v1::PredictRequest req;
  req.set_model("multi");
  req.mutable_rows()->set_rows(n);
  req.mutable_rows()->set_cols(cols);
  req.mutable_rows()->set_raw_f32(
      std::string(reinterpret_cast<const char*>(rows.data()), rows.size() * sizeof(float)));
  req.add_outputs(grove::v1::OUTPUT_MARGIN);
  req.add_outputs(grove::v1::OUTPUT_LEAF);
  req.set_explain(true);
  req.add_explain_rows(3);
  grpc::ClientContext ctx;
  grove::v1::PredictResponse resp;
  grpc::Status s = Grove()->Predict(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.margin().values_size(), 0);
  EXPECT_EQ(resp.margin().rows(), n);
  ExpectClose(RawFloats(resp.margin()), LocalPredict(kMulti, rows, cols, OutputKind::kMargin));
  ExpectClose(RawFloats(resp.leaf()), LocalPredict(kMulti, rows, cols, OutputKind::kLeaf), 0);
  std::vector<float> picked(rows.begin() + 3 * cols, rows.begin() + 4 * cols);
  ExpectClose(RawFloats(resp.shap_values()), LocalExplain(kMulti, picked, cols, false), 1e-4);

  // A wrong byte count is INVALID_ARGUMENT naming both sizes.
  req.mutable_rows()->mutable_raw_f32()->resize(rows.size() * sizeof(float) - 4);
  grpc::ClientContext bad_ctx;
  s = Grove()->Predict(&bad_ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr(absl::StrCat("needs ", rows.size() * 4)));

  // Explain with interactions and top-k from raw float64 rows: raw values and interactions,
  // repeated bias and top-k.
  std::vector<float> demo = ReadRows(kDemoRows, &n, &cols);
  std::vector<double> doubles(demo.begin(), demo.end());
  grove::v1::ExplainRequest ereq;
  ereq.set_model("demo");
  ereq.mutable_rows()->set_rows(n);
  ereq.mutable_rows()->set_cols(cols);
  ereq.mutable_rows()->set_raw_f64(
      std::string(reinterpret_cast<const char*>(doubles.data()), doubles.size() * sizeof(double)));
  ereq.set_top_k(2);
  ereq.set_interactions(true);
  grpc::ClientContext ectx;
  grove::v1::ExplainResponse eresp;
  s = Grove()->Explain(&ectx, ereq, &eresp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const std::vector<float> shap = LocalExplain(kDemo, demo, cols, false);
  EXPECT_EQ(eresp.values().values_size(), 0);
  ExpectClose(RawFloats(eresp.values()), shap, 1e-4);
  ExpectClose(RawFloats(eresp.interactions()), LocalExplain(kDemo, demo, cols, true), 1e-4);
  ASSERT_EQ(eresp.bias_size(), 1);
  EXPECT_NEAR(eresp.bias(0), shap[8], 1e-5);
  EXPECT_EQ(eresp.top().features_size(), n * 2);
}

// Rows of at least 256 KiB in raw_f32 (and KServe raw_input_contents) are received apart from the
// message (server/grpc/wire_rows.h) into a kept host buffer: the answers equal those of the same rows as
// repeated values, and the rows' checks (byte count, one form only) say the same words.
TEST_F(ServerTest, LargeRawRowsAreReceivedApartWithTheSameAnswers) {
  int64_t n, cols;
  const std::vector<float> base = ReadRows(kDemoRows, &n, &cols);
  std::vector<float> rows;
  for (int64_t r = 0; rows.size() < static_cast<size_t>(10000 * cols); ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      rows.push_back(base[(r % n) * cols + c] * (1.0f + 0.001f * static_cast<float>(r % 97)));
    }
  }
  const int64_t big = static_cast<int64_t>(rows.size()) / cols;
  const std::string raw(reinterpret_cast<const char*>(rows.data()), rows.size() * sizeof(float));
  ASSERT_GE(raw.size(), kMinSplitPayloadBytes);

  grove::v1::PredictRequest req;
  req.set_model("demo");
  req.mutable_rows()->set_rows(big);
  req.mutable_rows()->set_cols(cols);
  req.mutable_rows()->set_raw_f32(raw);
  req.add_outputs(grove::v1::OUTPUT_MARGIN);
  req.set_explain(true);
  req.add_explain_rows(9999);
  grpc::ClientContext ctx;
  grove::v1::PredictResponse resp;
  grpc::Status s = Grove()->Predict(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GE(server_->runtime().host_buffers().stats().kept_bytes, int64_t{512} << 10);
  grove::v1::PredictRequest values_req = req;
  values_req.mutable_rows()->clear_raw_f32();
  SetRows(values_req.mutable_rows(), rows, cols);
  grpc::ClientContext vctx;
  grove::v1::PredictResponse vresp;
  s = Grove()->Predict(&vctx, values_req, &vresp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(RawFloats(resp.margin()), std::vector<float>(vresp.margin().values().begin(),
                                                         vresp.margin().values().end()));
  EXPECT_EQ(RawFloats(resp.shap_values()),
            std::vector<float>(vresp.shap_values().values().begin(),
                               vresp.shap_values().values().end()));
  EXPECT_EQ(resp.explained_rows(0), 9999);

  grove::v1::ExplainRequest ereq;
  ereq.set_model("demo");
  *ereq.mutable_rows() = req.rows();
  ereq.set_top_k(1);
  grpc::ClientContext ectx;
  grove::v1::ExplainResponse eresp;
  s = Grove()->Explain(&ectx, ereq, &eresp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const std::vector<float> values = RawFloats(eresp.values());
  ASSERT_EQ(values.size(), static_cast<size_t>(big * (cols + 1)));
  EXPECT_EQ(std::vector<float>(values.end() - (cols + 1), values.end()), RawFloats(resp.shap_values()));
  EXPECT_EQ(eresp.top().features_size(), big);

  // One value short: INVALID_ARGUMENT in bytes, as for rows in the message.
  req.mutable_rows()->mutable_raw_f32()->resize(raw.size() - 4);
  grpc::ClientContext bad_ctx;
  s = Grove()->Predict(&bad_ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr(absl::StrCat("holds ", raw.size() - 4, " bytes")));
  // Raw rows and values at once: refused, naming the forms.
  req.mutable_rows()->set_raw_f32(raw);
  req.mutable_rows()->add_values(1.0f);
  grpc::ClientContext two_ctx;
  s = Grove()->Predict(&two_ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("more than one of values"));

  // KServe's ModelInfer: its one raw_input_contents entry is received apart too, with the answers
  // of typed contents; typed and raw at once is refused as before.
  inference::ModelInferRequest kreq;
  kreq.set_model_name("demo");
  auto* in = kreq.add_inputs();
  in->set_name("input__0");
  in->set_datatype("FP32");
  in->add_shape(big);
  in->add_shape(cols);
  kreq.add_raw_input_contents(raw);
  kreq.add_outputs()->set_name("output__0");
  grpc::ClientContext kctx;
  inference::ModelInferResponse kresp;
  s = Kserve()->ModelInfer(&kctx, kreq, &kresp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  inference::ModelInferRequest typed = kreq;
  typed.clear_raw_input_contents();
  for (float x : rows) typed.mutable_inputs(0)->mutable_contents()->add_fp32_contents(x);
  grpc::ClientContext tctx;
  inference::ModelInferResponse tresp;
  ASSERT_TRUE(Kserve()->ModelInfer(&tctx, typed, &tresp).ok());
  ASSERT_EQ(kresp.raw_output_contents_size(), 1);
  EXPECT_EQ(kresp.raw_output_contents(0), tresp.raw_output_contents(0));
  typed.add_raw_input_contents(raw);
  grpc::ClientContext both_ctx;
  s = Kserve()->ModelInfer(&both_ctx, typed, &tresp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("both as raw_input_contents and as typed contents"));
}

TEST_F(ServerTest, ExplainWithTopKBiasAndInteractions) {
  int64_t n, cols;
  std::vector<float> rows = ReadRows(kDemoRows, &n, &cols);
  grove::v1::ExplainRequest req;
  req.set_model("demo");
  SetRows(req.mutable_rows(), rows, cols);
  req.set_top_k(3);
  req.set_interactions(true);
  grpc::ClientContext ctx;
  grove::v1::ExplainResponse resp;
  grpc::Status s = Grove()->Explain(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.num_features(), 8);
  EXPECT_EQ(resp.num_outputs(), 1);
  const std::vector<float> shap = LocalExplain(kDemo, rows, cols, false);
  ExpectClose(resp.values().values(), shap, 1e-4);
  ExpectClose(resp.interactions().values(), LocalExplain(kDemo, rows, cols, true), 1e-4);
  ASSERT_EQ(resp.bias_size(), 1);
  EXPECT_NEAR(resp.bias(0), shap[8], 1e-5);
  EXPECT_EQ(resp.top().k(), 3);
  EXPECT_EQ(resp.top().features_size(), n * 3);

  // omit_values: only top-k and bias.
  req.set_interactions(false);
  req.set_omit_values(true);
  grpc::ClientContext ctx2;
  grove::v1::ExplainResponse resp2;
  ASSERT_TRUE(Grove()->Explain(&ctx2, req, &resp2).ok());
  EXPECT_EQ(resp2.values().values_size(), 0);
  EXPECT_EQ(resp2.top().features_size(), n * 3);
  EXPECT_EQ(resp2.top().features(0), resp.top().features(0));
}

// Interventional SHAP of `rows` over examples/rows.csv as background, by the CPU reference.
std::vector<float> LocalInterventional(const std::vector<float>& rows, int64_t cols,
                                       OutputSpace space, bool interactions = false) {
  ForestPtr f = *LoadModelFile(kDemo);
  absl::StatusOr<Background> bg = LoadBackgroundFile(*f, kDemoRows);
  EXPECT_TRUE(bg.ok()) << bg.status();
  const int64_t n = static_cast<int64_t>(rows.size()) / cols;
  const int64_t w = ExplainWidth(*f, interactions);
  std::vector<float> out(n * w);
  InterventionalOptions o;
  o.output_space = space;
  o.interactions = interactions;
  EXPECT_TRUE(ExplainInterventionalCpu(*f, bg->view(), MakeRowsView(rows.data(), n, cols), o,
                                       MakeMatrixView(out.data(), n, w), nullptr)
                  .ok());
  return out;
}

// A KServe request for treeshap_output of `rows` (typed FP32 contents).
inference::ModelInferRequest ShapRequest(const std::string& model, const std::vector<float>& rows,
                                         int64_t n, int64_t cols) {
  inference::ModelInferRequest req;
  req.set_model_name(model);
  auto* in = AddInput0(&req, n, cols);
  for (float x : rows) in->mutable_contents()->add_fp32_contents(x);
  req.add_outputs()->set_name("treeshap_output");
  return req;
}

TEST_F(ServerTest, InterventionalOverTheModelsBackground) {
  int64_t n, cols;
  std::vector<float> rows = ReadRows(kDemoRows, &n, &cols);
  auto stub = Grove();
  {
    grpc::ClientContext ctx;
    grove::v1::GetModelMetadataRequest q;
    q.set_model("demo_bg");
    grove::v1::ModelMetadata m;
    ASSERT_TRUE(stub->GetModelMetadata(&ctx, q, &m).ok());
    EXPECT_EQ(m.background_rows(), n);
  }
  grove::v1::ExplainRequest req;
  req.set_model("demo_bg");
  SetRows(req.mutable_rows(), rows, cols);
  req.set_method(grove::v1::EXPLAIN_METHOD_INTERVENTIONAL);
  for (auto [space, proto] : {std::pair{OutputSpace::kMargin, grove::v1::OUTPUT_SPACE_MARGIN},
                              std::pair{OutputSpace::kProbability,
                                        grove::v1::OUTPUT_SPACE_PROBABILITY}}) {
    req.set_output_space(proto);
    grpc::ClientContext ctx;
    grove::v1::ExplainResponse resp;
    grpc::Status s = stub->Explain(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    const std::vector<float> want = LocalInterventional(rows, cols, space);
    ExpectClose(resp.values().values(), want, 1e-5);
    ASSERT_EQ(resp.bias_size(), 1);
    EXPECT_EQ(resp.bias(0), resp.values().values(cols));
    // The bias is the mean output over the background, which here is the rows themselves.
    const std::vector<float> p = LocalPredict(
        kDemo, rows, cols, space == OutputSpace::kMargin ? OutputKind::kMargin
                                                         : OutputKind::kPrediction);
    double mean = 0;
    for (float v : p) mean += v / n;
    EXPECT_NEAR(resp.bias(0), mean, 1e-5 * std::max(1.0, std::fabs(mean)));
  }
  // KServe: the same through request parameters.
  inference::ModelInferRequest kreq = ShapRequest("demo_bg", rows, n, cols);
  (*kreq.mutable_parameters())["method"].set_string_param("interventional");
  (*kreq.mutable_parameters())["output_space"].set_string_param("probability");
  grpc::ClientContext kctx;
  inference::ModelInferResponse kresp;
  grpc::Status ks = Kserve()->ModelInfer(&kctx, kreq, &kresp);
  ASSERT_TRUE(ks.ok()) << ks.error_message();
  std::vector<float> kshap(n * (cols + 1));
  ASSERT_EQ(kresp.raw_output_contents(0).size(), kshap.size() * 4);
  std::memcpy(kshap.data(), kresp.raw_output_contents(0).data(), kshap.size() * 4);
  ExpectClose(kshap, LocalInterventional(rows, cols, OutputSpace::kProbability), 1e-5);
}

TEST_F(ServerTest, InterventionalInteractionValuesOverTheModelsBackground) {
  int64_t n, cols;
  std::vector<float> rows = ReadRows(kDemoRows, &n, &cols);
  n = std::min<int64_t>(n, 8);
  rows.resize(n * cols);
  grove::v1::ExplainRequest req;
  req.set_model("demo_bg");
  SetRows(req.mutable_rows(), rows, cols);
  req.set_method(grove::v1::EXPLAIN_METHOD_INTERVENTIONAL);
  req.set_interactions(true);
  for (auto [space, proto] : {std::pair{OutputSpace::kMargin, grove::v1::OUTPUT_SPACE_MARGIN},
                              std::pair{OutputSpace::kProbability,
                                        grove::v1::OUTPUT_SPACE_PROBABILITY}}) {
    req.set_output_space(proto);
    grpc::ClientContext ctx;
    grove::v1::ExplainResponse resp;
    grpc::Status s = Grove()->Explain(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ExpectClose(resp.interactions().values(), LocalInterventional(rows, cols, space, true), 1e-5);
    // The values are the interactions' row sums: the interventional SHAP values.
    ExpectClose(resp.values().values(), LocalInterventional(rows, cols, space), 1e-4);
  }
}

TEST_F(ServerTest, InterventionalErrorsSayWhatToDo) {
  int64_t n, cols;
  std::vector<float> rows = ReadRows(kDemoRows, &n, &cols);
  auto explain = [&](const std::string& model, grove::v1::ExplainMethod method,
                     grove::v1::OutputSpace space, bool interactions) {
    grove::v1::ExplainRequest req;
    req.set_model(model);
    SetRows(req.mutable_rows(), rows, cols);
    req.set_method(method);
    req.set_output_space(space);
    req.set_interactions(interactions);
    grpc::ClientContext ctx;
    grove::v1::ExplainResponse resp;
    return Grove()->Explain(&ctx, req, &resp);
  };
  grpc::Status s = explain("demo", grove::v1::EXPLAIN_METHOD_INTERVENTIONAL,
                           grove::v1::OUTPUT_SPACE_MARGIN, false);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("has no background data set"));
  EXPECT_THAT(s.error_message(), HasSubstr("add demo/background.csv"));
  s = explain("demo_bg", grove::v1::EXPLAIN_METHOD_PATH_DEPENDENT,
              grove::v1::OUTPUT_SPACE_PROBABILITY, false);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("path-dependent SHAP explains the margin"));
  s = explain("demo", grove::v1::EXPLAIN_METHOD_INTERVENTIONAL, grove::v1::OUTPUT_SPACE_MARGIN,
              true);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("has no background data set"));
  s = explain("demo_bg", static_cast<grove::v1::ExplainMethod>(7),
              grove::v1::OUTPUT_SPACE_MARGIN, false);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("unknown ExplainRequest.method 7"));

  inference::ModelInferRequest kreq = ShapRequest("demo_bg", rows, n, cols);
  (*kreq.mutable_parameters())["method"].set_int64_param(1);
  grpc::ClientContext kctx;
  inference::ModelInferResponse kresp;
  grpc::Status ks = Kserve()->ModelInfer(&kctx, kreq, &kresp);
  EXPECT_EQ(ks.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(ks.error_message(), HasSubstr("request parameter 'method' must be a string"));
  (*kreq.mutable_parameters())["method"].set_string_param("shapley");
  grpc::ClientContext kctx2;
  ks = Kserve()->ModelInfer(&kctx2, kreq, &kresp);
  EXPECT_THAT(ks.error_message(),
              HasSubstr("request parameter 'method': unknown explanation method 'shapley'"));
}

// KServe REST infer of demo_bg's treeshap_output for `rows` (n x cols) with `parameters`: the
// parsed answer (null, the failure reported, unless it is 200).
nlohmann::json RestShap(int port, const nlohmann::json& parameters,
                        const std::vector<float>& rows, int64_t n, int64_t cols) {
  httplib::Client http("127.0.0.1", port);
  const nlohmann::json infer = {
      {"parameters", parameters},
      {"inputs", {{{"name", "input__0"}, {"shape", {n, cols}}, {"datatype", "FP32"},
                   {"data", rows}}}},
      {"outputs", {{{"name", "treeshap_output"}}}}};
  auto r = http.Post("/v2/models/demo_bg/infer", infer.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return nullptr;
  EXPECT_EQ(r->status, 200) << r->body;
  return r->status == 200 ? nlohmann::json::parse(r->body) : nlohmann::json();
}

// KServe ModelInfer of demo_bg's treeshap_output for `rows` (n x cols) with the request
// parameter attribution `attribution`, path-dependent or interventional; the values into `got`
// when it answers.
grpc::Status KserveAttribution(inference::GRPCInferenceService::Stub* kserve,
                               const std::vector<float>& rows, int64_t n, int64_t cols,
                               const std::string& attribution, bool interventional,
                               std::vector<float>* got) {
  inference::ModelInferRequest kreq = ShapRequest("demo_bg", rows, n, cols);
  (*kreq.mutable_parameters())["attribution"].set_string_param(attribution);
  if (interventional) {
    (*kreq.mutable_parameters())["method"].set_string_param("interventional");
  }
  grpc::ClientContext kctx;
  inference::ModelInferResponse kresp;
  grpc::Status ks = kserve->ModelInfer(&kctx, kreq, &kresp);
  if (!ks.ok()) return ks;
  got->resize(n * (cols + 1));
  EXPECT_EQ(kresp.raw_output_contents(0).size(), got->size() * 4);
  std::memcpy(got->data(), kresp.raw_output_contents(0).data(),
              std::min(got->size() * 4, kresp.raw_output_contents(0).size()));
  return ks;
}

// Banzhaf values per row by their definition (every feature subset): path-dependent, or with
// `background` (row-major) the mean over its rows of each pair's margin values.
std::vector<float> BanzhafByDefinition(const std::vector<float>& rows, int64_t cols,
                                       bool interactions, const std::vector<float>& background) {
  ForestPtr f = *LoadModelFile(kDemo);
  const int K = f->num_outputs;
  const int64_t n = static_cast<int64_t>(rows.size()) / cols;
  const int64_t nb = static_cast<int64_t>(background.size()) / cols;
  std::vector<float> out;
  for (int64_t r = 0; r < n; ++r) {
    auto of_game = [&](const std::vector<double>& game) {
      return interactions ? testing::BanzhafInteractionsOfGame(game, cols, K)
                          : testing::BanzhafOfGame(game, cols, K);
    };
    std::vector<double> v;
    if (nb == 0) {
      v = of_game(testing::PathDependentGame(*f, rows.data() + r * cols));
    } else {
      for (int64_t j = 0; j < nb; ++j) {
        const std::vector<double> one = of_game(testing::PairGame(
            *f, rows.data() + r * cols, background.data() + j * cols, OutputSpace::kMargin));
        v.resize(one.size(), 0.0);
        for (size_t c = 0; c < one.size(); ++c) v[c] += one[c] / nb;
      }
    }
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

TEST_F(ServerTest, BanzhafValuesOnEveryProtocol) {
  int64_t n, cols;
  std::vector<float> background = ReadRows(kDemoRows, &n, &cols);
  std::vector<float> rows(background.begin(), background.begin() + 4 * cols);
  grove::v1::ExplainRequest req;
  req.set_model("demo_bg");
  SetRows(req.mutable_rows(), rows, cols);
  req.set_attribution(grove::v1::ATTRIBUTION_BANZHAF);
  for (bool interactions : {false, true}) {
    req.set_interactions(interactions);
    grpc::ClientContext ctx;
    grove::v1::ExplainResponse resp;
    grpc::Status s = Grove()->Explain(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ExpectClose(resp.values().values(), BanzhafByDefinition(rows, cols, false, {}), 1e-4);
    if (interactions) {
      ExpectClose(resp.interactions().values(), BanzhafByDefinition(rows, cols, true, {}), 1e-5);
    }
  }
  req.set_interactions(false);
  req.set_method(grove::v1::EXPLAIN_METHOD_INTERVENTIONAL);
  {
    grpc::ClientContext ctx;
    grove::v1::ExplainResponse resp;
    grpc::Status s = Grove()->Explain(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ExpectClose(resp.values().values(), BanzhafByDefinition(rows, cols, false, background), 1e-5);
  }
  // KServe: the request parameter, on both methods.
  for (bool interventional : {false, true}) {
    std::vector<float> got;
    grpc::Status ks =
        KserveAttribution(Kserve().get(), rows, 4, cols, "banzhaf", interventional, &got);
    ASSERT_TRUE(ks.ok()) << ks.error_message();
    ExpectClose(got,
                BanzhafByDefinition(rows, cols, false,
                                    interventional ? background : std::vector<float>()),
                1e-5);
  }
  // Unknown values are refused with the accepted ones.
  req.set_attribution(static_cast<grove::v1::Attribution>(5));
  grpc::ClientContext ctx;
  grove::v1::ExplainResponse resp;
  grpc::Status s = Grove()->Explain(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("unknown ExplainRequest.attribution 5"));
  inference::ModelInferRequest kreq = ShapRequest("demo_bg", rows, 4, cols);
  (*kreq.mutable_parameters())["attribution"].set_string_param("owen");
  grpc::ClientContext kctx;
  inference::ModelInferResponse kresp;
  grpc::Status ks = Kserve()->ModelInfer(&kctx, kreq, &kresp);
  EXPECT_EQ(ks.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(ks.error_message(),
              HasSubstr("request parameter 'attribution': unknown attribution 'owen'"));
}

// Saabas attributions of `rows` by the in-process Servable (what the CLI and groveml run).
std::vector<float> SaabasInProcess(const std::vector<float>& rows, int64_t cols) {
  absl::StatusOr<ServablePtr> s = BuildServable(*LoadModelFile(kDemo), nullptr, EngineOptions(),
                                                nullptr);
  EXPECT_TRUE(s.ok()) << s.status();
  const int64_t n = static_cast<int64_t>(rows.size()) / cols;
  const int64_t width = (*s)->Width(Operation::kSaabas, RunParams());
  std::vector<float> out(n * width);
  EXPECT_TRUE((*s)->Run(Operation::kSaabas, RunParams(), MakeRowsView(rows.data(), n, cols),
                        MakeMatrixView(out.data(), n, width), nullptr)
                  .ok());
  return out;
}

// Saabas attributions on every protocol (grove.v1 ATTRIBUTION_SAABAS; KServe gRPC and REST,
// parameter attribution "saabas") are the in-process Servable's, bit for bit; the combinations
// no operation computes are INVALID_ARGUMENT saying why on each.
TEST_F(ServerTest, SaabasAttributionsOnEveryProtocol) {
  int64_t n, cols;
  std::vector<float> all = ReadRows(kDemoRows, &n, &cols);
  std::vector<float> rows(all.begin(), all.begin() + 5 * cols);
  const std::vector<float> want = SaabasInProcess(rows, cols);
  grove::v1::ExplainRequest req;
  req.set_model("demo_bg");
  SetRows(req.mutable_rows(), rows, cols);
  req.set_attribution(grove::v1::ATTRIBUTION_SAABAS);
  req.set_residuals(true);
  {
    grpc::ClientContext ctx;
    grove::v1::ExplainResponse resp;
    grpc::Status s = Grove()->Explain(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ExpectClose(resp.values().values(), want, 0.0);
    // Additive: the residuals are rounding.
    ASSERT_EQ(resp.residuals().values_size(), 5);
    for (float r : resp.residuals().values()) EXPECT_LE(std::abs(r), 1e-5);
  }
  for (bool interventional : {false, true}) {
    grove::v1::ExplainRequest bad = req;
    bad.set_interactions(!interventional);
    if (interventional) bad.set_method(grove::v1::EXPLAIN_METHOD_INTERVENTIONAL);
    grpc::ClientContext ctx;
    grove::v1::ExplainResponse resp;
    grpc::Status s = Grove()->Explain(&ctx, bad, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(),
                HasSubstr(interventional ? "path-dependent only" : "no interaction values"));
  }
  // KServe gRPC: the request parameter; interventional refused.
  for (bool interventional : {false, true}) {
    std::vector<float> got;
    grpc::Status ks =
        KserveAttribution(Kserve().get(), rows, 5, cols, "saabas", interventional, &got);
    if (interventional) {
      EXPECT_EQ(ks.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_THAT(ks.error_message(), HasSubstr("path-dependent only"));
      continue;
    }
    ASSERT_TRUE(ks.ok()) << ks.error_message();
    EXPECT_EQ(got, want);
  }
  // KServe REST: the same parameter in JSON.
  const nlohmann::json answer =
      RestShap(server_->http_port(), {{"attribution", "saabas"}}, rows, 5, cols);
  ASSERT_FALSE(answer.is_null());
  ASSERT_EQ(answer["outputs"][0]["data"].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(answer["outputs"][0]["data"][i].get<float>(), want[i]) << i;
  }
}

// Values of feature groups by their definition (every coalition of groups): path-dependent, or
// with `background` the mean over its rows of each pair's game in `space`.
std::vector<float> GroupValuesByDefinition(const std::vector<float>& rows, int64_t cols,
                                           const FeatureGroups& groups,
                                           const std::vector<float>& background,
                                           OutputSpace space = OutputSpace::kMargin) {
  ForestPtr f = *LoadModelFile(kDemo);
  const int K = f->num_outputs;
  const int64_t n = static_cast<int64_t>(rows.size()) / cols;
  const int64_t nb = static_cast<int64_t>(background.size()) / cols;
  std::vector<float> out;
  for (int64_t r = 0; r < n; ++r) {
    std::vector<double> game;
    if (nb == 0) {
      game = testing::GroupedGame(testing::PathDependentGame(*f, rows.data() + r * cols), K,
                                  groups);
    } else {
      for (int64_t j = 0; j < nb; ++j) {
        const std::vector<double> pair = testing::GroupedGame(
            testing::PairGame(*f, rows.data() + r * cols, background.data() + j * cols, space),
            K, groups);
        game.resize(pair.size(), 0.0);
        for (size_t c = 0; c < pair.size(); ++c) game[c] += pair[c] / nb;
      }
    }
    const std::vector<double> v = testing::ShapleyOfGame(game, groups.num_groups(), K);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

FeatureGroupsPtr DemoGroups(const std::string& json) {
  absl::StatusOr<std::vector<GroupSpec>> spec = ParseFeatureGroupsJson(json, "test");
  EXPECT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<FeatureGroupsPtr> g = ResolveFeatureGroups(*spec, 8, {});
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

TEST_F(ServerTest, FeatureGroupsOnEveryProtocol) {
  int64_t n, cols;
  std::vector<float> background = ReadRows(kDemoRows, &n, &cols);
  std::vector<float> rows(background.begin(), background.begin() + 3 * cols);
  const FeatureGroupsPtr groups = DemoGroups(R"({"ab": ["f0", 1], "tail": [7, 5, 6]})");
  ASSERT_EQ(groups->num_groups(), 5);  // ab, f2, f3, f4, tail
  grove::v1::ExplainRequest req;
  req.set_model("demo_bg");
  SetRows(req.mutable_rows(), rows, cols);
  grove::v1::FeatureGroup* ab = req.add_groups();
  ab->set_name("ab");
  ab->add_features("f0");
  ab->add_feature_indices(1);
  grove::v1::FeatureGroup* tail = req.add_groups();
  tail->set_name("tail");
  for (int i : {7, 5, 6}) tail->add_feature_indices(i);
  for (bool interventional : {false, true}) {
    req.set_method(interventional ? grove::v1::EXPLAIN_METHOD_INTERVENTIONAL
                                  : grove::v1::EXPLAIN_METHOD_PATH_DEPENDENT);
    req.set_residuals(true);
    req.set_top_k(2);
    grpc::ClientContext ctx;
    grove::v1::ExplainResponse resp;
    grpc::Status s = Grove()->Explain(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.num_features(), 5);
    ASSERT_EQ(resp.groups_size(), 5);
    EXPECT_EQ(resp.groups(0).name(), "ab");
    EXPECT_EQ(resp.groups(1).name(), "f2");
    EXPECT_EQ(resp.groups(4).name(), "tail");
    EXPECT_EQ(std::vector<int>(resp.groups(4).feature_indices().begin(),
                               resp.groups(4).feature_indices().end()),
              (std::vector<int>{5, 6, 7}));
    ExpectClose(resp.values().values(),
                GroupValuesByDefinition(rows, cols, *groups,
                                        interventional ? background : std::vector<float>()),
                1e-5);
    // Additive over groups: the residuals are rounding.
    for (float r : resp.residuals().values()) EXPECT_LT(std::abs(r), 1e-4);
    EXPECT_EQ(resp.top().k(), 2);
    for (int32_t g : resp.top().features()) EXPECT_LT(g, 5);
  }
  // KServe gRPC: the parameter, interventional in the probability space.
  inference::ModelInferRequest kreq = ShapRequest("demo_bg", rows, 3, cols);
  (*kreq.mutable_parameters())["groups"].set_string_param(
      R"({"tail": [5, 6, 7], "ab": ["f0", "f1"]})");
  (*kreq.mutable_parameters())["method"].set_string_param("interventional");
  (*kreq.mutable_parameters())["output_space"].set_string_param("probability");
  grpc::ClientContext kctx;
  inference::ModelInferResponse kresp;
  grpc::Status ks = Kserve()->ModelInfer(&kctx, kreq, &kresp);
  ASSERT_TRUE(ks.ok()) << ks.error_message();
  ASSERT_EQ(kresp.outputs(0).shape_size(), 2);
  EXPECT_EQ(kresp.outputs(0).shape(1), 6);
  EXPECT_THAT(kresp.outputs(0).parameters().at("groups").string_param(),
              HasSubstr(R"({"features":[0,1],"name":"ab"})"));
  std::vector<float> got(3 * 6);
  ASSERT_EQ(kresp.raw_output_contents(0).size(), got.size() * 4);
  std::memcpy(got.data(), kresp.raw_output_contents(0).data(), got.size() * 4);
  ExpectClose(got,
              GroupValuesByDefinition(rows, cols, *groups, background, OutputSpace::kProbability),
              1e-5);

  // Refusals name what is wrong.
  grove::v1::ExplainRequest bad = req;
  bad.mutable_groups(1)->add_feature_indices(1);
  grpc::ClientContext bctx;
  grove::v1::ExplainResponse bresp;
  grpc::Status bs = Grove()->Explain(&bctx, bad, &bresp);
  EXPECT_EQ(bs.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bs.error_message(),
              HasSubstr("groups of model 'demo_bg': feature 1 (\"f1\") is in group \"ab\" and "
                        "in group \"tail\""));
  (*kreq.mutable_parameters())["groups"].set_string_param(R"({"x": ["nope"]})");
  grpc::ClientContext kctx2;
  ks = Kserve()->ModelInfer(&kctx2, kreq, &kresp);
  EXPECT_EQ(ks.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(ks.error_message(), HasSubstr("feature \"nope\" is not a feature of the model"));
}

// A model's groups.json: the players of every explanation that names no groups of its own.
TEST_F(ServerTest, TheModelsGroupsAreTheDefault) {
  int64_t n, cols;
  std::vector<float> rows = ReadRows(kDemoRows, &n, &cols);
  rows.resize(2 * cols);
  const FeatureGroupsPtr groups = DemoGroups(R"({"head": [0, 1, 2, 3]})");
  grove::v1::ExplainRequest req;
  req.set_model("demo_groups");
  SetRows(req.mutable_rows(), rows, cols);
  grpc::ClientContext ctx;
  grove::v1::ExplainResponse resp;
  grpc::Status s = Grove()->Explain(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.groups_size(), 5);
  EXPECT_EQ(resp.groups(0).name(), "head");
  ExpectClose(resp.values().values(), GroupValuesByDefinition(rows, cols, *groups, {}), 1e-5);
  // A request's own groups replace the model's.
  grove::v1::FeatureGroup* g = req.add_groups();
  g->set_name("pair");
  g->add_feature_indices(0);
  g->add_feature_indices(7);
  grpc::ClientContext ctx2;
  s = Grove()->Explain(&ctx2, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.num_features(), 7);
  EXPECT_EQ(resp.groups(0).name(), "pair");
  // KServe's metadata says the shape and the groups.
  grpc::ClientContext mctx;
  inference::ModelMetadataRequest mreq;
  mreq.set_name("demo_groups");
  inference::ModelMetadataResponse mresp;
  ASSERT_TRUE(Kserve()->ModelMetadata(&mctx, mreq, &mresp).ok());
  ASSERT_EQ(mresp.outputs_size(), 2);
  EXPECT_EQ(mresp.outputs(1).shape(1), 6);
  EXPECT_THAT(mresp.outputs(1).parameters().at("groups").string_param(),
              HasSubstr(R"({"features":[0,1,2,3],"name":"head"})"));
}

// The value of a counter of the server's metrics (0 when absent).
double CounterValue(GroveServer* server, const std::string& series) {
  prometheus::TextSerializer text;
  const std::string exposition = text.Serialize(server->metrics().registry()->Collect());
  const size_t at = exposition.find("\n" + series + " ");
  if (at == std::string::npos) return 0;
  return std::stod(exposition.substr(at + series.size() + 2));
}

// Residuals: per row and output the values' sum minus the model's output, as recomputed here
// from the response and a local prediction; the metrics count the rows and those over the bound.
TEST_F(ServerTest, ResidualsSayHowFarFromAdditive) {
  int64_t n, cols;
  std::vector<float> rows = ReadRows(kDemoRows, &n, &cols);
  rows.resize(6 * cols);
  const std::vector<float> margin = LocalPredict(kDemo, rows, cols, OutputKind::kMargin);
  const std::vector<float> proba = LocalPredict(kDemo, rows, cols, OutputKind::kPrediction);
  struct Case {
    grove::v1::ExplainMethod method;
    grove::v1::OutputSpace space;
    grove::v1::Attribution attribution;
    const char* operation;
  };
  for (const Case& c :
       {Case{grove::v1::EXPLAIN_METHOD_PATH_DEPENDENT, grove::v1::OUTPUT_SPACE_MARGIN,
             grove::v1::ATTRIBUTION_SHAPLEY, "explain"},
        Case{grove::v1::EXPLAIN_METHOD_INTERVENTIONAL, grove::v1::OUTPUT_SPACE_PROBABILITY,
             grove::v1::ATTRIBUTION_SHAPLEY, "interventional"},
        Case{grove::v1::EXPLAIN_METHOD_PATH_DEPENDENT, grove::v1::OUTPUT_SPACE_MARGIN,
             grove::v1::ATTRIBUTION_BANZHAF, "banzhaf"}}) {
    const std::string labels = absl::StrCat("{model=\"demo_bg\",operation=\"", c.operation, "\"}");
    const double rows_before = CounterValue(server_, "grove_explain_residual_rows_total" + labels);
    const double over_before =
        CounterValue(server_, "grove_explain_residual_exceeded_rows_total" + labels);
    grove::v1::ExplainRequest req;
    req.set_model("demo_bg");
    SetRows(req.mutable_rows(), rows, cols);
    req.set_method(c.method);
    req.set_output_space(c.space);
    req.set_attribution(c.attribution);
    req.set_residuals(true);
    grpc::ClientContext ctx;
    grove::v1::ExplainResponse resp;
    grpc::Status s = Grove()->Explain(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(resp.residuals().rows(), 6);
    ASSERT_EQ(resp.residuals().cols(), 1);
    EXPECT_THAT(resp.residual_arithmetic(), HasSubstr("sum in double"));
    const std::vector<float>& output =
        c.space == grove::v1::OUTPUT_SPACE_MARGIN ? margin : proba;
    int64_t over = 0;
    for (int r = 0; r < 6; ++r) {
      double sum = 0;
      for (int64_t j = 0; j <= cols; ++j) sum += resp.values().values(r * (cols + 1) + j);
      const double want = sum - output[r];
      EXPECT_NEAR(resp.residuals().values(r), want, 1e-6) << c.operation << " row " << r;
      if (std::abs(want) > 1e-5 * std::max(1.0, std::abs(double{output[r]}))) ++over;
    }
    if (c.attribution == grove::v1::ATTRIBUTION_SHAPLEY) {
      EXPECT_EQ(over, 0) << c.operation;  // SHAP values add up
    } else {
      EXPECT_GT(over, 0);  // Banzhaf values do not
    }
    EXPECT_EQ(CounterValue(server_, "grove_explain_residual_rows_total" + labels) - rows_before, 6)
        << c.operation;
    EXPECT_EQ(CounterValue(server_, "grove_explain_residual_exceeded_rows_total" + labels) -
                  over_before,
              over)
        << c.operation;
  }
  // Off by default.
  grove::v1::ExplainRequest req;
  req.set_model("demo_bg");
  SetRows(req.mutable_rows(), rows, cols);
  grpc::ClientContext ctx;
  grove::v1::ExplainResponse resp;
  ASSERT_TRUE(Grove()->Explain(&ctx, req, &resp).ok());
  EXPECT_FALSE(resp.has_residuals());
  EXPECT_TRUE(resp.residual_arithmetic().empty());
}

// KServe: the request parameter `residuals` adds treeshap_residuals [rows, K] and the response
// parameter residual_arithmetic, over gRPC and REST; the residuals are recomputed here from the
// values and a local prediction in the explained space.
TEST_F(ServerTest, KserveResidualsOverGrpcAndRest) {
  int64_t n, cols;
  std::vector<float> rows = ReadRows(kDemoRows, &n, &cols);
  n = 6;
  rows.resize(n * cols);
  const std::vector<float> proba = LocalPredict(kDemo, rows, cols, OutputKind::kPrediction);
  const double before = CounterValue(
      server_, "grove_explain_residual_rows_total{model=\"demo_bg\",operation=\"interventional\"}");
  inference::ModelInferRequest kreq = ShapRequest("demo_bg", rows, n, cols);
  (*kreq.mutable_parameters())["method"].set_string_param("interventional");
  (*kreq.mutable_parameters())["output_space"].set_string_param("probability");
  (*kreq.mutable_parameters())["residuals"].set_bool_param(true);
  grpc::ClientContext kctx;
  inference::ModelInferResponse kresp;
  grpc::Status ks = Kserve()->ModelInfer(&kctx, kreq, &kresp);
  ASSERT_TRUE(ks.ok()) << ks.error_message();
  ASSERT_EQ(kresp.outputs_size(), 2);
  EXPECT_EQ(kresp.outputs(1).name(), "treeshap_residuals");
  EXPECT_EQ(kresp.outputs(1).datatype(), "FP32");
  EXPECT_EQ(std::vector<int64_t>(kresp.outputs(1).shape().begin(), kresp.outputs(1).shape().end()),
            (std::vector<int64_t>{n, 1}));
  EXPECT_THAT(kresp.parameters().at("residual_arithmetic").string_param(),
              HasSubstr("sum in double"));
  std::vector<float> values(n * (cols + 1)), residuals(n);
  ASSERT_EQ(kresp.raw_output_contents(0).size(), values.size() * 4);
  ASSERT_EQ(kresp.raw_output_contents(1).size(), residuals.size() * 4);
  std::memcpy(values.data(), kresp.raw_output_contents(0).data(), values.size() * 4);
  std::memcpy(residuals.data(), kresp.raw_output_contents(1).data(), residuals.size() * 4);
  std::vector<double> want(n);
  for (int64_t r = 0; r < n; ++r) {
    double sum = 0;
    for (int64_t j = 0; j <= cols; ++j) sum += values[r * (cols + 1) + j];
    want[r] = sum - proba[r];
    EXPECT_NEAR(residuals[r], want[r], 1e-6) << "row " << r;
    EXPECT_LE(std::abs(residuals[r]), 1e-5) << "row " << r;  // SHAP values add up
  }
  EXPECT_EQ(CounterValue(server_, "grove_explain_residual_rows_total{model=\"demo_bg\","
                                  "operation=\"interventional\"}") - before, n);

  // With groups the values are G + 1 columns a row, and the residuals sum those.
  inference::ModelInferRequest greq = kreq;
  (*greq.mutable_parameters())["groups"].set_string_param(
      R"({"tail": [5, 6, 7], "ab": ["f0", "f1"]})");
  grpc::ClientContext gctx;
  inference::ModelInferResponse gresp;
  ASSERT_TRUE(Kserve()->ModelInfer(&gctx, greq, &gresp).ok());
  ASSERT_EQ(gresp.outputs_size(), 2);
  const int64_t g1 = gresp.outputs(0).shape(1);
  ASSERT_EQ(g1, cols - 3 + 1);  // 8 features in 5 players (two groups), and the bias
  std::vector<float> gvalues(n * g1), gresiduals(n);
  ASSERT_EQ(gresp.raw_output_contents(0).size(), gvalues.size() * 4);
  ASSERT_EQ(gresp.raw_output_contents(1).size(), gresiduals.size() * 4);
  std::memcpy(gvalues.data(), gresp.raw_output_contents(0).data(), gvalues.size() * 4);
  std::memcpy(gresiduals.data(), gresp.raw_output_contents(1).data(), gresiduals.size() * 4);
  for (int64_t r = 0; r < n; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < g1; ++j) sum += gvalues[r * g1 + j];
    EXPECT_NEAR(gresiduals[r], sum - proba[r], 1e-6) << "grouped row " << r;
    EXPECT_LE(std::abs(gresiduals[r]), 1e-4) << "grouped row " << r;
  }

  // REST: the same tensor in JSON and the arithmetic among the response's parameters.
  const nlohmann::json answer = RestShap(
      server_->http_port(),
      {{"method", "interventional"}, {"output_space", "probability"}, {"residuals", true}}, rows,
      n, cols);
  ASSERT_FALSE(answer.is_null());
  ASSERT_EQ(answer["outputs"].size(), 2u);
  EXPECT_EQ(answer["outputs"][1]["name"], "treeshap_residuals");
  EXPECT_EQ(answer["outputs"][1]["shape"], nlohmann::json({n, 1}));
  ASSERT_EQ(answer["outputs"][1]["data"].size(), static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(answer["outputs"][1]["data"][i].get<double>(), want[i], 1e-6) << "row " << i;
  }
  EXPECT_THAT(answer["parameters"]["residual_arithmetic"].get<std::string>(),
              HasSubstr("sum in double"));

  // Off by default; asked without treeshap_output, refused.
  inference::ModelInferRequest plain = ShapRequest("demo_bg", rows, n, cols);
  grpc::ClientContext pctx;
  inference::ModelInferResponse presp;
  ASSERT_TRUE(Kserve()->ModelInfer(&pctx, plain, &presp).ok());
  EXPECT_EQ(presp.outputs_size(), 1);
  EXPECT_TRUE(presp.parameters().empty());
  inference::ModelInferRequest alone = plain;
  alone.clear_outputs();
  alone.add_outputs()->set_name("output__0");
  (*alone.mutable_parameters())["residuals"].set_bool_param(true);
  grpc::ClientContext actx;
  grpc::Status refused = Kserve()->ModelInfer(&actx, alone, &presp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("'residuals'"));
}

TEST_F(ServerTest, ErrorsMapToStatusCodes) {
  auto stub = Grove();
  auto predict = [&](grove::v1::PredictRequest req) {
    grpc::ClientContext ctx;
    grove::v1::PredictResponse resp;
    return stub->Predict(&ctx, req, &resp);
  };
  grove::v1::PredictRequest ok;
  ok.set_model("demo");
  SetRows(ok.mutable_rows(), std::vector<float>(8, 0.5f), 8);
  EXPECT_TRUE(predict(ok).ok());

  grove::v1::PredictRequest r = ok;
  r.set_model("nope");
  EXPECT_EQ(predict(r).error_code(), grpc::StatusCode::NOT_FOUND);
  r = ok;
  r.set_version(9);
  EXPECT_EQ(predict(r).error_code(), grpc::StatusCode::NOT_FOUND);
  r = ok;
  SetRows(r.mutable_rows(), std::vector<float>(7, 0.5f), 7);
  grpc::Status wrong = predict(r);
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(wrong.error_message(), HasSubstr("expects 8"));
  r = ok;
  r.mutable_rows()->set_rows(0);
  r.mutable_rows()->clear_values();
  EXPECT_EQ(predict(r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  grove::v1::ExplainRequest e;
  e.set_model("multi");
  e.set_interactions(true);
  const int f = (*LoadModelFile(kMulti))->num_features;
  SetRows(e.mutable_rows(), std::vector<float>(f, 0.5f), f);
  grpc::ClientContext ctx;
  grove::v1::ExplainResponse er;
  grpc::Status wide = stub->Explain(&ctx, e, &er);
  EXPECT_EQ(wide.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(wide.error_message(), HasSubstr("limit of 40"));

  grpc::ClientContext lctx;
  grove::v1::LoadModelRequest lr;
  lr.set_model("absent");
  grove::v1::LoadModelResponse lresp;
  EXPECT_EQ(stub->LoadModel(&lctx, lr, &lresp).error_code(), grpc::StatusCode::NOT_FOUND);

  // Every code is counted under its name; unknown models under "_unknown".
  prometheus::TextSerializer text;
  const std::string exposition = text.Serialize(server_->metrics().registry()->Collect());
  EXPECT_THAT(exposition, HasSubstr("code=\"NOT_FOUND\""));
  EXPECT_THAT(exposition, HasSubstr("model=\"_unknown\""));
  EXPECT_THAT(exposition, HasSubstr("grove_batch_size_rows_bucket"));
  EXPECT_THAT(exposition, HasSubstr("grove_model_ready{model=\"demo\",version=\"1\"} 1"));
}

TEST_F(ServerTest, KserveSpeaksTritonFil) {
  auto stub = Kserve();
  {
    grpc::ClientContext ctx;
    inference::ServerReadyResponse r;
    ASSERT_TRUE(stub->ServerReady(&ctx, {}, &r).ok());
    EXPECT_TRUE(r.ready());
  }
  {
    grpc::ClientContext ctx;
    inference::ModelReadyRequest q;
    q.set_name("demo");
    inference::ModelReadyResponse r;
    ASSERT_TRUE(stub->ModelReady(&ctx, q, &r).ok());
    EXPECT_TRUE(r.ready());
  }
  {
    grpc::ClientContext ctx;
    inference::ModelMetadataRequest q;
    q.set_name("demo");
    inference::ModelMetadataResponse r;
    ASSERT_TRUE(stub->ModelMetadata(&ctx, q, &r).ok());
    EXPECT_EQ(r.inputs(0).name(), "input__0");
    EXPECT_EQ(r.inputs(0).shape(1), 8);
    EXPECT_EQ(r.inputs(0).parameters().at("feature_names").string_param(),
              R"(["f0","f1","f2","f3","f4","f5","f6","f7"])");
    EXPECT_EQ(r.outputs(0).name(), "output__0");
  }
  int64_t n, cols;
  std::vector<float> rows = ReadRows(kDemoRows, &n, &cols);
  inference::ModelInferRequest req;
  req.set_model_name("demo");
  req.set_id("abc");
  auto* in = req.add_inputs();
  in->set_name("input__0");
  in->set_datatype("FP32");
  in->add_shape(n);
  in->add_shape(cols);
  req.add_raw_input_contents(
      std::string(reinterpret_cast<const char*>(rows.data()), rows.size() * sizeof(float)));
  req.add_outputs()->set_name("output__0");
  req.add_outputs()->set_name("treeshap_output");
  grpc::ClientContext ctx;
  inference::ModelInferResponse resp;
  grpc::Status s = stub->ModelInfer(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.id(), "abc");
  EXPECT_EQ(resp.model_version(), "1");
  ASSERT_EQ(resp.outputs_size(), 2);
  ASSERT_EQ(resp.raw_output_contents_size(), 2);
  EXPECT_EQ(resp.outputs(0).shape(1), 2);
  std::vector<float> proba(n * 2);
  ASSERT_EQ(resp.raw_output_contents(0).size(), proba.size() * 4);
  std::memcpy(proba.data(), resp.raw_output_contents(0).data(), proba.size() * 4);
  const std::vector<float> p = LocalPredict(kDemo, rows, cols, OutputKind::kPrediction);
  for (int64_t r = 0; r < n; ++r) {
    EXPECT_NEAR(proba[2 * r + 1], p[r], 1e-6);
    EXPECT_NEAR(proba[2 * r], 1 - p[r], 1e-6);
  }
  std::vector<float> shap(n * (cols + 1));
  ASSERT_EQ(resp.raw_output_contents(1).size(), shap.size() * 4);
  std::memcpy(shap.data(), resp.raw_output_contents(1).data(), shap.size() * 4);
  ExpectClose(shap, LocalExplain(kDemo, rows, cols, false), 1e-4);

  // Typed contents, default output.
  inference::ModelInferRequest typed = req;
  typed.clear_raw_input_contents();
  typed.clear_outputs();
  for (float x : rows) typed.mutable_inputs(0)->mutable_contents()->add_fp32_contents(x);
  grpc::ClientContext ctx2;
  inference::ModelInferResponse resp2;
  ASSERT_TRUE(stub->ModelInfer(&ctx2, typed, &resp2).ok());
  ASSERT_EQ(resp2.outputs_size(), 1);
  EXPECT_EQ(resp2.raw_output_contents(0), resp.raw_output_contents(0));

  inference::ModelInferRequest bad = req;
  bad.mutable_inputs(0)->set_datatype("INT32");
  grpc::ClientContext ctx3;
  EXPECT_EQ(stub->ModelInfer(&ctx3, bad, &resp2).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  bad = req;
  bad.set_model_name("nope");
  grpc::ClientContext ctx4;
  EXPECT_EQ(stub->ModelInfer(&ctx4, bad, &resp2).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServerTest, ExplainStreamAnswersInOrder) {
  int64_t n, cols;
  std::vector<float> rows = ReadRows(kDemoRows, &n, &cols);
  grpc::ClientContext ctx;
  auto stream = Grove()->ExplainStream(&ctx);
  const int kMessages = 12;
  std::thread writer([&] {
    for (int i = 0; i < kMessages; ++i) {
      grove::v1::ExplainRequest req;
      req.set_model("demo");
      req.set_sequence(100 + i);
      const int64_t r = i % n;
      SetRows(req.mutable_rows(),
              std::vector<float>(rows.begin() + r * cols, rows.begin() + (r + 1) * cols), cols);
      if (!stream->Write(req)) break;
    }
    stream->WritesDone();
  });
  const std::vector<float> shap = LocalExplain(kDemo, rows, cols, false);
  grove::v1::ExplainResponse resp;
  int got = 0;
  while (stream->Read(&resp)) {
    EXPECT_EQ(resp.sequence(), static_cast<uint64_t>(100 + got));
    const int64_t r = got % n;
    ExpectClose(resp.values().values(),
                std::vector<float>(shap.begin() + r * (cols + 1),
                                   shap.begin() + (r + 1) * (cols + 1)),
                1e-4);
    ++got;
  }
  writer.join();
  grpc::Status s = stream->Finish();
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(got, kMessages);
}

TEST_F(ServerTest, ConcurrentCallersGetTheirOwnRows) {
  int64_t n, cols;
  std::vector<float> rows = ReadRows(kMultiRows, &n, &cols);
  const std::vector<float> want = LocalPredict(kMulti, rows, cols, OutputKind::kMargin);
  const int k = static_cast<int>(want.size() / n);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto stub = Grove();
      std::mt19937 rng(t);
      for (int i = 0; i < 25; ++i) {
        const int64_t begin = rng() % n;
        const int64_t count = 1 + rng() % std::min<int64_t>(n - begin, 9);
        grove::v1::PredictRequest req;
        req.set_model("multi");
        req.add_outputs(grove::v1::OUTPUT_MARGIN);
        SetRows(req.mutable_rows(),
                std::vector<float>(rows.begin() + begin * cols,
                                   rows.begin() + (begin + count) * cols),
                cols);
        grpc::ClientContext ctx;
        grove::v1::PredictResponse resp;
        if (!stub->Predict(&ctx, req, &resp).ok() ||
            resp.margin().values_size() != count * k) {
          ++failures;
          continue;
        }
        for (int64_t j = 0; j < count * k; ++j) {
          if (std::fabs(resp.margin().values(j) - want[begin * k + j]) > 1e-5) {
            ++failures;
            break;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(ServerTest, FullQueueIsResourceExhaustedAndExpiredWorkIsDropped) {
  auto stub = Grove();
  grove::v1::PredictRequest req;
  req.set_model("tiny");
  SetRows(req.mutable_rows(), std::vector<float>(8, 0.5f), 8);
  grpc::ClientContext first_ctx;
  first_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  grove::v1::PredictResponse first_resp;
  std::promise<grpc::Status> first;
  stub->async()->Predict(&first_ctx, &req, &first_resp,
                         [&](grpc::Status s) { first.set_value(std::move(s)); });
  // Wait (without sleeping a fixed time) until the first request sits in the queue.
  while (server_->runtime().QueueStats("tiny", Operation::kPredict).queued_tasks == 0) {
    std::this_thread::yield();
  }
  grpc::ClientContext second_ctx;
  grove::v1::PredictResponse second_resp;
  grpc::Status second = stub->Predict(&second_ctx, req, &second_resp);
  EXPECT_EQ(second.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(second.error_message(), HasSubstr("limit 1"));
  EXPECT_EQ(first.get_future().get().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST_F(ServerTest, ReloadUnderLoadFailsNothing) {
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      auto stub = Grove();
      grove::v1::PredictRequest req;
      req.set_model("demo");
      SetRows(req.mutable_rows(), std::vector<float>(16, 0.25f), 8);
      while (!stop.load()) {
        grpc::ClientContext ctx;
        grove::v1::PredictResponse resp;
        if (stub->Predict(&ctx, req, &resp).ok() && resp.prediction().values_size() == 2) {
          ++ok;
        } else {
          ++failed;
        }
      }
    });
  }
  auto stub = Grove();
  for (int i = 0; i < 5; ++i) {
    grpc::ClientContext ctx;
    grove::v1::LoadModelRequest req;
    req.set_model("demo");
    grove::v1::LoadModelResponse resp;
    grpc::Status s = stub->LoadModel(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(resp.status().ready());
  }
  stop = true;
  for (auto& t : callers) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_GT(ok.load(), 0);
}

TEST_F(ServerTest, UnloadThenLoad) {
  auto grove = Grove();
  auto kserve = Kserve();
  grpc::ClientContext uctx;
  grove::v1::UnloadModelRequest ureq;
  ureq.set_model("tiny");
  grove::v1::UnloadModelResponse uresp;
  ASSERT_TRUE(grove->UnloadModel(&uctx, ureq, &uresp).ok());
  {
    grpc::ClientContext ctx;
    inference::ModelReadyRequest q;
    q.set_name("tiny");
    inference::ModelReadyResponse r;
    ASSERT_TRUE(kserve->ModelReady(&ctx, q, &r).ok());
    EXPECT_FALSE(r.ready());
  }
  grove::v1::PredictRequest req;
  req.set_model("tiny");
  SetRows(req.mutable_rows(), std::vector<float>(8, 0.5f), 8);
  {
    grpc::ClientContext ctx;
    grove::v1::PredictResponse resp;
    EXPECT_EQ(grove->Predict(&ctx, req, &resp).error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  grpc::ClientContext lctx;
  grove::v1::LoadModelRequest lreq;
  lreq.set_model("tiny");
  grove::v1::LoadModelResponse lresp;
  ASSERT_TRUE(grove->LoadModel(&lctx, lreq, &lresp).ok());
  grpc::ClientContext mctx;
  grove::v1::GetModelMetadataRequest mreq;
  mreq.set_model("tiny");
  grove::v1::ModelMetadata meta;
  ASSERT_TRUE(grove->GetModelMetadata(&mctx, mreq, &meta).ok());
  EXPECT_EQ(meta.num_features(), 8);
  EXPECT_EQ(meta.format(), "xgboost_json");
  EXPECT_TRUE(meta.explainable());
  EXPECT_TRUE(meta.raw_tensors());  // clients send this server raw rows
}

// grpc.health.v1.Health/Check with hand-encoded messages (the health proto's C++ stubs are not
// installed): request {service = 1}, response {status = 1} (1 SERVING, 2 NOT_SERVING).
int HealthCheck(grpc::Channel* channel, const std::string& service, grpc::Status* status) {
  grpc::GenericStub stub(std::shared_ptr<grpc::Channel>(channel, [](grpc::Channel*) {}));
  std::string bytes;
  bytes.push_back(0x0a);
  bytes.push_back(static_cast<char>(service.size()));
  bytes += service;
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext ctx;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) { done.set_value(std::move(s)); });
  *status = done.get_future().get();
  if (!status->ok()) return -1;
  std::vector<grpc::Slice> slices;
  (void)response.Dump(&slices);
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out.size() >= 2 && out[0] == 0x08 ? out[1] : 0;
}

TEST_F(ServerTest, HealthPerModel) {
  grpc::Status s;
  EXPECT_EQ(HealthCheck(channel_->get(), "", &s), 1) << s.error_message();
  EXPECT_EQ(HealthCheck(channel_->get(), "model/demo", &s), 1) << s.error_message();
  EXPECT_EQ(HealthCheck(channel_->get(), "inference.GRPCInferenceService", &s), 1);
  HealthCheck(channel_->get(), "model/absent", &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
}

// A server of a test's own on 127.0.0.1 (ephemeral gRPC port, no metrics, no file watching).
ServerOptions LoopbackOptions(const fs::path& repository) {
  ServerOptions o;
  o.runtime.model_repository = repository.string();
  o.grpc_address = "127.0.0.1";
  o.grpc_port = 0;
  o.metrics_port = -1;
  o.http.port = -1;
  o.repository_poll = absl::ZeroDuration();
  return o;
}

// A separate server: shutdown while calls are queued computes and answers every one of them.
TEST(ServerShutdown, DrainsInFlightCalls) {
  const fs::path root = fs::temp_directory_path() / absl::StrCat("grove_shutdown_", ::getpid());
  fs::remove_all(root);
  Put(root, "demo", 1, kDemo);
  Write(root / "demo" / "config.json",
        R"({"batching": {"predict": {"max_delay_us": 60000000, "max_batch_rows": 100000}}})");
  ServerOptions o = LoopbackOptions(root);
  absl::StatusOr<std::unique_ptr<GroveServer>> server = GroveServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->WaitUntilLoaded().ok());
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->grpc_port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = grove::v1::Grove::NewStub(channel);
  grove::v1::PredictRequest req;
  req.set_model("demo");
  SetRows(req.mutable_rows(), std::vector<float>(8, 0.5f), 8);
  const int kCalls = 16;
  std::vector<grpc::ClientContext> ctx(kCalls);
  std::vector<grove::v1::PredictResponse> resp(kCalls);
  std::vector<std::promise<grpc::Status>> done(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    stub->async()->Predict(&ctx[i], &req, &resp[i],
                           [&, i](grpc::Status s) { done[i].set_value(std::move(s)); });
  }
  // Every call sits in the queue (a batch would wait 60 s for more rows): shutdown must still
  // compute and answer all of them (a closed queue no longer waits).
  while ((*server)->runtime().QueueStats("demo", Operation::kPredict).queued_tasks <
         kCalls) {
    std::this_thread::yield();
  }
  (*server)->Shutdown();
  int ok = 0;
  for (int i = 0; i < kCalls; ++i) {
    grpc::Status s = done[i].get_future().get();
    EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
    if (s.ok()) ++ok;
  }
  EXPECT_EQ(ok, kCalls);
  grpc::ClientContext after;
  grove::v1::PredictResponse r;
  EXPECT_EQ(stub->Predict(&after, req, &r).error_code(), grpc::StatusCode::UNAVAILABLE);
  server->reset();
  fs::remove_all(root);
}

// Triton's ModelStatistics are per model version. Versions 1 and 2 of one model share its queues
// (and here its batches: a batch waits 100 ms for company), yet each reports only its own calls,
// rows, queue waits and engine calls; a call that fails after resolving its version counts as
// that version's failure, one naming an unknown version nowhere.
TEST(ServerStatistics, CountsPerModelVersion) {
  const fs::path root = fs::temp_directory_path() / absl::StrCat("grove_stats_", ::getpid());
  fs::remove_all(root);
  Put(root, "two", 1, kDemo);
  Put(root, "two", 2, kDemo);
  Write(root / "two" / "config.json",
        R"({"versions": "all", "batching": {"predict": {"max_delay_us": 100000}}})");
  Put(root, "other", 1, kDemo);
  absl::StatusOr<std::unique_ptr<GroveServer>> server = GroveServer::Start(LoopbackOptions(root));
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->WaitUntilLoaded().ok());
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->grpc_port()),
                                     grpc::InsecureChannelCredentials());
  auto kserve = inference::GRPCInferenceService::NewStub(channel);
  auto grove = grove::v1::Grove::NewStub(channel);

  int64_t n, cols;
  const std::vector<float> rows = ReadRows(kDemoRows, &n, &cols);
  inference::ModelInferRequest infer;
  infer.set_model_name("two");
  infer.set_model_version("1");
  auto* in = infer.add_inputs();
  in->set_name("input__0");
  in->set_datatype("FP32");
  in->add_shape(n);
  in->add_shape(cols);
  infer.add_raw_input_contents(
      std::string(reinterpret_cast<const char*>(rows.data()), rows.size() * sizeof(float)));
  grove::v1::PredictRequest predict;
  predict.set_model("two");
  predict.set_version(2);
  SetRows(predict.mutable_rows(), std::vector<float>(rows.begin(), rows.begin() + cols), cols);

  // At once: three inferences of version 1 (n rows each), two predictions of version 2 (1 row).
  std::vector<std::thread> callers;
  std::atomic<int> failed{0};
  for (int i = 0; i < 3; ++i) {
    callers.emplace_back([&] {
      grpc::ClientContext ctx;
      inference::ModelInferResponse r;
      if (!kserve->ModelInfer(&ctx, infer, &r).ok()) ++failed;
    });
  }
  for (int i = 0; i < 2; ++i) {
    callers.emplace_back([&] {
      grpc::ClientContext ctx;
      grove::v1::PredictResponse r;
      if (!grove->Predict(&ctx, predict, &r).ok()) ++failed;
    });
  }
  for (std::thread& t : callers) t.join();
  ASSERT_EQ(failed.load(), 0);
  {
    inference::ModelInferRequest bad = infer;  // fails after resolving version 1
    bad.mutable_inputs(0)->set_datatype("INT32");
    grpc::ClientContext ctx;
    inference::ModelInferResponse r;
    EXPECT_EQ(kserve->ModelInfer(&ctx, bad, &r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    bad = infer;  // no such version: nobody's failure
    bad.set_model_version("3");
    grpc::ClientContext ctx2;
    EXPECT_FALSE(kserve->ModelInfer(&ctx2, bad, &r).ok());
  }

  auto stats = [&](const std::string& name, const std::string& version, grpc::Status* status) {
    inference::ModelStatisticsRequest q;
    q.set_name(name);
    q.set_version(version);
    inference::ModelStatisticsResponse r;
    grpc::ClientContext ctx;
    *status = kserve->ModelStatistics(&ctx, q, &r);
    return r;
  };
  grpc::Status status;
  const inference::ModelStatisticsResponse both = stats("two", "", &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(both.model_stats_size(), 2);  // every serving version, in order
  const inference::ModelStatistics& v1 = both.model_stats(0);
  const inference::ModelStatistics& v2 = both.model_stats(1);
  EXPECT_EQ(v1.name(), "two");
  EXPECT_EQ(v1.version(), "1");
  EXPECT_EQ(v2.version(), "2");
  EXPECT_EQ(v1.inference_stats().success().count(), 3u);
  EXPECT_EQ(v1.inference_stats().fail().count(), 1u);
  EXPECT_GT(v1.inference_stats().fail().ns(), 0u);
  EXPECT_EQ(v1.inference_count(), static_cast<uint64_t>(3 * n));
  EXPECT_EQ(v1.inference_stats().queue().count(), 3u);  // one task per inference (output__0)
  EXPECT_EQ(v2.inference_stats().success().count(), 2u);
  EXPECT_EQ(v2.inference_stats().fail().count(), 0u);
  EXPECT_EQ(v2.inference_count(), 2u);
  EXPECT_EQ(v2.inference_stats().queue().count(), 2u);
  const uint64_t now_ms = static_cast<uint64_t>(absl::ToUnixMillis(absl::Now()));
  for (const inference::ModelStatistics* v : {&v1, &v2}) {
    const uint64_t calls = v->inference_stats().success().count();
    EXPECT_GE(v->execution_count(), 1u) << v->version();
    EXPECT_LE(v->execution_count(), calls) << v->version();
    EXPECT_EQ(v->inference_stats().compute_infer().count(), v->execution_count());
    EXPECT_GT(v->inference_stats().compute_infer().ns(), 0u) << v->version();
    EXPECT_GT(v->inference_stats().success().ns(), 0u) << v->version();
    EXPECT_GT(v->inference_stats().queue().ns(), 0u) << v->version();  // waited for company
    EXPECT_GT(v->last_inference(), now_ms - 60000) << v->version();
    EXPECT_LE(v->last_inference(), now_ms) << v->version();
  }

  const inference::ModelStatisticsResponse one = stats("two", "2", &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(one.model_stats_size(), 1);
  EXPECT_EQ(one.model_stats(0).SerializeAsString(), v2.SerializeAsString());

  const inference::ModelStatisticsResponse every = stats("", "", &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<std::string> listed;
  for (const auto& m : every.model_stats()) listed.push_back(m.name() + "/" + m.version());
  EXPECT_THAT(listed, ::testing::ElementsAre("other/1", "two/1", "two/2"));
  EXPECT_EQ(every.model_stats(0).inference_stats().success().count(), 0u);
  EXPECT_EQ(every.model_stats(0).last_inference(), 0u);

  stats("two", "3", &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
  stats("absent", "", &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
  server->reset();
  fs::remove_all(root);
}

grpc::ByteBuffer Bytes(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// A protobuf that cannot be decoded: a length-delimited field 1 claiming 100 bytes, holding 2.
const std::string kGarbage = std::string("\x0a\x64zz", 4);

// Unary call of `method` with raw request bytes.
grpc::Status RawUnary(grpc::Channel* channel, const std::string& method, const std::string& bytes) {
  grpc::GenericStub stub(std::shared_ptr<grpc::Channel>(channel, [](grpc::Channel*) {}));
  grpc::ByteBuffer request = Bytes(bytes), response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) { done.set_value(std::move(s)); });
  return done.get_future().get();
}

// [valid, garbage, valid]: one answer, then INVALID_ARGUMENT naming the bad message.
TEST_F(ServerTest, MalformedStreamMessageEndsTheStream) {
  grove::v1::ExplainRequest valid;
  valid.set_model("demo");
  SetRows(valid.mutable_rows(), std::vector<float>(8, 0.5f), 8);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel_->get(),
          grpc::internal::RpcMethod("/grove.v1.Grove/ExplainStream",
                                    grpc::internal::RpcMethod::BIDI_STREAMING),
          &ctx));
  EXPECT_TRUE(stream->Write(Bytes(valid.SerializeAsString())));
  stream->Write(Bytes(kGarbage));
  stream->Write(Bytes(valid.SerializeAsString()));
  stream->WritesDone();
  int answers = 0;
  grpc::ByteBuffer response;
  while (stream->Read(&response)) ++answers;
  grpc::Status s = stream->Finish();
  EXPECT_EQ(answers, 1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("message 2"));
  EXPECT_THAT(s.error_message(), HasSubstr("grove.v1.ExplainRequest"));
}

// Undecodable requests are INVALID_ARGUMENT and RPCs groved does not serve are UNIMPLEMENTED, each
// with a message saying what.
TEST_F(ServerTest, UndecodableRequestsAndUnknownMethodsSayWhat) {
  for (const char* method : {"/grove.v1.Grove/Predict", "/grove.v1.Grove/Explain",
                             "/inference.GRPCInferenceService/ModelInfer"}) {
    grpc::Status s = RawUnary(channel_->get(), method, kGarbage);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_THAT(s.error_message(), HasSubstr(method));
    EXPECT_THAT(s.error_message(), HasSubstr("cannot be decoded"));
  }
  for (const char* method : {"/inference.GRPCInferenceService/LogSettings",
                             "/inference.GRPCInferenceService/TraceSetting",
                             "/grove.v1.Grove/Train"}) {
    grpc::Status s = RawUnary(channel_->get(), method, "");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << method;
    EXPECT_THAT(s.error_message(), HasSubstr(method));
    EXPECT_THAT(s.error_message(), HasSubstr("not Triton's tracing, logging"));
  }
  // A valid request still works.
  grove::v1::PredictRequest ok;
  ok.set_model("demo");
  SetRows(ok.mutable_rows(), std::vector<float>(8, 0.5f), 8);
  EXPECT_TRUE(RawUnary(channel_->get(), "/grove.v1.Grove/Predict", ok.SerializeAsString()).ok());
}

// A 1-row Predict may not ask for more SHAP rows than max_request_rows.
TEST_F(ServerTest, ExplainRowsAreBoundedByMaxRequestRows) {
  grove::v1::PredictRequest req;
  req.set_model("demo");
  SetRows(req.mutable_rows(), std::vector<float>(8, 0.5f), 8);
  req.set_explain(true);
  for (int i = 0; i < 65537; ++i) req.add_explain_rows(0);
  grpc::ClientContext ctx;
  grove::v1::PredictResponse resp;
  grpc::Status s = Grove()->Predict(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("max_request_rows"));
}

TEST_F(ServerTest, NegativeVersionIsInvalidArgument) {
  grove::v1::PredictRequest req;
  req.set_model("demo");
  req.set_version(-1);
  SetRows(req.mutable_rows(), std::vector<float>(8, 0.5f), 8);
  grpc::ClientContext ctx;
  grove::v1::PredictResponse resp;
  grpc::Status s = Grove()->Predict(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
}

// An UnloadModel whose deadline passed while it waited for the control thread is answered
// DEADLINE_EXCEEDED and never applied.
TEST_F(ServerTest, ControlCallPastItsDeadlineIsNotApplied) {
  absl::Notification busy, release, drained;
  server_->runtime().RunControl([&] {
    busy.Notify();
    release.WaitForNotification();
  });
  busy.WaitForNotification();
  grpc::ClientContext ctx;
  const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(200);
  ctx.set_deadline(deadline);
  grove::v1::UnloadModelRequest req;
  req.set_model("lgbz");
  grove::v1::UnloadModelResponse resp;
  EXPECT_EQ(Grove()->UnloadModel(&ctx, req, &resp).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  // The server's copy of the deadline is the client's plus the request's transit (gRPC sends the
  // remaining time), so the client can give up a moment before the server's deadline passes. The
  // control thread is released only once the server's deadline has surely passed too (gRPC
  // deadlines run on the real clock).
  std::this_thread::sleep_until(deadline + std::chrono::milliseconds(200));
  release.Notify();
  server_->runtime().RunControl([&] { drained.Notify(); });
  drained.WaitForNotification();
  EXPECT_TRUE(server_->runtime().registry().Get("lgbz").ok()) << "the late unload was applied";
  if (!server_->runtime().registry().Get("lgbz").ok()) {
    EXPECT_TRUE(server_->runtime().registry().Load("lgbz").ok());
  }
}

// The gRPC port is bound exclusively: a second server on a port in use fails to start, naming the
// address, instead of sharing the port (SO_REUSEPORT) and splitting the calls.
TEST(ServerStart, PortInUseFailsNamingTheAddress) {
  const fs::path root = fs::temp_directory_path() / absl::StrCat("grove_port_", ::getpid());
  fs::remove_all(root);
  Put(root, "demo", 1, kDemo);
  ServerOptions o = LoopbackOptions(root);
  absl::StatusOr<std::unique_ptr<GroveServer>> first = GroveServer::Start(o);
  ASSERT_TRUE(first.ok()) << first.status();
  o.grpc_port = (*first)->grpc_port();
  absl::StatusOr<std::unique_ptr<GroveServer>> second = GroveServer::Start(o);
  EXPECT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr(absl::StrCat("127.0.0.1:", o.grpc_port)));
  first->reset();
  fs::remove_all(root);
}

}  // namespace
}  // namespace grove::server
