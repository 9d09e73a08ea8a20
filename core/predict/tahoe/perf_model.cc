#include "core/predict/tahoe/perf_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/log.h"
#include "core/io/file.h"

namespace grove {
namespace {

struct Field {
  const char* key;
  double GpuHardwareParams::*d;
};
constexpr Field kDoubleFields[] = {
    {"smem_read_bw", &GpuHardwareParams::smem_read_bw},
    {"smem_write_bw", &GpuHardwareParams::smem_write_bw},
    {"gmem_coalesced_bw", &GpuHardwareParams::gmem_coalesced_bw},
    {"gmem_uncoalesced_bw", &GpuHardwareParams::gmem_uncoalesced_bw},
    {"block_reduce_rate", &GpuHardwareParams::block_reduce_rate},
    {"global_reduce_rate", &GpuHardwareParams::global_reduce_rate},
    {"launch_seconds", &GpuHardwareParams::launch_seconds},
    {"smem_latency", &GpuHardwareParams::smem_latency},
    {"gmem_latency", &GpuHardwareParams::gmem_latency},
    {"h2d_bw", &GpuHardwareParams::h2d_bw},
    {"d2h_bw", &GpuHardwareParams::d2h_bw},
    {"copy_latency", &GpuHardwareParams::copy_latency},
    {"host_copy_bw", &GpuHardwareParams::host_copy_bw},
};

std::string CacheFileName(const std::string& name, const std::string& driver) {
  std::string s = "tahoe-hw-" + name + "-" + driver + ".txt";
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
  }
  return s;
}

std::string Us(double s) { return absl::StrFormat("%.1fus", s * 1e6); }

}  // namespace

std::string GpuHardwareParams::Serialize() const {
  std::string s = absl::StrCat("device_name=", device_name, "\ndriver=", driver,
                               "\nsm_count=", sm_count, "\nmax_threads_per_sm=", max_threads_per_sm,
                               "\nsmem_per_block=", smem_per_block, "\nsmem_per_sm=", smem_per_sm,
                               "\n");
  for (const Field& f : kDoubleFields) {
    absl::StrAppend(&s, f.key, "=", absl::StrFormat("%.9g", this->*(f.d)), "\n");
  }
  return s;
}

absl::StatusOr<GpuHardwareParams> GpuHardwareParams::Parse(std::string_view text) {
  GpuHardwareParams p;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return absl::InvalidArgumentError("calibration: bad line");
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    bool ok = true;
    if (key == "device_name") {
      p.device_name = value;
    } else if (key == "driver") {
      p.driver = value;
    } else if (key == "sm_count") {
      ok = absl::SimpleAtoi(value, &p.sm_count);
    } else if (key == "max_threads_per_sm") {
      ok = absl::SimpleAtoi(value, &p.max_threads_per_sm);
    } else if (key == "smem_per_block") {
      ok = absl::SimpleAtoi(value, &p.smem_per_block);
    } else if (key == "smem_per_sm") {
      ok = absl::SimpleAtoi(value, &p.smem_per_sm);
    } else {
      bool found = false;
      for (const Field& f : kDoubleFields) {
        if (key == f.key) {
          ok = absl::SimpleAtod(value, &(p.*(f.d)));
          found = true;
        }
      }
      if (!found) continue;  // unknown keys: written by a newer version; ignored
    }
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("calibration: bad value for ", key));
  }
  if (!p.Valid()) return absl::InvalidArgumentError("calibration: incomplete parameters");
  return p;
}

bool GpuHardwareParams::Valid() const {
  // Bounds well above any GPU's, so that a damaged cache file cannot size a launch absurdly.
  if (sm_count <= 0 || sm_count > 4096 || max_threads_per_sm <= 0 || max_threads_per_sm > 4096 ||
      smem_per_block <= 0 || smem_per_block > (int64_t{16} << 20) || smem_per_sm < 0 ||
      smem_per_sm > (int64_t{16} << 20)) {
    return false;
  }
  for (const Field& f : kDoubleFields) {
    const double v = this->*(f.d);
    if (!(v > 0) || !std::isfinite(v)) return false;
  }
  return true;
}

