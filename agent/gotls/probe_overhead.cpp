#include "agent/gotls/probe_overhead.h"

namespace sonde::agent {

ProbeSiteKind probe_site_kind(sonde_gotls_site site) {
  switch (site) {
    case SONDE_GOTLS_SITE_ENTRY_EMULATED:
      return {"entry", "emulated"};
    case SONDE_GOTLS_SITE_ENTRY_SINGLE_STEP:
      return {"entry", "single_step"};
    case SONDE_GOTLS_SITE_RETURN_SINGLE_STEP:
      return {"return", "single_step"};
    case SONDE_GOTLS_SITE_RETURN_BPF_RET:
    case SONDE_GOTLS_SITE_COUNT:
      break;
  }
  return {"return", "bpf_ret"};
}

double probe_cpu_seconds(const std::array<uint64_t, SONDE_GOTLS_SITE_COUNT>& hits,
                         const UprobeHitCosts& costs) {
  double ns = 0;
  for (size_t site = 0; site < hits.size(); ++site) {
    const bool single_step = site == SONDE_GOTLS_SITE_ENTRY_SINGLE_STEP ||
                             site == SONDE_GOTLS_SITE_RETURN_SINGLE_STEP;
    ns += static_cast<double>(hits[site]) * (single_step ? costs.single_step_ns : costs.emulated_ns);
  }
  return ns / 1e9;
}

}  // namespace sonde::agent
