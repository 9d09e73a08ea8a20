// InterventionalEngine: strategy table, factories and per-call choice (see interventional_engine.h).
#include "core/explain/interventional_engine.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/common/log.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/interventional/interventional_gpu.h"
#include "core/explain/interventional/interventional_interactions.h"
#include "core/explain/path_layout_gpu.h"

namespace grove {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The probability spaces need the LinearizedLayout (each mask's background rows).
bool NeedsLinearized(const InterventionalOptions& o) {
  return o.output_space != OutputSpace::kMargin;
}

}  // namespace

class LazyLinearizedLayout {
 public:
  // `forms` holds this object.
  absl::StatusOr<LinearizedLayoutPtr> Get(const InterventionalContext& c,
                                          const PlayerForms& forms) {
    absl::call_once(once_, [&] {
      result_ = BuildLinearizedLayout(
          *forms.layout, *forms.background_layout,
          MakeRowsView(c.background->data(), c.background_rows, c.forest->num_features), c.pool);
    });
    return result_;
  }

 private:
  absl::once_flag once_;
  absl::StatusOr<LinearizedLayoutPtr> result_;
};

absl::StatusOr<std::shared_ptr<const PlayerForms>> FormsFor(const InterventionalContext& c,
                                                           const InterventionalOptions& options) {
  if (c.features == nullptr) {
    return absl::FailedPreconditionError("interventional: this model has no path layout");
  }
  if (options.groups == nullptr) return c.features;
  const FeatureGroups& groups = *options.groups;
  return c.grouped_forms->Get(
      groups.Key(), [&]() -> absl::StatusOr<std::shared_ptr<const PlayerForms>> {
        PathLayoutOptions lo;
        lo.packing = c.layout->stats.packing;
        lo.groups = &groups;
        absl::StatusOr<PathLayoutPtr> layout = BuildPathLayout(*c.forest, lo);
        if (!layout.ok()) return layout.status();
        absl::StatusOr<InterventionalLayoutPtr> il = BuildInterventionalLayout(
            *c.forest, **layout,
            MakeRowsView(c.background->data(), c.background_rows, c.forest->num_features),
            c.pool);
        if (!il.ok()) return il.status();
        GROVE_LOG(INFO) << "interventional forms of feature groups built"
                        << KV("groups", groups.num_groups())
                        << KV("masks", (*il)->masks.size())
                        << KV("seconds", (*il)->build_seconds);
        return std::make_shared<const PlayerForms>(
            PlayerForms{*layout, *il, std::make_shared<LazyLinearizedLayout>()});
      });
}

namespace {

// What the bitmask form (paths_cpu, gpu) computes: Shapley and Banzhaf values of every output
// space (the probability spaces while their layout is within the bound), and interaction values
// in the margin and exact probability spaces (PathFormsExplainInteractions); of the features or
// of feature groups alike (a grouped layout has the same paths).
bool FastFormServes(const InterventionalContext& c, const InterventionalOptions& o) {
  if (o.interactions && !PathFormsExplainInteractions(*c.forest, o)) return false;
  return !NeedsLinearized(o) || static_cast<int64_t>(c.layout->paths.size()) * c.background_rows *
                                      2 <= c.max_linearized_layout_bytes;
}

// The linearized layout of `forms` for a request in that space (null otherwise).
absl::StatusOr<LinearizedLayoutPtr> LinearizedFor(const InterventionalContext& c,
                                                  const PlayerForms& forms,
                                                  const InterventionalOptions& o) {
  if (!NeedsLinearized(o)) return LinearizedLayoutPtr();
  return forms.linearized->Get(c, forms);
}

class ReferenceStrategy final : public InterventionalStrategy {
 public:
  explicit ReferenceStrategy(const InterventionalContext& c) : c_(c) {}
  InterventionalStrategyId id() const override { return InterventionalStrategyId::kReference; }
  bool Supports(const InterventionalOptions&) const override { return true; }
  absl::Status Run(RowsView rows, const InterventionalOptions& options,
                   MatrixView<float> out) const override {
    const RowsView background =
        MakeRowsView(c_.background->data(), c_.background_rows, c_.forest->num_features);
    return ExplainInterventionalCpu(*c_.forest, background, rows, options, out, c_.pool);
  }

