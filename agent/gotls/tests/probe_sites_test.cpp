// Probe-site selection (probe_sites.h) on instruction bytes copied from Go 1.19's crypto/tls and
// on a real Go binary checked against objdump; and the .gopclntab name lookup stripped binaries
// depend on, checked against the symbol table of the same binary.
#include "agent/gotls/probe_sites.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "agent/symbolize/go_pclntab.h"
#include "agent/symbols/elf_file.h"
#include "agent/symbols/symbol_resolver.h"

namespace sonde::agent {
namespace {

using symbols::Machine;

// bytes, then int3 padding up to size (Go pads functions with int3).
std::vector<uint8_t> code(std::vector<uint8_t> bytes, size_t size) {
  bytes.resize(size, 0xCC);
  return bytes;
}

TEST(GoProbeSites, SmallFrameStackCheckJumpIsTheEntry) {
  // crypto/tls.(*Conn).Read, go1.19.8: cmp rsp,[r14+0x10]; jbe +0x3c2; sub rsp,0x68; ...; ret
  auto c = code({0x49, 0x3b, 0x66, 0x10, 0x0f, 0x86, 0xc2, 0x03, 0x00, 0x00, 0x48, 0x83, 0xec, 0x68,
                 0x48, 0x83, 0xc4, 0x68, 0xc3},
                0x400);
  auto s = find_go_probe_sites(Machine::kX86_64, c, 0x5a2100);
  EXPECT_TRUE(s.entry_at_stack_check);
  EXPECT_EQ(s.entry_offset, 4u);
  EXPECT_EQ(s.returns, std::vector<uint32_t>{18});
  EXPECT_TRUE(s.returns_are_plain_ret);
}

TEST(GoProbeSites, LargeFrameStackCheckJumpIsTheEntry) {
  // crypto/tls.(*Conn).Write, go1.19.8: lea r12,[rsp-0x68]; cmp r12,[r14+0x10]; jbe +0x764
  auto c = code({0x4c, 0x8d, 0x64, 0x24, 0x98, 0x4d, 0x3b, 0x66, 0x10, 0x0f, 0x86, 0x64, 0x07, 0x00,
                 0x00, 0xc3},
                0x800);
  auto s = find_go_probe_sites(Machine::kX86_64, c, 0x5a0c40);
  EXPECT_TRUE(s.entry_at_stack_check);
  EXPECT_EQ(s.entry_offset, 9u);
}

TEST(GoProbeSites, AnythingElseStaysAtTheFirstInstruction) {
  struct Case {
    const char* what;
    std::vector<uint8_t> bytes;
  };
  const std::vector<Case> cases = {
      // cmp [r14+0x10],rsp: the flags mean the opposite, jbe would not be the stack check.
      {"operands swapped", {0x49, 0x39, 0x66, 0x10, 0x0f, 0x86, 0x10, 0x00, 0x00, 0x00}},
      // cmp rsp,[r14+0x18]: not the stack guard.
      {"other field", {0x49, 0x3b, 0x66, 0x18, 0x0f, 0x86, 0x10, 0x00, 0x00, 0x00}},
      // jb instead of jbe: not the condition the BPF program tests.
      {"other condition", {0x49, 0x3b, 0x66, 0x10, 0x0f, 0x82, 0x10, 0x00, 0x00, 0x00}},
      // the jump leaves the function.
      {"target outside", {0x49, 0x3b, 0x66, 0x10, 0x0f, 0x86, 0x00, 0x10, 0x00, 0x00}},
      // mov rax,rbx first: an argument register changes before the check.
      {"argument written",
       {0x48, 0x89, 0xd8, 0x49, 0x3b, 0x66, 0x10, 0x0f, 0x86, 0x10, 0x00, 0x00, 0x00}},
      // lea rax,[rsp-0x68]: the frame check through an argument register.
      {"lea into rax",
       {0x48, 0x8d, 0x44, 0x24, 0x98, 0x49, 0x3b, 0x44, 0x24, 0x10, 0x0f, 0x86, 0x10, 0x00, 0x00,
        0x00}},
      // no stack check at all (a NOSPLIT function): sub rsp,0x18; ret
      {"nosplit", {0x48, 0x83, 0xec, 0x18, 0xc3}},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.what);
    auto s = find_go_probe_sites(Machine::kX86_64, code(k.bytes, 0x100), 0x1000);
    EXPECT_FALSE(s.entry_at_stack_check);
    EXPECT_EQ(s.entry_offset, 0u);
  }
}

TEST(GoProbeSites, RetWithImmediateIsNotPlain) {
  // cmp; jbe; ret 8; ret
  auto c = code(
      {0x49, 0x3b, 0x66, 0x10, 0x0f, 0x86, 0x10, 0x00, 0x00, 0x00, 0xc2, 0x08, 0x00, 0xc3}, 0x100);
  auto s = find_go_probe_sites(Machine::kX86_64, c, 0x1000);
  EXPECT_EQ(s.returns, (std::vector<uint32_t>{10, 13}));
  EXPECT_FALSE(s.returns_are_plain_ret);
}

TEST(GoProbeSites, Aarch64StaysAtTheFirstInstruction) {
  // ldr x16,[x28,#16]; cmp sp,x16; b.ls +8; ret
  auto c = code({0x90, 0x0b, 0x40, 0xf9, 0xff, 0x63, 0x30, 0xeb, 0x49, 0x00, 0x00, 0x54, 0xc0, 0x03,
                 0x5f, 0xd6},
                16);
  auto s = find_go_probe_sites(Machine::kAarch64, c, 0x1000);
  EXPECT_FALSE(s.entry_at_stack_check);
  EXPECT_FALSE(s.returns_are_plain_ret);
  EXPECT_EQ(s.returns, std::vector<uint32_t>{12});
}

std::string run(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(command.c_str(), "r"), pclose);
  std::string out;
  char buf[4096];
  size_t n;
  while (p && (n = fread(buf, 1, sizeof buf, p.get())) > 0) out.append(buf, n);
  return out;
}

