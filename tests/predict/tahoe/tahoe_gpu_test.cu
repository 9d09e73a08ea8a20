// Tahoe GPU engine against the CPU reference (PredictCpu), on the GPU: every strategy (direct,
// shared data, shared forest, splitting shared forest with one and with many parts), every output
// kind (margin, prediction, leaf ids), iteration ranges, every corpus case and seeded random forests
// (categorical splits, LightGBM missing-value rules, multi-output and vector leaves, 16-byte nodes,
// each rearrangement off). Margins within 1e-5 * max(1, |ref|), leaf ids exact. Both the host path
// (several chunks) and the engine-level path (rows on the device). Each test skips itself without a
// visible GPU. Label gpu.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/gpu/device_set.h"
#include "core/model/loader.h"
#include "core/predict/predict.h"
#include "core/predict/predict_engine.h"
#include "core/predict/tahoe/pinned_pieces.h"
#include "core/predict/tahoe/shape_trials.h"
#include "core/predict/tahoe/tahoe_engine.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"
#include "tests/testing/gpu_skip.h"
#include "tests/testing/predict_reference.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

constexpr double kTolerance = 1e-5;

// Page-locks a vector's memory for the object's life (gpu::PinHostRange), as a caller that
// registers its arrays once does.
class ScopedPin {
 public:
  explicit ScopedPin(std::vector<float>& v)
      : data_(v.data()), status_(gpu::PinHostRange(v.data(), v.size() * sizeof(float))) {}
  ~ScopedPin() {
    if (status_.ok()) gpu::UnpinHostRange(data_);
  }
  ScopedPin(const ScopedPin&) = delete;
  ScopedPin& operator=(const ScopedPin&) = delete;
  const absl::Status& status() const { return status_; }

 private:
  void* data_;
  absl::Status status_;
};
// Every GPU strategy, from the one name table (index 0 is the CPU).
std::vector<std::string> GpuStrategies() {
  std::vector<std::string> s;
  for (int i = 1; i < kNumStrategies; ++i) s.push_back(StrategyName(i));
  return s;
}

std::string CacheDir() {
  const std::string d = (std::filesystem::temp_directory_path() / "grove-tahoe-test-cache").string();
  return d;
}

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(bytes, 16)), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(p); }
};

