// Unit tests of the stack pieces that need no kernel: perf maps, the vDSO's symbols, /proc maps.
#include <gtest/gtest.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "agent/stacks/perf_map.h"
#include "agent/stacks/stack_symbolizer.h"
#include "agent/stacks/vdso.h"
#include "agent/symbols/tests/temp_dir.h"

namespace sonde::agent::stacks {
namespace {

TEST(PerfMapTest, LooksUpRangesAndSkipsMalformedLines) {
  PerfMap map = PerfMap::parse(
      "1000 20 JS:*hot /app/a.js:1:1\n"
      "garbage line\n"
      "2000 0 zero-size\n"
      "zz 10 bad-start\n"
      "3000 10 Builtin:InterpreterEntryTrampoline\n"
      "1000 30 JS:*moved /app/a.js:1:1\n");
  EXPECT_EQ(map.size(), 2u);
  ASSERT_TRUE(map.lookup(0x1000));
  EXPECT_EQ(map.lookup(0x1000)->name, "JS:*moved /app/a.js:1:1");  // the later line wins
  EXPECT_TRUE(map.lookup(0x102f));
  EXPECT_FALSE(map.lookup(0x1030));
  EXPECT_FALSE(map.lookup(0xfff));
  EXPECT_EQ(map.lookup(0x3005)->name, "Builtin:InterpreterEntryTrampoline");
  EXPECT_FALSE(map.lookup(0x2000));
}

TEST(PerfMapTest, RefusesWhatIsNotARegularFile) {
  EXPECT_FALSE(PerfMap::read("/dev/zero").ok());
  EXPECT_FALSE(PerfMap::read("/nonexistent/perf-1.map").ok());
}

// A process in a root of its own (chroot) whose /tmp is a symlink to
// /proc/<another pid>/root/tmp: through /proc/<pid>/root the symlink resolves in the agent's
// root and reaches the other process's perf map; open_perf_map resolves it inside the process's
// root, where there is no such file. A symlink that stays inside the root is followed.
TEST(PerfMapTest, ATenantsSymlinkNeverLeadsOutOfItsRoot) {
  symbols::testing::TempDir root;
  const std::filesystem::path victim_dir = "/tmp";  // this process's /tmp: "another container"
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t tenant = fork();
  ASSERT_GE(tenant, 0);
  if (tenant == 0) {
    // Only async-signal-safe calls until the parent kills it.
    char c = 0;
    if (chroot(root.path().c_str()) != 0 || chdir("/") != 0 || write(ready[1], &c, 1) != 1) {
      _exit(1);
    }
    for (;;) pause();
  }
  const std::string name = "perf-" + std::to_string(tenant) + ".map";
  const std::filesystem::path secret = victim_dir / name;
  // Whatever fails below, the tenant is killed and the other tenant's file removed.
  struct Cleanup {
    pid_t pid;
    std::filesystem::path file;
    ~Cleanup() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      std::error_code ec;
      std::filesystem::remove(file, ec);
    }
  } cleanup{tenant, secret};
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  close(ready[1]);
  std::ofstream(secret) << "1000 10 JS:*anotherTenantsSecret\n";
  std::filesystem::create_directory_symlink("/proc/" + std::to_string(getpid()) + "/root/tmp",
                                            root.path() / "tmp");

  // The naive path does leave the root: the setup is the attack.
  auto naive = PerfMap::read("/proc/" + std::to_string(tenant) + "/root/tmp/" + name);
  ASSERT_TRUE(naive.ok()) << naive.error().message();
  EXPECT_TRUE(naive->lookup(0x1000));

  auto escaped = open_perf_map("/proc", tenant, static_cast<uint64_t>(tenant));
  EXPECT_FALSE(escaped.ok()) << "read a perf map outside the process's root";

  // The tenant's own map, behind a symlink inside its root: found.
  std::filesystem::remove(root.path() / "tmp");
  std::filesystem::create_directories(root.path() / "data");
  std::filesystem::create_directory_symlink("/data", root.path() / "tmp");
  std::ofstream(root.path() / "data" / name) << "2000 10 JS:*ownFunction\n";
  auto own = open_perf_map("/proc", tenant, static_cast<uint64_t>(tenant));
  ASSERT_TRUE(own.ok()) << own.error().message();
  auto map = PerfMap::read(own->get(), name);
  ASSERT_TRUE(map.ok()) << map.error().message();
  EXPECT_FALSE(map->lookup(0x1000));
  ASSERT_TRUE(map->lookup(0x2000));
  EXPECT_EQ(map->lookup(0x2000)->name, "JS:*ownFunction");

