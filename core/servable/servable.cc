#include "core/servable/servable.h"

#include <atomic>
#include <memory>
#include <utility>

#include "absl/base/call_once.h"
#include "absl/strings/str_cat.h"
#include "core/explain/quadrature/banzhaf_engine.h"
#include "core/explain/explain.h"
#include "core/explain/explain_engine.h"
#include "core/explain/interventional/interventional.h"
#include "core/explain/interventional_engine.h"
#include "core/explain/path_layout_gpu.h"
#include "core/explain/paths.h"
#include "core/explain/saabas/saabas.h"
#include "core/predict/strategy_id.h"
#include "core/predict/predict.h"
#include "core/predict/predict_engine.h"

namespace grove {
namespace {

// One engine (or layout), built once by whichever call needs it first.
template <typename T>
struct Once {
  absl::once_flag once;
  std::shared_ptr<const T> value;
  absl::Status status;
  // `value` once it is built: what Peek reads while another thread may still be building it.
  std::atomic<const T*> built{nullptr};

  template <typename Build>
  absl::StatusOr<const T*> Get(const Build& build) {
    absl::call_once(once, [&] {
      absl::StatusOr<std::shared_ptr<const T>> made = build();
      if (made.ok()) {
        value = *std::move(made);
        built.store(value.get(), std::memory_order_release);
      } else {
        status = made.status();
      }
    });
    if (!status.ok()) return status;
    return value.get();
  }
  // The value when built, null before (never builds it).
  const T* Peek() const { return built.load(std::memory_order_acquire); }
};

// The family's "cpu" option means: no GPU, the selector among the CPU strategies.
bool CpuOnly(const EngineOptions& o, const std::string& strategy) {
  return o.device == Device::kCpu || strategy == "cpu";
}

absl::Status CheckOptions(const EngineOptions& o) {
#if !defined(GROVE_HAVE_CUDA)
  if (o.device == Device::kGpu) {
    return absl::FailedPreconditionError(
        "device \"gpu\" was asked for, but this build has no CUDA engines");
  }
#endif
  if (absl::StatusOr<std::optional<StrategyId>> p = ParseStrategy(o.predict_strategy); !p.ok()) {
    return p.status();
  }
  if (absl::Status s = CheckExplainStrategyName(o.explain_strategy); !s.ok()) return s;
  if (o.interventional_strategy != "auto" && o.interventional_strategy != "cpu") {
    if (absl::StatusOr<InterventionalStrategyId> id =
            ParseInterventionalStrategy(o.interventional_strategy);
        !id.ok()) {
      return id.status();
    }
  }
  return absl::OkStatus();
}

ExplainOptions MakeExplainOptions(Operation op, const RunParams& p) {
  ExplainOptions o;
  o.interactions = op == Operation::kInteractions || op == Operation::kBanzhafInteractions;
  o.iteration_begin = p.iteration_begin;
  o.iteration_end = p.iteration_end;
  o.groups = p.groups.get();
  return o;
}

PredictOptions MakePredictOptions(const RunParams& p) {
  PredictOptions o;
  o.kind = p.kind;
  o.iteration_begin = p.iteration_begin;
  o.iteration_end = p.iteration_end;
  return o;
}

}  // namespace

// The engines a servable shares with those WithBackground makes.
struct ServableEngines {
  ForestPtr forest;
  EngineOptions options;
  ThreadPool* pool = nullptr;
  absl::Status explainable;  // CheckExplainable: not OK for models no engine can explain
  Once<PredictEngine> predict;
  Once<PathLayout> layout;
  Once<ExplainEngine> explain;
  Once<BanzhafEngine> banzhaf;
  Once<SaabasEngine> saabas;
  std::unique_ptr<const InputSchema> schema;  // of `forest`, built with the servable

  absl::StatusOr<const PredictEngine*> Predict() {
    return predict.Get([&]() -> absl::StatusOr<std::shared_ptr<const PredictEngine>> {
      PredictEngineOptions p;
      p.use_gpu = options.device != Device::kCpu;
      p.strategy = options.predict_strategy;
      p.calibration_cache_dir = options.calibration_cache_dir;
      p.gpu_wait = options.gpu_wait;
      absl::StatusOr<std::unique_ptr<PredictEngine>> e = PredictEngine::Create(forest, p, pool);
      if (!e.ok()) return e.status();
      return std::shared_ptr<const PredictEngine>(*std::move(e));
    });
  }

