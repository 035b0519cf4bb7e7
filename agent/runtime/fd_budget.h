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

// Go TLS binaries instrumented at once on a node, unless --max-go-tls-binaries says otherwise.
// A node's pods (kubelet's default maxPods is 110) rarely run more distinct Go TLS binaries than
// that; more is usually a tenant's churn of fresh builds, each costing attach and detach work
// and descriptors: with uprobe_multi links 3 per binary, with single links 2 per site (a Go
// binary has ~9 sites), so 128 binaries stay near 2,300 descriptors even then.
inline constexpr size_t kDefaultMaxGoTlsBinaries = 128;

// How long a Go TLS binary keeps its uprobes after its last process exits, unless
// --go-tls-keep-probes-seconds says otherwise: long enough for a CronJob, a CI step or a CLI
// tool run again minutes later to be counted from its first call. A kept binary holds its
// descriptors and a slot of the binary bound, and gives them up first when a new binary needs
// them; its probes cost nothing else, since no process runs the file.
inline constexpr uint64_t kDefaultGoTlsKeepProbesSeconds = 600;

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
