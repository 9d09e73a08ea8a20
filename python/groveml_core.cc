// groveml._core: Grove's engines inside a Python process (nanobind).
//
// The module does what `grove predict` / `grove explain` do on each chunk of rows
// (client/cli_local.cc): the same loader, the same engines (PredictEngine, ExplainEngine,
// InterventionalEngine) with the same options, float64 rows turned into float rows by the same
// DoubleRowConverter, so that a row gives the CLI's numbers bit for bit. The Python side
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
#include "client/cli_local.h"
#include "core/common/log.h"
#include "core/common/mutex_mode.h"
#include "core/common/thread_pool.h"
#include "core/explain/background.h"
#include "core/explain/explain.h"
#include "core/explain/explain_engine.h"
#include "core/explain/interventional.h"
#include "core/explain/interventional_engine.h"
#include "core/gpu/device_set.h"
#include "core/model/double_rows.h"
#include "core/model/loader.h"
#include "core/predict/predict.h"
#include "core/predict/predict_engine.h"

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

// The CLI's --threads: the calling thread works too, so threads - 1 workers (none for 1).
std::unique_ptr<ThreadPool> MakePool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (threads <= 1) return nullptr;
  return std::make_unique<ThreadPool>(threads - 1);
}

// "auto": the GPU engines when built and a GPU is visible (the CLI's default); "cpu": none (the
// CLI's --no-gpu); "cuda": the GPU engines, refused when there are none, so that a job meant for
// a GPU does not run on the CPU unnoticed.
absl::StatusOr<bool> UseGpu(const std::string& device) {
  if (device == "auto") return true;
  if (device == "cpu") return false;
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
  return true;
#endif
}

