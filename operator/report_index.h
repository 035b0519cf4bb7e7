// ReportIndex: what every node's agent reported, indexed by policy, so that reconciling one
// policy reads only that policy's entries (cost O(nodes reporting it)) instead of scanning
// every report. Fed by the ProfilingNodeReport informer's handlers.
//
// An entry is the report's status.policies[] element for one policy (see crds/README.md).
// Thread-safe: handlers write, workers and the metrics scrape read.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/kube/resource.h"

namespace sonde::op {

struct NodeEntry {
  std::string node;
  kube::Json entry;
};

class ReportIndex {
 public:
  // Replaces everything node `report` (a ProfilingNodeReport) said. Returns the keys
  // ("namespace/name") of the policies whose entries changed.
  std::vector<std::string> update(const kube::Json& report);
  // Forgets a node whose report was deleted; returns the policies it had reported on.
  std::vector<std::string> remove(const kube::Json& report);

  std::vector<NodeEntry> entries_for(const std::string& policy_key) const;
  // Nodes that have a report, i.e. agents the operator expects to hear from.
  size_t nodes() const;

 private:
  static std::string node_of(const kube::Json& report);

  mutable std::mutex mu_;
  // node -> policy key -> entry
  std::map<std::string, std::map<std::string, kube::Json>> by_node_;
  // policy key -> nodes with an entry for it
  std::map<std::string, std::set<std::string>> by_policy_;
};

}  // namespace sonde::op
