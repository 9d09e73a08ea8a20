// Request conversion and validation of groved (server/convert.h, what both protocols share;
// server/grove_v1/grove_convert.h; server/kserve/kserve_convert.h) and the status mapping
// (server/grpc/status.h): every rule's code and message, without a server.
#include "server/convert.h"
#include "server/grove_v1/grove_convert.h"
#include "server/kserve/kserve_convert.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/model/loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/grpc/status.h"
#include "tests/server/server_testing.h"

namespace grove::server {
namespace {

using ::testing::HasSubstr;

registry::ModelVersionPtr Servable(const std::string& path, registry::ModelConfig config = {}) {
  return CpuModelVersion(path, config);
}

std::string Demo() { return std::string(GROVE_SOURCE_DIR) + "/examples/models/demo/1/model.json"; }
std::string Multiclass() {
  return std::string(GROVE_SOURCE_DIR) + "/tests/golden/xgb_multiclass3/model.json";
}

TEST(StatusMapping, CanonicalCodesMapOneToOne) {
  for (int c = 0; c <= 16; ++c) {
    const absl::Status s(static_cast<absl::StatusCode>(c), c == 0 ? "" : "why");
    const grpc::Status g = ToGrpcStatus(s);
    EXPECT_EQ(static_cast<int>(g.error_code()), c);
    if (c != 0) EXPECT_EQ(g.error_message(), "why");
  }
  EXPECT_STREQ(CodeName(absl::StatusCode::kResourceExhausted), "RESOURCE_EXHAUSTED");
  EXPECT_STREQ(CodeName(absl::StatusCode::kOk), "OK");
  EXPECT_STREQ(CodeName(absl::StatusCode::kDeadlineExceeded), "DEADLINE_EXCEEDED");
}

// Every attribution of the core's name table has its grove.v1 value, ATTRIBUTION_<NAME> (the
// CLI and groveml's client send it by name), and reads back as itself; a value outside the
// table is refused naming the accepted ones.
TEST(Convert, AttributionsMapByName) {
  for (Attribution a : kAttributions) {
    grove::v1::Attribution value;
    ASSERT_TRUE(grove::v1::Attribution_Parse(
        absl::AsciiStrToUpper(absl::StrCat("ATTRIBUTION_", AttributionName(a))), &value))
        << AttributionName(a);
    grove::v1::ExplainRequest request;
    request.set_attribution(value);
    absl::StatusOr<ExplainChoice> choice = ExplainChoiceFromRequest(request);
    ASSERT_TRUE(choice.ok()) << choice.status();
    EXPECT_EQ(choice->attribution, a);
  }
  grove::v1::ExplainRequest request;
  request.set_attribution(static_cast<grove::v1::Attribution>(99));
  absl::StatusOr<ExplainChoice> choice = ExplainChoiceFromRequest(request);
  EXPECT_EQ(choice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(choice.status().message(), HasSubstr("ATTRIBUTION_BANZHAF"));
}

TEST(Convert, ShapeChecksNameTheLimit) {
  registry::ModelConfig config;
  config.max_request_rows = 10;
  auto m = Servable(Demo(), config);
  EXPECT_TRUE(CheckShape(*m, 2, 8, 16).ok());
  absl::Status empty = CheckShape(*m, 0, 8, 0);
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(empty.message()), HasSubstr("empty"));
  absl::Status big = CheckShape(*m, 11, 8, 88);
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(big.message()), HasSubstr("limit of 10"));
  absl::Status cols = CheckShape(*m, 2, 7, 14);
  EXPECT_EQ(cols.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(cols.message()), HasSubstr("expects 8"));
  EXPECT_EQ(CheckShape(*m, 2, 8, 15).code(), absl::StatusCode::kInvalidArgument);
}

// Raw rows of the right size but above max_request_rows are refused for the row count, naming the
// limit and the rows asked for (their byte count is right: a message in bytes would not say why).
TEST(Convert, RawRowsAboveTheRowLimitNameTheLimit) {
  registry::ModelConfig config;
  config.max_request_rows = 2;
  auto m = Servable(Demo(), config);
  std::vector<float> values(3 * 8, 0.5f);
  const std::string bytes(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  std::vector<float> converted;
  for (bool float64 : {false, true}) {
    const std::string raw = float64 ? bytes + bytes : bytes;
    absl::Status s = RowsFromRawBytes(*m, 3, 8, raw, float64, &converted).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("request has 3 rows, above the limit of 2"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("max_request_rows"));
  }
}

TEST(Convert, InteractionsLimit) {
  registry::ModelConfig config;
  config.max_interaction_values_per_row = 80;  // demo: 1 x 9 x 9 = 81
  auto m = Servable(Demo(), config);
  absl::Status s = CheckInteractionsAllowed(*m);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("limit of 80"));
  config.max_interaction_values_per_row = 81;
  EXPECT_TRUE(CheckInteractionsAllowed(*Servable(Demo(), config)).ok());
  EXPECT_TRUE(CheckExplainAvailable(*m).ok());
  // Linear leaves: the model predicts but cannot be explained, and the error says so.
  auto linear = Servable(std::string(GROVE_SOURCE_DIR) + "/tests/golden/lgb_linear_tree/model.txt");
  const absl::Status unavailable = CheckExplainAvailable(*linear);
  EXPECT_EQ(unavailable.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(unavailable.message()), HasSubstr("model 'm' cannot be explained: "));
}

TEST(Convert, IterationRangeAndOutputs) {
  auto m = Servable(Demo());
  EXPECT_TRUE(CheckIterationRange(m->forest(), 0, 0).ok());
  EXPECT_TRUE(CheckIterationRange(m->forest(), 3, 10).ok());
  EXPECT_FALSE(CheckIterationRange(m->forest(), -1, 0).ok());
  EXPECT_FALSE(CheckIterationRange(m->forest(), 5, 5).ok());
  EXPECT_FALSE(CheckIterationRange(m->forest(), 40, 0).ok());

  grove::v1::PredictRequest req;
  absl::StatusOr<std::vector<OutputKind>> d = ResolveOutputs(*m, req);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, std::vector<OutputKind>{OutputKind::kPrediction});
  req.add_outputs(grove::v1::OUTPUT_LEAF);
  req.add_outputs(grove::v1::OUTPUT_MARGIN);
  req.add_outputs(grove::v1::OUTPUT_LEAF);
  d = ResolveOutputs(*m, req);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, (std::vector<OutputKind>{OutputKind::kLeaf, OutputKind::kMargin}));
  req.add_outputs(grove::v1::OUTPUT_UNSPECIFIED);
  EXPECT_EQ(ResolveOutputs(*m, req).status().code(), absl::StatusCode::kInvalidArgument);

  grove::v1::PredictRequest e;
  e.add_explain_rows(0);
  e.add_explain_rows(4);
  EXPECT_TRUE(CheckExplainRows(*m, e, 5).ok());
  EXPECT_EQ(CheckExplainRows(*m, e, 4).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Convert, TopKAndInteractionSums) {
  // 1 row, 2 outputs, 3 features: blocks of F+1 = 4.
  const std::vector<float> v = {0.5f, -2.0f, 1.0f, 9.0f, 0.0f, 0.1f, -0.1f, 7.0f};
  grove::v1::TopFeatures top;
  TopK(v.data(), 1, 2, 3, 2, &top);
  EXPECT_EQ(top.k(), 2);
  ASSERT_EQ(top.features_size(), 4);
  EXPECT_EQ(top.features(0), 1);  // |-2|
  EXPECT_EQ(top.features(1), 2);  // |1|
  EXPECT_EQ(top.features(2), 1);  // |0.1| ties |-0.1|: lower feature first
  EXPECT_EQ(top.features(3), 2);
  EXPECT_FLOAT_EQ(top.values(0), -2.0f);
  TopK(v.data(), 1, 2, 3, 10, &top);
  EXPECT_EQ(top.k(), 3);  // capped at F

  // 1 row, 1 output, 1 feature: a 2x2 matrix per output.
  const std::vector<float> m = {1, 2, 3, 4};
  float sums[2];
  InteractionRowSums(m.data(), 1, 1, 1, sums);
  EXPECT_FLOAT_EQ(sums[0], 3);
  EXPECT_FLOAT_EQ(sums[1], 7);
}

