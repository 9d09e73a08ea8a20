// Reading the files a model repository, a config or a flag points at. Only regular files are read,
// and opening never blocks: a FIFO (or a device) named model.json or config.json is refused before
// anything waits on it, instead of stalling the loader in open() or read().
//
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grove {

// An open file descriptor, closed when the object goes away. Move-only.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd();

  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// The status of a failed system call on `path`: NOT_FOUND (ENOENT, ENOTDIR), PERMISSION_DENIED
// (EACCES, EPERM), otherwise the errno's canonical code; the message names the path, `what` was
// attempted and strerror.
absl::Status ErrnoStatus(int error, const std::string& path, std::string_view what);

// Opens `path` for reading when it is a regular file (symbolic links are followed). The type is
// checked with stat before the open (a FIFO or device is never opened) and again with fstat on the
// descriptor (the path may have been replaced in between); the open uses O_NONBLOCK, so that even
// then it cannot block, and O_NONBLOCK is cleared afterwards.
// Anything but a regular file is INVALID_ARGUMENT "<path>: not a regular file (<kind>); refused".
// `*size` (optional) receives the file's size.
absl::StatusOr<ScopedFd> OpenRegularFile(const std::string& path, int64_t* size = nullptr);

// The whole content of a regular file (OpenRegularFile's rules); INVALID_ARGUMENT naming the limit
// when it holds more than `max_bytes`.
absl::StatusOr<std::string> ReadRegularFile(
    const std::string& path, int64_t max_bytes = std::numeric_limits<int64_t>::max());

}  // namespace grove
