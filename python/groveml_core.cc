// groveml._core: Grove's engines inside a Python process (nanobind).
//
// The module does what `grove predict` / `grove explain` do on each chunk of rows
// (client/cli_local.cc): the same loader, the same Servable (core/servable/servable.h) with the
// same options, float64 rows turned into float rows by the same DoubleRowConverter, so that a row gives the CLI's numbers bit for bit. The Python side
// (groveml/model.py) splits the input into the CLI's chunks (chunk_rows = AutoChunkRows) and hands
// each chunk and its slice of the result here; every call releases the GIL while the engines run.
//
// Errors become Python exceptions by status code: INVALID_ARGUMENT / OUT_OF_RANGE ValueError,
// NOT_FOUND FileNotFoundError, PERMISSION_DENIED PermissionError, UNIMPLEMENTED
// NotImplementedError, anything else RuntimeError; the message is the status message.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/log.h"
#include "core/common/mutex_mode.h"
#include "core/common/thread_pool.h"
#include "core/gpu/device_set.h"
#include "core/model/catboost_hash.h"
#include "core/model/double_rows.h"
#include "core/model/feature_groups.h"
#include "core/model/forest_stats.h"
#include "core/model/loader.h"
#include "core/servable/background.h"
#include "core/servable/residuals.h"
#include "core/servable/result_columns.h"
#include "core/servable/servable.h"

namespace nb = nanobind;

namespace grove::python {
namespace {

template <typename T>
using InRows = nb::ndarray<const T, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using OutRows = nb::ndarray<float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using InRow = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using OutRow = nb::ndarray<float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// Raises the status as a Python exception (the GIL must be held).
void ThrowIfError(const absl::Status& status) {
  if (status.ok()) return;
  PyObject* type = PyExc_RuntimeError;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      type = PyExc_ValueError;
      break;
    case absl::StatusCode::kNotFound:
      type = PyExc_FileNotFoundError;
      break;
    case absl::StatusCode::kPermissionDenied:
      type = PyExc_PermissionError;
      break;
    case absl::StatusCode::kUnimplemented:
      type = PyExc_NotImplementedError;
      break;
    default:
      break;
  }
  PyErr_SetString(type, std::string(status.message()).c_str());
  throw nb::python_error();
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  ThrowIfError(value.status());
  return *std::move(value);
}

// "auto": the GPU engines when built and a GPU is visible (the CLI's default); "cpu": none (the
// CLI's --no-gpu); "cuda": the GPU engines, refused when there are none, so that a job meant for
// a GPU does not run on the CPU unnoticed.
absl::StatusOr<Device> ParseDeviceArg(const std::string& device) {
  if (device == "auto") return Device::kAuto;
  if (device == "cpu") return Device::kCpu;
  if (device != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("device must be 'auto', 'cpu' or 'cuda' (got '", device, "')"));
  }
#ifndef GROVE_HAVE_CUDA
  return absl::FailedPreconditionError(
      "device='cuda': this build of groveml has no CUDA engines (build it where nvcc is found)");
#else
  if (gpu::VisibleGpuCount() == 0) {
    return absl::FailedPreconditionError("device='cuda': no GPU is visible to this process");
  }
  return Device::kGpu;
#endif
}

absl::StatusOr<OutputKind> ParseKind(const std::string& kind) {
  absl::StatusOr<OutputKind> k = ParseOutputKind(kind);
  if (k.ok()) return k;
  return absl::InvalidArgumentError(
      absl::StrCat("kind must be 'prediction', 'margin' or 'leaf' (got '", kind, "')"));
}

// Checks `out` against the rows and the result width before the engines see them.
absl::Status CheckOut(int64_t rows, int64_t width, const OutRows& out) {
  if (static_cast<int64_t>(out.shape(0)) != rows || static_cast<int64_t>(out.shape(1)) != width) {
    return absl::InvalidArgumentError(absl::StrCat("out has shape (", out.shape(0), ", ",
                                                   out.shape(1), "), expected (", rows, ", ", width,
                                                   ")"));
  }
  return absl::OkStatus();
}

RunParams Params(const std::string& kind, int begin, int end) {
  RunParams p;
  p.kind = ValueOrThrow(ParseKind(kind));
  p.iteration_begin = begin;
  p.iteration_end = end;
  return p;
}

