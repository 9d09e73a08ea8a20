// `grove bench`: a load generator for groved (see HelpText("bench") in cli_args.cc).
//
// Closed loop: `concurrency` callers, each sending its next request when the previous one is
// answered. The callers are spread over --client-threads threads (default a quarter of the
// hardware threads, at least 2, at most `concurrency`); each thread drives its callers' calls
// through a completion queue of its own (asynchronous calls), so that the load generator is not
// limited by one thread per caller (a blocking call costs a completion queue and thread wake-ups
// of its own). The closed loop sends each prepared request as bytes serialized once before the run
// (a generic stub; an answer is counted by its status, not decoded), so that the load generator
// spends no CPU re-encoding megabytes of rows per call. Open loop: one scheduler thread starts
// request k at start + k / rate with the asynchronous callback API whatever the answers, and the
// latency of a request counts from its scheduled time (so a slow server is not hidden by a
// slowed-down sender). Requests are built once, before the run, from the input rows (cycled) or
// from seeded random rows. Only requests that start after the warm-up and before the end of the
// measured window are counted.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli_local.h"
#include "client/cli_remote.h"
#include "core/common/json_string.h"
#include "core/io/csv.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/proto_buffer_writer.h"
#include "grpcpp/support/async_unary_call.h"

namespace grove::cli {
namespace {

// The gRPC poller this process runs with (RunBench chose it: ChooseBenchPollStrategy), as a JSON
// string (gRPC accepts a comma-separated list of names).
std::string PollerJson() {
  const char* p = std::getenv("GRPC_POLL_STRATEGY");
  return JsonString(p != nullptr ? p : "");
}

using Clock = std::chrono::steady_clock;

// Distinct prepared requests (cycled).
constexpr int kPreparedRequests = 64;

struct Sample {
  double latency_seconds = 0;
  absl::StatusCode code = absl::StatusCode::kOk;
};

// Samples of one thread (merged at the end).
struct Recorder {
  std::vector<double> latencies;                             // successful measured requests
  std::map<absl::StatusCode, std::vector<double>> failures;  // latencies of failed ones by code
  int64_t ok = 0;
  void Add(double latency, absl::StatusCode code) {
    if (code == absl::StatusCode::kOk) {
      ++ok;
      latencies.push_back(latency);
    } else {
      failures[code].push_back(latency);
    }
  }
  void Merge(Recorder&& other) {
    ok += other.ok;
    latencies.insert(latencies.end(), other.latencies.begin(), other.latencies.end());
    for (auto& [code, l] : other.failures) {
      failures[code].insert(failures[code].end(), l.begin(), l.end());
    }
  }
  int64_t Failed() const {
    int64_t n = 0;
    for (auto& [code, l] : failures) n += static_cast<int64_t>(l.size());
    return n;
  }
};

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  // Nearest rank.
  const double rank = std::ceil(q * static_cast<double>(sorted.size()));
  const size_t i = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(sorted.size())));
  return sorted[i - 1];
}

// `"CODE": count, ...` and `"CODE": {"p50": ms, "p99": ms, "max": ms}, ...` of the failed calls
// (latencies sorted).
std::string FailureCountsJson(const Recorder& r) {
  std::string out = "{";
  for (auto& [code, l] : r.failures) {
    absl::StrAppend(&out, out.size() > 1 ? ", " : "", "\"", absl::StatusCodeToString(code),
                    "\": ", l.size());
  }
  return out + "}";
}

std::string FailureLatencyJson(const Recorder& r) {
  std::string out = "{";
  for (auto& [code, l] : r.failures) {
    absl::StrAppend(&out, out.size() > 1 ? ", " : "",
                    absl::StrFormat("\"%s\": {\"p50\": %.6g, \"p99\": %.6g, \"max\": %.6g}",
                                    absl::StatusCodeToString(code), Percentile(l, 0.5) * 1000,
                                    Percentile(l, 0.99) * 1000, l.empty() ? 0.0 : l.back() * 1000));
  }
  return out + "}";
}

// CPU time (user + system) of process `pid` so far, from /proc/PID/stat.
absl::StatusOr<double> ProcessCpuSeconds(int64_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/stat");
  std::ifstream in(path);
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces) start after its closing parenthesis;
  // utime and stime are fields 14 and 15, the 12th and 13th after it.
  const size_t close = stat.rfind(')');
  if (stat.empty() || close == std::string::npos) {
    return absl::NotFoundError(absl::StrCat("--server-pid: cannot read ", path,
                                            " (is groved running on this machine?)"));
  }
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i >= 14) ticks += std::strtod(field.c_str(), nullptr);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// This process's CPU time so far (user + system, all threads).
double OwnCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// The server's (--server-pid) and the client's own CPU time over the measured window.
struct ServerCpu {
  bool known = false;
  double seconds = 0;         // server CPU seconds
  double client_seconds = 0;  // this process's CPU seconds
  double wall_seconds = 0;    // of the window
};

