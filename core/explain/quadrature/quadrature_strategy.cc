// Quadrature explanation strategies (CPU and GPU) with cost models calibrated at load.
#include <algorithm>
#include <memory>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/log.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain_strategy.h"
#include "core/explain/quadrature/quadrature.h"
#include "core/explain/quadrature/quadrature_tree.h"
#include "core/gpu/device_set.h"
#include "core/model/traverse.h"

namespace grove {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Work units of one row (the cost model's shape): quadrature products plus emitted contributions.
struct WorkCounts {
  double shap = 0;
  double interactions = 0;
};

WorkCounts CountWork(const QuadratureModel& model) {
  WorkCounts w;
  for (const QuadraturePath& p : model.paths) {
    const double len = p.capacity > 0 ? p.capacity : p.n;
    w.shap += 2.0 * len * p.q + 2.0 * p.n * p.width + p.n;
    w.interactions += (p.n + 1.0) * 2.0 * len * p.q + 2.0 * p.n * p.n * p.width + p.n * len;
  }
  return w;
}

// Seconds of the fastest of `repeats` runs of fn().
template <typename Fn>
double TimeBest(int repeats, Fn&& fn) {
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < repeats; ++i) {
    const double start = Now();
    fn();
    best = std::min(best, Now() - start);
  }
  return best;
}

class QuadratureCpuStrategy final : public QuadratureStrategy {
 public:
  QuadratureCpuStrategy(QuadratureModelPtr model, ThreadPool* pool)
      : model_(std::move(model)), pool_(pool) {}

  void Calibrate(bool measure) {
    const WorkCounts work = CountWork(*model_);
    // The calling thread runs chunks too (ThreadPool::ParallelFor): pool threads + 1.
    const int threads = pool_ != nullptr ? pool_->num_threads() + 1 : 1;
    threads_ = threads;
    const Forest& forest = *model_->forest;
    const int64_t shap_width = ExplainWidth(forest, false);
    const int64_t inter_width = ExplainWidth(forest, true);
    // Static guesses, per core: ~1 ns per work unit of the per-path kernels (interactions), an
    // eighth of that for SHAP values (the tree kernel shares prefixes and runs rows in SIMD
    // lanes), ~1.5 ns per output entry (zero a double accumulator, convert, store a float).
    double shap_row = 1.25e-10 * work.shap;
    double inter_row = 1e-9 * work.interactions;
    double out_unit = 1.5e-9;
    if (measure) {
      // Output cost: the per-row accumulator and output traffic of the widest kind (capped).
      const int64_t w = std::clamp<int64_t>(inter_width, 1024, int64_t{1} << 22);
      std::vector<double> acc(w);
      std::vector<float> out(w);
      const double seconds = TimeBest(3, [&] {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t c = 0; c < w; ++c) out[c] = static_cast<float>(acc[c] + c);
      });
      out_unit = std::max(1e-11, seconds / w);
    }
    // Rows on this thread give the per-core cost, each kind timed on its own: SHAP values on at
    // least two full blocks of the tree kernel's SIMD lanes (fewer rows would time idle lanes),
    // interactions on one block where the tree kernel takes them, else on one row (the per-path
    // kernel: up to ~0.1 s a row for wide multi-class models).
    auto per_row = [&](bool interactions, int64_t rows, int repeats) {
      const int64_t width = interactions ? inter_width : shap_width;
      std::vector<float> x = QuadratureCalibrationRows(forest, rows, 7);
      std::vector<float> out(rows * width);
      ExplainOptions options;
      options.interactions = interactions;
      const double seconds = TimeBest(repeats, [&] {
        (void)ExplainQuadratureCpu(*model_, MakeRowsView(x.data(), rows, model_->num_features),
                                   options, MakeMatrixView(out.data(), rows, width), nullptr);
      });
      return std::max(0.0, seconds / rows - out_unit * width);
    };
    if (measure && work.shap > 0) {
      shap_row = per_row(false, std::clamp<int64_t>(static_cast<int64_t>(2e6 / work.shap), 16, 64),
                         2);
      const bool tree_interactions = model_->tree_program != nullptr &&
                                     QuadratureTreeServesInteractions(*model_->tree_program);
      inter_row = per_row(true, tree_interactions ? kQuadratureTreeLanes : 1, 1);
    }
    shap_ = {20e-6, shap_row};
    inter_ = {20e-6, inter_row};
    shap_in_blocks_ = model_->tree_program != nullptr;
    inter_in_blocks_ = shap_in_blocks_ && QuadratureTreeServesInteractions(*model_->tree_program);
    // Where the tree program takes every path of a call's iteration range (no per-path kernel),
    // blocks' matrices are split into ranges of rows and tree groups
    // (QuadratureTreeInteractionTasksFor): the boosting rounds of the paths it does not take.
    unserved_iterations_.clear();
    if (inter_in_blocks_) {
      for (const QuadraturePath& path : model_->paths) {
        if (model_->tree_program->served[path.tree] == 0) {
          unserved_iterations_.push_back(path.iteration);
        }
      }
      std::sort(unserved_iterations_.begin(), unserved_iterations_.end());
      unserved_iterations_.erase(
          std::unique(unserved_iterations_.begin(), unserved_iterations_.end()),
          unserved_iterations_.end());
    }
    // The calibration's one block of interactions (the whole model, one thread) ran this many
    // SHAP passes: one where the diagonals come from SHAP values computed once (or a per-path
    // kernel took part of the model), else one per range.
    inter_calibration_passes_ = 1;
    if (inter_in_blocks_ && unserved_iterations_.empty()) {
      const QuadratureTreeInteractionTasks calibration =
          QuadratureTreeInteractionTasksFor(*model_->tree_program, kQuadratureTreeLanes, 1);
      if (!calibration.diagonal_task) inter_calibration_passes_ = calibration.ranges;
    }
    inter_units_ = QuadraturePairUnitsPerRow(*model_);
    shap_memory_ = out_unit * shap_width;
    inter_memory_ = out_unit * inter_width;
  }

