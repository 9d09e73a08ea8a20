// KServe v2 REST conversion (server/kserve/kserve_rest.h): routes, the strict request parser (JSON and
// Triton's binary tensor extension) and the response encoding, without a server.
#include "server/kserve/kserve_rest.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/kserve/http_server.h"
#include "server/kserve/kserve_ops.h"

namespace grove::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// A bound on the numbers of a request that no test body comes near.
constexpr int64_t kAnyValues = int64_t{1} << 40;

TEST(KserveRestRoute, RoutesAndRefusals) {
  absl::StatusOr<RestRoute> r = ParseRestRoute("POST", "/v2/models/fraud/versions/3/infer");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->op, RestOp::kModelInfer);
  EXPECT_EQ(r->model, "fraud");
  EXPECT_EQ(r->version, "3");
  EXPECT_STREQ(r->method, "ModelInfer");
  EXPECT_EQ(ParseRestRoute("GET", "/v2/models/fraud/ready")->op, RestOp::kModelReady);
  EXPECT_EQ(ParseRestRoute("GET", "/v2/models/fraud")->op, RestOp::kModelMetadata);
  EXPECT_EQ(ParseRestRoute("GET", "/v2")->op, RestOp::kServerMetadata);
  EXPECT_EQ(ParseRestRoute("GET", "/v2/health/live")->op, RestOp::kServerLive);
  EXPECT_EQ(ParseRestRoute("GET", "/v2/health/ready")->op, RestOp::kServerReady);
  EXPECT_EQ(ParseRestRoute("GET", "/v2/models/fraud/versions/2/config")->op, RestOp::kModelConfig);
  absl::StatusOr<RestRoute> stats = ParseRestRoute("GET", "/v2/models/stats");
  EXPECT_EQ(stats->op, RestOp::kModelStatistics);
  EXPECT_EQ(stats->model, "");
  EXPECT_EQ(ParseRestRoute("GET", "/v2/models/fraud/stats")->model, "fraud");
  EXPECT_EQ(ParseRestRoute("POST", "/v2/repository/index")->op, RestOp::kRepositoryIndex);
  absl::StatusOr<RestRoute> unload = ParseRestRoute("POST", "/v2/repository/models/fraud/unload");
  EXPECT_EQ(unload->op, RestOp::kRepositoryModelUnload);
  EXPECT_EQ(unload->model, "fraud");
  EXPECT_EQ(ParseRestRoute("POST", "/v2/repository/models/fraud/load")->op,
            RestOp::kRepositoryModelLoad);
  absl::StatusOr<RestRoute> wrong = ParseRestRoute("GET", "/v2/models/fraud/infer");
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.status().message(), HasSubstr("takes POST, not GET"));
  absl::StatusOr<RestRoute> unknown = ParseRestRoute("GET", "/v1/models");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("/v2/health/ready"));
}

TEST(KserveRestRequest, JsonTensorsNestedOrFlatWithNullAsMissing) {
  inference::ModelInferRequest req;
  const std::string body = R"({"id":"q1","parameters":{"binary_data_output":true,"n":3},
    "inputs":[{"name":"input__0","shape":[2,2],"datatype":"FP32","data":[[1.5,null],[3,-4e-3]]}],
    "outputs":[{"name":"output__0","parameters":{"binary_data":false}}]})";
  ASSERT_TRUE(ParseRestInferRequest(body, -1, kAnyValues, &req).ok());
  EXPECT_EQ(req.id(), "q1");
  EXPECT_TRUE(req.parameters().at("binary_data_output").bool_param());
  EXPECT_EQ(req.parameters().at("n").int64_param(), 3);
  ASSERT_EQ(req.inputs_size(), 1);
  EXPECT_EQ(req.inputs(0).shape(0), 2);
  const auto& v = req.inputs(0).contents().fp32_contents();
  ASSERT_EQ(v.size(), 4);
  EXPECT_EQ(v[0], 1.5f);
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(v[3], -4e-3f);
  EXPECT_FALSE(req.outputs(0).parameters().at("binary_data").bool_param());
}