absl::StatusOr<GpuHardwareParams> LoadOrCalibrateGpu(const std::string& cache_dir, int device) {
  std::string name, driver;
  if (!GpuIdentity(device, &name, &driver)) {
    return absl::UnavailableError(absl::StrCat("no GPU ", device));
  }
  std::filesystem::path path;
  if (!cache_dir.empty()) {
    path = std::filesystem::path(cache_dir) / CacheFileName(name, driver);
    // A regular file of at most 64 KiB (a FIFO in the cache directory must not block engine load).
    absl::StatusOr<std::string> text = ReadRegularFile(path.string(), int64_t{64} << 10);
    if (text.ok()) {
      absl::StatusOr<GpuHardwareParams> p = GpuHardwareParams::Parse(*text);
      if (p.ok() && p->device_name == name && p->driver == driver) {
        GROVE_LOG(INFO) << "tahoe calibration loaded" << KV("path", path.string());
        return p;
      }
      GROVE_LOG(WARNING) << "tahoe calibration cache ignored" << KV("path", path.string());
    }
  }
  GpuHardwareParams p;
  std::string error;
  if (!MeasureGpuHardware(device, &p, &error)) {
    return absl::InternalError(absl::StrCat("GPU calibration failed: ", error));
  }
  GROVE_LOG(INFO) << "tahoe calibration measured" << KV("device", name) << KV("driver", driver)
                  << KV("smem_read_GBps", p.smem_read_bw / 1e9)
                  << KV("gmem_coalesced_GBps", p.gmem_coalesced_bw / 1e9)
                  << KV("gmem_uncoalesced_GBps", p.gmem_uncoalesced_bw / 1e9)
                  << KV("launch_us", p.launch_seconds * 1e6);
  if (!cache_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(cache_dir, ec);
    const std::filesystem::path tmp = path.string() + ".tmp";
    std::ofstream out(tmp);
    out << p.Serialize();
    out.close();
    if (out) std::filesystem::rename(tmp, path, ec);
    if (!out || ec) {
      GROVE_LOG(WARNING) << "tahoe calibration not cached" << KV("path", path.string());
    }
  }
  return p;
}

namespace {

double Capacity(const GpuHardwareParams& hw) {
  return static_cast<double>(hw.sm_count) * hw.max_threads_per_sm;
}

// Host path, per GPU (concurrent), for `rows` rows: both PCIe copies, and the staging of rows and
// outputs through pinned memory, which the engine runs on the pool in 1 MiB pieces overlapped with
// the transfers (TahoeEngineImpl::RunHost), at the measured one-thread memcpy rate per worker: the
// staging overlaps the transfers, so charging it at one thread's rate in series with them would
// send large batches to the CPU that the GPU finishes first.
double CopySeconds(const GpuHardwareParams& hw, const TahoeWorkload& w, double rows) {
  if (w.rows_on_device) return 0;
  const double in = rows * w.features * 4.0, out = rows * w.out_width * 4.0;
  const double staging = (in + out) / (hw.host_copy_bw * std::max(1, w.cpu_threads));
  return 2 * hw.copy_latency + std::max(in / hw.h2d_bw + out / hw.d2h_bw, staging);
}

// The kernel time from the terms, with the workload's probe corrections for strategy `id`.
void Finish(StrategyCost& c, const TahoeWorkload& w, StrategyId id) {
  const int i = static_cast<int>(id);
  c.kernel_seconds = c.fixed_seconds + std::max(w.throughput_scale[i] * c.throughput_seconds,
                                                w.latency_scale[i] * c.latency_seconds);
}

// Shared data with `groups` groups on `rows` rows of one GPU: equations (2) and (4).
StrategyCost SharedData(const GpuHardwareParams& hw, const TahoeWorkload& w, double rows,
                        int groups, double chunks) {
  StrategyCost c;
  c.id = StrategyId::kSharedData;
  c.groups = groups;
  const double V = w.visits_per_row, Ss = 4.0 * w.features, Sn = w.node_bytes;
  const double per_row = Ss / hw.smem_write_bw + V * 4.0 / hw.smem_read_bw +
                         Ss / hw.gmem_coalesced_bw + V * Sn / (hw.gmem_coalesced_bw / 2);
  c.throughput_seconds = rows * per_row + hw.block_reduce_rate * rows * groups * w.outputs;
  const double threads = std::ceil(rows / 32.0) * 32.0 * groups;
  const double waves = std::max(1.0, std::ceil(threads / Capacity(hw)));
  // A lane's chain: its share of the visits, each a node load then a shared-memory attribute load.
  c.latency_seconds = waves * (V / groups * (hw.gmem_latency + hw.smem_latency) + hw.gmem_latency);
  c.fixed_seconds = chunks * hw.launch_seconds;
  Finish(c, w, StrategyId::kSharedData);
  return c;
}

}  // namespace