absl::StatusOr<OutputKind> ParseKind(const std::string& kind) {
  if (kind == "prediction") return OutputKind::kPrediction;
  if (kind == "margin") return OutputKind::kMargin;
  if (kind == "leaf") return OutputKind::kLeaf;
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

// A model's engines. Thread-safe: the engines are, and the explain engine is made once under a
// mutex on the first explanation (a predict-only job does not build the path layout).
class Engine {
 public:
  Engine(ForestPtr forest, const std::string& device, int threads, std::string strategy)
      : forest_(std::move(forest)), converter_(*forest_), strategy_(std::move(strategy)) {
    use_gpu_ = ValueOrThrow(UseGpu(device));
    pool_ = MakePool(threads);
    PredictEngineOptions options;
    options.use_gpu = use_gpu_;
    options.strategy = strategy_;
    predict_ = ValueOrThrow(PredictEngine::Create(forest_, options, pool_.get()));
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

  const Forest& forest() const { return *forest_; }
  const ForestPtr& forest_ptr() const { return forest_; }
  const DoubleRowConverter& converter() const { return converter_; }
  ThreadPool* pool() const { return pool_.get(); }
  bool use_gpu() const { return use_gpu_; }
  const std::string& strategy() const { return strategy_; }

  int64_t PredictWidthOf(const std::string& kind, int begin, int end) const {
    PredictOptions options;
    options.kind = ValueOrThrow(ParseKind(kind));
    options.iteration_begin = begin;
    options.iteration_end = end;
    return PredictWidth(*forest_, options);
  }

  // One float32 row on the calling thread (PredictEngine::PredictRow), the GIL held: a row takes
  // microseconds, about what releasing and re-taking the GIL costs.
  void PredictRow(const InRow& row, OutRow out, const std::string& kind, int begin, int end) {
    PredictOptions options;
    options.kind = ValueOrThrow(ParseKind(kind));
    options.iteration_begin = begin;
    options.iteration_end = end;
    if (row.shape(0) != static_cast<size_t>(forest_->num_features)) {
      ThrowIfError(absl::InvalidArgumentError(absl::StrCat(
          "the row has ", row.shape(0), " values; the model has ", forest_->num_features,
          " features")));
    }
    const int64_t width = PredictWidth(*forest_, options);
    if (out.shape(0) != static_cast<size_t>(width)) {
      ThrowIfError(absl::InvalidArgumentError(
          absl::StrCat("out has ", out.shape(0), " entries; the result has ", width)));
    }
    ThrowIfError(predict_->PredictRow(row.data(), options, out.data()));
  }

  template <typename T>
  void Predict(const InRows<T>& rows, OutRows out, const std::string& kind, int begin, int end) {
    PredictOptions options;
    options.kind = ValueOrThrow(ParseKind(kind));
    options.iteration_begin = begin;
    options.iteration_end = end;
    ThrowIfError(CheckOut(rows.shape(0), PredictWidth(*forest_, options), out));
    absl::Status status;
    {
      nb::gil_scoped_release release;
      status = WithFloatRows(rows, [&](RowsView view) {
        RunInfo info;
        return predict_->Predict(view, options, OutView(out), &info);
      });
    }
    ThrowIfError(status);
  }

  template <typename T>
  void Explain(const InRows<T>& rows, OutRows out, bool interactions, int begin, int end) {
    ExplainOptions options;
    options.interactions = interactions;
    options.iteration_begin = begin;
    options.iteration_end = end;
    ThrowIfError(CheckOut(rows.shape(0), ExplainWidth(*forest_, interactions), out));
    absl::Status status;
    {
      nb::gil_scoped_release release;
      absl::StatusOr<ExplainEngine*> engine = ExplainEngineOnce();
      status = engine.ok()
                   ? WithFloatRows(rows,
                                   [&](RowsView view) {
                                     RunInfo info;
                                     return (*engine)->Explain(view, options, OutView(out), &info);
                                   })
                   : engine.status();
    }
    ThrowIfError(status);
  }

  // What runs where, as `grove explain --verbose` and `grove inspect` name it.
  std::vector<std::pair<std::string, std::string>> Describe() {
    std::vector<std::pair<std::string, std::string>> out;
    out.emplace_back("predict_engine", predict_->Describe());
    absl::StatusOr<ExplainEngine*> engine;
    {
      nb::gil_scoped_release release;
      engine = ExplainEngineOnce();
    }
    out.emplace_back("explain_engine",
                     engine.ok() ? (*engine)->Describe()
                                 : absl::StrCat("unavailable: ", engine.status().message()));
    return out;
  }

  // Runs `fn` on the rows as floats: float32 rows as they are, float64 rows converted for the
  // model (core/model/double_rows.h), as the CLI converts the doubles it parses.
  template <typename T, typename Fn>
  absl::Status WithFloatRows(const InRows<T>& rows, const Fn& fn) const {
    const int64_t n = rows.shape(0);
    const int64_t cols = rows.shape(1);
    if (cols != forest_->num_features) {
      return absl::InvalidArgumentError(absl::StrCat("rows have ", cols, " columns, the model has ",
                                                     forest_->num_features, " features"));
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
  // The CLI builds the explain engine with the same options (RunExplain).
  absl::StatusOr<ExplainEngine*> ExplainEngineOnce() {
    std::lock_guard<std::mutex> lock(explain_mu_);
    if (explain_ == nullptr && explain_status_.ok()) {
      explain_status_ = CheckExplainable(*forest_);
      if (explain_status_.ok()) {
        ExplainEngineOptions options;
        options.use_gpu = use_gpu_;
        options.strategy = strategy_;
        absl::StatusOr<std::unique_ptr<ExplainEngine>> e =
            ExplainEngine::Create(forest_, options, pool_.get());
        if (e.ok()) {
          explain_ = *std::move(e);
        } else {
          explain_status_ = e.status();
        }
      }
    }
    if (!explain_status_.ok()) return explain_status_;
    return explain_.get();
  }

  ForestPtr forest_;
  DoubleRowConverter converter_;
  std::string strategy_;
  bool use_gpu_ = true;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<PredictEngine> predict_;
  std::mutex explain_mu_;
  std::unique_ptr<ExplainEngine> explain_;
  absl::Status explain_status_;
};

// Interventional SHAP over one background data set: the CLI's --background engine
// (MakeInterventional in client/cli_local.cc), from a background file or from float64 rows
// converted as that file's values are. The Python object of `engine` is kept alive as long as this
// one (keep_alive below).
class Interventional {
 public:
  Interventional(Engine* engine, const Background& background)
      : engine_(engine), rows_(background.rows) {
    InterventionalEngineOptions options;
    options.use_gpu = engine_->use_gpu() && engine_->strategy() != "cpu";
    if (engine_->strategy() != "cpu") options.strategy = engine_->strategy();
    absl::StatusOr<std::unique_ptr<InterventionalEngine>> e;
    {
      nb::gil_scoped_release release;
      e = InterventionalEngine::Create(engine_->forest_ptr(), nullptr, background.view(), options,
                                       engine_->pool());
    }
    if (!e.ok() && !background.path.empty()) {
      e = absl::Status(e.status().code(),
                       absl::StrCat(background.path, ": ", e.status().message()));
    }
    engine_impl_ = ValueOrThrow(std::move(e));
  }

  static std::unique_ptr<Interventional> FromFile(Engine* engine, const std::string& path) {
    Background background = ValueOrThrow(LoadBackgroundFile(engine->forest(), path));
    return std::make_unique<Interventional>(engine, background);
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
    return std::make_unique<Interventional>(engine, background);
  }

  template <typename T>
  void Explain(const InRows<T>& rows, OutRows out, const std::string& output_space,
               bool interactions, int begin, int end) {
    InterventionalOptions options;
    options.output_space = ValueOrThrow(ParseOutputSpace(output_space));
    options.interactions = interactions;
    options.iteration_begin = begin;
    options.iteration_end = end;
    ThrowIfError(CheckOut(rows.shape(0), ExplainWidth(engine_->forest(), interactions), out));
    absl::Status status;
    {
      nb::gil_scoped_release release;
      status = engine_->WithFloatRows(rows, [&](RowsView view) {
        RunInfo info;
        return engine_impl_->Explain(view, options, Engine::OutView(out), &info);
      });
    }
    ThrowIfError(status);
  }

  int64_t rows() const { return rows_; }
  std::string Describe() const { return engine_impl_->Describe(); }

 private:
  Engine* engine_;
  int64_t rows_ = 0;
  std::unique_ptr<InterventionalEngine> engine_impl_;
};

std::vector<std::string> ResultNames(const std::vector<std::string>& feature_names, int num_outputs,
                                     bool explain, bool interactions, const std::string& kind,
                                     int64_t width) {
  cli::ResultColumns columns;
  columns.feature_names = feature_names;
  columns.num_outputs = num_outputs;
  columns.explain = explain;
  columns.interactions = interactions;
  columns.kind = ValueOrThrow(ParseKind(kind));
  columns.width = width;
  return cli::ResultColumnNames(columns);
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
  m.def("chunk_rows", &cli::AutoChunkRows, nb::arg("in_cols"), nb::arg("out_cols"),
        "Rows per engine call of `grove` for rows of in_cols values and results of out_cols.");
  m.def("result_column_names", &ResultNames, nb::arg("feature_names"), nb::arg("num_outputs"),
        nb::arg("explain"), nb::arg("interactions"), nb::arg("kind"), nb::arg("width"),
        "Column names of a result, as `grove --output-header` writes them.");

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
                     return cli::FeatureNamesOrDefault(e.forest().feature_names,
                                                       e.forest().num_features);
                   })
      .def_prop_ro("stored_feature_names", [](const Engine& e) { return e.forest().feature_names; })
      .def_prop_ro("feature_types", [](const Engine& e) { return e.forest().feature_types; })
      .def_prop_ro("format",
                   [](const Engine& e) { return std::string(ModelFormatName(e.forest().format)); })
      .def_prop_ro("objective", [](const Engine& e) { return e.forest().objective.name; })
      .def_prop_ro("link",
                   [](const Engine& e) { return std::string(LinkName(e.forest().objective.link)); })
      .def_prop_ro("explainable", [](const Engine& e) { return CheckExplainable(e.forest()).ok(); })
      .def("stats",
           [](const Engine& e) {
             std::vector<std::pair<std::string, std::string>> out;
             for (const cli::Stat& s : cli::ForestStats(e.forest())) {
               out.emplace_back(
                   s.key, s.kind == cli::StatKind::kList ? absl::StrJoin(s.list, ",") : s.value);
             }
             return out;
           })
      .def("describe", &Engine::Describe)
      .def("predict_width", &Engine::PredictWidthOf, nb::arg("kind"), nb::arg("iteration_begin"),
           nb::arg("iteration_end"))
      .def(
          "explain_width",
          [](const Engine& e, bool interactions) { return ExplainWidth(e.forest(), interactions); },
          nb::arg("interactions"))
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
           nb::arg("out").noconvert(), nb::arg("interactions"), nb::arg("iteration_begin"),
           nb::arg("iteration_end"))
      .def("explain", &Engine::Explain<double>, nb::arg("rows").noconvert(),
           nb::arg("out").noconvert(), nb::arg("interactions"), nb::arg("iteration_begin"),
           nb::arg("iteration_end"));

  nb::class_<Interventional>(m, "Interventional")
      .def_static("from_file", &Interventional::FromFile, nb::arg("engine"), nb::arg("path"),
                  nb::keep_alive<0, 1>())
      .def_static("from_rows", &Interventional::FromRows, nb::arg("engine"),
                  nb::arg("values").noconvert(), nb::keep_alive<0, 1>())
      .def_prop_ro("rows", &Interventional::rows)
      .def("describe", &Interventional::Describe)
      .def("explain", &Interventional::Explain<float>, nb::arg("rows").noconvert(),
           nb::arg("out").noconvert(), nb::arg("output_space"), nb::arg("interactions"),
           nb::arg("iteration_begin"), nb::arg("iteration_end"))
      .def("explain", &Interventional::Explain<double>, nb::arg("rows").noconvert(),
           nb::arg("out").noconvert(), nb::arg("output_space"), nb::arg("interactions"),
           nb::arg("iteration_begin"), nb::arg("iteration_end"));
}

}  // namespace grove::python