TEST(KserveRestRequest, ColumnsOfStringsBooleansAndIntegers) {
  inference::ModelInferRequest req;
  const std::string body = R"({"inputs":[
    {"name":"city","shape":[3],"datatype":"BYTES","data":["paris",null,"orl\u00e9ans"]},
    {"name":"flag","shape":[3,1],"datatype":"BOOL","data":[[true],[false],[true]]},
    {"name":"n","shape":[3],"datatype":"INT32","data":[-2,0,7]},
    {"name":"u","shape":[3],"datatype":"UINT64","data":[18446744073709551615,0,1]}]})";
  absl::Status s = ParseRestInferRequest(body, -1, kAnyValues, &req);
  ASSERT_TRUE(s.ok()) << s;
  const auto& city = req.inputs(0).contents().bytes_contents();
  ASSERT_EQ(city.size(), 3);
  EXPECT_EQ(city[0], "paris");
  EXPECT_EQ(city[1], "");  // null: missing
  EXPECT_EQ(city[2], "orl\xC3\xA9" "ans");
  EXPECT_EQ(req.inputs(1).contents().bool_contents_size(), 3);
  EXPECT_FALSE(req.inputs(1).contents().bool_contents(1));
  EXPECT_EQ(req.inputs(2).contents().int_contents(0), -2);
  EXPECT_EQ(req.inputs(3).contents().uint64_contents(0), 18446744073709551615u);
  auto refused = [](const std::string& input, const std::string& message) {
    inference::ModelInferRequest r;
    absl::Status s = ParseRestInferRequest(R"({"inputs":[)" + input + "]}", -1, kAnyValues, &r);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << input;
    EXPECT_THAT(s.message(), HasSubstr(message)) << input;
  };
  refused(R"({"name":"c","shape":[1],"datatype":"BYTES","data":[1]})",
          "inputs[0].data holds a value that is not a string (BYTES)");
  refused(R"({"name":"c","shape":[1],"datatype":"BOOL","data":[1]})", "not true or false");
  refused(R"({"name":"c","shape":[1],"datatype":"INT8","data":[3000000000]})",
          "not an integer of INT8's range");
  refused(R"({"name":"c","shape":[1],"datatype":"INT64","data":[null]})",
          "not an integer of INT64's range");
  refused(R"({"name":"c","shape":[1],"datatype":"BYTES","data":["a","b"]})",
          "holds more than the 1 values its shape declares");
}

TEST(KserveRestRequest, BinaryTensorExtension) {
  const std::string json =
      R"({"inputs":[{"name":"input__0","shape":[1,2],"datatype":"FP32","parameters":{"binary_data_size":8}}]})";
  const std::string body = json + Floats({0.25f, NAN});
  inference::ModelInferRequest req;
  ASSERT_TRUE(ParseRestInferRequest(body, static_cast<int64_t>(json.size()), kAnyValues, &req).ok());
  ASSERT_EQ(req.raw_input_contents_size(), 1);
  EXPECT_EQ(req.raw_input_contents(0), Floats({0.25f, NAN}));
  EXPECT_FALSE(req.inputs(0).has_contents());
  EXPECT_EQ(req.inputs(0).parameters().count("binary_data_size"), 0u);

  inference::ModelInferRequest extra;
  absl::Status s =
      ParseRestInferRequest(body + "xx", static_cast<int64_t>(json.size()), kAnyValues, &extra);
  EXPECT_THAT(s.message(), HasSubstr("2 bytes after the JSON part belong to no input"));
  inference::ModelInferRequest shorter;
  s = ParseRestInferRequest(body.substr(0, body.size() - 1), static_cast<int64_t>(json.size()),
                            kAnyValues, &shorter);
  EXPECT_THAT(s.message(), HasSubstr("binary_data_size 8 but 7 bytes"));
  inference::ModelInferRequest beyond;
  s = ParseRestInferRequest(body, static_cast<int64_t>(body.size()) + 1, kAnyValues, &beyond);
  EXPECT_THAT(s.message(), HasSubstr("Inference-Header-Content-Length"));
}

