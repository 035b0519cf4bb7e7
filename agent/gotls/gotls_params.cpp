#include "agent/gotls/gotls_params.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace sonde {

void GoTlsParams::write_json(nlohmann::json& out) const {
  out = nlohmann::json::object();
}

namespace kinds {

Result<InstrumentationParams> parse_go_tls(const nlohmann::json& value, ParamsSource source,
                                           const std::string& path) {
  ASSIGN_OR_RETURN(const InstrumentationParams asked, parse_switch(value, source, path));
  if (!asked) return asked;
  return InstrumentationParams::make(GoTlsParams{});
}

InstrumentationParams merge_go_tls(const InstrumentationParams& a, const InstrumentationParams& b) {
  const auto& pa = a.as<GoTlsParams>();
  const auto& pb = b.as<GoTlsParams>();
  GoTlsParams out = pa;
  out.uprobe_limits.insert(pb.uprobe_limits.begin(), pb.uprobe_limits.end());
  if (pb.overhead_budget) {
    auto& budget = out.overhead_budget;
    if (!budget) {
      budget = pb.overhead_budget;
    } else {
      budget->max_percent = std::min(budget->max_percent, pb.overhead_budget->max_percent);
      budget->epoch += "," + pb.overhead_budget->epoch;
    }
  }
  return InstrumentationParams::make(std::move(out));
}

InstrumentationParams limit_go_tls(const InstrumentationParams& asked, const Asker& asker) {
  GoTlsParams p = asked.as<GoTlsParams>();
  if (asker.max_uprobes_per_node) p.uprobe_limits[asker.name] = *asker.max_uprobes_per_node;
  if (asker.max_overhead_percent) {
    p.overhead_budget = OverheadBudget{
        *asker.max_overhead_percent,
        asker.generation ? asker.name + "@" + std::to_string(*asker.generation) : asker.name};
  }
  return InstrumentationParams::make(std::move(p));
}

}  // namespace kinds
}  // namespace sonde
