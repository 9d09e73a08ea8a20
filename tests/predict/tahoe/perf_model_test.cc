// Performance model and selector arithmetic with fake calibration numbers (no GPU needed): the
// §6.1 equations' terms, the extensions (fill, latency, copies, CPU), the choice, overrides and the
// calibration cache format.
#include "core/predict/tahoe/perf_model.h"

#include <array>
#include <string>

#include "gtest/gtest.h"

namespace grove {
namespace {

// Round numbers of the order of an H100's.
GpuHardwareParams FakeHw() {
  GpuHardwareParams p;
  p.device_name = "Fake GPU";
  p.driver = "13000";
  p.sm_count = 100;
  p.max_threads_per_sm = 2048;
  p.smem_per_block = 200000;
  p.smem_per_sm = 220000;
  p.smem_read_bw = 20e12;
  p.smem_write_bw = 20e12;
  p.gmem_coalesced_bw = 3e12;
  p.gmem_uncoalesced_bw = 1e12;
  p.block_reduce_rate = 1e-13;
  p.global_reduce_rate = 1e-11;
  p.launch_seconds = 5e-6;
  p.smem_latency = 20e-9;
  p.gmem_latency = 300e-9;
  p.h2d_bw = 20e9;
  p.d2h_bw = 20e9;
  p.copy_latency = 10e-6;
  p.host_copy_bw = 10e9;
  return p;
}

TahoeWorkload Medium(int64_t rows) {
  TahoeWorkload w;
  w.rows = rows;
  w.visits_per_row = 800;
  w.num_trees = 100;
  w.features = 8;
  w.outputs = 1;
  w.out_width = 1;
  w.node_bytes = 8;
  w.forest_smem_bytes = 370000;  // does not fit
  w.shared_forest_fits = false;
  w.num_parts = 2;
  w.part_smem_bytes = 190000;
  w.max_shared_data_groups = 32;
  w.chunk_rows = 1 << 18;
  w.cpu_seconds_per_visit = 2e-9;
  w.cpu_threads = 2;
  w.cpu_parallelism = 2;
  return w;
}

const StrategyCost& Cost(const std::vector<StrategyCost>& costs, const std::string& name) {
  for (const StrategyCost& c : costs) {
    if (c.name() == name) return c;
  }
  ADD_FAILURE() << "no " << name;
  return costs.front();
}

TEST(PerfModelTest, SerializeParseRoundTrip) {
  const GpuHardwareParams p = FakeHw();
  ASSERT_TRUE(p.Valid());
  absl::StatusOr<GpuHardwareParams> q = GpuHardwareParams::Parse(p.Serialize());
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->Serialize(), p.Serialize());
  EXPECT_EQ(q->device_name, "Fake GPU");
  EXPECT_FALSE(GpuHardwareParams::Parse("sm_count=abc\n").ok());
  EXPECT_FALSE(GpuHardwareParams::Parse("device_name=x\n").ok());  // incomplete
  // Unknown keys (a newer writer) are ignored.
  EXPECT_TRUE(GpuHardwareParams::Parse(p.Serialize() + "future_key=1\n").ok());
  // A damaged cache cannot size launches absurdly.
  EXPECT_FALSE(GpuHardwareParams::Parse(p.Serialize() + "smem_per_block=1000000000\n").ok());
  EXPECT_FALSE(GpuHardwareParams::Parse(p.Serialize() + "sm_count=100000\n").ok());
  EXPECT_FALSE(GpuHardwareParams::Parse(p.Serialize() + "gmem_latency=inf\n").ok());
}

TEST(PerfModelTest, EquationTermsAtLargeBatches) {
  const GpuHardwareParams hw = FakeHw();
  TahoeWorkload w = Medium(1000000);
  w.rows_on_device = true;
  w.cpu_allowed = false;
  const std::vector<StrategyCost> c = EstimateStrategies(hw, w);
  ASSERT_EQ(c.size(), static_cast<size_t>(kNumStrategies));
  EXPECT_FALSE(Cost(c, "cpu").feasible);
  EXPECT_FALSE(Cost(c, "shared_forest").feasible);
  EXPECT_TRUE(Cost(c, "splitting_shared_forest").feasible);
  // Equation (5) at full occupancy: N * (V*Sn/(BWcoa/2) + V*Sa/BWuncoa) + launches.
  const double direct = 1e6 * (800.0 * 8 / 1.5e12 + 800.0 * 4 / 1e12);
  const int chunks = 4;  // 1e6 rows in chunks of 2^18
  EXPECT_NEAR(Cost(c, "direct").kernel_seconds, direct + chunks * hw.launch_seconds, 1e-9);
  EXPECT_EQ(Cost(c, "direct").copy_seconds, 0);
  // Equation (7) dominated by the shared-memory walk: cheaper than direct here.
  EXPECT_LT(Cost(c, "splitting_shared_forest").seconds, Cost(c, "direct").seconds);
  absl::StatusOr<StrategyChoice> choice = ChooseStrategy(hw, w);
  ASSERT_TRUE(choice.ok());
  EXPECT_NE(choice->strategy, StrategyId::kCpu);
  EXPECT_NE(choice->reason.find("selector: "), std::string::npos);
}

TEST(PerfModelTest, TimesGrowWithTheBatch) {
  const GpuHardwareParams hw = FakeHw();
  double last[kNumStrategies] = {};
  for (int64_t n : {1, 100, 1000, 10000, 100000, 1000000}) {
    const std::vector<StrategyCost> c = EstimateStrategies(hw, Medium(n));
    for (int i = 0; i < kNumStrategies; ++i) {
      if (!c[i].feasible) continue;
      EXPECT_GE(c[i].seconds, last[i] * 0.999) << c[i].name() << " at " << n;
      last[i] = c[i].seconds;
    }
  }
}

TEST(PerfModelTest, SmallBatchesAreLatencyBoundAndLikeManyGroups) {
  const GpuHardwareParams hw = FakeHw();
  TahoeWorkload w = Medium(100);
  w.rows_on_device = true;
  // 100 rows fill a tiny part of the GPU: spreading the trees over more groups shortens each lane's
  // chain, so the best shared-data grouping is > 1.
  EXPECT_GT(BestSharedDataGroups(hw, w), 1);
  w.rows = 10000000;
  EXPECT_LE(BestSharedDataGroups(hw, w), 2);
  // Direct at 100 rows is bounded by the dependent loads of one thread: V * 2 * latency.
  w.rows = 100;
  const std::vector<StrategyCost> c = EstimateStrategies(hw, w);
  EXPECT_GE(Cost(c, "direct").kernel_seconds, 800 * 2 * hw.gmem_latency);
}

TEST(PerfModelTest, CopiesAndCpuDecideTinyHostBatches) {
  GpuHardwareParams hw = FakeHw();
  TahoeWorkload w = Medium(1);
  w.visits_per_row = 30;  // a tiny model
  w.cpu_seconds_per_visit = 2e-9;
  absl::StatusOr<StrategyChoice> c = ChooseStrategy(hw, w);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->strategy, StrategyId::kCpu) << c->reason;
  // Copies are part of every GPU strategy's time on the host path.
  for (const StrategyCost& s : c->costs) {
    if (s.id != StrategyId::kCpu && s.feasible) EXPECT_GT(s.copy_seconds, 2 * hw.copy_latency * 0.99);
  }
  // A large batch of a large model goes to the GPU.
  w = Medium(1000000);
  c = ChooseStrategy(hw, w);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->strategy, StrategyId::kCpu) << c->reason;
  // Pipelined chunks: the host-path total is below copies + kernels.
  for (const StrategyCost& s : c->costs) {
    if (s.id != StrategyId::kCpu && s.feasible) {
      EXPECT_LT(s.seconds, s.copy_seconds + s.kernel_seconds);
      EXPECT_GE(s.seconds, std::max(s.copy_seconds, s.kernel_seconds));
    }
  }
}

