// ExplainEngine: strategy table, cost measurement at creation and per-batch choice.
#include "core/explain/explain_engine.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/common/log.h"
#include "core/common/thread_pool.h"
#include "core/explain/path_layout_gpu.h"
#include "core/explain/treeshap/explain_paths_cpu.h"
#include "core/explain/quadrature/quadrature.h"
#include "core/explain/treeshap/treeshap_gpu.h"
#include "core/gpu/device_set.h"

namespace grove {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool FullRange(const ExplainOptions& o) { return o.iteration_begin == 0 && o.iteration_end <= 0; }

// Mean path length (elements incl. root): interactions cost about this many SHAP passes.
double MeanPathLength(const PathLayout& l) {
  return l.paths.empty() ? 1.0 : static_cast<double>(l.elements.size()) / l.paths.size();
}

// A few rows for cost measurement: zeros (every element of a path is evaluated either way).
std::vector<float> ProbeRows(int64_t n, int num_features) {
  return std::vector<float>(static_cast<size_t>(n) * std::max(num_features, 1), 0.0f);
}

// Seconds per row of `run` on CPU, measured on a single thread (run is called with 1..k rows).
template <typename Fn>
double MeasurePerRow(int num_features, Fn run) {
  int64_t n = 1;
  double seconds = 0;
  for (;;) {
    std::vector<float> rows = ProbeRows(n, num_features);
    const double start = Now();
    run(MakeRowsView(rows.data(), n, num_features));
    seconds = Now() - start;
    if (seconds > 2e-3 || n >= 64) break;
    n *= 4;
  }
  return seconds / n;
}

// The path layout of `groups`' players, with the context's packing.
absl::StatusOr<PathLayoutPtr> BuildGroupedLayout(const StrategyContext& context,
                                                 const FeatureGroups& groups) {
  PathLayoutOptions o;
  o.packing = context.options.packing;
  o.groups = &groups;
  absl::StatusOr<PathLayoutPtr> built = BuildPathLayout(*context.forest, o);
  if (built.ok()) {
    GROVE_LOG(INFO) << "path layout of feature groups built" << KV("groups", groups.num_groups())
                    << KV("elements", (*built)->elements.size());
  }
  return built;
}

// CPU strategies share this cost model: per-row cost over the pool's threads.
class CpuStrategyBase : public ExplainStrategy {
 public:
  explicit CpuStrategyBase(const StrategyContext& c) : context_(c) {
    // The calling thread runs chunks too (ThreadPool::ParallelFor): pool threads + 1.
    threads_ = c.pool != nullptr ? c.pool->num_threads() + 1 : 1;
    interaction_factor_ = c.layout != nullptr ? 1.0 + MeanPathLength(*c.layout) : 8.0;
  }
  std::string device() const override { return "cpu"; }
  double EstimateSeconds(int64_t rows, bool interactions) const override {
    const double per_row = per_row_seconds_ * (interactions ? interaction_factor_ : 1.0);
    const double parallel = std::min<double>(threads_, std::max<int64_t>(rows, 1));
    return 5e-6 + per_row * rows / parallel;
  }
  std::string Describe() const override {
    return absl::StrFormat("%s (%.3g us/row/thread)", name(), 1e6 * per_row_seconds_);
  }

 protected:
  void Measure(int num_features) {
    if (!context_.options.measure_costs) {
      per_row_seconds_ = 2e-8 * (context_.layout ? context_.layout->elements.size() : 1000);
      return;
    }
    ExplainOptions shap;
    const int64_t width = ExplainWidth(*context_.forest, false);
    per_row_seconds_ = MeasurePerRow(num_features, [&](RowsView rows) {
      std::vector<float> out(rows.rows * width);
      (void)Run(rows, shap, MakeMatrixView(out.data(), rows.rows, width), /*pool=*/nullptr);
    });
  }
  virtual absl::Status Run(RowsView rows, const ExplainOptions& options, MatrixView<float> out,
                           ThreadPool* pool) const = 0;
  absl::Status Run(RowsView rows, const ExplainOptions& options,
                   MatrixView<float> out) const override {
    return Run(rows, options, out, context_.pool);
  }