TEST(KserveRestRequest, StrictJsonRulesNameTheProblem) {
  const std::string in = R"({"name":"input__0","shape":[1,1],"datatype":"FP32","data":[1]})";
  struct Case {
    std::string body;
    std::string message;
  } cases[] = {
      {R"({"inputs":[{"name":"input__0","shape":[1,1],"datatype":"FP32","data":[NaN]}]})",
       "not valid JSON"},
      {"{\"inputs\":[" + in + "],}", "not valid JSON"},
      {"[1]", "not an object"},
      {"{\"inputs\":[" + in + "],\"inputs\":[]}", "key 'inputs' twice"},
      {"{\"inputs\":[" + in + "],\"x\":1}", "unknown field 'x'"},
      {R"({"inputs":[{"name":"input__0","shape":[1,1],"datatype":"FP32","data":[1],"foo":2}]})",
       "inputs[0] has an unknown field 'foo'"},
      {R"({"inputs":[{"name":"input__0","shape":[-1,1],"datatype":"FP32","data":[1]}]})",
       "shape[] is not a non-negative integer"},
      {R"({"inputs":[{"name":"input__0","shape":[1,1],"datatype":"FP32","data":["1"]}]})",
       "not a number or null"},
      {R"({"inputs":[{"name":"input__0","shape":[1,1],"datatype":"FP32"}]})",
       "has none of data, binary_data_size and shared_memory_region"},
      {R"({"inputs":[{"name":"input__0","shape":[1,1],"datatype":"FP32","data":[1],
          "parameters":{"binary_data_size":4}}]})",
       "has more than one of data, binary_data_size and shared_memory_region"},
      {R"({"inputs":[{"name":"input__0","shape":[1,1],"datatype":"FP32","data":[1],
          "parameters":{"shared_memory_region":"r","shared_memory_byte_size":4}}]})",
       "has more than one of data, binary_data_size and shared_memory_region"},
      {"{\"inputs\":[" + in + "],\"parameters\":{\"a\":[1]}}", "not a bool, number or string"},
      {"{\"inputs\":[" + in + "],\"outputs\":[{\"name\":1}]}", "outputs[0].name"},
      {"{}", "inputs: an array is needed"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    inference::ModelInferRequest req;
    absl::Status s = ParseRestInferRequest(c.body, -1, kAnyValues, &req);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }
}

// Numbers are counted as they are converted: an input holding more than its shape declares, or a
// request holding more than the model takes, is refused with the bound named; exactly the bound
// passes (fewer than the shape is the input check's to refuse, with the model's shape).
TEST(KserveRestRequest, DataIsCountedAgainstTheShapeAndTheModelsBound) {
  auto body = [](const std::string& shape, int values) {
    std::string data;
    for (int i = 0; i < values; ++i) absl::StrAppend(&data, i ? "," : "", i);
    return absl::StrCat(R"({"inputs":[{"name":"input__0","shape":)", shape,
                        R"(,"datatype":"FP32","data":[)", data, "]}]}");
  };
  inference::ModelInferRequest req;
  EXPECT_TRUE(ParseRestInferRequest(body("[2,3]", 6), -1, 6, &req).ok());
  EXPECT_EQ(req.inputs(0).contents().fp32_contents_size(), 6);
  inference::ModelInferRequest over_shape;
  absl::Status s = ParseRestInferRequest(body("[2,3]", 7), -1, kAnyValues, &over_shape);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("inputs[0].data holds more than the 6 values its shape"));
  inference::ModelInferRequest over_model;
  s = ParseRestInferRequest(body("[4,3]", 12), -1, 8, &over_model);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("more than the 8 more values this model takes"));
  EXPECT_LE(over_model.inputs(0).contents().fp32_contents_size(), 8);  // stopped at the bound
  // A shape whose product does not fit 64 bits is bounded by the model, not wrapped.
  inference::ModelInferRequest huge;
  s = ParseRestInferRequest(body("[4294967296,4294967296,16]", 3), -1, 2, &huge);
  EXPECT_THAT(s.message(), HasSubstr("more than the 2 more values"));
  inference::ModelInferRequest fewer;
  EXPECT_TRUE(ParseRestInferRequest(body("[4,3]", 5), -1, kAnyValues, &fewer).ok());
  // Two inputs share the request's bound.
  const std::string two = R"({"inputs":[{"name":"a","shape":[3],"datatype":"FP32","data":[1,2,3]},
    {"name":"b","shape":[3],"datatype":"FP64","data":[1,2,3]}]})";
  inference::ModelInferRequest shared;
  s = ParseRestInferRequest(two, -1, 5, &shared);
  EXPECT_THAT(s.message(), HasSubstr("inputs[1].data: the request holds more than the 2 more"));
}