// Host rows: the staging through pinned memory runs on the pool, overlapped with the transfers, so
// a wide batch costs about its PCIe time; charged at one thread's memcpy rate in series, it made the
// CPU look faster than the GPU on 1M wide rows of a small forest (measured: the GPU 3.5x faster).
TEST(PerfModelTest, WideHostBatchesCostTheirTransfersWithParallelStaging) {
  const GpuHardwareParams hw = FakeHw();
  TahoeWorkload w = Medium(1000000);
  w.features = 784;
  w.out_width = 10;
  w.visits_per_row = 400;
  w.cpu_threads = 16;
  w.cpu_parallelism = 12;
  const std::vector<StrategyCost> costs = EstimateStrategies(hw, w);
  const StrategyCost& gpu = Cost(costs, "direct");
  // 3.14 GB in and 40 MB out at 20 GB/s: 159 ms; staging at 16 x 10 GB/s (20 ms) is hidden.
  EXPECT_NEAR(gpu.copy_seconds, 2 * 10e-6 + (784.0 * 4 + 10 * 4) * 1e6 / 20e9, 1e-6);
  // With a pool of one thread the staging (318 ms at 10 GB/s) is what the copies cost.
  w.cpu_threads = 1;
  const StrategyCost one = Cost(EstimateStrategies(hw, w), "direct");
  EXPECT_NEAR(one.copy_seconds, 2 * 10e-6 + (784.0 * 4 + 10 * 4) * 1e6 / 10e9, 1e-6);
}

