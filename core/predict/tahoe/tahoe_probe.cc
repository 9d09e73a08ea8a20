// The Tahoe GPU engine's calibration and load-time probes: the CPU reference's cost, every
// strategy's time at a small and a large batch (the performance model's corrections), the row-chunk
// shapes (at the large batch, in waves of blocks, and on launches of a few mid-size batches), and
// the winners between close strategies at a few batch sizes (tahoe_engine_impl.h).
// Compiled only with CUDA.
#if defined(GROVE_HAVE_CUDA)

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/log.h"
#include "core/gpu/cuda_status.h"
#include "core/model/typical_rows.h"
#include "core/predict/cpu/cpu_infer.h"
#include "core/predict/tahoe/tahoe_engine_impl.h"
#include "core/model/traverse.h"

namespace grove::tahoe_internal {

std::vector<float> CalibrationRows(const Forest& f, int rows) {
  // Rows that walk the trees as the training rows did (deep leaf-wise trees included), so that the
  // probes time what real batches cost.
  return TypicalRows(f, rows, /*seed=*/1);
}

TahoeCall TahoeEngineImpl::ProbeCall() const {
  TahoeCall call;
  call.kind = OutputKind::kMargin;
  call.width = forest_->num_outputs;
  call.row_params.it_begin = 0;
  call.row_params.it_end = forest_->num_iterations;
  call.transform = MakeTransformParams(*forest_, forest_->num_iterations);
  return call;
}

absl::StatusOr<double> TahoeEngineImpl::TimeProbe(Gpu& g, StrategyId s, int groups,
                                                  int64_t rows, int reps) const {
  const TahoeCall call = ProbeCall();
  double best = 1e30;
  for (int rep = 0; rep < reps; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    absl::Status st = RunDevice(g, s, groups, call, probe_in_, rows, forest_->num_features,
                                probe_out_, forest_->num_outputs);
    if (!st.ok()) return st;
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rep > 0) best = std::min(best, t);
  }
  return best;
}

void TahoeEngineImpl::CalibrateCpu() {
  const int rows = 128;
  const std::vector<float> x = CalibrationRows(*forest_, rows);
  PredictOptions o;
  o.kind = OutputKind::kMargin;
  std::vector<float> out(static_cast<size_t>(rows) * forest_->num_outputs);
  const RowsView view = MakeRowsView(x.data(), rows, forest_->num_features);
  const MatrixView<float> ov = MakeMatrixView(out.data(), rows, forest_->num_outputs);
  // The CPU strategy the selector will run, timed on one thread, then on the pool.
  const CpuPredictStrategy& cpu = cpu_strategy();
  std::string device;
  double best = 1e30;
  const auto begin = std::chrono::steady_clock::now();
  for (int rep = 0; rep < 20; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    if (!cpu.RunOnCallingThread(view, o, ov).ok()) return;
    const auto end = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(end - start).count());
    if (std::chrono::duration<double>(end - begin).count() > 0.05) break;
  }
  const double visits = std::max(1e-9, format_->stats().expected_visits_per_row);
  cpu_seconds_per_visit_ = best / (rows * visits);
  if (pool_ == nullptr) return;
  // Per-call overhead of the pool: two chunks (the fewest it hands out) after the workers have gone
  // idle, as a sporadic small request finds them; the median of 7, less the longer chunk's walk.
  const int64_t grain = cpu::kPredictGrain;
  auto timed = [&](const std::vector<float>& rows_in, int64_t n) {
    std::vector<float> res(static_cast<size_t>(n) * forest_->num_outputs);
    const auto start = std::chrono::steady_clock::now();
    const absl::Status st =
        cpu.Run(MakeRowsView(rows_in.data(), n, forest_->num_features), o, 1,
                MakeMatrixView(res.data(), n, forest_->num_outputs), &device);
    return st.ok() ? std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
                   : -1.0;
  };
  const std::vector<float> two = CalibrationRows(*forest_, static_cast<int>(2 * grain));
  std::vector<double> ts;
  for (int rep = 0; rep < 7; ++rep) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const double t = timed(two, 2 * grain);
    if (t < 0) return;
    ts.push_back(t);
  }
  std::nth_element(ts.begin(), ts.begin() + 3, ts.end());
  cpu_fixed_seconds_ = std::max(1e-6, ts[3] - grain * visits * cpu_seconds_per_visit_);
  // Speed-up on a batch that gives every worker its chunks (memory bandwidth and shared cores keep
  // it below the thread count).
  const int threads = std::max(1, pool_->num_threads());
  const int64_t big = grain * 4 * (threads + 1);
  const std::vector<float> many = CalibrationRows(*forest_, static_cast<int>(big));
  double tb = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const double t = timed(many, big);
    if (t < 0) return;
    tb = std::min(tb, t);
  }
  cpu_parallelism_ = std::clamp(big * visits * cpu_seconds_per_visit_ /
                                    std::max(1e-9, tb - cpu_fixed_seconds_),
                                1.0, static_cast<double>(threads));
}

