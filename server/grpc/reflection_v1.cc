#include "server/grpc/reflection_v1.h"

#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"

namespace grove::server {
namespace {

using grpc::reflection::v1::ServerReflectionRequest;
using grpc::reflection::v1::ServerReflectionResponse;
using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;

class ReflectionReactor final
    : public grpc::ServerBidiReactor<ServerReflectionRequest, ServerReflectionResponse> {
 public:
  explicit ReflectionReactor(const std::vector<std::string>* services) : services_(services) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client finished its requests
      Finish(grpc::Status::OK);
      return;
    }
    response_.Clear();
    Answer();
    StartWrite(&response_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
      return;
    }
    StartRead(&request_);
  }
  void OnDone() override { delete this; }

 private:
  void Answer() {
    response_.set_valid_host(request_.host());
    *response_.mutable_original_request() = request_;
    const DescriptorPool* pool = DescriptorPool::generated_pool();
    switch (request_.message_request_case()) {
      case ServerReflectionRequest::kListServices:
        for (const std::string& s : *services_) {
          response_.mutable_list_services_response()->add_service()->set_name(s);
        }
        return;
      case ServerReflectionRequest::kFileByFilename:
        return SendFile(pool->FindFileByName(request_.file_by_filename()),
                        request_.file_by_filename());
      case ServerReflectionRequest::kFileContainingSymbol:
        return SendFile(pool->FindFileContainingSymbol(request_.file_containing_symbol()),
                        request_.file_containing_symbol());
      case ServerReflectionRequest::kFileContainingExtension: {
        const auto& e = request_.file_containing_extension();
        const auto* type = pool->FindMessageTypeByName(e.containing_type());
        const auto* ext =
            type == nullptr ? nullptr : pool->FindExtensionByNumber(type, e.extension_number());
        return SendFile(ext == nullptr ? nullptr : ext->file(),
                        absl::StrCat(e.containing_type(), " extension ", e.extension_number()));
      }
      case ServerReflectionRequest::kAllExtensionNumbersOfType: {
        const auto* type = pool->FindMessageTypeByName(request_.all_extension_numbers_of_type());
        if (type == nullptr) return NotFound(request_.all_extension_numbers_of_type());
        std::vector<const google::protobuf::FieldDescriptor*> extensions;
        pool->FindAllExtensions(type, &extensions);
        auto* out = response_.mutable_all_extension_numbers_response();
        out->set_base_type_name(type->full_name());
        for (const auto* f : extensions) out->add_extension_number(f->number());
        return;
      }
      default:
        response_.mutable_error_response()->set_error_code(
            static_cast<int>(grpc::StatusCode::UNIMPLEMENTED));
        response_.mutable_error_response()->set_error_message(
            "the request names no reflection query groved knows");
    }
  }

  void NotFound(const std::string& what) {
    response_.mutable_error_response()->set_error_code(
        static_cast<int>(grpc::StatusCode::NOT_FOUND));
    response_.mutable_error_response()->set_error_message(
        absl::StrCat("'", what, "' is not described by groved's descriptors"));
  }

  // `file` and the files it imports, each once per stream (the client keeps what it was sent).
  void SendFile(const FileDescriptor* file, const std::string& what) {
    if (file == nullptr) return NotFound(what);
    auto* out = response_.mutable_file_descriptor_response();
    std::vector<const FileDescriptor*> stack = {file};
    while (!stack.empty()) {
      const FileDescriptor* f = stack.back();
      stack.pop_back();
      if (!sent_.insert(f->name()).second) continue;
      google::protobuf::FileDescriptorProto proto;
      f->CopyTo(&proto);
      proto.SerializeToString(out->add_file_descriptor_proto());
      for (int i = 0; i < f->dependency_count(); ++i) stack.push_back(f->dependency(i));
    }
  }

  const std::vector<std::string>* const services_;
  ServerReflectionRequest request_;
  ServerReflectionResponse response_;
  absl::flat_hash_set<std::string> sent_;
};

}  // namespace

grpc::ServerBidiReactor<ServerReflectionRequest, ServerReflectionResponse>*
ReflectionV1Service::ServerReflectionInfo(grpc::CallbackServerContext* context) {
  return new ReflectionReactor(&services_);
}

}  // namespace grove::server
