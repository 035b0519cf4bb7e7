// libFuzzer target for sonde's wire formats (common/crd): the bytes are a JSON object whose
// "spec" is read as a ProfilingPolicy and a ClusterProfilingPolicy spec and whose "status" as a
// ProfilingNodeReport status. Malformed input must give an error, never a crash or a hang, and
// whatever parses must survive a round trip through to_json() unchanged (bound_report() included).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "common/crd/node_report.h"
#include "common/crd/profiling_policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using sonde::kube::Json;
  Json input = Json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (!input.is_object()) return 0;
  if (auto spec = input.find("spec"); spec != input.end()) {
    for (auto kind : {sonde::crd::PolicyKind::kNamespaced, sonde::crd::PolicyKind::kCluster}) {
      auto parsed = sonde::crd::parse_policy_spec(*spec, kind);
      if (parsed.ok()) {
        auto again = sonde::crd::parse_policy_spec(sonde::crd::to_json(*parsed), kind);
        if (!again.ok() || !(*again == *parsed)) std::abort();
      }
    }
  }
  if (auto status = input.find("status"); status != input.end()) {
    auto parsed = sonde::crd::parse_node_report_status(*status);
    if (parsed.ok()) {
      sonde::crd::NodeReportStatus bounded = *parsed;
      sonde::crd::bound_report(bounded, 4096);
      auto again = sonde::crd::parse_node_report_status(sonde::crd::to_json(bounded));
      if (!again.ok() || !(*again == bounded)) std::abort();
    }
  }
  return 0;
}
