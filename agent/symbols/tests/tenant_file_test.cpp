// tenant_file.h over real files, FIFOs and swaps: the mapped file is opened whatever its path
// names now, nothing blocks on a FIFO, and paths resolve inside the process's root.
#include "agent/symbols/tenant_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "agent/symbols/tests/temp_dir.h"

namespace sonde::symbols {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

ino_t inode_of(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

// This process's maps line for `path`, parsed.
std::optional<MappedFileRef> own_mapping_of(const fs::path& path) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.ends_with(" " + path.string())) return parse_mapped_file(line);
  }
  return std::nullopt;
}

// Runs `open` with a deadline; a call blocked on a FIFO is released by a writer's open of
// `fifo_paths` and reported as a failure instead of hanging the test.
Result<UniqueFd> open_within(const std::function<Result<UniqueFd>()>& open,
                             const std::vector<fs::path>& fifo_paths) {
  auto pending = std::async(std::launch::async, open);
  while (pending.wait_for(std::chrono::seconds(2)) != std::future_status::ready) {
    ADD_FAILURE() << "an open blocked on a FIFO";
    for (const auto& p : fifo_paths) close(::open(p.c_str(), O_WRONLY | O_NONBLOCK));
  }
  return pending.get();
}

TEST(ParseMappedFile, RangeDeviceInodeAndPath) {
  auto m = parse_mapped_file(
      "7f1c2a000000-7f1c2a028000 r--p 00000000 fd:01 1835109                    "
      "/usr/lib/x86_64-linux-gnu/libc.so.6");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->start, 0x7f1c2a000000u);
  EXPECT_EQ(m->end, 0x7f1c2a028000u);
  EXPECT_EQ(m->dev, makedev(0xfd, 0x01));
  EXPECT_EQ(m->inode, 1835109u);
  EXPECT_EQ(m->path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_EQ(parse_mapped_file("1000-2000 r-xp 0 103:1f 7 /a dir/with spaces")->path,
            "/a dir/with spaces");
  EXPECT_FALSE(parse_mapped_file("7ffd-7ffe rw-p 00000000 00:00 0                  [stack]"));
  EXPECT_FALSE(parse_mapped_file("7ffd-7ffe rw-p 00000000 00:00 0 "));
  EXPECT_FALSE(parse_mapped_file("2000-1000 r-xp 0 fd:01 7 /x")) << "empty range";
  EXPECT_FALSE(parse_mapped_file("1000-2000 r-xp 0 fd01 7 /x")) << "no major:minor";
  EXPECT_FALSE(parse_mapped_file("1000-2000 r-xp 0 fd:01 x7 /x"));
  EXPECT_FALSE(parse_mapped_file(""));
}

// Against the real kernel: every mapped file in this process's maps parses to the device and
// inode stat() gives for its path.
TEST(ParseMappedFile, AgreesWithStatOnThisProcess) {
  std::ifstream maps("/proc/self/maps");
  int checked = 0;
  for (std::string line; std::getline(maps, line);) {
    auto m = parse_mapped_file(line);
    if (!m || m->path.ends_with(" (deleted)")) continue;
    struct stat st {};
    ASSERT_EQ(stat(m->path.c_str(), &st), 0) << m->path;
    EXPECT_EQ(m->dev, st.st_dev) << line;
    EXPECT_EQ(m->inode, st.st_ino) << line;
    ++checked;
  }
  EXPECT_GT(checked, 2) << "the test binary and its libraries";
}