int RowChunkShape::Code() const {
  int log2_threads = 0;
  while ((kRowChunkMinThreads << log2_threads) < threads) ++log2_threads;
  const int log2_per_thread = per_thread >= 4 ? 2 : per_thread >= 2 ? 1 : 0;
  int log2_parts = 0;
  while ((1 << log2_parts) < parts && (1 << log2_parts) < kRowChunkMaxParts) ++log2_parts;
  return chunk | (log2_per_thread << 11) | (log2_threads << kRowChunkThreadsShift) |
         (log2_parts << kRowChunkPartsShift);
}

RowChunkShape RowChunkShape::FromCode(int code) {
  RowChunkShape s;
  s.chunk = std::max(1, code & (kRowChunkPaired - 1));
  s.per_thread = std::min(4, 1 << ((code >> 11) & 3));
  s.threads = std::min(kRowChunkMaxThreads,
                       kRowChunkMinThreads << ((code >> kRowChunkThreadsShift) & 3));
  s.parts = 1 << ((code >> kRowChunkPartsShift) & 3);
  return s;
}

RowChunkShape RowChunkShape::FromLabel(const std::string& label) {
  RowChunkShape s;
  s.chunk = std::max(1, std::atoi(label.c_str()));
  if (const size_t x = label.find('x'); x != std::string::npos) s.per_thread = std::atoi(label.c_str() + x + 1);
  if (const size_t at = label.find('@'); at != std::string::npos) s.threads = std::atoi(label.c_str() + at + 1);
  if (const size_t p = label.find('/'); p != std::string::npos) s.parts = std::atoi(label.c_str() + p + 1);
  return s;
}

std::string RowChunkShape::Label() const {
  std::string s = std::to_string(chunk);
  if (per_thread > 1) s += "x" + std::to_string(per_thread);
  if (threads != kRowChunkMinThreads) s += "@" + std::to_string(threads);
  if (parts > 1) s += "/" + std::to_string(parts);
  return s;
}

int RowChunkFor(const GpuHardwareParams& hw, const TahoeWorkload& w, double rows, int threads) {
  const int best = w.best_row_chunk > 0 ? w.best_row_chunk : std::min(8, w.max_row_chunk);
  // A batch should give every SM about 1,024 threads: rows / chunk blocks of `threads`.
  const double fill = rows * threads / (4.0 * kRowChunkMinThreads * std::max(1, hw.sm_count));
  int c = 1;
  while (c * 2 <= best && c * 2 <= fill) c *= 2;
  // The probed chunk fits its block; max_row_chunk is what fits without a probe.
  return std::max(1, std::min(c, std::max({1, w.max_row_chunk, w.best_row_chunk})));
}