  absl::StatusOr<PathLayoutPtr> Layout() {
    if (!explainable.ok()) return explainable;
    absl::StatusOr<const PathLayout*> l =
        layout.Get([&]() -> absl::StatusOr<PathLayoutPtr> { return BuildPathLayout(*forest); });
    if (!l.ok()) return l.status();
    return layout.value;
  }

  absl::StatusOr<const ExplainEngine*> Explain() {
    if (!explainable.ok()) return explainable;
    return explain.Get([&]() -> absl::StatusOr<std::shared_ptr<const ExplainEngine>> {
      absl::StatusOr<PathLayoutPtr> l = Layout();
      if (!l.ok()) return l.status();
      ExplainEngineOptions e;
      e.use_gpu = options.device != Device::kCpu;
      e.strategy = options.explain_strategy;
      absl::StatusOr<std::unique_ptr<ExplainEngine>> built =
          ExplainEngine::Create(forest, e, pool, *l);
      if (!built.ok()) return built.status();
      return std::shared_ptr<const ExplainEngine>(*std::move(built));
    });
  }

  // Built on the first Banzhaf call whatever EngineBuild says: few callers ask for them, and the
  // engine is a second quadrature layout of the model.
  absl::StatusOr<const BanzhafEngine*> Banzhaf() {
    if (!explainable.ok()) return explainable;
    return banzhaf.Get([&]() -> absl::StatusOr<std::shared_ptr<const BanzhafEngine>> {
      absl::StatusOr<PathLayoutPtr> l = Layout();
      if (!l.ok()) return l.status();
      BanzhafEngineOptions b;
      b.use_gpu = !CpuOnly(options, options.explain_strategy);
      absl::StatusOr<std::unique_ptr<BanzhafEngine>> built =
          BanzhafEngine::Create(forest, *l, b, pool);
      if (!built.ok()) return built.status();
      return std::shared_ptr<const BanzhafEngine>(*std::move(built));
    });
  }