TEST(Convert, KserveInputRawTypedAndErrors) {
  auto m = Servable(Demo());
  std::vector<float> rows(16);
  for (int i = 0; i < 16; ++i) rows[i] = static_cast<float>(i);
  inference::ModelInferRequest req;
  auto* in = req.add_inputs();
  in->set_name("input__0");
  in->set_datatype("FP32");
  in->add_shape(2);
  in->add_shape(8);
  req.add_raw_input_contents(std::string(reinterpret_cast<const char*>(rows.data()), 64));
  absl::StatusOr<KserveInput> raw = ParseKserveInput(*m, req);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(raw->rows.rows, 2);
  EXPECT_EQ(raw->rows.At(1, 7), 15.0f);

  inference::ModelInferRequest typed = req;
  typed.clear_raw_input_contents();
  for (float x : rows) typed.mutable_inputs(0)->mutable_contents()->add_fp32_contents(x);
  absl::StatusOr<KserveInput> t = ParseKserveInput(*m, typed);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->rows.At(0, 3), 3.0f);

  inference::ModelInferRequest bad = req;
  bad.mutable_inputs(0)->set_datatype("INT32");
  EXPECT_EQ(ParseKserveInput(*m, bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = req;
  bad.mutable_inputs(0)->set_name("x");
  EXPECT_EQ(ParseKserveInput(*m, bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = req;
  bad.mutable_inputs(0)->set_shape(1, 7);
  EXPECT_EQ(ParseKserveInput(*m, bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = req;
  bad.set_raw_input_contents(0, std::string(60, '\0'));
  EXPECT_EQ(ParseKserveInput(*m, bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = req;
  bad.mutable_inputs(0)->clear_shape();
  bad.mutable_inputs(0)->add_shape(16);
  EXPECT_EQ(ParseKserveInput(*m, bad).status().code(), absl::StatusCode::kInvalidArgument);

  absl::StatusOr<KserveOutputs> outs = ParseKserveOutputs(req);
  ASSERT_TRUE(outs.ok());
  EXPECT_EQ(outs->names, std::vector<std::string>{"output__0"});
  req.add_outputs()->set_name("treeshap_output");
  req.add_outputs()->set_name("output__0");
  outs = ParseKserveOutputs(req);
  ASSERT_TRUE(outs.ok());
  EXPECT_TRUE(outs->shap && outs->prediction);
  EXPECT_EQ(outs->names[0], "treeshap_output");
  req.add_outputs()->set_name("output__0");
  EXPECT_EQ(ParseKserveOutputs(req).status().code(), absl::StatusCode::kInvalidArgument);
}

// The request parameter `residuals`: a bool, with treeshap_output.
TEST(Convert, KserveResidualsParameter) {
  inference::ModelInferRequest req;
  req.add_outputs()->set_name("treeshap_output");
  absl::StatusOr<KserveOutputs> outs = ParseKserveOutputs(req);
  ASSERT_TRUE(outs.ok());
  EXPECT_FALSE(outs->residuals);
  (*req.mutable_parameters())["residuals"].set_bool_param(true);
  outs = ParseKserveOutputs(req);
  ASSERT_TRUE(outs.ok()) << outs.status();
  EXPECT_TRUE(outs->residuals);
  (*req.mutable_parameters())["residuals"].set_string_param("true");
  EXPECT_THAT(std::string(ParseKserveOutputs(req).status().message()),
              HasSubstr("'residuals' must be a bool"));
  (*req.mutable_parameters())["residuals"].set_bool_param(true);
  req.mutable_outputs(0)->set_name("output__0");
  EXPECT_THAT(std::string(ParseKserveOutputs(req).status().message()),
              HasSubstr("ask for the output 'treeshap_output'"));
}

// Triton's classification extension (class_count) on output__0: top classes as "value:index".
TEST(Convert, KserveClassificationIsTopClassesAsStrings) {
  inference::ModelInferRequest req;
  auto* o = req.add_outputs();
  o->set_name("output__0");
  (*o->mutable_parameters())["classification"].set_int64_param(2);
  absl::StatusOr<KserveOutputs> outs = ParseKserveOutputs(req);
  ASSERT_TRUE(outs.ok()) << outs.status();
  EXPECT_EQ(outs->class_count, 2);
  const float values[6] = {0.2f, 0.5f, 0.3f, 0.4f, 0.4f, 0.2f};
  std::string raw;
  EncodeKserveClasses(values, 2, 3, 2, &raw);
  std::vector<std::string> got;
  for (size_t at = 0; at < raw.size();) {
    uint32_t n;
    std::memcpy(&n, raw.data() + at, 4);
    got.push_back(raw.substr(at + 4, n));
    at += 4 + n;
  }
  EXPECT_EQ(got, (std::vector<std::string>{"0.500000:1", "0.300000:2", "0.400000:0",
                                           "0.400000:1"}));  // ties: lower index first
  (*o->mutable_parameters())["classification"].set_int64_param(0);
  EXPECT_THAT(std::string(ParseKserveOutputs(req).status().message()), HasSubstr(">= 1"));
  o->set_name("treeshap_output");
  (*o->mutable_parameters())["classification"].set_int64_param(1);
  EXPECT_THAT(std::string(ParseKserveOutputs(req).status().message()),
              HasSubstr("applies to 'output__0'"));
}

// FIL's output options as request parameters: predict_proba, output_class, threshold.
TEST(Convert, FilOutputOptions) {
  auto binary = Servable(Demo());
  const Forest& f = binary->forest();
  auto layout = [&](std::optional<bool> proba, std::optional<bool> cls,
                    std::optional<double> threshold) {
    KserveOutputs o;
    o.predict_proba = proba;
    o.output_class = cls;
    o.threshold = threshold;
    return ResolvePredictionLayout(f, o);
  };
  using Form = PredictionLayout::Form;
  EXPECT_EQ(layout({}, {}, {})->form, Form::kProbabilities);
  EXPECT_EQ(layout(true, {}, {})->width, 2);
  absl::StatusOr<PredictionLayout> cls = layout(false, {}, 0.7);
  ASSERT_TRUE(cls.ok()) << cls.status();
  EXPECT_EQ(cls->form, Form::kClass);
  EXPECT_EQ(cls->width, 1);
  const float p[3] = {0.69f, 0.71f, 0.2f};
  std::string raw;
  EncodeKservePrediction(f, *cls, p, 3, &raw);
  float got[3];
  std::memcpy(got, raw.data(), sizeof(got));
  EXPECT_EQ(got[0], 0.0f);
  EXPECT_EQ(got[1], 1.0f);
  EXPECT_EQ(got[2], 0.0f);
  absl::StatusOr<PredictionLayout> value = layout(false, false, {});
  ASSERT_TRUE(value.ok());
  EncodeKservePrediction(f, *value, p, 3, &raw);
  ASSERT_EQ(raw.size(), 12u);
  std::memcpy(got, raw.data(), sizeof(got));
  EXPECT_EQ(got[1], 0.71f);
  EXPECT_THAT(std::string(layout(true, {}, 0.3).status().message()), HasSubstr("threshold"));

  auto multi = Servable(Multiclass());
  KserveOutputs o;
  o.predict_proba = false;
  absl::StatusOr<PredictionLayout> argmax = ResolvePredictionLayout(multi->forest(), o);
  ASSERT_TRUE(argmax.ok()) << argmax.status();
  EXPECT_EQ(argmax->width, 1);

  inference::ModelInferRequest req;
  (*req.mutable_parameters())["threshold"].set_string_param("high");
  EXPECT_THAT(std::string(ParseKserveOutputs(req).status().message()), HasSubstr("a number"));
  (*req.mutable_parameters())["threshold"].set_double_param(2);
  EXPECT_THAT(std::string(ParseKserveOutputs(req).status().message()), HasSubstr("[0, 1]"));
}

TEST(Convert, Float64RowsAreConvertedServerSide) {
  auto m = Servable(Demo());
  grove::v1::Matrix matrix;
  matrix.set_rows(1);
  matrix.set_cols(8);
  for (int i = 0; i < 8; ++i) matrix.add_values_f64(0.1 * i);
  std::vector<float> converted;
  absl::StatusOr<RowsView> rows = RowsFromMatrix(*m, matrix, &converted);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->data, converted.data());
  EXPECT_EQ(rows->At(0, 3), static_cast<float>(0.3));  // XGBoost: a plain cast
  matrix.add_values(1.0f);
  EXPECT_EQ(RowsFromMatrix(*m, matrix, &converted).status().code(),
            absl::StatusCode::kInvalidArgument);

  inference::ModelInferRequest req;
  auto* in = req.add_inputs();
  in->set_name("input__0");
  in->set_datatype("FP64");
  in->add_shape(1);
  in->add_shape(8);
  for (int i = 0; i < 8; ++i) in->mutable_contents()->add_fp64_contents(0.5 * i);
  absl::StatusOr<KserveInput> k = ParseKserveInput(*m, req);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->rows.At(0, 7), 3.5f);
}

// Raw float64 rows at every alignment (a transport's buffer may start anywhere) convert alike,
// through grove.v1's raw_f64 and KServe's raw_input_contents.
TEST(Convert, RawFloat64RowsConvertAtEveryAlignment) {
  auto m = Servable(Demo());
  const int64_t rows = 3, cols = 8;
  std::vector<double> values(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.1 * static_cast<double>(i) - 0.7;
  std::vector<float> want(values.size());
  for (size_t i = 0; i < values.size(); ++i) want[i] = static_cast<float>(values[i]);
  for (size_t shift = 0; shift < sizeof(double); ++shift) {
    SCOPED_TRACE(shift);
    std::string buffer(shift, 'x');
    buffer.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
    const absl::string_view bytes(buffer.data() + shift, values.size() * sizeof(double));
    std::vector<float> converted;
    absl::StatusOr<RowsView> view = RowsFromRawBytes(*m, rows, cols, bytes, true, &converted);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(std::vector<float>(view->data, view->data + rows * cols), want);

    inference::ModelInferRequest req;
    auto* in = req.add_inputs();
    in->set_name("input__0");
    in->set_datatype("FP64");
    in->add_shape(rows);
    in->add_shape(cols);
    absl::StatusOr<KserveInput> k = ParseKserveInput(*m, req, nullptr, bytes);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_EQ(k->owned, want);
    // A byte count that is not whole doubles is refused before anything is converted.
    k = ParseKserveInput(*m, req, nullptr, bytes.substr(0, bytes.size() - 1));
    EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

// Matrix.category_columns: category names replace their features' columns (in a copy: the
// message is the client's), by the model's recorded categories and its library's rule.
TEST(Convert, CategoryColumnsReplaceTheirFeaturesColumns) {
  const std::string dir = std::string(GROVE_SOURCE_DIR) + "/tests/model/data/categories/";
  auto m = Servable(dir + "xgb.json");  // city (paris, brest, lyon, ...), x, size (3, 10, 42)
  grove::v1::Matrix matrix;
  matrix.set_rows(2);
  matrix.set_cols(3);
  for (float v : {NAN, 0.5f, 0.0f, NAN, -1.0f, 2.0f}) matrix.add_values(v);
  grove::v1::CategoryColumn* city = matrix.add_category_columns();
  city->set_feature("city");
  city->add_names("lyon");
  city->add_names("");
  grove::v1::CategoryColumn* size = matrix.add_category_columns();
  size->set_feature("size");
  size->add_names("42");
  size->add_names("10");
  std::vector<float> converted;
  absl::StatusOr<RowsView> rows = RowsFromMatrix(*m, matrix, &converted);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->data, converted.data());
  EXPECT_EQ(rows->At(0, 0), 2.0f);
  EXPECT_TRUE(std::isnan(rows->At(1, 0)));
  EXPECT_EQ(rows->At(0, 1), 0.5f);
  EXPECT_EQ(rows->At(0, 2), 2.0f);
  EXPECT_EQ(rows->At(1, 2), 1.0f);
  EXPECT_EQ(matrix.values(2), 0.0f);  // the request is left alone

  auto refused = [&](const grove::v1::Matrix& bad, const std::string& message) {
    absl::StatusOr<RowsView> r = RowsFromMatrix(*m, bad, &converted);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(r.status().message(), HasSubstr(message));
  };
  grove::v1::Matrix bad = matrix;
  bad.mutable_category_columns(0)->set_names(0, "tokyo");
  refused(bad, "rows.category_columns 'city': row 0: feature 'city': 'tokyo' is not one of the 4");
  bad = matrix;
  bad.mutable_category_columns(1)->set_feature("city");
  refused(bad, "rows.category_columns 'city' is given twice");
  bad = matrix;
  bad.mutable_category_columns(1)->set_feature("x");
  refused(bad, "rows.category_columns 'x': feature 'x' has no category names");
  bad = matrix;
  bad.mutable_category_columns(1)->set_feature("colour");
  refused(bad, "rows.category_columns 'colour' is not a feature of model 'm'");
  bad = matrix;
  bad.mutable_category_columns(1)->add_names("3");
  refused(bad, "rows.category_columns 'size' has 3 names for 2 rows");

  auto lgb = Servable(dir + "lgb.txt");  // LightGBM: an unknown category is missing
  bad = matrix;
  bad.mutable_category_columns(0)->set_names(0, "tokyo");
  rows = RowsFromMatrix(*lgb, bad, &converted);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_TRUE(std::isnan(rows->At(0, 0)));
}

// Raw rows (Matrix.raw_f32 / raw_f64) are read in place or converted once; sizes are checked in
// bytes, and a Matrix carries one form only.
TEST(Convert, RawRowsAreReadInPlaceAndChecked) {
  auto m = Servable(Demo());
  std::vector<float> values(16);
  for (int i = 0; i < 16; ++i) values[i] = 0.5f * i;
  grove::v1::Matrix matrix;
  matrix.set_rows(2);
  matrix.set_cols(8);
  matrix.set_raw_f32(std::string(reinterpret_cast<const char*>(values.data()), 64));
  EXPECT_TRUE(IsRawMatrix(matrix));
  std::vector<float> converted;
  absl::StatusOr<RowsView> rows = RowsFromMatrix(*m, matrix, &converted);
  ASSERT_TRUE(rows.ok()) << rows.status();
  // The engine reads the request's own bytes: no copy.
  EXPECT_EQ(static_cast<const void*>(rows->data),
            static_cast<const void*>(matrix.raw_f32().data()));
  EXPECT_TRUE(converted.empty());
  EXPECT_EQ(rows->At(1, 7), 7.5f);

  // Sizes in bytes: one value short, a partial value, a second form.
  matrix.mutable_raw_f32()->resize(60);
  absl::Status s = RowsFromMatrix(*m, matrix, &converted).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("raw_f32 holds 60 bytes; a matrix of 2 x 8 needs 64"));
  matrix.mutable_raw_f32()->resize(62);
  s = RowsFromMatrix(*m, matrix, &converted).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("not a whole number of 4-byte values"));
  matrix.mutable_raw_f32()->resize(64);
  matrix.add_values(1.0f);
  s = RowsFromMatrix(*m, matrix, &converted).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("more than one of values, values_f64, raw_f32"));
  matrix.clear_values();
  matrix.set_cols(4);  // a shape error names features, as for repeated values
  s = RowsFromMatrix(*m, matrix, &converted).status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("rows have 4 features; model 'm' expects 8"));

  // Unaligned bytes (possible for a message parsed in place): copied once, same values.
  std::string shifted = " " + std::string(reinterpret_cast<const char*>(values.data()), 64);
  rows = RowsFromRawBytes(*m, 2, 8, absl::string_view(shifted).substr(1), false, &converted);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->data, converted.data());
  EXPECT_EQ(rows->At(1, 7), 7.5f);

  // float64 rows: converted as values_f64 is.
  std::vector<double> doubles(8);
  for (int i = 0; i < 8; ++i) doubles[i] = 0.1 * i;
  grove::v1::Matrix f64;
  f64.set_rows(1);
  f64.set_cols(8);
  f64.set_raw_f64(std::string(reinterpret_cast<const char*>(doubles.data()), 64));
  EXPECT_TRUE(IsRawMatrix(f64));
  rows = RowsFromMatrix(*m, f64, &converted);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->data, converted.data());
  EXPECT_EQ(rows->At(0, 3), static_cast<float>(0.3));
  f64.mutable_raw_f64()->resize(56);
  s = RowsFromMatrix(*m, f64, &converted).status();
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("raw_f64 holds 56 bytes; a matrix of 1 x 8 needs 64 (8 bytes per value)"));
  std::string shifted64 = " " + std::string(reinterpret_cast<const char*>(doubles.data()), 64);
  rows = RowsFromRawBytes(*m, 1, 8, absl::string_view(shifted64).substr(1), true, &converted);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->At(0, 3), static_cast<float>(0.3));

  grove::v1::Matrix repeated;
  repeated.add_values(1.0f);
  EXPECT_FALSE(IsRawMatrix(repeated));
}

