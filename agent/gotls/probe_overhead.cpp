#include "agent/gotls/probe_overhead.h"

#include <cerrno>
#include <charconv>

#include "agent/discovery/proc_reader.h"
#include "common/files.h"
#include "common/unique_fd.h"

namespace sonde::agent {

ProbeSiteKind probe_site_kind(sonde_gotls_site site) {
  switch (site) {
    case SONDE_GOTLS_SITE_ENTRY_EMULATED: return {"entry", "emulated"};
    case SONDE_GOTLS_SITE_ENTRY_SINGLE_STEP: return {"entry", "single_step"};
    case SONDE_GOTLS_SITE_RETURN_SINGLE_STEP: return {"return", "single_step"};
    case SONDE_GOTLS_SITE_RETURN_BPF_RET:
    case SONDE_GOTLS_SITE_COUNT: break;
  }
  return {"return", "bpf_ret"};
}

double probe_cpu_seconds(const std::array<uint64_t, SONDE_GOTLS_SITE_COUNT>& hits,
                         const UprobeHitCosts& costs) {
  double ns = 0;
  for (size_t site = 0; site < hits.size(); ++site) {
    const bool single_step =
        site == SONDE_GOTLS_SITE_ENTRY_SINGLE_STEP || site == SONDE_GOTLS_SITE_RETURN_SINGLE_STEP;
    ns +=
        static_cast<double>(hits[site]) * (single_step ? costs.single_step_ns : costs.emulated_ns);
  }
  return ns / 1e9;
}

std::optional<std::string> cgroup2_path(std::string_view text) {
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (!line.starts_with("0::")) continue;
    std::string_view path = line.substr(3);
    if (!path.starts_with('/') || path.find("/..") != std::string_view::npos) return std::nullopt;
    return std::string(path);
  }
  return std::nullopt;
}

std::optional<uint64_t> cpu_stat_usage_usec(std::string_view text) {
  constexpr std::string_view kKey = "usage_usec ";
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (!line.starts_with(kKey)) continue;
    line.remove_prefix(kKey.size());
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
    if (ec != std::errc() || ptr != line.data() + line.size()) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

Result<double> cgroup_cpu_seconds(const std::string& proc_root, const std::string& cgroup2_root,
                                  pid_t pid) {
  ASSIGN_OR_RETURN(auto cgroup,
                   read_file(proc_root + "/" + std::to_string(pid) + "/cgroup", 64 << 10));
  auto path = cgroup2_path(cgroup);
  if (!path) {
    return Error("the cgroup v2 of process " + std::to_string(pid) +
                 " is not below this agent's cgroup root");
  }
  const std::string file = cgroup2_root + (*path == "/" ? "" : *path) + "/cpu.stat";
  ASSIGN_OR_RETURN(auto stat, read_file(file, 64 << 10));
  auto usec = cpu_stat_usage_usec(stat);
  if (!usec) return Error(file + ": no usage_usec");
  return static_cast<double>(*usec) / 1e6;
}

Result<double> cgroup_cpu_seconds_by_id(const std::string& cgroup2_root, uint64_t cgroup_id) {
  ASSIGN_OR_RETURN(UniqueFd dir, open_cgroup2_by_id(cgroup2_root, cgroup_id));
  const std::string file = "/proc/self/fd/" + std::to_string(dir.get()) + "/cpu.stat";
  auto stat = read_file(file, 64 << 10);
  if (!stat.ok()) return stat.error().wrap("cgroup " + std::to_string(cgroup_id));
  auto usec = cpu_stat_usage_usec(*stat);
  if (!usec) return Error("cgroup " + std::to_string(cgroup_id) + ": cpu.stat has no usage_usec");
  return static_cast<double>(*usec) / 1e6;
}

}  // namespace sonde::agent