// The CPU path's cost follows ThreadPool::ParallelFor: one chunk runs inline (no pool overhead),
// more chunks pay the measured wake-up and spread over min(chunks, measured parallelism) threads.
TEST(PerfModelTest, CpuCostFollowsThePoolsChunks) {
  const GpuHardwareParams hw = FakeHw();
  TahoeWorkload w = Medium(40);
  w.cpu_grain = 32;
  w.cpu_threads = 16;
  w.cpu_parallelism = 6;
  w.cpu_fixed_seconds = 50e-6;
  w.cpu_seconds_per_visit = 1e-9;
  auto cpu = [&](int64_t rows) {
    w.rows = rows;
    return Cost(EstimateStrategies(hw, w), "cpu");
  };
  EXPECT_LT(cpu(40).fixed_seconds, 2e-6);  // one chunk: inline
  EXPECT_NEAR(cpu(40).throughput_seconds, 40 * 800 * 1e-9, 1e-12);
  EXPECT_DOUBLE_EQ(cpu(64).fixed_seconds, 50e-6);  // two chunks: the pool
  EXPECT_NEAR(cpu(64).throughput_seconds, 64 * 800 * 1e-9 / 2, 1e-12);
  EXPECT_NEAR(cpu(100000).throughput_seconds, 100000 * 800 * 1e-9 / 6, 1e-9);
}

TEST(PerfModelTest, SharedForestWinsWhenTheForestFits) {
  const GpuHardwareParams hw = FakeHw();
  TahoeWorkload w = Medium(1000000);
  w.rows_on_device = true;
  w.forest_smem_bytes = 60000;
  w.shared_forest_fits = true;
  w.num_parts = 1;
  w.part_smem_bytes = 60000;
  w.forest_blocks_per_sm = 2;
  w.part_blocks_per_sm = 2;
  absl::StatusOr<StrategyChoice> c = ChooseStrategy(hw, w);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->strategy, StrategyId::kSharedForest) << c->reason;
  // With one part, splitting adds nothing: it is never predicted faster than shared forest.
  EXPECT_GE(Cost(c->costs, "splitting_shared_forest").seconds,
            Cost(c->costs, "shared_forest").seconds);
}

TEST(PerfModelTest, MorePartsCostMoreReduction) {
  const GpuHardwareParams hw = FakeHw();
  TahoeWorkload w = Medium(1000000);
  w.rows_on_device = true;
  const double two = Cost(EstimateStrategies(hw, w), "splitting_shared_forest").seconds;
  w.num_parts = 40;
  const double forty = Cost(EstimateStrategies(hw, w), "splitting_shared_forest").seconds;
  EXPECT_GT(forty, two);
}