// Every strategy of `engine` (host path and device path) against PredictCpu.
void CheckEngine(const TahoeEngine& engine, const Forest& f, const std::vector<float>& rows,
                 const std::string& what, bool check_device_path = true) {
  std::vector<PredictOptions> kinds = {Kind(OutputKind::kMargin), Kind(OutputKind::kPrediction),
                                       Kind(OutputKind::kLeaf)};
  if (f.num_iterations > 2) {
    kinds.push_back(Kind(OutputKind::kPrediction, 1, f.num_iterations - 1));
    kinds.push_back(Kind(OutputKind::kLeaf, 1, 0));
  }
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  DeviceBuffer d_rows(rows.size() * 4);
  ASSERT_EQ(cudaMemcpy(d_rows.p, rows.data(), rows.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  for (const PredictOptions& o : kinds) {
    const std::vector<float> want = ReferencePrediction(f, rows, o);
    const int64_t width = PredictWidth(f, o);
    for (const std::string& strategy : GpuStrategies()) {
      SCOPED_TRACE(what + " strategy " + strategy + " kind " + OutputKindName(o.kind) + " range [" +
                   std::to_string(o.iteration_begin) + "," + std::to_string(o.iteration_end) + ")");
      std::vector<float> got(n * width, -777.0f);
      RunInfo info;
      absl::Status s = engine.PredictHost(MakeRowsView(rows.data(), n, f.num_features), o,
                                          MakeMatrixView(got.data(), n, width), strategy, &info);
      if (absl::IsFailedPrecondition(s)) continue;  // e.g. forest does not fit shared memory
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_EQ(info.strategy, strategy);
      if (o.kind == OutputKind::kLeaf) {
        EXPECT_EQ(got, want);
      } else {
        EXPECT_LE(MaxRelativeError(got, want), kTolerance);
      }
      if (!check_device_path) continue;
      DeviceBuffer d_out(n * width * 4);
      ASSERT_EQ(cudaMemset(d_out.p, 0xFF, n * width * 4), cudaSuccess);  // NaN poison
      // The engine's stream does not wait for the legacy default stream's memset.
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      s = engine.PredictDevice(0, static_cast<const float*>(d_rows.p), n, f.num_features, o,
                               static_cast<float*>(d_out.p), width, strategy, &info);
      ASSERT_TRUE(s.ok()) << s;
      std::vector<float> dev(n * width);
      ASSERT_EQ(cudaMemcpy(dev.data(), d_out.p, n * width * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      // Same strategy, same grouping: bit-identical to the host path (deterministic).
      EXPECT_EQ(0, std::memcmp(dev.data(), got.data(), n * width * 4)) << "device path differs";
    }
  }
}

std::unique_ptr<TahoeEngine> MakeEngine(const ForestPtr& f, const TahoeEngineOptions& o) {
  TahoeEngineOptions opts = o;
  opts.engine.calibration_cache_dir = CacheDir();
  absl::StatusOr<std::unique_ptr<TahoeEngine>> e = TahoeEngine::Create(f, opts, nullptr);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

// Default engine, plus seven with small splitting parts, few shared-data groups, small chunks and
// the tree-per-lane splitting kernel forced on (several parts, several chunks, the global
// reduction), in its single and its paired layout, and row chunks of 32 rows (a partial last chunk),
// of 4 rows with two rows per thread, of 128 rows in blocks of 1,024 threads (groups of four warps,
// several outputs limited to 32 rows without a class-aware assignment), of 2 rows in blocks of 512
// and of 8 rows with four rows per thread, and with the trees in parts (2 parts of 32-row chunks, 8
// parts of 8 rows with four rows per thread; where the walks cannot split, the same shapes whole);
// the forced variants alternate row chunk's level layout (tahoe_level.h) on and off, and take its
// record layout (tahoe_records.h, where the forest qualifies) in variants 2, 3, 6 and 7.
void CheckForest(const ForestPtr& f, const std::vector<float>& rows, const std::string& what,
                 const TahoeFormatOptions& format = {}) {
  const int row_chunks[] = {0, 32, 4 | kRowChunkPaired,
                            128 | (2 << kRowChunkThreadsShift), 2 | (1 << kRowChunkThreadsShift),
                            8 | kRowChunkQuad, 32 | (1 << kRowChunkPartsShift),
                            8 | kRowChunkQuad | (3 << kRowChunkPartsShift)};
  for (int variant = 0; variant < 8; ++variant) {
    TahoeEngineOptions o;
    o.format = format;
    o.shape_trials = false;  // the host and device paths compared bit for bit (trials: below)
    if (variant > 0) {
      o.max_part_bytes = 3000;
      o.shared_data_groups = 4;
      o.max_chunk_rows = 100;
      // The tree-per-lane kernel wherever it applies.
      o.lanes = variant % 2 == 1 ? TahoeEngineOptions::Lanes::kOn : TahoeEngineOptions::Lanes::kOnPaired;
      o.row_chunk = row_chunks[variant];
      // Row chunk's walks from the roots on the level layout and on the depth-first nodes.
      o.level_walk = variant % 2 == 1 ? TahoeEngineOptions::LevelWalk::kOn
                                      : TahoeEngineOptions::LevelWalk::kOff;
      o.record_walk = variant % 4 >= 2 ? TahoeEngineOptions::RecordWalk::kOn
                                       : TahoeEngineOptions::RecordWalk::kOff;
      o.probe = false;  // every knob above is forced; variant 0 exercises the probes
    }
    std::unique_ptr<TahoeEngine> e = MakeEngine(f, o);
    ASSERT_NE(e, nullptr);
    const char* labels[] = {"", " (small parts/chunks)", " (paired lanes)", " (128 rows, 1024 threads)",
                            " (2 rows, 512 threads)", " (four rows per thread)", " (2 tree parts)",
                            " (8 tree parts, four rows per thread)"};
    CheckEngine(*e, *f, rows, what + labels[variant]);
  }
}

TEST(TahoeGpuTest, CorpusMatchesTheCpuReference) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::string> dirs = testing::CorpusCaseDirs();
  if (dirs.empty()) GTEST_SKIP() << "no corpus found";
  int cases = 0;
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    absl::StatusOr<testing::CorpusModel> m = testing::LoadCorpusModel(dir);
    ASSERT_TRUE(m.ok()) << m.status();
    const testing::CorpusCase& c = m->c;
    const ForestPtr& f = m->forest;
    CheckForest(f, c.X, c.name);
    ++cases;
  }
  std::printf("%d corpus cases checked on the GPU\n", cases);
}

// A batch large enough to be split across every visible GPU (4,096 rows per GPU and more): each
// GPU's share runs on its issuing thread (gpu::DeviceIssuers), the device list names them all, and
// the answers are the reference's, from several callers at once.
TEST(TahoeGpuTest, BatchesSplitAcrossGpusMatchTheCpuReference) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = MakeRandomForest({.num_trees = 40, .max_depth = 7, .num_features = 20, .seed = 77});
  const int gpus = gpu::VisibleGpuCount();
  const int64_t n = 4096 * gpus + 1000;
  const std::vector<float> rows = MakeRandomRows(*f, static_cast<int>(n), 9, 0.1);
  std::unique_ptr<TahoeEngine> e = MakeEngine(f, TahoeEngineOptions{});
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->num_gpus(), gpus);
  const PredictOptions margin = Kind(OutputKind::kMargin);
  const std::vector<float> want = ReferencePrediction(*f, rows, margin);
  std::vector<std::thread> callers;
  std::vector<std::vector<float>> got(3, std::vector<float>(n, -777.0f));
  std::vector<absl::Status> status(3);
  std::vector<RunInfo> info(3);
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 5 && status[c].ok(); ++rep) {
        status[c] = e->PredictHost(MakeRowsView(rows.data(), n, f->num_features), margin,
                                   MakeMatrixView(got[c].data(), n, 1), "row_chunk", &info[c]);
      }
    });
  }
  for (std::thread& t : callers) t.join();
  std::string devices = "cuda:0";
  for (int d = 1; d < gpus; ++d) devices += "+" + std::to_string(d);
  for (int c = 0; c < 3; ++c) {
    ASSERT_TRUE(status[c].ok()) << status[c];
    EXPECT_EQ(info[c].device, devices);
    EXPECT_LE(MaxRelativeError(got[c], want), kTolerance);
    EXPECT_EQ(got[c], got[0]);  // deterministic across callers
  }
}

