// A POSIX shared memory object for tests, as a client on groved's host makes one: created under a
// key unique to the process (shm_open O_CREAT | O_EXCL, mode 0600), zero-filled, mapped
// read-write; unmapped and unlinked when destroyed. Failures are test failures (gtest).
//
// Not thread-safe (its bytes are the test's to share).
#pragma once

#include <cstddef>
#include <string>

namespace grove::testing {

class SharedMemoryObject {
 public:
  explicit SharedMemoryObject(size_t bytes);
  ~SharedMemoryObject();
  SharedMemoryObject(const SharedMemoryObject&) = delete;
  SharedMemoryObject& operator=(const SharedMemoryObject&) = delete;

  const std::string& key() const { return key_; }  // "/grove-test-PID-N"
  char* data() const { return data_; }             // page-aligned
  size_t size() const { return size_; }
  // Resizes the object (not this mapping: bytes past the new end must not be touched here).
  void Truncate(size_t bytes);

 private:
  std::string key_;
  char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace grove::testing