// `{"seconds": s, "cores": c, "us_per_request": u}`, or null without --server-pid.
std::string ServerCpuJson(const ServerCpu& cpu, int64_t requests) {
  if (!cpu.known) return "null";
  return absl::StrFormat(
      "{\"seconds\": %.6g, \"cores\": %.6g, \"us_per_request\": %.6g, \"client_cores\": %.6g}",
      cpu.seconds, cpu.seconds / std::max(1e-9, cpu.wall_seconds),
      1e6 * cpu.seconds / std::max<double>(1, static_cast<double>(requests)),
      cpu.client_seconds / std::max(1e-9, cpu.wall_seconds));
}

// The rows the requests are cut from: the input file, or seeded random rows.
absl::StatusOr<std::vector<float>> BenchRows(const CliArgs& args, int64_t cols, int64_t want_rows) {
  std::vector<float> rows;
  if (!args.input.empty()) {
    absl::StatusOr<std::unique_ptr<CsvReader>> reader = CsvReader::Open(args.input, cols);
    if (!reader.ok()) return reader.status();
    absl::StatusOr<int64_t> n = (*reader)->ReadRows(want_rows, &rows);
    if (!n.ok()) return n.status();
    if (*n == 0) return absl::InvalidArgumentError(absl::StrCat(args.input, ": no rows"));
    return rows;
  }
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  rows.resize(static_cast<size_t>(want_rows * cols));
  for (float& v : rows) v = normal(rng);
  return rows;
}

class Bench {
 public:
  // `raw_rows`: the server reads raw tensors (ModelMetadata.raw_tensors).
  Bench(const CliArgs& args, std::vector<std::unique_ptr<client::GroveClient>> clients,
        int64_t version, int64_t cols, bool raw_rows)
      : args_(args), clients_(std::move(clients)), version_(version), cols_(cols),
        raw_rows_(raw_rows) {}
  ~Bench() { ReleaseSharedMemory(); }

  absl::Status Prepare() {
    const int64_t rpr = args_.rows_per_request;
    const int64_t want = std::min<int64_t>(rpr * kPreparedRequests,
                                           std::max<int64_t>(rpr, (int64_t{1} << 24) / cols_));
    absl::StatusOr<std::vector<float>> rows = BenchRows(args_, cols_, want);
    if (!rows.ok()) return rows.status();
    const int64_t available = static_cast<int64_t>(rows->size()) / cols_;
    // Request i takes rows_per_request rows starting at row i * rows_per_request (mod available).
    std::vector<float> buf(static_cast<size_t>(rpr * cols_));
    for (int i = 0; i < kPreparedRequests; ++i) {
      for (int64_t r = 0; r < rpr; ++r) {
        const int64_t src = (i * rpr + r) % available;
        std::copy_n(rows->data() + src * cols_, cols_, buf.data() + r * cols_);
      }
      if (args_.bench_explain) {
        client::ExplainParams p;
        p.model = args_.model;
        p.version = version_;
        p.interactions = args_.interactions;
        p.iteration_begin = args_.iteration_begin;
        p.iteration_end = args_.iteration_end;
        grove::v1::ExplainRequest req = client::MakeExplainRequest(p);
        FillRows(buf, rpr, req.mutable_rows());
        explain_.push_back(std::move(req));
      } else {
        grove::v1::PredictRequest req;
        req.set_model(args_.model);
        req.set_version(version_);
        req.add_outputs(args_.kind == OutputKind::kMargin ? grove::v1::OUTPUT_MARGIN
                        : args_.kind == OutputKind::kLeaf ? grove::v1::OUTPUT_LEAF
                                                          : grove::v1::OUTPUT_PREDICTION);
        req.set_iteration_begin(args_.iteration_begin);
        req.set_iteration_end(args_.iteration_end);
        FillRows(buf, rpr, req.mutable_rows());
        predict_.push_back(std::move(req));
      }
    }
    return absl::OkStatus();
  }

  // The closed loop's requests as bytes, serialized once, and a generic stub per connection
  // (after Prepare and PrepareSharedMemory).
  absl::Status SerializeRequests() {
    method_ = args_.bench_explain ? "/grove.v1.Grove/Explain" : "/grove.v1.Grove/Predict";
    for (const auto& client : clients_) {
      generic_.push_back(std::make_unique<grpc::GenericStub>(client->channel()));
    }
    auto add = [](const google::protobuf::Message& m, std::vector<grpc::ByteBuffer>* out) {
      grpc::ByteBuffer bytes;
      bool own = false;  // GenericSerialize's out-parameter, unused here
      grpc::Status s = grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::Message>(
          m, &bytes, &own);
      out->push_back(std::move(bytes));
      return s.ok() ? absl::OkStatus() : absl::InternalError(s.error_message());
    };
    std::vector<std::pair<const google::protobuf::Message*, std::vector<grpc::ByteBuffer>*>> all;
    for (const auto& r : predict_) all.emplace_back(&r, &wire_);
    for (const auto& r : explain_) all.emplace_back(&r, &wire_);
    for (const auto& r : shm_predict_) all.emplace_back(&r, &shm_wire_);
    for (const auto& r : shm_explain_) all.emplace_back(&r, &shm_wire_);
    for (const auto& [message, out] : all) {
      if (absl::Status s = add(*message, out); !s.ok()) return s;
    }
    // The closed loop sends only the bytes: the messages' memory (megabytes of rows each) goes.
    predict_ = {};
    explain_ = {};
    shm_predict_ = {};
    shm_explain_ = {};
    return absl::OkStatus();
  }