// The split across an engine's GPUs, exercised on one device: an engine of two and of three GPUs on
// device 0 (each its own copy, lanes, issuing thread and staging threads) splits a batch into
// shares that answer bit for bit as one GPU does with the same plan (a row's result is independent
// of the split), for every strategy, a categorical and a multi-output forest, margins and leaf ids;
// devices that are not visible are refused.
TEST(TahoeGpuTest, BatchSplitAcrossEngineGpusOfOneDeviceIsExact) {
  SKIP_WITHOUT_GPU();
  for (int shape = 0; shape < 2; ++shape) {
    RandomForestOptions o;
    o.seed = 610 + shape;
    o.num_trees = 30;
    o.max_depth = 7;
    o.num_features = 14;
    o.categorical_fraction = shape == 0 ? 0.5 : 0.0;
    o.num_outputs = shape == 1 ? 3 : 1;
    ForestPtr f = MakeRandomForest(o);
    const int64_t n = 3 * 4096 + 123;  // shares of more than 4,096 rows: every GPU takes one
    const std::vector<float> rows = MakeRandomRows(*f, static_cast<int>(n), 20 + shape, 0.1);
    TahoeEngineOptions base;
    base.probe = false;         // the same knobs on every engine (no load-time choices)
    base.shape_trials = false;
    base.row_chunk = 32;          // shapes fixed, not chosen per share size
    base.shared_data_groups = 4;
    base.devices = {0};  // one GPU on hosts with several too
    std::unique_ptr<TahoeEngine> one = MakeEngine(f, base);
    ASSERT_NE(one, nullptr);
    for (const std::vector<int>& devices : {std::vector<int>{0, 0}, std::vector<int>{0, 0, 0}}) {
      TahoeEngineOptions split = base;
      split.devices = devices;
      std::unique_ptr<TahoeEngine> e = MakeEngine(f, split);
      ASSERT_NE(e, nullptr);
      ASSERT_EQ(e->num_gpus(), static_cast<int>(devices.size()));
      std::string want_device = "cuda:0";
      for (size_t d = 1; d < devices.size(); ++d) want_device += "+0";
      for (const PredictOptions& po : {Kind(OutputKind::kMargin), Kind(OutputKind::kLeaf)}) {
        const int64_t width = PredictWidth(*f, po);
        const std::vector<float> ref = ReferencePrediction(*f, rows, po);
        for (const std::string& strategy : GpuStrategies()) {
          SCOPED_TRACE("shape " + std::to_string(shape) + " gpus " +
                       std::to_string(devices.size()) + " " + strategy + " " +
                       OutputKindName(po.kind));
          std::vector<float> whole(n * width, -777.0f), parts(n * width, -555.0f);
          RunInfo info_one, info_split;
          absl::Status s = one->PredictHost(MakeRowsView(rows.data(), n, f->num_features), po,
                                            MakeMatrixView(whole.data(), n, width), strategy,
                                            &info_one);
          if (absl::IsFailedPrecondition(s)) continue;
          ASSERT_TRUE(s.ok()) << s;
          s = e->PredictHost(MakeRowsView(rows.data(), n, f->num_features), po,
                             MakeMatrixView(parts.data(), n, width), strategy, &info_split);
          ASSERT_TRUE(s.ok()) << s;
          EXPECT_EQ(info_one.device, "cuda:0");
          EXPECT_EQ(info_split.device, want_device);
          EXPECT_EQ(0, std::memcmp(whole.data(), parts.data(), whole.size() * 4))
              << "the split answered differently";
          if (po.kind == OutputKind::kLeaf) {
            EXPECT_EQ(parts, ref);
          } else {
            EXPECT_LE(MaxRelativeError(parts, ref), kTolerance);
          }
        }
      }
    }
  }
  TahoeEngineOptions bad;
  bad.devices = {gpu::VisibleGpuCount()};
  bad.engine.calibration_cache_dir = CacheDir();
  EXPECT_EQ(TahoeEngine::Create(MakeRandomForest(RandomForestOptions{}), bad, nullptr)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// Rows and results both page-locked, from two callers at once on their own lanes, over small
// slots: a call of many slots' rows goes in whole chunks over the two slots, a call of a few in
// pieces queued at once (rows in on the lane's in stream, kernels and results out on its piece
// streams, buffers reused once their results left); both answer exactly as pageable memory does,
// every strategy.
TEST(TahoeGpuTest, PinnedCallsOfManyChunksAndOfPiecesMatch) {
  SKIP_WITHOUT_GPU();
  RandomForestOptions o;
  o.seed = 17;
  o.num_trees = 25;
  o.max_depth = 7;
  o.num_features = 9;
  o.num_outputs = 2;
  ForestPtr f = MakeRandomForest(o);
  const int64_t max_n = 20011, K = f->num_outputs;
  const std::vector<float> rows = MakeRandomRows(*f, static_cast<int>(max_n), 8, 0.1);
  TahoeEngineOptions eo;
  eo.max_chunk_rows = 997;
  eo.staging_lanes = 2;
  eo.shape_trials = false;  // a timed trial waits per chunk: not the path under test
  std::unique_ptr<TahoeEngine> e = MakeEngine(f, eo);
  ASSERT_NE(e, nullptr);
  const PredictOptions margin = Kind(OutputKind::kMargin);
  std::vector<float> pinned_rows = rows;
  std::vector<float> pinned_out(2 * max_n * K);
  const ScopedPin pin_rows(pinned_rows), pin_out(pinned_out);
  ASSERT_TRUE(pin_rows.status().ok() && pin_out.status().ok());
  // 21 chunks of 997 rows (the last partial); eleven pieces of up to 498 rows.
  ASSERT_TRUE(PinnedPieces(max_n, 997).sizes().empty());
  ASSERT_FALSE(PinnedPieces(3001, 997).sizes().empty());
  for (const int64_t n : {max_n, int64_t{3001}}) {
    for (const char* strategy : {"row_chunk", "direct", "splitting_shared_forest"}) {
      SCOPED_TRACE(::testing::Message() << n << " rows, " << strategy);
      std::vector<float> want(n * K);
      ASSERT_TRUE(e->PredictHost(MakeRowsView(rows.data(), n, f->num_features), margin,
                                 MakeMatrixView(want.data(), n, K), strategy, nullptr).ok());
      const std::vector<float> head(rows.begin(), rows.begin() + n * f->num_features);
      EXPECT_LE(MaxRelativeError(want, ReferencePrediction(*f, head, margin)), kTolerance);
      std::fill(pinned_out.begin(), pinned_out.end(), -777.0f);
      absl::Status status[2];
      std::vector<std::thread> callers;
      for (int c = 0; c < 2; ++c) {
        callers.emplace_back([&, c] {
          for (int rep = 0; rep < 3 && status[c].ok(); ++rep) {
            status[c] = e->PredictHost(MakeRowsView(pinned_rows.data(), n, f->num_features),
                                       margin, MakeMatrixView(pinned_out.data() + c * n * K, n, K),
                                       strategy, nullptr);
          }
        });
      }
      for (std::thread& t : callers) t.join();
      for (int c = 0; c < 2; ++c) {
        ASSERT_TRUE(status[c].ok()) << status[c];
        EXPECT_TRUE(std::equal(want.begin(), want.end(), pinned_out.begin() + c * n * K))
            << "caller " << c;
      }
    }
  }
}

// Page-locked calls of the sizes users send (tens of thousands to a million rows, the staging slots
// at their default size): pieces that ramp up and down, cut to the buffers' sizes, answer bit for
// bit as pageable memory does (which goes through whole staging chunks).
TEST(TahoeGpuTest, PinnedPiecesOfLargeCallsMatchPageableMemory) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = MakeRandomForest(
      RandomForestOptions{.num_trees = 40, .max_depth = 8, .num_features = 8, .seed = 23});
  const int64_t max_n = 1000003;
  const std::vector<float> rows = MakeRandomRows(*f, static_cast<int>(max_n), 5, 0.05);
  TahoeEngineOptions eo;
  eo.shape_trials = false;
  std::unique_ptr<TahoeEngine> e = MakeEngine(f, eo);
  ASSERT_NE(e, nullptr);
  const PredictOptions margin = Kind(OutputKind::kMargin);
  std::vector<float> pinned_rows = rows;
  std::vector<float> pinned_out(max_n);
  const ScopedPin pin_rows(pinned_rows), pin_out(pinned_out);
  ASSERT_TRUE(pin_rows.status().ok() && pin_out.status().ok());
  for (const int64_t n : {int64_t{32768}, int64_t{100003}, int64_t{262145}, max_n}) {
    SCOPED_TRACE(n);
    std::vector<float> want(n);
    ASSERT_TRUE(e->PredictHost(MakeRowsView(rows.data(), n, f->num_features), margin,
                               MakeMatrixView(want.data(), n, 1), "row_chunk", nullptr).ok());
    std::fill(pinned_out.begin(), pinned_out.end(), -777.0f);
    ASSERT_TRUE(e->PredictHost(MakeRowsView(pinned_rows.data(), n, f->num_features), margin,
                               MakeMatrixView(pinned_out.data(), n, 1), "row_chunk", nullptr).ok());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), pinned_out.begin()));
    if (n < max_n) EXPECT_EQ(pinned_out[n], -777.0f);  // nothing written past the call
  }
}

