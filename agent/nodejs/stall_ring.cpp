#include "agent/nodejs/stall_ring.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "common/rfc3339.h"

namespace sonde::agent {
namespace {

// Cuts `name` to kMaxNameBytes on a UTF-8 boundary (a tenant's function names are arbitrary).
bool cut_name(std::string& name) {
  if (name.size() <= StallRing::kMaxNameBytes) return false;
  size_t end = StallRing::kMaxNameBytes - 3;
  while (end > 0 && (static_cast<unsigned char>(name[end]) & 0xc0) == 0x80) --end;
  name.resize(end);
  name += "...";
  return true;
}

}  // namespace

void StallRing::add(Stall stall) {
  uint64_t cut = 0;
  std::stable_sort(stall.stacks.begin(), stall.stacks.end(),
                   [](const StallStack& a, const StallStack& b) { return a.samples > b.samples; });
  if (stall.stacks.size() > kMaxStacks) {
    cut += stall.stacks.size() - kMaxStacks;
    stall.stacks.resize(kMaxStacks);
  }
  for (auto& s : stall.stacks) {
    if (s.frames.size() > kMaxFrames) {
      cut += s.frames.size() - kMaxFrames;
      s.frames.resize(kMaxFrames);
    }
    for (auto& f : s.frames) cut += cut_name(f) ? 1 : 0;
  }
  std::lock_guard lock(mu_);
  truncated_ += cut;
  if (capacity_ == 0) {
    ++evicted_;
    return;
  }
  while (stalls_.size() >= capacity_) {
    stalls_.pop_front();
    ++evicted_;
  }
  stalls_.push_back(std::move(stall));
}

std::string StallRing::to_json(const Filter& filter) const {
  using Json = nlohmann::json;
  std::lock_guard lock(mu_);
  Json list = Json::array();
  for (const Stall& s : stalls_) {
    if ((filter.namespace_name && *filter.namespace_name != s.labels.namespace_name) ||
        (filter.pod && *filter.pod != s.labels.pod) ||
        (filter.container && *filter.container != s.labels.container)) {
      continue;
    }
    Json stacks = Json::array();
    for (const auto& st : s.stacks)
      stacks.push_back({{"samples", st.samples}, {"frames", st.frames}});
    list.push_back(
        {{"namespace", s.labels.namespace_name},
         {"pod", s.labels.pod},
         {"container", s.labels.container},
         {"pid", s.pid},
         {"start", format_rfc3339(WallTime(std::chrono::duration_cast<WallTime::duration>(
                                      std::chrono::nanoseconds(s.start_unix_ns))),
                                  3)},
         // Microsecond precision, in milliseconds.
         {"durationMs", std::round(static_cast<double>(s.duration_ns) / 1e3) / 1e3},
         {"thresholdMs", s.threshold_ns / 1'000'000},
         {"ongoing", s.ongoing},
         {"samples", s.samples},
         {"stacks", std::move(stacks)}});
  }
  Json out = {{"capacity", capacity_}, {"evicted", evicted_}, {"stalls", std::move(list)}};
  // Names come from tenants' binaries and heaps: invalid UTF-8 is replaced, never thrown on.
  return out.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

size_t StallRing::size() const {
  std::lock_guard lock(mu_);
  return stalls_.size();
}

uint64_t StallRing::evicted() const {
  std::lock_guard lock(mu_);
  return evicted_;
}

uint64_t StallRing::truncated() const {
  std::lock_guard lock(mu_);
  return truncated_;
}

}  // namespace sonde::agent
