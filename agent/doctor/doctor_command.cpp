// `sonde-agent doctor`: prints the node checks and exits non-zero when the agent cannot run.
#include <cstdio>
#include <string>

#include "agent/commands.h"
#include "agent/doctor/doctor.h"
#include "common/cli.h"

namespace sonde::agent {

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
  if (auto exit_code = cli::parse(app, argc, argv)) return *exit_code;
  options.probe_kernel = !no_kernel_probes;
  auto checks = run_doctor(options);
  if (json) {
    (void)std::printf("%s\n", to_json(checks).dump(2).c_str());
  } else {
    (void)std::fputs(render_table(checks).c_str(), stdout);
  }
  return all_passed(checks) ? 0 : 1;
}

}  // namespace sonde::agent