namespace {

// Up to one wave: the measured points (1, half a wave, a wave) interpolated in blocks per SM.
double PartialWave(const RowChunkTiming& t, double per_sm) {
  if (per_sm <= t.per_sm[0]) return t.seconds[0];
  for (int i = 0; i < 2; ++i) {
    const double x0 = t.per_sm[i], x1 = t.per_sm[i + 1];
    if (per_sm > x1 || x1 <= x0) continue;
    return t.seconds[i] + (per_sm - x0) / (x1 - x0) * (t.seconds[i + 1] - t.seconds[i]);
  }
  return t.seconds[2];
}

}  // namespace

double RowChunkWaveSeconds(const RowChunkTiming& t, int sm_count, double rows) {
  const double rows_per_block = static_cast<double>(t.shape.chunk) * t.shape.per_thread;
  const double blocks = std::ceil(std::max(1.0, rows) / rows_per_block) * std::max(1, t.shape.parts);
  const double p = std::ceil(blocks / std::max(1, sm_count));
  const double b = std::max(1, t.blocks_per_sm);
  if (p <= std::min<double>(b, t.per_sm[2])) return PartialWave(t, p);
  // A wave's time: from the two-wave point, and no less than at the large batch's rate (one short
  // two-wave timing, within the noise of the one-wave point, must not make a shape look free).
  const double span = t.per_sm[3] - t.per_sm[2];
  const double measured = span > 0 && t.per_sm[3] >= 2 * b
                              ? (t.seconds[3] - t.seconds[2]) / span * b
                              : 0.0;
  const double wave = std::max(measured, t.block_seconds * b);
  const double fixed = std::clamp(t.seconds[2] - wave, 0.0, t.seconds[0]);
  const double full = std::floor(p / b);
  const double rest = p - full * b;
  return fixed + full * wave + (rest > 0 ? std::max(0.0, PartialWave(t, rest) - fixed) : 0.0);
}

const RowChunkTiming* FindRowChunkTiming(const RowChunkTiming* timings, int count, int code) {
  if (timings == nullptr || code == 0) return nullptr;
  for (int i = 0; i < count; ++i) {
    if (timings[i].shape.Code() == code) return &timings[i];
  }
  return nullptr;
}

namespace {

bool LargeRowChunkLaunch(const TahoeWorkload& w, double rows) {
  return rows >= 0.5 * static_cast<double>(w.row_chunk_large_rows);
}

// The rows of the probed size nearest `rows` in log2 within kRowChunkProbedOctaves, for launches
// below the large batch (0: none). On a tie the smaller size.
int64_t ProbedRowsFor(const TahoeWorkload& w, double rows) {
  if (w.row_chunk_launches == nullptr || LargeRowChunkLaunch(w, rows)) return 0;
  const double x = std::log2(std::max(1.0, rows));
  int64_t nearest = 0;
  double nearest_d = kRowChunkProbedOctaves;
  for (int i = 0; i < w.num_row_chunk_launches; ++i) {
    const int64_t r = w.row_chunk_launches[i].rows;
    if (r <= 0 || r == nearest) continue;
    const double d = std::abs(x - std::log2(static_cast<double>(r)));
    if (d < nearest_d || (nearest == 0 && d <= nearest_d)) nearest = r, nearest_d = d;
  }
  return nearest;
}

double ScaledSeconds(const GpuHardwareParams& hw, const RowChunkLaunchTiming& l,
                     const RowChunkTiming& t, double rows) {
  const double at_probe = RowChunkWaveSeconds(t, hw.sm_count, static_cast<double>(l.rows));
  return at_probe > 0 ? l.seconds * RowChunkWaveSeconds(t, hw.sm_count, rows) / at_probe
                      : l.seconds;
}

// Near a probed size, the shapes timed there with the least and the second least ScaledSeconds
// (on a tie the earlier listed); false where no probed size applies.
struct ProbedPick {
  const RowChunkTiming* best = nullptr;
  const RowChunkTiming* second = nullptr;
  double best_s = std::numeric_limits<double>::infinity();
  double second_s = std::numeric_limits<double>::infinity();
};
bool PickProbed(const GpuHardwareParams& hw, const TahoeWorkload& w, double rows, ProbedPick* p) {
  const int64_t at = ProbedRowsFor(w, rows);
  if (at == 0) return false;
  for (int i = 0; i < w.num_row_chunk_launches; ++i) {
    const RowChunkLaunchTiming& l = w.row_chunk_launches[i];
    const RowChunkTiming* t =
        l.rows == at ? FindRowChunkTiming(w.row_chunk_timings, w.num_row_chunk_timings, l.code)
                     : nullptr;
    if (t == nullptr || t == p->best) continue;
    const double s = ScaledSeconds(hw, l, *t, rows);
    if (s < p->best_s) {
      p->second = p->best, p->second_s = p->best_s;
      p->best = t, p->best_s = s;
    } else if (s < p->second_s) {
      p->second = t, p->second_s = s;
    }
  }
  return p->best != nullptr;
}

}  // namespace