// Eight callers at once on a GPU's staging lanes (batches above and below the small lanes' slots,
// two lanes forced so that callers wait for one), and rows and results in page-locked memory
// (copied by DMA without staging; results into a strided matrix): every answer equals the
// one-caller, pageable answer bit for bit.
TEST(TahoeGpuTest, ConcurrentLanesAndPinnedBuffersGiveTheSameAnswers) {
  SKIP_WITHOUT_GPU();
  RandomForestOptions o;
  o.seed = 91;
  o.num_trees = 30;
  o.max_depth = 6;
  o.num_features = 12;
  o.num_outputs = 3;
  ForestPtr f = MakeRandomForest(o);
  const int64_t n = 70000;  // above the small lanes' 65,536-row slots
  const std::vector<float> rows = MakeRandomRows(*f, static_cast<int>(n), 5, 0.1);
  TahoeEngineOptions eo;
  eo.staging_lanes = 2;
  std::unique_ptr<TahoeEngine> e = MakeEngine(f, eo);
  ASSERT_NE(e, nullptr);
  const PredictOptions margin = Kind(OutputKind::kMargin);
  const int64_t K = f->num_outputs;
  std::vector<float> want(n * K);
  ASSERT_TRUE(e->PredictHost(MakeRowsView(rows.data(), n, f->num_features), margin,
                             MakeMatrixView(want.data(), n, K), "row_chunk", nullptr).ok());
  EXPECT_LE(MaxRelativeError(want, ReferencePrediction(*f, rows, margin)), kTolerance);
  const int64_t sizes[] = {n, 1, 100, 5000, n, 3, 65536, 777};
  std::vector<std::vector<float>> got(8);
  std::vector<absl::Status> status(8);
  std::vector<std::thread> callers;
  for (int c = 0; c < 8; ++c) {
    got[c].assign(sizes[c] * K, -777.0f);
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 4 && status[c].ok(); ++rep) {
        status[c] = e->PredictHost(MakeRowsView(rows.data(), sizes[c], f->num_features), margin,
                                   MakeMatrixView(got[c].data(), sizes[c], K), "row_chunk", nullptr);
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (int c = 0; c < 8; ++c) {
    ASSERT_TRUE(status[c].ok()) << status[c];
    EXPECT_TRUE(std::equal(got[c].begin(), got[c].end(), want.begin())) << "caller " << c;
  }
  // Pinned rows, pinned strided results (a pitched copy back), then packed pinned results (one
  // linear copy each way).
  std::vector<float> pinned_rows = rows;
  const int64_t stride = K + 2;
  std::vector<float> pinned_out(n * stride, -777.0f), packed_out(n * K, -777.0f);
  const ScopedPin pin_rows(pinned_rows), pin_out(pinned_out), pin_packed(packed_out);
  ASSERT_TRUE(pin_rows.status().ok() && pin_out.status().ok() && pin_packed.status().ok());
  EXPECT_TRUE(gpu::IsPinnedHost(pinned_rows.data() + 5));
  EXPECT_FALSE(gpu::IsPinnedHost(rows.data()));
  const absl::Status st = e->PredictHost(MakeRowsView(pinned_rows.data(), n, f->num_features), margin,
                                         MatrixView<float>{pinned_out.data(), n, K, stride},
                                         "row_chunk", nullptr);
  const absl::Status st_packed = e->PredictHost(MakeRowsView(pinned_rows.data(), n, f->num_features),
                                                margin, MakeMatrixView(packed_out.data(), n, K),
                                                "row_chunk", nullptr);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_TRUE(st_packed.ok()) << st_packed;
  EXPECT_EQ(packed_out, want);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t k = 0; k < K; ++k) ASSERT_EQ(pinned_out[r * stride + k], want[r * K + k]) << r;
    ASSERT_EQ(pinned_out[r * stride + K], -777.0f) << "wrote past the row's outputs";
  }
}

