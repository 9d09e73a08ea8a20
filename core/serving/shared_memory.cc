#include "core/serving/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/serving/mapping_guard.h"

namespace grove::serving {

struct SharedMemoryRegistry::Accounting {
  explicit Accounting(SharedMemoryOptions o) : options(std::move(o)) {}
  const SharedMemoryOptions options;
  absl::Mutex mu;
  int64_t bytes ABSL_GUARDED_BY(mu) = 0;
  int regions ABSL_GUARDED_BY(mu) = 0;
};

namespace {

// "Permission denied" etc. for errno `e`.
std::string ErrnoText(int e) {
  char buf[128];
  // GNU strerror_r returns the message (which may not be `buf`).
  return std::string(strerror_r(e, buf, sizeof(buf)));
}

absl::StatusCode OpenErrorCode(int e) {
  switch (e) {
    case ENOENT: return absl::StatusCode::kNotFound;
    case EACCES:
    case EPERM: return absl::StatusCode::kPermissionDenied;
    case EMFILE:
    case ENFILE:
    case ENOMEM: return absl::StatusCode::kResourceExhausted;
    case EINVAL:
    case ENAMETOOLONG:
    case ELOOP: return absl::StatusCode::kInvalidArgument;
    default: return absl::StatusCode::kInternal;
  }
}

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

absl::Status ValidateSharedMemoryOptions(const SharedMemoryOptions& o) {
  if (o.max_region_bytes < 1 || o.max_region_bytes > (int64_t{1} << 46)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared memory: the largest region (", o.max_region_bytes, " bytes) is outside 1..2^46"));
  }
  if (o.max_total_bytes < o.max_region_bytes || o.max_total_bytes > (int64_t{1} << 48)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared memory: the bytes of all regions (", o.max_total_bytes,
        ") must be at least the largest region (", o.max_region_bytes, ") and at most 2^48"));
  }
  if (o.max_regions < 1 || o.max_regions > 65536) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared memory: the number of regions (", o.max_regions, ") is outside 1..65536"));
  }
  return absl::OkStatus();
}

absl::Status CheckSharedMemoryKey(absl::string_view key) {
  absl::string_view name = key;
  if (!name.empty() && name.front() == '/') name.remove_prefix(1);
  if (name.empty()) {
    return absl::InvalidArgumentError(
        "shared memory key is empty: it names a POSIX shared memory object, as \"/name\"");
  }
  if (name.size() > 255) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared memory key of ", key.size(), " characters is too long: at most 255 after the "
        "leading '/'"));
  }
  if (name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared memory key '", key, "' is not an object name (\".\" and \"..\" are directories)"));
  }
  for (char c : name) {
    if (c == '/') {
      return absl::InvalidArgumentError(absl::StrCat(
          "shared memory key '", key, "' has a '/' after its first character: a POSIX shared "
          "memory object is named \"/name\", without further slashes"));
    }
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(
          "shared memory key holds a character that is not printable ASCII");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSharedMemoryRegionName(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("shared memory region name is empty");
  if (name.size() > 256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared memory region name of ", name.size(), " bytes is too long (at most 256)"));
  }
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError(
          "shared memory region name holds a control character");
    }
  }
  return absl::OkStatus();
}

bool SharedMemorySpan::Overlaps(const SharedMemorySpan& other) const {
  if (region == nullptr || other.region == nullptr || byte_size == 0 || other.byte_size == 0) {
    return false;
  }
  if (region->device_ != other.region->device_ || region->inode_ != other.region->inode_) {
    return false;
  }
  // Object offsets: each registration was checked to lie inside the object, so no sum overflows.
  const uint64_t a = region->info().offset + offset;
  const uint64_t b = other.region->info().offset + other.offset;
  return a < b + other.byte_size && b < a + byte_size;
}

SharedMemoryRegion::SharedMemoryRegion(SharedMemoryRegionInfo info,
                                       std::shared_ptr<SharedMemoryRegistry::Accounting> accounting)
    : info_(std::move(info)), accounting_(std::move(accounting)) {}

bool SharedMemoryRegion::faulted() const { return MappingGuard::Faulted(guard_slot_); }

SharedMemoryRegion::~SharedMemoryRegion() {
  MappingGuard::Remove(guard_slot_);  // before munmap: the address range may be reused after it
  if (pinned_ && accounting_->options.unpin) accounting_->options.unpin(mapping_, mapping_bytes_);
  if (mapping_ != nullptr) munmap(mapping_, mapping_bytes_);
  if (fd_ >= 0) close(fd_);
  if (counted_) {
    absl::MutexLock lock(&accounting_->mu);
    accounting_->bytes -= static_cast<int64_t>(info_.byte_size);
    accounting_->regions -= 1;
  }
}

SharedMemoryRegistry::SharedMemoryRegistry(SharedMemoryOptions options)
    : options_(options), accounting_(std::make_shared<Accounting>(std::move(options))) {}