// Results are written straight into the response: raw_f32 bytes for raw requests, values
// otherwise; MatrixData reads either.
TEST(Convert, ResultsInTheRowsForm) {
  grove::v1::Matrix raw;
  MatrixView<float> out = ResizeMatrix(&raw, 3, 2, /*raw=*/true);
  EXPECT_EQ(raw.raw_f32().size(), 24u);
  EXPECT_EQ(raw.values_size(), 0);
  EXPECT_EQ(static_cast<void*>(out.data), static_cast<const void*>(raw.raw_f32().data()));
  out.data[5] = 4.25f;
  EXPECT_EQ(MatrixData(raw)[5], 4.25f);
  float back;
  std::memcpy(&back, raw.raw_f32().data() + 20, 4);
  EXPECT_EQ(back, 4.25f);  // little-endian float32 at index 5

  grove::v1::Matrix values;
  out = ResizeMatrix(&values, 3, 2);
  EXPECT_TRUE(values.raw_f32().empty());
  out.data[5] = 1.5f;
  EXPECT_EQ(values.values(5), 1.5f);
  EXPECT_EQ(MatrixData(values)[5], 1.5f);
}

TEST(Convert, KserveShapesFollowFil) {
  auto binary = Servable(Demo());
  EXPECT_EQ(KservePredictionShape(binary->forest(), 5), (std::vector<int64_t>{5, 2}));
  EXPECT_EQ(KserveShapShape(binary->forest(), 5), (std::vector<int64_t>{5, 9}));
  const float p[2] = {0.25f, 0.75f};
  std::string raw;
  EncodeKservePrediction(binary->forest(), p, 2, &raw);
  ASSERT_EQ(raw.size(), 16u);
  float got[4];
  std::memcpy(got, raw.data(), 16);
  EXPECT_FLOAT_EQ(got[0], 0.75f);
  EXPECT_FLOAT_EQ(got[1], 0.25f);
  EXPECT_FLOAT_EQ(got[3], 0.75f);

  auto multi = Servable(Multiclass());
  const int k = multi->forest().num_outputs;
  const int f = multi->forest().num_features;
  EXPECT_EQ(KservePredictionShape(multi->forest(), 4), (std::vector<int64_t>{4, k}));
  EXPECT_EQ(KserveShapShape(multi->forest(), 4), (std::vector<int64_t>{4, k, f + 1}));
}

