#include "agent/runtime/health.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace sonde::agent {
namespace {

std::string seconds(uint64_t ns) {
  char buf[32];
  (void)std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ns) / 1e9);
  return buf;
}

}  // namespace

HealthRegistry::HealthRegistry(const Clock& clock) : clock_(clock) {}

HealthRegistry::CheckId HealthRegistry::add(std::string name, Probe probe,
                                            std::chrono::nanoseconds stale_after,
                                            std::string silence) {
  const uint64_t now = clock_.now_ns();
  std::lock_guard lock(mu_);
  Entry e;
  e.name = std::move(name);
  e.probe = probe;
  e.stale_after_ns = static_cast<uint64_t>(std::max<int64_t>(0, stale_after.count()));
  e.last_beat_ns = now;
  e.silence = std::move(silence);
  e.pending_since_ns = now;
  entries_.push_back(std::move(e));
  return entries_.size() - 1;
}

void HealthRegistry::add_gate(std::string name, Probe probe, std::function<bool()> passed,
                              std::string pending, uint64_t since_ns) {
  const CheckId id = add(std::move(name), probe);
  std::lock_guard lock(mu_);
  Entry& e = entries_[id];
  e.gate = std::move(passed);
  e.pending = std::move(pending);
  if (since_ns != 0) e.pending_since_ns = since_ns;
}

void HealthRegistry::beat(CheckId id) {
  const uint64_t now = clock_.now_ns();
  std::lock_guard lock(mu_);
  entries_.at(id).last_beat_ns = now;
}

void HealthRegistry::set_problem(CheckId id, std::string problem) {
  const uint64_t now = clock_.now_ns();
  std::lock_guard lock(mu_);
  Entry& e = entries_.at(id);
  if (e.problem == problem) return;
  if (e.problem.empty()) e.problem_since_ns = now;
  e.problem = std::move(problem);
}

void HealthRegistry::clear_problem(CheckId id) {
  std::lock_guard lock(mu_);
  entries_.at(id).problem.clear();
}

HealthRegistry::Answer HealthRegistry::check(Probe probe) const {
  const uint64_t now = clock_.now_ns();
  auto age = [now](uint64_t since) { return now > since ? now - since : 0; };
  Answer answer;
  std::lock_guard lock(mu_);
  for (Entry& e : entries_) {
    if (probe == Probe::kLiveness && e.probe != Probe::kLiveness) continue;
    std::vector<std::string> why;
    if (e.gate) {
      if (e.gate()) {
        e.gate = nullptr;
      } else {
        why.push_back(e.pending + " (for " + seconds(age(e.pending_since_ns)) + ")");
      }
    }
    if (e.stale_after_ns > 0 && age(e.last_beat_ns) > e.stale_after_ns) {
      why.push_back(e.silence + " for " + seconds(age(e.last_beat_ns)) + " (limit " +
                    seconds(e.stale_after_ns) + ")");
    }
    if (!e.problem.empty()) {
      why.push_back(e.problem + " (for " + seconds(age(e.problem_since_ns)) + ")");
    }
    if (why.empty()) {
      answer.body += "[+]" + e.name + " ok\n";
      continue;
    }
    answer.ok = false;
    answer.body += "[-]" + e.name + ":";
    for (size_t i = 0; i < why.size(); ++i) answer.body += (i ? "; " : " ") + why[i];
    answer.body += "\n";
  }
  answer.body += answer.ok ? "ok\n" : "failed\n";
  return answer;
}

}  // namespace sonde::agent
