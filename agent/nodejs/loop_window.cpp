#include "agent/nodejs/loop_window.h"

#include <iterator>

namespace sonde::agent {
namespace {

uint64_t minus(uint64_t a, uint64_t b) {
  return a > b ? a - b : 0;
}

LoopWindow window_of(const LoopTotals& now, const LoopTotals& base, uint64_t length_ns) {
  LoopWindow w;
  w.length_ns = length_ns;
  const uint64_t active = minus(now.active_ns, base.active_ns);
  const uint64_t idle = minus(now.idle_ns, base.idle_ns);
  if (active + idle > 0) {
    w.utilization = static_cast<double>(active) / static_cast<double>(active + idle);
  }
  w.delay = delay_stats(now.delays.since(base.delays));
  return w;
}

}  // namespace

std::map<ContainerLabels, LoopWindow> LoopWindows::observe(
    const std::map<ContainerLabels, LoopTotals>& totals, uint64_t now_ns) {
  std::erase_if(readings_, [&](const auto& r) { return !totals.contains(r.first); });
  std::map<ContainerLabels, LoopWindow> out;
  for (const auto& [labels, now] : totals) {
    auto& kept = readings_[labels];
    // The newest reading at least kWindowNs old; those before it are never a base again.
    auto base = kept.begin();
    for (auto it = kept.begin(); it != kept.end() && it->at_ns + kWindowNs <= now_ns; ++it) {
      base = it;
    }
    kept.erase(kept.begin(), base);
    if (kept.empty()) {
      out[labels] = window_of(now, LoopTotals{}, 0);
    } else {
      out[labels] = window_of(now, kept.front().totals, minus(now_ns, kept.front().at_ns));
    }
    if (kept.empty() || kept.back().at_ns + kMinSpacingNs <= now_ns) {
      kept.push_back({now_ns, now});
      if (kept.size() > kMaxReadings) kept.pop_front();
    }
  }
  return out;
}

}  // namespace sonde::agent
