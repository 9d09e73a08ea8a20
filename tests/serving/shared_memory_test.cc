// SharedMemoryRegistry over real POSIX shared memory objects (created and unlinked by each test):
// keys and names, the bounds, every range check, the pin / unpin hooks, and that a region stays
// mapped while a span (a request) holds it, whatever is unregistered or registered meanwhile.
#include "core/serving/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/shared_memory_object.h"

namespace grove::serving {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A shared memory object of `bytes` bytes filled with bytes 0, 1, 2, ... (mod 251).
class ShmObject : public grove::testing::SharedMemoryObject {
 public:
  explicit ShmObject(size_t bytes) : SharedMemoryObject(bytes) {
    for (size_t i = 0; i < bytes; ++i) data()[i] = static_cast<char>(i % 251);
  }
  unsigned char* bytes() { return reinterpret_cast<unsigned char*>(data()); }
};

TEST(SharedMemoryKeyTest, AcceptsPosixObjectNames) {
  EXPECT_TRUE(CheckSharedMemoryKey("/grove_rows").ok());
  EXPECT_TRUE(CheckSharedMemoryKey("grove_rows").ok());  // shm_open adds the slash
  EXPECT_TRUE(CheckSharedMemoryKey(std::string("/") + std::string(255, 'k')).ok());
}

TEST(SharedMemoryKeyTest, RefusesWhatIsNotOneObjectName) {
  for (const std::string& key :
       {std::string(""), std::string("/"), std::string("/a/b"), std::string("a/b"),
        std::string("//a"), std::string("/."), std::string("/.."), std::string(".."),
        std::string("/") + std::string(256, 'k'), std::string("/a\nb"), std::string("/a\x80")}) {
    const absl::Status s = CheckSharedMemoryKey(key);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "'" << key << "'";
  }
  EXPECT_THAT(CheckSharedMemoryKey("/a/b").message(), HasSubstr("'/'"));
  EXPECT_THAT(CheckSharedMemoryKey(std::string(300, 'k')).message(), HasSubstr("at most 255"));
}

TEST(SharedMemoryKeyTest, RegionNames) {
  EXPECT_TRUE(CheckSharedMemoryRegionName("input rows #1").ok());
  EXPECT_EQ(CheckSharedMemoryRegionName("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckSharedMemoryRegionName(std::string(257, 'n')).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckSharedMemoryRegionName("a\tb").code(), absl::StatusCode::kInvalidArgument);
}

TEST(SharedMemoryOptionsTest, Bounds) {
  EXPECT_TRUE(ValidateSharedMemoryOptions(SharedMemoryOptions()).ok());
  SharedMemoryOptions o;
  o.max_region_bytes = 0;
  EXPECT_EQ(ValidateSharedMemoryOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o = SharedMemoryOptions();
  o.max_total_bytes = o.max_region_bytes - 1;
  EXPECT_EQ(ValidateSharedMemoryOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o = SharedMemoryOptions();
  o.max_regions = 0;
  EXPECT_EQ(ValidateSharedMemoryOptions(o).code(), absl::StatusCode::kInvalidArgument);
}

TEST(SharedMemoryRegistryTest, RegisterMapsTheRangeAtAnyOffset) {
  ShmObject object(3 * 4096);
  SharedMemoryRegistry registry{SharedMemoryOptions()};
  // An offset that is not page-aligned: the mapping starts at its page, the region at the byte.
  ASSERT_TRUE(registry.Register("r", object.key(), 5000, 3000, "").ok());
  absl::StatusOr<SharedMemorySpan> span = registry.Get("r", 10, 100, "rows", "");
  ASSERT_TRUE(span.ok()) << span.status();
  EXPECT_EQ(span->offset, 10u);
  EXPECT_EQ(span->byte_size, 100u);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(static_cast<unsigned char>(span->data[i]), (5000 + 10 + i) % 251) << i;
  }
  // Writes reach the object (results are written there).
  span->data[0] = 42;
  EXPECT_EQ(object.bytes()[5010], 42);
  EXPECT_EQ(registry.mapped_bytes(), 3000);
  EXPECT_EQ(registry.mapped_regions(), 1);

  absl::StatusOr<std::vector<SharedMemoryRegionInfo>> status = registry.Status("", "");
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(status->size(), 1u);
  EXPECT_EQ((*status)[0].name, "r");
  EXPECT_EQ((*status)[0].key, object.key());
  EXPECT_EQ((*status)[0].offset, 5000u);
  EXPECT_EQ((*status)[0].byte_size, 3000u);
  EXPECT_EQ(registry.Status("other", "").status().code(), absl::StatusCode::kNotFound);
}

TEST(SharedMemoryRegistryTest, RegisterErrors) {
  ShmObject object(8192);
  SharedMemoryOptions options;
  options.max_region_bytes = 8192;
  SharedMemoryRegistry registry(options);
  auto code = [&](const std::string& name, const std::string& key, uint64_t offset,
                  uint64_t bytes) { return registry.Register(name, key, offset, bytes, "").code(); };
  EXPECT_EQ(code("a", "/grove-no-such-object-ever", 0, 16), absl::StatusCode::kNotFound);
  EXPECT_EQ(code("a", "/x/y", 0, 16), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code("", object.key(), 0, 16), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code("a", object.key(), 0, 0), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code("a", object.key(), 0, 8193), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(code("a", object.key(), 1, 8192), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code("a", object.key(), std::numeric_limits<uint64_t>::max(), 16),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code("a", object.key(), std::numeric_limits<uint64_t>::max() - 8, 16),
            absl::StatusCode::kInvalidArgument);
  const absl::Status past = registry.Register("a", object.key(), 8000, 200, "");
  EXPECT_THAT(past.message(), HasSubstr("holds 8192 bytes"));
  EXPECT_EQ(registry.mapped_bytes(), 0);  // failed registrations give their bytes back
  EXPECT_EQ(registry.mapped_regions(), 0);
  ASSERT_TRUE(registry.Register("a", object.key(), 0, 8192, "").ok());
  EXPECT_EQ(code("a", object.key(), 0, 16), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(registry.Status("", "").value(), ::testing::SizeIs(1));
}

TEST(SharedMemoryRegistryTest, BoundsOnTotalBytesAndRegions) {
  ShmObject object(4096);
  SharedMemoryOptions options;
  options.max_region_bytes = 4096;
  options.max_total_bytes = 6000;
  options.max_regions = 3;
  SharedMemoryRegistry registry(options);
  ASSERT_TRUE(registry.Register("a", object.key(), 0, 4096, "").ok());
  const absl::Status total = registry.Register("b", object.key(), 0, 2000, "");
  EXPECT_EQ(total.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(total.message(), HasSubstr("6000"));
  ASSERT_TRUE(registry.Register("b", object.key(), 0, 1000, "").ok());
  ASSERT_TRUE(registry.Register("c", object.key(), 0, 100, "").ok());
  const absl::Status regions = registry.Register("d", object.key(), 0, 1, "");
  EXPECT_EQ(regions.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(regions.message(), HasSubstr("3 regions"));
  EXPECT_THAT(registry.Unregister("b", ""), ElementsAre("b"));
  EXPECT_TRUE(registry.Register("d", object.key(), 0, 1, "").ok());
}

TEST(SharedMemoryRegistryTest, GetChecksEveryRange) {
  ShmObject object(4096);
  SharedMemoryRegistry registry{SharedMemoryOptions()};
  ASSERT_TRUE(registry.Register("r", object.key(), 96, 1000, "").ok());
  EXPECT_TRUE(registry.Get("r", 0, 1000, "rows", "").ok());
  EXPECT_TRUE(registry.Get("r", 999, 1, "rows", "").ok());
  const absl::Status unknown = registry.Get("s", 0, 4, "input 'input__0'", "").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.message(), HasSubstr("input 'input__0'"));
  EXPECT_THAT(unknown.message(), HasSubstr("'s' is not registered"));
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  for (const auto& [offset, bytes] : std::vector<std::pair<uint64_t, uint64_t>>{
           {0, 0}, {0, 1001}, {1, 1000}, {1000, 1}, {max, 1}, {max - 10, 20}, {10, max},
           {max, max}}) {
    const absl::Status s = registry.Get("r", offset, bytes, "rows", "").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << offset << " + " << bytes;
    EXPECT_THAT(s.message(), HasSubstr("rows")) << offset << " + " << bytes;
  }
  EXPECT_THAT(registry.Get("r", 900, 200, "rows", "").status().message(),
              HasSubstr("run past the end of shared memory region 'r', which holds 1000 bytes"));
}

TEST(SharedMemoryRegistryTest, AShrunkObjectIsRefusedBeforeItIsRead) {
  ShmObject object(8192);
  SharedMemoryRegistry registry{SharedMemoryOptions()};
  ASSERT_TRUE(registry.Register("r", object.key(), 4096, 4096, "").ok());
  ASSERT_TRUE(registry.Get("r", 0, 16, "rows", "").ok());
  object.Truncate(6000);
  const absl::Status s = registry.Get("r", 0, 16, "rows", "").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("was shrunk"));
}

// Allocated bytes of the object `key` (st_blocks: 512-byte units).
int64_t AllocatedBytes(const std::string& key) {
  const int fd = shm_open(key.c_str(), O_RDONLY, 0);
  EXPECT_GE(fd, 0);
  struct stat st {};
  EXPECT_EQ(fstat(fd, &st), 0);
  close(fd);
  return static_cast<int64_t>(st.st_blocks) * 512;
}

// A sparse output range gets its memory before results are written there (no SIGBUS later on a
// full /dev/shm); the rest of the object stays sparse.
TEST(SharedMemoryRegistryTest, BackAllocatesASparseOutputRange) {
  grove::testing::SharedMemoryObject object(1 << 20);  // never written: sparse
  const int64_t before = AllocatedBytes(object.key());
  SharedMemoryRegistry registry{SharedMemoryOptions()};
  ASSERT_TRUE(registry.Register("out", object.key(), 65536, 131072, "").ok());
  absl::StatusOr<SharedMemorySpan> span = registry.Get("out", 4096, 65536, "output 'x'", "");
  ASSERT_TRUE(span.ok()) << span.status();
  ASSERT_TRUE(span->Back("output 'x'").ok());
  const int64_t after = AllocatedBytes(object.key());
  EXPECT_GE(after - before, 65536);
  EXPECT_LT(after, 1 << 20);
  ASSERT_TRUE(span->Back("output 'x'").ok());  // already backed: nothing more
  EXPECT_EQ(AllocatedBytes(object.key()), after);
  span->data[0] = 1;  // writable
  span->data[65535] = 2;
}

TEST(SharedMemoryRegistryTest, UnregisterIsIdempotentAndEmptyNameMeansAll) {
  ShmObject object(4096);
  SharedMemoryRegistry registry{SharedMemoryOptions()};
  EXPECT_TRUE(registry.Unregister("never", "").empty());
  ASSERT_TRUE(registry.Register("b", object.key(), 0, 10, "").ok());
  ASSERT_TRUE(registry.Register("a", object.key(), 0, 10, "").ok());
  EXPECT_THAT(registry.Unregister("", ""), ElementsAre("a", "b"));
  EXPECT_TRUE(registry.Status("", "").value().empty());
  EXPECT_EQ(registry.mapped_regions(), 0);
  EXPECT_EQ(registry.Get("a", 0, 1, "rows", "").status().code(), absl::StatusCode::kNotFound);
}

TEST(SharedMemoryRegistryTest, ASpanKeepsItsRegionMappedAfterUnregister) {
  ShmObject first(4096), second(4096);
  std::memset(second.data(), 7, 4096);
  std::vector<std::pair<void*, size_t>> pinned, unpinned;
  SharedMemoryOptions options;
  options.pin = [&](void* address, size_t bytes) {
    pinned.emplace_back(address, bytes);
    return absl::OkStatus();
  };
  options.unpin = [&](void* address, size_t bytes) { unpinned.emplace_back(address, bytes); };
  SharedMemoryRegistry registry(options);
  ASSERT_TRUE(registry.Register("r", first.key(), 100, 1000, "").ok());
  ASSERT_EQ(pinned.size(), 1u);
  EXPECT_EQ(pinned[0].second, 1100u);  // from the page start: the region starts 100 bytes in
  absl::StatusOr<SharedMemorySpan> held = registry.Get("r", 0, 1000, "rows", "");
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->data, static_cast<char*>(pinned[0].first) + 100);

  // A request in flight holds `held`; the region is unregistered and its name reused meanwhile.
  EXPECT_THAT(registry.Unregister("r", ""), ElementsAre("r"));
  EXPECT_TRUE(unpinned.empty());
  EXPECT_EQ(registry.mapped_bytes(), 1000);  // still mapped: it still counts
  ASSERT_TRUE(registry.Register("r", second.key(), 0, 500, "").ok());
  EXPECT_EQ(registry.mapped_bytes(), 1500);
  EXPECT_EQ(registry.mapped_regions(), 2);
  absl::StatusOr<SharedMemorySpan> fresh = registry.Get("r", 0, 1, "rows", "");
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->data[0], 7);

  // The request reads and writes its old region (the first object) on another thread.
  std::thread request([span = *std::move(held)]() mutable {
    for (int i = 0; i < 1000; ++i) {
      ASSERT_EQ(static_cast<unsigned char>(span.data[i]), (100 + i) % 251);
    }
    span.data[999] = 1;
  });
  request.join();  // its span is released as the thread's closure is destroyed
  EXPECT_EQ(first.bytes()[1099], 1);
  ASSERT_EQ(unpinned.size(), 1u);
  EXPECT_EQ(unpinned[0], pinned[0]);
  EXPECT_EQ(registry.mapped_bytes(), 500);
  EXPECT_EQ(registry.mapped_regions(), 1);
}

TEST(SharedMemoryRegistryTest, RequestsOnOtherThreadsWhileRegionsComeAndGo) {
  ShmObject object(1 << 16);
  SharedMemoryRegistry registry{SharedMemoryOptions()};
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 1 << 16, "").ok());
  std::atomic<bool> stop{false};
  std::atomic<int64_t> reads{0};
  std::vector<std::thread> requests;
  for (int t = 0; t < 2; ++t) {
    requests.emplace_back([&] {
      while (!stop.load()) {
        absl::StatusOr<SharedMemorySpan> s = registry.Get("r", 4096, 4096, "rows", "");
        if (!s.ok()) {
          ASSERT_EQ(s.status().code(), absl::StatusCode::kNotFound);
          continue;
        }
        int64_t sum = 0;
        for (uint64_t i = 0; i < s->byte_size; ++i) sum += static_cast<unsigned char>(s->data[i]);
        ASSERT_GT(sum, 0);
        ++reads;
      }
    });
  }
  // At least 200 swaps, and on until the requests read 200 times (bounded for a stuck thread).
  for (int i = 0; (i < 200 || reads.load() < 200) && i < 10000000; ++i) {
    registry.Unregister("r", "");
    ASSERT_TRUE(registry.Register("r", object.key(), 0, 1 << 16, "").ok());
  }
  stop = true;
  for (std::thread& t : requests) t.join();
  EXPECT_GE(reads.load(), 200);
  EXPECT_EQ(registry.mapped_regions(), 1);
}

TEST(SharedMemoryRegistryTest, AFailedPinRegistersNothing) {
  ShmObject object(4096);
  int unpins = 0;
  SharedMemoryOptions options;
  options.pin = [](void*, size_t) { return absl::ResourceExhaustedError("no pinnable memory"); };
  options.unpin = [&](void*, size_t) { ++unpins; };
  SharedMemoryRegistry registry(options);
  const absl::Status s = registry.Register("r", object.key(), 0, 4096, "");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("no pinnable memory"));
  EXPECT_EQ(unpins, 0);
  EXPECT_EQ(registry.mapped_regions(), 0);
  EXPECT_EQ(registry.Get("r", 0, 1, "rows", "").status().code(), absl::StatusCode::kNotFound);
}

TEST(SharedMemoryRegistryTest, OverlapsComparesObjectBytes) {
  ShmObject a(8192), b(8192);
  SharedMemoryRegistry registry{SharedMemoryOptions()};
  ASSERT_TRUE(registry.Register("a1", a.key(), 0, 4096, "").ok());
  ASSERT_TRUE(registry.Register("a2", a.key(), 4000, 4192, "").ok());  // object bytes 4000..8191
  ASSERT_TRUE(registry.Register("b", b.key(), 0, 8192, "").ok());
  auto span = [&](const char* name, uint64_t offset, uint64_t bytes) {
    return registry.Get(name, offset, bytes, "test", "").value();
  };
  EXPECT_TRUE(span("a1", 0, 100).Overlaps(span("a1", 99, 10)));
  EXPECT_FALSE(span("a1", 0, 100).Overlaps(span("a1", 100, 10)));
  EXPECT_TRUE(span("a1", 4000, 10).Overlaps(span("a2", 0, 1)));     // both object byte 4000
  EXPECT_FALSE(span("a1", 3990, 10).Overlaps(span("a2", 0, 1)));    // 3990..3999 vs 4000
  EXPECT_FALSE(span("a1", 0, 4096).Overlaps(span("b", 0, 8192)));   // another object
  EXPECT_FALSE(span("a1", 0, 1).Overlaps(SharedMemorySpan()));
}

// A region that loses pages while a request reads or writes it (its owner shrank the object) does
// not kill the process: the lost bytes read as zeros, writes land in private pages, the request
// learns that its range is not intact, and the region is refused until registered again. Without
// the guard the reads below raise SIGBUS.
TEST(SharedMemoryRegistryTest, ARegionShrunkDuringARequestFailsTheRequestNotTheProcess) {
  ShmObject object(4 * 4096);
  std::memset(object.data(), 7, 4 * 4096);
  SharedMemoryRegistry registry{SharedMemoryOptions()};
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 4 * 4096, "").ok());
  absl::StatusOr<SharedMemorySpan> span = registry.Get("r", 0, 4 * 4096, "rows", "");
  ASSERT_TRUE(span.ok()) << span.status();
  EXPECT_TRUE(span->CheckIntact("rows").ok());
  object.Truncate(4096);  // the owner shrinks it under the request
  volatile const char* bytes = span->data;
  EXPECT_EQ(bytes[0], 7);          // the page that is still there
  EXPECT_EQ(bytes[2 * 4096], 0);   // a lost page: zero instead of SIGBUS
  EXPECT_EQ(bytes[4 * 4096 - 1], 0);
  span->data[3 * 4096] = 1;        // a write into a lost page is absorbed as well
  const absl::Status intact = span->CheckIntact("input 'input__0'");
  EXPECT_EQ(intact.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(intact.message(), HasSubstr("input 'input__0'"));
  EXPECT_THAT(intact.message(), HasSubstr("lost pages"));
  object.Truncate(4 * 4096);  // even grown back, the region stays refused
  const absl::Status again = registry.Get("r", 0, 16, "rows", "").status();
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.message(), HasSubstr("register it again"));
  EXPECT_THAT(registry.Unregister("r", ""), ElementsAre("r"));
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 4 * 4096, "").ok());
  absl::StatusOr<SharedMemorySpan> fresh = registry.Get("r", 0, 4 * 4096, "rows", "");
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_TRUE(fresh->CheckIntact("rows").ok());
}

