#include "operator/report_index.h"

namespace sonde::op {

using kube::Json;

namespace {

int64_t integer(const Json& o, const char* field) {
  auto it = o.find(field);
  return it != o.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

std::string text(const Json& o, const char* field) {
  auto it = o.find(field);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

EntrySummary summarize_entry(const Json& entry) {
  EntrySummary s;
  if (!entry.is_object()) return s;
  s.observed_generation = integer(entry, "observedGeneration");
  s.matched_pods = integer(entry, "matchedPods");
  s.instrumented_pods = integer(entry, "instrumentedPods");
  s.nodejs_processes = integer(entry, "nodejsProcesses");
  auto blocked = entry.find("eventLoopBlockedSecondsTotal");
  if (blocked != entry.end() && blocked->is_number()) {
    s.event_loop_blocked_seconds = blocked->get<double>();
  }
  auto problems = entry.find("problems");
  if (problems != entry.end() && problems->is_array()) {
    for (const auto& p : *problems) {
      if (!p.is_object()) continue;
      s.problems.push_back(
          {text(p, "reason"), text(p, "pod"), text(p, "container"), text(p, "message")});
    }
  }
  return s;
}

std::string ReportIndex::node_of(const Json& report) {
  auto spec = report.find("spec");
  if (spec != report.end() && spec->is_object()) {
    const std::string node = text(*spec, "nodeName");
    if (!node.empty()) return node;
  }
  return kube::name_of(report);
}

std::map<std::string, EntrySummary> ReportIndex::entries_of(const Json& report) {
  std::map<std::string, EntrySummary> entries;
  auto status = report.find("status");
  if (status == report.end() || !status->is_object()) return entries;
  auto policies = status->find("policies");
  if (policies == status->end() || !policies->is_array()) return entries;
  for (const auto& entry : *policies) {
    if (!entry.is_object()) continue;
    const std::string ns = text(entry, "namespace");
    const std::string name = text(entry, "name");
    if (ns.empty() || name.empty()) continue;
    entries[kube::make_key(ns, name)] = summarize_entry(entry);
  }
  return entries;
}

void ReportIndex::set_node_locked(const std::string& node, const std::string& rv,
                                  std::map<std::string, EntrySummary>* entries,
                                  std::vector<std::string>& changed, bool& nodes_changed) {
  auto it = by_node_.find(node);
  if (it == by_node_.end()) {
    if (entries == nullptr) return;
    nodes_changed = true;
    it = by_node_.emplace(node, Node{}).first;
  } else if (entries != nullptr && it->second.resource_version == rv) {
    return;  // the same report version again (relist): nothing changed
  }
  auto& old = it->second.entries;
  for (const auto& [key, entry] : old) {
    if (entries == nullptr || entries->count(key) == 0) {
      changed.push_back(key);
      auto nodes = by_policy_.find(key);
      nodes->second.erase(node);
      if (nodes->second.empty()) by_policy_.erase(nodes);
    }
  }
  if (entries == nullptr) {
    by_node_.erase(it);
    nodes_changed = true;
    return;
  }
  for (const auto& [key, entry] : *entries) {
    auto prev = old.find(key);
    if (prev == old.end() || !(prev->second == entry)) changed.push_back(key);
    by_policy_[key].insert(node);
  }
  old = std::move(*entries);
  it->second.resource_version = rv;
}

void ReportIndex::begin_list() {
  listing_.clear();
}

void ReportIndex::list_item(Json item) {
  listing_[node_of(item)] = {kube::resource_version_of(item), entries_of(item)};
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
    for (const auto& node : gone) set_node_locked(node, "", nullptr, changed, nodes_changed);
    for (auto& [node, listed] : listing_) {
      set_node_locked(node, listed.first, &listed.second, changed, nodes_changed);
    }
    synced_ = true;
  }
  listing_.clear();
  synced_cv_.notify_all();
  if (on_change_ && (nodes_changed || !changed.empty())) on_change_(changed, nodes_changed);
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
    const std::string node = node_of(object);
    if (type == kube::WatchEvent::Type::kDeleted) {
      set_node_locked(node, "", nullptr, changed, nodes_changed);
    } else {
      auto entries = entries_of(object);
      set_node_locked(node, kube::resource_version_of(object), &entries, changed, nodes_changed);
    }
  }
  if (on_change_ && (nodes_changed || !changed.empty())) on_change_(changed, nodes_changed);
}

bool ReportIndex::synced() const {
  std::lock_guard lock(mu_);
  return synced_;
}

bool ReportIndex::wait_for_sync(kube::Duration timeout) const {
  std::unique_lock lock(mu_);
  return synced_cv_.wait_for(lock, timeout, [this] { return synced_; });
}

std::vector<NodeEntry> ReportIndex::entries_for(const std::string& policy_key) const {
  std::lock_guard lock(mu_);
  std::vector<NodeEntry> out;
  auto it = by_policy_.find(policy_key);
  if (it == by_policy_.end()) return out;
  for (const std::string& node : it->second) {
    out.push_back({node, by_node_.at(node).entries.at(policy_key)});
  }
  return out;
}

size_t ReportIndex::nodes() const {
  std::lock_guard lock(mu_);
  return by_node_.size();
}

}  // namespace sonde::op
