#include "agent/gotls/uprobe_budget.h"

#include <iterator>
#include <utility>

namespace sonde::agent {

UprobeBudget::UprobeBudget(TlsMonitorBudget budget, const SharedUprobes& uprobes)
    : node_(budget), uprobes_(uprobes) {}

std::optional<UprobeBudget::Refusal> UprobeBudget::use(pid_t pid, const std::string& key,
                                                       size_t sites, size_t fds, bool attached,
                                                       const Limits& limits,
                                                       const std::string& exe) {
  if (!attached && !instrumented_.contains(key)) {
    if (auto refused = over_node(fds, exe)) {
      not_instrumented_[refused->reason]++;
      return Refusal{Refusal::Bound::kNode, std::move(refused->why)};
    }
  }
  if (auto why = over_policy(key, sites, limits, exe)) {
    return Refusal{Refusal::Bound::kPolicy, std::move(*why)};
  }
  instrumented_[key].insert(pid);
  attaching_fds_ += fds;
  for (const auto& [policy, limit] : limits) {
    auto& u = policy_use_[policy];
    auto [b, fresh] = u.binaries.try_emplace(key);
    if (fresh) {
      b->second.sites = sites;
      u.in_use += sites;
    }
    b->second.pids.insert(pid);
  }
  return std::nullopt;
}

void UprobeBudget::attach_done(size_t fds) {
  attaching_fds_ -= fds;
}

void UprobeBudget::unuse(pid_t pid, const std::string& key) {
  if (auto it = instrumented_.find(key); it != instrumented_.end()) {
    it->second.erase(pid);
    if (it->second.empty()) instrumented_.erase(it);
  }
  for (auto p = policy_use_.begin(); p != policy_use_.end();) {
    auto& u = p->second;
    for (auto b = u.binaries.begin(); b != u.binaries.end();) {
      if (b->second.pids.erase(pid) > 0 && b->second.pids.empty()) {
        u.in_use -= b->second.sites;
        b = u.binaries.erase(b);
      } else {
        ++b;
      }
    }
    p = u.binaries.empty() ? policy_use_.erase(p) : std::next(p);
  }
}

std::map<std::string, size_t> UprobeBudget::policy_uprobes() const {
  std::map<std::string, size_t> out;
  for (const auto& [policy, u] : policy_use_) out[policy] = u.in_use;
  return out;
}

std::optional<UprobeBudget::NodeRefusal> UprobeBudget::over_node(size_t fds,
                                                                 const std::string& exe) const {
  const size_t idle = uprobes_.idle_binaries();
  if (instrumented_.size() + idle >= node_.max_binaries) {
    return NodeRefusal{"binary_limit", "not instrumented: " + std::to_string(instrumented_.size()) +
                                           " Go TLS binaries are instrumented on this node (and " +
                                           std::to_string(idle) +
                                           " kept after their last exit), the most "
                                           "--max-go-tls-binaries allows; " +
                                           exe + " would be one more"};
  }
  if (node_.fds != nullptr && fds > 0) {
    auto open = node_.fds->open();
    const uint64_t limit = node_.fds->soft_limit();
    if (!open.ok() || *open + attaching_fds_ + fds + kFdReserve > limit) {
      return NodeRefusal{
          "fd_reserve",
          "not instrumented: " + exe + " needs " + std::to_string(fds) +
              " descriptors and the agent keeps " + std::to_string(kFdReserve) +
              " of its soft RLIMIT_NOFILE (" + std::to_string(limit) + ") free; open now: " +
              (open.ok() ? std::to_string(*open + attaching_fds_) : open.error().message())};
    }
  }
  return std::nullopt;
}

std::optional<std::string> UprobeBudget::over_policy(const std::string& key, size_t sites,
                                                     const Limits& limits,
                                                     const std::string& exe) const {
  for (const auto& [policy, limit] : limits) {
    auto u = policy_use_.find(policy);
    const size_t in_use = u == policy_use_.end() ? 0 : u->second.in_use;
    if (u != policy_use_.end() && u->second.binaries.contains(key)) continue;
    if (static_cast<int64_t>(in_use + sites) <= limit) continue;
    return "not instrumented: policy " + policy + " allows limits.maxUprobesPerNode (" +
           std::to_string(limit) + ") on this node and uses " + std::to_string(in_use) + "; " +
           exe + " needs " + std::to_string(sites) + " more";
  }
  return std::nullopt;
}

}  // namespace sonde::agent
