#include "agent/symbols/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <utility>

#include "agent/symbols/limits.h"
#include "common/unique_fd.h"

namespace sonde::symbols {
namespace {

// One registered mapping. `start` is published last (release) and cleared first, so the
// handler never sees a half-written range; 0 marks a free slot.
struct GuardSlot {
  std::atomic<uintptr_t> start{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> faulted{false};
  std::atomic<bool> claimed{false};
};

std::array<GuardSlot, kMaxGuardedMappings> g_slots;
uintptr_t g_page_size = 4096;
struct sigaction g_previous {};
std::once_flag g_install_once;

static_assert(std::atomic<uintptr_t>::is_always_lock_free && std::atomic<bool>::is_always_lock_free,
              "the SIGBUS handler may only touch lock-free atomics");

void pass_on(int sig, siginfo_t* info, void* context) {
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  // Default action: restore it and return; the faulting instruction runs again and the
  // kernel delivers the SIGBUS to the default disposition (core dump, as without us).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGBUS, &dfl, nullptr);
}

// Only async-signal-safe work: atomic loads and stores and one mmap system call.
void on_sigbus(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (GuardSlot& slot : g_slots) {
    const uintptr_t start = slot.start.load(std::memory_order_acquire);
    if (start == 0 || addr < start) continue;
    const uintptr_t end = slot.end.load(std::memory_order_relaxed);
    if (addr >= end) continue;
    // From the faulting page to the end: truncation invalidates everything past the new end,
    // so one replacement ends this mapping's faults (and adds at most one VMA split).
    const uintptr_t page = addr & ~(g_page_size - 1);
    void* zeros = ::mmap(reinterpret_cast<void*>(page),  // NOLINT(performance-no-int-to-ptr)
                         end - page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (zeros == MAP_FAILED) break;
    slot.faulted.store(true, std::memory_order_release);
    errno = saved_errno;
    return;
  }
  errno = saved_errno;
  pass_on(sig, info, context);
}

void install_handler() {
  g_page_size = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  // Failure leaves the default disposition: nothing to report but nothing broken either.
  ::sigaction(SIGBUS, &action, &g_previous);
}

size_t claim_slot() {
  for (size_t i = 0; i < g_slots.size(); ++i) {
    bool expected = false;
    if (g_slots[i].claimed.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
      return i;
    }
  }
  return SIZE_MAX;
}

}  // namespace

Result<MappedFile> MappedFile::map(int fd, const std::string& what) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error("stat " + what, errno);
  if (!S_ISREG(st.st_mode)) return Error(what + ": not a regular file", EINVAL);
  if (st.st_size == 0) return MappedFile();
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > kMaxBinaryBytes) return too_large_error("file size", size, kMaxBinaryBytes).wrap(what);
  std::call_once(g_install_once, install_handler);
  const size_t slot = claim_slot();
  if (slot == SIZE_MAX) {
    return Error(
        what + ": more than " + std::to_string(kMaxGuardedMappings) + " binaries mapped at once",
        EMFILE);
  }
  void* data = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
  if (data == MAP_FAILED) {
    const int err = errno;
    g_slots[slot].claimed.store(false, std::memory_order_release);
    return errno_error("mmap " + what, err);
  }
  GuardSlot& s = g_slots[slot];
  s.faulted.store(false, std::memory_order_relaxed);
  s.end.store(reinterpret_cast<uintptr_t>(data) + size, std::memory_order_relaxed);
  s.start.store(reinterpret_cast<uintptr_t>(data), std::memory_order_release);
  return MappedFile(static_cast<const uint8_t*>(data), static_cast<size_t>(size), slot);
}

Result<MappedFile> MappedFile::open(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno_error("open " + path, errno);
  return map(fd.get(), path);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      slot_(std::exchange(other.slot_, kNoSlot)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    slot_ = std::exchange(other.slot_, kNoSlot);
  }
  return *this;
}

MappedFile::~MappedFile() {
  reset();
}

bool MappedFile::faulted() const {
  return slot_ != kNoSlot && g_slots[slot_].faulted.load(std::memory_order_acquire);
}

Status MappedFile::check(const std::string& what) const {
  if (!faulted()) return ok_status();
  return Error(what +
                   ": the file changed or could not be read while mapped (truncated, or an "
                   "I/O error); results discarded, retry later",
               EIO);
}

void MappedFile::reset() {
  if (data_ != nullptr) {
    // Unregister before unmapping, so the range is never guarded while something else may be
    // mapped there.
    g_slots[slot_].start.store(0, std::memory_order_release);
    ::munmap(const_cast<uint8_t*>(data_), size_);
    g_slots[slot_].claimed.store(false, std::memory_order_release);
  }
  data_ = nullptr;
  size_ = 0;
  slot_ = kNoSlot;
}

}  // namespace sonde::symbols