 private:
  InterventionalContext c_;
};

class PathsCpuStrategy final : public InterventionalStrategy {
 public:
  explicit PathsCpuStrategy(const InterventionalContext& c) : c_(c) {}
  InterventionalStrategyId id() const override { return InterventionalStrategyId::kPathsCpu; }
  bool Supports(const InterventionalOptions& o) const override { return FastFormServes(c_, o); }
  absl::Status Run(RowsView rows, const InterventionalOptions& options,
                   MatrixView<float> out) const override {
    absl::StatusOr<std::shared_ptr<const PlayerForms>> forms = FormsFor(c_, options);
    if (!forms.ok()) return forms.status();
    const PlayerForms& f = **forms;
    if (PathFormExplainsInteractions(*c_.forest, options)) {
      return ExplainInterventionalInteractionsPathsCpu(*c_.forest, *f.layout,
                                                       *f.background_layout, rows, options, out,
                                                       c_.pool);
    }
    absl::StatusOr<LinearizedLayoutPtr> ll = LinearizedFor(c_, f, options);
    if (!ll.ok()) return ll.status();
    return ExplainInterventionalPathsCpu(*c_.forest, *f.layout, *f.background_layout, rows,
                                         options, out, c_.pool, ll->get());
  }

 private:
  InterventionalContext c_;
};

class GpuStrategy final : public InterventionalStrategy {
 public:
  GpuStrategy(const InterventionalContext& c, std::unique_ptr<InterventionalGpu> gpu)
      : c_(c), gpu_(std::move(gpu)) {}
  InterventionalStrategyId id() const override { return InterventionalStrategyId::kGpu; }
  std::string device() const override { return gpu_->DeviceName(); }
  bool Supports(const InterventionalOptions& o) const override { return FastFormServes(c_, o); }
  absl::Status Run(RowsView rows, const InterventionalOptions& options,
                   MatrixView<float> out) const override {
    absl::StatusOr<std::shared_ptr<const PlayerForms>> forms = FormsFor(c_, options);
    if (!forms.ok()) return forms.status();
    InterventionalGpu* gpu = gpu_.get();
    std::shared_ptr<InterventionalGpu> grouped;
    if (options.groups != nullptr) {
      absl::StatusOr<std::shared_ptr<InterventionalGpu>> made = grouped_.Get(
          options.groups->Key(), [&]() -> absl::StatusOr<std::shared_ptr<InterventionalGpu>> {
            absl::StatusOr<std::unique_ptr<InterventionalGpu>> g = InterventionalGpu::Create(
                c_.forest, (*forms)->layout, (*forms)->background_layout);
            if (!g.ok()) return g.status();
            return std::shared_ptr<InterventionalGpu>(*std::move(g));
          });
      if (!made.ok()) return made.status();
      grouped = *std::move(made);
      gpu = grouped.get();
    }
    if (NeedsLinearized(options) && !gpu->linearized_enabled()) {
      absl::StatusOr<LinearizedLayoutPtr> ll = LinearizedFor(c_, **forms, options);
      if (!ll.ok()) return ll.status();
      if (absl::Status s = gpu->EnableLinearized(*ll); !s.ok()) return s;
    }
    return gpu->Explain(rows, options, out);
  }
  // The groupings' engines and their layouts' copies (built here, counted here); the model's
  // layout is its owner's to count.
  int64_t DeviceBytes() const override {
    int64_t total = gpu_->DeviceBytes();
    std::vector<PathLayoutPtr> layouts;
    grouped_.ForEach([&](const InterventionalGpu& g) {
      total += g.DeviceBytes();
      layouts.push_back(g.layout());
    });
    for (const PathLayoutPtr& l : layouts) total += ResidentPathLayout::ResidentBytes(*l);
    return total;
  }