class MappedLibrary : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = dir_.path() / "libc.so.6";
    fifo_ = dir_.path() / "fifo";
    std::ofstream(lib_) << std::string(8192, 'x');
    fd_ = UniqueFd(open(lib_.c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd_.valid());
    map_ = mmap(nullptr, 8192, PROT_READ, MAP_PRIVATE, fd_.get(), 0);
    ASSERT_NE(map_, MAP_FAILED);
    ino_ = inode_of(fd_.get());
    auto m = own_mapping_of(lib_);
    ASSERT_TRUE(m);
    mapping_ = *m;
    ASSERT_EQ(mkfifo(fifo_.c_str(), 0600), 0);
  }
  void TearDown() override {
    if (map_ != MAP_FAILED) munmap(map_, 8192);
  }
  Result<UniqueFd> open_mapped(bool map_files) {
    return open_within([&] { return open_mapped_file("/proc", getpid(), mapping_, map_files); },
                       {lib_, fifo_});
  }
  testing::TempDir dir_;
  fs::path lib_, fifo_;
  UniqueFd fd_;
  void* map_ = MAP_FAILED;
  ino_t ino_ = 0;
  MappedFileRef mapping_;
};

TEST_F(MappedLibrary, AFifoInItsPlaceIsNeitherOpenedNorWaitedOn) {
  ASSERT_EQ(rename(fifo_.c_str(), lib_.c_str()), 0);  // the path now names a FIFO
  auto start = std::chrono::steady_clock::now();
  auto through_map_files = open_mapped(true);
  ASSERT_TRUE(through_map_files.ok()) << through_map_files.error().message();
  EXPECT_EQ(inode_of(through_map_files->get()), ino_) << "map_files opens the mapped file";
  auto by_path = open_mapped(false);
  ASSERT_FALSE(by_path.ok());
  EXPECT_NE(by_path.error().message().find("not a regular file"), std::string::npos)
      << by_path.error().message();
  auto in_root =
      open_within([&] { return open_in_root("/proc", getpid(), lib_.string()); }, {lib_});
  EXPECT_FALSE(in_root.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(500));
}

TEST_F(MappedLibrary, AnotherFileInItsPlaceIsRefusedByPath) {
  const fs::path other = dir_.path() / "other";
  std::ofstream(other) << "not the library";
  ASSERT_EQ(rename(other.c_str(), lib_.c_str()), 0);
  auto by_path = open_mapped(false);
  ASSERT_FALSE(by_path.ok());
  EXPECT_EQ(by_path.error().code(), ESTALE) << by_path.error().message();
  auto through_map_files = open_mapped(true);
  ASSERT_TRUE(through_map_files.ok()) << through_map_files.error().message();
  EXPECT_EQ(inode_of(through_map_files->get()), ino_);
}

// The tenant's loop: RENAME_EXCHANGE of the library and a FIFO, as fast as it goes. Every open,
// both ways, returns promptly; by path it is either the mapped file or a refusal.
TEST_F(MappedLibrary, ASwapLoopNeverBlocksAndNeverYieldsAnotherFile) {
  std::atomic<bool> stop = false;
  std::atomic<int> swaps = 0;
  std::thread swapper([&] {
    while (!stop) {
      if (renameat2(AT_FDCWD, lib_.c_str(), AT_FDCWD, fifo_.c_str(), RENAME_EXCHANGE) == 0) {
        ++swaps;
      }
    }
  });
  constexpr int kOpens = 2000;
  int by_path_ok = 0, by_path_refused = 0;
  for (int i = 0; i < kOpens; ++i) {
    auto via_map_files = open_mapped(true);
    ASSERT_TRUE(via_map_files.ok()) << via_map_files.error().message();
    EXPECT_EQ(inode_of(via_map_files->get()), ino_);
    auto by_path = open_mapped(false);
    if (by_path.ok()) {
      ++by_path_ok;
      EXPECT_EQ(inode_of(by_path->get()), ino_);
    } else {
      ++by_path_refused;
    }
  }
  stop = true;
  swapper.join();
  std::printf("%d swaps; by path: %d opened the mapped file, %d refused\n", swaps.load(),
              by_path_ok, by_path_refused);
  EXPECT_GT(swaps, kOpens) << "the path was not swapped while the opens ran";
  EXPECT_GT(by_path_refused, 0) << "the FIFO was never in place at an open: the test proves little";
}

}  // namespace
}  // namespace sonde::symbols