TEST(PerfModelTest, OverridesAndErrors) {
  const GpuHardwareParams hw = FakeHw();
  TahoeWorkload w = Medium(1000);
  absl::StatusOr<StrategyChoice> c = ChooseStrategy(hw, w, "direct");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->strategy, StrategyId::kDirect);
  EXPECT_EQ(c->reason.rfind("override", 0), 0u) << c->reason;
  EXPECT_TRUE(ChooseStrategy(hw, w, "auto").ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ChooseStrategy(hw, w, "fastest").status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(ChooseStrategy(hw, w, "shared_forest").status()));
  w.max_shared_data_groups = 0;
  EXPECT_TRUE(absl::IsFailedPrecondition(ChooseStrategy(hw, w, "shared_data").status()));
  w.cpu_allowed = false;
  EXPECT_TRUE(absl::IsFailedPrecondition(ChooseStrategy(hw, w, "cpu").status()));
  EXPECT_TRUE(IsKnownStrategy("splitting_shared_forest"));
  EXPECT_FALSE(IsKnownStrategy("auto"));
  EXPECT_FALSE(ParseStrategy("")->has_value());
  EXPECT_FALSE(ParseStrategy("auto")->has_value());
  EXPECT_EQ(ParseStrategy("row_chunk")->value(), StrategyId::kRowChunk);
  const absl::Status bad = ParseStrategy("fastest").status();
  EXPECT_TRUE(absl::IsInvalidArgument(bad));
  EXPECT_NE(bad.message().find("'fastest' (auto, cpu, direct,"), std::string::npos) << bad;
}

TEST(PerfModelTest, MultipleGpusSplitTheRows) {
  const GpuHardwareParams hw = FakeHw();
  TahoeWorkload w = Medium(4000000);
  const double one = Cost(EstimateStrategies(hw, w), "direct").seconds;
  w.num_gpus = 4;
  const double four = Cost(EstimateStrategies(hw, w), "direct").seconds;
  EXPECT_LT(four, one / 3);
}

// Row chunk: feasible when one row fits shared memory; the chunk shrinks for batches that would
// not give every SM four blocks and is the probed best otherwise; two rows per thread only where the
// batch fills the GPU at the probed chunk.
TEST(PerfModelTest, RowChunkFollowsTheProbeAndFillsTheGpu) {
  const GpuHardwareParams hw = FakeHw();
  TahoeWorkload w = Medium(100);
  EXPECT_FALSE(Cost(EstimateStrategies(hw, w), "row_chunk").feasible);
  w.max_row_chunk = 32;
  w.best_row_chunk = 8;
  w.row_chunk_acc_bytes = 2048;
  w.row_chunk_row_bytes = 40;
  EXPECT_EQ(RowChunkFor(hw, w, 100), 1);
  EXPECT_EQ(RowChunkFor(hw, w, 1600), 4);  // 1600 rows / (4 x 100 SMs)
  EXPECT_EQ(RowChunkFor(hw, w, 1e6), 8);
  w.best_row_chunk = 0;  // not probed: at most 8
  EXPECT_EQ(RowChunkFor(hw, w, 1e6), 8);
  w.best_row_chunk = 16;
  w.row_chunk_per_thread = 2;
  w.rows = 1000;
  const StrategyCost small = Cost(EstimateStrategies(hw, w), "row_chunk");
  EXPECT_TRUE(small.feasible);
  EXPECT_EQ(small.groups & kRowChunkPaired, 0);
  w.rows = 1000000;
  const StrategyCost large = Cost(EstimateStrategies(hw, w), "row_chunk");
  EXPECT_EQ(large.groups, 16 | kRowChunkPaired);
  EXPECT_GT(large.seconds, small.seconds);
  EXPECT_EQ(StrategyName(StrategyId::kRowChunk), std::string("row_chunk"));
  EXPECT_EQ(StrategyIndex("row_chunk"), static_cast<int>(StrategyId::kRowChunk));
  EXPECT_EQ(StrategyIndex("nope"), -1);
}