TEST(TahoeGpuTest, RandomForestsMatchTheCpuReference) {
  SKIP_WITHOUT_GPU();
  for (int shape = 0; shape < 8; ++shape) {
    RandomForestOptions o;
    o.seed = 100 + shape;
    o.num_trees = 20 + 9 * shape;
    o.max_depth = 4 + shape % 6;
    o.num_features = 5 + 7 * shape;
    o.categorical_fraction = shape % 3 == 1 ? 0.4 : 0.0;
    o.lightgbm_rules = shape % 2 == 1;
    o.num_outputs = shape >= 5 ? 3 : 1;
    o.vector_leaves = shape == 7;
    o.extreme_cover_probability = shape == 2 ? 0.3 : 0.0;
    ForestPtr f = MakeRandomForest(o);
    const std::vector<float> rows = MakeRandomRows(*f, 333, 7 + shape, 0.15);
    TahoeFormatOptions format;
    format.node_rearrangement = shape != 3;
    format.tree_rearrangement = shape != 4;
    format.force_wide_nodes = shape == 6;
    CheckForest(f, rows, "random shape " + std::to_string(shape), format);
  }
}

// Categorical splits take the fixed walk (kTahoeWalkFixedCat) and the level layout: every strategy
// and row-chunk shape of CheckForest on forests with XGBoost's and LightGBM's categorical rules
// (sets in the node and in the table, one and several outputs, deep trees past the exact-step
// walk), with sets of up to 64 categories (read as pairs: TahoeForestView::cat_pairs; row chunk
// stages their categorical features as category codes) and with wider ones (the general test), on
// rows with categories past 31, past 63, negative, in (-1, 0), fractional and NaN, and without NaN;
// and on every categorical model of the corpus (LightGBM with pandas categories, XGBoost with
// enable_categorical).
TEST(TahoeGpuTest, CategoricalForestsTakeTheFixedWalkOnEveryStrategy) {
  SKIP_WITHOUT_GPU();
  int pairs = 0, general = 0;
  for (int shape = 0; shape < 8; ++shape) {
    RandomForestOptions o;
    o.seed = 500 + shape % 4;
    o.num_trees = 40;
    o.max_depth = shape % 4 == 3 ? 14 : 6 + shape % 4;
    o.num_features = 6 + 5 * (shape % 4);
    o.categorical_fraction = 0.6;
    o.max_categories = shape >= 4 ? 64 : 0;
    o.lightgbm_rules = shape % 2 == 1;
    o.missing_zero = false;  // a rule that keeps a forest off the fixed walk
    o.num_outputs = shape % 4 == 2 ? 3 : 1;
    ForestPtr f = MakeRandomForest(o);
    absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
    ASSERT_TRUE(tf.ok()) << tf.status();
    ASSERT_TRUE((*tf)->fixed_walk() && (*tf)->categorical()) << "shape " << shape;
    if (shape >= 4) EXPECT_TRUE((*tf)->cat_pairs()) << "shape " << shape;
    ((*tf)->cat_pairs() ? pairs : general) += 1;
    const std::vector<float> rows = MakeRandomRows(*f, 333, 40 + shape, 0.15);
    CheckForest(f, rows, "categorical shape " + std::to_string(shape));
    // Rows without NaN take the walks without the NaN test (row chunk stages category codes for
    // pairs forests: both code tests).
    if ((*tf)->cat_pairs()) {
      CheckForest(f, MakeRandomRows(*f, 333, 80 + shape, 0.0),
                  "categorical shape " + std::to_string(shape) + " without NaN");
    }
  }
  EXPECT_GE(pairs, 4);
  EXPECT_GE(general, 1);
  int corpus = 0;
  for (const std::string& dir : testing::CorpusCaseDirs()) {
    absl::StatusOr<testing::CorpusModel> m = testing::LoadCorpusModel(dir);
    ASSERT_TRUE(m.ok()) << m.status();
    absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(m->forest);
    ASSERT_TRUE(tf.ok()) << tf.status();
    if (!(*tf)->categorical() || !(*tf)->fixed_walk()) continue;
    CheckForest(m->forest, testing::GroveRows(m->c, *m->forest), m->c.name + " (categorical)");
    ++corpus;
  }
  std::printf("%d categorical corpus models checked on the fixed walk\n", corpus);
}

