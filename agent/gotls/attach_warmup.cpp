#include "agent/gotls/attach_warmup.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>

#include "common/clock.h"
#include "common/log.h"

namespace sonde::agent {

Result<AttachWarmup::File> AttachWarmup::File::of(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return errno_error("stat " + path, errno);
  return File{.dev = st.st_dev,
              .ino = st.st_ino,
              .size = static_cast<uint64_t>(st.st_size),
              .mtime_ns = st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec};
}

Result<std::unique_ptr<AttachWarmup>> AttachWarmup::create(Attach attach, uint64_t min_interval_ns,
                                                           const Clock& clock) {
  const int fd = memfd_create("sonde-uprobe-warmup", MFD_CLOEXEC);
  if (fd < 0) return errno_error("memfd_create for the uprobe warm-up", errno);
  // A few NOPs: the kernel reads nothing at registration (no mapping), but the offset must lie
  // inside the file.
  std::array<uint8_t, 16> nops{};
  nops.fill(0x90);
  if (write(fd, nops.data(), nops.size()) != static_cast<ssize_t>(nops.size())) {
    const int err = errno;
    close(fd);
    return errno_error("writing the uprobe warm-up memfd", err);
  }
  return std::unique_ptr<AttachWarmup>(
      new AttachWarmup(std::move(attach), min_interval_ns, clock, fd));
}

AttachWarmup::AttachWarmup(Attach attach, uint64_t min_interval_ns, const Clock& clock, int fd)
    : attach_(std::move(attach)),
      min_interval_ns_(min_interval_ns),
      clock_(clock),
      fd_(fd),
      thread_([this](const std::stop_token& stop) { run(stop); }) {}

AttachWarmup::~AttachWarmup() {
  thread_.request_stop();
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  close(fd_);
}

bool AttachWarmup::request() {
  {
    std::lock_guard lock(mu_);
    if (!request_locked()) return false;
  }
  wake_.notify_one();
  return true;
}

bool AttachWarmup::request_for(const File& file) {
  {
    std::lock_guard lock(mu_);
    if (files_.contains(file) || !request_locked()) return false;
    if (files_.size() >= kMaxFiles) files_.clear();
    files_.insert(file);
  }
  wake_.notify_one();
  return true;
}

bool AttachWarmup::request_locked() {
  const uint64_t now = clock_.now_ns();
  if (pending_ || running_ || (started_once_ && now - last_start_ns_ < min_interval_ns_)) {
    skipped_++;
    return false;
  }
  pending_ = true;
  started_once_ = true;
  last_start_ns_ = now;
  return true;
}

void AttachWarmup::run(const std::stop_token& stop) {
  const std::string path = "/proc/self/fd/" + std::to_string(fd_);
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    wake_.wait(lock, stop, [this] { return pending_; });
    if (stop.stop_requested()) return;
    pending_ = false;
    running_ = true;
    lock.unlock();
    std::string error;
    {
      auto attached = attach_(path);
      if (!attached.ok()) error = attached.error().message();
    }  // detached here, on this thread (the detach may wait too)
    const bool ok = error.empty();
    lock.lock();
    running_ = false;
    if (ok) {
      done_++;
    } else {
      failed_++;
      if (!logged_) {
        logged_ = true;
        log::warn("uprobe warm-up failed (a never-seen binary's attach is not sped up)",
                  {{"error", error}});
      }
    }
  }
}

uint64_t AttachWarmup::done() const {
  std::lock_guard lock(mu_);
  return done_;
}
uint64_t AttachWarmup::failed() const {
  std::lock_guard lock(mu_);
  return failed_;
}
uint64_t AttachWarmup::skipped() const {
  std::lock_guard lock(mu_);
  return skipped_;
}

}  // namespace sonde::agent
