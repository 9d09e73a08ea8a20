#include "server/control.h"

#include <memory>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/strings/str_cat.h"

namespace grove::server {
namespace {

// Runs `apply` on the runtime's control thread and answers `done` there with its status. A call
// whose client gave up while it waited is not applied (a timed-out unload must not take the model
// down later): `not_applied` completes the message ("the model was not loaded").
void RunControlCall(Runtime* runtime, absl::Time deadline, std::function<bool()> cancelled,
                    std::string not_applied, absl::AnyInvocable<absl::Status() &&> apply,
                    std::function<void(absl::Status)> done) {
  runtime->RunControl([deadline, cancelled = std::move(cancelled),
                       not_applied = std::move(not_applied), apply = std::move(apply),
                       done = std::move(done)]() mutable {
    if (deadline <= absl::Now()) {
      done(absl::DeadlineExceededError(absl::StrCat(
          "the call's deadline expired while it waited for the control thread; ", not_applied)));
      return;
    }
    if (cancelled()) {
      done(absl::CancelledError(absl::StrCat(
          "the call was cancelled while it waited for the control thread; ", not_applied)));
      return;
    }
    done(std::move(apply)());
  });
}

}  // namespace

void StartModelControl(Runtime* runtime, bool model_control, ModelControl op, std::string model,
                       absl::Time deadline, std::function<bool()> cancelled,
                       std::function<void(absl::Status)> done) {
  const char* what = op == ModelControl::kLoad ? "loaded" : "unloaded";
  if (!model_control) {
    done(absl::UnimplementedError(absl::StrCat(
        "model control is off on this server, so the model cannot be ", what,
        " by a call: groved loads and unloads models from its repository unless it runs with "
        "--model_control (with access control, callers with role admin only)")));
    return;
  }
  RunControlCall(runtime, deadline, std::move(cancelled), absl::StrCat("the model was not ", what),
                 [runtime, op, model = std::move(model)] {
                   return op == ModelControl::kLoad ? runtime->registry().Load(model)
                                                    : runtime->registry().Unload(model);
                 },
                 std::move(done));
}

void StartSharedMemoryControl(
    Runtime* runtime, SharedMemoryControl request, absl::Time deadline,
    std::function<bool()> cancelled,
    std::function<void(absl::Status, std::vector<std::string> unregistered)> done) {
  const bool registering = request.op == SharedMemoryControl::Op::kRegister;
  if (!runtime->shared_memory_enabled()) {
    done(absl::UnimplementedError(absl::StrCat(
             "system shared memory is off on this server, so regions cannot be ",
             registering ? "registered" : "unregistered",
             ": groved maps clients' shared memory only when it runs with --shared_memory (with "
             "access control, callers with role admin only)")),
         {});
    return;
  }
  auto removed = std::make_shared<std::vector<std::string>>();
  RunControlCall(
      runtime, deadline, std::move(cancelled),
      registering ? absl::StrCat("region '", request.name, "' was not registered")
                  : std::string("nothing was unregistered"),
      [runtime, request = std::move(request), removed] {
        if (request.op == SharedMemoryControl::Op::kRegister) {
          return runtime->shared_memory().Register(request.name, request.key, request.offset,
                                                   request.byte_size, request.owner);
        }
        *removed = runtime->shared_memory().Unregister(request.name, request.owner);
        return absl::OkStatus();
      },
      [removed, done = std::move(done)](absl::Status s) { done(std::move(s), *removed); });
}

}  // namespace grove::server