  StrategyContext context_;
  int threads_ = 1;
  double interaction_factor_ = 8.0;
  double per_row_seconds_ = 1e-4;
};

// A CPU strategy that is one function over the context: the reference recursion or the path
// algorithm, serving the requests `supports` accepts.
class CpuFunctionStrategy final : public CpuStrategyBase {
 public:
  using RunFn = absl::Status (*)(const StrategyContext& c, RowsView rows,
                                 const ExplainOptions& options, MatrixView<float> out,
                                 ThreadPool* pool);
  using SupportsFn = bool (*)(const ExplainOptions& options);
  CpuFunctionStrategy(const StrategyContext& c, const char* name, SupportsFn supports, RunFn run)
      : CpuStrategyBase(c), name_(name), supports_(supports), run_(run) {
    Measure(c.forest->num_features);
  }
  std::string name() const override { return name_; }
  bool Supports(const ExplainOptions& options) const override { return supports_(options); }

 private:
  using CpuStrategyBase::Run;
  absl::Status Run(RowsView rows, const ExplainOptions& options, MatrixView<float> out,
                   ThreadPool* pool) const override {
    return run_(context_, rows, options, out, pool);
  }

  const char* name_;
  SupportsFn supports_;
  RunFn run_;
};

class TreeShapGpuStrategy final : public ExplainStrategy {
 public:
  TreeShapGpuStrategy(const StrategyContext& c, std::unique_ptr<TreeShapGpu> gpu,
                      TreeShapGpuOptions gpu_options)
      : context_(c), gpu_(std::move(gpu)), gpu_options_(gpu_options) {
    interaction_factor_ = 1.0 + MeanPathLength(*c.layout);
    if (c.options.measure_costs) Measure();
  }
  std::string name() const override { return "treeshap_gpu"; }
  std::string device() const override { return gpu_->DeviceName(); }
  // Iteration ranges are served by the CPU strategies (the device layout holds every tree).
  // Groups: only a pinned grouping's (PinGroups at load), whose device copy exists; a request's
  // own grouping is the CPU's (explain_engine.h says why).
  bool Supports(const ExplainOptions& options) const override {
    return FullRange(options) && options.attribution == Attribution::kShapley &&
           (options.groups == nullptr || grouped_.Find(options.groups->Key()) != nullptr);
  }
  double EstimateSeconds(int64_t rows, bool interactions) const override {
    if (interactions && inter_measured_) return inter_fixed_seconds_ + inter_per_row_seconds_ * rows;
    return fixed_seconds_ +
           per_row_seconds_ * rows * (interactions ? interaction_factor_ : 1.0);
  }
  absl::Status Run(RowsView rows, const ExplainOptions& options,
                   MatrixView<float> out) const override {
    if (!Supports(options)) {
      return absl::FailedPreconditionError(
          "treeshap_gpu explains whole models with Shapley values only");
    }
    if (absl::Status s = CheckExplainCall(*context_.forest, rows, options.interactions, out,
                                          options.groups);
        !s.ok()) {
      return s;
    }
    if (options.groups == nullptr) return gpu_->Explain(rows, options.interactions, out, nullptr);
    if (std::shared_ptr<TreeShapGpu> grouped = grouped_.Find(options.groups->Key())) {
      return grouped->Explain(rows, options.interactions, out, nullptr);
    }
    // Unpinned since Supports said yes (a regroup): the same values from the host layout.
    absl::StatusOr<PathLayoutPtr> layout = LayoutFor(context_, options);
    if (!layout.ok()) return layout.status();
    return ExplainPathsCpu(**layout, rows, options, out, context_.pool);
  }
  absl::StatusOr<CachePin> PinGroups(const FeatureGroups& groups,
                                     const PathLayoutPtr& layout) const override {
    absl::StatusOr<std::pair<std::shared_ptr<TreeShapGpu>, CachePin>> pinned =
        grouped_.GetPinned(groups.Key(), [&]() -> absl::StatusOr<std::shared_ptr<TreeShapGpu>> {
          absl::StatusOr<std::unique_ptr<TreeShapGpu>> made =
              TreeShapGpu::Create(layout, gpu_options_);
          if (!made.ok()) return made.status();
          return std::shared_ptr<TreeShapGpu>(*std::move(made));
        });
    if (!pinned.ok()) return pinned.status();
    return pinned->second;
  }
  // The groupings' engines and their layouts' copies (built here, counted here); the model's
  // layout is its owner's to count.
  int64_t DeviceBytes() const override {
    int64_t total = gpu_->DeviceBytes();
    std::vector<PathLayoutPtr> layouts;
    grouped_.ForEach([&](const TreeShapGpu& g) {
      total += g.DeviceBytes();
      layouts.push_back(g.layout());
    });
    for (const PathLayoutPtr& l : layouts) total += ResidentPathLayout::ResidentBytes(*l);
    return total;
  }
  std::string Describe() const override {
    return absl::StrFormat("%s (%.3g ms + %.3g us/row; interactions %.3g ms + %.3g us/row%s)",
                           gpu_->Describe(), 1e3 * fixed_seconds_, 1e6 * per_row_seconds_,
                           1e3 * EstimateSeconds(0, true),
                           1e6 * (EstimateSeconds(1, true) - EstimateSeconds(0, true)),
                           inter_measured_ ? "" : " estimated");
  }

