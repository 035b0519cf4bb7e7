// ReportIndex: what every node's agent reported, kept in compact form and indexed by policy,
// so reconciling one policy reads only its entries (cost O(nodes)) instead of scanning every
// report. It is the ReflectorSink of the ProfilingNodeReport reflector: reports are not kept
// as JSON (100 nodes x 1,000 policies would be ~100k JSON objects), only the numbers and
// problems the status needs.
//
// An entry is one report's status.policies[] element (see crds/README.md). on_change is called
// after every change, outside the index's lock, with the policies whose entries changed and
// whether the set of nodes changed (which changes every policy's "nodes reporting"
// denominator). Thread-safe: the reflector thread writes, workers and scrapes read.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/kube/clock.h"
#include "common/kube/reflector.h"
#include "common/kube/resource.h"

namespace sonde::op {

struct Problem {
  std::string reason;
  std::string pod;
  std::string container;
  std::string message;
  bool operator==(const Problem&) const = default;
};

struct EntrySummary {
  int64_t observed_generation = 0;
  int64_t matched_pods = 0;
  int64_t instrumented_pods = 0;
  int64_t nodejs_processes = 0;
  double event_loop_blocked_seconds = 0;
  std::vector<Problem> problems;
  bool operator==(const EntrySummary&) const = default;
};

// Reads one status.policies[] element; missing or mistyped fields read as zero/empty.
EntrySummary summarize_entry(const kube::Json& entry);

// Parses RFC 3339 ("2026-01-02T03:04:05Z", fractional seconds and offsets allowed).
std::optional<kube::WallTime> parse_rfc3339(const std::string& text);

struct NodeEntry {
  std::string node;
  EntrySummary entry;
};

class ReportIndex final : public kube::ReflectorSink {
 public:
  using ChangeHandler =
      std::function<void(const std::vector<std::string>& policy_keys, bool nodes_changed)>;

  // `ttl`: when a node whose heartbeat was older than this reports again, every policy is
  // named as changed (nodes_changed), so a returning agent is noticed at once. Zero: off.
  explicit ReportIndex(ChangeHandler on_change = {}, kube::Duration ttl = {},
                       const kube::Clock& clock = kube::real_clock())
      : on_change_(std::move(on_change)), ttl_(ttl), clock_(clock) {}

  // Reports are summarised as list pages arrive; the previous state stays in use until
  // end_list() swaps the new one in.
  void begin_list() override;
  void list_item(kube::Json item) override;
  void end_list(const std::string& resource_version) override;
  void replace(std::vector<kube::Json> items, const std::string& resource_version) override;
  void apply(kube::WatchEvent::Type type, kube::Json object) override;

  // True once the first list has been applied.
  bool synced() const;
  bool wait_for_sync(kube::Duration timeout) const;

  std::vector<NodeEntry> entries_for(const std::string& policy_key) const;
  // Nodes that have a report, i.e. agents the operator expects to hear from.
  size_t nodes() const;
  // Nodes whose report's status.heartbeatTime is before `cutoff` (reports without a
  // readable heartbeat are never stale).
  std::set<std::string> stale_nodes(kube::WallTime cutoff) const;

 private:
  struct Node {
    std::string resource_version;
    std::optional<kube::WallTime> heartbeat;
    std::map<std::string, EntrySummary> entries;  // policy key -> entry
  };

  static std::string node_of(const kube::Json& report);
  static std::map<std::string, EntrySummary> entries_of(const kube::Json& report);
  struct Listed {
    std::string resource_version;
    std::optional<kube::WallTime> heartbeat;
    std::map<std::string, EntrySummary> entries;
  };
  static Listed digest(const kube::Json& report);
  // Sets (or with `listed` null, removes) a node; appends changed policy keys.
  void set_node_locked(const std::string& node, Listed* listed, std::vector<std::string>& changed,
                       bool& nodes_changed);

  ChangeHandler on_change_;
  const kube::Duration ttl_;
  const kube::Clock& clock_;
  // The list being received (reflector thread only).
  std::map<std::string, Listed> listing_;
  mutable std::mutex mu_;
  mutable std::condition_variable synced_cv_;
  bool synced_ = false;
  std::map<std::string, Node> by_node_;
  std::map<std::string, std::set<std::string>> by_policy_;  // policy key -> nodes
};

}  // namespace sonde::op
