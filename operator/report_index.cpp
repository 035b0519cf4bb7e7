#include "operator/report_index.h"

namespace sonde::op {

std::string ReportIndex::node_of(const kube::Json& report) {
  const kube::Json spec = report.value("spec", kube::Json::object());
  const std::string node = spec.is_object() ? spec.value("nodeName", "") : "";
  return node.empty() ? kube::name_of(report) : node;
}

std::vector<std::string> ReportIndex::update(const kube::Json& report) {
  const std::string node = node_of(report);
  std::map<std::string, kube::Json> fresh;
  const kube::Json status = report.value("status", kube::Json::object());
  if (status.is_object() && status.contains("policies") && status["policies"].is_array()) {
    for (const auto& entry : status["policies"]) {
      if (!entry.is_object()) continue;
      const std::string ns = entry.value("namespace", "");
      const std::string name = entry.value("name", "");
      if (ns.empty() || name.empty()) continue;
      fresh[kube::make_key(ns, name)] = entry;
    }
  }
  std::vector<std::string> changed;
  std::lock_guard lock(mu_);
  auto& old = by_node_[node];
  for (const auto& [key, entry] : old) {
    if (fresh.count(key) == 0) {
      changed.push_back(key);
      by_policy_[key].erase(node);
      if (by_policy_[key].empty()) by_policy_.erase(key);
    }
  }
  for (const auto& [key, entry] : fresh) {
    auto it = old.find(key);
    if (it == old.end() || it->second != entry) changed.push_back(key);
    by_policy_[key].insert(node);
  }
  old = std::move(fresh);
  return changed;
}

std::vector<std::string> ReportIndex::remove(const kube::Json& report) {
  const std::string node = node_of(report);
  std::vector<std::string> changed;
  std::lock_guard lock(mu_);
  auto it = by_node_.find(node);
  if (it == by_node_.end()) return changed;
  for (const auto& [key, entry] : it->second) {
    changed.push_back(key);
    by_policy_[key].erase(node);
    if (by_policy_[key].empty()) by_policy_.erase(key);
  }
  by_node_.erase(it);
  return changed;
}

std::vector<NodeEntry> ReportIndex::entries_for(const std::string& policy_key) const {
  std::lock_guard lock(mu_);
  std::vector<NodeEntry> out;
  auto it = by_policy_.find(policy_key);
  if (it == by_policy_.end()) return out;
  for (const std::string& node : it->second) {
    out.push_back({node, by_node_.at(node).at(policy_key)});
  }
  return out;
}

size_t ReportIndex::nodes() const {
  std::lock_guard lock(mu_);
  return by_node_.size();
}

}  // namespace sonde::op