 private:
  InterventionalContext c_;
  std::unique_ptr<InterventionalGpu> gpu_;  // Explain serialises internally
  // Device copies of the groupings' forms, by FeatureGroups::Key (as many as c_.grouped_forms).
  mutable KeyedCache<InterventionalGpu> grouped_{kGroupedFormsCached};
};

using Factory = absl::StatusOr<std::unique_ptr<InterventionalStrategy>> (*)(
    const InterventionalContext& c, const InterventionalEngineOptions& o);

absl::StatusOr<std::unique_ptr<InterventionalStrategy>> MakeGpu(
    const InterventionalContext& c, const InterventionalEngineOptions& o) {
  if (!o.use_gpu || c.layout == nullptr || !c.layout->long_paths.empty()) {
    return std::unique_ptr<InterventionalStrategy>();
  }
  absl::StatusOr<std::unique_ptr<InterventionalGpu>> gpu =
      InterventionalGpu::Create(c.forest, c.layout, c.background_layout);
  if (absl::IsUnavailable(gpu.status())) return std::unique_ptr<InterventionalStrategy>();
  if (!gpu.ok()) return gpu.status();
  return std::unique_ptr<InterventionalStrategy>(new GpuStrategy(c, std::move(*gpu)));
}

absl::StatusOr<std::unique_ptr<InterventionalStrategy>> MakePathsCpu(
    const InterventionalContext& c, const InterventionalEngineOptions&) {
  if (c.layout == nullptr || !c.layout->long_paths.empty()) {
    return std::unique_ptr<InterventionalStrategy>();
  }
  return std::unique_ptr<InterventionalStrategy>(new PathsCpuStrategy(c));
}

absl::StatusOr<std::unique_ptr<InterventionalStrategy>> MakeReference(
    const InterventionalContext& c, const InterventionalEngineOptions&) {
  return std::unique_ptr<InterventionalStrategy>(new ReferenceStrategy(c));
}

// Indexed by InterventionalStrategyId; "auto" prefers them in this order.
struct StrategyEntry {
  const char* name;
  Factory factory;
};
constexpr StrategyEntry kInterventionalFactories[kNumInterventionalStrategies] = {
    {"gpu", &MakeGpu},
    {"paths_cpu", &MakePathsCpu},
    {"reference", &MakeReference},
};

}  // namespace

const char* InterventionalStrategyName(InterventionalStrategyId id) {
  return kInterventionalFactories[static_cast<int>(id)].name;
}

absl::StatusOr<InterventionalStrategyId> ParseInterventionalStrategy(absl::string_view name) {
  for (int i = 0; i < kNumInterventionalStrategies; ++i) {
    if (name == kInterventionalFactories[i].name) return static_cast<InterventionalStrategyId>(i);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "interventional strategy '", name, "' is not one of auto, gpu, paths_cpu, reference"));
}

absl::StatusOr<std::unique_ptr<InterventionalEngine>> InterventionalEngine::Create(
    ForestPtr forest, PathLayoutPtr layout, RowsView background,
    const InterventionalEngineOptions& options, ThreadPool* pool) {
  if (forest == nullptr) return absl::InvalidArgumentError("InterventionalEngine: no model");
  if (absl::Status s = CheckBackground(*forest, background); !s.ok()) return s;
  if (options.max_linearized_layout_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_linearized_layout_bytes ",
                                                   options.max_linearized_layout_bytes, " < 0"));
  }
  int forced = -1;
  if (options.strategy != "auto") {
    absl::StatusOr<InterventionalStrategyId> id = ParseInterventionalStrategy(options.strategy);
    if (!id.ok()) return id.status();
    forced = static_cast<int>(*id);
  }
  InterventionalContext c;
  c.forest = forest;
  c.pool = pool;
  c.background_rows = background.rows;
  c.max_linearized_layout_bytes = options.max_linearized_layout_bytes;
  auto rows = std::make_shared<std::vector<float>>();
  rows->reserve(background.rows * background.cols);
  for (int64_t r = 0; r < background.rows; ++r) {
    rows->insert(rows->end(), background.Row(r), background.Row(r) + background.cols);
  }
  c.background = rows;
  // Models no engine can explain (linear leaves) keep the reference, which reports why per call.
  if (CheckExplainable(*forest).ok()) {
    if (layout == nullptr) {
      absl::StatusOr<PathLayoutPtr> built = BuildPathLayout(*forest);
      if (!built.ok()) return built.status();
      layout = *built;
      c.owns_layout = true;
    }
    absl::StatusOr<InterventionalLayoutPtr> il = BuildInterventionalLayout(
        *forest, *layout, MakeRowsView(rows->data(), background.rows, background.cols), pool);
    if (!il.ok()) return il.status();
    c.layout = layout;
    c.background_layout = *il;
    c.features = std::make_shared<const PlayerForms>(
        PlayerForms{layout, *il, std::make_shared<LazyLinearizedLayout>()});
    c.grouped_forms = std::make_shared<KeyedCache<const PlayerForms>>(kGroupedFormsCached);
  }
  std::vector<std::unique_ptr<InterventionalStrategy>> strategies;
  for (int i = 0; i < kNumInterventionalStrategies; ++i) {
    if (forced >= 0 && forced != i) continue;
    absl::StatusOr<std::unique_ptr<InterventionalStrategy>> s =
        kInterventionalFactories[i].factory(c, options);
    if (!s.ok()) {
      if (forced == i) return s.status();
      GROVE_LOG(WARNING) << "interventional strategy " << kInterventionalFactories[i].name
                         << " unavailable: " << s.status().ToString();
      continue;
    }
    if (*s != nullptr) strategies.push_back(std::move(*s));
  }
  if (strategies.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "interventional strategy '", options.strategy, "' cannot serve this model"));
  }
  // A forced strategy does not refuse feature groups: what it does not serve, the reference does.
  std::unique_ptr<InterventionalStrategy> reference;
  if (forced >= 0 && forced != static_cast<int>(InterventionalStrategyId::kReference)) {
    absl::StatusOr<std::unique_ptr<InterventionalStrategy>> built = MakeReference(c, options);
    if (!built.ok()) return built.status();
    reference = *std::move(built);
  }
  return std::unique_ptr<InterventionalEngine>(new InterventionalEngine(
      std::move(c), std::move(strategies), forced >= 0, std::move(reference)));
}