// A row-chunk shape survives its code; bigger blocks let small batches take bigger chunks, and the
// block shrinks where it would have more than 256 tree groups.
TEST(PerfModelTest, RowChunkShapesRoundTripAndScaleWithTheBlock) {
  for (int threads : {256, 512, 1024}) {
    for (int chunk = 1; chunk <= threads; chunk *= 2) {
      for (int per_thread = 1; per_thread <= 4; per_thread *= 2) {
        for (int parts = 1; parts <= kRowChunkMaxParts; parts *= 2) {
          RowChunkShape s;
          s.chunk = chunk;
          s.threads = threads;
          s.per_thread = per_thread;
          s.parts = parts;
          const RowChunkShape t = RowChunkShape::FromCode(s.Code());
          EXPECT_EQ(t.chunk, chunk);
          EXPECT_EQ(t.threads, threads);
          EXPECT_EQ(t.per_thread, per_thread);
          EXPECT_EQ(t.parts, parts);
          EXPECT_EQ(RowChunkShape::FromLabel(s.Label()).Code(), s.Code()) << s.Label();
        }
      }
    }
  }
  const GpuHardwareParams hw = FakeHw();
  TahoeWorkload w = Medium(100);
  w.max_row_chunk = 32;
  w.best_row_chunk = 16;
  w.row_chunk_acc_bytes = 2048;
  w.row_chunk_row_bytes = 40;
  EXPECT_EQ(RowChunkFor(hw, w, 1600), 4);
  EXPECT_EQ(RowChunkFor(hw, w, 1600, 1024), 16);  // 1600 rows x 4 / (4 x 100 SMs)
  w.row_chunk_threads = 1024;
  w.best_row_chunk = 128;  // beyond max_row_chunk (256-thread blocks): the probe found it fits
  const RowChunkShape big = RowChunkShapeFor(hw, w, 1e6);
  EXPECT_EQ(big.chunk, 128);
  EXPECT_EQ(big.threads, 1024);
  EXPECT_EQ(big.per_thread, 1);
  const RowChunkShape tiny = RowChunkShapeFor(hw, w, 100);
  EXPECT_EQ(tiny.chunk, 1);
  EXPECT_EQ(tiny.threads, 256);  // 256 tree groups at most
  w.rows = 1000000;
  EXPECT_EQ(Cost(EstimateStrategies(hw, w), "row_chunk").groups, big.Code());
}

// A timed row-chunk shape of `chunk` rows a group, two rows per thread (measured points in us).
RowChunkTiming Timed(int chunk, int blocks_per_sm, std::array<int, RowChunkTiming::kPoints> per_sm,
                     std::array<double, RowChunkTiming::kPoints> us, double block_us) {
  RowChunkTiming t;
  t.shape.chunk = chunk;
  t.shape.per_thread = 2;
  t.blocks_per_sm = blocks_per_sm;
  for (int i = 0; i < RowChunkTiming::kPoints; ++i) {
    t.per_sm[i] = per_sm[i];
    t.seconds[i] = us[i] * 1e-6;
  }
  t.block_seconds = block_us * 1e-6;
  return t;
}

// A 10,000-row workload on the device whose row-chunk shapes are timings[0] (the probe's
// large-batch choice: 32 rows a block, 2 a thread) and timings[1].
TahoeWorkload TwoShapeWorkload(const RowChunkTiming (&timings)[2]) {
  TahoeWorkload w = Medium(10000);
  w.max_row_chunk = 32;
  w.best_row_chunk = 32;
  w.row_chunk_per_thread = 2;
  w.row_chunk_acc_bytes = 2048;
  w.row_chunk_row_bytes = 40;
  w.row_chunk_timings = timings;
  w.num_row_chunk_timings = 2;
  w.row_chunk_large_rows = 262144;
  w.rows_on_device = true;
  return w;
}