  // --shared-memory: each closed-loop caller t gets a shared memory object of its own holding the
  // rows of prepared request t (written once) and room for the results, registers it, and sends
  // one request naming both ranges for the whole run.
  absl::Status PrepareSharedMemory(const grove::v1::ModelMetadata& meta) {
    auto align = [](int64_t bytes) { return (bytes + 63) / 64 * 64; };
    const int64_t rpr = args_.rows_per_request;
    const int64_t rows_bytes = rpr * cols_ * static_cast<int64_t>(sizeof(float));
    // Results: the predict output, or SHAP values (and interactions), each at a multiple of 64.
    const int64_t k = meta.num_outputs(), f1 = meta.num_features() + 1;
    int64_t out_bytes = 0;
    if (args_.bench_explain) {
      out_bytes = align(rpr * k * f1 * 4) + (args_.interactions ? align(rpr * k * f1 * f1 * 4) : 0);
    } else {
      const int64_t width = args_.kind == OutputKind::kMargin ? k
                            : args_.kind == OutputKind::kLeaf ? meta.num_trees()
                                                              : meta.prediction_width();
      out_bytes = align(rpr * width * 4);
    }
    const std::string prefix = absl::StrCat("grove-bench-", getpid(), "-");
    for (int t = 0; t < args_.concurrency; ++t) {
      const std::string name = absl::StrCat(prefix, t);
      absl::StatusOr<std::unique_ptr<client::SharedMemoryBuffer>> buffer =
          client::SharedMemoryBuffer::Create("/" + name, align(rows_bytes) + out_bytes);
      if (!buffer.ok()) return buffer.status();
      shm_buffers_.push_back(*std::move(buffer));
      client::SharedMemoryBuffer& b = *shm_buffers_.back();
      const int i = t % kPreparedRequests;
      const grove::v1::Matrix& inline_rows =
          args_.bench_explain ? explain_[i].rows() : predict_[i].rows();
      const std::vector<float> rows = client::FromProto(inline_rows).values;
      std::memcpy(b.data(), rows.data(), static_cast<size_t>(rows_bytes));
      client::GroveClient& c = *clients_[t % static_cast<int>(clients_.size())];
      if (absl::Status s = c.RegisterSharedMemory(name, b.key(), 0,
                                                  static_cast<uint64_t>(b.size()), Call());
          !s.ok()) {
        return s;
      }
      shm_regions_.push_back(name);
      client::SharedMemoryRows shm_rows{name, 0, rpr, cols_, false};
      grove::v1::SharedMemoryRange out;
      out.set_region(name);
      out.set_offset(static_cast<uint64_t>(align(rows_bytes)));
      out.set_byte_size(static_cast<uint64_t>(out_bytes));
      if (args_.bench_explain) {
        grove::v1::ExplainRequest req = explain_[i];
        client::FillMatrix(shm_rows, req.mutable_rows());
        *req.mutable_output_shared_memory() = out;
        shm_explain_.push_back(std::move(req));
      } else {
        grove::v1::PredictRequest req = predict_[i];
        client::FillMatrix(shm_rows, req.mutable_rows());
        *req.mutable_output_shared_memory() = out;
        shm_predict_.push_back(std::move(req));
      }
    }
    return absl::OkStatus();
  }

  // Unregisters the callers' regions (the objects are unlinked when their buffers go).
  void ReleaseSharedMemory() {
    for (size_t t = 0; t < shm_regions_.size(); ++t) {
      client::GroveClient& c = *clients_[t % clients_.size()];
      absl::StatusOr<std::vector<std::string>> r = c.UnregisterSharedMemory(shm_regions_[t], Call());
      if (!r.ok()) {
        std::fprintf(stderr, "grove: warning: cannot unregister shared memory region '%s': %s\n",
                     shm_regions_[t].c_str(), std::string(r.status().message()).c_str());
      }
    }
    shm_regions_.clear();
    shm_buffers_.clear();
  }

  // The rows of one request: raw_f32 (the client's form), or repeated values with
  // --repeated-values (the older form, to compare the two) or for a server without raw tensors.
  void FillRows(const std::vector<float>& buf, int64_t rows, grove::v1::Matrix* out) const {
    client::FillMatrix(buf.data(), rows, cols_, raw_rows_ && !args_.repeated_values, out);
  }