InterventionalEngine::InterventionalEngine(
    InterventionalContext context, std::vector<std::unique_ptr<InterventionalStrategy>> strategies,
    bool forced, std::unique_ptr<InterventionalStrategy> reference)
    : context_(std::move(context)),
      strategies_(std::move(strategies)),
      forced_(forced),
      reference_(std::move(reference)) {}

bool PrefersCpuForExact(int64_t rows, int threads) {
  return rows < kExactCpuRowsPerThread * std::max(1, threads);
}

absl::Status InterventionalEngine::Explain(RowsView rows, const InterventionalOptions& options,
                                           MatrixView<float> out, RunInfo* info) const {
  const double start = Now();
  if (absl::Status s = CheckInterventionalCall(*context_.forest, rows, options, out); !s.ok()) {
    return s;
  }
  const InterventionalStrategy* chosen = nullptr;
  const char* reason = "first strategy supporting the request";
  for (const auto& s : strategies_) {
    if (s->Supports(options)) {
      chosen = s.get();
      break;
    }
  }
  // The exact space in small calls: the CPU path form answers sooner (see PrefersCpuForExact).
  const int threads = context_.pool != nullptr ? context_.pool->num_threads() : 1;
  if (!forced_ && chosen != nullptr && chosen->id() == InterventionalStrategyId::kGpu &&
      IsExactSpace(*context_.forest, options.output_space) &&
      PrefersCpuForExact(rows.rows, threads)) {
    for (const auto& s : strategies_) {
      if (s->id() == InterventionalStrategyId::kPathsCpu && s->Supports(options)) {
        chosen = s.get();
        reason = "exact probability space, few rows per CPU thread";
        break;
      }
    }
  }
  if (chosen == nullptr && options.groups != nullptr && reference_ != nullptr) {
    chosen = reference_.get();
    reason = "feature groups the forced strategy does not serve: the reference";
  }
  if (chosen == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "interventional strategy '", strategies_[0]->name(), "' does not explain ",
        options.attribution == Attribution::kBanzhaf ? "Banzhaf " : "",
        options.interactions ? "interaction values" : "output space ",
        options.interactions ? "" : OutputSpaceName(options.output_space),
        options.groups != nullptr ? " for feature groups" : ""));
  }
  absl::Status status = chosen->Run(rows, options, out);
  if (info != nullptr) {
    info->device = chosen->device();
    info->strategy = absl::StrCat("interventional_", chosen->name());
    info->reason = forced_ && chosen != reference_.get() ? "" : reason;
    info->compute_seconds = Now() - start;
  }
  return status;
}

int64_t InterventionalEngine::DeviceBytes() const {
  int64_t total = 0;
  for (const auto& s : strategies_) total += s->DeviceBytes();
  if (context_.owns_layout) total += ResidentPathLayout::ResidentBytes(*context_.layout);
  return total;
}

std::vector<std::string> InterventionalEngine::StrategyNames() const {
  std::vector<std::string> names;
  for (const auto& s : strategies_) names.push_back(s->name());
  return names;
}

std::string InterventionalEngine::Describe() const {
  std::string masks = "no path layout";
  if (context_.background_layout != nullptr) {
    const InterventionalLayout& il = *context_.background_layout;
    masks = absl::StrFormat("%d distinct path masks (%.2f MB, %.3f s)", il.masks.size(),
                            il.HostBytes() / 1e6, il.build_seconds);
  }
  return absl::StrCat("interventional ", forced_ ? "forced" : "auto", " [",
                      absl::StrJoin(StrategyNames(), ", "), "], ", context_.background_rows,
                      " background rows, ", masks);
}

}  // namespace grove