// A model's Servable, its engines built on first use (a predict-only job does not build the
// path layout of explanations), as `grove` builds them: the strategy applies to every engine
// family. Thread-safe: the Servable is.
class Engine {
 public:
  Engine(ForestPtr forest, const std::string& device, int threads, const std::string& strategy)
      : converter_(*forest) {
    pool_ = MakeCallerPool(threads);
    EngineOptions options;
    options.device = ValueOrThrow(ParseDeviceArg(device));
    options.build = EngineBuild::kOnFirstUse;
    options.gpu_wait = GpuWait::kPoll;  // the caller's thread waits for its answer anyway
    options.predict_strategy = strategy;
    options.explain_strategy = strategy;
    options.interventional_strategy = strategy;
    servable_ = ValueOrThrow(BuildServable(std::move(forest), nullptr, options, pool_.get()));
    // The prediction engine now, so that a bad model or strategy fails the load, as before.
    ThrowIfError(servable_->Available(Operation::kPredict));
  }

  static std::unique_ptr<Engine> Load(const std::string& path, const std::string& device,
                                      int threads, const std::string& strategy) {
    absl::StatusOr<ForestPtr> forest;
    {
      nb::gil_scoped_release release;
      forest = LoadModelFile(path);
    }
    return std::make_unique<Engine>(ValueOrThrow(std::move(forest)), device, threads, strategy);
  }

  static std::unique_ptr<Engine> FromBytes(nb::bytes data, const std::string& source,
                                           const std::string& device, int threads,
                                           const std::string& strategy) {
    std::string_view bytes(data.c_str(), data.size());
    absl::StatusOr<ForestPtr> forest;
    {
      nb::gil_scoped_release release;
      forest = LoadModelBytes(bytes, source);
    }
    return std::make_unique<Engine>(ValueOrThrow(std::move(forest)), device, threads, strategy);
  }

  const Forest& forest() const { return servable_->forest(); }
  const Servable& servable() const { return *servable_; }
  const DoubleRowConverter& converter() const { return converter_; }

  // The players of an explanation: `groups_json` (a JSON object of groups, as groups.json)
  // resolved against the model; "" for the model's features (null).
  // The last grouping is kept: a call explains its rows chunk by chunk with the same text.
  FeatureGroupsPtr Groups(const std::string& groups_json) const {
    if (groups_json.empty()) return nullptr;
    {
      std::lock_guard<std::mutex> lock(groups_mu_);
      if (groups_json == last_groups_json_) return last_groups_;
    }
    std::vector<GroupSpec> spec = ValueOrThrow(ParseFeatureGroupsJson(groups_json, "groups"));
    FeatureGroupsPtr groups =
        ValueOrThrow(ResolveFeatureGroups(spec, forest().num_features, forest().feature_names));
    std::lock_guard<std::mutex> lock(groups_mu_);
    last_groups_json_ = groups_json;
    last_groups_ = groups;
    return groups;
  }

  // Groups() for path-dependent calls, pinned (Servable::PinGroups) when the grouping changes: its
  // grouped layout, and on a GPU the device copy treeshap_gpu explains it with, is built once for
  // the calls that follow instead of a request grouping's CPU path.
  FeatureGroupsPtr PinnedGroups(const std::string& groups_json) const {
    FeatureGroupsPtr groups = Groups(groups_json);
    if (groups == nullptr) return nullptr;
    {
      std::lock_guard<std::mutex> lock(groups_mu_);
      if (pinned_groups_ == groups) return groups;
    }
    absl::StatusOr<CachePin> pin;
    {
      nb::gil_scoped_release release;
      pin = servable_->PinGroups(*groups);
    }
    ThrowIfError(pin.status());
    CachePin previous;  // released outside the lock (it may free a device copy)
    {
      std::lock_guard<std::mutex> lock(groups_mu_);
      pinned_groups_ = groups;
      previous = std::exchange(groups_pin_, *std::move(pin));
    }
    return groups;
  }

  int64_t PredictWidthOf(const std::string& kind, int begin, int end) const {
    return servable_->Width(Operation::kPredict, Params(kind, begin, end));
  }