// Timed row-chunk shapes, hand-computed on 100 SMs: up to a wave the measured points interpolated,
// beyond it whole waves plus the partial wave as measured; below half the probe's large batch the
// least predicted shape runs (its time is the row-chunk cost), at and above the probe's own choice.
TEST(PerfModelTest, RowChunkWavesPickTheShapeThatFillsTheLastWave) {
  // 64 rows a block, 2 blocks per SM (12,800 rows a wave); 16 rows a block, 8 blocks per SM.
  const RowChunkTiming wide = Timed(32, 2, {1, 1, 2, 4}, {60, 60, 100, 200}, 45);
  RowChunkTiming narrow = Timed(8, 8, {1, 4, 8, 16}, {50, 80, 120, 240}, 12);
  // 6,400 rows: one block on every SM; 12,801: a wave and one more block on the busiest SM, which
  // costs a whole (one-block) wave.
  EXPECT_NEAR(RowChunkWaveSeconds(wide, 100, 6400), 60e-6, 1e-12);
  EXPECT_NEAR(RowChunkWaveSeconds(wide, 100, 12800), 100e-6, 1e-12);
  EXPECT_NEAR(RowChunkWaveSeconds(wide, 100, 12801), 160e-6, 1e-12);
  // 128,000 rows: 20 blocks per SM, ten waves of 100 us.
  EXPECT_NEAR(RowChunkWaveSeconds(wide, 100, 128000), 1000e-6, 1e-12);
  // 10,000 rows: 625 narrow blocks, 7 on the busiest SM: between 4 (80 us) and 8 (120 us).
  EXPECT_NEAR(RowChunkWaveSeconds(narrow, 100, 10000), 110e-6, 1e-12);
  EXPECT_NEAR(RowChunkWaveSeconds(wide, 100, 10000), 100e-6, 1e-12);  // 157 blocks: 2 on some SM
  // 20,000 rows: 13 narrow blocks per SM, a wave (120 us) and 5 more (90 us).
  EXPECT_NEAR(RowChunkWaveSeconds(narrow, 100, 20000), 210e-6, 1e-12);
  // A two-wave point clamped by the probe's batch: a wave at the large batch's rate (8 x 12 us),
  // the rest of the one-wave point (24 us) fixed.
  narrow.per_sm[3] = 12;
  EXPECT_NEAR(RowChunkWaveSeconds(narrow, 100, 20000), 24e-6 + 96e-6 + (90e-6 - 24e-6), 1e-12);
  narrow.per_sm[3] = 16;
  // A two-wave point that came out short (125 us: 5 us for the second wave) is not believed below
  // the large batch's rate either.
  narrow.seconds[3] = 125e-6;
  EXPECT_NEAR(RowChunkWaveSeconds(narrow, 100, 20000), 24e-6 + 96e-6 + (90e-6 - 24e-6), 1e-12);
  narrow.seconds[3] = 240e-6;

  // Tree parts multiply the blocks: wide in 4 parts is 4 x 157 blocks at 10,000 rows, 7 on the
  // busiest SM (its timed points are in blocks per SM, like any shape's).
  RowChunkTiming quarters = wide;
  quarters.shape.parts = 4;
  quarters.blocks_per_sm = 8;
  quarters.per_sm[1] = 4, quarters.per_sm[2] = 8, quarters.per_sm[3] = 16;
  quarters.seconds[1] = 20e-6, quarters.seconds[2] = 30e-6, quarters.seconds[3] = 60e-6;
  EXPECT_NEAR(RowChunkWaveSeconds(quarters, 100, 10000), 20e-6 + 3.0 / 4 * 10e-6, 1e-12);
  EXPECT_EQ(quarters.shape.Label(), "32x2/4");

  const GpuHardwareParams hw = FakeHw();  // 100 SMs
  const RowChunkTiming timings[] = {wide, narrow};
  TahoeWorkload w = TwoShapeWorkload(timings);
  EXPECT_EQ(RowChunkShapeFor(hw, w, 10000).chunk, 32);  // 100 us against 110 us
  // Within kShapeTrialMargin the engine times both on real batches (shape_trials.h): narrow's
  // 110 us is 10% behind; at 6,500 rows wide's 100 us is 11% behind narrow's 90 us; never at or
  // above half the large batch, where the probe's own choice runs.
  ASSERT_NE(RowChunkRunnerUp(hw, w, 10000), nullptr);
  EXPECT_EQ(RowChunkRunnerUp(hw, w, 10000)->shape.Code(), narrow.shape.Code());
  EXPECT_EQ(RowChunkRunnerUp(hw, w, 6500), nullptr);
  EXPECT_EQ(RowChunkRunnerUp(hw, w, 200000), nullptr);
  EXPECT_EQ(Cost(EstimateStrategies(hw, w), "row_chunk").runner_up_groups, narrow.shape.Code());
  // 6,500 rows: wide's 102 blocks put 2 on some SM (100 us); narrow's 407 put 5 (80 + 10 us).
  EXPECT_EQ(RowChunkShapeFor(hw, w, 6500).chunk, 8);
  w.rows = 6500;
  const StrategyCost c = Cost(EstimateStrategies(hw, w), "row_chunk");
  EXPECT_EQ(c.groups, narrow.shape.Code());
  EXPECT_NEAR(c.kernel_seconds, 90e-6, 1e-12);
  EXPECT_EQ(c.runner_up_groups, 0);
  EXPECT_EQ(RowChunkShapeFor(hw, w, 200000).chunk, 32);  // the probe's choice
  w.best_row_chunk = 8;
  EXPECT_EQ(RowChunkShapeFor(hw, w, 200000).chunk, 8);
}

