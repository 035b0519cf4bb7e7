#include "agent/runtime/container_totals.h"

#include <algorithm>

namespace sonde::agent {

void ContainerTotals::started(const ContainerLabels& labels) {
  containers_[labels].processes++;
}

void ContainerTotals::finished(const ContainerLabels& labels, uint64_t final_value,
                               uint64_t now_ns) {
  auto& c = containers_[labels];
  c.finished += final_value;
  if (c.processes > 0) --c.processes;
  if (c.processes == 0) c.empty_since_ns = now_ns;
}

std::vector<ContainerTotals::Total> ContainerTotals::report(
    const std::map<ContainerLabels, uint64_t>& live, uint64_t now_ns) {
  std::erase_if(containers_, [&](const auto& entry) {
    const Container& c = entry.second;
    return c.processes == 0 && now_ns >= c.empty_since_ns + grace_ns_;
  });
  std::vector<Total> out;
  out.reserve(containers_.size());
  for (auto& [labels, c] : containers_) {
    auto l = live.find(labels);
    uint64_t value = c.finished + (l == live.end() ? 0 : l->second);
    c.reported = std::max(c.reported, value);
    out.push_back({labels, c.reported, c.processes});
  }
  return out;
}

}  // namespace sonde::agent
