// Feature: one kind of instrumentation (Node.js event loop, Go TLS, CPU sampling) as the runtime
// drives it. The runtime knows nothing of what a feature measures: it loops over its features to
// decide, instrument, release and sweep processes, and to fill /metrics, so a feature is added in
// one place: its own folder (its kind is the fragment there, agent/<folder>/<key>.crd.yaml), and
// one line in the composition root (agent/assembly/) that builds the list.
//
// A process's life as a feature sees it:
//   select()      on the event thread, for every selected process: a feature that needs nothing
//                 of the executable (CPU sampling) instruments here and answers; the others
//                 answer nullopt and get instrument() on the inspection worker, with the
//                 executable opened once for every feature (Candidate).
//                 Also for a process that exited before the runtime could read it in /proc,
//                 described by its exec event (start_time 0, `exe` as execve() was given it):
//                 its answer is ignored, no instrument() follows, and its exit comes next.
//   instrument()  on the inspection worker (it reads tenants' files; may take long).
//   release()     the process exited or is no longer selected: fold its counters, detach.
//                 Called for processes the feature never tracked too: then a no-op. On the
//                 event thread; on the worker too, after instrument(), for a process whose
//                 exit came while it was being instrumented.
//   sweep()       every few seconds: processes that vanished without an exit event.
//   take_revisions() right after sweep(): outcomes the feature changed on its own since (a
//                 process it stopped instrumenting), which replace the feature's state in the
//                 process's recorded outcome.
// select()/instrument() are called again for a process they already track (a re-selection, an
// exec): the feature recognizes an unchanged process and re-instruments a new program.
//
// Thread-safety: instrument() and release() run on the worker while the event thread calls
// release() and the metrics server collect(); a feature locks what they share.
#pragma once

#include <prometheus/metric_family.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/discovery/candidate.h"
#include "agent/discovery/proc_reader.h"
#include "agent/metrics/metrics_server.h"
#include "agent/runtime/container_totals.h"
#include "common/instrumentation.h"

namespace sonde::agent {

// What to do with one process.
struct Selection {
  ContainerLabels labels;  // the series its metrics go to
  // The kinds asked for, with their parameters (the policies' merged: InstrumentationKind::merge).
  Instrumentations instrumentations;
};

// What became of a selected process, for reports (policy status, node reports).
struct ProcessOutcome {
  enum class State {
    kInstrumented,     // the requested instrumentation is live
    kNotApplicable,    // e.g. Go TLS requested, but the binary does not use crypto/tls
    kSymbolsNotFound,  // the instrumentation needs symbols the binary does not have
    kFailed,           // the kernel refused (attach or map update): see message
    kLimitExceeded,    // a policy's limit (limits.maxUprobesPerNode) leaves it out: see message
    // Instrumented, then detached: its probes cost more than limits.maxOverheadPercent of its
    // container's CPU for a sustained window (see message). Until the policy changes.
    kOverheadExceeded,
  };
  pid_t pid = 0;
  std::string container_id;
  ContainerLabels labels;
  std::string exe;
  // Per kind; kNotApplicable when not requested.
  PerInstrumentation<State> states = all_not_applicable();
  std::string message;  // why, for anything but kInstrumented / kNotApplicable (the first one)

  static PerInstrumentation<State> all_not_applicable() {
    PerInstrumentation<State> s;
    s.values.fill(State::kNotApplicable);
    return s;
  }
};

// What one feature made of one process.
struct FeatureResult {
  ProcessOutcome::State state = ProcessOutcome::State::kNotApplicable;
  std::string message;  // for kSymbolsNotFound / kFailed / kLimitExceeded / kOverheadExceeded
  bool gone = false;    // the process exited meanwhile: no outcome is recorded
};

class Feature {
 public:
  virtual ~Feature() = default;

  // The kind it implements: its requests, parameters and outcomes are keyed by it.
  virtual Instrumentation kind() const = 0;
  // For logs: "nodejs", "gotls", "cpu".
  const char* name() const { return kind_of(kind()).name.data(); }
  // Whether `selection` asks this feature for the process.
  bool requested(const Selection& selection) const {
    return selection.instrumentations[kind()].has_value();
  }
  // The symbols instrument() resolves (every feature's are resolved in one parse of a new
  // binary); empty for a feature that reads no executable.
  virtual const std::vector<std::string>& symbol_names() const = 0;

  virtual std::optional<FeatureResult> select(const ProcessInfo& process,
                                              const Selection& selection) = 0;
  virtual FeatureResult instrument(const Candidate& candidate, const Selection& selection) = 0;
  virtual void release(pid_t pid, uint64_t end_ns) = 0;
  virtual void sweep() = 0;
  // Outcomes changed since the last call, by pid (on the event thread, after sweep()).
  virtual std::vector<std::pair<pid_t, FeatureResult>> take_revisions() { return {}; }

  // Processes instrumented now.
  virtual size_t tracked() const = 0;
  // Its metric families, at every scrape (on the metrics server's threads).
  virtual void collect(std::vector<prometheus::MetricFamily>& out) = 0;
  // Routes it serves on the metrics port (CPU profiles); called once, at start.
  virtual void add_routes(MetricsServer& server) = 0;
};

}  // namespace sonde::agent