  // Closed loop (see the top of this file). Caller c sends prepared requests c, c + n, c + 2n, ...
  // (with --shared-memory: its own request) on connection c % connections.
  void RunClosed() {
    const int n = args_.concurrency;
    // Default: a quarter of the hardware threads (at least 2). On the 16-core H100 host 4 threads
    // drove 64 single-row callers at 98-115K requests/s against 77-89K with 16 (each thread then
    // sleeps and wakes for every call of its few callers).
    const int hardware = static_cast<int>(std::thread::hardware_concurrency());
    const int threads = std::clamp(
        args_.client_threads > 0 ? args_.client_threads : std::max(2, hardware / 4), 1, n);
    std::vector<Recorder> recorders(static_cast<size_t>(n));
    std::atomic<int64_t> measured{0};
    std::atomic<bool> stop{false};
    std::atomic<bool> first_failure{false};
    start_ = Clock::now();
    measure_begin_ = start_ + Dur(args_.warmup_seconds);
    measure_end_ = measure_begin_ + Dur(args_.duration_seconds);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        grpc::CompletionQueue cq;
        std::vector<std::unique_ptr<Caller>> callers;
        for (int c = t; c < n; c += threads) {
          callers.push_back(std::make_unique<Caller>());
          callers.back()->index = c;
          callers.back()->next = c;
        }
        // Starts caller `c`'s next call; false when the caller is done (the run ended).
        auto start = [&](Caller& c) {
          if (stop.load(std::memory_order_relaxed)) return false;
          c.begin = Clock::now();
          if (c.begin >= measure_end_) return false;
          c.measure = c.begin >= measure_begin_;
          if (c.measure && args_.max_requests > 0 && measured.fetch_add(1) >= args_.max_requests) {
            stop = true;
            return false;
          }
          StartCall(c, n, &cq);
          return true;
        };
        int active = 0;
        for (auto& c : callers) active += start(*c) ? 1 : 0;
        void* tag = nullptr;
        bool ok = false;
        while (active > 0 && cq.Next(&tag, &ok)) {
          Caller& c = *static_cast<Caller*>(tag);
          if (!c.status.ok() && !first_failure.exchange(true)) {
            // The counts say how many failed; the first one's words say why.
            std::fprintf(stderr, "grove bench: first failed call: %s: %s\n",
                         absl::StatusCodeToString(
                             static_cast<absl::StatusCode>(c.status.error_code())).c_str(),
                         c.status.error_message().c_str());
          }
          if (c.measure) {
            recorders[c.index].Add(std::chrono::duration<double>(Clock::now() - c.begin).count(),
                                   Outcome(c));
          }
          if (!start(c)) --active;
        }
        cq.Shutdown();
        while (cq.Next(&tag, &ok)) {
        }
      });
    }
    for (std::thread& th : pool) th.join();
    actual_end_ = std::min(Clock::now(), measure_end_);
    send_end_ = actual_end_;
    for (Recorder& r : recorders) total_.Merge(std::move(r));
  }

  void RunOpen() {
    struct Pending {
      grpc::ClientContext context;
      grove::v1::PredictResponse predict;
      grove::v1::ExplainResponse explain;
      Clock::time_point scheduled;
      bool measure = false;
    };
    std::mutex mu;
    std::condition_variable cv;
    int64_t outstanding = 0;
    Recorder recorder;
    start_ = Clock::now();
    measure_begin_ = start_ + Dur(args_.warmup_seconds);
    measure_end_ = measure_begin_ + Dur(args_.duration_seconds);
    send_end_ = measure_begin_;
    const double period = 1.0 / args_.rate;
    int64_t measured = 0;
    for (int64_t k = 0;; ++k) {
      const Clock::time_point at = start_ + Dur(period * static_cast<double>(k));
      if (at >= measure_end_) break;
      const bool measure = at >= measure_begin_;
      if (measure && args_.max_requests > 0 && measured++ >= args_.max_requests) break;
      std::this_thread::sleep_until(at);
      auto* p = new Pending;
      p->scheduled = at;
      p->measure = measure;
      const int conn = static_cast<int>(k % static_cast<int64_t>(clients_.size()));
      clients_[conn]->Prepare(&p->context, Call());
      {
        std::lock_guard<std::mutex> lock(mu);
        ++outstanding;
      }
      auto done = [&, p](grpc::Status s) {
        const double latency = std::chrono::duration<double>(Clock::now() - p->scheduled).count();
        std::lock_guard<std::mutex> lock(mu);
        if (p->measure) recorder.Add(latency, static_cast<absl::StatusCode>(s.error_code()));
        delete p;
        if (--outstanding == 0) cv.notify_all();
      };
      const int i = static_cast<int>(k % kPreparedRequests);
      if (args_.bench_explain) {
        clients_[conn]->stub()->async()->Explain(&p->context, &explain_[i % explain_.size()],
                                                 &p->explain, done);
      } else {
        clients_[conn]->stub()->async()->Predict(&p->context, &predict_[i % predict_.size()],
                                                 &p->predict, done);
      }
      if (measure) send_end_ = Clock::now();
    }
    actual_end_ = std::min(Clock::now(), measure_end_);
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return outstanding == 0; });
    total_.Merge(std::move(recorder));
  }

  // The measured window and the time the requests of it took to send (longer than the window
  // when an open-loop sender fell behind its schedule).
  double MeasuredSeconds() const {
    return std::max(1e-9, std::chrono::duration<double>(actual_end_ - measure_begin_).count());
  }
  double SendSeconds() const {
    return std::max(MeasuredSeconds(),
                    std::chrono::duration<double>(send_end_ - measure_begin_).count());
  }
  Recorder& total() { return total_; }
  // Reports `merged` (several processes' results) instead of this run's: the rates over the
  // processes' longest windows.
  void SetMerged(Recorder&& merged, double seconds, double send_seconds) {
    total_ = std::move(merged);
    merged_seconds_ = seconds;
    merged_send_seconds_ = send_seconds;
  }

  int Report(const std::string& model_desc, const ServerCpu& cpu) {
    std::vector<double>& lat = total_.latencies;
    std::sort(lat.begin(), lat.end());
    for (auto& [code, l] : total_.failures) std::sort(l.begin(), l.end());
    const double seconds = merged_seconds_ > 0 ? merged_seconds_ : MeasuredSeconds();
    // Requests sent per second: over the measured window, or longer when an open-loop sender fell
    // behind its schedule.
    const double send_seconds = merged_seconds_ > 0 ? merged_send_seconds_ : SendSeconds();
    const int64_t failed = total_.Failed();
    const double offered = static_cast<double>(total_.ok + failed) / send_seconds;
    const double rps = static_cast<double>(total_.ok) / seconds;
    const double rows_ps = rps * static_cast<double>(args_.rows_per_request);
    double mean = 0;
    for (double v : lat) mean += v;
    if (!lat.empty()) mean /= static_cast<double>(lat.size());
    const double ms = 1000.0;
    const char* op =
        args_.bench_explain ? (args_.interactions ? "interactions" : "explain") : "predict";
    const bool open = args_.rate > 0;
    if (args_.json) {
      std::printf(
          "{\"server\": %s, \"model\": %s, \"operation\": \"%s\", \"mode\": \"%s\", "
          "\"concurrency\": %d, \"rate\": %.9g, \"rows_per_request\": %lld, \"connections\": %d, "
          "\"processes\": %d, \"shared_memory\": %s, \"grpc_poller\": %s, "
          "\"duration_seconds\": %.6f, \"requests_ok\": %lld, \"requests_failed\": %lld, "
          "\"failures\": %s, \"failure_latency_ms\": %s, \"offered_per_second\": %.6g, "
          "\"requests_per_second\": %.6g, \"rows_per_second\": %.6g, \"server_cpu\": %s, "
          "\"latency_ms\": {\"p50\": %.6g, \"p90\": %.6g, \"p99\": %.6g, \"p999\": %.6g, "
          "\"max\": %.6g, \"mean\": %.6g}}\n",
          JsonString(args_.server).c_str(), JsonString(args_.model).c_str(), op,
          open ? "open" : "closed",
          open ? 0 : args_.concurrency, args_.rate, static_cast<long long>(args_.rows_per_request),
          args_.connections, std::max(1, args_.processes),
          args_.shared_memory ? "true" : "false", PollerJson().c_str(), seconds,
          static_cast<long long>(total_.ok),
          static_cast<long long>(failed), FailureCountsJson(total_).c_str(),
          FailureLatencyJson(total_).c_str(), offered, rps, rows_ps,
          ServerCpuJson(cpu, total_.ok + failed).c_str(), Percentile(lat, 0.5) * ms,
          Percentile(lat, 0.9) * ms, Percentile(lat, 0.99) * ms, Percentile(lat, 0.999) * ms,
          lat.empty() ? 0.0 : lat.back() * ms, mean * ms);
    } else {
      std::printf(
          "grove bench: %s on %s, %s, %s, %lld rows/request, %d connection(s)%s\n",
          model_desc.c_str(), args_.server.c_str(), op,
          open ? absl::StrFormat("open loop at %.6g requests/s", args_.rate).c_str()
               : absl::StrFormat("closed loop with %d caller(s)", args_.concurrency).c_str(),
          static_cast<long long>(args_.rows_per_request), args_.connections,
          args_.processes > 1
              ? absl::StrFormat(" per process, %d processes", args_.processes).c_str()
              : "");
      std::printf("  requests    %lld ok, %lld failed in %.3f s, %.1f sent/s\n",
                  static_cast<long long>(total_.ok), static_cast<long long>(failed), seconds,
                  offered);
      PrintFailures();
      std::printf("  throughput  %.1f requests/s, %.1f rows/s\n", rps, rows_ps);
      std::printf("  latency ms  p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  mean %.3f\n",
                  Percentile(lat, 0.5) * ms, Percentile(lat, 0.9) * ms, Percentile(lat, 0.99) * ms,
                  Percentile(lat, 0.999) * ms, lat.empty() ? 0.0 : lat.back() * ms, mean * ms);
      if (cpu.known) {
        std::printf(
            "  server cpu  %.3f s, %.2f cores busy, %.1f us per request (this client: %.2f cores)\n",
            cpu.seconds, cpu.seconds / std::max(1e-9, cpu.wall_seconds),
            1e6 * cpu.seconds / std::max<double>(1, static_cast<double>(total_.ok + failed)),
            cpu.client_seconds / std::max(1e-9, cpu.wall_seconds));
      }
    }
    std::fflush(stdout);
    return failed == 0 && total_.ok > 0 ? 0 : 1;
  }

 private:
  // One closed-loop caller: its call in flight (the completion queue's tag is the caller).
  struct Caller {
    int index = 0;    // 0..concurrency-1
    int64_t next = 0;  // prepared request of its next call
    Clock::time_point begin;
    bool measure = false;
    std::optional<grpc::ClientContext> context;  // declared before the reader: destroyed after
    grpc::Status status;
    grpc::ByteBuffer response;
    std::unique_ptr<grpc::ClientAsyncResponseReader<grpc::ByteBuffer>> call;
  };

  // Starts `c`'s next call on `cq` (`n` callers).
  void StartCall(Caller& c, int n, grpc::CompletionQueue* cq) {
    const int conn = c.index % static_cast<int>(clients_.size());
    const int64_t i = c.next;
    c.next += n;
    // The reader lives in its call's memory, which goes with the context: reader first.
    c.call.reset();
    c.response.Clear();
    c.context.emplace();
    clients_[conn]->Prepare(&*c.context, Call());
    const grpc::ByteBuffer& req =
        args_.shared_memory ? shm_wire_[c.index] : wire_[i % wire_.size()];
    c.call = generic_[conn]->PrepareUnaryCall(&*c.context, method_, req, cq);
    c.call->StartCall();
    c.call->Finish(&c.response, &c.status, &c);
  }

  // The status a closed-loop call counts as: an OK call without an answer is a failure.
  static absl::StatusCode Outcome(const Caller& c) {
    if (c.status.ok() && c.response.Length() == 0) return absl::StatusCode::kInternal;
    return static_cast<absl::StatusCode>(c.status.error_code());
  }

  static Clock::duration Dur(double seconds) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  // One line per failure code: count and latency percentiles (latencies sorted).
  void PrintFailures() const {
    for (auto& [code, l] : total_.failures) {
      std::printf("  failed      %lld %s, ms p50 %.3f  p99 %.3f  max %.3f\n",
                  static_cast<long long>(l.size()), absl::StatusCodeToString(code).c_str(),
                  Percentile(l, 0.5) * 1000, Percentile(l, 0.99) * 1000,
                  l.empty() ? 0.0 : l.back() * 1000);
    }
  }
  client::CallOptions Call() const {
    client::CallOptions call;
    if (args_.timeout_seconds > 0) call.timeout = absl::Seconds(args_.timeout_seconds);
    return call;
  }

  const CliArgs& args_;
  std::vector<std::unique_ptr<client::GroveClient>> clients_;
  const int64_t version_;
  const int64_t cols_;
  const bool raw_rows_;
  std::vector<grove::v1::PredictRequest> predict_;
  std::vector<grove::v1::ExplainRequest> explain_;
  // --shared-memory: per caller, its object, its registered region and its request.
  std::vector<std::unique_ptr<client::SharedMemoryBuffer>> shm_buffers_;
  std::vector<std::string> shm_regions_;
  std::vector<grove::v1::PredictRequest> shm_predict_;
  std::vector<grove::v1::ExplainRequest> shm_explain_;
  // The closed loop's: the requests above serialized (SerializeRequests), generic stubs per
  // connection, the method's path.
  std::vector<grpc::ByteBuffer> wire_, shm_wire_;
  std::vector<std::unique_ptr<grpc::GenericStub>> generic_;
  std::string method_;
  Recorder total_;
  Clock::time_point start_, measure_begin_, measure_end_, actual_end_, send_end_;
  double merged_seconds_ = 0, merged_send_seconds_ = 0;  // SetMerged
};

