#include "core/io/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace grove {
namespace {

const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a file";
}

absl::Status CheckRegular(const std::string& path, const struct stat& st) {
  if (S_ISREG(st.st_mode)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": not a regular file (", FileKind(st.st_mode), "); refused"));
}

}  // namespace

ScopedFd& ScopedFd::operator=(ScopedFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status ErrnoStatus(int error, const std::string& path, std::string_view what) {
  const std::string message = absl::StrCat(path, ": ", absl::string_view(what.data(), what.size()),
                                           ": ", std::strerror(error));
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::Status(absl::ErrnoToStatusCode(error), message);
  }
}

absl::StatusOr<ScopedFd> OpenRegularFile(const std::string& path, int64_t* size) {
  // stat first, so that a device or FIFO is never opened at all (opening some devices acts);
  // then fstat of the descriptor, in case the path was replaced between the two.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, path, "cannot stat");
  if (absl::Status s = CheckRegular(path, st); !s.ok()) return s;
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) return ErrnoStatus(errno, path, "cannot open");
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, path, "cannot stat");
  if (absl::Status s = CheckRegular(path, st); !s.ok()) return s;
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return ErrnoStatus(errno, path, "cannot clear O_NONBLOCK");
  }
  if (size != nullptr) *size = static_cast<int64_t>(st.st_size);
  return fd;
}

absl::StatusOr<std::string> ReadRegularFile(const std::string& path, int64_t max_bytes) {
  int64_t size = 0;
  absl::StatusOr<ScopedFd> fd = OpenRegularFile(path, &size);
  if (!fd.ok()) return fd.status();
  auto too_large = [&] {
    return absl::InvalidArgumentError(absl::StrCat(path, ": larger than the ", max_bytes,
                                                   " bytes such a file may hold"));
  };
  if (size > max_bytes) return too_large();
  std::string text;
  text.resize(static_cast<size_t>(size));
  size_t done = 0;
  while (true) {
    if (done == text.size()) {  // the file grew (or is at its end): one byte past the limit tells
      const int64_t room = max_bytes - static_cast<int64_t>(done);
      if (room < 0) return too_large();
      text.resize(done + static_cast<size_t>(room < 4096 ? room + 1 : 4096));
    }
    const ssize_t got = ::read(fd->get(), text.data() + done, text.size() - done);
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, path, "cannot read");
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  text.resize(done);
  return text;
}

}  // namespace grove