double RowChunkSeconds(const GpuHardwareParams& hw, const TahoeWorkload& w, const RowChunkTiming& t,
                       double rows) {
  if (const int64_t at = ProbedRowsFor(w, rows); at > 0) {
    const int code = t.shape.Code();
    for (int i = 0; i < w.num_row_chunk_launches; ++i) {
      const RowChunkLaunchTiming& l = w.row_chunk_launches[i];
      if (l.rows == at && l.code == code) return ScaledSeconds(hw, l, t, rows);
    }
  }
  return RowChunkWaveSeconds(t, hw.sm_count, rows);
}

const RowChunkTiming* RowChunkTimingFor(const GpuHardwareParams& hw, const TahoeWorkload& w,
                                        double rows) {
  if (w.row_chunk_timings == nullptr || w.num_row_chunk_timings <= 0) return nullptr;
  if (ProbedPick p; PickProbed(hw, w, rows, &p)) return p.best;
  const RowChunkTiming* pick = nullptr;
  double best = std::numeric_limits<double>::infinity();
  const bool large = LargeRowChunkLaunch(w, rows);
  for (int i = 0; i < w.num_row_chunk_timings; ++i) {
    const RowChunkTiming& t = w.row_chunk_timings[i];
    if (large) {
      // The probe's choice (it prefers more threads among near-equals, which held on real rows).
      if (t.shape.chunk == w.best_row_chunk && t.shape.threads == w.row_chunk_threads &&
          t.shape.per_thread == w.row_chunk_per_thread && t.shape.parts == 1) {
        return &t;
      }
      continue;
    }
    const double s = RowChunkWaveSeconds(t, hw.sm_count, rows);
    if (s < best) best = s, pick = &t;
  }
  return pick;
}

const RowChunkTiming* RowChunkRunnerUp(const GpuHardwareParams& hw, const TahoeWorkload& w,
                                       double rows) {
  const RowChunkTiming* best = RowChunkTimingFor(hw, w, rows);
  if (best == nullptr || LargeRowChunkLaunch(w, rows)) return nullptr;
  if (ProbedPick p; PickProbed(hw, w, rows, &p)) {
    return p.second != nullptr && p.second_s <= (1 + kProbedShapeTrialMargin) * p.best_s
               ? p.second
               : nullptr;
  }
  const double best_s = RowChunkWaveSeconds(*best, hw.sm_count, rows);
  const RowChunkTiming* second = nullptr;
  double second_s = std::numeric_limits<double>::infinity();
  for (int i = 0; i < w.num_row_chunk_timings; ++i) {
    const RowChunkTiming& t = w.row_chunk_timings[i];
    if (&t == best || t.shape.Code() == best->shape.Code()) continue;
    const double s = RowChunkWaveSeconds(t, hw.sm_count, rows);
    if (s < second_s) second_s = s, second = &t;
  }
  return second != nullptr && second_s <= (1 + kShapeTrialMargin) * best_s ? second : nullptr;
}