int Fail(const absl::Status& status) {
  std::string message(status.message());
  std::replace(message.begin(), message.end(), '\n', ' ');
  std::fprintf(stderr, "grove: error: %s\n", message.c_str());
  return 1;
}

}  // namespace

namespace {

// ---- Several processes (--processes N) ----
//
// One process's closed loop stops near what its gRPC client threads can drive, below what a
// many-core server answers. With --processes N the bench forks N workers before any gRPC state
// exists (gRPC must not be initialised across a fork); each connects and prepares its requests on
// its own, reports ready, and all start together when the parent says go, so that their measured
// windows and the parent's server-CPU window coincide. Each sends its results (counts and every
// latency, so that the merged percentiles are exact) back through a pipe.

// A worker's end of its two pipes: `to_parent` (ready byte, then results), `from_parent` (go).
struct ParentLink {
  int to_parent = -1;
  int from_parent = -1;
};

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// What a worker sends when its run ended.
struct WorkerResult {
  std::string model_desc;
  Recorder recorder;
  double seconds = 0, send_seconds = 0, client_cpu_seconds = 0;
};

template <typename T>
void Put(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void PutDoubles(std::string* out, const std::vector<double>& v) {
  Put(out, static_cast<uint64_t>(v.size()));
  out->append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
}

std::string EncodeResult(const WorkerResult& r) {
  std::string out;
  Put(&out, static_cast<uint64_t>(r.model_desc.size()));
  out += r.model_desc;
  Put(&out, r.seconds);
  Put(&out, r.send_seconds);
  Put(&out, r.client_cpu_seconds);
  Put(&out, r.recorder.ok);
  PutDoubles(&out, r.recorder.latencies);
  Put(&out, static_cast<uint64_t>(r.recorder.failures.size()));
  for (const auto& [code, l] : r.recorder.failures) {
    Put(&out, static_cast<int32_t>(code));
    PutDoubles(&out, l);
  }
  return out;
}

// Reads one EncodeResult message from `fd` (false when the worker died before sending it).
bool ReadResult(int fd, WorkerResult* r) {
  uint64_t n = 0;
  auto doubles = [&](std::vector<double>* v) {
    if (!ReadAll(fd, &n, sizeof n) || n > (uint64_t{1} << 34)) return false;
    v->resize(n);
    return ReadAll(fd, v->data(), n * sizeof(double));
  };
  if (!ReadAll(fd, &n, sizeof n) || n > 4096) return false;
  r->model_desc.resize(n);
  if (!ReadAll(fd, r->model_desc.data(), n) || !ReadAll(fd, &r->seconds, sizeof(double)) ||
      !ReadAll(fd, &r->send_seconds, sizeof(double)) ||
      !ReadAll(fd, &r->client_cpu_seconds, sizeof(double)) ||
      !ReadAll(fd, &r->recorder.ok, sizeof(int64_t)) || !doubles(&r->recorder.latencies) ||
      !ReadAll(fd, &n, sizeof n) || n > 64) {
    return false;
  }
  for (uint64_t i = 0, codes = n; i < codes; ++i) {
    int32_t code = 0;
    if (!ReadAll(fd, &code, sizeof code)) return false;
    if (!doubles(&r->recorder.failures[static_cast<absl::StatusCode>(code)])) return false;
  }
  return true;
}

// One bench process: connects, prepares, runs, and reports (or, as a worker of --processes, sends
// its results to the parent).
int RunOne(const CliArgs& args, const ParentLink* parent) {
  absl::StatusOr<int64_t> version = ParseModelVersion(args);
  if (!version.ok()) return Fail(version.status());
  std::vector<std::unique_ptr<client::GroveClient>> clients;
  for (int c = 0; c < args.connections; ++c) {
    absl::StatusOr<std::unique_ptr<client::GroveClient>> client = ConnectToServer(args);
    if (!client.ok()) return Fail(client.status());
    clients.push_back(*std::move(client));
  }
  client::CallOptions call;
  call.timeout = absl::Seconds(args.timeout_seconds > 0 ? args.timeout_seconds : 30);
  absl::StatusOr<grove::v1::ModelMetadata> meta =
      clients[0]->GetModelMetadata(args.model, *version, call);
  if (!meta.ok()) return Fail(DescribeRemoteError(meta.status(), args));
  if (meta->num_features() <= 0) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(args.model, ": no features")));
  }
  // Every connection up before the clock starts: a first connection attempt that fails would
  // otherwise fail its calls fast until gRPC's reconnect backoff ends, and count them.
  for (size_t c = 1; c < clients.size(); ++c) {
    if (absl::Status s = clients[c]->WaitForReady(call.timeout); !s.ok()) {
      return Fail(DescribeRemoteError(s, args));
    }
  }
  Bench bench(args, std::move(clients), *version, meta->num_features(), meta->raw_tensors());
  if (absl::Status s = bench.Prepare(); !s.ok()) return Fail(s);
  if (args.shared_memory) {
    if (!meta->shared_memory()) {
      return Fail(absl::FailedPreconditionError(absl::StrCat(
          "--shared-memory: the server at ", args.server, " does not register shared memory "
          "(start groved with --shared_memory, on this host)")));
    }
    if (absl::Status s = bench.PrepareSharedMemory(*meta); !s.ok()) {
      bench.ReleaseSharedMemory();
      return Fail(DescribeRemoteError(s, args));
    }
  }
  if (args.rate <= 0) {
    if (absl::Status s = bench.SerializeRequests(); !s.ok()) {
      bench.ReleaseSharedMemory();
      return Fail(s);
    }
  }
  const bool sample_server = args.server_pid > 0 && parent == nullptr;
  if (sample_server) {
    if (absl::StatusOr<double> cpu = ProcessCpuSeconds(args.server_pid); !cpu.ok()) {
      return Fail(cpu.status());
    }
  }
  if (parent != nullptr) {
    char go = 'R';
    if (!WriteAll(parent->to_parent, &go, 1) || !ReadAll(parent->from_parent, &go, 1)) return 1;
  }
  // The server's CPU clock (and this process's) are read when the warm-up ends and when the run
  // ends.
  ServerCpu cpu;
  double cpu_begin = 0, client_begin = 0;
  std::chrono::steady_clock::time_point wall_begin;
  std::thread sampler([&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(args.warmup_seconds));
    wall_begin = std::chrono::steady_clock::now();
    if (sample_server) cpu_begin = ProcessCpuSeconds(args.server_pid).value_or(0);
    client_begin = OwnCpuSeconds();
  });
  if (args.rate > 0) {
    bench.RunOpen();
  } else {
    bench.RunClosed();
  }
  sampler.join();
  cpu.client_seconds = OwnCpuSeconds() - client_begin;
  cpu.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_begin).count();
  if (sample_server) {
    absl::StatusOr<double> cpu_end = ProcessCpuSeconds(args.server_pid);
    cpu.known = cpu_end.ok();
    cpu.seconds = cpu_end.value_or(0) - cpu_begin;
  }
  bench.ReleaseSharedMemory();
  const std::string desc = absl::StrCat("model ", meta->name(), " version ", meta->version(),
                                        args.shared_memory ? ", rows and results in shared memory"
                                                           : "");
  if (parent != nullptr) {
    WorkerResult r{desc, std::move(bench.total()), bench.MeasuredSeconds(), bench.SendSeconds(),
                   cpu.client_seconds};
    const std::string bytes = EncodeResult(r);
    return WriteAll(parent->to_parent, bytes.data(), bytes.size()) ? 0 : 1;
  }
  return bench.Report(desc, cpu);
}

