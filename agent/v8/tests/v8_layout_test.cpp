// V8Layout against the real node: values read from a running /usr/bin/node (or SONDE_TEST_NODE)
// agree with the bytes the binary's file holds for its initialized (.data) symbols, with the
// values V8 documents as fixed, and a binary without the metadata is refused with a reason.
#include "agent/v8/v8_layout.h"

#include <elf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>

#include "agent/symbols/mapped_file.h"
#include "agent/tests/child_process.h"

namespace sonde::agent::v8 {
namespace {

using sonde::testing::ChildProcess;
using sonde::testing::wait_for_exe;

std::string node_binary() {
  const char* env = std::getenv("SONDE_TEST_NODE");
  return env != nullptr && *env != '\0' ? env : "/usr/bin/node";
}

// Memory over a map of addresses to 4-byte values (what a fuzzer or a forged binary gives).
class FakeMemory final : public Memory {
 public:
  std::map<uint64_t, int32_t> values;
  bool read(uint64_t address, std::span<uint8_t> out) const override {
    auto it = values.find(address);
    if (it == values.end() || out.size() != 4) return false;
    std::memcpy(out.data(), &it->second, 4);
    return true;
  }
};

// The file's own bytes of a symbol in an initialized, file-backed section; nullopt for .bss.
std::optional<int32_t> file_value(const symbols::ElfFile& elf, const V8Symbol& s) {
  for (size_t i = 0; i < elf.section_count(); ++i) {
    const auto sec = elf.section(i);
    if (sec.type != SHT_PROGBITS || s.address < sec.addr || s.address + 4 > sec.addr + sec.size) {
      continue;
    }
    int32_t v = 0;
    std::memcpy(&v, elf.bytes().data() + sec.offset + (s.address - sec.addr), 4);
    return v;
  }
  return std::nullopt;
}

TEST(V8LayoutTest, ReadsTheRunningNodesLayout) {
  ChildProcess node({node_binary(), "-e", "console.log('ready'); setInterval(() => {}, 1000)"});
  ASSERT_TRUE(node.wait_for_line("ready", std::chrono::seconds(20)));
  auto layout = read_process_v8_layout("/proc", node.pid());
  ASSERT_TRUE(layout.ok()) << layout.error().message();

  // What V8 fixes on x64 without pointer compression (v8/include/v8-internal.h).
  EXPECT_EQ(layout->heap_object_tag, 1);
  EXPECT_EQ(layout->heap_object_tag_mask, 3);
  EXPECT_EQ(layout->smi_tag, 0);
  EXPECT_EQ(layout->smi_shift_size, 31);
  EXPECT_EQ(layout->heap_object_map, 0);  // the map is every object's first word
  EXPECT_TRUE(layout->is_smi(uint64_t{42} << 32));
  EXPECT_EQ(layout->smi_value(uint64_t{42} << 32), 42);
  EXPECT_EQ(layout->smi_value(static_cast<uint64_t>(int64_t{-7} * (int64_t{1} << 32))), -7);
  EXPECT_TRUE(layout->is_heap_object(0x7f0000001001));
  EXPECT_LT(layout->fp_function, 0);

  // Every .data value the process holds is the file's (the .bss ones have no file bytes).
  auto file = symbols::MappedFile::open(node_binary());
  ASSERT_TRUE(file.ok());
  auto elf = symbols::ElfFile::parse(file->bytes());
  ASSERT_TRUE(elf.ok());
  auto syms = find_v8dbg_symbols(*elf);
  ASSERT_TRUE(syms.ok());
  EXPECT_GT(syms->size(), 400u);
  const std::map<std::string, int32_t> read = {
      {"v8dbg_off_fp_function", layout->fp_function},
      {"v8dbg_off_fp_context_or_frame_type", layout->fp_context_or_frame_type},
      {"v8dbg_class_JSFunction__shared__SharedFunctionInfo", layout->js_function_shared},
      {"v8dbg_type_JSFunction__JS_FUNCTION_TYPE", layout->type_js_function},
      {"v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE",
       layout->type_shared_function_info},
      {"v8dbg_class_Script__line_ends__Object", layout->script_line_ends},
  };
  size_t compared = 0;
  for (const auto& s : *syms) {
    auto it = read.find(s.name);
    if (it == read.end()) continue;
    auto v = file_value(*elf, s);
    if (!v) continue;
    EXPECT_EQ(*v, it->second) << s.name;
    ++compared;
  }
  EXPECT_GE(compared, 4u);
}

TEST(V8LayoutTest, RefusesAProcessWithoutMetadata) {
  ChildProcess sleeper({"/bin/sleep", "30"});
  ASSERT_TRUE(wait_for_exe(sleeper.pid(), "sleep", std::chrono::seconds(2)));
  auto layout = read_process_v8_layout("/proc", sleeper.pid());
  ASSERT_FALSE(layout.ok());
  EXPECT_EQ(layout.error().message().rfind("unsupported: no v8dbg symbols (", 0), 0u)
      << layout.error().message();
  EXPECT_EQ(unsupported_reason(layout.error()), "unsupported: no v8dbg symbols");
}

// The executable's symbols are scanned once per file: a second process of the same node and a
// second read of the same sleep cost no scan; another file (sleep after node) costs one. The
// layouts read through the cache equal the first.
TEST(V8LayoutTest, ScansEachExecutableFileOnce) {
  ChildProcess a({node_binary(), "-e", "console.log('ready'); setInterval(() => {}, 1000)"});
  ChildProcess b({node_binary(), "-e", "console.log('ready'); setInterval(() => {}, 1000)"});
  ASSERT_TRUE(a.wait_for_line("ready", std::chrono::seconds(20)));
  ASSERT_TRUE(b.wait_for_line("ready", std::chrono::seconds(20)));
  auto first = read_process_v8_layout("/proc", a.pid());
  ASSERT_TRUE(first.ok()) << first.error().message();
  const uint64_t scans = executable_scans();
  auto second = read_process_v8_layout("/proc", b.pid());
  ASSERT_TRUE(second.ok()) << second.error().message();
  auto again = read_process_v8_layout("/proc", a.pid());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(executable_scans(), scans) << "the same node file: no second scan";
  for (const V8Layout* l : {&*second, &*again}) {
    EXPECT_EQ(l->fp_function, first->fp_function);
    EXPECT_EQ(l->js_function_shared, first->js_function_shared);
    EXPECT_EQ(l->script_name, first->script_name);
    EXPECT_EQ(l->sfi_name_or_scope_info, first->sfi_name_or_scope_info);
  }

  // A file of this test's own (another test may have scanned /bin/sleep already).
  char dir[] = "/tmp/sonde-v8-layout-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string copy = std::string(dir) + "/sleep-copy";
  std::filesystem::copy_file("/bin/sleep", copy);
  std::filesystem::permissions(copy, std::filesystem::perms::owner_exec,
                               std::filesystem::perm_options::add);
  ChildProcess sleeper({copy, "30"});
  ASSERT_TRUE(wait_for_exe(sleeper.pid(), "sleep-copy", std::chrono::seconds(2)));
  std::filesystem::remove_all(dir);  // the running process keeps its file
  EXPECT_FALSE(read_process_v8_layout("/proc", sleeper.pid()).ok());
  EXPECT_EQ(executable_scans(), scans + 1) << "another file: one scan";
  EXPECT_FALSE(read_process_v8_layout("/proc", sleeper.pid()).ok());
  EXPECT_EQ(executable_scans(), scans + 1) << "a file without symbols is kept too";
}

// Forged metadata: each required symbol missing, unreadable or out of range is refused and
// named; an all-plausible set is accepted.
TEST(V8LayoutTest, RefusesForgedMetadataAndSaysWhy) {
  auto file = symbols::MappedFile::open(node_binary());
  ASSERT_TRUE(file.ok());
  auto elf = symbols::ElfFile::parse(file->bytes());
  ASSERT_TRUE(elf.ok());
  auto syms = find_v8dbg_symbols(*elf);
  ASSERT_TRUE(syms.ok());
  ChildProcess node({node_binary(), "-e", "console.log('ready'); setInterval(() => {}, 1000)"});
  ASSERT_TRUE(node.wait_for_line("ready", std::chrono::seconds(20)));
  // The process's real values, copied into a fake memory the test can corrupt.
  FakeMemory memory;
  const ProcessMemory real(node.pid());
  for (const auto& s : *syms) {
    int32_t v = 0;
    if (real.read_value(s.address, v)) memory.values[s.address] = v;  // non-PIE: bias 0
  }
  ASSERT_TRUE(read_v8_layout(*syms, 0, memory).ok());

  // The message with its details, then the fixed reason a metric label may carry.
  auto with = [&](const std::string& name, std::optional<int32_t> value) {
    FakeMemory m = memory;
    for (const auto& s : *syms) {
      if (s.name != name) continue;
      if (value) {
        m.values[s.address] = *value;
      } else {
        m.values.erase(s.address);
      }
    }
    auto r = read_v8_layout(*syms, 0, m);
    return r.ok() ? std::string("ok") : r.error().message() + " / " + unsupported_reason(r.error());
  };
  EXPECT_EQ(with("v8dbg_TaggedSize", 4),
            "unsupported: pointer compression (TaggedSize 4) / unsupported: pointer compression");
  EXPECT_EQ(with("v8dbg_SystemPointerSize", 4),
            "unsupported: not a 64-bit build (SystemPointerSize 4) / "
            "unsupported: not a 64-bit build");
  EXPECT_EQ(with("v8dbg_off_fp_function", 1 << 20),
            "unsupported: implausible v8dbg value (v8dbg_off_fp_function = 1048576) / "
            "unsupported: implausible v8dbg value");
  EXPECT_EQ(with("v8dbg_off_fp_function", std::nullopt),
            "unsupported: unreadable v8dbg value (v8dbg_off_fp_function) / "
            "unsupported: unreadable v8dbg value");
  EXPECT_EQ(with("v8dbg_HeapObjectTag", 0),
            "unsupported: inconsistent layout (Smi/heap object tags) / "
            "unsupported: inconsistent layout");
  EXPECT_EQ(with("v8dbg_OneByteStringTag", 0),
            "unsupported: inconsistent layout (string tags) / unsupported: inconsistent layout");
  // Errors from below the layout reader fall under one reason; the text never becomes a label.
  EXPECT_EQ(unsupported_reason(Error("readlink /proc/1/root/tenant/path: No such file")),
            "unsupported: unreadable executable");
  EXPECT_EQ(unsupported_reason(Error("unsupported: pointer compressionX")),
            "unsupported: unreadable executable");

  std::vector<V8Symbol> fewer;
  for (const auto& s : *syms) {
    if (!s.name.starts_with("v8dbg_class_Script__name__")) fewer.push_back(s);
  }
  auto r = read_v8_layout(fewer, 0, memory);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "unsupported: missing v8dbg symbol (v8dbg_class_Script__name__)");
  EXPECT_EQ(unsupported_reason(r.error()), "unsupported: missing v8dbg symbol");
}

}  // namespace
}  // namespace sonde::agent::v8
