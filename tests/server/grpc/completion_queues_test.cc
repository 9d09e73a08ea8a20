// The hot unary RPCs (Predict, Explain, ModelInfer) on groved's completion queues
// (server/grpc/completion_queues.h): the thread count and its bounds, answers of every method from the
// queue threads, cancellation and deadlines reaching queued work, the in-flight gauge, and a
// shutdown that answers queued calls and leaves no queue thread behind.
#include "server/grpc/completion_queues.h"

#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "grove/v1/grove.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "prometheus/text_serializer.h"
#include "server/server.h"
#include "tests/server/server_testing.h"

namespace grove::server {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kDemo = std::string(GROVE_SOURCE_DIR) + "/examples/models/demo/1/model.json";

// Names of this process's threads that start with "grove-cq-".
std::set<std::string> QueueThreads() {
  std::set<std::string> names;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return names;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(absl::StrCat("/proc/self/task/", e->d_name, "/comm"));
    std::string name;
    std::getline(in, name);
    if (absl::StartsWith(name, "grove-cq-")) names.insert(name);
  }
  closedir(dir);
  return names;
}

// A repository of its own: "demo" answers at once, "slow" batches wait 60 s for company (so a call
// stays queued until it is cancelled, expires or the server shuts down).
class QueueServer {
 public:
  explicit QueueServer(const std::string& tag, int grpc_threads = 3) {
    root_ = fs::temp_directory_path() / absl::StrCat("grove_cq_", tag, "_", ::getpid());
    fs::remove_all(root_);
    for (const char* name : {"demo", "slow"}) {
      fs::create_directories(root_ / name / "1");
      fs::copy_file(kDemo, root_ / name / "1" / "model.json");
    }
    std::ofstream(root_ / "slow" / "config.json")
        << R"({"batching": {"predict": {"max_delay_us": 60000000, "max_batch_rows": 100000},
                            "explain": {"max_delay_us": 60000000, "max_batch_rows": 100000}}})";
    ServerOptions o = LoopbackServerOptions(root_.string());
    o.metrics_port = -1;
    o.http.port = -1;
    o.grpc_threads = grpc_threads;
    LoopbackServer s = StartLoopbackServer(o);
    server_ = std::move(s.server);
    channel_ = s.channel;
  }
  ~QueueServer() {
    server_.reset();
    fs::remove_all(root_);
  }

  GroveServer* server() { return server_.get(); }
  std::unique_ptr<grove::v1::Grove::Stub> Grove() { return grove::v1::Grove::NewStub(channel_); }
  std::unique_ptr<inference::GRPCInferenceService::Stub> Kserve() {
    return inference::GRPCInferenceService::NewStub(channel_);
  }
  int64_t Queued(const std::string& model, Operation op) {
    return server_->runtime().QueueStats(model, op).queued_tasks;
  }
  std::string Metrics() {
    prometheus::TextSerializer text;
    return text.Serialize(server_->metrics().registry()->Collect());
  }
  // Waits (up to 30 s) until the metrics hold `line`.
  bool AwaitMetric(const std::string& line) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (Metrics().find(line) == std::string::npos) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }
  void Shutdown() { server_->Shutdown(); }

 private:
  fs::path root_;
  std::unique_ptr<GroveServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

grove::v1::PredictRequest PredictRequest(const std::string& model) {
  grove::v1::PredictRequest r;
  r.set_model(model);
  r.mutable_rows()->set_rows(1);
  r.mutable_rows()->set_cols(8);
  for (int i = 0; i < 8; ++i) r.mutable_rows()->add_values(0.5f);
  return r;
}

grove::v1::ExplainRequest ExplainRequest(const std::string& model) {
  grove::v1::ExplainRequest r;
  r.set_model(model);
  *r.mutable_rows() = PredictRequest(model).rows();
  return r;
}

inference::ModelInferRequest InferRequest(const std::string& model) {
  inference::ModelInferRequest r;
  r.set_model_name(model);
  AddInput0(&r, 1, 8)->mutable_contents()->mutable_fp32_contents()->Resize(8, 0.5f);
  return r;
}

TEST(GrpcThreads, ZeroIsTheHostsHardwareThreadsWithinBounds) {
  const int hardware = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_EQ(ResolveGrpcThreads(0), std::clamp(hardware, 1, kMaxGrpcThreads));
  EXPECT_EQ(ResolveGrpcThreads(1), 1);
  EXPECT_EQ(ResolveGrpcThreads(7), 7);
  EXPECT_EQ(ResolveGrpcThreads(kMaxGrpcThreads), kMaxGrpcThreads);
}