 private:
  void Measure() {
    const int F = context_.forest->num_features;
    bool inter = false;
    int64_t width = ExplainWidth(*context_.forest, false);
    auto time = [&](int64_t n) {
      std::vector<float> rows = ProbeRows(n, F);
      std::vector<float> out(n * width);
      double best = std::numeric_limits<double>::infinity();
      for (int rep = 0; rep < 2; ++rep) {
        const double start = Now();
        if (absl::Status s = gpu_->Explain(MakeRowsView(rows.data(), n, F), inter,
                                           MakeMatrixView(out.data(), n, width), nullptr);
            !s.ok()) {
          // An infinite estimate keeps the selector off a strategy that failed at load.
          GROVE_LOG(WARNING) << "treeshap_gpu: cost measurement failed" << KV("why", s.message());
          return best;
        }
        best = std::min(best, Now() - start);
      }
      return best;
    };
    const double t1 = time(1);
    // 256 rows: enough to fill the GPU for medium models, cheap at load for large ones.
    const int64_t big = 256;
    const double tb = time(big);
    fixed_seconds_ = t1;
    per_row_seconds_ = std::max(0.0, (tb - t1) / (big - 1));
    // Interactions are measured too: their cost is not SHAP's times a path-length factor when the
    // (F+1)^2 outputs per row dominate (wide models), which a factor would hide from the selector.
    inter = true;
    width = ExplainWidth(*context_.forest, true);
    // At most ~256 MB of calibration output (a 785-feature, 10-class model: 10 rows).
    const int64_t k = std::clamp<int64_t>((int64_t{256} << 20) / (4 * width), 2, 32);
    const double i1 = time(1);
    const double ik = time(k);
    if (std::isfinite(i1) && std::isfinite(ik)) {
      inter_fixed_seconds_ = i1;
      inter_per_row_seconds_ = std::max(0.0, (ik - i1) / (k - 1));
      inter_measured_ = true;
    }
  }

  StrategyContext context_;
  std::unique_ptr<TreeShapGpu> gpu_;
  TreeShapGpuOptions gpu_options_;
  // Device copies of pinned grouped layouts, by FeatureGroups::Key (a model's groups.json), and
  // the one unpinned last (a regroup's previous grouping, for the requests still naming it).
  mutable KeyedCache<TreeShapGpu> grouped_{1};
  double interaction_factor_ = 8.0;
  double fixed_seconds_ = 50e-6;
  double per_row_seconds_ = 1e-7;
  bool inter_measured_ = false;
  double inter_fixed_seconds_ = 0;
  double inter_per_row_seconds_ = 0;
};

// The registered strategies, in order of preference on equal estimates. Add new ones here.
struct StrategyEntry {
  const char* name;
  ExplainStrategyFactory factory;
};
// The automatic choice's tie band: strategies on the fastest one's device (CPU or GPU) predicted
// within this factor of it, or this many seconds, count as equally fast and the earliest in
// kStrategyFactories is taken.
constexpr double kTieRatio = 1.05;
constexpr double kTieSeconds = 10e-6;

constexpr StrategyEntry kStrategyFactories[] = {
    {"treeshap_gpu", &MakeTreeShapGpuStrategy},
    {"quadrature_gpu", &MakeQuadratureGpuExplainStrategy},
    {"treeshap_cpu", &MakeTreeShapCpuStrategy},
    {"quadrature_cpu", &MakeQuadratureCpuExplainStrategy},
    {"reference", &MakeReferenceStrategy},
};

class StrategyExplainEngine final : public ExplainEngine {
 public:
  // `reference`: the strategy that serves what a forced strategy cannot (NeedsReference); null
  // when `strategies` has it or nothing is forced. `paths`: with treeshap_gpu forced, the CPU
  // path strategy that explains the groupings it holds no device copy of (null otherwise).
  StrategyExplainEngine(StrategyContext context,
                        std::vector<std::unique_ptr<ExplainStrategy>> strategies,
                        std::string forced, std::unique_ptr<ExplainStrategy> reference,
                        std::unique_ptr<ExplainStrategy> paths)
      : context_(std::move(context)),
        strategies_(std::move(strategies)),
        forced_(std::move(forced)),
        reference_(std::move(reference)),
        paths_(std::move(paths)) {}