// Row chunk: every valid shape that fits (chunk, threads per block, one or two rows per thread)
// timed once on the large batch, then the four fastest again; the fastest there becomes the shape
// of large batches (RowChunkShapeFor shrinks the chunk for small ones).
absl::Status TahoeEngineImpl::ProbeRowChunk(Gpu& g, int64_t large, std::string* report) {
  const TahoeCall call = ProbeCall();
  TahoeLaunchArgs a = Args(g, StrategyId::kRowChunk, 1, call);
  std::vector<std::pair<double, RowChunkShape>> timed;
  for (int threads = kRowChunkMinThreads; threads <= kRowChunkMaxThreads; threads *= 2) {
    for (int c = std::max(1, threads / 256); c <= threads; c *= 2) {
      for (int per_thread = 1; per_thread <= 4; per_thread *= 2) {
        RowChunkShape shape;
        shape.chunk = c;
        shape.threads = threads;
        shape.per_thread = per_thread;
        if (per_thread > 1 && !TahoeRowChunkPairable(g.df, call.kind, c, threads)) continue;
        a.groups = shape.Code();
        const RowChunkShape valid = RowChunkLaunchShape(g.df, a);
        if (valid.chunk != c || valid.threads != threads || valid.per_thread != per_thread ||
            TahoeSharedBytes(g.df, StrategyId::kRowChunk, shape.Code()) > hw_.smem_per_block) {
          continue;  // not this shape, or does not fit
        }
        absl::StatusOr<double> t = TimeProbe(g, StrategyId::kRowChunk, shape.Code(), large, 2);
        if (!t.ok()) return t.status();
        timed.emplace_back(*t, shape);
      }
    }
  }
  if (timed.empty()) return absl::OkStatus();
  std::sort(timed.begin(), timed.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  std::string firsts;
  for (const auto& [t, shape] : timed) {
    absl::StrAppend(&firsts, firsts.empty() ? "" : " ", shape.Label(), ":",
                    absl::StrFormat("%.1fus", t * 1e6));
  }
  double best_t = 1e30;
  std::vector<std::pair<double, RowChunkShape>> finals_timed;
  std::string finals;
  for (size_t i = 0; i < std::min<size_t>(4, timed.size()); ++i) {
    absl::StatusOr<double> t = TimeProbe(g, StrategyId::kRowChunk, timed[i].second.Code(), large);
    if (!t.ok()) return t.status();
    absl::StrAppend(&finals, finals.empty() ? "" : " ", timed[i].second.Label(), ":",
                    absl::StrFormat("%.1fus", *t * 1e6));
    finals_timed.emplace_back(*t, timed[i].second);
    best_t = std::min(best_t, *t);
  }
  // Within 3% of the fastest, the shape with the most threads per block: on real rows at 1M,
  // 256-thread one-row shapes ran up to 2x slower per row than on the probe's rows at 262,144
  // (prod-wide256: "16" 71M rows/s against 32@512's 147M; the probe had them 1% apart), while
  // 512- and 1,024-thread shapes held their probed rate (docs/benchmarks/archive.md, 2026-11-25).
  RowChunkShape best;
  double chosen_t = 1e30;
  for (const auto& [t, shape] : finals_timed) {
    if (t > 1.03 * best_t) continue;
    if (chosen_t == 1e30 || shape.threads > best.threads ||
        (shape.threads == best.threads && t < chosen_t)) {
      best = shape;
      chosen_t = t;
    }
  }
  best_row_chunk_ = best;
  absl::StrAppend(report, "row_chunk shapes at ", large, " rows: ", firsts, "; again: ", finals,
                  " (best ", best.Label(), "); ");
  // A copy of the nodes row chunk walks when `*on` (the records, else the level layout) stays
  // unless the best shape without it (the level layout or the depth-first nodes, as the engine
  // stands) is faster by more than the timings' noise; then every shape is timed again without
  // it (for the records, the level layout's test included).
  bool* on = nullptr;
  const char *with_label = "", *without_label = "";
  if (record_walk_ && options_.record_walk == TahoeEngineOptions::RecordWalk::kAuto) {
    on = &record_walk_, with_label = "record layout", without_label = "without";
  } else if (!record_walk_ && level_walk_ &&
             options_.level_walk == TahoeEngineOptions::LevelWalk::kAuto) {
    on = &level_walk_, with_label = "level layout", without_label = "depth-first";
  }
  if (on != nullptr) {
    *on = false;
    absl::StatusOr<double> without = TimeProbe(g, StrategyId::kRowChunk, best.Code(), large);
    *on = true;
    if (!without.ok()) return without.status();
    absl::StrAppend(report, absl::StrFormat("%s %.1fus, %s %.1fus; ", with_label, chosen_t * 1e6,
                                            without_label, *without * 1e6));
    if (*without < 0.97 * chosen_t) {
      *on = false;
      return ProbeRowChunk(g, large, report);
    }
  }
  for (const auto& [t, shape] : finals_timed) {
    for (auto& [first_t, first_shape] : timed) {
      if (first_shape.Code() == shape.Code()) first_t = t;
    }
  }
  return TimeRowChunkWaves(g, large, timed, report);
}

// For RowChunkWaveSeconds: each timed shape's resident blocks per SM and its times at a few counts
// of blocks per SM (RowChunkTiming::per_sm).
absl::Status TahoeEngineImpl::TimeRowChunkWaves(
    Gpu& g, int64_t large, const std::vector<std::pair<double, RowChunkShape>>& timed,
    std::string* report) {
  TahoeLaunchArgs a = Args(g, StrategyId::kRowChunk, 1, ProbeCall());
  const int64_t sms = std::max(1, hw_.sm_count);
  // The shapes to time in waves: every shape timed at the large batch and, for the fastest few,
  // the same shape with its trees in 2, 4 and 8 parts (more, shorter blocks for mid-size batches).
  constexpr size_t kSplitShapes = 6;
  std::vector<std::pair<double, RowChunkShape>> shapes = timed;
  for (size_t i = 0; i < std::min(kSplitShapes, timed.size()); ++i) {
    if (!TahoeRowChunkSplittable(g.df, a, timed[i].second.chunk, timed[i].second.threads)) continue;
    for (int parts = 2; parts <= kRowChunkMaxParts; parts *= 2) {
      RowChunkShape split = timed[i].second;
      split.parts = parts;
      shapes.emplace_back(timed[i].first, split);
    }
  }
  std::vector<RowChunkTiming> timings;
  absl::StrAppend(report, "row_chunk waves (blocks/SM: us at 1, half, 1, 2 waves):");
  for (const auto& [t_large, shape] : shapes) {
    // A block at the large batch's rate (a part block does 1/parts of a whole block's work).
    const double block_seconds = t_large * static_cast<double>(sms) * shape.chunk *
                                 shape.per_thread / (static_cast<double>(large) * shape.parts);
    absl::StatusOr<RowChunkTiming> t = TimeRowChunkShape(g, large, shape, block_seconds, report);
    if (!t.ok()) return t.status();
    if (t->blocks_per_sm > 0) timings.push_back(*t);
  }
  absl::StrAppend(report, "; ");
  row_chunk_timings_ = std::move(timings);
  row_chunk_large_rows_ = large;
  return absl::OkStatus();
}

absl::StatusOr<RowChunkTiming> TahoeEngineImpl::TimeRowChunkShape(Gpu& g, int64_t large,
                                                                  const RowChunkShape& shape,
                                                                  double block_seconds,
                                                                  std::string* report) {
  TahoeLaunchArgs a = Args(g, StrategyId::kRowChunk, shape.Code(), ProbeCall());
  const int64_t sms = std::max(1, hw_.sm_count);
  RowChunkTiming t;
  t.shape = shape;
  t.blocks_per_sm = TahoeRowChunkBlocksPerSm(g.df, a);
  if (t.blocks_per_sm <= 0) return t;
  const int64_t rows_per_block = int64_t{shape.chunk} * shape.per_thread;
  const int64_t b = t.blocks_per_sm;
  const int64_t counts[RowChunkTiming::kPoints] = {1, (b + 1) / 2, b, 2 * b};
  absl::StrAppend(report, " ", shape.Label(), ":", b, ":");
  for (int i = 0; i < RowChunkTiming::kPoints; ++i) {
    // Blocks per SM: the rows' blocks times the parts.
    const int64_t row_blocks = std::max<int64_t>(1, counts[i] * sms / shape.parts);
    const int64_t rows = std::min(large, row_blocks * rows_per_block);
    t.per_sm[i] = static_cast<int>(
        (((rows + rows_per_block - 1) / rows_per_block) * shape.parts + sms - 1) / sms);
    if (i > 0 && t.per_sm[i] == t.per_sm[i - 1]) {
      t.seconds[i] = t.seconds[i - 1];  // clamped to the large batch, or a one-block wave
    } else {
      // Best of 4: these launches take tens of microseconds, where one slow run decides.
      absl::StatusOr<double> s = TimeProbe(g, StrategyId::kRowChunk, shape.Code(), rows, 5);
      if (!s.ok()) return s.status();
      t.seconds[i] = *s;
    }
    absl::StrAppend(report, i > 0 ? "/" : "", absl::StrFormat("%.0f", t.seconds[i] * 1e6));
  }
  t.block_seconds = block_seconds;
  return t;
}

// At a few batch sizes below half the large batch, row-chunk candidates are timed on launches of
// that many probe rows (row_chunk_launches_; RowChunkLaunchTiming says why): the shapes the wave
// model ranks first there, and part variants that the large batch's ranking left untimed
// (TimeRowChunkWaves splits only its six fastest shapes, and a shape ranked lower at the large
// batch can be the fastest in parts at a mid-size one). Bounded: at most kSizeCandidates + 4 x
// kSplitBases + 4 = 22 shapes a size, kReps launches each (at most 660 over the six sizes), plus
// the wave points of the part variants first timed here that are kept (at most kKeep x 4 x kReps
// a size, mostly far fewer); launches of tens to hundreds of microseconds at these sizes. A size
// costs about as much as all smaller ones together; kSizesBudgetSeconds is a soft bound, checked
// before each size (a size started runs whole, so the probe can take about twice it): past it the
// larger sizes are left to the wave model (it is closest there: several waves). Which sizes are
// timed can therefore vary with the machine's load, and with them which shape a load picks.
absl::Status TahoeEngineImpl::ProbeRowChunkSizes(Gpu& g, int64_t large, std::string* report) {
  constexpr int64_t kSizes[] = {2048, 4096, 8192, 16384, 32768, 65536};
  constexpr size_t kSizeCandidates = 10;  // the wave model's first at each size
  constexpr size_t kSplitBases = 2;       // one-part shapes whose part variants are first timed
  // One-part shapes fastest at the large batch whose part variants every size times: on rows with
  // categorical or uneven walks the wave model can rank a large-batch leader's parts low at a few
  // thousand rows where they are the fastest on real rows.
  constexpr size_t kLargeBases = 3;
  constexpr size_t kKeep = 8;             // the fastest shapes a size kept (row_chunk_launches_)
  constexpr int kReps = 5;
  constexpr double kSizesBudgetSeconds = 0.3;
  row_chunk_launches_.clear();
  if (row_chunk_timings_.empty()) return absl::OkStatus();
  const TahoeLaunchArgs a = Args(g, StrategyId::kRowChunk, 1, ProbeCall());
  const int sms = std::max(1, hw_.sm_count);
  // A timed shape's part variants that can run, the one-part shape first (parts take the shared
  // memory of their one-part shape, which fits: the large batch timed it).
  auto variants = [&](RowChunkShape base) {
    base.parts = 1;
    std::vector<RowChunkShape> v = {base};
    if (!TahoeRowChunkSplittable(g.df, a, base.chunk, base.threads)) return v;
    for (int parts = 2; parts <= kRowChunkMaxParts; parts *= 2) {
      v.push_back(base);
      v.back().parts = parts;
    }
    return v;
  };
  // (Pointers it returns are used before row_chunk_timings_ grows below.)
  auto find = [&](int code) {
    return FindRowChunkTiming(row_chunk_timings_.data(),
                              static_cast<int>(row_chunk_timings_.size()), code);
  };
  auto by_seconds = [](const auto& x, const auto& y) { return x.first < y.first; };
  std::string waves;  // part variants timed in waves here
  // The one-part shapes by their time at the large batch (the wave model there).
  std::vector<std::pair<double, RowChunkShape>> leaders;
  for (const RowChunkTiming& t : row_chunk_timings_) {
    if (t.shape.parts == 1) {
      leaders.emplace_back(RowChunkWaveSeconds(t, sms, static_cast<double>(large)), t.shape);
    }
  }
  std::stable_sort(leaders.begin(), leaders.end(), by_seconds);
  int launches = 0;
  const auto start = std::chrono::steady_clock::now();
  absl::StrAppend(report, "row_chunk at batch sizes (us, fastest first):");
  int64_t previous = 0;
  for (int64_t size : kSizes) {
    const int64_t n = std::min(size, (large - 1) / 2);  // below half the large batch
    if (n < 1 || n == previous) continue;
    previous = n;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
        kSizesBudgetSeconds) {
      absl::StrAppend(report, " time budget spent at ", n, " rows;");
      break;
    }
    std::vector<std::pair<double, RowChunkShape>> measured;
    // Times `shape` at n rows once (a part variant of a shape the large batch timed).
    auto time_at = [&](const RowChunkShape& shape) -> absl::Status {
      for (const auto& m : measured) {
        if (m.second.Code() == shape.Code()) return absl::OkStatus();
      }
      RowChunkShape one = shape;
      one.parts = 1;
      if (find(one.Code()) == nullptr) return absl::OkStatus();
      absl::StatusOr<double> s = TimeProbe(g, StrategyId::kRowChunk, shape.Code(), n, kReps);
      if (!s.ok()) return s.status();
      launches += kReps;
      measured.emplace_back(*s, shape);
      return absl::OkStatus();
    };
    // The wave model's first shapes at n; and the splittable one-part shapes without timed part
    // variants whose best variant a stand-in puts first: p parts make p times the blocks with 1/p
    // of the trees each, so the one-part shape's wave time at p x n rows over p (optimistic: no
    // reduction; it only orders shapes to time).
    std::vector<std::pair<double, RowChunkShape>> predicted, unsplit;
    for (const RowChunkTiming& t : row_chunk_timings_) {
      predicted.emplace_back(RowChunkWaveSeconds(t, sms, static_cast<double>(n)), t.shape);
      if (t.shape.parts > 1 || !TahoeRowChunkSplittable(g.df, a, t.shape.chunk, t.shape.threads)) {
        continue;
      }
      RowChunkShape two = t.shape;
      two.parts = 2;
      if (find(two.Code()) != nullptr) continue;
      double best = 1e30;
      for (int parts = 2; parts <= kRowChunkMaxParts; parts *= 2) {
        best = std::min(best, RowChunkWaveSeconds(t, sms, static_cast<double>(n) * parts) / parts);
      }
      unsplit.emplace_back(best, t.shape);
    }
    std::stable_sort(predicted.begin(), predicted.end(), by_seconds);
    std::stable_sort(unsplit.begin(), unsplit.end(), by_seconds);
    std::vector<RowChunkShape> candidates;
    for (size_t i = 0; i < std::min(kSizeCandidates, predicted.size()); ++i) {
      candidates.push_back(predicted[i].second);
    }
    for (size_t i = 0; i < std::min(kSplitBases, unsplit.size()); ++i) {
      for (const RowChunkShape& v : variants(unsplit[i].second)) candidates.push_back(v);
    }
    for (size_t i = 0; i < std::min(kLargeBases, leaders.size()); ++i) {
      for (const RowChunkShape& v : variants(leaders[i].second)) candidates.push_back(v);
    }
    for (const RowChunkShape& shape : candidates) {
      if (absl::Status st = time_at(shape); !st.ok()) return st;
    }
    if (measured.empty()) continue;
    // The fastest one's own variants (its one-part shape against its split, or the reverse).
    std::stable_sort(measured.begin(), measured.end(), by_seconds);
    for (const RowChunkShape& v : variants(measured.front().second)) {
      if (absl::Status st = time_at(v); !st.ok()) return st;
    }
    std::stable_sort(measured.begin(), measured.end(), by_seconds);
    absl::StrAppend(report, " ", n, " rows:");
    size_t kept = 0;
    for (const auto& [seconds, shape] : measured) {
      absl::StrAppend(report, " ", shape.Label(), ":", absl::StrFormat("%.1f", seconds * 1e6));
      if (kept == kKeep) continue;
      // The fastest few are kept; a part variant first timed here gets its wave points too (its
      // block at its one-part shape's large-batch rate), which RowChunkSeconds scales it by.
      if (find(shape.Code()) == nullptr) {
        RowChunkShape one = shape;
        one.parts = 1;
        absl::StatusOr<RowChunkTiming> t =
            TimeRowChunkShape(g, large, shape, find(one.Code())->block_seconds / shape.parts,
                              &waves);
        if (!t.ok()) return t.status();
        for (int i = 0; i < RowChunkTiming::kPoints && t->blocks_per_sm > 0; ++i) {
          launches += i == 0 || t->per_sm[i] != t->per_sm[i - 1] ? kReps : 0;
        }
        if (t->blocks_per_sm <= 0) continue;
        row_chunk_timings_.push_back(*t);
      }
      row_chunk_launches_.push_back({n, shape.Code(), seconds});
      ++kept;
    }
    absl::StrAppend(report, ";");
  }
  absl::StrAppend(report, " part shapes timed in waves:", waves.empty() ? " none" : waves,
                  absl::StrFormat(" (%d launches, %.0f ms); ", launches,
                                  1e3 * std::chrono::duration<double>(
                                            std::chrono::steady_clock::now() - start)
                                            .count()));
  return absl::OkStatus();
}

