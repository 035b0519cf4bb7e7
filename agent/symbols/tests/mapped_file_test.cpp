// Reads that cannot SIGBUS the agent: a binary truncated after it was opened or mapped makes
// the parse fail with an error, and the process lives on. A forked child first shows that the
// same reads through a plain mapping do kill a process, so these tests can fail.
#include "agent/symbols/mapped_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "agent/symbols/binary_identity.h"
#include "agent/symbols/elf_file.h"
#include "agent/symbols/probe_target_cache.h"
#include "agent/symbols/symbol_resolver.h"
#include "agent/symbols/tests/synthetic_elf.h"
#include "agent/symbols/tests/temp_dir.h"
#include "common/unique_fd.h"

namespace sonde::symbols {
namespace {

using testing::SyntheticElf;

const std::vector<std::string> kNames = {"crypto/tls.(*Conn).Write", "crypto/tls.(*Conn).Read"};
constexpr uint64_t kTextBytes = 1 << 20;  // puts the symbol tables 1 MiB into the file

// A binary whose symbol tables lie past its first MiB, and the size that cuts them off.
std::string write_binary(const testing::TempDir& dir) {
  const std::string path = dir.path() / "app";
  SyntheticElf elf;
  elf.text_size = kTextBytes;
  elf.functions = {{kNames[0], 0, 16}, {kNames[1], 0x1000, 64}};
  elf.text = {{0, std::vector<uint8_t>(16, 0xc3)}, {0x1000, std::vector<uint8_t>(64, 0xc3)}};
  elf.write(path);
  return path;
}
constexpr off_t kTruncatedSize = 4096;

// Runs body in a forked child; returns its wait status.
int in_child(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(MappedFileTest, PlainMappingOfATruncatedFileDiesWithSigbus) {
  testing::TempDir dir;
  const std::string path = write_binary(dir);
  const int status = in_child([&] {
    // Unguarded, as the agent mapped binaries before: default disposition, raw mmap.
    ::signal(SIGBUS, SIG_DFL);
    UniqueFd fd(::open(path.c_str(), O_RDONLY));
    const size_t size = kTextBytes + 0x2000;
    auto* p = static_cast<const volatile uint8_t*>(
        ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0));
    if (::truncate(path.c_str(), kTruncatedSize) != 0) return 2;
    return static_cast<int>(p[kTextBytes]);  // past the new end of the file
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGBUS);
}

TEST(MappedFileTest, TruncatedAfterMappingReadsAsZerosAndReportsIt) {
  testing::TempDir dir;
  const std::string path = write_binary(dir);
  auto mapping = MappedFile::open(path);
  ASSERT_TRUE(mapping.ok()) << mapping.error().message();
  auto elf = ElfFile::parse(mapping->bytes());
  ASSERT_TRUE(elf.ok()) << elf.error().message();
  EXPECT_FALSE(mapping->faulted());
  ASSERT_TRUE(mapping->check(path).ok());

  ASSERT_EQ(::truncate(path.c_str(), kTruncatedSize), 0);
  // The symbol tables are gone from under the mapping: the resolve reads zeros, not SIGBUS.
  auto targets = resolve(*elf, kNames);
  EXPECT_TRUE(mapping->faulted());
  Status checked = mapping->check(path);
  ASSERT_FALSE(checked.ok());
  EXPECT_NE(checked.error().message().find("changed or could not be read"), std::string::npos);
  // Every later read of the tail is zeros too, and the head still reads as the file.
  EXPECT_EQ(mapping->bytes()[kTextBytes + 0x1800], 0);
  EXPECT_EQ(std::memcmp(mapping->bytes().data(),
                        "\x7f"
                        "ELF",
                        4),
            0);
}

TEST(MappedFileTest, TruncationSurvivesInAChildProcess) {
  testing::TempDir dir;
  const std::string path = write_binary(dir);
  // The guarded path end to end, in a child whose exit code says what it saw.
  const int status = in_child([&] {
    auto mapping = MappedFile::open(path);
    if (!mapping.ok()) return 3;
    auto elf = ElfFile::parse(mapping->bytes());
    if (!elf.ok()) return 4;
    if (::truncate(path.c_str(), kTruncatedSize) != 0) return 5;
    auto targets = resolve(*elf, kNames);
    return mapping->check(path).ok() ? 6 : 0;
  });
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(MappedFileTest, TruncatedAfterOpeningIsAnErrorAndNotCached) {
  testing::TempDir dir;
  const std::string path = write_binary(dir);
  auto binary = OpenBinary::open(path);
  ASSERT_TRUE(binary.ok()) << binary.error().message();
  ASSERT_EQ(::truncate(path.c_str(), kTruncatedSize), 0);

  ProbeTargetCache cache;
  auto targets = cache.resolve(*binary, kNames);
  ASSERT_FALSE(targets.ok());
  EXPECT_FALSE(is_too_large(targets.error()));
  EXPECT_EQ(cache.stats().errors, 1u);
  EXPECT_EQ(cache.stats().entries, 0u);
}

TEST(MappedFileTest, OpenBinaryBytesReportTruncation) {
  testing::TempDir dir;
  const std::string path = write_binary(dir);
  auto binary = OpenBinary::open(path);
  ASSERT_TRUE(binary.ok()) << binary.error().message();
  auto elf = ElfFile::parse(binary->bytes());
  ASSERT_TRUE(elf.ok()) << elf.error().message();
  ASSERT_TRUE(binary->check_bytes().ok());
  ASSERT_EQ(::truncate(path.c_str(), kTruncatedSize), 0);
  auto targets = resolve(*elf, kNames);
  EXPECT_FALSE(binary->check_bytes().ok());
}

TEST(MappedFileTest, SigbusOutsideAnyMappingStillKills) {
  // The guard only answers for its own mappings; a SIGBUS anywhere else keeps its meaning.
  testing::TempDir dir;
  const std::string path = write_binary(dir);
  auto mapping = MappedFile::open(path);  // installs the guard
  ASSERT_TRUE(mapping.ok());
  const int status = in_child([&] {
    // The sanitizers' report of this expected crash is noise here.
    UniqueFd null(::open("/dev/null", O_WRONLY));
    ::dup2(null.get(), STDERR_FILENO);
    UniqueFd fd(::open(path.c_str(), O_RDONLY));
    auto* p = static_cast<const volatile uint8_t*>(
        ::mmap(nullptr, kTextBytes + 0x2000, PROT_READ, MAP_PRIVATE, fd.get(), 0));
    if (::truncate(path.c_str(), kTruncatedSize) != 0) return 2;
    return static_cast<int>(p[kTextBytes]);
  });
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

}  // namespace
}  // namespace sonde::symbols
