// LibcWaitHooks against a fake kernel attacher: which file it finds in real and fixture maps,
// the symbols it resolves (ground truth: readelf), one attachment pair per process filtered to
// its pid, the bounds, and a counted verdict for every way hooking can fail.
#include "agent/nodejs/libc_wait_hooks.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "agent/nodejs/wait_entry_site.h"
#include "agent/tests/child_process.h"
#include "agent/tests/counting_attachment.h"

namespace sonde::agent {
namespace {

namespace fs = std::filesystem;
using sonde::testing::ChildProcess;
using sonde::testing::command_output;
using sonde::testing::readelf_file_offset;
using Failure = LibcWaitHooks::Failure;

class FakeAttacher final : public WaitProbeAttacher {
 public:
  Result<std::unique_ptr<Attachment>> attach(const std::string& path,
                                             std::span<const UprobeSite> sites, UprobeFires fires,
                                             pid_t pid) override {
    if (refuse) return Error("refused by the fake kernel", EPERM);
    ++attaches;
    pids.push_back(pid);
    (fires == UprobeFires::kAtSite ? entry_sites : return_sites).assign(sites.begin(), sites.end());
    last_path = path;
    struct stat st {};
    last_inode = stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
    return std::unique_ptr<Attachment>(new testing::CountingAttachment(alive));
  }
  size_t attachment_fds(size_t) const override { return fds_each; }
  bool refuse = false;
  size_t fds_each = 1;
  int attaches = 0;
  std::vector<pid_t> pids;
  std::atomic<int> alive{0};
  std::vector<UprobeSite> entry_sites, return_sites;
  std::string last_path;
  ino_t last_inode = 0;  // of the file attached to last
};

// objdump's instruction at file offset `off` of `lib` (its vaddr equals its file offset in
// these libraries' text segments; checked by the caller against readelf's symbol offsets).
std::string objdump_at(const std::string& lib, uint64_t off) {
  char range[96];
  std::snprintf(range, sizeof range, "--start-address=0x%llx --stop-address=0x%llx",
                static_cast<unsigned long long>(off), static_cast<unsigned long long>(off + 16));
  std::istringstream out(
      command_output("objdump -d --no-show-raw-insn " + std::string(range) + " " + lib));
  std::string line;
  while (std::getline(out, line)) {
    if (line.find(':') != std::string::npos && line.starts_with(" ")) return line;  // the first
  }
  return "";
}

// One site per function: its entry (readelf), or, a few bytes in, an instruction objdump
// disassembles as a relative jump or call (what the kernel emulates).
void expect_sites_at(const std::string& lib, const std::vector<uint64_t>& entries,
                     const std::vector<UprobeSite>& sites) {
  ASSERT_EQ(sites.size(), entries.size());
  for (size_t i = 0; i < sites.size(); ++i) {
    const uint64_t site = sites[i].file_offset;
    if (site == entries[i]) continue;
    EXPECT_GT(site, entries[i]);
    EXPECT_LT(site, entries[i] + 32) << "past the function's first instructions";
    const std::string insn = objdump_at(lib, site);
    std::printf("site %zu: entry 0x%llx, probe at +%llu: %s\n", i,
                static_cast<unsigned long long>(entries[i]),
                static_cast<unsigned long long>(site - entries[i]), insn.c_str());
    EXPECT_TRUE(insn.find("\tj") != std::string::npos || insn.find("\tcall") != std::string::npos)
        << "not a relative jump or call: " << insn;
  }
}

// The site rules of wait_entry_site.h on hand-assembled prefixes (encodings from the Intel SDM,
// checked with objdump): an emulated branch after straight-line code that leaves rdi, rsp and
// memory alone, else the entry.
TEST(WaitProbeOffset, FirstEmulatedBranchOnlyWhenTheEntryStateSurvives) {
  using Bytes = std::vector<uint8_t>;
  auto offset = [](const Bytes& code) { return x86_64_wait_probe_offset(code); };
  const Bytes cmpb_rip = {0x80, 0x3d, 0, 0, 0, 0, 0};  // cmpb $0x0,0x0(%rip)
  const Bytes mov_r10 = {0x41, 0x89, 0xca};            // mov %ecx,%r10d
  const Bytes je = {0x74, 0x14};                       // je .+0x16
  auto cat = [](std::initializer_list<Bytes> parts) {
    Bytes out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  EXPECT_EQ(offset(cat({cmpb_rip, mov_r10, je})), 10u) << "glibc's epoll_wait";
  EXPECT_EQ(offset(cat({{0x45, 0x31, 0xc0}, {0xe9, 0x68, 0xff, 0xff, 0xff}})), 3u)
      << "musl's epoll_wait: xor %r8d,%r8d; jmp epoll_pwait";
  EXPECT_EQ(offset(cat({{0x89, 0xcf}, je})), 0u) << "mov %ecx,%edi changes the first argument";
  EXPECT_EQ(offset(cat({{0x55}, je})), 0u) << "push %rbp moves the stack pointer";
  EXPECT_EQ(offset(cat({{0x48, 0x83, 0xec, 0x28}, je})), 0u) << "sub $0x28,%rsp";
  EXPECT_EQ(offset(cat({{0x89, 0x54, 0x24, 0x0c}, je})), 0u) << "mov %edx,0xc(%rsp) writes memory";
  EXPECT_EQ(offset(cat({mov_r10, {0xff, 0xe0}})), 0u) << "jmp *%rax is not emulated";
  EXPECT_EQ(offset(cat({mov_r10, {0x0f, 0x05}, je})), 0u) << "a system call comes first";
  EXPECT_EQ(offset(cat({{0x90, 0x90, 0x90, 0x90}, je})), 0u) << "past kMaxWaitSitePrefix";
  EXPECT_EQ(offset(Bytes{0x80, 0x3d, 0}), 0u) << "truncated";
  EXPECT_EQ(offset(Bytes{}), 0u);
}

TEST(CLibraryFromMaps, FindsGlibcAndMuslButNotDeletedOrLoaderOnly) {
  auto lib = c_library_from_maps(
      "55d0-55d1 r--p 00000000 fe:00 1 /usr/bin/node\n"
      "7f00-7f01 r--p 00000000 fe:00 2 /usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30\n"
      "7f02-7f03 r-xp 00026000 fe:00 3                   /usr/lib/x86_64-linux-gnu/libc.so.6\n"
      "7f04-7f05 r--p 00000000 fe:00 4 /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2\n");
  EXPECT_EQ(lib.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_EQ(c_library_from_maps("7f-80 r-xp 0 fe:00 9 /lib/ld-musl-x86_64.so.1\n").path,
            "/lib/ld-musl-x86_64.so.1");
  EXPECT_EQ(c_library_from_maps("7f-80 r-xp 0 fe:00 9 /usr/lib/x86_64-linux-musl/libc.so").path,
            "/usr/lib/x86_64-linux-musl/libc.so");
  EXPECT_EQ(c_library_from_maps("7f-80 r-xp 0 fe:00 9 /lib/libc.musl-aarch64.so.1\n").path,
            "/lib/libc.musl-aarch64.so.1");
  // glibc's libc.so is a linker script; a file named like libc elsewhere is not the C library.
  EXPECT_FALSE(c_library_from_maps("7f-80 r-xp 0 fe:00 9 /usr/lib/libc.so\n").path);
  EXPECT_FALSE(c_library_from_maps("7f-80 r-xp 0 fe:00 9 /opt/libc.so.6.bak\n").path);
  EXPECT_FALSE(c_library_from_maps("7f-80 r-xp 0 fe:00 9 /lib/libc.so.6 (deleted)\n").path);
  auto loader = c_library_from_maps(
      "55-56 r--p 0 fe:00 1 /usr/bin/node\n"
      "7f-80 r--p 0 fe:00 4 /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2\n");
  EXPECT_FALSE(loader.path);
  EXPECT_TRUE(loader.loader);
  auto stat = c_library_from_maps("55-56 r--p 0 fe:00 1 /app/server\n7f-80 rw-p 0 00:00 0 \n");
  EXPECT_FALSE(stat.path);
  EXPECT_FALSE(stat.loader);
}

// Each process of one C library file gets an attachment pair of its own, filtered to its pid;
// the epoll functions are found where readelf says (one parse of the file for both); a
// process's unhook detaches its pair and only its pair.
TEST(LibcWaitHooks, OneAttachmentPairPerProcessFilteredToItsPid) {
  FakeAttacher kernel;
  symbols::ProbeTargetCache cache(64);
  LibcWaitHooks hooks(kernel, cache);
  ChildProcess child({"/bin/sleep", "30"});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // exec'd and linked
  auto a = hooks.hook(getpid(), 0);
  ASSERT_TRUE(a.ok()) << a.error().message();
  auto b = hooks.hook(child.pid(), 0);
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(a->library, b->library);
  EXPECT_EQ(kernel.attaches, 4) << "an entry and a return attachment per process";
  EXPECT_EQ(kernel.pids, (std::vector<pid_t>{getpid(), getpid(), child.pid(), child.pid()}));
  EXPECT_TRUE(kernel.last_path.starts_with("/proc/self/fd/")) << kernel.last_path;
  EXPECT_EQ(hooks.processes(), 2u);

  std::vector<uint64_t> entries;
  for (const char* name : {"epoll_wait", "epoll_pwait", "epoll_pwait2"}) {
    uint64_t off = readelf_file_offset(a->library, name);
    if (name == std::string("epoll_pwait2") && off == 0) continue;  // glibc before 2.35
    ASSERT_NE(off, 0u) << name << " not in " << a->library;
    entries.push_back(off);
  }
  expect_sites_at(a->library, entries, kernel.entry_sites);
  std::vector<uint64_t> entry, ret;
  for (const auto& s : kernel.entry_sites) entry.push_back(s.file_offset);
  for (const auto& s : kernel.return_sites) ret.push_back(s.file_offset);
  EXPECT_EQ(entry, ret) << "both programs at one site per function";

  auto libs = hooks.libraries();
  ASSERT_EQ(libs.size(), 1u);
  EXPECT_EQ(libs[0].processes, 2u);
  auto wait_alive = [&](int n) {
    for (int i = 0; i < 500 && kernel.alive != n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return kernel.alive.load();
  };
  hooks.unhook(child.pid());
  EXPECT_EQ(wait_alive(2), 2) << "the child's pair detached, the test process's kept";
  hooks.unhook(getpid());
  hooks.unhook(getpid());  // a second unhook is a no-op
  EXPECT_EQ(wait_alive(0), 0);
  EXPECT_TRUE(hooks.libraries().empty());
  EXPECT_EQ(hooks.processes(), 0u);
}

// A fixed set of fds for the budget: `open` of `limit`.
class FakeDescriptors final : public Descriptors {
 public:
  Result<size_t> open() const override { return open_fds; }
  uint64_t soft_limit() const override { return limit; }
  size_t open_fds = 10;
  uint64_t limit = 1024;
};

// Past the process bound or the descriptor reserve a process gets a LimitExceeded verdict and
// no attach at all; a slot freed by an exit is usable again.
TEST(LibcWaitHooks, BoundsGiveLimitExceededAndNoAttach) {
  FakeAttacher kernel;
  FakeDescriptors fds;
  symbols::ProbeTargetCache cache(64);
  LibcWaitHooks hooks(kernel, cache, "/proc", /*max_processes=*/1, &fds);
  ChildProcess child({"/bin/sleep", "30"});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // exec'd and linked
  ASSERT_TRUE(hooks.hook(getpid(), 0).ok());
  ASSERT_EQ(kernel.attaches, 2);
  auto failure = Failure::kCount;
  auto over = hooks.hook(child.pid(), 0, &failure);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(failure, Failure::kLimitExceeded);
  EXPECT_NE(over.error().message().find("1 Node.js processes are hooked"), std::string::npos)
      << over.error().message();
  EXPECT_EQ(kernel.attaches, 2) << "nothing attached past the bound";
  hooks.unhook(getpid());
  auto again = hooks.hook(child.pid(), 0);
  EXPECT_TRUE(again.ok()) << "the slot is free again";
  hooks.unhook(child.pid());

  // Descriptors: 2 attachments x 20 fds would leave fewer than kFdReserve free.
  kernel.fds_each = 20;
  fds.open_fds = fds.limit - kFdReserve - 39;
  failure = Failure::kCount;
  auto no_fds = hooks.hook(child.pid(), 0, &failure);
  ASSERT_FALSE(no_fds.ok());
  EXPECT_EQ(failure, Failure::kLimitExceeded);
  EXPECT_NE(no_fds.error().message().find("RLIMIT_NOFILE"), std::string::npos)
      << no_fds.error().message();
  fds.open_fds = fds.limit - kFdReserve - 40;
  EXPECT_TRUE(hooks.hook(child.pid(), 0).ok()) << "exactly the reserve left is enough";
  hooks.unhook(child.pid());
  EXPECT_EQ(hooks.failures()[static_cast<size_t>(Failure::kLimitExceeded)], 2u);
}

// A /proc fixture: <root>/<pid>/maps naming `mapped`, and that file under <root>/<pid>/root;
// the maps line of `mapped` gets the copy's real device and inode, as the kernel would show.
// It has no map_files/: the hooks open the file by its path, checked against those.
class FixtureProc {
 public:
  FixtureProc() {
    char tmpl[] = "/tmp/libc-wait-hooks-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  ~FixtureProc() { fs::remove_all(root_); }
  void add(pid_t pid, const std::string& maps, const std::string& mapped = "",
           const std::string& source = "") {
    fs::create_directories(root_ / std::to_string(pid));
    std::string text = maps;
    if (!mapped.empty()) {
      fs::path dest = root_ / std::to_string(pid) / "root" / mapped.substr(1);
      fs::create_directories(dest.parent_path());
      fs::copy_file(source, dest);
      struct stat st {};
      EXPECT_EQ(stat(dest.c_str(), &st), 0);
      char dev_ino[64];
      (void)std::snprintf(dev_ino, sizeof dev_ino, " %x:%x %llu ", major(st.st_dev),
                          minor(st.st_dev), static_cast<unsigned long long>(st.st_ino));
      // "start-end perms offset dev inode path": dev and inode are the 4th and 5th fields.
      size_t at = text.find(" " + mapped);
      size_t line = text.rfind('\n', at) + 1;  // npos + 1 == 0 for the first line
      size_t dev = line;
      for (int field = 0; field < 3; ++field) dev = text.find(' ', dev) + 1;
      text.replace(dev - 1, at - dev + 2, dev_ino);
    }
    std::ofstream(root_ / std::to_string(pid) / "maps") << text;
  }
  std::string root() const { return root_.string(); }

 private:
  fs::path root_;
};

TEST(LibcWaitHooks, EveryFailureIsACountedVerdict) {
  FixtureProc proc;
  const std::string libc =
      c_library_from_maps(command_output("cat /proc/self/maps")).path.value_or("");
  ASSERT_FALSE(libc.empty());
  // 101: static binary; 102: only the loader, forever; 103: a "libc.so.6" without epoll (libm);
  // 104: the real libc, refused by the kernel; 105: the real libc; 106: exited.
  proc.add(101, "55-56 r-xp 0 fe:00 1 /app/static\n");
  proc.add(102,
           "55-56 r-xp 0 fe:00 1 /usr/bin/node\n"
           "7f-80 r-xp 0 fe:00 2 /lib64/ld-linux-x86-64.so.2\n");
  std::string libm = fs::path(libc).parent_path() / "libm.so.6";
  proc.add(103, "7f-80 r-xp 0 fe:00 3 /lib/libc.so.6\n", "/lib/libc.so.6", libm);
  proc.add(104, "7f-80 r-xp 0 fe:00 4 /lib/libc.so.6\n", "/lib/libc.so.6", libc);
  proc.add(105, "7f-80 r-xp 0 fe:00 4 /lib/libc.so.6\n", "/lib/libc.so.6", libc);
  proc.add(106, "");  // exited: a zombie has no mappings

  FakeAttacher kernel;
  symbols::ProbeTargetCache cache(64);
  LibcWaitHooks hooks(kernel, cache, proc.root());
  auto failed = [&](pid_t pid) {
    auto r = hooks.hook(pid, 0);
    EXPECT_FALSE(r.ok()) << pid;
    return r.ok() ? std::string() : r.error().message();
  };
  EXPECT_NE(failed(101).find("no glibc or musl C library"), std::string::npos);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(failed(102).find("no glibc or musl C library"), std::string::npos);
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, LibcWaitHooks::kLoaderWait) << "a process in its loader is given time";
  EXPECT_LT(waited, LibcWaitHooks::kLoaderWait * 3) << "and no more than the bound";
  EXPECT_NE(failed(103).find("no epoll_wait or epoll_pwait function"), std::string::npos);
  kernel.refuse = true;
  EXPECT_NE(failed(104).find("refused by the fake kernel"), std::string::npos);
  EXPECT_EQ(kernel.alive, 0);
  kernel.refuse = false;
  auto gone = hooks.hook(106, 0);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code(), ESRCH) << "an exited process is gone, not a verdict";
  auto ok = hooks.hook(105, 0);
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ(ok->library, "/lib/libc.so.6");

  auto counts = hooks.failures();
  EXPECT_EQ(counts[static_cast<size_t>(Failure::kLibraryNotFound)], 2u);
  EXPECT_EQ(counts[static_cast<size_t>(Failure::kSymbolsMissing)], 1u);
  EXPECT_EQ(counts[static_cast<size_t>(Failure::kAttachRefused)], 1u);
  EXPECT_EQ(counts[static_cast<size_t>(Failure::kLimitExceeded)], 0u);
  hooks.unhook(105);
}

// A tenant swaps a FIFO in for its C library and back (renameat2 RENAME_EXCHANGE, in a loop)
// while the hooks inspect it: every hook returns at once and hooks the file the process maps,
// never blocking on the FIFO (which would hang an inspection worker for good) nor taking
// whatever the path names at that instant.
TEST(LibcWaitHooks, AFifoSwappedInForTheLibraryNeitherBlocksNorIsHooked) {
  char tmpl[] = "/tmp/libc-swap-XXXXXX";
  const fs::path dir = mkdtemp(tmpl);
  const std::string libc =
      c_library_from_maps(command_output("cat /proc/self/maps")).path.value_or("");
  ASSERT_FALSE(libc.empty());
  const fs::path lib = dir / "libc.so.6";
  const fs::path fifo = dir / "fifo";
  fs::copy_file(libc, lib);
  struct stat lib_stat {};
  ASSERT_EQ(stat(lib.c_str(), &lib_stat), 0);
  ChildProcess child({"/usr/bin/env", "LD_LIBRARY_PATH=" + dir.string(), "/bin/sleep", "30"});
  auto maps_copy = [&] {
    auto lib_of =
        c_library_from_maps(command_output("cat /proc/" + std::to_string(child.pid()) + "/maps"));
    return lib_of.path == lib.string();
  };
  for (int i = 0; i < 500 && !maps_copy(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(maps_copy()) << "the child does not map " << lib;
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::atomic<bool> stop = false;
  std::atomic<int> swaps = 0;
  std::thread swapper([&] {
    while (!stop) {
      if (renameat2(AT_FDCWD, lib.c_str(), AT_FDCWD, fifo.c_str(), RENAME_EXCHANGE) == 0) ++swaps;
    }
  });
  // Were a hook to block on the FIFO, a writer's open releases it, and the test fails instead
  // of hanging.
  auto release = [&] {
    for (const fs::path& p : {lib, fifo}) close(open(p.c_str(), O_WRONLY | O_NONBLOCK));
  };
  FakeAttacher kernel;
  symbols::ProbeTargetCache cache(64);
  LibcWaitHooks hooks(kernel, cache);
  constexpr int kHooks = 200;
  int hooked = 0;
  for (int i = 0; i < kHooks; ++i) {
    auto pending = std::async(std::launch::async, [&] { return hooks.hook(child.pid(), 0); });
    while (pending.wait_for(std::chrono::seconds(2)) != std::future_status::ready) {
      ADD_FAILURE() << "hook " << i << " blocked on the swapped-in FIFO";
      release();
    }
    auto r = pending.get();
    EXPECT_TRUE(r.ok()) << r.error().message();
    if (r.ok()) {
      ++hooked;
      EXPECT_EQ(kernel.last_inode, lib_stat.st_ino) << "hooked a file the process does not map";
    }
    hooks.unhook(child.pid());
  }
  stop = true;
  swapper.join();
  std::printf("%d of %d hooks of the mapped library while the path was swapped %d times\n", hooked,
              kHooks, swaps.load());
  EXPECT_GT(swaps, kHooks) << "the path was not swapped while the hooks looked";
  fs::remove_all(dir);
}

// musl's epoll functions are found by symbol in its .dynsym (readelf's answer), whatever the
// file is called: Debian's musl-tools installs it as x86_64-linux-musl/libc.so, mapped here as
// Alpine's name.
TEST(LibcWaitHooks, FindsMuslEpollFunctionsBySymbol) {
  const std::string musl = "/usr/lib/x86_64-linux-musl/libc.so";
  if (!fs::exists(musl)) GTEST_SKIP() << musl << " missing (Debian package musl-tools)";
  FixtureProc proc;
  proc.add(201, "7f-80 r-xp 0 fe:00 5 /lib/ld-musl-x86_64.so.1\n", "/lib/ld-musl-x86_64.so.1",
           musl);
  FakeAttacher kernel;
  symbols::ProbeTargetCache cache(64);
  LibcWaitHooks hooks(kernel, cache, proc.root());
  auto r = hooks.hook(201, 0);
  ASSERT_TRUE(r.ok()) << r.error().message();
  std::vector<uint64_t> entries;
  for (const char* name : {"epoll_wait", "epoll_pwait", "epoll_pwait2"}) {
    if (uint64_t off = readelf_file_offset(musl, name)) entries.push_back(off);
  }
  ASSERT_GE(entries.size(), 2u) << "musl exports epoll_wait and epoll_pwait";
  expect_sites_at(musl, entries, kernel.entry_sites);
  hooks.unhook(201);
}

}  // namespace
}  // namespace sonde::agent