  std::string name() const override { return "quadrature_cpu"; }
  bool Supports(const ExplainOptions&) const override { return true; }
  double EstimateSeconds(int64_t rows, const ExplainOptions& options) const override {
    const StrategyCost& c = options.interactions ? inter_ : shap_;
    double rounds = static_cast<double>((rows + threads_ - 1) / threads_);  // rows in parallel
    const QuadratureTreeInteractionTasks inter_tasks =
        options.interactions && TreeProgramTakesEveryPath(options)
            ? QuadratureTreeInteractionTasksFor(*model_->tree_program, rows, threads_)
            : QuadratureTreeInteractionTasks{};
    const int splits = inter_tasks.ranges;
    const int groups = !options.interactions && shap_in_blocks_
                           ? QuadratureTreeShapGroupTasks(*model_->tree_program, rows, threads_)
                           : 1;
    if (groups > 1) {
      // Blocks x tree groups in parallel, each group about 1/groups of a block's SHAP pass.
      const int64_t blocks = (rows + kQuadratureTreeLanes - 1) / kQuadratureTreeLanes;
      const int64_t task_rounds = (blocks * groups + threads_ - 1) / threads_;
      const double memory = shap_memory_ * rows / std::min(threads_, 4);
      return c.fixed_seconds +
             c.per_row_seconds * kQuadratureTreeLanes * task_rounds / groups + memory;
    }
    if (splits > 1 || inter_tasks.group_tasks > 1) {
      // Blocks x ranges of matrix rows (x tree groups) in parallel, each range taking 1/splits
      // of the conditioned passes (the calibrated time less its SHAP passes) and a group task
      // about 1/groups of that. The diagonals' SHAP pass: a task per block beside its ranges
      // (diagonal_task), which bounds the call from below, or a pass in each range's task (a
      // group task its group's share).
      const QuadratureTreeProgram& program = *model_->tree_program;
      const int64_t blocks = (rows + kQuadratureTreeLanes - 1) / kQuadratureTreeLanes;
      const int64_t tasks =
          blocks * (splits * inter_tasks.group_tasks + (inter_tasks.diagonal_task ? 1 : 0));
      const int64_t task_rounds = (tasks + threads_ - 1) / threads_;
      const double conditioned = std::max(
          0.0, c.per_row_seconds - inter_calibration_passes_ * shap_.per_row_seconds);
      double lane =
          conditioned * QuadratureTreeRangeShare(program, splits) / inter_tasks.group_tasks;
      if (!inter_tasks.diagonal_task) lane += shap_.per_row_seconds / inter_tasks.group_tasks;
      double compute = lane * kQuadratureTreeLanes * task_rounds;
      if (inter_tasks.diagonal_task) {
        compute = std::max(compute, shap_.per_row_seconds * kQuadratureTreeLanes);
      }
      const double memory = inter_memory_ * rows / std::min(threads_, 4);
      return c.fixed_seconds + compute + memory;
    }
    if (options.interactions ? inter_in_blocks_ : shap_in_blocks_) {
      // The tree kernel's blocks: a thread pays for whole blocks of SIMD lanes.
      rounds = std::ceil(rounds / kQuadratureTreeLanes) * kQuadratureTreeLanes;
    } else if (options.interactions && inter_units_ > 0) {
      // A row's interactions run as inter_units_ tasks of about equal cost, each cut into
      // segments where there are fewer tasks than threads.
      const int64_t tasks = rows * inter_units_;
      const int segments = QuadraturePairSegmentsPerTask(*model_, rows, threads_);
      // Each segment past the first costs 1% of a task (QuadraturePairSegmentsPerTask's charge
      // for the merge), in rows of inter_units_ tasks.
      rounds = (static_cast<double>((tasks * segments + threads_ - 1) / threads_) / segments +
                0.01 * (segments - 1)) /
               inter_units_;
    }
    // Output traffic scales with memory bandwidth, which a few cores saturate.
    const double memory = (options.interactions ? inter_memory_ : shap_memory_) * rows /
                          std::min(threads_, 4);
    return c.fixed_seconds + c.per_row_seconds * rounds + memory;
  }
  absl::Status Run(RowsView rows, const ExplainOptions& options, MatrixView<float> out,
                   RunInfo* info) const override {
    const double start = Now();
    absl::Status s = ExplainQuadratureCpu(*model_, rows, options, out, pool_, &workspaces_);
    if (info != nullptr) {
      info->device = "cpu";
      info->strategy = name();
      info->compute_seconds = Now() - start;
    }
    return s;
  }
  int64_t DeviceBytes() const override { return 0; }
  std::string Describe() const override {
    return absl::StrFormat(
        "quadrature_cpu(threads=%d shap=%.3g+%.3gus/row interactions=%.3g+%.3gus/row "
        "(compute per core + output))",
        threads_, shap_.per_row_seconds * 1e6, shap_memory_ * 1e6, inter_.per_row_seconds * 1e6,
        inter_memory_ * 1e6);
  }