TEST(TahoeGpuTest, SelectorRunsAndIsDeterministic) {
  SKIP_WITHOUT_GPU();
  RandomForestOptions o;
  o.num_trees = 50;
  o.max_depth = 8;
  o.num_features = 20;
  ForestPtr f = MakeRandomForest(o);
  TahoeEngineOptions eo;
  eo.shape_trials = false;  // run to run identity from the first batch (see the next test)
  std::unique_ptr<TahoeEngine> e = MakeEngine(f, eo);
  ASSERT_NE(e, nullptr);
  for (int64_t n : {1, 100, 5000}) {
    const std::vector<float> rows = MakeRandomRows(*f, n, 3, 0.1);
    const PredictOptions opt = Kind(OutputKind::kPrediction);
    const std::vector<float> want = ReferencePrediction(*f, rows, opt);
    std::vector<float> a(n), b(n);
    RunInfo info;
    ASSERT_TRUE(e->Predict(MakeRowsView(rows.data(), n, o.num_features), opt,
                           MakeMatrixView(a.data(), n, 1), &info)
                    .ok());
    EXPECT_FALSE(info.strategy.empty());
    EXPECT_NE(info.reason.find("selector"), std::string::npos) << info.reason;
    std::printf("%lld rows: %s on %s (%s)\n", static_cast<long long>(n), info.strategy.c_str(),
                info.device.c_str(), info.reason.c_str());
    EXPECT_LE(MaxRelativeError(a, want), kTolerance);
    ASSERT_TRUE(e->Predict(MakeRowsView(rows.data(), n, o.num_features), opt,
                           MakeMatrixView(b.data(), n, 1), &info)
                    .ok());
    EXPECT_EQ(a, b);
  }
  // Through the generic interface too.
  PredictEngineOptions po;
  po.calibration_cache_dir = CacheDir();
  po.strategy = "direct";
  absl::StatusOr<std::unique_ptr<PredictEngine>> pe = PredictEngine::Create(f, po, nullptr);
  ASSERT_TRUE(pe.ok()) << pe.status();
  const std::vector<float> rows = MakeRandomRows(*f, 64, 5, 0.1);
  std::vector<float> out(64);
  RunInfo info;
  ASSERT_TRUE((*pe)->Predict(MakeRowsView(rows.data(), 64, o.num_features),
                             Kind(OutputKind::kMargin), MakeMatrixView(out.data(), 64, 1), &info)
                  .ok());
  EXPECT_EQ(info.strategy, "direct");
  EXPECT_EQ(info.device.rfind("cuda:", 0), 0u);
  EXPECT_LE(MaxRelativeError(out, ReferencePrediction(*f, rows, Kind(OutputKind::kMargin))), kTolerance);
}

