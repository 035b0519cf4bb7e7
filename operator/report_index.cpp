#include "operator/report_index.h"

#include <cstring>
#include <ctime>

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

std::optional<kube::WallTime> parse_rfc3339(const std::string& text) {
  std::tm tm{};
  const char* rest = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return std::nullopt;
  if (*rest == '.') {
    ++rest;
    while (*rest >= '0' && *rest <= '9') ++rest;
  }
  long offset = 0;
  if (*rest == 'Z' || *rest == 'z') {
    ++rest;
  } else if ((*rest == '+' || *rest == '-') && std::strlen(rest) == 6 && rest[3] == ':') {
    const long hours = std::strtol(std::string(rest + 1, 2).c_str(), nullptr, 10);
    const long minutes = std::strtol(std::string(rest + 4, 2).c_str(), nullptr, 10);
    offset = (*rest == '+' ? 1 : -1) * (hours * 3600 + minutes * 60);
    rest += 6;
  } else {
    return std::nullopt;
  }
  if (*rest != '\0') return std::nullopt;
  return std::chrono::system_clock::from_time_t(timegm(&tm) - offset);
}

std::string ReportIndex::node_of(const Json& report) {
  auto spec = report.find("spec");
  if (spec != report.end() && spec->is_object()) {
    const std::string node = text(*spec, "nodeName");
    if (!node.empty()) return node;
  }
  return kube::name_of(report);
}

ReportIndex::Listed ReportIndex::digest(const Json& report) {
  Listed listed;
  listed.resource_version = kube::resource_version_of(report);
  listed.entries = entries_of(report);
  auto status = report.find("status");
  if (status != report.end() && status->is_object()) {
    listed.heartbeat = parse_rfc3339(text(*status, "heartbeatTime"));
  }
  return listed;
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

void ReportIndex::set_node_locked(const std::string& node, Listed* listed,
                                  std::vector<std::string>& changed, bool& nodes_changed) {
  auto it = by_node_.find(node);
  if (it == by_node_.end()) {
    if (listed == nullptr) return;
    nodes_changed = true;
    it = by_node_.emplace(node, Node{}).first;
  } else if (listed != nullptr && it->second.resource_version == listed->resource_version) {
    return;  // the same report version again (relist): nothing changed
  }
  auto& old = it->second.entries;
  for (const auto& [key, entry] : old) {
    if (listed == nullptr || listed->entries.count(key) == 0) {
      changed.push_back(key);
      auto nodes = by_policy_.find(key);
      nodes->second.erase(node);
      if (nodes->second.empty()) by_policy_.erase(nodes);
    }
  }
  if (listed == nullptr) {
    by_node_.erase(it);
    nodes_changed = true;
    return;
  }
  for (const auto& [key, entry] : listed->entries) {
    auto prev = old.find(key);
    if (prev == old.end() || !(prev->second == entry)) changed.push_back(key);
    by_policy_[key].insert(node);
  }
  old = std::move(listed->entries);
  it->second.resource_version = listed->resource_version;
  if (ttl_ > kube::Duration::zero()) {
    const kube::WallTime cutoff = clock_.wall_now() - ttl_;
    const auto& before = it->second.heartbeat;
    const bool was_stale = before && *before < cutoff;
    const bool is_stale = listed->heartbeat && *listed->heartbeat < cutoff;
    if (was_stale != is_stale) nodes_changed = true;
  }
  it->second.heartbeat = listed->heartbeat;
}

void ReportIndex::begin_list() {
  listing_.clear();
}

void ReportIndex::list_item(Json item) {
  listing_[node_of(item)] = digest(item);
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
      set_node_locked(node, nullptr, changed, nodes_changed);
    } else {
      Listed listed = digest(object);
      set_node_locked(node, &listed, changed, nodes_changed);
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

std::set<std::string> ReportIndex::stale_nodes(kube::WallTime cutoff) const {
  std::lock_guard lock(mu_);
  std::set<std::string> out;
  for (const auto& [node, state] : by_node_) {
    if (state.heartbeat && *state.heartbeat < cutoff) out.insert(node);
  }
  return out;
}

size_t ReportIndex::nodes() const {
  std::lock_guard lock(mu_);
  return by_node_.size();
}

}  // namespace sonde::op