 private:
  // Whether ExplainQuadratureCpu's interactions of `options`' iteration range take no per-path
  // kernel (the tree program serves every path in it), as the call itself decides.
  bool TreeProgramTakesEveryPath(const ExplainOptions& options) const {
    if (!inter_in_blocks_) return false;
    IterationRange range;
    if (!ResolveIterationRange(*model_->forest, options.iteration_begin, options.iteration_end,
                               &range)
             .ok()) {
      return false;  // the call refuses the range
    }
    const auto first = std::lower_bound(unserved_iterations_.begin(), unserved_iterations_.end(),
                                        range.begin);
    return first == unserved_iterations_.end() || *first >= range.end;
  }

  QuadratureModelPtr model_;
  ThreadPool* pool_;
  // Kept between calls (bounded: QuadratureCpuWorkspaces::kDefaultRetainBytes per model).
  mutable QuadratureCpuWorkspaces workspaces_;
  int threads_ = 1;
  StrategyCost shap_, inter_;  // compute part (per row and core)
  bool shap_in_blocks_ = false, inter_in_blocks_ = false;  // run by the tree kernel
  // Boosting rounds with paths the tree kernel does not take (ascending); read only when
  // inter_in_blocks_.
  std::vector<int> unserved_iterations_;
  int inter_calibration_passes_ = 1;  // SHAP passes in the calibration's interaction block
  int inter_units_ = 0;  // tasks per row of interactions (QuadraturePairUnitsPerRow)
  double shap_memory_ = 0, inter_memory_ = 0;  // output traffic per row (one core)
};

class QuadratureGpuStrategy final : public QuadratureStrategy {
 public:
  explicit QuadratureGpuStrategy(std::unique_ptr<QuadratureGpuExplainer> explainer)
      : explainer_(std::move(explainer)) {}