// Shape trials (shape_trials.h): while the first batches of a size alternate between row chunk's
// two near-equal shapes every result matches the reference; once decided, one shape runs and the
// results are identical run to run.
TEST(TahoeGpuTest, ShapeTrialsMatchTheReferenceAndSettle) {
  SKIP_WITHOUT_GPU();
  RandomForestOptions o;
  o.num_trees = 300;
  o.max_depth = 8;
  o.num_features = 64;
  ForestPtr f = MakeRandomForest(o);
  std::unique_ptr<TahoeEngine> e = MakeEngine(f, {});
  ASSERT_NE(e, nullptr);
  const PredictOptions opt = Kind(OutputKind::kMargin);
  int trials = 0;
  for (int64_t n : {2000, 6000, 20000}) {
    const std::vector<float> rows = MakeRandomRows(*f, n, 7, 0.1);
    const std::vector<float> want = ReferencePrediction(*f, rows, opt);
    absl::StatusOr<StrategyChoice> plan = e->Plan(n, opt, false, "");
    ASSERT_TRUE(plan.ok()) << plan.status();
    const bool trial = plan->strategy == StrategyId::kRowChunk &&
                       plan->costs[static_cast<int>(StrategyId::kRowChunk)].runner_up_groups != 0;
    trials += trial;
    std::vector<std::vector<float>> runs;
    for (int run = 0; run < 2 * ShapeTrials::kDefaultRuns + 2; ++run) {
      std::vector<float> out(n);
      RunInfo info;
      ASSERT_TRUE(e->Predict(MakeRowsView(rows.data(), n, o.num_features), opt,
                             MakeMatrixView(out.data(), n, 1), &info)
                      .ok());
      EXPECT_LE(MaxRelativeError(out, want), kTolerance) << n << " rows, run " << run;
      if (trial && run < 2) {
        EXPECT_NE(info.reason.find("shape trial"), std::string::npos) << info.reason;
      }
      runs.push_back(std::move(out));
    }
    EXPECT_EQ(runs[runs.size() - 1], runs[runs.size() - 2]) << n << " rows";
    std::printf("%lld rows: trial %d; %s\n", static_cast<long long>(n), trial ? 1 : 0,
                plan->reason.c_str());
  }
  if (trials > 0) EXPECT_NE(e->Describe().find("shape trials: "), std::string::npos);
  std::printf("%s\n", e->Describe().c_str());
}