// objdump's lines (Intel syntax) for the instructions from `from` to `to` in path.
std::vector<std::string> objdump(const std::string& path, uint64_t from, uint64_t to) {
  char cmd[512];
  std::snprintf(cmd, sizeof cmd,
                "objdump -d -M intel --start-address=0x%llx --stop-address=0x%llx '%s' | "
                "grep -E '^ +[0-9a-f]+:'",
                static_cast<unsigned long long>(from), static_cast<unsigned long long>(to),
                path.c_str());
  std::vector<std::string> lines;
  std::string out = run(cmd);
  for (size_t pos = 0, nl; (nl = out.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    lines.push_back(out.substr(pos, nl - pos));
  }
  return lines;
}

TEST(GoProbeSites, RealGoBinaryAgreesWithObjdump) {
  const std::string path = SONDE_GO_TLS_FIXTURE;
  if (path.empty()) GTEST_SKIP() << "no Go toolchain at configure time";
  auto file = symbols::MappedFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  auto elf = symbols::ElfFile::parse(file->bytes());
  ASSERT_TRUE(elf.ok());
  const std::vector<std::string> names = {"crypto/tls.(*Conn).Write", "crypto/tls.(*Conn).Read"};
  auto targets = symbols::resolve(*elf, names);
  ASSERT_TRUE(targets.ok());

  auto section = elf->find_section(".gopclntab");
  ASSERT_TRUE(section.has_value());
  symbolize::GoPclntabOptions options;
  options.build_index = false;
  auto table =
      symbolize::GoPclntab::parse(file->bytes().subspan(section->offset, section->size), options);
  ASSERT_TRUE(table.ok()) << table.error().message();

  for (const auto& t : *targets) {
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(t.found);
    // The name lookup stripped binaries rely on finds what the symbol table says.
    auto f = table->find_function(t.name);
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->entry, t.address);
    EXPECT_GE(f->end, t.address + t.size);
    EXPECT_LT(f->end, t.address + t.size + 32);  // alignment padding only

    auto bytes = elf->code_at(t.address, t.size);
    ASSERT_TRUE(bytes.ok());
    auto s = find_go_probe_sites(elf->machine(), *bytes, t.address);
    ASSERT_TRUE(s.entry_at_stack_check);
    // objdump, decoding from the function's start, shows the jbe at the chosen offset and
    // the compare with g.stackguard0 right before it.
    auto lines = objdump(path, t.address, t.address + s.entry_offset + 1);
    char at[32];
    std::snprintf(at, sizeof at,
                  "%llx:", static_cast<unsigned long long>(t.address + s.entry_offset));
    size_t jump = 0;
    while (jump < lines.size() && lines[jump].find(at) == std::string::npos) ++jump;
    ASSERT_LT(jump, lines.size()) << "objdump has no instruction starting at " << at;
    ASSERT_GE(jump, 1u);
    // Decoded in full (objdump stops mid-instruction at the stop address).
    auto full = objdump(path, t.address + s.entry_offset, t.address + s.entry_offset + 16);
    ASSERT_FALSE(full.empty());
    EXPECT_NE(full.front().find("jbe"), std::string::npos) << full.front();
    EXPECT_NE(lines[jump - 1].find("cmp"), std::string::npos) << lines[jump - 1];
    EXPECT_NE(lines[jump - 1].find("[r14+0x10]"), std::string::npos) << lines[jump - 1];
    EXPECT_TRUE(s.returns_are_plain_ret);
    EXPECT_EQ(s.returns, t.return_offsets);
  }
  EXPECT_FALSE(table->find_function("crypto/tls.(*Conn).NoSuchMethod").has_value());
}

}  // namespace
}  // namespace sonde::agent