  // One float32 row on the calling thread (Servable::PredictRow), the GIL held: a row takes
  // microseconds, about what releasing and re-taking the GIL costs.
  void PredictRow(const InRow& row, OutRow out, const std::string& kind, int begin, int end) {
    const RunParams params = Params(kind, begin, end);
    if (row.shape(0) != static_cast<size_t>(forest().num_features)) {
      ThrowIfError(absl::InvalidArgumentError(absl::StrCat(
          "the row has ", row.shape(0), " values; the model has ", forest().num_features,
          " features")));
    }
    const int64_t width = servable_->Width(Operation::kPredict, params);
    if (out.shape(0) != static_cast<size_t>(width)) {
      ThrowIfError(absl::InvalidArgumentError(
          absl::StrCat("out has ", out.shape(0), " entries; the result has ", width)));
    }
    ThrowIfError(servable_->PredictRow(row.data(), params, out.data()));
  }

  template <typename T>
  void Predict(const InRows<T>& rows, OutRows out, const std::string& kind, int begin, int end) {
    Run(*servable_, Operation::kPredict, Params(kind, begin, end), rows, out);
  }

  // `attribution`: a name of kAttributions (core/model/outputs.h); `groups`: as Groups takes them.
  template <typename T>
  void Explain(const InRows<T>& rows, OutRows out, bool interactions,
               const std::string& attribution, int begin, int end, const std::string& groups) {
    RunParams params;
    params.iteration_begin = begin;
    params.iteration_end = end;
    const Operation op = ValueOrThrow(ExplainOperationOf(
        ExplainMethod::kPathDependent, ValueOrThrow(ParseAttribution(attribution)), interactions));
    // Saabas attributions read no path layout: a grouping needs no pinned copy.
    params.groups = op == Operation::kSaabas ? Groups(groups) : PinnedGroups(groups);
    Run(*servable_, op, params, rows, out);
  }

  // `op` of `servable` (this model's, or one with a background) over `rows` into `out`, the GIL
  // released while it runs.
  template <typename T>
  void Run(const Servable& servable, Operation op, const RunParams& params, const InRows<T>& rows,
           OutRows out) const {
    ThrowIfError(CheckOut(rows.shape(0), servable.Width(op, params), out));
    absl::Status status;
    {
      nb::gil_scoped_release release;
      status = WithFloatRows(rows, [&](RowsView view) {
        RunInfo info;
        return servable.Run(op, params, view, OutView(out), &info);
      });
    }
    ThrowIfError(status);
  }

  // What runs where, as `grove explain --verbose` and `grove inspect` name it.
  std::vector<std::pair<std::string, std::string>> Describe() {
    std::vector<std::pair<std::string, std::string>> out;
    out.emplace_back("predict_engine", servable_->Describe(Operation::kPredict));
    std::string explain;
    {
      nb::gil_scoped_release release;
      explain = servable_->Describe(Operation::kExplain);
    }
    out.emplace_back("explain_engine", std::move(explain));
    return out;
  }

  // Runs `fn` on the rows as floats: float32 rows as they are, float64 rows converted for the
  // model (core/model/double_rows.h), as the CLI converts the doubles it parses.
  template <typename T, typename Fn>
  absl::Status WithFloatRows(const InRows<T>& rows, const Fn& fn) const {
    const int64_t n = rows.shape(0);
    const int64_t cols = rows.shape(1);
    if (cols != forest().num_features) {
      return absl::InvalidArgumentError(absl::StrCat("rows have ", cols, " columns, the model has ",
                                                     forest().num_features, " features"));
    }
    if constexpr (std::is_same_v<T, float>) {
      return fn(MakeRowsView(rows.data(), n, cols));
    } else {
      std::vector<float> converted(static_cast<size_t>(n * cols));
      converter_.ConvertRows(rows.data(), n, converted.data());
      return fn(MakeRowsView(converted.data(), n, cols));
    }
  }

  static MatrixView<float> OutView(OutRows& out) {
    return MakeMatrixView(out.data(), static_cast<int64_t>(out.shape(0)),
                          static_cast<int64_t>(out.shape(1)));
  }

 private:
  DoubleRowConverter converter_;
  mutable std::mutex groups_mu_;
  mutable std::string last_groups_json_;  // guarded by groups_mu_
  mutable FeatureGroupsPtr last_groups_;  // guarded by groups_mu_
  std::unique_ptr<ThreadPool> pool_;  // before servable_: the servable's engines use it
  ServablePtr servable_;
  // After servable_: released before the engines whose layouts they keep.
  mutable FeatureGroupsPtr pinned_groups_;  // guarded by groups_mu_: what groups_pin_ keeps
  mutable CachePin groups_pin_;             // guarded by groups_mu_
};

