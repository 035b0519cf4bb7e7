// The resolver against binutils on real binaries: /usr/bin/node (libuv internals, several of
// which leave only through tail calls) and a Go binary built from tests/go_tls_fixture.
#include "agent/symbols/tests/ground_truth.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "agent/symbols/binary_identity.h"
#include "agent/symbols/elf_file.h"
#include "agent/symbols/symbol_resolver.h"

namespace sonde::symbols {
namespace {

using testing::objdump_sites;
using testing::readelf_build_id;
using testing::readelf_functions;
using testing::readelf_loads;

constexpr const char* kNode = "/usr/bin/node";
const std::vector<std::string> kLibuvNames = {"uv__io_poll", "uv__stream_io", "uv__async_io",
                                              "uv__poll_io", "uv__server_io", "uv__udp_io"};
const std::vector<std::string> kGoTlsNames = {"crypto/tls.(*Conn).Write",
                                              "crypto/tls.(*Conn).Read"};

// Checks one resolved target against readelf (address, size, file offset) and objdump (return
// and exit sites, and therefore the no-return-site verdict).
void expect_matches_binutils(const std::string& path, const ProbeTarget& t) {
  SCOPED_TRACE(t.name);
  const auto defs = readelf_functions(path, t.name);
  ASSERT_FALSE(defs.empty()) << "readelf does not list " << t.name;
  ASSERT_TRUE(t.found);
  EXPECT_EQ(t.address, defs.front().value);
  EXPECT_EQ(t.size, defs.front().size);

  bool mapped = false;
  for (const auto& load : readelf_loads(path)) {
    if (!load.executable || t.address < load.vaddr || t.address >= load.vaddr + load.filesz) {
      continue;
    }
    EXPECT_EQ(t.file_offset, load.offset + (t.address - load.vaddr));
    mapped = true;
  }
  EXPECT_TRUE(mapped) << "readelf shows no executable LOAD holding the function";
  // libbpf's own conversion for uprobes attached by name: st_value - sh_addr + sh_offset.
  const auto section = testing::readelf_section(path, defs.front().ndx);
  EXPECT_EQ(t.file_offset, t.address - section.addr + section.offset);

  const auto sites = objdump_sites(path, t.address, t.size);
  ASSERT_GT(sites.instructions, 0u);
  EXPECT_EQ(t.return_offsets, sites.returns);
  EXPECT_EQ(t.exit_jump_offsets, sites.exit_jumps);
  if (!sites.returns.empty()) {
    EXPECT_EQ(t.return_status, ReturnSiteStatus::kFound);
  } else if (!sites.exit_jumps.empty()) {
    EXPECT_EQ(t.return_status, ReturnSiteStatus::kTailCallOnly);
    EXPECT_FALSE(t.has_return_sites());
  }
}

bool have_node() {
  return ::access(kNode, R_OK) == 0;
}

TEST(GroundTruth, NodeLibuvFunctionsMatchReadelfAndObjdump) {
  if (!have_node()) GTEST_SKIP() << kNode << " is not installed";
  auto targets = resolve_file(kNode, kLibuvNames);
  ASSERT_TRUE(targets.ok()) << targets.error().message();
  ASSERT_EQ(targets->size(), kLibuvNames.size());
  size_t without_return = 0;
  for (size_t i = 0; i < kLibuvNames.size(); ++i) {
    EXPECT_EQ((*targets)[i].name, kLibuvNames[i]);
    expect_matches_binutils(kNode, (*targets)[i]);
    if (!(*targets)[i].has_return_sites()) ++without_return;
  }
  // The design notes two of the six have no RET at all; objdump decided it above, this keeps
  // the test honest about exercising that case.
  EXPECT_GE(without_return, 1u);
}

TEST(GroundTruth, NodeBuildIdMatchesReadelf) {
  if (!have_node()) GTEST_SKIP() << kNode << " is not installed";
  auto binary = OpenBinary::open(kNode);
  ASSERT_TRUE(binary.ok()) << binary.error().message();
  auto mapping = binary->map();
  ASSERT_TRUE(mapping.ok()) << mapping.error().message();
  auto elf = ElfFile::parse(mapping->bytes());
  ASSERT_TRUE(elf.ok()) << elf.error().message();
  const auto id = elf->build_id();
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(id->kind, BuildId::Kind::kGnu);
  EXPECT_EQ(id->to_string(), readelf_build_id(kNode));
  EXPECT_EQ(binary->identity().digest_kind, BinaryIdentity::DigestKind::kGnuBuildId);
  EXPECT_EQ(binary->identity().digest_hex(), readelf_build_id(kNode));
}

TEST(GroundTruth, NodeMissingNameIsAResultNotAnError) {
  if (!have_node()) GTEST_SKIP() << kNode << " is not installed";
  const std::vector<std::string> names = {"uv__io_poll", "no_such_function_in_node", "uv__io_poll"};
  auto targets = resolve_file(kNode, names);
  ASSERT_TRUE(targets.ok()) << targets.error().message();
  EXPECT_TRUE((*targets)[0].found);
  EXPECT_FALSE((*targets)[1].found);
  EXPECT_EQ((*targets)[1].return_status, ReturnSiteStatus::kNotCode);
  EXPECT_EQ((*targets)[2].address, (*targets)[0].address);
}

TEST(GroundTruth, NodeDynamicSymbolIsFound) {
  if (!have_node()) GTEST_SKIP() << kNode << " is not installed";
  // uv_loop_init is exported, so it sits in .dynsym as well; the result must agree with readelf.
  const std::vector<std::string> names = {"uv_loop_init"};
  auto targets = resolve_file(kNode, names);
  ASSERT_TRUE(targets.ok()) << targets.error().message();
  expect_matches_binutils(kNode, (*targets)[0]);
}

TEST(GroundTruth, GoTlsConnWriteAndReadReturnThroughRet) {
  const std::string fixture = SONDE_GO_TLS_FIXTURE;
  if (fixture.empty()) GTEST_SKIP() << "go was not found at configure time";
  auto targets = resolve_file(fixture, kGoTlsNames);
  ASSERT_TRUE(targets.ok()) << targets.error().message();
  for (const auto& t : *targets) {
    expect_matches_binutils(fixture, t);
    EXPECT_TRUE(t.has_return_sites()) << t.name;  // Go has no tail calls: every exit is a RET
    EXPECT_FALSE(t.return_offsets.empty()) << t.name;
  }
}

TEST(GroundTruth, GoBuildIdMatchesGoTool) {
  const std::string fixture = SONDE_GO_TLS_FIXTURE;
  if (fixture.empty()) GTEST_SKIP() << "go was not found at configure time";
  auto mapping = MappedFile::open(fixture);
  ASSERT_TRUE(mapping.ok());
  auto elf = ElfFile::parse(mapping->bytes());
  ASSERT_TRUE(elf.ok());
  const auto id = elf->build_id();
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(id->kind, BuildId::Kind::kGo);
  std::string expected =
      testing::run_command(std::string(SONDE_GO) + " tool buildid '" + fixture + "'");
  while (!expected.empty() && expected.back() == '\n') expected.pop_back();
  EXPECT_EQ(id->to_string(), expected);
  auto binary = OpenBinary::open(fixture);
  ASSERT_TRUE(binary.ok());
  EXPECT_EQ(binary->identity().digest_kind, BinaryIdentity::DigestKind::kGoBuildId);
}

}  // namespace
}  // namespace sonde::symbols
