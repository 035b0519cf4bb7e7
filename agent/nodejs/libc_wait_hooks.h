// LibcWaitHooks: the per-process half of the `libc-uprobes` wait source (the default where the
// kernel has no BPF trampolines) -- a uprobe at the entry and a uretprobe at the return of the C
// library's epoll_wait, epoll_pwait and epoll_pwait2, attached PER PROCESS: each selected Node.js
// process gets its own pair of attachments, filtered to its pid.
//
// Why: without trampolines the kernel-wide hooks are the syscall tracepoints, which put every
// system call of every process on the slow path. A uprobe filtered to one process is installed
// only in that process's address space (the kernel asks the uprobe's filter for every mm that
// maps the file, and writes the breakpoint only where it says yes), so processes the agent does
// not select -- even those mapping the same libc.so.6 file -- carry no breakpoint and pay
// nothing, on any system call or epoll wait (checked against /proc/<pid>/mem by
// loop_probes_bpf_test, with both kinds of link). A child forked by a hooked process without an
// exec (node's own children exec at once: a fresh address space) inherits its copied page with
// the breakpoints. With uprobe_multi links (6.18) it keeps them after hitting them: each of its
// calls to a probed function traps (a uprobe round trip, ~1.3 us here; the pid check keeps the
// program from running) until the selected process is unhooked, which removes them from the
// child too; with perf-event uprobes the kernel removes each at the child's first hit (checked
// by the same test).
//
// Never in node's own code: `node --use-largepages` copies node's .text into anonymous huge
// pages, where a breakpoint would kill it. The C library is mapped from its file, and a
// uretprobe is safe there (C stacks do not move; never on Go code).
//
// Per process, hook():
//   1. finds the C library in /proc/<pid>/maps (glibc: libc.so.6; musl: ld-musl-*.so.1,
//      libc.musl-*.so.1 or Debian's *-linux-musl/libc.so; a mapping marked "(deleted)" is not used:
//      that file is gone). A process seen right after its exec may have only glibc's loader mapped:
//      its maps are read again every kLoaderPoll, for kLoaderWait at most (the loader maps
//      libc.so.6 within a millisecond or two; a process stuck in its loader costs the caller
//      kLoaderWait once),
//   2. opens it through the process's root (/proc/<pid>/root/<path>) and identifies it,
//   3. resolves the three function names from its symbol tables (the ProbeTargetCache: one
//      parse per distinct file, shared by all its processes, which also decodes each function):
//      a site only where the function's bytes decoded as code (or the architecture has no
//      decoder here, and the kernel's instruction check at attach decides) -- never a data
//      symbol or undecoded bytes. The site is the function's first emulated branch where
//      wait_entry_site.h allows it, else its entry,
//   4. checks the bounds below, then attaches the entry and return programs for that pid
//      (all or none), through a SharedUprobes keyed by the process (pid and start time: a
//      reused pid never takes over a dead process's links); unhook() hands them to its detach
//      thread (a link's close waits for an RCU grace period, ~0.1 s).
// Every failure is an Error naming the step (the process's verdict), counted per reason.
//
// The probes go in after the process's exec, so a wait in progress at the attach returns
// without firing the return probe (the return address is swapped at the function's entry), and
// waits made before it were not seen; see EventLoopMonitor for how the start state is chosen.
//
// Bounds: `max_processes` hooked processes at once (kMaxProcesses by default): past it, and
// when the process's links would leave fewer than kFdReserve descriptors under the soft
// RLIMIT_NOFILE, a process gets a kLimitExceeded verdict and no attach, never a half one.
// Descriptors: 2 x uprobe_link_fds() per process (2 with uprobe_multi links, 12 with perf-event
// links for glibc's three functions). Memory: a few hundred bytes per hooked pid and per
// library file in use.
//
// Thread-safety: all methods may be called concurrently (one mutex; attaching happens inside
// SharedUprobes under its own lock). The bounds are checked before the attach, so callers
// hooking concurrently may pass them by one process each (the agent hooks from its inspection
// worker, one process at a time).
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agent/attach/shared_uprobes.h"
#include "agent/kernel/uprobe_links.h"
#include "agent/runtime/fd_budget.h"
#include "agent/symbols/probe_target_cache.h"
#include "agent/symbols/tenant_file.h"
#include "common/result.h"