TEST(KserveRestRepository, BodiesAreStrictAndOptional) {
  inference::RepositoryIndexRequest index;
  inference::RepositoryModelLoadRequest control;
  EXPECT_TRUE(ParseRestRepositoryRequest("", RestOp::kRepositoryIndex, &index, &control).ok());
  ASSERT_TRUE(
      ParseRestRepositoryRequest(R"({"ready":true})", RestOp::kRepositoryIndex, &index, &control)
          .ok());
  EXPECT_TRUE(index.ready());
  ASSERT_TRUE(ParseRestRepositoryRequest(R"({"parameters":{"unload_dependents":false}})",
                                         RestOp::kRepositoryModelUnload, &index, &control)
                  .ok());
  EXPECT_FALSE(control.parameters().at("unload_dependents").bool_param());
  EXPECT_EQ(RefusedRepositoryArgument("", control.parameters(), ModelControl::kUnload), "");
  EXPECT_EQ(RefusedRepositoryArgument("", control.parameters(), ModelControl::kLoad),
            "parameter 'unload_dependents'");
  EXPECT_EQ(RefusedRepositoryArgument("other", {}, ModelControl::kLoad), "repository 'other'");
  EXPECT_THAT(ParseRestRepositoryRequest(R"({"ready":1})", RestOp::kRepositoryIndex, &index,
                                         &control)
                  .message(),
              HasSubstr("ready is not a bool"));
  EXPECT_THAT(ParseRestRepositoryRequest(R"({"parameters":{}})", RestOp::kRepositoryIndex, &index,
                                         &control)
                  .message(),
              HasSubstr("unknown field 'parameters'"));
  EXPECT_THAT(
      ParseRestRepositoryRequest("{", RestOp::kRepositoryModelLoad, &index, &control).message(),
      HasSubstr("not valid JSON"));
}