RowChunkShape RowChunkShapeFor(const GpuHardwareParams& hw, const TahoeWorkload& w, double rows) {
  if (const RowChunkTiming* t = RowChunkTimingFor(hw, w, rows); t != nullptr) return t->shape;
  RowChunkShape s;
  s.threads = w.row_chunk_threads;
  s.chunk = RowChunkFor(hw, w, rows, s.threads);
  s.BoundGroups();
  const int k = w.row_chunk_per_thread;
  s.per_thread = k > 1 && s.chunk == w.best_row_chunk &&
                         rows >= k * s.chunk * 8.0 * std::max(1, hw.sm_count)
                     ? k
                     : 1;
  return s;
}

int BestSharedDataGroups(const GpuHardwareParams& hw, const TahoeWorkload& w) {
  const double rows = std::ceil(static_cast<double>(w.rows) / std::max(1, w.num_gpus));
  const double chunks = std::max(1.0, std::ceil(rows / std::max<int64_t>(1, w.chunk_rows)));
  int best = 1;
  double best_t = std::numeric_limits<double>::infinity();
  for (int g = 1; g <= w.max_shared_data_groups && g <= std::max(1, w.num_trees); g *= 2) {
    const double t = SharedData(hw, w, rows, g, chunks).kernel_seconds;
    if (t < best_t * 0.98) {  // prefer fewer groups unless clearly faster
      best_t = t;
      best = g;
    }
  }
  return best;
}

