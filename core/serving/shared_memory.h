// SharedMemoryRegistry: the system shared memory regions clients on the same host registered
// (Triton's system shared memory extension; grove.v1 RegisterSharedMemory), so that requests name
// their rows and results by (region, offset, byte size) instead of carrying them.
//
// A region is a byte range [offset, offset + byte_size) of a POSIX shared memory object (key
// "/name", shm_open), mapped read-write into this process when it is registered. Requests resolve
// a range of a region with Get(): the span they get holds the mapping (shared_ptr), so a region
// unregistered while requests use it stays mapped until the last of them releases its span; the
// name is free again at once (a new registration under it maps the object anew).
//
// Bounds (SharedMemoryOptions): bytes of one region, bytes mapped together and regions mapped
// together, counted until the mapping is released (an unregistered region still held by requests
// counts). Keys are checked before shm_open (one optional leading '/', then 1 to 255 printable
// ASCII characters without '/', not "." or ".."); every range a request names is checked against
// its region with overflow-safe arithmetic.
//
// Owners: a registration belongs to the caller that made it (`owner`: the server passes the
// credential the call presented, "" without access control). Get, Status and Unregister see only
// the regions of the owner they are given, so one client can neither read nor overwrite another's
// rows and results, nor learn its regions' names and keys. Without access control every caller is
// the same owner "".
//
// The object's owner should not shrink it while it is registered: the pages past the new end are
// gone. Get() re-reads the object's size, so a shrunk object is refused before it is read; a
// shrink during a computation is absorbed by MappingGuard (core/serving/mapping_guard.h): the
// server does not die, the region reads as zeros from the lost page on, and the request that used
// it is refused (SharedMemorySpan::CheckIntact), as is every later request naming the region until
// it is registered again.
//
// Thread-safe: every method may be called concurrently. Register and Unregister may block for as
// long as the pin / unpin hooks take (server: run them on the control thread).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace grove::serving {

struct SharedMemoryOptions {
  // Largest byte_size of one region (default 4 GiB).
  int64_t max_region_bytes = int64_t{4} << 30;
  // Bytes of every region mapped at once (default 16 GiB), unregistered ones still in use included.
  int64_t max_total_bytes = int64_t{16} << 30;
  // Regions mapped at once (each keeps a file descriptor open; default 256).
  int max_regions = 256;
  // Called once per registration, after the region is mapped and before requests can use it, with
  // the address and length of the mapping (page-aligned; it covers the region); a non-OK status
  // fails the registration with that status. A GPU engine pins the pages here
  // (cudaHostRegister) so that its copies of rows and results run at full DMA speed. Null: none.
  std::function<absl::Status(void* address, size_t bytes)> pin;
  // Called with the same arguments when the mapping is released (after the last request using the
  // region finished), on the thread that releases it; must not fail. Null: none.
  std::function<void(void* address, size_t bytes)> unpin;
};

// Bounds of the options: INVALID_ARGUMENT naming the bound otherwise.
absl::Status ValidateSharedMemoryOptions(const SharedMemoryOptions& options);

// The key rule above: INVALID_ARGUMENT saying what is wrong with `key`.
absl::Status CheckSharedMemoryKey(absl::string_view key);
// Region names: 1 to 256 bytes, no control characters. INVALID_ARGUMENT otherwise.
absl::Status CheckSharedMemoryRegionName(absl::string_view name);

// What a registration says about itself (status RPCs).
struct SharedMemoryRegionInfo {
  std::string name;
  std::string key;
  uint64_t offset = 0;     // of the region in the object
  uint64_t byte_size = 0;  // of the region
};

// One registered region's mapping. Immutable; unmapped (and unpinned) when the last reference
// goes.
class SharedMemoryRegion;

// A checked range of a region, and the reference that keeps it mapped. Default: empty (no region).
struct SharedMemorySpan {
  std::shared_ptr<const SharedMemoryRegion> region;
  char* data = nullptr;    // the range's first byte in this process
  uint64_t offset = 0;     // of the range in the region
  uint64_t byte_size = 0;  // of the range

  explicit operator bool() const { return region != nullptr; }
  // Whether this range and `other` share a byte of the same shared memory object (they may come
  // from two registrations of one object).
  bool Overlaps(const SharedMemorySpan& other) const;
  // Makes sure every byte of the range has memory behind it before results are written there
  // (posix_fallocate on the object): a sparse range on a full /dev/shm (Docker's default is 64
  // MiB) would otherwise kill the server with SIGBUS on the first write. RESOURCE_EXHAUSTED
  // naming `what`, the object and the bytes when there is no room. Ranges already backed cost one
  // system call.
  absl::Status Back(absl::string_view what) const;
  // OK unless the region lost pages under a request since it was registered (its object was
  // shrunk, or a page could not be allocated): then FAILED_PRECONDITION naming `what` and the
  // region. Ask it after the computation that used the range and before answering: rows read
  // from it or results written to it are not valid.
  absl::Status CheckIntact(absl::string_view what) const;
};