  // One expected-value step per node and leaf value (a fifth of the nodes' memory, more with
  // vector leaves), built on the first Saabas call whatever EngineBuild says, as Banzhaf's.
  absl::StatusOr<const SaabasEngine*> Saabas() {
    if (!explainable.ok()) return explainable;
    return saabas.Get([&]() -> absl::StatusOr<std::shared_ptr<const SaabasEngine>> {
      absl::StatusOr<std::unique_ptr<SaabasEngine>> built = SaabasEngine::Create(forest, pool);
      if (!built.ok()) return built.status();
      return std::shared_ptr<const SaabasEngine>(*std::move(built));
    });
  }
};

struct Servable::Interventional {
  Once<InterventionalEngine> engine;
};

Servable::Servable(ForestPtr forest, std::shared_ptr<const Background> background,
                   EngineOptions options, std::shared_ptr<ServableEngines> engines)
    : forest_(std::move(forest)),
      background_(std::move(background)),
      options_(std::move(options)),
      engines_(std::move(engines)),
      interventional_(std::make_unique<Interventional>()) {}

Servable::~Servable() = default;

const InputSchema& Servable::input_schema() const { return *engines_->schema; }

int64_t Servable::background_rows() const {
  return background_ != nullptr ? background_->rows : 0;
}

const std::string& Servable::background_path() const {
  static const std::string* const kNone = new std::string();
  return background_ != nullptr ? background_->path : *kNone;
}

absl::Status Servable::BuildInterventional() const {
  if (background_ == nullptr) {
    return absl::FailedPreconditionError(
        options_.no_background_message.empty()
            ? "the model has no background data set for interventional SHAP"
            : options_.no_background_message);
  }
  if (!engines_->explainable.ok()) return engines_->explainable;
  absl::StatusOr<const InterventionalEngine*> e = interventional_->engine.Get(
      [&]() -> absl::StatusOr<std::shared_ptr<const InterventionalEngine>> {
        absl::StatusOr<PathLayoutPtr> layout = engines_->Layout();
        if (!layout.ok()) return layout.status();
        InterventionalEngineOptions o;
        o.use_gpu = !CpuOnly(options_, options_.interventional_strategy);
        if (options_.interventional_strategy != "cpu") {
          o.strategy = options_.interventional_strategy;
        }
        absl::StatusOr<std::unique_ptr<InterventionalEngine>> built = InterventionalEngine::Create(
            forest_, *layout, background_->view(), o, engines_->pool);
        if (!built.ok()) {
          if (background_->path.empty()) return built.status();
          return absl::Status(built.status().code(),
                              absl::StrCat(background_->path, ": ", built.status().message()));
        }
        return std::shared_ptr<const InterventionalEngine>(*std::move(built));
      });
  return e.status();
}

absl::Status Servable::Explainable() const { return engines_->explainable; }

absl::Status Servable::Available(Operation op) const {
  switch (op) {
    case Operation::kPredict:
      return engines_->Predict().status();
    case Operation::kExplain:
    case Operation::kInteractions:
      return engines_->Explain().status();
    case Operation::kInterventional:
    case Operation::kInterventionalInteractions:
    case Operation::kInterventionalBanzhaf:
    case Operation::kInterventionalBanzhafInteractions:
      return BuildInterventional();
    case Operation::kBanzhaf:
    case Operation::kBanzhafInteractions:
      return engines_->Banzhaf().status();
    case Operation::kSaabas:
      return engines_->Saabas().status();
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown operation ", static_cast<int>(op)));
}

int64_t Servable::Width(Operation op, const RunParams& params) const {
  switch (op) {
    case Operation::kPredict:
      return PredictWidth(*forest_, MakePredictOptions(params));
    case Operation::kExplain:
    case Operation::kInterventional:
    case Operation::kBanzhaf:
    case Operation::kInterventionalBanzhaf:
    case Operation::kSaabas:
      return ExplainWidth(*forest_, false, params.groups.get());
    case Operation::kInteractions:
    case Operation::kInterventionalInteractions:
    case Operation::kBanzhafInteractions:
    case Operation::kInterventionalBanzhafInteractions:
      return ExplainWidth(*forest_, true, params.groups.get());
  }
  return 0;
}

absl::Status Servable::Run(Operation op, const RunParams& params, RowsView rows,
                           MatrixView<float> out, RunInfo* info) const {
  RunInfo ignored;
  if (info == nullptr) info = &ignored;
  switch (op) {
    case Operation::kPredict: {
      absl::StatusOr<const PredictEngine*> e = engines_->Predict();
      if (!e.ok()) return e.status();
      return (*e)->Predict(rows, MakePredictOptions(params), out, info);
    }
    case Operation::kExplain:
    case Operation::kInteractions: {
      absl::StatusOr<const ExplainEngine*> e = engines_->Explain();
      if (!e.ok()) return e.status();
      return (*e)->Explain(rows, MakeExplainOptions(op, params), out, info);
    }
    case Operation::kBanzhaf:
    case Operation::kBanzhafInteractions: {
      if (params.groups != nullptr) {
        // Groups are the explanation engine's reference (ExplainOptions::attribution).
        absl::StatusOr<const ExplainEngine*> e = engines_->Explain();
        if (!e.ok()) return e.status();
        ExplainOptions o = MakeExplainOptions(op, params);
        o.attribution = Attribution::kBanzhaf;
        return (*e)->Explain(rows, o, out, info);
      }
      absl::StatusOr<const BanzhafEngine*> e = engines_->Banzhaf();
      if (!e.ok()) return e.status();
      return (*e)->Explain(rows, MakeExplainOptions(op, params), out, info);
    }
    case Operation::kSaabas: {
      absl::StatusOr<const SaabasEngine*> e = engines_->Saabas();
      if (!e.ok()) return e.status();
      ExplainOptions o = MakeExplainOptions(op, params);
      o.attribution = Attribution::kSaabas;
      return (*e)->Explain(rows, o, out, info);
    }
    case Operation::kInterventional:
    case Operation::kInterventionalInteractions:
    case Operation::kInterventionalBanzhaf:
    case Operation::kInterventionalBanzhafInteractions: {
      if (absl::Status s = BuildInterventional(); !s.ok()) return s;
      InterventionalOptions o;
      o.output_space = params.output_space;
      o.interactions = op == Operation::kInterventionalInteractions ||
                       op == Operation::kInterventionalBanzhafInteractions;
      if (op == Operation::kInterventionalBanzhaf ||
          op == Operation::kInterventionalBanzhafInteractions) {
        o.attribution = Attribution::kBanzhaf;
      }
      o.iteration_begin = params.iteration_begin;
      o.iteration_end = params.iteration_end;
      o.groups = params.groups.get();
      return interventional_->engine.Peek()->Explain(rows, o, out, info);
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown operation ", static_cast<int>(op)));
}

absl::Status Servable::PredictRow(const float* row, const RunParams& params, float* out) const {
  absl::StatusOr<const PredictEngine*> e = engines_->Predict();
  if (!e.ok()) return e.status();
  return (*e)->PredictRow(row, MakePredictOptions(params), out);
}

std::string Servable::Describe(Operation op) const {
  if (absl::Status s = Available(op); !s.ok()) return absl::StrCat("unavailable: ", s.message());
  switch (op) {
    case Operation::kPredict:
      return engines_->predict.Peek()->Describe();
    case Operation::kExplain:
    case Operation::kInteractions:
      return engines_->explain.Peek()->Describe();
    case Operation::kBanzhaf:
    case Operation::kBanzhafInteractions:
      return engines_->banzhaf.Peek()->Describe();
    case Operation::kSaabas:
      return engines_->saabas.Peek()->Describe();
    case Operation::kInterventional:
    case Operation::kInterventionalInteractions:
    case Operation::kInterventionalBanzhaf:
    case Operation::kInterventionalBanzhafInteractions:
      return interventional_->engine.Peek()->Describe();
  }
  return "unknown operation";
}

std::string Servable::PathLayoutStats() const {
  absl::StatusOr<PathLayoutPtr> layout = engines_->Layout();
  return layout.ok() ? (*layout)->stats.Describe() : "";
}

int64_t Servable::DeviceBytes() const {
  int64_t bytes = 0;
  if (const PredictEngine* p = engines_->predict.Peek()) bytes += p->DeviceBytes();
  if (const ExplainEngine* e = engines_->explain.Peek()) bytes += e->DeviceBytes();
  if (const BanzhafEngine* b = engines_->banzhaf.Peek()) bytes += b->DeviceBytes();
  if (const InterventionalEngine* i = interventional_->engine.Peek()) bytes += i->DeviceBytes();
  // The path layout's GPU copies, held once for the SHAP and interventional engines.
  if (const PathLayout* l = engines_->layout.Peek()) bytes += ResidentPathLayout::ResidentBytes(*l);
  return bytes;
}

absl::StatusOr<CachePin> Servable::PinGroups(const FeatureGroups& groups) const {
  absl::StatusOr<const ExplainEngine*> e = engines_->Explain();
  if (!e.ok()) return CachePin();
  return (*e)->PinGroups(groups);
}

KeyedCacheStats Servable::GroupedLayouts() const {
  const ExplainEngine* e = engines_->explain.Peek();
  return e != nullptr ? e->grouped_layouts() : KeyedCacheStats();
}

absl::StatusOr<ServablePtr> Servable::WithBackground(
    std::shared_ptr<const Background> background) const {
  if (background != nullptr) {
    if (absl::Status s = CheckBackground(*forest_, background->view()); !s.ok()) {
      if (background->path.empty()) return s;
      return absl::Status(s.code(), absl::StrCat(background->path, ": ", s.message()));
    }
  }
  auto servable = std::shared_ptr<Servable>(
      new Servable(forest_, std::move(background), options_, engines_));
  if (options_.build == EngineBuild::kAtLoad && servable->background_ != nullptr &&
      engines_->explainable.ok()) {
    if (absl::Status s = servable->BuildInterventional(); !s.ok()) return s;
  }
  return ServablePtr(std::move(servable));
}

absl::StatusOr<ServablePtr> BuildServable(ForestPtr forest,
                                          std::shared_ptr<const Background> background,
                                          const EngineOptions& options, ThreadPool* pool) {
  if (forest == nullptr) return absl::InvalidArgumentError("BuildServable: no model");
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  auto engines = std::make_shared<ServableEngines>();
  engines->forest = forest;
  engines->options = options;
  engines->pool = pool;
  engines->explainable = CheckExplainable(*forest);
  engines->schema = std::make_unique<const InputSchema>(*forest);
  if (options.build == EngineBuild::kAtLoad) {
    // A model that cannot predict cannot serve; one that cannot be explained still predicts (its
    // explanation operations answer why).
    if (absl::Status s = engines->Predict().status(); !s.ok()) return s;
    engines->Explain().IgnoreError();
  }
  auto servable = std::shared_ptr<Servable>(
      new Servable(std::move(forest), nullptr, options, std::move(engines)));
  if (background == nullptr) return ServablePtr(std::move(servable));
  return servable->WithBackground(std::move(background));
}

}  // namespace grove
