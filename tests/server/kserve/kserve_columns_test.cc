// KServe columnar requests (server/kserve/kserve_columns.h): one input per feature, category names
// as BYTES (typed and raw, length-prefixed) mapped by the model's recorded categories, numbers of
// every numeric datatype, and each rule's INVALID_ARGUMENT; CatBoost's hashed one-hot categories
// against CatBoost's predictions.
#include "server/kserve/kserve_columns.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/kserve/kserve_convert.h"
#include "tests/server/server_testing.h"

namespace grove::server {
namespace {

using ::testing::HasSubstr;

// city (string categories paris, brest, lyon, orléan[s]), x (numeric), size (categories 3, 10, 42).
registry::ModelVersionPtr Categories(const char* file) {
  return CpuModelVersion(std::string(GROVE_SOURCE_DIR) + "/tests/model/data/categories/" + file);
}

using Tensor = inference::ModelInferRequest::InferInputTensor;
Tensor* Column(inference::ModelInferRequest* req, const char* name, const char* datatype,
               int64_t rows) {
  Tensor* t = req->add_inputs();
  t->set_name(name);
  t->set_datatype(datatype);
  t->add_shape(rows);
  return t;
}

std::string RawBytes(const std::vector<std::string>& elements) {
  std::string out;
  for (const std::string& e : elements) {
    const uint32_t n = static_cast<uint32_t>(e.size());
    out.append(reinterpret_cast<const char*>(&n), 4);
    out += e;
  }
  return out;
}

inference::ModelInferRequest Typed(const std::vector<std::string>& cities) {
  inference::ModelInferRequest req;
  const int64_t rows = static_cast<int64_t>(cities.size());
  Tensor* size = Column(&req, "size", "INT64", rows);  // codes, in any input order
  Tensor* city = Column(&req, "city", "BYTES", rows);
  Tensor* x = Column(&req, "x", "FP64", rows);
  for (int64_t r = 0; r < rows; ++r) {
    city->mutable_contents()->add_bytes_contents(cities[static_cast<size_t>(r)]);
    x->mutable_contents()->add_fp64_contents(0.25 * static_cast<double>(r));
    size->mutable_contents()->add_int64_contents(r % 3);
  }
  return req;
}

TEST(KserveColumns, TypedBytesAreTheModelsCategoryCodes) {
  auto m = Categories("xgb.json");
  absl::StatusOr<KserveInput> in = ParseKserveInput(*m, Typed({"lyon", "", "paris"}));
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_EQ(in->rows.rows, 3);
  ASSERT_EQ(in->rows.cols, 3);
  const float* v = in->rows.data;
  EXPECT_EQ(v[0], 2.0f);
  EXPECT_EQ(v[1], 0.0f);
  EXPECT_EQ(v[2], 0.0f);
  EXPECT_TRUE(std::isnan(v[3]));  // "" is missing
  EXPECT_EQ(v[4], 0.25f);
  EXPECT_EQ(v[5], 1.0f);
  EXPECT_EQ(v[6], 0.0f);
  EXPECT_EQ(v[8], 2.0f);
}

TEST(KserveColumns, RawInputsOnePerTensorWithLengthPrefixedStrings) {
  auto m = Categories("xgb.json");
  inference::ModelInferRequest req;
  Column(&req, "city", "BYTES", 2)->add_shape(1);  // [rows, 1]
  Column(&req, "x", "FP32", 2);
  Column(&req, "size", "BOOL", 2);
  req.add_raw_input_contents(RawBytes({"brest", "lyon"}));
  const float xs[2] = {1.5f, -2.0f};
  req.add_raw_input_contents(std::string(reinterpret_cast<const char*>(xs), sizeof(xs)));
  req.add_raw_input_contents(std::string("\x01\x00", 2));
  absl::StatusOr<KserveInput> in = ParseKserveInput(*m, req);
  ASSERT_TRUE(in.ok()) << in.status();
  const std::vector<float> want = {1, 1.5f, 1, 2, -2.0f, 0};
  EXPECT_EQ(std::vector<float>(in->rows.data, in->rows.data + 6), want);
}

TEST(KserveColumns, UnknownCategoryFollowsTheLibrary) {
  absl::StatusOr<KserveInput> xgb = ParseKserveInput(*Categories("xgb.json"), Typed({"tokyo"}));
  EXPECT_EQ(xgb.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(xgb.status().message(),
              HasSubstr("input 'city': row 0: feature 'city': 'tokyo' is not one of the 4"));
  absl::StatusOr<KserveInput> lgb = ParseKserveInput(*Categories("lgb.txt"), Typed({"tokyo"}));
  ASSERT_TRUE(lgb.ok()) << lgb.status();
  EXPECT_TRUE(std::isnan(lgb->rows.data[0]));
}

TEST(KserveColumns, EveryRuleNamesTheInput) {
  auto m = Categories("xgb.json");
  auto expect = [&](const inference::ModelInferRequest& req, const std::string& message) {
    absl::StatusOr<KserveInput> in = ParseKserveInput(*m, req);
    EXPECT_EQ(in.status().code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(in.status().message(), HasSubstr(message));
  };
  inference::ModelInferRequest req = Typed({"paris"});
  req.mutable_inputs()->RemoveLast();
  expect(req, "no input for 1 of the model's 3 features (x)");
  req = Typed({"paris"});
  req.mutable_inputs(2)->set_name("z");
  expect(req, "unknown input tensor 'z': inputs are one tensor 'input__0' [rows, 3] or one "
              "tensor per feature named by the model's feature names (city, x, size)");
  req = Typed({"paris"});
  req.mutable_inputs(2)->set_name("city");
  expect(req, "input 'city' is given twice");
  req = Typed({"paris"});
  req.mutable_inputs(2)->set_datatype("BYTES");
  expect(req, "input 'x' (BYTES) has contents in a field other than bytes_contents");
  req.mutable_inputs(2)->mutable_contents()->Clear();
  req.mutable_inputs(2)->mutable_contents()->add_bytes_contents("1");
  expect(req, "input 'x' is BYTES (category names), but feature 'x' has no category names");
  req = Typed({"paris", "lyon"});
  req.mutable_inputs(2)->set_shape(0, 3);
  expect(req, "input 'x' has 3 rows; the inputs before it have 2");
  req = Typed({"paris"});
  req.mutable_inputs(2)->add_shape(2);
  expect(req, "input 'x' has shape [1, 2]; a feature's column is [rows] or [rows, 1]");
  req = Typed({"paris"});
  req.mutable_inputs(2)->set_datatype("FP16");
  expect(req, "input 'x' has datatype FP16");
  req = Typed({"paris"});
  (*req.mutable_inputs(2)->mutable_parameters())["shared_memory_region"].set_string_param("r");
  expect(req, "not from shared memory");
  req = Typed({"paris", "lyon"});
  req.mutable_inputs(1)->mutable_contents()->add_bytes_contents("nice");
  expect(req, "input 'city' has 3 bytes_contents; its shape declares 2");
}

TEST(KserveColumns, MalformedRawBytesAreRefused) {
  EXPECT_THAT(SplitKserveBytes(std::string("\x05\x00\x00\x00" "ab", 6), 1, "t").status().message(),
              HasSubstr("element 0 has length 5 but only 2 bytes are left"));
  EXPECT_THAT(SplitKserveBytes(RawBytes({"a", "b"}), 1, "t").status().message(),
              HasSubstr("5 raw bytes after the 1 elements"));
  EXPECT_THAT(SplitKserveBytes(RawBytes({"a"}), 3, "t").status().message(),
              HasSubstr("cannot hold 3 BYTES elements"));
  absl::StatusOr<std::vector<absl::string_view>> ok = SplitKserveBytes(RawBytes({"", "xy"}), 2, "t");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)[0], "");
  EXPECT_EQ((*ok)[1], "xy");
  auto m = Categories("xgb.json");
  inference::ModelInferRequest req;
  Column(&req, "city", "BYTES", 1);
  Column(&req, "x", "FP32", 1);
  Column(&req, "size", "INT8", 1);
  req.add_raw_input_contents(RawBytes({"paris"}));
  req.add_raw_input_contents(std::string(3, '\0'));
  req.add_raw_input_contents(std::string(1, '\0'));
  absl::StatusOr<KserveInput> in = ParseKserveInput(*m, req);
  EXPECT_THAT(in.status().message(),
              HasSubstr("input 'x' raw_input_contents holds 3 bytes; 1 rows of FP32 need 4"));
  req.mutable_raw_input_contents()->RemoveLast();
  EXPECT_THAT(ParseKserveInput(*m, req).status().message(),
              HasSubstr("raw_input_contents has 2 entries for 3 inputs"));
}

// The rows of X_names.csv of `golden` (a CatBoost case with category names), category columns
// as BYTES, in another order than the model's, give pred.csv.
void CatboostBytesGivePredictions(const std::string& golden) {
  auto m = CpuModelVersion(golden + "catboost.json");
  std::ifstream names(golden + "X_names.csv");
  std::ifstream pred(golden + "pred.csv");
  std::string line;
  ASSERT_TRUE(std::getline(names, line));
  const std::vector<std::string> header = absl::StrSplit(line, ',');
  ASSERT_EQ(header.size(), 5u);
  std::vector<std::vector<std::string>> cells;
  std::vector<double> want;
  while (std::getline(names, line)) {
    cells.push_back(absl::StrSplit(line, ','));
    ASSERT_EQ(cells.back().size(), header.size());
    std::string p;
    ASSERT_TRUE(std::getline(pred, p));
    want.push_back(std::stod(p));
  }
  const int64_t rows = static_cast<int64_t>(cells.size());
  ASSERT_EQ(rows, 100);
  inference::ModelInferRequest req;
  for (size_t c : {3u, 1u, 4u, 0u, 2u}) {  // in another order than the model's
    const bool category = header[c] == "city" || header[c] == "size" || header[c] == "shop" ||
                          header[c] == "grade";
    Tensor* t = Column(&req, header[c].c_str(), category ? "BYTES" : "FP64", rows);
    for (const std::vector<std::string>& row : cells) {
      if (category) {
        t->mutable_contents()->add_bytes_contents(row[c]);
      } else {
        t->mutable_contents()->add_fp64_contents(
            row[c].empty() ? std::nan("") : std::stod(row[c]));
      }
    }
  }
  absl::StatusOr<KserveInput> in = ParseKserveInput(*m, req);
  ASSERT_TRUE(in.ok()) << in.status();
  std::vector<float> got(static_cast<size_t>(rows));
  ASSERT_TRUE(m->servable
                  ->Run(Operation::kPredict, RunParams{}, in->rows,
                        MakeMatrixView(got.data(), rows, 1), nullptr)
                  .ok());
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_NEAR(got[static_cast<size_t>(r)], want[static_cast<size_t>(r)],
                1e-5 * std::max(1.0, std::abs(want[static_cast<size_t>(r)])))
        << "row " << r;
  }
}

// CatBoost models with hashed categorical features (tests/golden/cb_onehot_regression: one-hot;
// cb_ctr_regression: CTRs and one-hot): the test frame CatBoost predicted, its category columns
// as BYTES (city: strings of 0 to 130 bytes; the others integers, sent as their text as CatBoost
// hashes them), unseen categories included, gives CatBoost's predictions.
TEST(KserveColumns, CatboostCategoryBytesGiveCatboostsPredictions) {
  for (const char* name : {"cb_onehot_regression", "cb_ctr_regression"}) {
    SCOPED_TRACE(name);
    CatboostBytesGivePredictions(std::string(GROVE_SOURCE_DIR) + "/tests/golden/" + name + "/");
  }
}

}  // namespace
}  // namespace grove::server
