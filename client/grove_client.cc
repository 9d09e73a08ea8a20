#include "client/grove_client.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <limits>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"
#include "grpc/grpc.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

#ifndef ABSL_IS_LITTLE_ENDIAN
#error "grove.v1 raw tensors are little-endian: a big-endian host needs byte swaps in FillMatrix"
#endif

namespace grove::client {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

grove::v1::Output ToProto(Output o) {
  switch (o) {
    case Output::kMargin:
      return grove::v1::OUTPUT_MARGIN;
    case Output::kPrediction:
      return grove::v1::OUTPUT_PREDICTION;
    case Output::kLeaf:
      return grove::v1::OUTPUT_LEAF;
  }
  return grove::v1::OUTPUT_UNSPECIFIED;
}

// A result matrix must have one row per input row (or be absent).
absl::Status CheckRows(const Matrix& m, int64_t num_rows, const char* what) {
  if (m.values.empty() && m.rows == 0) return absl::OkStatus();
  if (m.rows != num_rows || m.cols < 0 ||
      static_cast<int64_t>(m.values.size()) != m.rows * m.cols) {
    return absl::InternalError(absl::StrCat("malformed ", what, " in the server's answer: ", m.rows,
                                            "x", m.cols, " with ", m.values.size(), " values for ",
                                            num_rows, " rows"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

namespace {

template <typename Stub, typename Request, typename Response>
using UnaryRpc = grpc::Status (Stub::*)(grpc::ClientContext*, const Request&, Response*);

// One unary call of `rpc` on `stub` with a context `client` prepared for `call`.
template <typename Stub, typename Request, typename Response>
absl::Status CallUnary(const GroveClient& client, Stub* stub, UnaryRpc<Stub, Request, Response> rpc,
                       const Request& request, const CallOptions& call, Response* response) {
  grpc::ClientContext context;
  client.Prepare(&context, call);
  return FromGrpcStatus((stub->*rpc)(&context, request, response));
}

// Rows as Matrix.raw_f32 / raw_f64 (the values' own bytes, which are the wire's little-endian form
// on this little-endian host), or as the repeated values / values_f64 every groved reads.
template <typename T>
void FillMatrixOf(const T* rows, int64_t num_rows, int64_t num_cols, bool raw,
                  grove::v1::Matrix* out) {
  constexpr bool kF64 = std::is_same_v<T, double>;
  out->Clear();
  out->set_rows(num_rows);
  out->set_cols(num_cols);
  const int64_t n = num_rows * num_cols;
  if (raw) {
    std::string* bytes = kF64 ? out->mutable_raw_f64() : out->mutable_raw_f32();
    bytes->assign(reinterpret_cast<const char*>(rows), static_cast<size_t>(n) * sizeof(T));
  } else if constexpr (kF64) {
    out->mutable_values_f64()->Assign(rows, rows + n);
  } else {
    out->mutable_values()->Assign(rows, rows + n);
  }
}

}  // namespace

void FillMatrix(const float* rows, int64_t num_rows, int64_t num_cols, bool raw,
                grove::v1::Matrix* out) {
  FillMatrixOf(rows, num_rows, num_cols, raw, out);
}

void FillMatrix(const double* rows, int64_t num_rows, int64_t num_cols, bool raw,
                grove::v1::Matrix* out) {
  FillMatrixOf(rows, num_rows, num_cols, raw, out);
}

void FillMatrix(const SharedMemoryRows& rows, grove::v1::Matrix* out) {
  out->Clear();
  out->set_rows(rows.num_rows);
  out->set_cols(rows.num_cols);
  grove::v1::SharedMemoryRange* range =
      rows.float64 ? out->mutable_shared_memory_f64() : out->mutable_shared_memory_f32();
  range->set_region(rows.region);
  range->set_offset(rows.offset);
  range->set_byte_size(static_cast<uint64_t>(rows.num_rows * rows.num_cols) *
                       (rows.float64 ? sizeof(double) : sizeof(float)));
}

absl::StatusOr<std::unique_ptr<SharedMemoryBuffer>> SharedMemoryBuffer::Create(
    const std::string& key, int64_t bytes, int mode) {
  if (bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory object '", key, "': size ", bytes, " is not positive"));
  }
  const int fd = shm_open(key.c_str(), O_CREAT | O_EXCL | O_RDWR, static_cast<mode_t>(mode));
  if (fd < 0) {
    const int e = errno;
    return absl::Status(e == EEXIST ? absl::StatusCode::kAlreadyExists
                                    : absl::StatusCode::kUnavailable,
                        absl::StrCat("cannot create shared memory object '", key,
                                     "': ", std::strerror(e)));
  }
  void* data = MAP_FAILED;
  int e = 0;
  if (ftruncate(fd, static_cast<off_t>(bytes)) == 0) {
    data = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (data == MAP_FAILED) e = errno;
  close(fd);  // the mapping keeps the object
  if (data == MAP_FAILED) {
    shm_unlink(key.c_str());
    return absl::ResourceExhaustedError(absl::StrCat("cannot size or map shared memory object '",
                                                     key, "' of ", bytes, " bytes: ",
                                                     std::strerror(e)));
  }
  return std::unique_ptr<SharedMemoryBuffer>(
      new SharedMemoryBuffer(key, static_cast<char*>(data), bytes));
}

SharedMemoryBuffer::~SharedMemoryBuffer() {
  munmap(data_, static_cast<size_t>(size_));
  shm_unlink(key_.c_str());
}

absl::StatusOr<Matrix> ReadSharedResult(const grove::v1::Matrix& m,
                                        const grove::v1::SharedMemoryRange& output,
                                        const char* output_data) {
  if (!m.has_shared_memory_f32()) return FromProto(m);
  const grove::v1::SharedMemoryRange& at = m.shared_memory_f32();
  const uint64_t values = static_cast<uint64_t>(std::max<int64_t>(0, m.rows())) *
                          static_cast<uint64_t>(std::max<int64_t>(0, m.cols()));
  if (at.region() != output.region() || at.offset() < output.offset() ||
      at.byte_size() != values * sizeof(float) || at.byte_size() > output.byte_size() ||
      at.offset() - output.offset() > output.byte_size() - at.byte_size() || m.rows() < 0 ||
      m.cols() < 0) {
    return absl::InternalError(absl::StrCat(
        "the server placed a ", m.rows(), "x", m.cols(), " result at bytes ", at.offset(), " + ",
        at.byte_size(), " of region '", at.region(), "', outside the output range ",
        output.offset(), " + ", output.byte_size(), " of region '", output.region(), "'"));
  }
  Matrix out;
  out.rows = m.rows();
  out.cols = m.cols();
  out.values.resize(static_cast<size_t>(values));
  if (values > 0) {
    std::memcpy(out.values.data(), output_data + (at.offset() - output.offset()), at.byte_size());
  }
  return out;
}

Matrix FromProto(const grove::v1::Matrix& m) {
  Matrix out;
  out.rows = m.rows();
  out.cols = m.cols();
  if (const std::string& raw = m.raw_f32(); !raw.empty()) {
    // A partial value leaves no values, so that CheckRows refuses the size.
    if (raw.size() % sizeof(float) == 0) {
      out.values.resize(raw.size() / sizeof(float));
      std::memcpy(out.values.data(), raw.data(), raw.size());
    }
  } else {
    out.values.assign(m.values().begin(), m.values().end());
  }
  return out;
}

grove::v1::ExplainRequest MakeExplainRequest(const ExplainParams& params) {
  grove::v1::ExplainRequest request;
  request.set_model(params.model);
  request.set_version(params.version);
  request.set_interactions(params.interactions);
  request.set_top_k(params.top_k);
  request.set_omit_values(params.omit_values);
  request.set_iteration_begin(params.iteration_begin);
  request.set_iteration_end(params.iteration_end);
  request.set_method(params.method);
  request.set_output_space(params.output_space);
  request.set_attribution(params.attribution);
  request.set_residuals(params.residuals);
  for (const grove::v1::FeatureGroup& g : params.groups) *request.add_groups() = g;
  return request;
}

absl::StatusOr<ExplainResult> FromProto(grove::v1::ExplainResponse&& response, int64_t num_rows) {
  ExplainResult r;
  r.version = response.version();
  r.num_features = response.num_features();
  r.num_outputs = response.num_outputs();
  r.values = FromProto(response.values());
  r.bias.assign(response.bias().begin(), response.bias().end());
  r.interactions = FromProto(response.interactions());
  r.top_k = response.top().k();
  r.top_features.assign(response.top().features().begin(), response.top().features().end());
  r.top_values.assign(response.top().values().begin(), response.top().values().end());
  r.residuals = FromProto(response.residuals());
  r.residual_arithmetic = response.residual_arithmetic();
  if (absl::Status s = CheckRows(r.values, num_rows, "SHAP values"); !s.ok()) return s;
  if (absl::Status s = CheckRows(r.residuals, num_rows, "residuals"); !s.ok()) return s;
  if (absl::Status s = CheckRows(r.interactions, num_rows, "interaction values"); !s.ok()) return s;
  return r;
}

GroveClient::GroveClient(ClientOptions options, std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      grove_(grove::v1::Grove::NewStub(channel_)),
      inference_(inference::GRPCInferenceService::NewStub(channel_)) {}

absl::StatusOr<std::unique_ptr<GroveClient>> GroveClient::Create(const ClientOptions& options) {
  if (options.target.empty()) return absl::InvalidArgumentError("no server address (HOST:PORT)");
  for (char c : options.token) {
    // gRPC metadata values are visible ASCII (and groved's tokens are too).
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(
          "the token has a character outside visible ASCII (0x21-0x7e): check for a newline");
    }
  }
  grpc::ChannelArguments args;
  const int limit = static_cast<int>(
      std::clamp<int64_t>(options.max_message_bytes, 4 << 20, std::numeric_limits<int>::max()));
  args.SetMaxReceiveMessageSize(limit);
  args.SetMaxSendMessageSize(limit);
  // A connection of this client's own: gRPC's default (a process-wide pool of subchannels) gives
  // every channel to the same target with the same arguments one shared TCP connection, so that N
  // clients (grove bench --connections N) would still be one connection read by one server thread.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  const bool tls = options.tls || !options.tls_ca_file.empty() || !options.tls_cert_file.empty() ||
                   !options.tls_key_file.empty();
  if (tls) {
    grpc::SslCredentialsOptions ssl;
    if (!options.tls_ca_file.empty()) {
      absl::StatusOr<std::string> ca = ReadFile(options.tls_ca_file);
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *std::move(ca);
    }
    if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
      return absl::InvalidArgumentError("a client certificate needs both a certificate and a key");
    }
    if (!options.tls_cert_file.empty()) {
      absl::StatusOr<std::string> cert = ReadFile(options.tls_cert_file);
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadFile(options.tls_key_file);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(cert);
      ssl.pem_private_key = *std::move(key);
    }
    if (!options.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(options.tls_server_name);
    }
    credentials = grpc::SslCredentials(ssl);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(options.target, credentials, args);
  return std::unique_ptr<GroveClient>(new GroveClient(options, std::move(channel)));
}

void GroveClient::Prepare(grpc::ClientContext* context, const CallOptions& call) const {
  const absl::Duration timeout =
      call.timeout > absl::ZeroDuration() ? call.timeout : options_.default_timeout;
  if (timeout != absl::InfiniteDuration()) {
    context->set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout));
  }
  if (!options_.token.empty()) context->AddMetadata("authorization", "Bearer " + options_.token);
}

absl::Status GroveClient::ExplainStream(const ExplainParams& params, int64_t num_cols,
                                        const NextRowsFn& next, const ExplainDoneFn& done,
                                        int window, const CallOptions& call) {
  return ExplainStreamImpl<float>(params, num_cols, next, done, window, call);
}

absl::Status GroveClient::ExplainStream(const ExplainParams& params, int64_t num_cols,
                                        const NextRowsF64Fn& next, const ExplainDoneFn& done,
                                        int window, const CallOptions& call) {
  return ExplainStreamImpl<double>(params, num_cols, next, done, window, call);
}

namespace {

// A PredictRequest of `params` without rows.
grove::v1::PredictRequest MakePredictRequest(const PredictParams& params) {
  grove::v1::PredictRequest request;
  request.set_model(params.model);
  request.set_version(params.version);
  for (Output o : params.outputs) request.add_outputs(ToProto(o));
  request.set_iteration_begin(params.iteration_begin);
  request.set_iteration_end(params.iteration_end);
  return request;
}

// The results of a Predict of `num_rows` rows, each matrix read by `read` (inline or from shared
// memory) and checked to have a row per input row.
absl::StatusOr<PredictResult> FromProto(
    const grove::v1::PredictResponse& response, int64_t num_rows,
    const std::function<absl::StatusOr<Matrix>(const grove::v1::Matrix&)>& read) {
  PredictResult r;
  r.version = response.version();
  for (auto [from, to, what] :
       {std::make_tuple(&response.margin(), &r.margin, "margin"),
        std::make_tuple(&response.prediction(), &r.prediction, "prediction"),
        std::make_tuple(&response.leaf(), &r.leaf, "leaf")}) {
    absl::StatusOr<Matrix> m = read(*from);
    if (!m.ok()) return m.status();
    *to = *std::move(m);
    if (absl::Status s = CheckRows(*to, num_rows, what); !s.ok()) return s;
  }
  return r;
}

// One unary call of `rpc` on `client`'s stub with `request`, its rows filled from `rows`.
template <typename T, typename Request, typename Response>
absl::Status CallWithRows(GroveClient* client,
                          UnaryRpc<grove::v1::Grove::Stub, Request, Response> rpc,
                          Request* request, const T* rows, int64_t num_rows, int64_t num_cols,
                          bool raw_rows, const CallOptions& call, Response* response) {
  FillMatrix(rows, num_rows, num_cols, raw_rows, request->mutable_rows());
  return CallUnary(*client, client->stub(), rpc, *request, call, response);
}

}  // namespace

template <RowValue T>
absl::StatusOr<PredictResult> GroveClient::Predict(const PredictParams& params, const T* rows,
                                                   int64_t num_rows, int64_t num_cols,
                                                   const CallOptions& call) {
  grove::v1::PredictRequest request = MakePredictRequest(params);
  grove::v1::PredictResponse response;
  if (absl::Status s = CallWithRows(this, &grove::v1::Grove::Stub::Predict, &request, rows,
                                    num_rows, num_cols, params.raw_rows, call, &response);
      !s.ok()) {
    return s;
  }
  return FromProto(response, num_rows, [](const grove::v1::Matrix& m) -> absl::StatusOr<Matrix> {
    return FromProto(m);
  });
}

template <RowValue T>
absl::StatusOr<ExplainResult> GroveClient::Explain(const ExplainParams& params, const T* rows,
                                                   int64_t num_rows, int64_t num_cols,
                                                   const CallOptions& call) {
  grove::v1::ExplainRequest request = MakeExplainRequest(params);
  grove::v1::ExplainResponse response;
  if (absl::Status s = CallWithRows(this, &grove::v1::Grove::Stub::Explain, &request, rows,
                                    num_rows, num_cols, params.raw_rows, call, &response);
      !s.ok()) {
    return s;
  }
  return FromProto(std::move(response), num_rows);
}

// Every RowValue: the header declares Predict and Explain, their callers link to these.
template absl::StatusOr<PredictResult> GroveClient::Predict(const PredictParams&, const float*,
                                                            int64_t, int64_t, const CallOptions&);
template absl::StatusOr<PredictResult> GroveClient::Predict(const PredictParams&, const double*,
                                                            int64_t, int64_t, const CallOptions&);
template absl::StatusOr<ExplainResult> GroveClient::Explain(const ExplainParams&, const float*,
                                                            int64_t, int64_t, const CallOptions&);
template absl::StatusOr<ExplainResult> GroveClient::Explain(const ExplainParams&, const double*,
                                                            int64_t, int64_t, const CallOptions&);

template <typename T>
absl::Status GroveClient::ExplainStreamImpl(
    const ExplainParams& params, int64_t num_cols,
    const std::function<bool(std::vector<T>*, int64_t*)>& next, const ExplainDoneFn& done,
    int window, const CallOptions& call) {
  window = std::max(1, window);
  grpc::ClientContext context;
  Prepare(&context, call);
  std::unique_ptr<grpc::ClientReaderWriter<grove::v1::ExplainRequest, grove::v1::ExplainResponse>>
      stream = grove_->ExplainStream(&context);
  // Rows of each message in flight, oldest first (to check the answers' shapes).
  std::deque<int64_t> in_flight;
  uint64_t sent = 0;
  uint64_t received = 0;
  bool more = true;
  bool write_failed = false;
  absl::Status result;
  std::vector<T> rows;
  grove::v1::ExplainRequest request = MakeExplainRequest(params);
  auto read_one = [&]() -> bool {
    grove::v1::ExplainResponse response;
    if (!stream->Read(&response)) return false;
    const int64_t n = in_flight.front();
    in_flight.pop_front();
    if (response.sequence() != received) {
      result =
          absl::InternalError(absl::StrCat("ExplainStream answered message ", response.sequence(),
                                           " where ", received, " was expected"));
      return false;
    }
    ++received;
    absl::StatusOr<ExplainResult> r = FromProto(std::move(response), n);
    if (!r.ok()) {
      result = r.status();
      return false;
    }
    result = done(received - 1, *std::move(r));
    return result.ok();
  };
  while (result.ok()) {
    if (more && static_cast<int>(in_flight.size()) < window) {
      int64_t n = 0;
      rows.clear();
      more = next(&rows, &n);
      if (!more) {
        write_failed = !stream->WritesDone();
        continue;
      }
      request.set_sequence(sent);
      FillMatrix(rows.data(), n, num_cols, params.raw_rows, request.mutable_rows());
      if (!stream->Write(request)) {
        write_failed = true;
        more = false;
        break;  // the server ended the stream: its status says why
      }
      in_flight.push_back(n);
      ++sent;
      continue;
    }
    if (in_flight.empty()) break;
    if (!read_one()) break;
  }
  if (!result.ok()) {
    context.TryCancel();
    (void)stream->Finish();
    return result;
  }
  if (more) (void)stream->WritesDone();
  // Drain what is left so that Finish reports the server's status.
  grove::v1::ExplainResponse ignored;
  while (stream->Read(&ignored)) {
  }
  grpc::Status status = stream->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  if (received != sent) {
    return absl::InternalError(absl::StrCat("ExplainStream ended after ", received, " of ", sent,
                                            " answers", write_failed ? " (write failed)" : ""));
  }
  return absl::OkStatus();
}

absl::StatusOr<PredictResult> GroveClient::PredictSharedMemory(
    const PredictParams& params, const SharedMemoryRows& rows,
    const grove::v1::SharedMemoryRange& output, const char* output_data, const CallOptions& call) {
  grove::v1::PredictRequest request = MakePredictRequest(params);
  FillMatrix(rows, request.mutable_rows());
  *request.mutable_output_shared_memory() = output;
  grove::v1::PredictResponse response;
  if (absl::Status s = CallUnary(*this, grove_.get(), &grove::v1::Grove::Stub::Predict, request,
                                 call, &response);
      !s.ok()) {
    return s;
  }
  return FromProto(response, rows.num_rows, [&](const grove::v1::Matrix& m) {
    return ReadSharedResult(m, output, output_data);
  });
}

absl::Status GroveClient::RegisterSharedMemory(const std::string& name, const std::string& key,
                                               uint64_t offset, uint64_t byte_size,
                                               const CallOptions& call) {
  grove::v1::RegisterSharedMemoryRequest request;
  request.set_name(name);
  request.set_key(key);
  request.set_offset(offset);
  request.set_byte_size(byte_size);
  grove::v1::RegisterSharedMemoryResponse response;
  return CallUnary(*this, grove_.get(), &grove::v1::Grove::Stub::RegisterSharedMemory, request,
                   call, &response);
}

absl::StatusOr<std::vector<std::string>> GroveClient::UnregisterSharedMemory(
    const std::string& name, const CallOptions& call) {
  grove::v1::UnregisterSharedMemoryRequest request;
  request.set_name(name);
  grove::v1::UnregisterSharedMemoryResponse response;
  if (absl::Status s = CallUnary(*this, grove_.get(),
                                 &grove::v1::Grove::Stub::UnregisterSharedMemory, request, call,
                                 &response);
      !s.ok()) {
    return s;
  }
  return std::vector<std::string>(response.unregistered().begin(), response.unregistered().end());
}

absl::StatusOr<std::vector<grove::v1::SharedMemoryRegion>> GroveClient::SharedMemoryStatus(
    const std::string& name, const CallOptions& call) {
  grove::v1::SharedMemoryStatusRequest request;
  request.set_name(name);
  grove::v1::SharedMemoryStatusResponse response;
  if (absl::Status s = CallUnary(*this, grove_.get(),
                                 &grove::v1::Grove::Stub::GetSharedMemoryStatus, request, call,
                                 &response);
      !s.ok()) {
    return s;
  }
  return std::vector<grove::v1::SharedMemoryRegion>(response.regions().begin(),
                                                    response.regions().end());
}

absl::StatusOr<std::vector<ModelInfo>> GroveClient::ListModels(const CallOptions& call) {
  grove::v1::ListModelsResponse response;
  if (absl::Status s = CallUnary(*this, grove_.get(), &grove::v1::Grove::Stub::ListModels,
                                 grove::v1::ListModelsRequest(), call, &response);
      !s.ok()) {
    return s;
  }
  std::vector<ModelInfo> out;
  for (const grove::v1::ModelStatus& m : response.models()) {
    out.push_back({m.name(), m.ready(), {m.versions().begin(), m.versions().end()}});
  }
  return out;
}

absl::StatusOr<grove::v1::ModelMetadata> GroveClient::GetModelMetadata(const std::string& model,
                                                                       int64_t version,
                                                                       const CallOptions& call) {
  grove::v1::GetModelMetadataRequest request;
  request.set_model(model);
  request.set_version(version);
  grove::v1::ModelMetadata response;
  if (absl::Status s = CallUnary(*this, grove_.get(), &grove::v1::Grove::Stub::GetModelMetadata,
                                 request, call, &response);
      !s.ok()) {
    return s;
  }
  return response;
}

absl::StatusOr<ModelInfo> GroveClient::LoadModel(const std::string& model,
                                                 const CallOptions& call) {
  grove::v1::LoadModelRequest request;
  request.set_model(model);
  grove::v1::LoadModelResponse response;
  if (absl::Status s = CallUnary(*this, grove_.get(), &grove::v1::Grove::Stub::LoadModel, request,
                                 call, &response);
      !s.ok()) {
    return s;
  }
  const grove::v1::ModelStatus& m = response.status();
  return ModelInfo{m.name(), m.ready(), {m.versions().begin(), m.versions().end()}};
}

absl::Status GroveClient::UnloadModel(const std::string& model, const CallOptions& call) {
  grove::v1::UnloadModelRequest request;
  request.set_model(model);
  grove::v1::UnloadModelResponse response;
  return CallUnary(*this, grove_.get(), &grove::v1::Grove::Stub::UnloadModel, request, call,
                   &response);
}

absl::StatusOr<bool> GroveClient::ServerLive(const CallOptions& call) {
  inference::ServerLiveResponse response;
  if (absl::Status s = CallUnary(*this, inference_.get(),
                                 &inference::GRPCInferenceService::Stub::ServerLive,
                                 inference::ServerLiveRequest(), call, &response);
      !s.ok()) {
    return s;
  }
  return response.live();
}

absl::StatusOr<bool> GroveClient::ServerReady(const CallOptions& call) {
  inference::ServerReadyResponse response;
  if (absl::Status s = CallUnary(*this, inference_.get(),
                                 &inference::GRPCInferenceService::Stub::ServerReady,
                                 inference::ServerReadyRequest(), call, &response);
      !s.ok()) {
    return s;
  }
  return response.ready();
}

absl::StatusOr<bool> GroveClient::ModelReady(const std::string& model, int64_t version,
                                             const CallOptions& call) {
  inference::ModelReadyRequest request;
  request.set_name(model);
  if (version > 0) request.set_version(absl::StrCat(version));
  inference::ModelReadyResponse response;
  if (absl::Status s = CallUnary(*this, inference_.get(),
                                 &inference::GRPCInferenceService::Stub::ModelReady, request, call,
                                 &response);
      !s.ok()) {
    return s;
  }
  return response.ready();
}

absl::Status GroveClient::WaitForReady(absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  absl::Status last = absl::DeadlineExceededError("server not ready");
  while (absl::Now() < end) {
    CallOptions call;
    call.timeout = std::max(absl::Milliseconds(100), std::min(absl::Seconds(2), end - absl::Now()));
    absl::StatusOr<bool> ready = ServerReady(call);
    if (ready.ok() && *ready) return absl::OkStatus();
    if (!ready.ok()) last = ready.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("server ", options_.target, " not ready after ", absl::FormatDuration(timeout),
                   last.ok() ? "" : absl::StrCat(": ", last.message())));
}

}  // namespace grove::client
