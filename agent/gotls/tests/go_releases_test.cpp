// Go TLS verdicts and probe sites on real Go binaries of the releases people build with, Go
// 1.16 to 1.27 (scripts/test-go-binaries.txt: npm packages nobody here built, installed by
// `make deps`), and on the repository's own Go TLS fixture built in every shape one release can
// take (build_go_variants.sh: PIE, cgo, stripped, without build info, with the header's text
// start zeroed as Go 1.26+ writes it).
//
// Truth comes from outside the code under test:
//  - the unstripped twin's .symtab (binutils' readelf) for every stripped variant;
//  - Go's own debug/gosym (tests/gosym_entry; Debian's Go reads the tables up to 1.19) for those;
//  - for every release, the instruction at each entry as binutils' objdump decodes it (amd64) or
//    its bytes (arm64): Go's stack-bound check, which only a Go function's first instruction is;
//  - `go version` for the release recorded in the build info.
// The e2e gotls_go_releases_test.sh drives traffic through the TLS servers among them and checks
// the addresses against the Go runtime's own traceback.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "agent/gotls/go_tls_plan.h"
#include "agent/symbolize/go_binary.h"
#include "agent/symbolize/tests/go_test_binary.h"
#include "agent/symbols/elf_file.h"
#include "agent/symbols/symbol_resolver.h"

