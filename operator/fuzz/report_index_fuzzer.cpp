// libFuzzer target for the operator's reader of node reports (ProfilingNodeReport objects the
// agents write, i.e. JSON from every node): the fuzz bytes are one report, applied as a watch
// event, listed, and its status.policies[] entries summarized. Missing fields and wrong types
// must read as zero/empty, never crash or hang.
#include <cstddef>
#include <cstdint>
#include <string>

#include "operator/report_index.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)sonde::op::parse_rfc3339(std::string(reinterpret_cast<const char*>(data), size));
  auto report = sonde::kube::Json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded()) return 0;
  sonde::op::ReportIndex index;
  index.begin_list();
  index.list_item(report);
  index.end_list("1");
  index.apply(sonde::kube::WatchEvent::Type::kModified, report);
  for (const auto& policy : {std::string("default/p"), std::string("")}) {
    (void)index.entries_for(policy);
  }
  (void)index.stale_nodes(sonde::kube::WallTime{});
  if (report.is_object()) {
    (void)sonde::op::summarize_entry(report);
    if (auto it = report.find("heartbeatTime"); it != report.end() && it->is_string()) {
      (void)sonde::op::parse_rfc3339(it->get<std::string>());
    }
  }
  index.apply(sonde::kube::WatchEvent::Type::kDeleted, report);
  return 0;
}