TEST(GrpcThreads, OutOfBoundsRefusesToStart) {
  const fs::path root = fs::temp_directory_path() / absl::StrCat("grove_cq_bounds_", ::getpid());
  fs::create_directories(root);
  for (int threads : {-1, kMaxGrpcThreads + 1}) {
    ServerOptions o = LoopbackServerOptions(root.string());
    o.grpc_threads = threads;
    absl::StatusOr<std::unique_ptr<GroveServer>> s = GroveServer::Start(o);
    ASSERT_FALSE(s.ok()) << threads;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr("grpc_threads must be 0..64"));
  }
  fs::remove_all(root);
}

// The host buffer pool's bound (--host_buffer_mb) is checked when the server starts.
TEST(HostBuffers, OutOfBoundsRefusesToStart) {
  const fs::path root = fs::temp_directory_path() / absl::StrCat("grove_hb_bounds_", ::getpid());
  fs::create_directories(root);
  for (int64_t bytes : {int64_t{-1} << 20, serving::kMaxHostBufferBytes + (int64_t{1} << 20)}) {
    ServerOptions o = LoopbackServerOptions(root.string());
    o.runtime.host_buffer_bytes = bytes;
    absl::StatusOr<std::unique_ptr<GroveServer>> s = GroveServer::Start(o);
    ASSERT_FALSE(s.ok()) << bytes;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr("--host_buffer_mb"));
  }
  fs::remove_all(root);
}

// Every hot method answers many concurrent callers from the queue threads, which exist while the
// server runs (one per --grpc_threads) and are joined at shutdown.
TEST(CompletionQueues, ServeEveryHotMethodAndStopWithTheServer) {
  ASSERT_TRUE(QueueThreads().empty());
  {
    QueueServer s("serve", 3);
    ASSERT_NE(s.server(), nullptr);
    EXPECT_EQ(QueueThreads(), (std::set<std::string>{"grove-cq-0", "grove-cq-1", "grove-cq-2"}));
    auto grove = s.Grove();
    auto kserve = s.Kserve();
    std::vector<std::thread> callers;
    std::atomic<int> ok{0};
    for (int t = 0; t < 8; ++t) {
      callers.emplace_back([&] {
        for (int i = 0; i < 20; ++i) {
          grpc::ClientContext p, e, k;
          grove::v1::PredictResponse pr;
          grove::v1::ExplainResponse er;
          inference::ModelInferResponse kr;
          ok += grove->Predict(&p, PredictRequest("demo"), &pr).ok() && pr.prediction().rows() == 1;
          ok += grove->Explain(&e, ExplainRequest("demo"), &er).ok() && er.values().rows() == 1;
          ok += kserve->ModelInfer(&k, InferRequest("demo"), &kr).ok() &&
                kr.raw_output_contents_size() == 1;
        }
      });
    }
    for (std::thread& t : callers) t.join();
    EXPECT_EQ(ok.load(), 8 * 20 * 3);
    for (const char* method : {"Predict", "Explain", "ModelInfer"}) {
      EXPECT_TRUE(s.AwaitMetric(absl::StrCat("grove_requests_total{code=\"OK\",method=\"", method,
                                             "\",model=\"demo\"} 160")))
          << method;
      EXPECT_TRUE(s.AwaitMetric(absl::StrCat("grove_inflight_requests{method=\"", method, "\"} 0")))
          << method;
    }
  }
  EXPECT_TRUE(QueueThreads().empty());
}

