#include "agent/gotls/go_tls_verdicts.h"

namespace sonde::agent {

std::optional<GoTlsPlan> GoTlsVerdicts::find(const std::string& key) const {
  auto it = plans_.find(key);
  if (it == plans_.end()) return std::nullopt;
  return it->second;
}

void GoTlsVerdicts::remember(const std::string& key, const GoTlsPlan& plan) {
  if (plans_.size() >= kMaxVerdicts) plans_.erase(plans_.begin());
  plans_.emplace(key, plan);
}

void GoTlsVerdicts::replace(const std::string& key, const GoTlsPlan& plan) {
  plans_.erase(key);
  remember(key, plan);
}

bool GoTlsVerdicts::exceed_limit(const std::string& key, const std::string& why) {
  auto it = plans_.find(key);
  if (it == plans_.end()) return false;
  const bool first = it->second.verdict.limit_exceeded.empty();
  it->second.verdict.limit_exceeded = why;
  return first;
}

void GoTlsVerdicts::within_limit(const std::string& key) {
  if (auto it = plans_.find(key); it != plans_.end()) it->second.verdict.limit_exceeded = "";
}

std::vector<GoTlsVerdict> GoTlsVerdicts::reported() const {
  std::vector<GoTlsVerdict> out;
  for (const auto& [key, plan] : plans_) {
    if (plan.verdict.reported) out.push_back(plan.verdict);
  }
  return out;
}

}  // namespace sonde::agent
