// `sonde-agent doctor`: prints the node checks and exits non-zero when the agent cannot run.
// `sonde-agent doctor --binary PATH`: what the features that instrument binaries (Go TLS) would
// do with that file, and why.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/assembly/agent_parts.h"
#include "agent/commands.h"
#include "agent/doctor/doctor.h"
#include "common/cli.h"

namespace sonde::agent {
namespace {

// Exit status 0 when every file was explained, 1 when one could not be read.
int binaries_main(const AgentFeatures& features, const std::vector<std::string>& paths, bool json) {
  int rc = 0;
  nlohmann::json all = nlohmann::json::array();
  for (size_t i = 0; i < paths.size(); ++i) {
    std::string text;
    nlohmann::json object;
    if (Status st = features.explain_binary(paths[i], text, object); !st.ok()) {
      (void)std::fprintf(stderr, "sonde-agent doctor: %s\n", st.error().message().c_str());
      rc = 1;
      continue;
    }
    if (json) {
      all.push_back(std::move(object));
    } else {
      (void)std::printf("%s%s", i > 0 ? "\n" : "", text.c_str());
    }
  }
  if (json) (void)std::printf("%s\n", all.dump(2).c_str());
  return rc;
}

}  // namespace

int doctor_main(int argc, char** argv) {
  DoctorOptions options;
  bool json = false;
  bool no_kernel_probes = false;
  CLI::App app{
      "Checks that this node can run the agent: kernel version and BTF, BPF program and map "
      "types, capabilities, uprobe/kprobe PMUs, tracefs, cgroup version, and a real load of the "
      "process-event program. Each failure says what to do. Exit status: 0 when every check "
      "passes or only warns, 1 when a check fails, 2 on usage errors.",
      "sonde-agent doctor"};
  app.add_flag("--json", json, "print one JSON object instead of a table");
  app.add_option("--proc-root", options.proc_root, "the host's /proc")->capture_default_str();
  app.add_option("--sys-root", options.sys_root, "the host's /sys")->capture_default_str();
  app.add_flag("--no-kernel-probes", no_kernel_probes,
               "skip loading probe programs into the kernel");
  const AgentFeatures features;  // outlives run_doctor(), which runs their checks
  std::vector<std::string> binaries;
  app.add_option("--binary", binaries,
                 "instead of the node checks: what Go TLS would do with this executable (its Go "
                 "version, where crypto/tls is, the probe sites or why none); repeatable");
  if (auto exit_code = cli::parse(app, argc, argv)) return *exit_code;
  if (!binaries.empty()) return binaries_main(features, binaries, json);
  options.probe_kernel = !no_kernel_probes;
  options.feature_checks = features.node_checks();
  auto checks = run_doctor(options);
  if (json) {
    (void)std::printf("%s\n", to_json(checks).dump(2).c_str());
  } else {
    (void)std::fputs(render_table(checks).c_str(), stdout);
  }
  return all_passed(checks) ? 0 : 1;
}

}  // namespace sonde::agent