namespace sonde::agent {

// The C library a process maps, from the text of its /proc/<pid>/maps.
struct MappedCLibrary {
  // The path of the first file mapping named like glibc's or musl's C library; nullopt when
  // there is none (a static binary, a deleted file, or not mapped yet).
  std::optional<std::string> path;
  // That mapping (range, device, inode), to open the very file mapped (symbols/tenant_file.h).
  std::optional<symbols::MappedFileRef> file;
  // glibc's dynamic loader (ld-linux*) is mapped: a process just past exec whose loader has not
  // mapped libc.so.6 yet.
  bool loader = false;
};
MappedCLibrary c_library_from_maps(std::string_view maps);

// Attaches the wait probes to one library file (path valid now) for one process.
class WaitProbeAttacher {
 public:
  virtual ~WaitProbeAttacher() = default;
  virtual Result<std::unique_ptr<Attachment>> attach(const std::string& path,
                                                     std::span<const UprobeSite> sites,
                                                     UprobeFires fires, pid_t pid) = 0;
  // Descriptors one attach() of `sites` sites holds.
  virtual size_t attachment_fds(size_t sites) const = 0;
};

class LibcWaitHooks {
 public:
  // Node.js processes hooked at once by default: a node's pods (kubelet's maxPods is 110) rarely
  // run more node processes; 512 hold 1,024 descriptors with uprobe_multi links.
  static constexpr size_t kMaxProcesses = 512;
  static constexpr std::chrono::milliseconds kLoaderWait{200};
  static constexpr std::chrono::milliseconds kLoaderPoll{1};
  // A process's maps read at most (a node process has a few hundred KiB; a process with more
  // mappings than this gets the library-not-found verdict).
  static constexpr size_t kMaxMapsBytes = 16u << 20;
  // The functions probed; at least epoll_wait or epoll_pwait must be there.
  static const std::vector<std::string>& symbol_names();

  enum class Failure : uint8_t {
    kLibraryNotFound,  // no C library mapping, or it cannot be opened through the root
    kSymbolsMissing,   // no epoll_wait or epoll_pwait function that decodes as code
    kAttachRefused,    // the kernel refused a probe (no permission for uprobes, for one)
    kLimitExceeded,    // max_processes hooked already, or the descriptor reserve would be used
    kCount,
  };
  static const char* failure_name(Failure f);

  // `proc_root`: the /proc to read maps and roots from (a fixture in tests). `fds`: the
  // descriptors to budget against (nullptr: the agent's own, ProcessDescriptors).
  LibcWaitHooks(WaitProbeAttacher& attacher, symbols::ProbeTargetCache& cache,
                std::string proc_root = "/proc", size_t max_processes = kMaxProcesses,
                const Descriptors* fds = nullptr);

  struct Hooked {
    std::string library;  // the library's path in the process's mount namespace
  };
  // Attaches the probes of pid's C library for pid alone; a pid hooked already is unhooked
  // first (it exec'd: its library may have changed). `start_time`: the process's start time
  // (ProcessInfo::start_time), which tells a reused pid apart. On failure, `failure` (when
  // given) says which reason was counted; untouched when the process is gone.
  Result<Hooked> hook(pid_t pid, uint64_t start_time, Failure* failure = nullptr);
  // Detaches pid's probes (on the detach thread: returns at once); no-op when it has none.
  void unhook(pid_t pid);
  // Processes hooked now.
  size_t processes() const;

  struct Library {
    std::string path;      // as the first process mapped it
    std::string build_id;  // BinaryIdentity digest (hex)
    size_t processes;
  };
  std::vector<Library> libraries() const;
  std::array<uint64_t, static_cast<size_t>(Failure::kCount)> failures() const;

 private:
  struct Entry {
    std::string path;
    std::string build_id;
    size_t processes = 0;
  };
  Error fail(Failure f, Error e, Failure* out);
  // Whether `fds` more descriptors leave the reserve free; the refusal says why not.
  std::optional<std::string> over_budget(pid_t pid, size_t fds) const;

  WaitProbeAttacher& attacher_;
  symbols::ProbeTargetCache& cache_;
  const std::string proc_root_;
  const size_t max_processes_;
  ProcessDescriptors own_fds_;
  const Descriptors& fds_;
  SharedUprobes uprobes_;  // keyed per process; no linger: detached at unhook

  mutable std::mutex mu_;
  std::map<std::string, Entry> libraries_;  // by BinaryIdentity::to_string()
  std::map<pid_t, std::string> by_pid_;     // pid -> key in libraries_
  std::array<uint64_t, static_cast<size_t>(Failure::kCount)> failures_{};
};

}  // namespace sonde::agent