// PredictEngineOptions::gpu_wait: a server's engine polls briefly before its host-row calls
// sleep, an in-process caller's up to a millisecond; both answer the reference, from one chunk to
// several.
TEST(TahoeGpuTest, HostRowCallsWaitAsTheOptionsSayWithTheSameResults) {
  SKIP_WITHOUT_GPU();
  ForestPtr f = MakeRandomForest({.num_trees = 60, .max_depth = 7, .num_features = 16});
  const PredictOptions opt = Kind(OutputKind::kMargin);
  for (GpuWait wait : {GpuWait::kShareCore, GpuWait::kPoll}) {
    TahoeEngineOptions eo;
    eo.engine.gpu_wait = wait;
    eo.max_chunk_rows = 4096;  // several chunks at the larger call
    std::unique_ptr<TahoeEngine> e = MakeEngine(f, eo);
    ASSERT_NE(e, nullptr);
    const std::string spin = wait == GpuWait::kPoll ? "1ms" : "50us";
    EXPECT_NE(e->Describe().find("host-row calls poll " + spin + " before they sleep"),
              std::string::npos)
        << e->Describe();
    for (int64_t n : {1000, 20000}) {
      const std::vector<float> rows = MakeRandomRows(*f, n, 11, 0.1);
      std::vector<float> out(n);
      RunInfo info;
      ASSERT_TRUE(e->Predict(MakeRowsView(rows.data(), n, f->num_features), opt,
                             MakeMatrixView(out.data(), n, 1), &info)
                      .ok());
      EXPECT_LE(MaxRelativeError(out, ReferencePrediction(*f, rows, opt)), kTolerance)
          << n << " rows, " << info.strategy << ", poll " << spin;
    }
  }
}

TEST(TahoeGpuTest, CalibrationIsCachedAndSane) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<GpuHardwareParams> a = LoadOrCalibrateGpu(CacheDir(), 0);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->Valid());
  absl::StatusOr<GpuHardwareParams> b = LoadOrCalibrateGpu(CacheDir(), 0);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->Serialize(), b->Serialize());
  std::printf("%s", a->Serialize().c_str());
}

TEST(TahoeGpuTest, BadInputsAreErrorsNotCrashes) {
  SKIP_WITHOUT_GPU();
  RandomForestOptions o;
  ForestPtr f = MakeRandomForest(o);
  std::unique_ptr<TahoeEngine> e = MakeEngine(f, {});
  ASSERT_NE(e, nullptr);
  std::vector<float> rows(10 * (o.num_features + 1));
  std::vector<float> out(10);
  EXPECT_FALSE(e->Predict(MakeRowsView(rows.data(), 10, o.num_features + 1),
                          Kind(OutputKind::kMargin), MakeMatrixView(out.data(), 10, 1), nullptr)
                   .ok());
  EXPECT_FALSE(e->PredictHost(MakeRowsView(rows.data(), 10, o.num_features),
                              Kind(OutputKind::kMargin), MakeMatrixView(out.data(), 10, 1),
                              "no_such_strategy", nullptr)
                   .ok());
  // Zero rows is fine.
  EXPECT_TRUE(e->Predict(MakeRowsView(rows.data(), 0, o.num_features), Kind(OutputKind::kMargin),
                         MakeMatrixView(out.data(), 0, 1), nullptr)
                  .ok());
}

}  // namespace
}  // namespace grove
