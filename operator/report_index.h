// ReportIndex: what every node's agent reported and when its node Lease was last renewed,
// indexed by policy uid, so reconciling one policy reads only its entries (cost O(nodes))
// instead of scanning every report. It is the ReflectorSink of the ProfilingNodeReport
// reflector: reports are kept parsed (crd::NodeReportStatus), not as JSON.
//
// Entries are keyed by the policy's uid (crds/README.md): a policy deleted and re-created
// under the same name reads none of the old one's entries. A report that does not parse (an
// agent of another version) counts as a node with no entries, and is logged when its error changes.
//
// Liveness comes from the agents' node Leases (set_heartbeat()): a node with a report whose
// Lease is missing or was renewed before the cutoff is stale.
//
// on_change is called after every change, outside the index's lock, with the uids whose
// entries changed and whether the set of nodes or their staleness changed (which changes
// every policy's "nodes reporting" denominator). Thread-safe: the reflector and Lease
// informer threads write, workers and scrapes read.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/crd/node_report.h"
#include "common/kube/reflector.h"
#include "common/kube/resource.h"

namespace sonde::op {

struct NodeEntry {
  std::string node;
  crd::PolicyEntry entry;
  bool report_cut = false;  // the node's report left out problems (problemsCut)
};

class ReportIndex final : public kube::ReflectorSink {
 public:
  using ChangeHandler =
      std::function<void(const std::vector<std::string>& policy_uids, bool nodes_changed)>;

  // `ttl`: a node whose heartbeat is older than this is stale; when one turns stale or fresh
  // (as far as set_heartbeat() tells), nodes_changed is reported. Zero: nodes are never stale.
  explicit ReportIndex(ChangeHandler on_change = {}, Duration ttl = {},
                       const Clock& clock = real_clock())
      : on_change_(std::move(on_change)), ttl_(ttl), clock_(clock) {}

  // Reports are parsed as list pages arrive; the previous state stays in use until
  // end_list() swaps the new one in.
  void begin_list() override;
  void list_item(kube::Json item) override;
  void end_list(const std::string& resource_version) override;
  void replace(std::vector<kube::Json> items, const std::string& resource_version) override;
  void apply(kube::WatchEvent::Type type, kube::Json object) override;

  // The node's Lease renewTime; nullopt when the Lease is gone or has none.
  void set_heartbeat(const std::string& node, std::optional<WallTime> renewed);

  // True once the first list has been applied.
  bool synced() const;
  bool wait_for_sync(Duration timeout) const;

  std::vector<NodeEntry> entries_for(const std::string& policy_uid) const;
  // Nodes that have a report, i.e. agents the operator expects to hear from.
  size_t nodes() const;
  // Nodes with a report whose heartbeat is missing or before `cutoff`.
  std::set<std::string> stale_nodes(WallTime cutoff) const;

 private:
  struct Node {
    std::string resource_version;
    std::string unreadable;  // why the status did not parse; empty when it did
    bool cut = false;
    std::map<std::string, crd::PolicyEntry> entries;  // policy uid -> entry
  };

  static Node digest(const kube::Json& report);
  bool stale_locked(const std::string& node, WallTime cutoff) const;
  // Sets (or with `node` null, removes) a node's report; appends changed uids.
  void set_node_locked(const std::string& name, Node* node, std::vector<std::string>& changed,
                       bool& nodes_changed);
  void notify(const std::vector<std::string>& changed, bool nodes_changed) const;

  ChangeHandler on_change_;
  const Duration ttl_;
  const Clock& clock_;
  // The list being received (reflector thread only).
  std::map<std::string, Node> listing_;
  mutable std::mutex mu_;
  mutable std::condition_variable synced_cv_;
  bool synced_ = false;
  std::map<std::string, Node> by_node_;
  std::map<std::string, WallTime> heartbeats_;
  std::map<std::string, std::set<std::string>> by_policy_;  // policy uid -> nodes
  std::map<std::string, std::string> unreadable_warned_;    // node -> the error last logged
};

}  // namespace sonde::op
