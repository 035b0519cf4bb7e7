// AgentRuntime: the agent's machinery, whatever decides what to instrument. It discovers
// processes (start-up /proc scan + exec/exit events), asks a Selector what to do with each,
// drives the features (feature.h: Node.js event loop, Go TLS, CPU sampling) and serves
// /metrics. Standalone mode plugs in a selector built from the config file; in-cluster mode one
// built from ProfilingPolicies and the node's pods.
//
// Threads: run() is the main loop, on the caller's thread: it reads process events and /proc
// and asks the Selector, and never touches a process's executable. Executables are opened and
// parsed, and processes instrumented, on an inspection worker with a deadline (a file whose
// reads hang costs a worker, never the event loop). Exits and deselections are handled on the
// event thread. request_reselect() and the report accessors may be called from any thread
// (informer handlers, the report writer, the metrics server).
//
// Health (health.h) on the metrics port: /healthz fails when the event thread has not turned for
// kEventThreadStaleAfter or every inspection worker hung (only a restart brings them back);
// /readyz also waits for the first /proc scan, and for whatever the caller registers on
// health() (in-cluster mode: the informers' first lists, the node Lease).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/discovery/proc_reader.h"
#include "agent/metrics/metrics_server.h"
#include "agent/procevents/process_events.h"
#include "agent/runtime/feature.h"
#include "agent/runtime/health.h"
#include "agent/symbols/probe_target_cache.h"
#include "common/clock.h"
#include "common/result.h"
#include "common/signals.h"

namespace sonde::agent {

class Selector {
 public:
  virtual ~Selector() = default;
  // What to instrument in `process`, or nullopt to leave it alone. Called on run()'s thread,
  // for every process at start, at its exec, and for every live process after
  // request_reselect(). Must be cheap (no API calls): answer from a local cache.
  virtual std::optional<Selection> select(const ProcessInfo& process) = 0;
};

struct RuntimeOptions {
  std::string proc_root = "/proc";
  std::string metrics_address = "0.0.0.0:9464";
  std::string node_name;  // the `node` label; the host name when empty
  uint32_t symbol_cache_entries = 4096;
  // How long a container's series outlive its last process (then they leave /metrics).
  std::chrono::seconds series_grace{300};
  // How long reading one executable may take before its worker is abandoned.
  std::chrono::milliseconds inspection_deadline{5000};
  // Who may read /debug/ routes (cluster mode: RouteAccess); empty: anyone who reaches the port.
  MetricsServer::Guard debug_guard;
  // Who may read /metrics (cluster mode with --metrics-authorization); empty: anyone.
  MetricsServer::Guard metrics_guard;
  // Serve the /debug/ routes (CPU profiles) on this host:port instead of the metrics port, e.g.
  // 127.0.0.1:9465 so that only who can enter the pod (kubectl port-forward) reaches them.
  std::string debug_address;
  // Serve /healthz and /readyz on this host:port too, from a thread no client can hold
  // (ProbeServer): the address kubelet's probes use. Empty: only on the metrics port.
  std::string health_address;
  // Serve the metrics and /debug/ addresses over TLS with this certificate (PEM, intermediates
  // after it) and key, read again when they change (ServingCertificate). Empty: plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
};

// What the runtime drives, built once at start: the process events and the features. The agent's
// composition root (agent/assembly/agent_parts.h) builds them, loading the BPF programs; the
// runtime's unit tests pass fakes.
struct RuntimeParts {
  std::unique_ptr<ProcessEvents> events;
  std::vector<std::unique_ptr<Feature>> features;  // in start order; destroyed in reverse
  // Labels of sonde_agent_info beside `version`: what the features chose when they loaded (the
  // composition root names them; e.g. the Node.js wait hook and what it costs other processes).
  LabelPairs info_labels;
};

// What building the parts may use; each reference outlives the parts.
struct RuntimeServices {
  const RuntimeOptions& options;
  ProcessEvents::Callback on_event;  // where the events go (called on run()'s thread)
  symbols::ProbeTargetCache& cache;  // the one probe-target cache of every feature
  const ProcReader& proc;
  const std::string& node;  // the `node` label

  // RuntimeOptions::series_grace in nanoseconds, as the features' trackers take it.
  uint64_t series_grace_ns() const {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(options.series_grace).count());
  }
};
using PartsFactory = std::function<Result<RuntimeParts>(const RuntimeServices&)>;

class AgentRuntime {
 public:
  // The event thread beats once per iteration (every 200 ms when idle; a re-selection of every
  // process reads only /proc): this much silence means it is stuck, e.g. in a /proc read of a
  // process whose memory map is locked by a hung page fault.
  static constexpr std::chrono::seconds kEventThreadStaleAfter{60};

  // Builds the parts (`build`: events and features) and starts serving /metrics, timed by
  // `clock` (sweeps, rescans, releases). Fails with the step that failed.
  static Result<std::unique_ptr<AgentRuntime>> start(const RuntimeOptions& options,
                                                     Selector& selector, const PartsFactory& build,
                                                     const Clock& clock);
  ~AgentRuntime();

  // The main loop: until `stop` is requested or a fatal error (returned).
  Status run(const StopSignals& stop);

  // Asks run() to re-apply the selector to every live process soon (the selector's inputs
  // changed): newly selected processes are instrumented, deselected ones released.
  void request_reselect();

  // Selected processes and what became of them; also, for a minute after their exit, processes
  // that exited with a problem (a container of short-lived refused processes stays reported).
  std::vector<ProcessOutcome> outcomes() const;
  int metrics_port() const;
  // Where the /debug/ routes are served: RuntimeOptions::debug_address's port, else the metrics
  // port.
  int debug_port() const;
  // Where the probes are answered apart from the metrics port: RuntimeOptions::health_address's
  // port, else the metrics port.
  int health_port() const;
  // Adds series to /metrics: `collector` runs at every scrape, on the server's threads.
  void add_collector(MetricsServer::Collector collector);
  // What /healthz and /readyz answer; callers add their own loops' checks.
  HealthRegistry& health();

 private:
  struct Impl;
  explicit AgentRuntime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sonde::agent