  absl::Status Explain(RowsView rows, const ExplainOptions& options, MatrixView<float> out,
                       RunInfo* info) const override {
    const double start = Now();
    const ExplainStrategy* chosen = nullptr;
    std::string reason;
    if (!forced_.empty()) {
      for (const auto& s : strategies_) {
        if (forced_ == "cpu" ? s->is_cpu() : s->name() == forced_) {
          if (forced_ == "cpu" && !s->Supports(options)) continue;
          // "cpu": the cheapest CPU strategy for this batch.
          if (chosen == nullptr || (forced_ == "cpu" &&
                                    s->EstimateSeconds(rows.rows, options.interactions) <
                                        chosen->EstimateSeconds(rows.rows, options.interactions))) {
            chosen = s.get();
          }
        }
      }
      if ((chosen == nullptr || !chosen->Supports(options)) && paths_ != nullptr &&
          paths_->Supports(options) && options.groups != nullptr) {
        // The same algorithm on the host layout: a request's own grouping has no device copy.
        chosen = paths_.get();
        reason = absl::StrCat("'", forced_, "' holds device copies of pinned groupings only: ",
                              paths_->name(), " does");
      } else if ((chosen == nullptr || !chosen->Supports(options)) && NeedsReference(options) &&
                 reference_ != nullptr) {
        // The reference computes every grouped or Banzhaf request: a forced strategy chooses how
        // what it supports is computed and does not refuse the rest.
        chosen = reference_.get();
        reason = absl::StrCat("'", forced_, "' does not serve this request: the reference does");
      }
      if (chosen == nullptr || !chosen->Supports(options)) {
        return absl::FailedPreconditionError(
            absl::StrCat("explanation strategy '", forced_, "' cannot serve this request"));
      }
    } else {
      double best = std::numeric_limits<double>::infinity();
      std::vector<std::string> estimates;
      std::vector<std::pair<const ExplainStrategy*, double>> supported;
      for (const auto& s : strategies_) {
        if (!s->Supports(options)) continue;
        const double t = s->EstimateSeconds(rows.rows, options.interactions);
        estimates.push_back(absl::StrFormat("%s %.3g ms", s->name(), 1e3 * t));
        supported.emplace_back(s.get(), t);
        best = std::min(best, t);
      }
      // The fastest decides the device (CPU or GPU); on it, the first strategy (in the factory
      // table's order) predicted within the tie band of the fastest is taken: estimates are timed
      // at load, so two processes serving the same model (a server and a local CLI) time
      // near-equal strategies in either order; within the band they still choose alike and answer
      // with the same bits.
      const ExplainStrategy* fastest = nullptr;
      for (const auto& [s, t] : supported) {
        if (t == best) {
          fastest = s;
          break;
        }
      }
      const double band = std::max(best * kTieRatio, best + kTieSeconds);
      for (const auto& [s, t] : supported) {
        if (fastest != nullptr && t <= band && s->is_cpu() == fastest->is_cpu()) {
          chosen = s;
          break;
        }
      }
      if (chosen == nullptr) return absl::InternalError("no explanation strategy available");
      reason = absl::StrCat("predicted: ", absl::StrJoin(estimates, ", "));
    }
    absl::Status status = chosen->Run(rows, options, out);
    if (info != nullptr) {
      info->device = chosen->device();
      info->strategy = chosen->name();
      info->reason = reason;
      info->compute_seconds = Now() - start;
    }
    return status;
  }