  // Times two batch sizes per kind on the running device and fits fixed + per-row seconds.
  absl::Status Calibrate(bool measure) {
    const QuadratureModel& model = explainer_->gpu_model().model();
    const WorkCounts work = CountWork(model);
    // Static guess (H100-like): 30 us fixed, 0.02 ns per work unit.
    shap_ = {30e-6, 2e-11 * work.shap};
    inter_ = {30e-6, 2e-11 * work.interactions};
    if (!measure) return absl::OkStatus();
    for (int kind = 0; kind < 2; ++kind) {
      ExplainOptions options;
      options.interactions = kind == 1;
      const int64_t width = ExplainWidth(*model.forest, options.interactions);
      // Keep calibration outputs under ~256 MB (interactions of wide models).
      const int64_t max_rows = std::max<int64_t>(2, (int64_t{256} << 20) / (4 * width));
      // The kernels split paths into chunks, so a few hundred rows already fill the device; the
      // second size is chosen to take ~50 ms, so the per-row slope is measured, not the noise.
      const int64_t small = std::min<int64_t>(options.interactions ? 32 : 256, max_rows / 4 + 1);
      std::vector<float> x = QuadratureCalibrationRows(*model.forest, small * 32, 11);
      std::vector<float> out(std::min<int64_t>(small * 32, max_rows) * width);
      auto run = [&](int64_t rows) {
        return explainer_->Explain(MakeRowsView(x.data(), rows, model.num_features), options,
                                   MakeMatrixView(out.data(), rows, width));
      };
      if (absl::Status s = run(small); !s.ok()) return s;  // warm-up (buffers, module load)
      const double t_small = TimeBest(3, [&] { (void)run(small); });
      const int64_t factor =
          std::clamp<int64_t>(static_cast<int64_t>(0.05 / std::max(t_small, 1e-6)), 4, 32);
      const int64_t large = std::clamp<int64_t>(small * factor, small + 1, std::max(small + 1, max_rows));
      if (absl::Status s = run(large); !s.ok()) return s;
      const double t_large = TimeBest(2, [&] { (void)run(large); });
      StrategyCost cost;
      cost.per_row_seconds = std::max(0.0, (t_large - t_small) / static_cast<double>(large - small));
      cost.fixed_seconds = std::max(0.0, t_small - cost.per_row_seconds * small);
      (options.interactions ? inter_ : shap_) = cost;
    }
    return absl::OkStatus();
  }

  // Float against double on calibration rows: keeps float when its error, relative to
  // max(1, |margin|), is at most `limit` for SHAP values and interactions.
  absl::Status ChoosePrecision(double limit) {
    const QuadratureModel& model = explainer_->gpu_model().model();
    float_error_ = 0;
    for (int kind = 0; kind < 2; ++kind) {
      ExplainOptions options;
      options.interactions = kind == 1;
      const int64_t width = ExplainWidth(*model.forest, options.interactions);
      const int64_t rows = std::clamp<int64_t>((int64_t{64} << 20) / (4 * width), 2,
                                               options.interactions ? 64 : 1024);
      std::vector<float> x = QuadratureCalibrationRows(*model.forest, rows, 5);
      std::vector<float> out_double(rows * width), out_float(rows * width);
      const RowsView view = MakeRowsView(x.data(), rows, model.num_features);
      explainer_->set_precision(QuadraturePrecision::kDouble);
      if (absl::Status s = explainer_->Explain(view, options,
                                               MakeMatrixView(out_double.data(), rows, width));
          !s.ok()) {
        return s;
      }
      explainer_->set_precision(QuadraturePrecision::kFloat);
      if (absl::Status s = explainer_->Explain(view, options,
                                               MakeMatrixView(out_float.data(), rows, width));
          !s.ok()) {
        return s;
      }
      const int64_t block = width / model.num_outputs;
      for (int64_t r = 0; r < rows; ++r) {
        for (int k = 0; k < model.num_outputs; ++k) {
          // The margin: the block's sum (SHAP values), the matrix's sum (interactions).
          double margin = 0;
          for (int64_t c = 0; c < block; ++c) margin += out_double[r * width + k * block + c];
          const double scale = std::max(1.0, std::abs(margin));
          for (int64_t c = 0; c < block; ++c) {
            const double e = std::abs(static_cast<double>(out_float[r * width + k * block + c]) -
                                      out_double[r * width + k * block + c]);
            float_error_ = std::max(float_error_, std::isfinite(e) ? e / scale : INFINITY);
          }
        }
      }
    }
    explainer_->set_precision(float_error_ <= limit ? QuadraturePrecision::kFloat
                                                    : QuadraturePrecision::kDouble);
    return absl::OkStatus();
  }