TEST(Convert, Deadlines) {
  EXPECT_EQ(DeadlineFromChrono(std::chrono::system_clock::time_point::max()),
            absl::InfiniteFuture());
  const auto soon = std::chrono::system_clock::now() + std::chrono::seconds(5);
  EXPECT_LT(absl::AbsDuration(DeadlineFromChrono(soon) - absl::FromChrono(soon)),
            absl::Milliseconds(1));
  EXPECT_EQ(ParseKserveVersion("").value(), 0);
  EXPECT_EQ(ParseKserveVersion("12").value(), 12);
  EXPECT_EQ(ParseKserveVersion("x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseKserveVersion("-1").status().code(), absl::StatusCode::kInvalidArgument);
}

// A KServe model version is a canonical decimal: what a model's version directory is named. Signs,
// blanks and leading zeros are refused rather than read as another spelling of a version.
TEST(Convert, KserveVersionsAreCanonicalDecimals) {
  EXPECT_EQ(ParseKserveVersion("1").value(), 1);
  EXPECT_EQ(ParseKserveVersion("10").value(), 10);
  EXPECT_EQ(ParseKserveVersion("0").value(), 0);
  for (const char* bad : {" 1", "1 ", "+1", "01", "00", "1\n", "\t1", "0x1", "1e2", "1.0",
                          "99999999999999999999"}) {
    absl::StatusOr<int64_t> v = ParseKserveVersion(bad);
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << "'" << bad << "'";
    EXPECT_THAT(std::string(v.status().message()), HasSubstr("not a version number")) << bad;
  }
}

// rows x cols must not overflow: with a huge row limit, [2^61, 8] with no data is refused by the
// size check (2^61 x 8 would wrap to 0 and reach the converter).
TEST(Convert, ShapeProductsNeverOverflow) {
  registry::ModelConfig config;
  config.max_request_rows = std::numeric_limits<int64_t>::max();
  auto m = Servable(Demo(), config);
  const int64_t huge = int64_t{1} << 61;
  absl::Status s = CheckShape(*m, huge, 8, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckShape(*m, std::numeric_limits<int64_t>::max(), 8, 8).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckShape(*m, int64_t{1} << 62, 8, 0).code(), absl::StatusCode::kInvalidArgument);

  for (const char* type : {"FP64", "FP32"}) {
    for (bool raw : {false, true}) {
      inference::ModelInferRequest req;
      auto* in = req.add_inputs();
      in->set_name("input__0");
      in->set_datatype(type);
      in->add_shape(huge);
      in->add_shape(8);
      if (raw) req.add_raw_input_contents("");
      absl::StatusOr<KserveInput> k = ParseKserveInput(*m, req);
      EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument) << type << " " << raw;
    }
  }
  grove::v1::Matrix matrix;
  matrix.set_rows(huge);
  matrix.set_cols(8);
  std::vector<float> converted;
  EXPECT_EQ(RowsFromMatrix(*m, matrix, &converted).status().code(),
            absl::StatusCode::kInvalidArgument);
  matrix.add_values_f64(1.0);
  EXPECT_EQ(RowsFromMatrix(*m, matrix, &converted).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// explain_rows may not ask for more SHAP rows than max_request_rows.
TEST(Convert, ExplainRowsAreBoundedByTheRowLimit) {
  registry::ModelConfig config;
  config.max_request_rows = 10;
  auto m = Servable(Demo(), config);
  grove::v1::PredictRequest request;
  for (int i = 0; i < 10; ++i) request.add_explain_rows(0);
  EXPECT_TRUE(CheckExplainRows(*m, request, 1).ok());
  request.add_explain_rows(0);
  absl::Status s = CheckExplainRows(*m, request, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_request_rows"));
  request.clear_explain_rows();
  request.add_explain_rows(1);
  EXPECT_EQ(CheckExplainRows(*m, request, 1).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace grove::server

namespace grove::server {
namespace {

// Triton's shared memory tensor parameters: a string region with an integer byte size, an optional
// integer offset, neither without the region, no negative values.
TEST(ConvertSharedMemory, KserveParameters) {
  google::protobuf::Map<std::string, inference::InferParameter> p;
  absl::StatusOr<std::optional<SharedMemoryRef>> none = KserveSharedMemoryRef(p, "input__0");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  p["shared_memory_byte_size"].set_int64_param(64);
  EXPECT_THAT(std::string(KserveSharedMemoryRef(p, "input__0").status().message()),
              HasSubstr("'shared_memory_byte_size' needs 'shared_memory_region'"));
  p["shared_memory_region"].set_string_param("r");
  absl::StatusOr<std::optional<SharedMemoryRef>> ref = KserveSharedMemoryRef(p, "input__0");
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ((*ref)->region, "r");
  EXPECT_EQ((*ref)->offset, 0u);
  EXPECT_EQ((*ref)->byte_size, 64u);
  p["shared_memory_offset"].set_uint64_param(128);  // REST's large numbers arrive as uint64
  EXPECT_EQ((*KserveSharedMemoryRef(p, "x"))->offset, 128u);
  inference::InferParameter negative, text, real, number;
  negative.set_int64_param(-1);
  text.set_string_param("1");
  real.set_double_param(8);
  number.set_int64_param(1);
  for (auto [key, bad] : std::vector<std::pair<std::string, inference::InferParameter>>{
           {"shared_memory_offset", negative},
           {"shared_memory_offset", text},
           {"shared_memory_byte_size", real},
           {"shared_memory_region", number}}) {
    auto q = p;
    q[key] = bad;
    const absl::Status s = KserveSharedMemoryRef(q, "output__0").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_THAT(std::string(s.message()), HasSubstr("tensor 'output__0': parameter '" + key));
  }
  p.erase("shared_memory_byte_size");
  EXPECT_THAT(std::string(KserveSharedMemoryRef(p, "x").status().message()),
              HasSubstr("'shared_memory_byte_size' is required"));
}

// Without a registry (a converter that reads no shared memory), the shared memory forms are
// refused, not dereferenced.
TEST(ConvertSharedMemory, RefusedWithoutARegistry) {
  auto m = Servable(Demo());
  grove::v1::Matrix matrix;
  matrix.set_rows(1);
  matrix.set_cols(8);
  matrix.mutable_shared_memory_f32()->set_region("r");
  matrix.mutable_shared_memory_f32()->set_byte_size(32);
  EXPECT_TRUE(IsRawMatrix(matrix));  // results come back raw
  std::vector<float> converted;
  EXPECT_EQ(RowsFromMatrix(*m, matrix, &converted).status().code(),
            absl::StatusCode::kInvalidArgument);
  inference::ModelInferRequest req;
  auto* in = req.add_inputs();
  in->set_name("input__0");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(8);
  (*in->mutable_parameters())["shared_memory_region"].set_string_param("r");
  (*in->mutable_parameters())["shared_memory_byte_size"].set_int64_param(32);
  EXPECT_THAT(std::string(ParseKserveInput(*m, req).status().message()),
              HasSubstr("does not read tensors from shared memory"));
}

// Results packed at multiples of 64 bytes of the output range, checked against its size (with
// overflow), described by region offsets; an unaligned range goes through scratch.
TEST(ConvertSharedMemory, ResultsPlacement) {
  std::vector<float> memory(1024 + 1);  // plays the mapped region
  serving::SharedMemorySpan span;
  span.data = reinterpret_cast<char*>(memory.data());
  span.byte_size = 4000;
  grove::v1::SharedMemoryRange range;
  range.set_region("out");
  range.set_offset(100);
  range.set_byte_size(4000);
  absl::StatusOr<SharedMemoryResults> r =
      SharedMemoryResults::Create(range, span, {{3, 5}, {2, 1}, {10, 10}}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->scratch_bytes(), 0);
  EXPECT_EQ(r->View(0).data, memory.data());
  EXPECT_EQ(r->View(1).data, memory.data() + 64 / 4);   // 60 bytes, then the next 64
  EXPECT_EQ(r->View(2).data, memory.data() + 128 / 4);  // 8 bytes at 64
  grove::v1::Matrix m;
  m.add_values(1);
  r->Describe(2, &m);
  EXPECT_EQ(m.values_size(), 0);
  EXPECT_EQ(m.rows(), 10);
  EXPECT_EQ(m.cols(), 10);
  EXPECT_EQ(m.shared_memory_f32().region(), "out");
  EXPECT_EQ(m.shared_memory_f32().offset(), 228u);
  EXPECT_EQ(m.shared_memory_f32().byte_size(), 400u);

  const absl::Status small = SharedMemoryResults::Create(range, span, {{10, 101}}, {}).status();
  EXPECT_EQ(small.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(small.message()), HasSubstr("holds 4000 bytes"));
  EXPECT_THAT(std::string(small.message()), HasSubstr("need 4040"));  // 10 x 101 x 4
  EXPECT_TRUE(SharedMemoryResults::Create(range, span, {{10, 100}}, {}).ok());
  const int64_t huge = std::numeric_limits<int64_t>::max();
  EXPECT_THAT(std::string(SharedMemoryResults::Create(range, span, {{huge, huge}}, {})
                              .status()
                              .message()),
              HasSubstr("more than 2^64"));

  // Unaligned: computed into scratch, copied by Flush.
  span.data = reinterpret_cast<char*>(memory.data()) + 1;
  absl::StatusOr<SharedMemoryResults> u =
      SharedMemoryResults::Create(range, span, {{1, 2}, {1, 1}}, {});
  ASSERT_TRUE(u.ok());
  EXPECT_GT(u->scratch_bytes(), 0);
  u->View(0).At(0, 1) = 2.5f;
  u->View(1).At(0, 0) = -1.0f;
  u->Flush();
  float a, b;
  std::memcpy(&a, span.data + 4, 4);
  std::memcpy(&b, span.data + 64, 4);
  EXPECT_EQ(a, 2.5f);
  EXPECT_EQ(b, -1.0f);
}

// output__0 written at any address equals its encoded bytes, whatever the layout.
TEST(ConvertSharedMemory, WriteKservePredictionMatchesTheEncoding) {
  for (const std::string& path : {Demo(), Multiclass()}) {
    auto m = Servable(path);
    const Forest& f = m->forest();
    const int64_t rows = 3;
    std::vector<float> prediction(rows * f.PredictionWidth());
    for (size_t i = 0; i < prediction.size(); ++i) prediction[i] = 0.1f * static_cast<float>(i);
    for (int form = 0; form < 3; ++form) {
      KserveOutputs asked;
      if (form == 1) asked.predict_proba = true;
      if (form == 2) asked.output_class = false;
      absl::StatusOr<PredictionLayout> layout = ResolvePredictionLayout(f, asked);
      ASSERT_TRUE(layout.ok());
      std::string encoded;
      EncodeKservePrediction(f, *layout, prediction.data(), rows, &encoded);
      std::string written(encoded.size() + 1, '\0');
      WriteKservePrediction(f, *layout, prediction.data(), rows, written.data() + 1);
      EXPECT_EQ(written.substr(1), encoded) << path << " form " << form;
      EXPECT_EQ(KservePredictionIsEngineOutput(f, *layout),
                encoded.size() == prediction.size() * sizeof(float) &&
                    std::memcmp(encoded.data(), prediction.data(), encoded.size()) == 0)
          << path << " form " << form;
    }
  }
}

}  // namespace
}  // namespace grove::server

namespace grove::server {
namespace {

// A CatBoost model's hashed features (one-hot and CTR: tests/golden/cb_ctr_regression's city, shop
// and grade): grove.v1 lists their hashes in code order, KServe in its category_hashes parameter,
// so that clients code names as groved does.
TEST(ModelMetadata, HashedCategoriesAreListed) {
  const auto m = CpuModelVersion(std::string(GROVE_SOURCE_DIR) +
                                 "/tests/golden/cb_ctr_regression/catboost.json");
  const Forest& f = m->servable->forest();
  registry::ModelStatus status;
  grove::v1::ModelMetadata meta;
  FillModelMetadata(*m, status, &meta);
  ASSERT_EQ(meta.categories_size(), 3);
  std::vector<std::string> names;
  for (const grove::v1::FeatureCategories& c : meta.categories()) {
    names.push_back(c.name());
    const std::vector<uint32_t>& want = f.categories[static_cast<size_t>(c.feature())].hashes;
    EXPECT_EQ(std::vector<uint32_t>(c.hashes().begin(), c.hashes().end()), want) << c.name();
    EXPECT_FALSE(want.empty());
    EXPECT_EQ(c.strings_size() + c.numbers_size(), 0);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"city", "shop", "grade"}));

  inference::ModelMetadataResponse kserve;
  FillKserveModelMetadata(*m, status, &kserve);
  ASSERT_GE(kserve.inputs_size(), 1);
  const auto& parameters = kserve.inputs(0).parameters();
  EXPECT_EQ(parameters.count("categories"), 0u);
  ASSERT_EQ(parameters.count("category_hashes"), 1u);
  const nlohmann::json hashes = nlohmann::json::parse(parameters.at("category_hashes").string_param());
  EXPECT_EQ(hashes["city"].get<std::vector<uint32_t>>(), f.categories[1].hashes);
  EXPECT_EQ(hashes["grade"].get<std::vector<uint32_t>>(), f.categories[4].hashes);
}

}  // namespace
}  // namespace grove::server