  // A FIFO in its place is refused at once, not waited on.
  std::filesystem::remove(root.path() / "data" / name);
  ASSERT_EQ(mkfifo((root.path() / "data" / name).c_str(), 0600), 0);
  EXPECT_FALSE(open_perf_map("/proc", tenant, static_cast<uint64_t>(tenant)).ok());
}

// The agent's own vDSO named as readelf reads the same image: every exported function, at its
// first and last byte, by its global (__vdso_) name where a weak alias shares the address.
TEST(VdsoTest, NamesEveryFunctionAsReadelfDoes) {
  auto vdso = Vdso::own();
  ASSERT_TRUE(vdso.ok()) << vdso.error().message();
  symbols::testing::TempDir dir;
  const auto image = dir.path() / "vdso.so";
  {
    std::ofstream out(image, std::ios::binary);
    out.write(reinterpret_cast<const char*>(getauxval(AT_SYSINFO_EHDR)),  // NOLINT
              static_cast<std::streamsize>(vdso->size()));
  }
  // readelf: "  9: 0000000000000b10   902 FUNC    GLOBAL DEFAULT   12 __vdso_clock_gettime@@..."
  FILE* readelf = popen(("readelf -W --dyn-syms " + image.string()).c_str(), "r");
  ASSERT_NE(readelf, nullptr);
  std::map<uint64_t, std::pair<uint64_t, std::string>> globals;  // value -> size, name
  char line[512];
  while (fgets(line, sizeof line, readelf)) {
    unsigned long long value = 0, size = 0;
    char type[16], bind[16], name[256];
    if (std::sscanf(line, " %*[0-9]: %llx %llu %15s %15s %*s %*s %255s", &value, &size, type, bind,
                    name) != 5) {
      continue;
    }
    if (std::string(type) != "FUNC" || std::string(bind) != "GLOBAL") continue;
    std::string n = name;
    globals[value] = {size, n.substr(0, n.find('@'))};
  }
  pclose(readelf);
  ASSERT_FALSE(globals.empty());
  bool has_clock_gettime = false;
  // The x86-64 vDSO is linked at 0 and mapped whole: a symbol's value is its offset.
  for (const auto& [value, sym] : globals) {
    EXPECT_EQ(vdso->function_at(value), sym.second) << std::hex << value;
    EXPECT_EQ(vdso->function_at(value + sym.first - 1), sym.second) << std::hex << value;
    has_clock_gettime = has_clock_gettime || sym.second == "__vdso_clock_gettime";
  }
  EXPECT_TRUE(has_clock_gettime);
  EXPECT_FALSE(vdso->function_at(0));  // the ELF header
}

// A process's [vdso] is named only when its bytes are the agent's image (a 32-bit process maps
// another one): a fixture /proc whose mem holds the image, then other bytes.
TEST(VdsoTest, NamesAProcessesVdsoOnlyWhenItIsTheSameImage) {
  auto vdso = Vdso::own();
  ASSERT_TRUE(vdso.ok()) << vdso.error().message();
  std::vector<uint8_t> image(vdso->size());
  std::memcpy(image.data(), reinterpret_cast<const void*>(getauxval(AT_SYSINFO_EHDR)),  // NOLINT
              image.size());
  uint64_t clock_gettime = 0;
  for (uint64_t off = 0; off < image.size() && !clock_gettime; ++off) {
    if (vdso->function_at(off) == "__vdso_clock_gettime") clock_gettime = off;
  }
  ASSERT_NE(clock_gettime, 0u);
  const uint64_t start = 0x10000;
  for (bool same : {true, false}) {
    symbols::testing::TempDir proc;
    std::filesystem::create_directories(proc.path() / "42");
    std::ofstream(proc.path() / "42" / "stat")
        << "42 (app) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 "
           "7 0 0\n";
    char maps[128];
    (void)std::snprintf(maps, sizeof maps, "%llx-%llx r-xp 00000000 00:00 0 [vdso]\n",
                        static_cast<unsigned long long>(start),
                        static_cast<unsigned long long>(start + image.size()));
    std::ofstream(proc.path() / "42" / "maps") << maps;
    std::vector<uint8_t> mem = image;
    if (!same) mem[clock_gettime] ^= 0xff;
    {
      std::ofstream out(proc.path() / "42" / "mem", std::ios::binary);
      out.seekp(static_cast<std::streamoff>(start));
      out.write(reinterpret_cast<const char*>(mem.data()),
                static_cast<std::streamsize>(mem.size()));
    }
    symbolize::SymbolizerCache binaries;
    StackSymbolizer symbolizer(proc.path().string(), binaries, nullptr);
    const uint64_t ip = start + clock_gettime + 4;
    auto locations = symbolizer.symbolize(42, std::span<const uint64_t>(&ip, 1), {});
    ASSERT_EQ(locations.size(), 1u);
    ASSERT_EQ(locations[0].lines.size(), 1u);
    EXPECT_EQ(locations[0].module, "[vdso]");
    char unnamed[64];
    (void)std::snprintf(unnamed, sizeof unnamed, "[vdso]+0x%llx",
                        static_cast<unsigned long long>(clock_gettime + 4));
    EXPECT_EQ(locations[0].lines[0].function, same ? "__vdso_clock_gettime" : unnamed);
  }
}

TEST(MapsLineTest, ParsesProcMaps) {
  auto m = parse_maps_line(
      "55d0c0a00000-55d0c0b00000 r-xp 00001000 fd:01 1234                       /usr/bin/my prog");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->start, 0x55d0c0a00000u);
  EXPECT_EQ(m->end, 0x55d0c0b00000u);
  EXPECT_TRUE(m->executable);
  EXPECT_EQ(m->pgoff, 0x1000u);
  EXPECT_EQ(m->path, "/usr/bin/my prog");
  auto anon = parse_maps_line("7f0000000000-7f0000001000 rwxp 00000000 00:00 0 ");
  ASSERT_TRUE(anon);
  EXPECT_EQ(anon->path, "");
  EXPECT_FALSE(parse_maps_line("7f0000001000-7f0000000000 r-xp 00000000 00:00 0"));
  EXPECT_FALSE(parse_maps_line("nonsense"));
}

}  // namespace
}  // namespace sonde::agent::stacks