  std::string Describe() const override {
    std::vector<std::string> parts;
    for (const auto& s : strategies_) parts.push_back(s->Describe());
    return absl::StrCat(forced_.empty() ? "auto" : forced_, ": ", absl::StrJoin(parts, "; "));
  }
  int64_t DeviceBytes() const override {
    int64_t total = 0;
    for (const auto& s : strategies_) total += s->DeviceBytes();
    if (context_.owns_layout) total += ResidentPathLayout::ResidentBytes(*context_.layout);
    return total;
  }
  std::vector<std::string> StrategyNames() const override {
    std::vector<std::string> names;
    for (const auto& s : strategies_) names.push_back(s->name());
    return names;
  }
  PathLayoutPtr layout() const override { return context_.layout; }

  absl::StatusOr<CachePin> PinGroups(const FeatureGroups& groups) const override {
    if (context_.grouped_layouts == nullptr) {
      return absl::FailedPreconditionError(
          "the model's trees cannot be explained: no path layout for its feature groups");
    }
    absl::StatusOr<std::pair<PathLayoutPtr, CachePin>> layout = context_.grouped_layouts->GetPinned(
        groups.Key(), [&] { return BuildGroupedLayout(context_, groups); });
    if (!layout.ok()) return layout.status();
    auto pins = std::make_shared<std::vector<CachePin>>();
    pins->push_back(layout->second);
    for (const auto& s : strategies_) {
      absl::StatusOr<CachePin> pin = s->PinGroups(groups, layout->first);
      if (!pin.ok()) {
        // The grouping is still served, by the strategies that could prepare it.
        GROVE_LOG(WARNING) << "feature groups not prepared" << KV("strategy", s->name())
                           << KV("why", pin.status().message());
        continue;
      }
      if (*pin != nullptr) pins->push_back(*std::move(pin));
    }
    return CachePin(std::move(pins));
  }
  KeyedCacheStats grouped_layouts() const override {
    return context_.grouped_layouts != nullptr ? context_.grouped_layouts->stats()
                                               : KeyedCacheStats();
  }

 private:
  StrategyContext context_;
  std::vector<std::unique_ptr<ExplainStrategy>> strategies_;
  std::string forced_;
  std::unique_ptr<ExplainStrategy> reference_;
  std::unique_ptr<ExplainStrategy> paths_;
};

}  // namespace

absl::StatusOr<PathLayoutPtr> LayoutFor(const StrategyContext& context,
                                        const ExplainOptions& options) {
  if (options.groups == nullptr || context.grouped_layouts == nullptr) return context.layout;
  const FeatureGroups& groups = *options.groups;
  return context.grouped_layouts->Get(groups.Key(),
                                      [&] { return BuildGroupedLayout(context, groups); });
}

absl::StatusOr<std::unique_ptr<ExplainStrategy>> MakeReferenceStrategy(const StrategyContext& c) {
  return std::unique_ptr<ExplainStrategy>(new CpuFunctionStrategy(
      c, "reference", [](const ExplainOptions&) { return true; },
      [](const StrategyContext& ctx, RowsView rows, const ExplainOptions& options,
         MatrixView<float> out, ThreadPool* pool) {
        return ExplainCpuReference(*ctx.forest, rows, options, out, pool);
      }));
}

absl::StatusOr<std::unique_ptr<ExplainStrategy>> MakeTreeShapCpuStrategy(const StrategyContext& c) {
  if (c.layout == nullptr) return std::unique_ptr<ExplainStrategy>();
  return std::unique_ptr<ExplainStrategy>(new CpuFunctionStrategy(
      c, "treeshap_cpu",
      // Shapley values of the features, or of feature groups (a grouped layout).
      [](const ExplainOptions& o) { return o.attribution == Attribution::kShapley; },
      [](const StrategyContext& ctx, RowsView rows, const ExplainOptions& options,
         MatrixView<float> out, ThreadPool* pool) {
        absl::StatusOr<PathLayoutPtr> layout = LayoutFor(ctx, options);
        if (!layout.ok()) return layout.status();
        return ExplainPathsCpu(**layout, rows, options, out, pool);
      }));
}

