// libFuzzer target for the /proc text parsers behind ProcReader: cgroup paths to container ids
// and the cgroup v2 path, the cgroup2 mount in mounts, stat's start time, a thread's syscall line
// and the executable's load base in maps. The text comes from processes the tenant controls (comm
// names, paths, cgroup names). Any crash, sanitizer report or hang is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/discovery/proc_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)sonde::agent::container_id_from_cgroup(text);
  (void)sonde::agent::cgroup2_mount(text);
  (void)sonde::agent::parse_stat_start_time(text);
  (void)sonde::agent::parse_syscall(text);
  // The executable path is the last field of some line: take the input's last line's tail.
  const size_t space = text.rfind(' ');
  const std::string_view exe = space == std::string_view::npos ? text : text.substr(space + 1);
  (void)sonde::agent::exe_mapping_from_maps(text, exe);
  (void)sonde::agent::exe_mapping_from_maps(text, "/usr/bin/node");
  return 0;
}