TEST(KserveRestResponse, JsonValuesReadBackBitForBitAndBinaryFollowsTheJson) {
  inference::ModelInferRequest req;
  req.add_outputs()->set_name("output__0");
  auto* shap = req.add_outputs();
  shap->set_name("treeshap_output");
  (*shap->mutable_parameters())["binary_data"].set_bool_param(true);
  inference::ModelInferResponse resp;
  resp.set_model_name("m");
  resp.set_model_version("2");
  const std::vector<float> pred = {0.1f, 1.0f / 3.0f, 1e-30f, NAN};
  auto* o0 = resp.add_outputs();
  o0->set_name("output__0");
  o0->set_datatype("FP32");
  o0->add_shape(2);
  o0->add_shape(2);
  resp.add_raw_output_contents(Floats(pred));
  auto* o1 = resp.add_outputs();
  o1->set_name("treeshap_output");
  o1->set_datatype("FP32");
  o1->add_shape(1);
  resp.add_raw_output_contents(Floats({2.5f}));
  int64_t json_length = 0;
  const std::string body = RestInferResponse(req, resp, &json_length);
  ASSERT_EQ(json_length, static_cast<int64_t>(body.size() - 4));
  EXPECT_EQ(body.substr(static_cast<size_t>(json_length)), Floats({2.5f}));
  nlohmann::json j = nlohmann::json::parse(body.substr(0, static_cast<size_t>(json_length)));
  EXPECT_EQ(j["model_version"], "2");
  const nlohmann::json& data = j["outputs"][0]["data"];
  ASSERT_EQ(data.size(), 4u);
  for (int i = 0; i < 3; ++i) {  // read as float32, the tensor's type
    const float back = static_cast<float>(data[i].get<double>());
    EXPECT_EQ(std::memcmp(&back, &pred[i], sizeof(float)), 0) << i;
  }
  EXPECT_TRUE(data[3].is_null());
  EXPECT_EQ(j["outputs"][1]["parameters"]["binary_data_size"], 4);
  EXPECT_FALSE(j["outputs"][1].contains("data"));
}

