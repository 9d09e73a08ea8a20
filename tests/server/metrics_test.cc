// Metrics' cached series: what the request path records must come out in the exposition exactly as
// docs/metrics.md says, whichever thread created a series first.
#include "server/metrics.h"

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"

namespace grove::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Exposition(const Metrics& metrics) {
  prometheus::TextSerializer text;
  return text.Serialize(metrics.registry()->Collect());
}

// The host buffer pool's series, read from the pool at every scrape, named as docs/metrics.md says.
TEST(MetricsTest, HostBufferSeriesReadThePool) {
  serving::HostBufferPool pool(
      serving::HostBufferOptions{.max_bytes = 1 << 20, .page_locked = false});
  std::shared_ptr<prometheus::Collectable> c = MakeHostBufferCollectable(&pool);
  prometheus::TextSerializer text;
  serving::HostBufferPool::Buffer held = pool.Acquire(200 << 10);  // class 256 KiB
  { serving::HostBufferPool::Buffer done = pool.Acquire(100 << 10); }  // 128 KiB, back
  EXPECT_FALSE(pool.Acquire(1 << 20));  // no room: a miss
  const std::string out = text.Serialize(c->Collect());
  EXPECT_THAT(out, HasSubstr("# TYPE grove_host_buffer_bytes gauge"));
  EXPECT_THAT(out, HasSubstr("grove_host_buffer_bytes{state=\"kept\"} 393216"));
  EXPECT_THAT(out, HasSubstr("grove_host_buffer_bytes{state=\"in_use\"} 262144"));
  EXPECT_THAT(out, HasSubstr("# TYPE grove_host_buffer_misses_total counter"));
  EXPECT_THAT(out, HasSubstr("grove_host_buffer_misses_total 1"));
  EXPECT_THAT(out, HasSubstr("grove_host_buffer_page_locked 0"));
}

TEST(MetricsTest, RequestSeriesByCodeMethodAndOperation) {
  Metrics metrics;
  metrics.RecordRequest("m", "Predict", absl::StatusCode::kOk, 0.002, Operation::kPredict);
  metrics.RecordRequest("m", "Predict", absl::StatusCode::kOk, 0.003, Operation::kPredict);
  metrics.RecordRequest("m", "Predict", absl::StatusCode::kNotFound, -1, Operation::kPredict);
  metrics.RecordRequest("m", "Explain", absl::StatusCode::kOk, 0.01, Operation::kInteractions);
  metrics.RecordRequestLatency("m", "ExplainStream", 0.5, Operation::kExplain);
  metrics.RecordRequest(kUnknownModelLabel, "Predict", absl::StatusCode::kNotFound, -1,
                        Operation::kPredict);
  const std::string e = Exposition(metrics);
  EXPECT_THAT(e, HasSubstr("grove_requests_total{code=\"OK\",method=\"Predict\",model=\"m\"} 2"));
  EXPECT_THAT(e,
              HasSubstr("grove_requests_total{code=\"NOT_FOUND\",method=\"Predict\",model=\"m\"} 1"));
  EXPECT_THAT(e, HasSubstr("grove_requests_total{code=\"OK\",method=\"Explain\",model=\"m\"} 1"));
  EXPECT_THAT(e, HasSubstr("grove_requests_total{code=\"NOT_FOUND\",method=\"Predict\",model=\"_"
                           "unknown\"} 1"));
  EXPECT_THAT(e, HasSubstr("grove_request_duration_seconds_count{method=\"Predict\",model=\"m\","
                           "operation=\"predict\"} 2"));
  EXPECT_THAT(e, HasSubstr("grove_request_duration_seconds_count{method=\"Explain\",model=\"m\","
                           "operation=\"interactions\"} 1"));
  EXPECT_THAT(e, HasSubstr("grove_request_duration_seconds_count{method=\"ExplainStream\",model="
                           "\"m\",operation=\"explain\"} 1"));
  // Only observed series exist: no latency of failed calls, no code never answered, and a calls'
  // label creates no queue series.
  EXPECT_THAT(e, Not(HasSubstr("model=\"_unknown\",operation=")));
  EXPECT_THAT(e, Not(HasSubstr("code=\"INTERNAL\"")));
  EXPECT_THAT(e, Not(HasSubstr("grove_queue_wait_seconds_count{model=\"m\"")));
}

TEST(MetricsTest, InflightGaugeIsSharedPerMethod) {
  Metrics metrics;
  prometheus::Gauge* a = metrics.InflightGauge("Predict");
  EXPECT_EQ(a, metrics.InflightGauge(std::string("Predict")));
  a->Increment();
  metrics.InflightRequests("Predict", 1);
  metrics.InflightRequests("ListModels", 1);
  metrics.InflightRequests("ListModels", -1);
  const std::string e = Exposition(metrics);
  EXPECT_THAT(e, HasSubstr("grove_inflight_requests{method=\"Predict\"} 2"));
  EXPECT_THAT(e, HasSubstr("grove_inflight_requests{method=\"ListModels\"} 0"));
}