absl::StatusOr<std::unique_ptr<ExplainStrategy>> MakeTreeShapGpuStrategy(const StrategyContext& c) {
  if (c.layout == nullptr || !c.options.use_gpu || gpu::VisibleGpuCount() == 0) {
    return std::unique_ptr<ExplainStrategy>();
  }
  TreeShapGpuOptions gpu_options;
  gpu_options.host_pool = c.pool;
  gpu_options.precision = c.options.gpu_precision;
  absl::StatusOr<std::unique_ptr<TreeShapGpu>> gpu = TreeShapGpu::Create(c.layout, gpu_options);
  if (!gpu.ok()) return gpu.status();
  return std::unique_ptr<ExplainStrategy>(
      new TreeShapGpuStrategy(c, std::move(*gpu), gpu_options));
}

absl::Status CheckExplainStrategyName(absl::string_view name) {
  if (name == "auto" || name == "cpu" || name == "cpu_reference") return absl::OkStatus();
  std::string names = "auto, cpu";
  for (const StrategyEntry& e : kStrategyFactories) {
    if (name == e.name) return absl::OkStatus();
    absl::StrAppend(&names, ", ", e.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("explanation strategy '", name, "' is not available (", names, ")"));
}

absl::StatusOr<std::unique_ptr<ExplainEngine>> ExplainEngine::Create(
    ForestPtr forest, const ExplainEngineOptions& options, ThreadPool* pool, PathLayoutPtr layout) {
  if (forest == nullptr) return absl::InvalidArgumentError("ExplainEngine: no model");
  if (absl::Status s = CheckExplainStrategyName(options.strategy); !s.ok()) return s;
  std::string forced = options.strategy;
  if (forced == "auto") forced.clear();
  if (forced == "cpu_reference") forced = "reference";
  StrategyContext context;
  context.forest = forest;
  context.pool = pool;
  context.options = options;
  // Models no engine can explain (linear leaves) still get an engine: every call then reports
  // CheckExplainable's error, as the reference does.
  if (layout != nullptr) {
    context.layout = std::move(layout);
  } else if (CheckExplainable(*forest).ok()) {
    PathLayoutOptions layout_options;
    layout_options.packing = options.packing;
    absl::StatusOr<PathLayoutPtr> built = BuildPathLayout(*forest, layout_options);
    if (!built.ok()) return built.status();
    context.layout = *built;
    context.owns_layout = true;
  }
  if (context.layout != nullptr) {
    context.grouped_layouts =
        std::make_shared<KeyedCache<const PathLayout>>(kGroupedLayoutsCached);
  }
  std::vector<std::unique_ptr<ExplainStrategy>> strategies;
  for (const StrategyEntry& e : kStrategyFactories) {
    // A forced strategy other than "cpu" builds only what it needs (plus nothing else).
    if (!forced.empty() && forced != "cpu" && forced != e.name) continue;
    absl::StatusOr<std::unique_ptr<ExplainStrategy>> s = e.factory(context);
    if (!s.ok()) {
      if (forced == e.name) return s.status();
      GROVE_LOG(WARNING) << "explanation strategy " << e.name << " unavailable: " << s.status().ToString();
      continue;
    }
    if (*s != nullptr) strategies.push_back(std::move(*s));
  }
  if (strategies.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "explanation strategy '", options.strategy, "' is not available for this model"));
  }
  std::unique_ptr<ExplainStrategy> reference;
  if (!forced.empty() && forced != "cpu" && forced != "reference") {
    absl::StatusOr<std::unique_ptr<ExplainStrategy>> built = MakeReferenceStrategy(context);
    if (!built.ok()) return built.status();
    reference = *std::move(built);
  }
  std::unique_ptr<ExplainStrategy> paths;
  if (forced == "treeshap_gpu") {
    absl::StatusOr<std::unique_ptr<ExplainStrategy>> built = MakeTreeShapCpuStrategy(context);
    if (!built.ok()) return built.status();
    paths = *std::move(built);
  }
  return std::unique_ptr<ExplainEngine>(
      new StrategyExplainEngine(std::move(context), std::move(strategies), std::move(forced),
                                std::move(reference), std::move(paths)));
}

}  // namespace grove