  std::string name() const override { return "quadrature_gpu"; }
  bool Supports(const ExplainOptions&) const override { return true; }
  double EstimateSeconds(int64_t rows, const ExplainOptions& options) const override {
    return (options.interactions ? inter_ : shap_).Seconds(rows);
  }
  absl::Status Run(RowsView rows, const ExplainOptions& options, MatrixView<float> out,
                   RunInfo* info) const override {
    const double start = Now();
    absl::Status s = explainer_->Explain(rows, options, out);
    if (info != nullptr) {
      info->device = absl::StrCat("cuda:", explainer_->gpu_model().device());
      info->strategy = name();
      info->compute_seconds = Now() - start;
    }
    return s;
  }
  int64_t DeviceBytes() const override { return explainer_->gpu_model().DeviceBytes(); }
  std::string Precision() const override {
    return QuadraturePrecisionName(explainer_->precision());
  }
  std::string Describe() const override {
    return absl::StrFormat(
        "quadrature_gpu(cuda:%d %s float_err=%.2g device_bytes=%d shap=%.3gus+%.3gns/row "
        "interactions=%.3gus+%.3gus/row)",
        explainer_->gpu_model().device(), QuadraturePrecisionName(explainer_->precision()),
        float_error_, DeviceBytes(), shap_.fixed_seconds * 1e6, shap_.per_row_seconds * 1e9,
        inter_.fixed_seconds * 1e6, inter_.per_row_seconds * 1e6);
  }

 private:
  std::unique_ptr<QuadratureGpuExplainer> explainer_;
  StrategyCost shap_, inter_;
  double float_error_ = -1;  // measured float error at load (-1: not measured)
};

}  // namespace

const char* QuadraturePrecisionName(QuadraturePrecision precision) {
  return precision == QuadraturePrecision::kFloat ? "float" : "double";
}

std::vector<float> QuadratureCalibrationRows(const Forest& forest, int64_t rows, uint64_t seed) {
  const int f = forest.num_features;
  // Per feature: the thresholds of its numeric splits, and the largest categorical bitset.
  std::vector<std::vector<float>> thresholds(f);
  std::vector<uint32_t> category_limit(f, 0);
  for (const Node& n : forest.nodes) {
    if (n.is_leaf()) continue;
    if (n.is_categorical()) {
      category_limit[n.feature] = std::max(category_limit[n.feature], n.aux * 32);
    } else if (thresholds[n.feature].size() < 4096) {
      thresholds[n.feature].push_back(n.threshold);
    }
  }
  std::vector<float> x(static_cast<size_t>(rows) * f);
  uint64_t state = seed * 0x2545F4914F6CDD1Dull + 1;
  for (int64_t r = 0; r < rows; ++r) {
    for (int j = 0; j < f; ++j) {
      const uint64_t u = SplitMix(&state);
      float v;
      if (u % 20 == 0) {
        v = std::numeric_limits<float>::quiet_NaN();
      } else if (category_limit[j] > 0 && (u >> 8) % 2 == 0) {
        v = static_cast<float>((u >> 16) % category_limit[j]);
      } else if (!thresholds[j].empty()) {
        const float t = thresholds[j][(u >> 16) % thresholds[j].size()];
        // Either side of the threshold.
        v = (u >> 40) % 2 == 0 ? t : std::nextafter(t, -std::numeric_limits<float>::infinity());
      } else {
        v = static_cast<float>((u >> 16) % 1000) * 0.01f - 5.0f;
      }
      x[static_cast<size_t>(r) * f + j] = v;
    }
  }
  return x;
}

absl::StatusOr<std::unique_ptr<QuadratureStrategy>> MakeQuadratureCpuStrategy(
    QuadratureModelPtr model, ThreadPool* pool, const QuadratureStrategyOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("quadrature_cpu: no model");
  auto strategy = std::make_unique<QuadratureCpuStrategy>(std::move(model), pool);
  strategy->Calibrate(options.calibrate);
  return std::unique_ptr<QuadratureStrategy>(std::move(strategy));
}