std::vector<StrategyCost> EstimateStrategies(const GpuHardwareParams& hw, const TahoeWorkload& w) {
  std::vector<StrategyCost> costs;
  const double N = static_cast<double>(w.rows);
  const double gpus = std::max(1, w.num_gpus);
  const double rows = std::ceil(N / gpus);  // per GPU, all GPUs concurrently
  const double chunks = std::max(1.0, std::ceil(rows / std::max<int64_t>(1, w.chunk_rows)));
  const double V = w.visits_per_row, Sn = w.node_bytes, Sa = 4.0;
  const double copy = CopySeconds(hw, w, rows);
  // Pipelined chunks overlap copies and kernels (two streams): the longer of the two, plus one
  // chunk's worth of the shorter.
  auto total = [&](double kernel) {
    if (copy == 0) return kernel;
    if (chunks <= 1) return copy + kernel;
    return std::max(copy, kernel) + std::min(copy, kernel) / chunks;
  };

  {  // CPU reference path
    StrategyCost c;
    c.id = StrategyId::kCpu;
    c.feasible = w.cpu_allowed && w.cpu_seconds_per_visit > 0;
    if (!c.feasible) c.why_not = "cpu path disabled or not calibrated";
    // ThreadPool::ParallelFor: N / grain chunks (at most 4 per thread), run inline when one.
    const double grain = static_cast<double>(std::max<int64_t>(1, w.cpu_grain));
    const double chunks =
        std::clamp(std::floor(N / grain), 1.0, 4.0 * (std::max(1, w.cpu_threads) + 1));
    const double used = std::min(std::max(1.0, w.cpu_parallelism), chunks);
    c.throughput_seconds = N * V * w.cpu_seconds_per_visit / used;
    c.fixed_seconds = chunks > 1 ? w.cpu_fixed_seconds : 1e-6;
    c.kernel_seconds = c.fixed_seconds + w.throughput_scale[static_cast<int>(StrategyId::kCpu)] * c.throughput_seconds;
    c.seconds = c.kernel_seconds;
    costs.push_back(c);
  }
  {  // Direct, equation (5)
    StrategyCost c;
    c.id = StrategyId::kDirect;
    c.feasible = true;
    const double per_row = V * Sn / (hw.gmem_coalesced_bw / 2) + V * Sa / hw.gmem_uncoalesced_bw;
    c.throughput_seconds = rows * per_row;
    const double waves = std::max(1.0, std::ceil(rows / Capacity(hw)));
    c.latency_seconds = waves * V * 2 * hw.gmem_latency;  // node load, then attribute load
    c.fixed_seconds = chunks * hw.launch_seconds;
    Finish(c, w, StrategyId::kDirect);
    c.copy_seconds = copy;
    c.seconds = total(c.kernel_seconds);
    costs.push_back(c);
  }
  {  // Shared data, equations (2) and (4)
    StrategyCost c;
    if (w.max_shared_data_groups <= 0) {
      c.id = StrategyId::kSharedData;
      c.why_not = "rows do not fit shared memory";
    } else {
      c = SharedData(hw, w, rows, BestSharedDataGroups(hw, w), chunks);
      c.feasible = true;
      c.copy_seconds = copy;
      c.seconds = total(c.kernel_seconds);
    }
    costs.push_back(c);
  }
  // Shared forest (6) and splitting shared forest (3), (7).
  for (int split = 0; split < 2; ++split) {
    StrategyCost c;
    const StrategyId id = split ? StrategyId::kSplittingSharedForest : StrategyId::kSharedForest;
    c.id = id;
    const int parts = split ? std::max(1, w.num_parts) : 1;
    const double bytes = split ? w.part_smem_bytes : w.forest_smem_bytes;
    c.feasible = split ? (w.num_parts >= 1 && w.part_smem_bytes > 0) : w.shared_forest_fits;
    if (!c.feasible) {
      c.why_not = split ? "a tree does not fit shared memory" : "forest does not fit shared memory";
      costs.push_back(c);
      continue;
    }
    const double resident = static_cast<double>(hw.sm_count) *
                            std::max(1, split ? w.part_blocks_per_sm : w.forest_blocks_per_sm);
    const double row_blocks = std::ceil(rows / w.forest_threads);
    const double per_part = std::clamp(std::ceil(16 * resident / parts), 1.0, row_blocks);
    const double items = per_part * parts;
    const double grid = std::min(resident, items);
    // Attributes: from rows staged in shared memory (each part stages them again), or random reads
    // of global memory as in the paper.
    const double Ss = 4.0 * w.features;
    const double attributes =
        w.rows_staged ? V * Sa / hw.smem_read_bw +
                            parts * (Ss / hw.gmem_coalesced_bw + Ss / hw.smem_write_bw)
                      : V * Sa / hw.gmem_uncoalesced_bw;
    c.throughput_seconds = rows * (V * Sn / hw.smem_read_bw + attributes);
    if (parts > 1) c.throughput_seconds += hw.global_reduce_rate * rows * parts * w.outputs;
    // A thread's chain: its part's share of the visits per row it walks, rows in waves of the
    // resident threads; the last wave of work items adds its share.
    const double item_waves = std::ceil(items / grid);
    const double tiles_per_item = std::ceil(row_blocks / per_part);
    const double attr_latency = w.rows_staged ? hw.smem_latency : hw.gmem_latency;
    c.latency_seconds =
        item_waves * tiles_per_item * (V / parts) * (hw.smem_latency + attr_latency);
    // Staging: every block copies the part of each of its items at its SM's share of bandwidth.
    const double stage = std::min(item_waves, static_cast<double>(parts)) * bytes *
                         (hw.sm_count / hw.gmem_coalesced_bw + hw.sm_count / hw.smem_write_bw);
    const double launches = parts > 1 ? 2 : 1;
    c.fixed_seconds = chunks * (launches * hw.launch_seconds + stage);
    Finish(c, w, id);
    c.copy_seconds = copy;
    c.seconds = total(c.kernel_seconds);
    costs.push_back(c);
  }
  {  // Row chunk: rows read once and staged, nodes from L1/L2 (the chunk's lanes share a tree's
     // nodes), a shuffle reduction over the tree groups of each row.
    StrategyCost c;
    c.id = StrategyId::kRowChunk;
    c.feasible = w.max_row_chunk > 0;
    if (!c.feasible) {
      c.why_not = "one row does not fit shared memory";
    } else {
      // Launches of at most chunk_rows rows (the last one shorter: counted as a full one).
      const double launch_rows = std::min(rows, std::ceil(rows / chunks));
      const RowChunkShape shape = RowChunkShapeFor(hw, w, launch_rows);
      const int C = shape.chunk, T = shape.threads;
      c.groups = shape.Code();
      const double G = static_cast<double>(T) / C, Ss = 4.0 * w.features;
      const double per_row = Ss / hw.gmem_coalesced_bw + Ss / hw.smem_write_bw +
                             V * Sa / hw.smem_read_bw + V * Sn / (hw.gmem_coalesced_bw / 2);
      c.throughput_seconds = rows * per_row + hw.block_reduce_rate * rows * (G / 32 + 8) * w.outputs;
      const double smem = static_cast<double>(w.row_chunk_acc_bytes * (T / kRowChunkMinThreads) +
                                              C * w.row_chunk_row_bytes);
      const double per_sm = std::clamp(std::floor(hw.smem_per_sm / std::max(1.0, smem)), 1.0,
                                       std::max(1.0, hw.max_threads_per_sm / static_cast<double>(T)));
      const double waves = std::max(1.0, std::ceil(std::ceil(rows / C) / (hw.sm_count * per_sm)));
      c.latency_seconds = waves * (V / G * (hw.gmem_latency + hw.smem_latency) + hw.gmem_latency);
      c.fixed_seconds = chunks * hw.launch_seconds;
      Finish(c, w, StrategyId::kRowChunk);
      if (const RowChunkTiming* t = RowChunkTimingFor(hw, w, launch_rows); t != nullptr) {
        // Measured shapes: every launch of `launch_rows` rows as the probe timed it (at a probed
        // size near it, or in waves).
        c.kernel_seconds = chunks * RowChunkSeconds(hw, w, *t, launch_rows);
        if (const RowChunkTiming* r = RowChunkRunnerUp(hw, w, launch_rows); r != nullptr) {
          c.runner_up_groups = r->shape.Code();
        }
      }
      c.copy_seconds = copy;
      c.seconds = total(c.kernel_seconds);
    }
    costs.push_back(c);
  }
  return costs;
}