absl::Status TahoeEngineImpl::Probe() {
  Gpu& g = *gpus_[0];
  const int64_t F = forest_->num_features, K = forest_->num_outputs;
  // The large probe batch: 262,144 rows or 256 MB of them, in buffers of their own (freed after
  // the probes), so that wide rows are timed at a size where every shape runs many waves (a shape
  // can rank first at 65,536 rows and run 2x slower at 1M: prod-wide256).
  const int64_t large = std::max<int64_t>(
      1, std::min<int64_t>({int64_t{1} << 18, (int64_t{256} << 20) / (4 * F),
                            (int64_t{256} << 20) / (4 * K)}));
  const int64_t small = std::min<int64_t>(256, large);
  GROVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(g.device), "cudaSetDevice");
  // Freed, and the engine's pointers to them cleared, however Probe returns.
  absl::StatusOr<gpu::DeviceBuffer> in = gpu::DeviceBuffer::Allocate(large * F * 4, "tahoe: probe rows");
  if (!in.ok()) return in.status();
  absl::StatusOr<gpu::DeviceBuffer> out =
      gpu::DeviceBuffer::Allocate(large * K * 4, "tahoe: probe outputs");
  if (!out.ok()) return out.status();
  struct ClearOnExit {
    TahoeEngineImpl* engine;
    ~ClearOnExit() {
      engine->probe_in_ = nullptr;
      engine->probe_out_ = nullptr;
    }
  } clear{this};
  float* const d_in = in->as<float>();
  {
    // 1,024 calibration rows, then doubled on the device up to `large`.
    const int64_t base_rows = std::min<int64_t>(1024, large);
    const std::vector<float> base = CalibrationRows(*forest_, static_cast<int>(base_rows));
    GROVE_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(d_in, base.data(), base_rows * F * 4, cudaMemcpyHostToDevice), "probe rows");
    for (int64_t have = base_rows; have < large; have *= 2) {
      const int64_t n = std::min(have, large - have);
      GROVE_CUDA_RETURN_IF_ERROR(
          cudaMemcpy(d_in + have * F, d_in, n * F * 4, cudaMemcpyDeviceToDevice), "probe rows");
    }
  }
  probe_in_ = d_in;
  probe_out_ = out->as<float>();
  PredictOptions o;
  o.kind = OutputKind::kMargin;
  std::string report;
  if (g.df.lane_num_parts > 0 && options_.lanes == TahoeEngineOptions::Lanes::kAuto) {
    // Tree per lane or row per thread for splitting: the faster at the large probe batch stays
    // (lanes win where the row walks conflict in shared memory; rows win where a part holds few
    // steps per row, since each row then pays the lanes' reduction).
    const int lane_parts = g.df.lane_num_parts;
    absl::StatusOr<double> lanes = TimeProbe(g, StrategyId::kSplittingSharedForest, 1, large);
    if (!lanes.ok()) return lanes.status();
    g.df.lane_num_parts = 0;
    absl::StatusOr<double> rows = TimeProbe(g, StrategyId::kSplittingSharedForest, 1, large);
    if (!rows.ok()) return rows.status();
    const bool keep = *lanes < *rows;
    for (auto& gpu : gpus_) gpu->df.lane_num_parts = keep ? lane_parts : 0;
    absl::StrAppend(&lane_report_, absl::StrFormat(" (%s: %lld rows %.1fus per lane, %.1fus per row)",
                                                   keep ? "kept" : "not used",
                                                   static_cast<long long>(large), *lanes * 1e6,
                                                   *rows * 1e6));
  }
  if (g.max_row_chunk > 0) {
    absl::Status st = ProbeRowChunk(g, large, &report);
    if (st.ok()) st = ProbeRowChunkSizes(g, large, &report);
    if (!st.ok()) return st;
  }
  for (int i = 1; i < kNumStrategies; ++i) {
    // Row chunk's times come from its timed shapes (RowChunkWaveSeconds), not corrected equations.
    if (i == static_cast<int>(StrategyId::kRowChunk) && !row_chunk_timings_.empty()) continue;
    const char* name = StrategyName(i);
    double measured[2] = {0, 0};
    StrategyCost predicted[2];
    bool ok = true;
    for (int k = 0; k < 2 && ok; ++k) {
      const int64_t n = k == 0 ? small : large;
      TahoeWorkload w = Workload(n, o, true);
      for (int j = 0; j < kNumStrategies; ++j) w.throughput_scale[j] = w.latency_scale[j] = 1;
      absl::StatusOr<StrategyChoice> c = ChooseStrategy(hw_, w, static_cast<StrategyId>(i));
      if (!c.ok()) {
        ok = false;
        break;
      }
      predicted[k] = c->costs[i];
      absl::StatusOr<double> best = TimeProbe(g, static_cast<StrategyId>(i), c->groups, n);
      if (!best.ok()) return best.status();
      measured[k] = *best;
    }
    if (!ok) continue;
    auto ratio = [](double m, double fixed, double term) {
      return term > 0 ? std::clamp((m - fixed) / term, 0.05, 50.0) : 1.0;
    };
    latency_scale_[i] = ratio(measured[0], predicted[0].fixed_seconds, predicted[0].latency_seconds);
    throughput_scale_[i] =
        ratio(measured[1], predicted[1].fixed_seconds, predicted[1].throughput_seconds);
    absl::StrAppend(&report, name,
                    absl::StrFormat(": %lld rows %.1fus (latency x%.2f), %lld rows %.1fus "
                                    "(throughput x%.2f); ",
                                    static_cast<long long>(small), measured[0] * 1e6,
                                    latency_scale_[i], static_cast<long long>(large),
                                    measured[1] * 1e6, throughput_scale_[i]));
  }
  if (absl::Status st = ProbeChoices(g, large, &report); !st.ok()) return st;
  GROVE_LOG(INFO) << "tahoe probes" << KV("corrections", report);
  probe_report_ = report;
  return absl::OkStatus();
}