absl::StatusOr<std::unique_ptr<QuadratureStrategy>> MakeQuadratureGpuStrategy(
    QuadratureModelPtr model, const QuadratureStrategyOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("quadrature_gpu: no model");
  absl::StatusOr<std::unique_ptr<QuadratureGpuExplainer>> explainer =
      QuadratureGpuExplainer::Create(std::move(model), options.device, options.precision);
  if (!explainer.ok()) return explainer.status();
  auto strategy = std::make_unique<QuadratureGpuStrategy>(std::move(*explainer));
  if (options.choose_precision) {
    if (absl::Status s = strategy->ChoosePrecision(options.float_error_limit); !s.ok()) return s;
  }
  if (absl::Status s = strategy->Calibrate(options.calibrate); !s.ok()) return s;
  GROVE_LOG(INFO) << "quadrature_gpu ready" << KV("strategy", strategy->Describe());
  return std::unique_ptr<QuadratureStrategy>(std::move(strategy));
}

// ---------------------------------------------------------------------------------------------
// Engine seam adapters.

namespace {

// One QuadratureModel per path layout, shared by the CPU and GPU strategies of an engine.
absl::StatusOr<QuadratureModelPtr> SharedQuadratureModel(const StrategyContext& c) {
  static std::mutex mu;
  static std::map<const PathLayout*, std::weak_ptr<const QuadratureModel>>* cache =
      new std::map<const PathLayout*, std::weak_ptr<const QuadratureModel>>();
  if (c.forest == nullptr || c.layout == nullptr) {
    return absl::FailedPreconditionError("quadrature: model has no path layout");
  }
  std::lock_guard<std::mutex> lock(mu);
  for (auto it = cache->begin(); it != cache->end();) {
    it = it->second.expired() ? cache->erase(it) : std::next(it);
  }
  auto it = cache->find(c.layout.get());
  if (it != cache->end()) {
    if (QuadratureModelPtr m = it->second.lock(); m != nullptr && m->layout == c.layout) return m;
  }
  absl::StatusOr<QuadratureModelPtr> m = BuildQuadratureModel(c.forest, c.layout);
  if (!m.ok()) return m.status();
  (*cache)[c.layout.get()] = *m;
  GROVE_LOG(INFO) << "quadrature model built" << KV("layout", (*m)->Describe());
  return m;
}

class QuadratureExplainStrategy final : public ExplainStrategy {
 public:
  QuadratureExplainStrategy(std::unique_ptr<QuadratureStrategy> s, std::string device)
      : s_(std::move(s)), device_(std::move(device)) {}
  std::string name() const override { return s_->name(); }
  std::string device() const override { return device_; }
  bool Supports(const ExplainOptions& options) const override {
    return !NeedsReference(options) && s_->Supports(options);
  }
  double EstimateSeconds(int64_t rows, bool interactions) const override {
    ExplainOptions o;
    o.interactions = interactions;
    return s_->EstimateSeconds(rows, o);
  }
  absl::Status Run(RowsView rows, const ExplainOptions& options,
                   MatrixView<float> out) const override {
    return s_->Run(rows, options, out, nullptr);
  }
  int64_t DeviceBytes() const override { return s_->DeviceBytes(); }
  std::string Describe() const override { return s_->Describe(); }

 private:
  std::unique_ptr<QuadratureStrategy> s_;
  std::string device_;
};

}  // namespace