absl::StatusOr<StrategyChoice> ChooseStrategy(const GpuHardwareParams& hw, const TahoeWorkload& w,
                                              std::string_view force_name) {
  absl::StatusOr<std::optional<StrategyId>> force = ParseStrategy(force_name);
  if (!force.ok()) return force.status();
  return ChooseStrategy(hw, w, *force);
}

absl::StatusOr<StrategyChoice> ChooseStrategy(const GpuHardwareParams& hw, const TahoeWorkload& w,
                                              std::optional<StrategyId> force) {
  StrategyChoice choice;
  choice.costs = EstimateStrategies(hw, w);
  std::vector<const StrategyCost*> order;
  for (const StrategyCost& c : choice.costs) order.push_back(&c);
  std::stable_sort(order.begin(), order.end(), [](const StrategyCost* a, const StrategyCost* b) {
    if (a->feasible != b->feasible) return a->feasible;
    return a->seconds < b->seconds;
  });
  std::string ranking;
  for (const StrategyCost* c : order) {
    if (!c->feasible) continue;
    if (!ranking.empty()) ranking += " < ";
    absl::StrAppend(&ranking, c->name(), " ", Us(c->seconds));
  }
  const bool forced = force.has_value();
  const StrategyCost* pick = nullptr;
  if (forced) {
    pick = &choice.costs[static_cast<int>(*force)];
    if (!pick->feasible) {
      return absl::FailedPreconditionError(
          absl::StrCat("strategy ", pick->name(), " cannot run this model: ", pick->why_not));
    }
  } else {
    if (order.empty() || !order.front()->feasible) {
      return absl::FailedPreconditionError("no feasible prediction strategy");
    }
    pick = order.front();
  }
  choice.strategy = pick->id;
  choice.groups = pick->groups;
  choice.predicted_seconds = pick->seconds;
  choice.reason = absl::StrCat(forced ? "override; predicted " : "selector: ", ranking);
  return choice;
}

}  // namespace grove