// Interventional SHAP over one background data set: the model's Servable with that background
// (the CLI's --background), from a background file or from float64 rows converted as that file's
// values are. The Python object of `engine` is kept alive as long as this one (keep_alive below).
class Interventional {
 public:
  Interventional(Engine* engine, Background background) : engine_(engine) {
    absl::StatusOr<ServablePtr> s;
    {
      nb::gil_scoped_release release;
      s = engine_->servable().WithBackground(
          std::make_shared<const Background>(std::move(background)));
      if (s.ok()) {
        // Preprocess the background now, as the load of a background always did.
        if (absl::Status a = (*s)->Available(Operation::kInterventional); !a.ok()) s = a;
      }
    }
    servable_ = ValueOrThrow(std::move(s));
  }

  static std::unique_ptr<Interventional> FromFile(Engine* engine, const std::string& path) {
    Background background = ValueOrThrow(LoadBackgroundFile(engine->forest(), path));
    return std::make_unique<Interventional>(engine, std::move(background));
  }

  // `values`: rows x features doubles, bounded like a background file's rows.
  static std::unique_ptr<Interventional> FromRows(Engine* engine, const InRows<double>& values) {
    const Forest& forest = engine->forest();
    const int64_t rows = values.shape(0);
    if (rows < 1 || rows > kMaxBackgroundRows) {
      ThrowIfError(absl::InvalidArgumentError(absl::StrCat(
          "background has ", rows, " rows; it must have 1 to ", kMaxBackgroundRows, " rows")));
    }
    if (static_cast<int64_t>(values.shape(1)) != forest.num_features) {
      ThrowIfError(absl::InvalidArgumentError(absl::StrCat("background has ", values.shape(1),
                                                           " columns, the model has ",
                                                           forest.num_features, " features")));
    }
    Background background;
    background.rows = rows;
    background.cols = forest.num_features;
    background.values.resize(static_cast<size_t>(rows * background.cols));
    engine->converter().ConvertRows(values.data(), rows, background.values.data());
    return std::make_unique<Interventional>(engine, std::move(background));
  }

  template <typename T>
  void Explain(const InRows<T>& rows, OutRows out, const std::string& output_space,
               bool interactions, const std::string& attribution, int begin, int end,
               const std::string& groups) {
    RunParams params;
    params.groups = engine_->Groups(groups);
    params.output_space = ValueOrThrow(ParseOutputSpace(output_space));
    params.iteration_begin = begin;
    params.iteration_end = end;
    engine_->Run(*servable_,
                 ValueOrThrow(ExplainOperationOf(ExplainMethod::kInterventional,
                                                 ValueOrThrow(ParseAttribution(attribution)),
                                                 interactions)),
                 params, rows, out);
  }

  int64_t rows() const { return servable_->background_rows(); }
  std::string Describe() const { return servable_->Describe(Operation::kInterventional); }

 private:
  Engine* engine_;
  ServablePtr servable_;
};