// The selector's model (corrected above) ranks strategies well apart but can miss between close
// ones by 10-30%: at a few batch sizes, the candidates within 2x of its best are timed and the
// fastest is kept for batches near that size (ProbedChoice).
absl::Status TahoeEngineImpl::ProbeChoices(Gpu& g, int64_t large, std::string* report) {
  PredictOptions o;
  o.kind = OutputKind::kMargin;
  absl::StrAppend(report, "choices:");
  for (int b = 0; b < kNumChoiceBatches; ++b) {
    const int64_t n = kChoiceBatches[b] > 0 ? std::min(kChoiceBatches[b], large) : large;
    choice_rows_[b] = n;
    const std::vector<StrategyCost> costs = EstimateStrategies(hw_, Workload(n, o, true));
    double best_predicted = 1e30;
    for (int i = 1; i < kNumStrategies; ++i) {
      if (costs[i].feasible) best_predicted = std::min(best_predicted, costs[i].seconds);
    }
    double best_t = 1e30;
    for (int i = 1; i < kNumStrategies; ++i) {
      if (!costs[i].feasible || costs[i].seconds > 2 * best_predicted) continue;
      absl::StatusOr<double> t = TimeProbe(g, static_cast<StrategyId>(i), costs[i].groups, n);
      if (!t.ok()) return t.status();
      absl::StrAppend(report, " ", n, " rows ", StrategyName(i), " ",
                      absl::StrFormat("%.1fus", *t * 1e6));
      if (*t < best_t) {
        best_t = *t;
        probed_choice_[b] = static_cast<StrategyId>(i);
      }
    }
    absl::StrAppend(report, " (", StrategyName(probed_choice_[b]), ");");
  }
  return absl::OkStatus();
}

StrategyId TahoeEngineImpl::ProbedChoice(double rows) const {
  // Batches above the large probe batch take its winner (where the model's corrections come from
  // too): the model alone missed 2.5x between shared forest and row chunk on 1M rows of
  // fashion_mnist-small, and 65,536 rows is too small to stand for 1M (splitting 2x faster than
  // shared data at 1M rows of cal_housing-med, slower at 65,536).
  int best = -1;
  double best_d = 1e30;
  for (int b = 0; b < kNumChoiceBatches; ++b) {
    if (choice_rows_[b] <= 0) continue;
    const double d = std::abs(std::log2(std::max(1.0, rows)) - std::log2(choice_rows_[b]));
    if (d < best_d) best_d = d, best = b;
  }
  return best >= 0 ? probed_choice_[best] : StrategyId::kCpu;
}

}  // namespace grove::tahoe_internal

#endif  // GROVE_HAVE_CUDA
