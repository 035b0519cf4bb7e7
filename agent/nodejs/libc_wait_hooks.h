// LibcWaitHooks: the per-process half of the opt-in `libc-uprobes` wait source — a uprobe at
// the entry and a uretprobe at the return of the C library's epoll_wait, epoll_pwait and
// epoll_pwait2, attached per C library FILE that tracked Node.js processes map.
//
// Why: on kernels without BPF trampolines the other wait sources are the syscall tracepoints,
// which put every system call of every process on the slow path. These probes cost only the
// epoll waits of processes that call them through the same library file (glibc's libc.so.6 of
// one image is one file for all its containers), and nothing to any other system call.
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
//      parse per distinct file, which also decodes each function): a site only where the
//      function's bytes decoded as code (or the architecture has no decoder here, and the
//      kernel's instruction check at attach decides) -- never a data symbol or undecoded bytes,
//      The site is the function's first emulated branch where wait_entry_site.h allows it,
//      else its entry,
//   4. acquires two SharedUprobes attachments keyed by the library's BinaryIdentity (entry and
//      return): the first process of a library attaches, the others share, the last one's
//      unhook() detaches (on SharedUprobes' own thread).
// Every failure is an Error naming the step (the process's verdict), counted per reason.
//
// A wait in progress when the return probe is attached returns without firing it (the return
// address is swapped at the function's entry). hook() says whether every wait of the process
// since its exec went through the probes (`since_exec`); see EventLoopMonitor for how the
// start state is chosen from that.
//
// The kernel writes the breakpoint into every process mapping the file when a library is first
// hooked (a copied 4 KiB page each, for the three functions' page; the glibc ones share one), and
// runs the probes for all of them; that is the cost to processes the agent did not select.
//
// Bounds: one pair of attachments per distinct C library file in use, at most
// kMaxLibraries files (a tenant shipping thousands of distinct libc copies gets a verdict per
// process past the bound, never an attach). Descriptors: uprobe_link_fds() per attachment
// (one each with uprobe_multi links, two per site without). Memory: a few hundred bytes per
// library and per hooked pid.
//
// Thread-safety: all methods may be called concurrently (one mutex; attaching happens inside
// SharedUprobes under its own lock). The library bound is checked before the attach, so
// callers hooking new libraries concurrently may pass it by one library each (the agent hooks
// from its inspection worker, one process at a time).
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
#include "agent/symbols/probe_target_cache.h"
#include "common/result.h"

namespace sonde::agent {

// The C library a process maps, from the text of its /proc/<pid>/maps.
struct MappedCLibrary {
  // The path of the first file mapping named like glibc's or musl's C library; nullopt when
  // there is none (a static binary, a deleted file, or not mapped yet).
  std::optional<std::string> path;
  // glibc's dynamic loader (ld-linux*) is mapped: a process just past exec whose loader has not
  // mapped libc.so.6 yet.
  bool loader = false;
};
MappedCLibrary c_library_from_maps(std::string_view maps);

// Attaches the wait probes to one library file (path valid now) for every process.
class WaitProbeAttacher {
 public:
  virtual ~WaitProbeAttacher() = default;
  virtual Result<std::unique_ptr<Attachment>> attach(const std::string& path,
                                                     std::span<const UprobeSite> sites,
                                                     UprobeFires fires) = 0;
};

class LibcWaitHooks {
 public:
  static constexpr size_t kMaxLibraries = 64;
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
    kAttachRefused,    // the kernel refused a probe
    kLimitExceeded,    // kMaxLibraries distinct library files hooked already
    kCount,
  };
  static const char* failure_name(Failure f);

  // `proc_root`: the /proc to read maps and roots from (a fixture in tests).
  LibcWaitHooks(WaitProbeAttacher& attacher, symbols::ProbeTargetCache& cache,
                std::string proc_root = "/proc");

  struct Hooked {
    std::string library;  // the library's path in the process's mount namespace
    // The probes were attached before the process's exec (by its start time in clock ticks
    // since boot, strictly earlier tick): every wait it made went through them.
    bool since_exec = false;
  };
  // Attaches (or shares) the probes of pid's C library; a pid hooked already is unhooked first
  // (it exec'd: its library may have changed). `start_time`: the process's start time (clock
  // ticks since boot, ProcessInfo::start_time).
  Result<Hooked> hook(pid_t pid, uint64_t start_time);
  // Drops pid's use of its library's probes; no-op when it holds none.
  void unhook(pid_t pid);

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
    uint64_t attached_at_ticks = 0;  // CLOCK_BOOTTIME in clock ticks, when first attached
    size_t processes = 0;
  };
  Error fail(Failure f, Error e);

  WaitProbeAttacher& attacher_;
  symbols::ProbeTargetCache& cache_;
  const std::string proc_root_;
  SharedUprobes uprobes_;  // no linger: a library without node processes is detached at once

  mutable std::mutex mu_;
  std::map<std::string, Entry> libraries_;  // by BinaryIdentity::to_string()
  std::map<pid_t, std::string> by_pid_;     // pid -> key in libraries_
  std::array<uint64_t, static_cast<size_t>(Failure::kCount)> failures_{};
};

}  // namespace sonde::agent
