// `sonde-agent doctor`: prints the node checks and exits non-zero when the agent cannot run.
#include <cstdio>
#include <cstring>
#include <string>

#include "agent/commands.h"
#include "agent/doctor/doctor.h"

namespace sonde::agent {
namespace {

constexpr const char* kUsage =
    "Usage: sonde-agent doctor [--json] [--proc-root DIR] [--sys-root DIR] [--no-kernel-probes]\n"
    "\n"
    "Checks that this node can run the agent: kernel version and BTF, BPF program and map\n"
    "types, capabilities, uprobe/kprobe PMUs, tracefs, cgroup version, and a real load of the\n"
    "process-event program. Each failure says what to do.\n"
    "\n"
    "Options:\n"
    "  --json              print one JSON object instead of a table\n"
    "  --proc-root DIR     the host's /proc (default /proc)\n"
    "  --sys-root DIR      the host's /sys (default /sys)\n"
    "  --no-kernel-probes  skip loading probe programs into the kernel\n"
    "  -h, --help          show this help\n"
    "\n"
    "Exit status: 0 when every check passes or only warns, 1 when a check fails, 2 on usage\n"
    "errors.\n";

}  // namespace

int doctor_main(int argc, char** argv) {
  DoctorOptions options;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "sonde-agent doctor: %s needs a value\n", flag);
        return nullptr;
      }
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--no-kernel-probes") {
      options.probe_kernel = false;
    } else if (arg == "--proc-root" || arg == "--sys-root") {
      const char* v = value(arg.c_str());
      if (!v) return 2;
      (arg == "--proc-root" ? options.proc_root : options.sys_root) = v;
    } else {
      std::fprintf(stderr, "sonde-agent doctor: unknown option '%s'\n\n%s", arg.c_str(), kUsage);
      return 2;
    }
  }
  auto checks = run_doctor(options);
  if (json) {
    std::printf("%s\n", to_json(checks).dump(2).c_str());
  } else {
    std::fputs(render_table(checks).c_str(), stdout);
  }
  return all_passed(checks) ? 0 : 1;
}

}  // namespace sonde::agent