std::vector<std::string> ResultNames(const std::vector<std::string>& feature_names, int num_outputs,
                                     bool explain, bool interactions, const std::string& kind,
                                     int64_t width) {
  ResultColumns columns;
  columns.feature_names = feature_names;
  columns.num_outputs = num_outputs;
  columns.explain = explain;
  columns.interactions = interactions;
  columns.kind = ValueOrThrow(ParseKind(kind));
  columns.width = width;
  return ResultColumnNames(columns);
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "Grove's engines in-process (use groveml.Model)";
  DisableMutexDeadlockDetection();  // see core/common/mutex_mode.h
  // As the `grove` CLI: the engines' warnings and errors on stderr, not their load-time notes.
  SetMinLogSeverity(LogSeverity::kWarning);
#ifdef GROVE_HAVE_CUDA
  m.attr("has_cuda") = true;
#else
  m.attr("has_cuda") = false;
#endif
  m.def("visible_gpus", [] { return gpu::VisibleGpuCount(); });
  // How explain(..., residuals=True) computes residuals (groved's residual_arithmetic).
  m.attr("residual_arithmetic") = kResidualArithmetic;
  // The accepted `attribution` names, from the core's one table (groveml.model.ATTRIBUTIONS).
  nb::list attributions;
  for (Attribution a : kAttributions) attributions.append(AttributionName(a));
  m.attr("attributions") = nb::tuple(attributions);
  m.def("chunk_rows", &AutoChunkRows, nb::arg("in_cols"), nb::arg("out_cols"),
        "Rows per engine call of `grove` for rows of in_cols values and results of out_cols.");
  m.def("result_column_names", &ResultNames, nb::arg("feature_names"), nb::arg("num_outputs"),
        nb::arg("explain"), nb::arg("interactions"), nb::arg("kind"), nb::arg("width"),
        "Column names of a result, as `grove --output-header` writes them.");
  m.def(
      "catboost_category_hashes",
      [](const std::vector<std::string>& names) {
        std::vector<uint32_t> out(names.size());
        for (size_t i = 0; i < names.size(); ++i) out[i] = CatboostCategoryHash(names[i]);
        return out;
      },
      nb::arg("names"),
      "CatBoost's hash of each category name (FeatureCategories.hashes of a served model).");

  nb::class_<Engine>(m, "Engine")
      .def_static("load", &Engine::Load, nb::arg("path"), nb::arg("device") = "auto",
                  nb::arg("threads") = 0, nb::arg("strategy") = "auto")
      .def_static("from_bytes", &Engine::FromBytes, nb::arg("data"), nb::arg("source"),
                  nb::arg("device") = "auto", nb::arg("threads") = 0, nb::arg("strategy") = "auto")
      .def_prop_ro("num_features", [](const Engine& e) { return e.forest().num_features; })
      .def_prop_ro("num_outputs", [](const Engine& e) { return e.forest().num_outputs; })
      .def_prop_ro("num_iterations", [](const Engine& e) { return e.forest().num_iterations; })
      .def_prop_ro("num_trees",
                   [](const Engine& e) { return static_cast<int64_t>(e.forest().trees.size()); })
      .def_prop_ro("prediction_width", [](const Engine& e) { return e.forest().PredictionWidth(); })
      .def_prop_ro("feature_names",
                   [](const Engine& e) {
                     return FeatureNamesOrDefault(e.forest().feature_names,
                                                  e.forest().num_features);
                   })
      .def_prop_ro("stored_feature_names", [](const Engine& e) { return e.forest().feature_names; })
      .def_prop_ro("feature_types", [](const Engine& e) { return e.forest().feature_types; })
      // {feature name: categories in code order} as the model file records them (strings, or
      // numbers: ints where integral); features without recorded categories are left out.
      .def_prop_ro("categories",
                   [](const Engine& e) {
                     nb::dict out;
                     for (const NamedCategories& c : RecordedCategories(e.forest())) {
                       nb::list values;
                       for (const std::string& s : c.categories->strings) {
                         values.append(nb::str(s.data(), s.size()));
                       }
                       for (double v : c.categories->numbers) {
                         if (v == std::floor(v) && std::abs(v) < 9.0e15) {
                           values.append(nb::int_(static_cast<int64_t>(v)));
                         } else {
                           values.append(nb::float_(v));
                         }
                       }
                       out[nb::str(c.name.data(), c.name.size())] = values;
                     }
                     return out;
                   })
      // {feature name: index} of the features whose categories the model records as hashes
      // (CatBoost's one-hot features): their names are coded by code_names.
      .def_prop_ro("hashed_categories",
                   [](const Engine& e) {
                     nb::dict out;
                     for (const NamedCategories& c : RecordedCategories(e.forest())) {
                       if (c.categories->hashed()) {
                         out[nb::str(c.name.data(), c.name.size())] = nb::int_(c.feature);
                       }
                     }
                     return out;
                   })
      // The codes of category names of feature `feature` (CategoryCodes: as groved and `grove`
      // code them); ValueError for a name the model's library refuses.
      .def("code_names",
           [](const Engine& e, int64_t feature, const std::vector<std::string>& names) {
             const CategoryCodes* coder = ValueOrThrow(e.servable().input_schema().Coder(feature));
             std::vector<double> codes(names.size());
             for (size_t i = 0; i < names.size(); ++i) codes[i] = ValueOrThrow(coder->Code(names[i]));
             return codes;
           })
      .def_prop_ro("format",
                   [](const Engine& e) { return std::string(ModelFormatName(e.forest().format)); })
      .def_prop_ro("objective", [](const Engine& e) { return e.forest().objective.name; })
      .def_prop_ro("link",
                   [](const Engine& e) { return std::string(LinkName(e.forest().objective.link)); })
      .def_prop_ro("explainable",
                   [](const Engine& e) { return e.servable().Explainable().ok(); })
      .def("stats",
           [](const Engine& e) {
             std::vector<std::pair<std::string, std::string>> out;
             for (const Stat& s : ForestStats(e.forest())) {
               out.emplace_back(s.key,
                                s.kind == StatKind::kList ? absl::StrJoin(s.list, ",") : s.value);
             }
             return out;
           })
      .def("describe", &Engine::Describe)
      .def("predict_width", &Engine::PredictWidthOf, nb::arg("kind"), nb::arg("iteration_begin"),
           nb::arg("iteration_end"))
      .def(
          "explain_width",
          [](const Engine& e, bool interactions, const std::string& groups) {
            RunParams params;
            params.groups = e.Groups(groups);
            return e.servable().Width(
                interactions ? Operation::kInteractions : Operation::kExplain, params);
          },
          nb::arg("interactions"), nb::arg("groups") = "")
      // (name, member feature indices) of each column of grouped values, in column order.
      .def(
          "groups",
          [](const Engine& e, const std::string& groups) {
            std::vector<std::pair<std::string, std::vector<int32_t>>> out;
            const FeatureGroupsPtr g = e.Groups(groups);
            for (int i = 0; g != nullptr && i < g->num_groups(); ++i) {
              out.emplace_back(g->names[i], g->members[i]);
            }
            return out;
          },
          nb::arg("groups"))
      .def("predict_row", &Engine::PredictRow, nb::arg("row").noconvert(),
           nb::arg("out").noconvert(), nb::arg("kind"), nb::arg("iteration_begin"),
           nb::arg("iteration_end"))
      .def("predict", &Engine::Predict<float>, nb::arg("rows").noconvert(),
           nb::arg("out").noconvert(), nb::arg("kind"), nb::arg("iteration_begin"),
           nb::arg("iteration_end"))
      .def("predict", &Engine::Predict<double>, nb::arg("rows").noconvert(),
           nb::arg("out").noconvert(), nb::arg("kind"), nb::arg("iteration_begin"),
           nb::arg("iteration_end"))
      .def("explain", &Engine::Explain<float>, nb::arg("rows").noconvert(),
           nb::arg("out").noconvert(), nb::arg("interactions"), nb::arg("attribution"),
           nb::arg("iteration_begin"), nb::arg("iteration_end"), nb::arg("groups") = "")
      .def("explain", &Engine::Explain<double>, nb::arg("rows").noconvert(),
           nb::arg("out").noconvert(), nb::arg("interactions"), nb::arg("attribution"),
           nb::arg("iteration_begin"), nb::arg("iteration_end"), nb::arg("groups") = "");

  nb::class_<Interventional>(m, "Interventional")
      .def_static("from_file", &Interventional::FromFile, nb::arg("engine"), nb::arg("path"),
                  nb::keep_alive<0, 1>())
      .def_static("from_rows", &Interventional::FromRows, nb::arg("engine"),
                  nb::arg("values").noconvert(), nb::keep_alive<0, 1>())
      .def_prop_ro("rows", &Interventional::rows)
      .def("describe", &Interventional::Describe)
      .def("explain", &Interventional::Explain<float>, nb::arg("rows").noconvert(),
           nb::arg("out").noconvert(), nb::arg("output_space"), nb::arg("interactions"),
           nb::arg("attribution"), nb::arg("iteration_begin"), nb::arg("iteration_end"),
           nb::arg("groups") = "")
      .def("explain", &Interventional::Explain<double>, nb::arg("rows").noconvert(),
           nb::arg("out").noconvert(), nb::arg("output_space"), nb::arg("interactions"),
           nb::arg("attribution"), nb::arg("iteration_begin"), nb::arg("iteration_end"),
           nb::arg("groups") = "");
}

}  // namespace grove::python
