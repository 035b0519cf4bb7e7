#include "agent/nodejs/libc_wait_hooks.h"

#include <algorithm>
#include <cerrno>
#include <thread>

#include "agent/discovery/candidate.h"
#include "agent/nodejs/wait_entry_site.h"
#include "agent/symbols/elf_file.h"
#include "agent/symbols/tenant_file.h"
#include "common/files.h"
#include "common/log.h"

namespace sonde::agent {
namespace {

enum NameIndex { kEpollWait = 0, kEpollPwait = 1, kEpollPwait2 = 2 };
const std::vector<std::string> kNames = {"epoll_wait", "epoll_pwait", "epoll_pwait2"};

// glibc: libc.so.6 (every architecture since glibc 2.x); musl: the dynamic linker is the C
// library, ld-musl-<arch>.so.1 (Alpine's libc.musl-<arch>.so.1 links to it), and Debian's musl
// package installs it as <triplet>-linux-musl/libc.so with ld-musl-<arch>.so.1 a link to that
// (maps name the file the links lead to). glibc's own libc.so is a linker script, never mapped.
bool is_c_library(std::string_view path) {
  const size_t slash = path.rfind('/');
  std::string_view base = path.substr(slash + 1);
  if (base == "libc.so.6") return true;
  if (base == "libc.so" && slash != std::string_view::npos &&
      path.substr(0, slash).ends_with("-linux-musl")) {
    return true;
  }
  if (base.starts_with("ld-musl-") && base.ends_with(".so.1")) return true;
  if (base.starts_with("libc.musl-") && base.ends_with(".so.1")) return true;
  return false;
}

// A function entry the probes may go on: code that decoded (returns, or leaves through a tail
// call: musl's epoll_wait jumps to epoll_pwait), or an architecture sonde does not decode, where
// the kernel's own instruction check at attach time is the judge. Never a data symbol, bytes
// that did not decode, or a function past the decoder's bounds.
bool is_probeable(const symbols::ProbeTarget& t) {
  using symbols::ReturnSiteStatus;
  switch (t.return_status) {
    case ReturnSiteStatus::kFound:
    case ReturnSiteStatus::kTailCallOnly:
    case ReturnSiteStatus::kUnsupportedMachine: return true;
    case ReturnSiteStatus::kNoExit:
    case ReturnSiteStatus::kDecodeError:
    case ReturnSiteStatus::kNotCode:
    case ReturnSiteStatus::kTooLarge: return false;
  }
  return false;
}

// How far into the function the probes go (wait_entry_site.h): 0 unless an x86-64 function's
// first instructions give an emulated site. Reads at most kMaxCodeBytes of the mapped file.
uint32_t probe_offset(const symbols::OpenBinary& binary, const symbols::ProbeTarget& t) {
  constexpr uint64_t kMaxCodeBytes = 64;
  std::span<const uint8_t> bytes = binary.bytes();
  if (!binary.check_bytes().ok() || t.size == 0 || t.file_offset >= bytes.size()) return 0;
  auto elf = symbols::ElfFile::parse(bytes);
  if (!elf.ok() || elf->machine() != symbols::Machine::kX86_64) return 0;
  const uint64_t n = std::min({t.size, kMaxCodeBytes, bytes.size() - t.file_offset});
  return x86_64_wait_probe_offset(bytes.subspan(t.file_offset, n));
}

}  // namespace

MappedCLibrary c_library_from_maps(std::string_view maps) {
  MappedCLibrary out;
  while (!maps.empty()) {
    const size_t eol = maps.find('\n');
    std::string_view line = maps.substr(0, eol);
    maps = eol == std::string_view::npos ? std::string_view() : maps.substr(eol + 1);
    auto file = symbols::parse_mapped_file(line);
    if (!file || file->path.ends_with(" (deleted)")) continue;
    std::string_view path = file->path;
    std::string_view name = path.substr(path.rfind('/') + 1);
    if (is_c_library(path)) {
      out.path = file->path;
      out.file = std::move(file);
      return out;
    }
    if (name.starts_with("ld-linux")) out.loader = true;
  }
  return out;
}

const std::vector<std::string>& LibcWaitHooks::symbol_names() {
  return kNames;
}

const char* LibcWaitHooks::failure_name(Failure f) {
  switch (f) {
    case Failure::kLibraryNotFound: return "library-not-found";
    case Failure::kSymbolsMissing: return "symbols-missing";
    case Failure::kAttachRefused: return "attach-refused";
    case Failure::kLimitExceeded: return "limit-exceeded";
    case Failure::kCount: break;
  }
  return "unknown";
}

LibcWaitHooks::LibcWaitHooks(WaitProbeAttacher& attacher, symbols::ProbeTargetCache& cache,
                             std::string proc_root, size_t max_processes, const Descriptors* fds)
    : attacher_(attacher),
      cache_(cache),
      proc_root_(std::move(proc_root)),
      max_processes_(max_processes),
      fds_(fds != nullptr ? *fds : own_fds_) {}

Error LibcWaitHooks::fail(Failure f, Error e, Failure* out) {
  std::lock_guard lock(mu_);
  failures_[static_cast<size_t>(f)]++;
  if (out != nullptr) *out = f;
  return e;
}

std::optional<std::string> LibcWaitHooks::over_budget(pid_t pid, size_t fds) const {
  const std::string who = "epoll waits of pid " + std::to_string(pid) + " not hooked: ";
  {
    std::lock_guard lock(mu_);
    if (by_pid_.size() >= max_processes_) {
      return who + std::to_string(by_pid_.size()) +
             " Node.js processes are hooked on this node, the most the agent hooks at once";
    }
  }
  auto open = fds_.open();
  const uint64_t limit = fds_.soft_limit();
  if (!open.ok() || *open + fds + kFdReserve > limit) {
    return who + "its probes need " + std::to_string(fds) + " descriptors and the agent keeps " +
           std::to_string(kFdReserve) + " of its soft RLIMIT_NOFILE (" + std::to_string(limit) +
           ") free; open now: " + (open.ok() ? std::to_string(*open) : open.error().message());
  }
  return std::nullopt;
}

Result<LibcWaitHooks::Hooked> LibcWaitHooks::hook(pid_t pid, uint64_t start_time,
                                                  Failure* failure) {
  unhook(pid);
  const std::string dir = proc_root_ + "/" + std::to_string(pid);
  MappedCLibrary mapped;
  const auto give_up = std::chrono::steady_clock::now() + kLoaderWait;
  for (;;) {
    auto maps = read_file(dir + "/maps", kMaxMapsBytes);
    if (!maps.ok()) {
      if (is_gone(maps.error())) return maps.error();
      return fail(Failure::kLibraryNotFound, maps.error(), failure);
    }
    // A process that has exited (a zombie until reaped) has no mappings at all.
    if (maps->empty()) return Error("pid " + std::to_string(pid) + " exited", ESRCH);
    mapped = c_library_from_maps(*maps);
    if (mapped.path || !mapped.loader || std::chrono::steady_clock::now() >= give_up) break;
    std::this_thread::sleep_for(kLoaderPoll);
  }
  const auto& library = mapped.path;
  if (!library) {
    return fail(Failure::kLibraryNotFound,
                Error("no glibc or musl C library mapped by pid " + std::to_string(pid) +
                      " (static binary?): its epoll waits cannot be hooked per process; "
                      "--wait-source epoll-tracepoints would see them, at a cost to every "
                      "system call on the node"),
                failure);
  }
  // The file the process maps, never whatever its path names now: the tenant can swap in a
  // FIFO (an open that blocks this worker) or another file between the maps read and the open.
  auto opened = symbols::open_mapped_file(proc_root_, pid, *mapped.file);
  auto binary = opened.ok() ? symbols::OpenBinary::from_fd(std::move(opened).value(),
                                                           dir + "/root" + *library)
                            : Result<symbols::OpenBinary>(opened.error());
  if (!binary.ok()) {
    if (is_gone(binary.error())) return binary.error();
    return fail(Failure::kLibraryNotFound,
                Error("open C library " + *library + " of pid " + std::to_string(pid) + ": " +
                          binary.error().message(),
                      binary.error().code()),
                failure);
  }
  auto targets = cache_.resolve(*binary, kNames);
  if (!targets.ok()) {
    return fail(Failure::kSymbolsMissing,
                Error("read symbols of C library " + *library + ": " + targets.error().message()),
                failure);
  }
  std::vector<UprobeSite> sites;
  bool wait_function = false;  // epoll_wait or epoll_pwait among the sites
  for (size_t i = 0; i < targets->size(); ++i) {
    const auto& t = (*targets)[i];
    if (!t.found || !is_probeable(t)) continue;
    wait_function = wait_function || i == kEpollWait || i == kEpollPwait;
    const uint64_t site = t.file_offset + probe_offset(*binary, t);
    // Two names of one function (an alias) are one site.
    if (std::none_of(sites.begin(), sites.end(),
                     [&](const UprobeSite& s) { return s.file_offset == site; })) {
      sites.push_back({site, 0});
    }
  }
  if (!wait_function) {
    return fail(Failure::kSymbolsMissing,
                Error("C library " + *library +
                      " exports no epoll_wait or epoll_pwait function that decodes as code"),
                failure);
  }

  if (auto refusal = over_budget(pid, 2 * attacher_.attachment_fds(sites.size()))) {
    return fail(Failure::kLimitExceeded, Error(*refusal), failure);
  }
  const auto& id = binary->identity();
  const std::string key = id.to_string();
  const std::string attach_path = "/proc/self/fd/" + std::to_string(binary->fd());
  auto attach = [this, sites, pid](UprobeFires fires) {
    return [this, sites, fires, pid](const std::string& path) {
      return attacher_.attach(path, sites, fires, pid);
    };
  };
  // Keyed by the process, not the file: each process has links of its own.
  const std::string process =
      " pid " + std::to_string(pid) + " start " + std::to_string(start_time);
  std::vector<SharedUprobes::Request> requests = {
      {{id, "nodejs/libc_wait_enter" + process}, attach(UprobeFires::kAtSite)},
      {{id, "nodejs/libc_wait_exit" + process}, attach(UprobeFires::kOnReturn)},
  };
  if (auto st = uprobes_.acquire(requests, attach_path, pid); !st.ok()) {
    return fail(Failure::kAttachRefused,
                Error("hook epoll waits of C library " + *library + " in pid " +
                          std::to_string(pid) + ": " + st.error().message() +
                          " (uprobes need CAP_SYS_ADMIN on current kernels: the chart's "
                          "agent.uprobes; "
                          "--wait-source epoll-tracepoints hooks every process's system calls "
                          "instead)",
                      st.error().code()),
                failure);
  }
  std::lock_guard lock(mu_);
  auto [entry, inserted] = libraries_.try_emplace(key);
  if (inserted) {
    entry->second = {*library, id.digest_hex(), 0};
    log::info("hooking the epoll waits of Node.js processes using a C library",
              {{"library", *library},
               {"build_id", entry->second.build_id},
               {"sites", static_cast<uint64_t>(sites.size())}});
  }
  entry->second.processes++;
  by_pid_[pid] = key;
  return Hooked{*library};
}

void LibcWaitHooks::unhook(pid_t pid) {
  {
    std::lock_guard lock(mu_);
    auto it = by_pid_.find(pid);
    if (it == by_pid_.end()) return;
    auto lib = libraries_.find(it->second);
    if (lib != libraries_.end() && --lib->second.processes == 0) libraries_.erase(lib);
    by_pid_.erase(it);
  }
  uprobes_.release(pid, /*linger=*/false);
}

size_t LibcWaitHooks::processes() const {
  std::lock_guard lock(mu_);
  return by_pid_.size();
}

std::vector<LibcWaitHooks::Library> LibcWaitHooks::libraries() const {
  std::lock_guard lock(mu_);
  std::vector<Library> out;
  for (const auto& [key, e] : libraries_) out.push_back({e.path, e.build_id, e.processes});
  return out;
}

std::array<uint64_t, static_cast<size_t>(LibcWaitHooks::Failure::kCount)> LibcWaitHooks::failures()
    const {
  std::lock_guard lock(mu_);
  return failures_;
}

}  // namespace sonde::agent