namespace sonde::agent {
namespace {

using symbolize::testing::run_command;

std::string hex(uint64_t v) {
  char buf[24];
  (void)std::snprintf(buf, sizeof buf, "0x%lx", static_cast<unsigned long>(v));
  return buf;
}

Result<GoTlsPlan> plan_file(const std::string& path) {
  ASSIGN_OR_RETURN(auto binary, symbols::OpenBinary::open(path));
  auto elf = symbols::ElfFile::parse(binary.bytes());
  if (!elf.ok()) return elf.error();
  ASSIGN_OR_RETURN(auto targets, symbols::resolve(*elf, go_tls_symbol_names()));
  return plan_go_tls(binary, path, targets, /*can_perform_ret=*/false);
}

// The address of `name` in path's .symtab as readelf prints it, 0 when absent.
uint64_t readelf_symbol(const std::string& path, const std::string& name) {
  std::istringstream in(run_command("readelf -sW '" + path + "'"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string num, value, size, type, bind, vis, ndx, sym;
    f >> num >> value >> size >> type >> bind >> vis >> ndx >> sym;
    if (sym == name && type == "FUNC") return std::stoull(value, nullptr, 16);
  }
  return 0;
}

// The entry of `name` as Go's own debug/gosym reads it (tests/gosym_entry, built with Debian's
// Go, which reads the tables of Go 1.2 to 1.19), 0 when it cannot tell.
uint64_t gosym_entry(const std::string& path, const std::string& name) {
  std::istringstream in(
      run_command(std::string(SONDE_GOSYM_ENTRY) + " '" + path + "' '" + name + "' 2>/dev/null"));
  std::string address, found;
  while (in >> address >> found) {
    if (found == name) return std::stoull(address, nullptr, 16);
  }
  return 0;
}

// The first instructions at `address` as binutils' objdump decodes them (amd64).
std::string objdump_at(const std::string& path, uint64_t address) {
  return run_command("objdump -d --no-show-raw-insn --start-address=" + hex(address) +
                     " --stop-address=" + hex(address + 16) + " '" + path + "'");
}

bool starts_with_go_stack_check_amd64(const std::string& disassembly) {
  // cmp 0x10(%r14),%rsp (or, for a large frame, lea -N(%rsp),%r12; cmp 0x10(%r14),%r12), jbe.
  return (disassembly.find("cmp    0x10(%r14),%rsp") != std::string::npos ||
          disassembly.find("cmp    0x10(%r14),%r12") != std::string::npos) &&
         disassembly.find("jbe") != std::string::npos;
}

// arm64: Go's prologue loads g.stackguard0: `ldr x16, [x28, #16]` (0xf9400b90).
bool starts_with_go_stack_check_arm64(const std::string& path, uint64_t address) {
  auto binary = symbols::OpenBinary::open(path);
  if (!binary.ok()) return false;
  auto elf = symbols::ElfFile::parse(binary->bytes());
  if (!elf.ok()) return false;
  auto offset = elf->file_offset_of(address);
  if (!offset.ok() || *offset + 4 > binary->bytes().size()) return false;
  const uint8_t* p = binary->bytes().data() + *offset;
  uint32_t insn =
      uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
  return insn == 0xf9400b90;
}

// One line of scripts/test-go-binaries.txt.
struct Release {
  std::string name, package, file, go, tls, info, verdict;
  std::string path() const {
    return std::string(SONDE_GO_CORPUS_DIR) + "/" + name + "/" +
           file.substr(file.find_last_of('/') + 1);
  }
};

std::vector<Release> releases() {
  std::vector<Release> out;
  std::ifstream in(SONDE_GO_CORPUS_LIST);
  std::string line;
  while (std::getline(in, line)) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream f(line);
    Release r;
    if (!(f >> r.name >> r.package >> r.file >> r.go >> r.tls >> r.info)) continue;
    std::getline(f >> std::ws, r.verdict);
    while (!r.verdict.empty() && r.verdict.back() == ' ') r.verdict.pop_back();
    out.push_back(r);
  }
  return out;
}

class GoReleases : public ::testing::TestWithParam<Release> {};

TEST_P(GoReleases, VerdictAndProbeSitesAreRight) {
  const Release& r = GetParam();
  struct stat st {};
  ASSERT_EQ(stat(r.path().c_str(), &st), 0)
      << r.path() << " is missing: `make deps` installs it (" << r.package << ")";
  auto plan = plan_file(r.path());
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  const GoTlsVerdict& v = plan->verdict;
  if (r.tls == "notls") {
    EXPECT_FALSE(v.reported) << "a binary without crypto/tls got a Go TLS verdict: " << v.reason;
    return;
  }
  ASSERT_TRUE(v.reported) << v.reason;
  if (r.verdict == "stack-ABI") {
    EXPECT_FALSE(v.instrumentable);
    EXPECT_NE(v.reason.find("passes arguments on the stack"), std::string::npos) << v.reason;
  } else {
    EXPECT_TRUE(v.instrumentable) << v.reason;
    EXPECT_EQ(v.reason, r.verdict);
  }
  // The build info's release, as Go's own `go version` reads it.
  if (r.info == "info") {
    std::string said = run_command(std::string(SONDE_GO) + " version '" + r.path() + "'");
    EXPECT_NE(said.find(": " + r.go + "\n"), std::string::npos) << said;
  }
  // The entries: Go's register-ABI stack check at each, by another decoder than the code under
  // test (releases before 1.17 check the bound through %fs; their addresses are checked by Go's
  // objdump below).
  ASSERT_NE(plan->write_address, 0u);
  ASSERT_NE(plan->read_address, 0u);
  auto elf = symbols::ElfFile::parse(symbols::OpenBinary::open(r.path())->bytes());
  ASSERT_TRUE(elf.ok());
  for (uint64_t entry : {plan->write_address, plan->read_address}) {
    if (!v.instrumentable) break;
    if (elf->machine() == symbols::Machine::kAarch64) {
      EXPECT_TRUE(starts_with_go_stack_check_arm64(r.path(), entry)) << hex(entry);
    } else {
      std::string code = objdump_at(r.path(), entry);
      EXPECT_TRUE(starts_with_go_stack_check_amd64(code)) << hex(entry) << ":\n" << code;
    }
  }
  // Releases whose tables Debian's Go still reads (up to 1.19): debug/gosym names the same
  // entries.
  if (r.go.starts_with("go1.1") && !r.go.starts_with("go1.1.")) {
    uint64_t truth = gosym_entry(r.path(), go_tls_symbol_names()[0]);
    ASSERT_NE(truth, 0u) << "debug/gosym did not read " << r.path();
    EXPECT_EQ(hex(plan->write_address), hex(truth)) << "debug/gosym";
    EXPECT_EQ(hex(plan->read_address), hex(gosym_entry(r.path(), go_tls_symbol_names()[1])));
  }
  if (v.instrumentable && elf->machine() == symbols::Machine::kX86_64) {
    EXPECT_EQ(v.entry_probe, "emulated-jump");
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, GoReleases, ::testing::ValuesIn(releases()), [](const auto& info) {
  std::string n = info.param.name;
  for (char& c : n) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
});

TEST(GoReleasesList, NamesEveryReleaseFrom117To127) {
  std::vector<std::string> wanted;
  for (int minor = 17; minor <= 27; ++minor) wanted.push_back("go1." + std::to_string(minor));
  std::string listed;
  for (const auto& r : releases()) listed += " " + r.go + ".";
  for (const auto& w : wanted) {
    if (w == "go1.21") continue;  // the 1.21 build listed does not link crypto/tls
    EXPECT_NE(listed.find(" " + w + "."), std::string::npos) << w << " is not in the corpus";
  }
}

// The fixture in every shape Debian's Go builds, each stripped variant against its unstripped
// twin's .symtab.
struct Variant {
  const char* file;
  const char* twin;
  const char* reason;  // the verdict's reason; "" when it must not be instrumentable
};

class GoVariants : public ::testing::TestWithParam<Variant> {};

TEST_P(GoVariants, AddressesAreTheSymbolTables) {
  const Variant& c = GetParam();
  const std::string dir = SONDE_GO_VARIANTS_DIR;
  auto plan = plan_file(dir + "/" + c.file);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  const GoTlsVerdict& v = plan->verdict;
  ASSERT_TRUE(v.reported);
  if (std::string(c.reason).empty()) {
    EXPECT_FALSE(v.instrumentable);
    EXPECT_NE(v.reason.find("function addresses unknown"), std::string::npos) << v.reason;
    EXPECT_TRUE(plan->programs.empty());
    return;
  }
  EXPECT_TRUE(v.instrumentable) << v.reason;
  EXPECT_TRUE(v.stripped);
  EXPECT_EQ(v.reason, c.reason);
  const std::string twin = dir + "/" + c.twin;
  EXPECT_EQ(hex(plan->write_address), hex(readelf_symbol(twin, go_tls_symbol_names()[0])));
  EXPECT_EQ(hex(plan->read_address), hex(readelf_symbol(twin, go_tls_symbol_names()[1])));
}

INSTANTIATE_TEST_SUITE_P(Fixture, GoVariants,
                         ::testing::Values(Variant{"plain.stripped", "plain", SONDE_GO_VERSION},
                                           Variant{"pie.stripped", "pie", SONDE_GO_VERSION},
                                           Variant{"cgo.stripped", "cgo", SONDE_GO_VERSION},
                                           Variant{"cgo-pie.stripped", "cgo-pie", SONDE_GO_VERSION},
                                           Variant{
                                               "plain.nobuildinfo", "plain",
                                               "go1.18-1.19 (from .gopclntab; no .go.buildinfo)"},
                                           Variant{"plain.notextstart", "plain", SONDE_GO_VERSION},
                                           Variant{"plain.nomoduledata", "plain", ""}),
                         [](const auto& info) {
                           std::string n = info.param.file;
                           for (char& c : n) {
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

// The symbolizer reads the same files through the same reader: a cgo binary's functions start
// at runtime.text, after .text's first byte (the system linker's crt code), and a pc inside
// crypto/tls.(*Conn).Write is named so, at the file and line of the twin's DWARF.
TEST(GoVariantsSymbolized, ACgoBinarysFramesAreNamedFromRuntimeText) {
  const std::string dir = SONDE_GO_VARIANTS_DIR;
  for (const char* file : {"cgo.stripped", "cgo-pie.stripped", "plain.notextstart"}) {
    SCOPED_TRACE(file);
    auto go = symbolize::GoBinary::open(dir + "/" + file);
    ASSERT_TRUE(go.ok()) << go.error().message();
    std::string twin = dir + "/" + std::string(file).substr(0, std::string(file).find('.'));
    uint64_t write = readelf_symbol(twin, go_tls_symbol_names()[0]);
    ASSERT_NE(write, 0u);
    auto frame = (*go)->pclntab().lookup(write + 16);
    ASSERT_TRUE(frame.has_value());
    EXPECT_EQ(frame->function, go_tls_symbol_names()[0]);
    EXPECT_EQ(frame->entry, write);
    // binutils' addr2line, from the twin's DWARF line table (Go 1.19's own addr2line does not
    // read a cgo PIE's table).
    std::string line = run_command("addr2line -e '" + twin + "' " + hex(write + 16));
    EXPECT_EQ(line, std::string(frame->file) + ":" + std::to_string(frame->line) + "\n");
  }
}

}  // namespace
}  // namespace sonde::agent
