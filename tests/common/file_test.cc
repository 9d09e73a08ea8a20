// core/io/file.h: only regular files are opened, and opening a FIFO neither blocks nor succeeds.
#include "core/io/file.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace grove {
namespace {

namespace fs = std::filesystem;

class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / absl::StrCat("grove_file_test_", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// A limit refuses a larger file and admits one of exactly that size.
TEST_F(FileTest, ReadRespectsTheSizeLimit) {
  std::ofstream(Path("ten")) << "0123456789";
  EXPECT_EQ(*ReadRegularFile(Path("ten"), 10), "0123456789");
  absl::StatusOr<std::string> r = ReadRegularFile(Path("ten"), 9);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("larger than the 9 bytes"), std::string::npos) << r.status();
  EXPECT_EQ(*ReadRegularFile(Path("ten"), 100), "0123456789");
}

TEST_F(FileTest, ReadsRegularFilesAndLinksToThem) {
  std::ofstream(Path("a.json")) << "{\"x\": 1}";
  fs::create_symlink(Path("a.json"), Path("link.json"));
  absl::StatusOr<std::string> a = ReadRegularFile(Path("a.json"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, "{\"x\": 1}");
  EXPECT_EQ(*ReadRegularFile(Path("link.json")), *a);
  std::ofstream(Path("empty"));
  EXPECT_EQ(*ReadRegularFile(Path("empty")), "");
  int64_t size = -1;
  absl::StatusOr<ScopedFd> fd = OpenRegularFile(Path("a.json"), &size);
  ASSERT_TRUE(fd.ok());
  EXPECT_EQ(size, 8);
  char c = 0;
  EXPECT_EQ(::read(fd->get(), &c, 1), 1);  // blocking mode restored, data readable
  EXPECT_EQ(c, '{');
}

// No writer: a blocking open() of the FIFO would never return.
TEST_F(FileTest, FifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo(Path("model.json").c_str(), 0600), 0);
  absl::StatusOr<std::string> r = ReadRegularFile(Path("model.json"));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not a regular file (a FIFO)"), absl::string_view::npos)
      << r.status();
  EXPECT_NE(r.status().message().find(Path("model.json")), absl::string_view::npos);
}

TEST_F(FileTest, DirectoriesSocketsAndMissingFilesAreRefused) {
  fs::create_directories(Path("dir"));
  EXPECT_EQ(ReadRegularFile(Path("dir")).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadRegularFile(Path("absent")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadRegularFile("/dev/null").status().code(), absl::StatusCode::kInvalidArgument);
  // A listening Unix socket cannot be opened at all (ENXIO): an error, not a hang.
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock = Path("s");
  ASSERT_LT(sock.size(), sizeof(addr.sun_path));
  std::copy(sock.begin(), sock.end(), addr.sun_path);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(s, 1), 0);
  EXPECT_FALSE(ReadRegularFile(sock).ok());
  ::close(s);
}

TEST_F(FileTest, ScopedFdClosesAndMoves) {
  std::ofstream(Path("f")) << "x";
  absl::StatusOr<ScopedFd> fd = OpenRegularFile(Path("f"));
  ASSERT_TRUE(fd.ok());
  const int raw = fd->get();
  ScopedFd moved = std::move(*fd);
  EXPECT_EQ(fd->get(), -1);
  EXPECT_EQ(moved.get(), raw);
  moved = ScopedFd();
  EXPECT_EQ(::fcntl(raw, F_GETFD), -1);  // closed
}

}  // namespace
}  // namespace grove