TEST(KserveRestStatus, CanonicalCodesMapToHttp) {
  EXPECT_EQ(HttpStatus(absl::StatusCode::kOk), 200);
  EXPECT_EQ(HttpStatus(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatus(absl::StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatus(absl::StatusCode::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatus(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatus(absl::StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatus(absl::StatusCode::kUnimplemented), 501);
  EXPECT_EQ(HttpStatus(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatus(absl::StatusCode::kDeadlineExceeded), 504);
  EXPECT_EQ(nlohmann::json::parse(RestError("bad \"x\""))["error"], "bad \"x\"");
}


TEST(HttpOptions, BoundsNameTheFlag) {
  HttpOptions o;
  EXPECT_TRUE(ValidateHttpOptions(o).ok());
  auto message = [](void (*change)(HttpOptions&)) {
    HttpOptions bad;
    change(bad);
    return std::string(ValidateHttpOptions(bad).message());
  };
  EXPECT_THAT(message([](HttpOptions& b) { b.port = 70000; }), HasSubstr("--http_port"));
  EXPECT_THAT(message([](HttpOptions& b) { b.threads = 0; }), HasSubstr("--http_threads"));
  EXPECT_THAT(message([](HttpOptions& b) { b.threads = 1025; }), HasSubstr("--http_threads"));
  EXPECT_THAT(message([](HttpOptions& b) { b.request_timeout = absl::ZeroDuration(); }),
              HasSubstr("--http_timeout_seconds"));
  EXPECT_THAT(message([](HttpOptions& b) { b.keep_alive_timeout = absl::Hours(2); }),
              HasSubstr("--http_keep_alive_seconds"));
}

}  // namespace
// Triton's shared memory routes and bodies.
TEST(KserveRestSharedMemory, RoutesBodiesAndAnswers) {
  struct Want {
    const char* method;
    const char* path;
    RestOp op;
    const char* region;
  };
  for (const Want& w : std::vector<Want>{
           {"GET", "/v2/systemsharedmemory/status", RestOp::kSystemSharedMemoryStatus, ""},
           {"GET", "/v2/systemsharedmemory/region/in/status", RestOp::kSystemSharedMemoryStatus,
            "in"},
           {"POST", "/v2/systemsharedmemory/region/in/register",
            RestOp::kSystemSharedMemoryRegister, "in"},
           {"POST", "/v2/systemsharedmemory/unregister", RestOp::kSystemSharedMemoryUnregister,
            ""},
           {"POST", "/v2/systemsharedmemory/region/in/unregister",
            RestOp::kSystemSharedMemoryUnregister, "in"},
           {"GET", "/v2/cudasharedmemory/status", RestOp::kCudaSharedMemory, ""},
           {"POST", "/v2/cudasharedmemory/region/g/register", RestOp::kCudaSharedMemory, "g"}}) {
    absl::StatusOr<RestRoute> r = ParseRestRoute(w.method, w.path);
    ASSERT_TRUE(r.ok()) << w.path << ": " << r.status();
    EXPECT_EQ(r->op, w.op) << w.path;
    EXPECT_EQ(r->region, w.region) << w.path;
  }
  EXPECT_EQ(ParseRestRoute("POST", "/v2/systemsharedmemory/status").status().code(),
            absl::StatusCode::kInvalidArgument);  // status takes GET
  EXPECT_EQ(ParseRestRoute("POST", "/v2/systemsharedmemory/register").status().code(),
            absl::StatusCode::kNotFound);  // a registration names its region

  inference::SystemSharedMemoryRegisterRequest reg;
  ASSERT_TRUE(
      ParseRestSharedMemoryRegister(R"({"key":"/k","offset":8,"byte_size":64})", &reg).ok());
  EXPECT_EQ(reg.key(), "/k");
  EXPECT_EQ(reg.offset(), 8u);
  EXPECT_EQ(reg.byte_size(), 64u);
  reg.Clear();
  ASSERT_TRUE(ParseRestSharedMemoryRegister(R"({"key":"/k","byte_size":1})", &reg).ok());
  EXPECT_EQ(reg.offset(), 0u);
  for (const char* bad : {R"({"key":"/k"})", R"({"byte_size":4})", R"({"key":1,"byte_size":4})",
                          R"({"key":"/k","byte_size":-1})", R"({"key":"/k","byte_size":4,"x":1})",
                          R"({"key":"/k","byte_size":4.5})", "[]", "{"}) {
    const absl::Status s = ParseRestSharedMemoryRegister(bad, &reg);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("shared memory register request")) << bad;
  }

  inference::SystemSharedMemoryStatusResponse status;
  for (const char* name : {"b", "a"}) {
    auto& r = (*status.mutable_regions())[name];
    r.set_name(name);
    r.set_key(std::string("/") + name);
    r.set_byte_size(16);
  }
  EXPECT_EQ(RestSystemSharedMemoryStatus(status),
            R"([{"byte_size":16,"key":"/a","name":"a","offset":0},)"
            R"({"byte_size":16,"key":"/b","name":"b","offset":0}])");

  // An output in shared memory has no data in the answer, and no binary part.
  inference::ModelInferRequest req;
  auto* o = req.add_outputs();
  o->set_name("output__0");
  (*o->mutable_parameters())["shared_memory_region"].set_string_param("r");
  (*o->mutable_parameters())["shared_memory_byte_size"].set_int64_param(8);
  req.add_outputs()->set_name("treeshap_output");
  inference::ModelInferResponse resp;
  resp.set_model_name("m");
  for (const char* name : {"output__0", "treeshap_output"}) {
    auto* out = resp.add_outputs();
    out->set_name(name);
    out->set_datatype("FP32");
    out->add_shape(1);
    out->add_shape(2);
  }
  resp.add_raw_output_contents("");
  const float values[2] = {0.25f, 0.75f};
  resp.add_raw_output_contents(std::string(reinterpret_cast<const char*>(values), 8));
  int64_t header = 0;
  const std::string body = RestInferResponse(req, resp, &header);
  EXPECT_EQ(header, -1);
  EXPECT_THAT(body, HasSubstr(R"({"name":"output__0","datatype":"FP32","shape":[1,2]})"));
  EXPECT_THAT(body, HasSubstr(R"("data":[0.25,0.75])"));
  EXPECT_THAT(body, Not(HasSubstr("parameters")));
  // The response's parameters (residual_arithmetic) follow the outputs.
  (*resp.mutable_parameters())["residual_arithmetic"].set_string_param("sum \"in\" double");
  EXPECT_THAT(RestInferResponse(req, resp, &header),
              HasSubstr(R"(],"parameters":{"residual_arithmetic":"sum \"in\" double"}})"));
}

}  // namespace grove::server
