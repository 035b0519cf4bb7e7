// libFuzzer target for the operator's reader of node reports (ProfilingNodeReport objects the
// agents write, i.e. JSON from every node): the fuzz bytes are one report, applied as a watch
// event and listed, and the entries read back. A malformed report must count as a node
// without entries, never crash or hang.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/rfc3339.h"
#include "operator/report_index.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)sonde::parse_rfc3339(std::string(reinterpret_cast<const char*>(data), size));
  auto report = sonde::kube::Json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded()) return 0;
  sonde::op::ReportIndex index;
  index.begin_list();
  index.list_item(report);
  index.end_list("1");
  index.apply(sonde::kube::WatchEvent::Type::kModified, report);
  index.set_heartbeat("n1", sonde::WallTime{});
  for (const auto& uid : {std::string("u1"), std::string("")}) (void)index.entries_for(uid);
  (void)index.stale_nodes(sonde::WallTime{});
  index.apply(sonde::kube::WatchEvent::Type::kDeleted, report);
  return 0;
}
