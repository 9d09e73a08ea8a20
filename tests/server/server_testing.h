// What the server tests share: an in-process groved on loopback (ephemeral ports, a channel to
// it), a model version for the conversions and the KServe input tensor of a request.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "core/model/loader.h"
#include "inference/grpc_service.pb.h"
#include "server/server.h"

namespace grove::server {

// The model file at `path` as version 3 of model "m" with CPU engines built on first use, as the
// request conversions see it.
inline registry::ModelVersionPtr CpuModelVersion(const std::string& path,
                                                 registry::ModelConfig config = {}) {
  absl::StatusOr<ForestPtr> forest = LoadModelFile(path);
  EXPECT_TRUE(forest.ok()) << forest.status();
  auto s = std::make_shared<registry::ModelVersion>();
  s->name = "m";
  s->version = 3;
  EngineOptions options;
  options.device = Device::kCpu;
  options.build = EngineBuild::kOnFirstUse;
  s->servable = *BuildServable(*forest, nullptr, options, nullptr);
  s->config = std::make_shared<const registry::ModelConfig>(config);
  return s;
}

// Options serving `repository` with 2 compute threads, every port ephemeral on 127.0.0.1 and no
// repository polling.
inline ServerOptions LoopbackServerOptions(const std::string& repository) {
  ServerOptions o;
  o.runtime.model_repository = repository;
  o.runtime.compute_threads = 2;
  o.grpc_address = "127.0.0.1";
  o.grpc_port = 0;
  o.metrics_address = "127.0.0.1";
  o.metrics_port = 0;
  o.http.address = "127.0.0.1";
  o.http.port = 0;
  o.repository_poll = absl::ZeroDuration();
  return o;
}

struct LoopbackServer {
  std::unique_ptr<GroveServer> server;  // null when it did not start (a test failure)
  std::shared_ptr<grpc::Channel> channel;
};

// Starts `options` and waits for the start-up load; failures are test failures.
inline LoopbackServer StartLoopbackServer(ServerOptions options) {
  LoopbackServer out;
  absl::StatusOr<std::unique_ptr<GroveServer>> s = GroveServer::Start(std::move(options));
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return out;
  out.server = *std::move(s);
  EXPECT_TRUE(out.server->WaitUntilLoaded().ok());
  out.channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", out.server->grpc_port()),
                                    grpc::InsecureChannelCredentials());
  return out;
}

// Adds input__0 of shape [rows, cols] and `datatype` to `request` (contents left to the caller).
inline inference::ModelInferRequest::InferInputTensor* AddInput0(
    inference::ModelInferRequest* request, int64_t rows, int64_t cols,
    const char* datatype = "FP32") {
  auto* in = request->add_inputs();
  in->set_name("input__0");
  in->set_datatype(datatype);
  in->add_shape(rows);
  in->add_shape(cols);
  return in;
}

}  // namespace grove::server