// The guard absorbs faults inside registered regions only: any other SIGBUS still ends the process
// as it would without it.
TEST(SharedMemoryRegistryDeathTest, ASigbusOutsideEveryRegionStillKills) {
  ShmObject registered(4096);
  SharedMemoryRegistry registry{SharedMemoryOptions()};
  ASSERT_TRUE(registry.Register("r", registered.key(), 0, 4096, "").ok());  // guard installed
  EXPECT_EXIT(
      {
        ShmObject other(2 * 4096);
        const int fd = shm_open(other.key().c_str(), O_RDWR, 0);
        void* p = mmap(nullptr, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        other.Truncate(0);
        volatile char* c = static_cast<char*>(p);
        c[4096] = 1;
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

// Regions belong to the owner that registered them: another owner's Get, Status and Unregister
// see none of them (NOT_FOUND, as for a name nobody registered); names are one namespace.
TEST(SharedMemoryRegistryTest, RegionsBelongToTheirOwner) {
  ShmObject object(8192);
  SharedMemoryRegistry registry{SharedMemoryOptions()};
  ASSERT_TRUE(registry.Register("a", object.key(), 0, 4096, "token:alice").ok());
  ASSERT_TRUE(registry.Register("b", object.key(), 4096, 4096, "cert:bob").ok());
  EXPECT_EQ(registry.Register("a", object.key(), 0, 16, "cert:bob").code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(registry.Get("a", 0, 16, "rows", "token:alice").ok());
  for (absl::string_view stranger : {"cert:bob", "", "token:alic"}) {
    const absl::Status s = registry.Get("a", 0, 16, "rows", stranger).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << stranger;
    EXPECT_THAT(s.message(), ::testing::Not(HasSubstr("alice")));
    EXPECT_EQ(registry.Status("a", stranger).status().code(), absl::StatusCode::kNotFound);
  }
  ASSERT_TRUE(registry.Status("", "cert:bob").ok());
  ASSERT_THAT(registry.Status("", "cert:bob").value(), ::testing::SizeIs(1));
  EXPECT_EQ(registry.Status("", "cert:bob").value()[0].name, "b");
  EXPECT_TRUE(registry.Status("", "").value().empty());
  EXPECT_TRUE(registry.Unregister("a", "cert:bob").empty());
  EXPECT_THAT(registry.Unregister("", "cert:bob"), ElementsAre("b"));
  EXPECT_TRUE(registry.Get("a", 0, 16, "rows", "token:alice").ok());
  EXPECT_THAT(registry.Unregister("", "token:alice"), ElementsAre("a"));
  EXPECT_EQ(registry.mapped_regions(), 0);
}

}  // namespace
}  // namespace grove::serving