// A client that cancels a queued call: the done tag reports it, the call's task leaves the queue at
// once and the call counts as CANCELLED; the in-flight gauge returns to 0 (the call was deleted).
TEST(CompletionQueues, CancellationReachesQueuedWork) {
  QueueServer s("cancel");
  ASSERT_NE(s.server(), nullptr);
  auto grove = s.Grove();
  auto kserve = s.Kserve();
  const grove::v1::PredictRequest predict = PredictRequest("slow");
  const inference::ModelInferRequest infer = InferRequest("slow");
  grpc::ClientContext predict_ctx, infer_ctx;
  grove::v1::PredictResponse predict_resp;
  inference::ModelInferResponse infer_resp;
  std::promise<grpc::Status> predict_done, infer_done;
  grove->async()->Predict(&predict_ctx, &predict, &predict_resp,
                          [&](grpc::Status st) { predict_done.set_value(std::move(st)); });
  kserve->async()->ModelInfer(&infer_ctx, &infer, &infer_resp,
                              [&](grpc::Status st) { infer_done.set_value(std::move(st)); });
  // Both wait in the queue (a batch would wait 60 s for company).
  while (s.Queued("slow", Operation::kPredict) < 2) std::this_thread::yield();
  predict_ctx.TryCancel();
  infer_ctx.TryCancel();
  EXPECT_EQ(predict_done.get_future().get().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(infer_done.get_future().get().error_code(), grpc::StatusCode::CANCELLED);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (s.Queued("slow", Operation::kPredict) > 0 &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(s.Queued("slow", Operation::kPredict), 0);
  for (const char* method : {"Predict", "ModelInfer"}) {
    EXPECT_TRUE(s.AwaitMetric(absl::StrCat("grove_requests_total{code=\"CANCELLED\",method=\"",
                                           method, "\",model=\"slow\"} 1")))
        << method << "\n"
        << s.Metrics();
    EXPECT_TRUE(s.AwaitMetric(absl::StrCat("grove_inflight_requests{method=\"", method, "\"} 0")))
        << method;
  }
}

// A call whose deadline passes while it is queued is answered DEADLINE_EXCEEDED and leaves the
// queue (the server's deadline cancels it like a client's cancellation).
TEST(CompletionQueues, DeadlineReachesQueuedWork) {
  QueueServer s("deadline");
  ASSERT_NE(s.server(), nullptr);
  auto grove = s.Grove();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  grove::v1::ExplainResponse resp;
  EXPECT_EQ(grove->Explain(&ctx, ExplainRequest("slow"), &resp).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (s.Queued("slow", Operation::kExplain) > 0 &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(s.Queued("slow", Operation::kExplain), 0);
  EXPECT_TRUE(s.AwaitMetric("grove_inflight_requests{method=\"Explain\"} 0"));
}

// Shutdown while calls of every hot method sit in the queues: each is computed and answered (from
// the batch threads, through the responders of the queue threads), then the queues drain and their
// threads end; later calls are UNAVAILABLE.
TEST(CompletionQueues, ShutdownAnswersQueuedCallsThenDrains) {
  QueueServer s("shutdown", 2);
  ASSERT_NE(s.server(), nullptr);
  auto grove = s.Grove();
  auto kserve = s.Kserve();
  const grove::v1::PredictRequest predict = PredictRequest("slow");
  const grove::v1::ExplainRequest explain = ExplainRequest("slow");
  const inference::ModelInferRequest infer = InferRequest("slow");
  constexpr int kEach = 6;
  std::vector<grpc::ClientContext> ctx(3 * kEach);
  std::vector<grove::v1::PredictResponse> predict_resp(kEach);
  std::vector<grove::v1::ExplainResponse> explain_resp(kEach);
  std::vector<inference::ModelInferResponse> infer_resp(kEach);
  std::vector<std::promise<grpc::Status>> done(3 * kEach);
  for (int i = 0; i < kEach; ++i) {
    grove->async()->Predict(&ctx[i], &predict, &predict_resp[i],
                            [&, i](grpc::Status st) { done[i].set_value(std::move(st)); });
    grove->async()->Explain(&ctx[kEach + i], &explain, &explain_resp[i],
                            [&, i](grpc::Status st) { done[kEach + i].set_value(std::move(st)); });
    kserve->async()->ModelInfer(
        &ctx[2 * kEach + i], &infer, &infer_resp[i],
        [&, i](grpc::Status st) { done[2 * kEach + i].set_value(std::move(st)); });
  }
  while (s.Queued("slow", Operation::kPredict) < 2 * kEach ||
         s.Queued("slow", Operation::kExplain) < kEach) {
    std::this_thread::yield();
  }
  s.Shutdown();
  for (int i = 0; i < 3 * kEach; ++i) {
    grpc::Status st = done[i].get_future().get();
    EXPECT_TRUE(st.ok()) << i << ": " << st.error_code() << " " << st.error_message();
  }
  for (int i = 0; i < kEach; ++i) {
    EXPECT_EQ(predict_resp[i].prediction().rows(), 1);
    EXPECT_EQ(explain_resp[i].values().rows(), 1);
    EXPECT_EQ(infer_resp[i].raw_output_contents_size(), 1);
  }
  EXPECT_TRUE(QueueThreads().empty());
  grpc::ClientContext after;
  after.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grove::v1::PredictResponse r;
  EXPECT_EQ(grove->Predict(&after, predict, &r).error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace grove::server