// Row-chunk shapes timed on launches of real batch sizes (RowChunkLaunchTiming): within half an
// octave of a probed size the shape timed there with the least measured seconds, each scaled by its
// own wave model from the probed rows to the launch's, runs at that time, and the second is the
// shape trial's runner-up only within kProbedShapeTrialMargin; farther away the wave model decides, and
// at and above half the large batch the probe's large-batch choice. The shapes and hand-computed
// wave times of the test above.
TEST(PerfModelTest, RowChunkLaunchTimingsDecideNearTheirSize) {
  const RowChunkTiming wide = Timed(32, 2, {1, 1, 2, 4}, {60, 60, 100, 200}, 45);
  const RowChunkTiming narrow = Timed(8, 8, {1, 4, 8, 16}, {50, 80, 120, 240}, 12);
  const int kWide = wide.shape.Code(), kNarrow = narrow.shape.Code();
  const GpuHardwareParams hw = FakeHw();  // 100 SMs
  // The wave model: at 8,192 rows wide 100 us (2 blocks on some SM), narrow 100 us (6 blocks per
  // SM: 80 + 2/4 x 40); at 10,000 wide 100, narrow 110 (7 blocks); at 11,500 wide 100, narrow 120
  // (8 blocks); at 20,000 wide 200, narrow 210.
  ASSERT_NEAR(RowChunkWaveSeconds(narrow, 100, 8192), 100e-6, 1e-12);
  ASSERT_NEAR(RowChunkWaveSeconds(wide, 100, 8192), 100e-6, 1e-12);
  ASSERT_NEAR(RowChunkWaveSeconds(narrow, 100, 11500), 120e-6, 1e-12);
  ASSERT_NEAR(RowChunkWaveSeconds(wide, 100, 11500), 100e-6, 1e-12);
  ASSERT_NEAR(RowChunkWaveSeconds(wide, 100, 20000), 200e-6, 1e-12);
  ASSERT_NEAR(RowChunkWaveSeconds(narrow, 100, 20000), 210e-6, 1e-12);
  const RowChunkTiming timings[] = {wide, narrow};
  TahoeWorkload w = TwoShapeWorkload(timings);
  // Timed at 8,192 rows: narrow 60 us, wide 70 us.
  RowChunkLaunchTiming probed[] = {{8192, kNarrow, 60e-6}, {8192, kWide, 70e-6}};
  w.row_chunk_launches = probed;
  w.num_row_chunk_launches = 2;

  // (a) Near the probed size narrow runs, though the wave model ranks wide first at 10,000 rows
  // (100 us against 110): 60 us x 110 / 100 against 70 us x 100 / 100.
  EXPECT_EQ(RowChunkShapeFor(hw, w, 10000).Code(), kNarrow);
  EXPECT_EQ(RowChunkTimingFor(hw, w, 10000), &timings[1]);
  EXPECT_NEAR(RowChunkSeconds(hw, w, narrow, 10000), 66e-6, 1e-12);
  EXPECT_NEAR(RowChunkSeconds(hw, w, wide, 10000), 70e-6, 1e-12);
  StrategyCost c = Cost(EstimateStrategies(hw, w), "row_chunk");
  EXPECT_EQ(c.groups, kNarrow);
  EXPECT_NEAR(c.kernel_seconds, 66e-6, 1e-12);
  EXPECT_EQ(RowChunkShapeFor(hw, w, 8192).Code(), kNarrow);  // the wave model: a tie
  // ... and where narrow's wave model steps up and wide's does not, wide: at 11,500 rows (2^0.49
  // x 8,192) 60 us x 120 / 100 = 72 us against 70.
  EXPECT_EQ(RowChunkShapeFor(hw, w, 11500).Code(), kWide);
  EXPECT_NEAR(RowChunkSeconds(hw, w, narrow, 11500), 72e-6, 1e-12);

  // (b) Farther than half an octave the wave model's times and pick stand: at 12,035 rows (2^0.55
  // x 8,192) wide's 100 us, not 70; at 20,000 wide (200 us against 210), where the scaled timings
  // would have had narrow (60 x 2.1 = 126 us against 70 x 2 = 140).
  EXPECT_NEAR(RowChunkSeconds(hw, w, wide, 12035), 100e-6, 1e-12);
  EXPECT_EQ(RowChunkShapeFor(hw, w, 20000).Code(), kWide);
  EXPECT_NEAR(RowChunkSeconds(hw, w, narrow, 20000), 210e-6, 1e-12);
  w.rows = 20000;
  c = Cost(EstimateStrategies(hw, w), "row_chunk");
  EXPECT_EQ(c.groups, kWide);
  EXPECT_NEAR(c.kernel_seconds, 200e-6, 1e-12);
  w.rows = 10000;

  // (c) The runner-up: the second within kProbedShapeTrialMargin at the launch's rows (70 us,
  // then 80 us, against 66 x 1.25)...
  ASSERT_NE(RowChunkRunnerUp(hw, w, 10000), nullptr);
  EXPECT_EQ(RowChunkRunnerUp(hw, w, 10000)->shape.Code(), kWide);
  EXPECT_EQ(Cost(EstimateStrategies(hw, w), "row_chunk").runner_up_groups, kWide);
  probed[1].seconds = 80e-6;
  EXPECT_EQ(RowChunkRunnerUp(hw, w, 10000), &timings[0]);
  // ... none beyond it (85 us), though the wave model has the two within 10% at 10,000 rows ...
  probed[1].seconds = 85e-6;
  EXPECT_EQ(RowChunkRunnerUp(hw, w, 10000), nullptr);
  EXPECT_EQ(Cost(EstimateStrategies(hw, w), "row_chunk").runner_up_groups, 0);
  // ... nor when only one shape was timed.
  w.num_row_chunk_launches = 1;
  EXPECT_EQ(RowChunkRunnerUp(hw, w, 10000), nullptr);
  EXPECT_EQ(RowChunkShapeFor(hw, w, 10000).Code(), kNarrow);
  w.num_row_chunk_launches = 2;
  probed[1].seconds = 70e-6;
  // A shape the workload has no timing of is passed over; with no other, the wave model decides.
  RowChunkLaunchTiming untimed[] = {{8192, RowChunkShape::FromLabel("16@512/4").Code(), 10e-6},
                                    {8192, kNarrow, 60e-6}};
  w.row_chunk_launches = untimed;
  EXPECT_EQ(RowChunkShapeFor(hw, w, 10000).Code(), kNarrow);
  w.num_row_chunk_launches = 1;
  EXPECT_EQ(RowChunkShapeFor(hw, w, 10000).Code(), kWide);

  // The nearest of several sizes in log2(rows): 12,000 rows is 0.55 octaves above 8,192 and 0.45
  // below 16,384, where only wide was timed.
  RowChunkLaunchTiming two[] = {
      {8192, kNarrow, 60e-6}, {8192, kWide, 70e-6}, {16384, kWide, 150e-6}};
  w.row_chunk_launches = two;
  w.num_row_chunk_launches = 3;
  EXPECT_EQ(RowChunkShapeFor(hw, w, 10000).Code(), kNarrow);
  EXPECT_EQ(RowChunkShapeFor(hw, w, 12000).Code(), kWide);
  EXPECT_EQ(RowChunkRunnerUp(hw, w, 12000), nullptr);

  // (d) At and above half the large batch the probe's large-batch choice runs (wide), even half an
  // octave from a size timed just below it where narrow was fastest.
  RowChunkLaunchTiming below_half[] = {{131071, kNarrow, 500e-6}, {131071, kWide, 520e-6}};
  w.row_chunk_launches = below_half;
  w.num_row_chunk_launches = 2;
  EXPECT_EQ(RowChunkShapeFor(hw, w, 131071).Code(), kNarrow);
  EXPECT_EQ(RowChunkShapeFor(hw, w, 131072).Code(), kWide);
  EXPECT_EQ(RowChunkShapeFor(hw, w, 150000).Code(), kWide);
  EXPECT_EQ(RowChunkRunnerUp(hw, w, 150000), nullptr);
  EXPECT_NEAR(RowChunkSeconds(hw, w, wide, 150000), RowChunkWaveSeconds(wide, 100, 150000), 1e-12);
}

TEST(PerfModelTest, NoGpuMeansUnavailable) {
#if !defined(GROVE_HAVE_CUDA)
  EXPECT_TRUE(absl::IsUnavailable(LoadOrCalibrateGpu("", 0).status()));
#endif
  EXPECT_TRUE(absl::IsUnavailable(LoadOrCalibrateGpu("", 4096).status()));
}

}  // namespace
}  // namespace grove