// --processes N: forks the workers (before any gRPC state exists), starts them together, samples
// the server's CPU over the common window, merges and reports.
int RunProcesses(const CliArgs& args) {
  if (args.server_pid > 0) {
    if (absl::StatusOr<double> cpu = ProcessCpuSeconds(args.server_pid); !cpu.ok()) {
      return Fail(cpu.status());
    }
  }
  struct Worker {
    pid_t pid = -1;
    int results = -1;  // read end of the worker's to_parent pipe
    int go = -1;       // write end of its from_parent pipe
  };
  std::vector<Worker> workers;
  std::fflush(stdout);
  std::fflush(stderr);
  for (int i = 0; i < args.processes; ++i) {
    int up[2], down[2];
    if (::pipe(up) != 0 || ::pipe(down) != 0) {
      return Fail(absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno))));
    }
    const pid_t pid = ::fork();
    if (pid < 0) return Fail(absl::InternalError(absl::StrCat("fork: ", std::strerror(errno))));
    if (pid == 0) {
      ::close(up[0]);
      ::close(down[1]);
      for (const Worker& w : workers) {  // the earlier workers' parent ends
        ::close(w.results);
        ::close(w.go);
      }
      const ParentLink link{up[1], down[0]};
      std::fflush(stdout);
      ::_exit(RunOne(args, &link));
    }
    ::close(up[1]);
    ::close(down[0]);
    workers.push_back(Worker{pid, up[0], down[1]});
  }
  // Everyone ready (a worker that failed to connect or prepare closes its pipe instead), then go.
  bool all_ready = true;
  for (const Worker& w : workers) {
    char ready = 0;
    all_ready = all_ready && ReadAll(w.results, &ready, 1) && ready == 'R';
  }
  for (const Worker& w : workers) {
    if (all_ready) {
      const char go = 'G';
      WriteAll(w.go, &go, 1);
    }
    ::close(w.go);  // without go, a waiting worker reads the end of the pipe and exits
  }
  ServerCpu cpu;
  double cpu_begin = 0;
  std::chrono::steady_clock::time_point wall_begin;
  if (all_ready) {
    std::this_thread::sleep_for(std::chrono::duration<double>(args.warmup_seconds));
    wall_begin = std::chrono::steady_clock::now();
    if (args.server_pid > 0) cpu_begin = ProcessCpuSeconds(args.server_pid).value_or(0);
  }
  Recorder merged;
  std::string desc;
  double seconds = 0, send_seconds = 0;
  bool complete = all_ready;
  for (const Worker& w : workers) {
    WorkerResult r;
    if (all_ready && ReadResult(w.results, &r)) {
      desc = r.model_desc;
      seconds = std::max(seconds, r.seconds);
      send_seconds = std::max(send_seconds, r.send_seconds);
      cpu.client_seconds += r.client_cpu_seconds;
      merged.Merge(std::move(r.recorder));
    } else {
      complete = false;
    }
    ::close(w.results);
  }
  if (all_ready) {
    cpu.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_begin).count();
    if (args.server_pid > 0) {
      absl::StatusOr<double> cpu_end = ProcessCpuSeconds(args.server_pid);
      cpu.known = cpu_end.ok();
      cpu.seconds = cpu_end.value_or(0) - cpu_begin;
    }
  }
  bool exits_ok = true;
  for (const Worker& w : workers) {
    int status = 0;
    while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
    }
    exits_ok = exits_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!complete || !exits_ok) {
    // The failing worker said why on stderr.
    return Fail(absl::UnavailableError(
        absl::StrCat("grove bench: a worker of --processes ", args.processes,
                     " failed before it sent its results (see its error above)")));
  }
  Bench bench(args, {}, 0, 1, /*raw_rows=*/true);
  bench.SetMerged(std::move(merged), seconds, send_seconds);
  return bench.Report(desc, cpu);
}

}  // namespace

std::string ChooseBenchPollStrategy(unsigned hardware_threads) {
  if (const char* set = std::getenv("GRPC_POLL_STRATEGY"); set != nullptr && *set != '\0') {
    return set;
  }
  const char* chosen = hardware_threads >= kBenchPollMinThreads ? "poll" : "epoll1";
  setenv("GRPC_POLL_STRATEGY", chosen, /*overwrite=*/1);
  return chosen;
}

int RunBench(const CliArgs& args) {
  // Before any channel (and before --processes forks its workers, which inherit it).
  ChooseBenchPollStrategy(std::thread::hardware_concurrency());
  if (args.processes > 1) return RunProcesses(args);
  return RunOne(args, nullptr);
}

}  // namespace grove::cli