SharedMemoryRegistry::~SharedMemoryRegistry() {
  absl::flat_hash_map<std::string, std::shared_ptr<const SharedMemoryRegion>> released;
  {
    absl::MutexLock lock(&mu_);
    released.swap(regions_);
  }
}

absl::Status SharedMemoryRegistry::Register(const std::string& name, const std::string& key,
                                            uint64_t offset, uint64_t byte_size,
                                            absl::string_view owner) {
  if (absl::Status s = CheckSharedMemoryRegionName(name); !s.ok()) return s;
  if (absl::Status s = CheckSharedMemoryKey(key); !s.ok()) return s;
  if (byte_size == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared memory region '", name, "': byte_size is 0; a region holds at least one byte"));
  }
  if (byte_size > static_cast<uint64_t>(options_.max_region_bytes)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "shared memory region '", name, "' of ", byte_size, " bytes is larger than the limit of ",
        options_.max_region_bytes, " bytes per region"));
  }
  // Registrations are serialised (a name is checked and taken atomically) without holding mu_
  // while the object is opened, mapped and pinned, so that requests resolving other regions never
  // wait for them.
  absl::MutexLock control(&control_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (regions_.contains(name)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "shared memory region '", name, "' is already registered; unregister it first or "
          "choose another name"));
    }
  }
  std::shared_ptr<SharedMemoryRegion> region(
      new SharedMemoryRegion(SharedMemoryRegionInfo{name, key, offset, byte_size}, accounting_));
  region->owner_ = std::string(owner);
  {
    absl::MutexLock lock(&accounting_->mu);
    if (accounting_->regions >= options_.max_regions) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot register shared memory region '", name, "': ", accounting_->regions,
          " regions are mapped, the limit (regions still used by requests after they were "
          "unregistered count until those finish)"));
    }
    if (accounting_->bytes > options_.max_total_bytes - static_cast<int64_t>(byte_size)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot register shared memory region '", name, "' of ", byte_size, " bytes: ",
          accounting_->bytes, " bytes are mapped and the limit is ", options_.max_total_bytes,
          " (regions still used by requests after they were unregistered count until those "
          "finish)"));
    }
    accounting_->bytes += static_cast<int64_t>(byte_size);
    accounting_->regions += 1;
    region->counted_ = true;
  }
  // From here on `region`'s destructor undoes whatever was done (unpin, munmap, close, accounting).
  region->fd_ = shm_open(key.c_str(), O_RDWR, 0);
  if (region->fd_ < 0) {
    const int e = errno;
    return absl::Status(OpenErrorCode(e),
                        absl::StrCat("cannot open shared memory object '", key,
                                     "' read-write for region '", name, "': ", ErrnoText(e),
                                     e == EACCES ? " (groved's user must be able to read and "
                                                   "write it)"
                                                 : ""));
  }
  struct stat st;
  if (fstat(region->fd_, &st) != 0) {
    const int e = errno;
    return absl::InternalError(
        absl::StrCat("cannot stat shared memory object '", key, "': ", ErrnoText(e)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", key, "' is not a shared memory object (not a regular file)"));
  }
  const uint64_t object_bytes = static_cast<uint64_t>(std::max<off_t>(st.st_size, 0));
  if (byte_size > object_bytes || offset > object_bytes - byte_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared memory region '", name, "': bytes ", offset, " + ", byte_size,
        " run past the end of object '", key, "', which holds ", object_bytes, " bytes"));
  }
  region->device_ = st.st_dev;
  region->inode_ = st.st_ino;
  // mmap takes a page-aligned file offset: map from the page holding `offset`.
  const uint64_t lead = offset % PageSize();
  region->mapping_bytes_ = static_cast<size_t>(byte_size + lead);
  void* mapping = mmap(nullptr, region->mapping_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED,
                       region->fd_, static_cast<off_t>(offset - lead));
  if (mapping == MAP_FAILED) {
    const int e = errno;
    return absl::Status(e == ENOMEM ? absl::StatusCode::kResourceExhausted
                                    : absl::StatusCode::kInternal,
                        absl::StrCat("cannot map shared memory object '", key, "' for region '",
                                     name, "': ", ErrnoText(e)));
  }
  region->mapping_ = mapping;
  region->data_ = static_cast<char*>(mapping) + lead;
  region->guard_slot_ = MappingGuard::Add(region->mapping_, region->mapping_bytes_);
  if (region->guard_slot_ < 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot register shared memory region '", name, "': ", MappingGuard::kCapacity,
        " mappings are guarded in this process, the most there can be"));
  }
  if (options_.pin) {
    if (absl::Status s = options_.pin(region->mapping_, region->mapping_bytes_); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("cannot pin shared memory region '", name,
                                                 "': ", s.message()));
    }
    region->pinned_ = true;
  }
  absl::MutexLock lock(&mu_);
  regions_.emplace(name, std::move(region));
  return absl::OkStatus();
}