// quadrature_gpu on every visible GPU: rows split into contiguous chunks, one per device, run
// concurrently. A row's values do not depend on the other rows of its batch (each output is a
// fixed-point sum in an order-independent accumulator), and every device uses the precision device
// 0 chose, so the answer is bit-identical whatever the number of GPUs.
class MultiGpuQuadratureStrategy final : public ExplainStrategy {
 public:
  explicit MultiGpuQuadratureStrategy(std::vector<std::unique_ptr<QuadratureStrategy>> devices)
      : devices_(std::move(devices)),
        issuers_(std::make_unique<gpu::DeviceIssuers>(static_cast<int>(devices_.size()))) {}
  std::string name() const override { return "quadrature_gpu"; }
  std::string device() const override {
    std::string d = "cuda:";
    for (size_t i = 0; i < devices_.size(); ++i) absl::StrAppend(&d, i == 0 ? "" : "+", i);
    return d;
  }
  bool Supports(const ExplainOptions& options) const override {
    return !NeedsReference(options) && devices_[0]->Supports(options);
  }
  double EstimateSeconds(int64_t rows, bool interactions) const override {
    ExplainOptions o;
    o.interactions = interactions;
    return devices_[0]->EstimateSeconds(ChunkRows(rows), o);
  }
  absl::Status Run(RowsView rows, const ExplainOptions& options,
                   MatrixView<float> out) const override {
    const int64_t chunk = ChunkRows(rows.rows);
    const int used = static_cast<int>((rows.rows + chunk - 1) / std::max<int64_t>(chunk, 1));
    if (used <= 1) return devices_[0]->Run(rows, options, out, nullptr);
    std::vector<absl::Status> status(used);
    auto run = [&](int d) {
      const int64_t begin = d * chunk, n = std::min(rows.rows, begin + chunk) - begin;
      RowsView r{rows.Row(begin), n, rows.cols, rows.stride};
      MatrixView<float> o{out.Row(begin), n, out.cols, out.stride};
      status[d] = devices_[d]->Run(r, options, o, nullptr);
    };
    issuers_->RunOnEach(used, run);
    for (absl::Status& s : status) {
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  int64_t DeviceBytes() const override {
    int64_t b = 0;
    for (const auto& d : devices_) b += d->DeviceBytes();
    return b;
  }
  std::string Describe() const override {
    if (devices_.size() == 1) return devices_[0]->Describe();
    return absl::StrCat(devices_.size(), " GPUs x ", devices_[0]->Describe());
  }

 private:
  // Below this many rows per device a split costs more (thread start, one more launch and copy
  // per device) than it saves.
  static constexpr int64_t kMinRowsPerDevice = 1024;
  int64_t ChunkRows(int64_t rows) const {
    const int64_t n = static_cast<int64_t>(devices_.size());
    const int64_t even = (rows + n - 1) / n;
    return std::max(even, std::min(rows, kMinRowsPerDevice));
  }

  std::vector<std::unique_ptr<QuadratureStrategy>> devices_;
  std::unique_ptr<gpu::DeviceIssuers> issuers_;  // device d's share on thread d (made once)
};

absl::StatusOr<std::unique_ptr<ExplainStrategy>> MakeQuadratureGpuExplainStrategy(
    const StrategyContext& context) {
  const int count = gpu::VisibleGpuCount();
  if (context.layout == nullptr || !context.options.use_gpu || count == 0) {
    return std::unique_ptr<ExplainStrategy>();  // no GPU, or a model no engine explains
  }
  absl::StatusOr<QuadratureModelPtr> model = SharedQuadratureModel(context);
  if (!model.ok()) return model.status();
  std::vector<std::unique_ptr<QuadratureStrategy>> devices;
  for (int d = 0; d < count; ++d) {
    QuadratureStrategyOptions options;
    options.calibrate = context.options.measure_costs && d == 0;  // identical GPUs: measure once
    options.device = d;
    if (d > 0) {
      options.choose_precision = false;
      options.precision = devices[0]->Precision() == "float" ? QuadraturePrecision::kFloat
                                                             : QuadraturePrecision::kDouble;
    }
    absl::StatusOr<std::unique_ptr<QuadratureStrategy>> s =
        MakeQuadratureGpuStrategy(*model, options);
    if (!s.ok()) {
      if (d == 0) return s.status();
      GROVE_LOG(WARNING) << "quadrature_gpu: device skipped" << KV("device", d)
                         << KV("why", s.status().message());
      break;  // use the devices before it, which form a contiguous prefix
    }
    devices.push_back(std::move(*s));
  }
  return std::unique_ptr<ExplainStrategy>(new MultiGpuQuadratureStrategy(std::move(devices)));
}

absl::StatusOr<std::unique_ptr<ExplainStrategy>> MakeQuadratureCpuExplainStrategy(
    const StrategyContext& context) {
  if (context.layout == nullptr) return std::unique_ptr<ExplainStrategy>();
  absl::StatusOr<QuadratureModelPtr> model = SharedQuadratureModel(context);
  if (!model.ok()) return model.status();
  QuadratureStrategyOptions options;
  options.calibrate = context.options.measure_costs;
  absl::StatusOr<std::unique_ptr<QuadratureStrategy>> s =
      MakeQuadratureCpuStrategy(*model, context.pool, options);
  if (!s.ok()) return s.status();
  return std::unique_ptr<ExplainStrategy>(new QuadratureExplainStrategy(std::move(*s), "cpu"));
}

}  // namespace grove
