#include "operator/report_index.h"

#include "common/log.h"
#include "common/rfc3339.h"

namespace sonde::op {

using kube::Json;

ReportIndex::Node ReportIndex::digest(const Json& report) {
  Node node;
  node.resource_version = kube::resource_version_of(report);
  auto status = report.find("status");
  if (status == report.end()) return node;
  auto parsed = crd::parse_node_report_status(*status);
  if (!parsed.ok()) {
    node.unreadable = parsed.error().message();  // logged by set_node_locked()
    return node;
  }
  node.cut = parsed->problems_cut > 0;
  for (auto& e : parsed->policies) {
    std::string uid = e.uid;
    node.entries.emplace(std::move(uid), std::move(e));
  }
  return node;
}

bool ReportIndex::stale_locked(const std::string& node, WallTime cutoff) const {
  auto hb = heartbeats_.find(node);
  return hb == heartbeats_.end() || hb->second < cutoff;
}

void ReportIndex::set_node_locked(const std::string& name, Node* node,
                                  std::vector<std::string>& changed, bool& nodes_changed) {
  if (node == nullptr || node->unreadable.empty()) {
    unreadable_warned_.erase(name);
  } else if (std::string& last = unreadable_warned_[name]; last != node->unreadable) {
    last = node->unreadable;
    log::warn("node report unreadable; counting the node without entries",
              {{"node", name}, {"error", node->unreadable}});
  }
  auto it = by_node_.find(name);
  if (it == by_node_.end()) {
    if (node == nullptr) return;
    nodes_changed = true;
    it = by_node_.emplace(name, Node{}).first;
  } else if (node != nullptr && it->second.resource_version == node->resource_version) {
    return;  // the same report version again (relist): nothing changed
  }
  auto& old = it->second.entries;
  for (const auto& [uid, entry] : old) {
    if (node == nullptr || node->entries.count(uid) == 0) {
      changed.push_back(uid);
      auto nodes = by_policy_.find(uid);
      nodes->second.erase(name);
      if (nodes->second.empty()) by_policy_.erase(nodes);
    }
  }
  if (node == nullptr) {
    by_node_.erase(it);
    nodes_changed = true;
    return;
  }
  const bool cut_changed = it->second.cut != node->cut;
  for (const auto& [uid, entry] : node->entries) {
    auto prev = old.find(uid);
    if (cut_changed || prev == old.end() || !(prev->second == entry)) changed.push_back(uid);
    by_policy_[uid].insert(name);
  }
  it->second = std::move(*node);
}

void ReportIndex::notify(const std::vector<std::string>& changed, bool nodes_changed) const {
  if (on_change_ && (nodes_changed || !changed.empty())) on_change_(changed, nodes_changed);
}

void ReportIndex::begin_list() {
  listing_.clear();
}

void ReportIndex::list_item(Json item) {
  listing_[crd::report_node(item)] = digest(item);
}

void ReportIndex::end_list(const std::string& /*resource_version*/) {
  std::vector<std::string> changed;
  bool nodes_changed = false;
  {
    std::lock_guard lock(mu_);
    std::vector<std::string> gone;
    for (const auto& [node, state] : by_node_) {
      if (listing_.count(node) == 0) gone.push_back(node);
    }
    for (const auto& node : gone) set_node_locked(node, nullptr, changed, nodes_changed);
    for (auto& [node, listed] : listing_) set_node_locked(node, &listed, changed, nodes_changed);
    synced_ = true;
  }
  listing_.clear();
  synced_cv_.notify_all();
  notify(changed, nodes_changed);
}

void ReportIndex::replace(std::vector<Json> items, const std::string& resource_version) {
  begin_list();
  for (auto& item : items) list_item(std::move(item));
  end_list(resource_version);
}

void ReportIndex::apply(kube::WatchEvent::Type type, Json object) {
  std::vector<std::string> changed;
  bool nodes_changed = false;
  {
    std::lock_guard lock(mu_);
    const std::string node = crd::report_node(object);
    if (type == kube::WatchEvent::Type::kDeleted) {
      set_node_locked(node, nullptr, changed, nodes_changed);
    } else {
      Node digested = digest(object);
      set_node_locked(node, &digested, changed, nodes_changed);
    }
  }
  notify(changed, nodes_changed);
}

void ReportIndex::set_heartbeat(const std::string& node, std::optional<WallTime> renewed) {
  bool nodes_changed = false;
  {
    std::lock_guard lock(mu_);
    const WallTime cutoff = clock_.wall_now() - ttl_;
    const bool was_stale = stale_locked(node, cutoff);
    if (renewed) {
      heartbeats_[node] = *renewed;
    } else {
      heartbeats_.erase(node);
    }
    nodes_changed = ttl_ > Duration::zero() && by_node_.count(node) != 0 &&
                    was_stale != stale_locked(node, cutoff);
  }
  notify({}, nodes_changed);
}

bool ReportIndex::synced() const {
  std::lock_guard lock(mu_);
  return synced_;
}

bool ReportIndex::wait_for_sync(Duration timeout) const {
  std::unique_lock lock(mu_);
  return synced_cv_.wait_for(lock, timeout, [this] { return synced_; });
}

std::vector<NodeEntry> ReportIndex::entries_for(const std::string& policy_uid) const {
  std::lock_guard lock(mu_);
  std::vector<NodeEntry> out;
  auto it = by_policy_.find(policy_uid);
  if (it == by_policy_.end()) return out;
  for (const std::string& node : it->second) {
    const Node& n = by_node_.at(node);
    out.push_back({node, n.entries.at(policy_uid), n.cut});
  }
  return out;
}

std::set<std::string> ReportIndex::stale_nodes(WallTime cutoff) const {
  std::lock_guard lock(mu_);
  std::set<std::string> out;
  for (const auto& [node, state] : by_node_) {
    if (stale_locked(node, cutoff)) out.insert(node);
  }
  return out;
}

size_t ReportIndex::nodes() const {
  std::lock_guard lock(mu_);
  return by_node_.size();
}

}  // namespace sonde::op
