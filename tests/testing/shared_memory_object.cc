#include "tests/testing/shared_memory_object.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace grove::testing {

SharedMemoryObject::SharedMemoryObject(size_t bytes) : size_(bytes) {
  static std::atomic<int> counter{0};
  key_ = absl::StrCat("/grove-test-", getpid(), "-", counter++);
  const int fd = shm_open(key_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  EXPECT_GE(fd, 0) << "shm_open " << key_;
  if (fd < 0) return;
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  EXPECT_NE(p, MAP_FAILED) << "mmap " << key_;
  if (p != MAP_FAILED) data_ = static_cast<char*>(p);
}

SharedMemoryObject::~SharedMemoryObject() {
  if (data_ != nullptr) munmap(data_, size_);
  shm_unlink(key_.c_str());
}

void SharedMemoryObject::Truncate(size_t bytes) {
  const int fd = shm_open(key_.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0) << "shm_open " << key_;
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  close(fd);
}

}  // namespace grove::testing