std::vector<std::string> SharedMemoryRegistry::Unregister(const std::string& name,
                                                         absl::string_view owner) {
  std::vector<std::shared_ptr<const SharedMemoryRegion>> released;
  std::vector<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    if (name.empty()) {
      for (auto it = regions_.begin(); it != regions_.end();) {
        if (it->second->owner_ == owner) {
          names.push_back(it->first);
          released.push_back(std::move(it->second));
          regions_.erase(it++);
        } else {
          ++it;
        }
      }
    } else if (auto it = regions_.find(name);
               it != regions_.end() && it->second->owner_ == owner) {
      names.push_back(name);
      released.push_back(std::move(it->second));
      regions_.erase(it);
    }
  }
  // The mappings no request holds are released here, outside the lock (unpin may take a while).
  released.clear();
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::vector<SharedMemoryRegionInfo>> SharedMemoryRegistry::Status(
    const std::string& name, absl::string_view owner) const {
  std::vector<SharedMemoryRegionInfo> out;
  absl::MutexLock lock(&mu_);
  if (!name.empty()) {
    auto it = regions_.find(name);
    if (it == regions_.end() || it->second->owner_ != owner) {
      return absl::NotFoundError(
          absl::StrCat("shared memory region '", name, "' is not registered"));
    }
    out.push_back(it->second->info());
    return out;
  }
  for (const auto& [n, r] : regions_) {
    if (r->owner_ == owner) out.push_back(r->info());
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

absl::StatusOr<SharedMemorySpan> SharedMemoryRegistry::Get(absl::string_view name,
                                                           uint64_t offset, uint64_t byte_size,
                                                           absl::string_view what,
                                                           absl::string_view owner) const {
  std::shared_ptr<const SharedMemoryRegion> region;
  {
    absl::MutexLock lock(&mu_);
    auto it = regions_.find(name);
    if (it != regions_.end() && it->second->owner_ == owner) region = it->second;
  }
  if (region == nullptr) {
    return absl::NotFoundError(absl::StrCat(what, ": shared memory region '", name,
                                            "' is not registered"));
  }
  const SharedMemoryRegionInfo& info = region->info();
  if (byte_size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the byte size in shared memory region '", name, "' is 0"));
  }
  if (byte_size > info.byte_size || offset > info.byte_size - byte_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": bytes ", offset, " + ", byte_size, " run past the end of shared memory region '",
        name, "', which holds ", info.byte_size, " bytes"));
  }
  if (region->faulted()) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": shared memory object '", info.key, "' of region '", name,
        "' lost pages under an earlier request (it was shrunk while in use); unregister the "
        "region and register it again"));
  }
  struct stat st;
  if (fstat(region->fd_, &st) != 0 || st.st_size < 0 ||
      static_cast<uint64_t>(st.st_size) < info.offset + info.byte_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": shared memory object '", info.key, "' of region '", name,
        "' was shrunk below the registered bytes ", info.offset, " + ", info.byte_size,
        " after it was registered; unregister the region and register it again"));
  }
  SharedMemorySpan span;
  span.data = region->data() + offset;
  span.offset = offset;
  span.byte_size = byte_size;
  span.region = std::move(region);
  return span;
}

absl::Status SharedMemorySpan::Back(absl::string_view what) const {
  if (region == nullptr || byte_size == 0) return absl::OkStatus();
  const SharedMemoryRegionInfo& info = region->info();
  const int err = posix_fallocate(region->fd_, static_cast<off_t>(info.offset + offset),
                                  static_cast<off_t>(byte_size));
  if (err == 0) return absl::OkStatus();
  const std::string where = absl::StrCat(what, ": bytes ", offset, " + ", byte_size,
                                         " of shared memory object '", info.key, "'");
  if (err == ENOSPC) {
    return absl::ResourceExhaustedError(absl::StrCat(
        where, " have no memory behind them and there is no room for it (/dev/shm is full); "
        "write the range once before registering it, or enlarge /dev/shm"));
  }
  return absl::InternalError(absl::StrCat(where, ": cannot be backed: ", std::strerror(err)));
}

absl::Status SharedMemorySpan::CheckIntact(absl::string_view what) const {
  if (region == nullptr || !region->faulted()) return absl::OkStatus();
  const SharedMemoryRegionInfo& info = region->info();
  return absl::FailedPreconditionError(absl::StrCat(
      what, ": shared memory object '", info.key, "' of region '", info.name,
      "' lost pages while this request used it (its owner shrank it, or /dev/shm had no room "
      "for a page): the rows read from it or the results written to it are not valid; the "
      "region is refused until it is registered again"));
}

int64_t SharedMemoryRegistry::mapped_bytes() const {
  absl::MutexLock lock(&accounting_->mu);
  return accounting_->bytes;
}

int SharedMemoryRegistry::mapped_regions() const {
  absl::MutexLock lock(&accounting_->mu);
  return accounting_->regions;
}

}  // namespace grove::serving