class SharedMemoryRegistry {
 public:
  // `options` must pass ValidateSharedMemoryOptions (checked by the caller).
  explicit SharedMemoryRegistry(SharedMemoryOptions options);
  // Unregisters everything; mappings still held by spans are released with them (the accounting
  // they need is shared with them, so spans may outlive the registry).
  ~SharedMemoryRegistry();
  SharedMemoryRegistry(const SharedMemoryRegistry&) = delete;
  SharedMemoryRegistry& operator=(const SharedMemoryRegistry&) = delete;

  // Maps bytes [offset, offset + byte_size) of the object `key` and registers them as `name`,
  // owned by `owner`.
  // Errors: ALREADY_EXISTS for a name in use; INVALID_ARGUMENT for a bad name or key, byte_size 0,
  // a range past the object's end (naming both sizes) or an object that is not a regular shared
  // memory object; NOT_FOUND when no object has that key; PERMISSION_DENIED when this process may
  // not open it read-write; RESOURCE_EXHAUSTED when a bound would be passed (naming it); the pin
  // hook's status. Names are one namespace across owners (ALREADY_EXISTS names no owner).
  absl::Status Register(const std::string& name, const std::string& key, uint64_t offset,
                        uint64_t byte_size, absl::string_view owner);
  // Removes `owner`'s region `name` ("" = every region of `owner`); its mapping stays while spans
  // hold it. An unknown name, or another owner's, is not an error (Triton's behaviour:
  // unregistering is idempotent). Returns the names removed.
  std::vector<std::string> Unregister(const std::string& name, absl::string_view owner);
  // Every region of `owner` ("" name, sorted by name) or the one named; NOT_FOUND for a name
  // `owner` has not registered.
  absl::StatusOr<std::vector<SharedMemoryRegionInfo>> Status(const std::string& name,
                                                             absl::string_view owner) const;

  // Bytes [offset, offset + byte_size) of region `name`, for a request: NOT_FOUND when the region
  // is not registered; INVALID_ARGUMENT when the range is empty or not inside the region (naming
  // `what`, e.g. "input 'input__0'", the range and the region's size), or when the object was
  // shrunk below the registration since; FAILED_PRECONDITION when the region lost pages under an
  // earlier request (re-register it in either case). Never blocks on other registrations.
  absl::StatusOr<SharedMemorySpan> Get(absl::string_view name, uint64_t offset, uint64_t byte_size,
                                       absl::string_view what, absl::string_view owner) const;

  // Mapped now (registered, or unregistered and still held).
  int64_t mapped_bytes() const;
  int mapped_regions() const;
  const SharedMemoryOptions& options() const { return options_; }

  // Shared with the mappings, which give their bytes back when released.
  struct Accounting;

 private:
  const SharedMemoryOptions options_;
  const std::shared_ptr<Accounting> accounting_;
  // Held by Register from the name check to the insertion (registrations are serialised), never
  // by Get.
  absl::Mutex control_mu_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const SharedMemoryRegion>> regions_
      ABSL_GUARDED_BY(mu_);
};

// The regions one caller may use: a registry and the caller's owner key. What request parsers
// take, so that every range they resolve is checked against the caller. Does not own the
// registry, which must outlive it. Thread-compatible (its methods are the registry's).
class SharedMemoryAccess {
 public:
  SharedMemoryAccess(const SharedMemoryRegistry* registry, std::string owner)
      : registry_(registry), owner_(std::move(owner)) {}
  // The registry's Get for this owner.
  absl::StatusOr<SharedMemorySpan> Get(absl::string_view name, uint64_t offset,
                                       uint64_t byte_size, absl::string_view what) const {
    return registry_->Get(name, offset, byte_size, what, owner_);
  }
  const std::string& owner() const { return owner_; }

 private:
  const SharedMemoryRegistry* registry_;
  std::string owner_;
};

class SharedMemoryRegion {
 public:
  ~SharedMemoryRegion();  // unpin, munmap, close; gives the bytes back to the accounting
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;

  const SharedMemoryRegionInfo& info() const { return info_; }
  char* data() const { return data_; }  // the region's first byte (object offset info().offset)
  // Whether the mapping lost pages under an access since it was made (MappingGuard).
  bool faulted() const;

 private:
  friend class SharedMemoryRegistry;
  friend struct SharedMemorySpan;
  SharedMemoryRegion(SharedMemoryRegionInfo info, std::shared_ptr<SharedMemoryRegistry::Accounting>
                                                      accounting);

  SharedMemoryRegionInfo info_;
  std::string owner_;
  int guard_slot_ = -1;  // MappingGuard's, while mapped
  std::shared_ptr<SharedMemoryRegistry::Accounting> accounting_;
  int fd_ = -1;
  dev_t device_ = 0;  // identity of the object, for overlap checks
  ino_t inode_ = 0;
  void* mapping_ = nullptr;  // page-aligned start of the mapping
  size_t mapping_bytes_ = 0;
  char* data_ = nullptr;
  bool pinned_ = false;
  bool counted_ = false;  // its bytes are in the accounting
};

}  // namespace grove::serving
