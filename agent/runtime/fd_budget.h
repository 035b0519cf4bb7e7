// The agent's file-descriptor budget, and the bound on instrumented Go binaries it serves. Every
// uprobe link is a descriptor the agent holds while its probe lives (agent/kernel/uprobe_links.h),
// so instrumenting more binaries could otherwise take the last descriptors that /metrics, /healthz
// and the Kubernetes API client need.
//
// At start the soft RLIMIT_NOFILE is raised to the hard limit (raise_fd_limit(); the soft limit
// of a container is often 1024 while its hard limit is far higher). Before a binary is
// attached, its links are held against the soft limit minus kFdReserve (Descriptors).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "common/result.h"

namespace sonde::agent {

// Descriptors kept free of uprobe links, for everything else the agent opens: the /metrics and
// /healthz listeners and their connections (a scrape, a probe, a few at once; the probe
// listener holds at most ProbeServer::kMaxConnections, 16), the API client's
// watches and report writes (a handful of sockets), the /proc files, binaries and cgroup files
// the workers open while inspecting a process (a few at a time each), ring buffers, logs and
// libbpf's transient descriptors while it attaches. Those need tens; 64 leaves them room twice.
inline constexpr size_t kFdReserve = 64;

struct FdLimits {
  uint64_t soft_before = 0;  // the soft limit the agent started with
  uint64_t soft = 0;         // the soft limit now
  uint64_t hard = 0;
};
// Raises the soft RLIMIT_NOFILE to the hard limit; the error says why it could not (the soft
// limit is then unchanged). Logs nothing (callers do).
Result<FdLimits> raise_fd_limit();

// The agent's open descriptors against its soft limit. The agent's one reads /proc/self/fd and
// getrlimit(); tests fake it. Thread-safe.
class Descriptors {
 public:
  virtual ~Descriptors() = default;
  // Descriptors open now; an error when they cannot be counted (no descriptor left to read
  // /proc/self/fd with is one).
  virtual Result<size_t> open() const = 0;
  virtual uint64_t soft_limit() const = 0;
};

class ProcessDescriptors final : public Descriptors {
 public:
  // Counts the entries of /proc/self/fd, excluding the one used to read it.
  Result<size_t> open() const override;
  uint64_t soft_limit() const override;
};

}  // namespace sonde::agent