TEST(MetricsTest, BatchesByDeviceAndStrategy) {
  Metrics metrics;
  Metrics::ModelMetrics* m = metrics.Model("m");
  EXPECT_EQ(m, metrics.Model(std::string("m")));
  metrics.CountBatch(m, Operation::kPredict, "cpu", "cpu");
  metrics.CountBatch(m, Operation::kPredict, "cpu", "cpu");
  metrics.CountBatch(m, Operation::kPredict, "cuda:0", "shared_data");
  metrics.CountBatch(m, Operation::kExplain, "cuda:0", "treeshap_warp");
  const std::string e = Exposition(metrics);
  EXPECT_THAT(e, HasSubstr("grove_batches_total{device=\"cpu\",model=\"m\",operation=\"predict\","
                           "strategy=\"cpu\"} 2"));
  EXPECT_THAT(e, HasSubstr("grove_batches_total{device=\"cuda:0\",model=\"m\",operation="
                           "\"predict\",strategy=\"shared_data\"} 1"));
  EXPECT_THAT(e, HasSubstr("grove_batches_total{device=\"cuda:0\",model=\"m\",operation="
                           "\"explain\",strategy=\"treeshap_warp\"} 1"));
  // The model's queue series exist from its first use.
  EXPECT_THAT(e, HasSubstr("grove_queue_wait_seconds_count{model=\"m\",operation=\"predict\"} 0"));
}

TEST(MetricsTest, VersionStatistics) {
  Metrics metrics;
  metrics.RecordInference("m", 1, true, 0.25, 3);
  metrics.RecordInference("m", 1, false, 0.5, 7);
  metrics.RecordQueueWait("m", 1, 0.125);
  metrics.RecordExecution("m", 1, 0.0625, true);
  metrics.RecordExecution("m", 1, 1.0, false);  // not counted
  metrics.RecordInference("m", 2, true, 1.0, 1);
  const Metrics::VersionStatistics s = metrics.Statistics("m", 1);
  EXPECT_EQ(s.success, 1u);
  EXPECT_DOUBLE_EQ(s.success_seconds, 0.25);
  EXPECT_EQ(s.fail, 1u);
  EXPECT_DOUBLE_EQ(s.fail_seconds, 0.5);
  EXPECT_EQ(s.inferences, 3u);
  EXPECT_EQ(s.queued, 1u);
  EXPECT_DOUBLE_EQ(s.queue_seconds, 0.125);
  EXPECT_EQ(s.executions, 1u);
  EXPECT_DOUBLE_EQ(s.compute_seconds, 0.0625);
  EXPECT_GT(s.last_inference_ms, 0);
  EXPECT_EQ(metrics.Statistics("m", 2).success, 1u);
  EXPECT_EQ(metrics.Statistics("m", 3).success, 0u);
  EXPECT_EQ(metrics.Statistics("other", 1).last_inference_ms, 0);
}

// Threads that record the same new series at once count every event once.
TEST(MetricsTest, ConcurrentRecordingCountsEveryEvent) {
  Metrics metrics;
  constexpr int kThreads = 8;
  constexpr int kCalls = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        metrics.InflightRequests("Predict", 1);
        metrics.RecordRequest("m", "Predict", absl::StatusCode::kOk, 0.001, Operation::kPredict);
        metrics.RecordInference("m", 1, true, 0.5, 2);
        metrics.RecordQueueWait("m", 1, 0.25);
        metrics.InflightRequests("Predict", -1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const std::string e = Exposition(metrics);
  EXPECT_THAT(e, HasSubstr("grove_requests_total{code=\"OK\",method=\"Predict\",model=\"m\"} 4000"));
  EXPECT_THAT(e, HasSubstr("grove_inflight_requests{method=\"Predict\"} 0"));
  const Metrics::VersionStatistics s = metrics.Statistics("m", 1);
  EXPECT_EQ(s.success, uint64_t{kThreads * kCalls});
  EXPECT_DOUBLE_EQ(s.success_seconds, 0.5 * kThreads * kCalls);  // exact in binary
  EXPECT_EQ(s.inferences, uint64_t{2 * kThreads * kCalls});
  EXPECT_EQ(s.queued, uint64_t{kThreads * kCalls});
  EXPECT_DOUBLE_EQ(s.queue_seconds, 0.25 * kThreads * kCalls);
}

}  // namespace
}  // namespace grove::server
