// sonde-agent: the eBPF node agent. `sonde-agent COMMAND [ARGS]`; see --help.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "agent/cluster/cluster_main.h"
#include "agent/commands.h"
#include "agent/standalone/standalone.h"
#include "agent/symbolize/symbolize_command.h"
#include "common/version.h"

namespace {

struct Command {
  const char* name;
  int (*main)(int, char**);
  const char* summary;
};

constexpr Command kCommands[] = {
    {"doctor", sonde::agent::doctor_main, "check that this node can run the agent"},
    {"events", sonde::agent::events_main, "print process exec/exit events from the kernel"},
    {"profile", sonde::agent::profile_main, "CPU profile of this host or of some processes"},
    {"symbols", sonde::agent::symbols_main, "resolve probe targets (address, returns) in a binary"},
    {"symbolize", sonde::agent::symbolize_main, "addresses to functions, files and lines"},
};

void usage(FILE* out) {
  (void)std::fprintf(out,
                     "Usage: sonde-agent --cluster [OPTIONS]\n"
                     "       sonde-agent --standalone [OPTIONS]\n"
                     "       sonde-agent COMMAND [OPTIONS]\n"
                     "\n"
                     "The sonde eBPF node agent. --cluster runs it in Kubernetes, driven by\n"
                     "ProfilingPolicies (the default with no arguments inside a pod; see\n"
                     "'sonde-agent --cluster --help'); --standalone runs it on this host without\n"
                     "Kubernetes (see 'sonde-agent --standalone --help').\n"
                     "\n"
                     "Commands:\n");
  for (const auto& c : kCommands) (void)std::fprintf(out, "  %-12s %s\n", c.name, c.summary);
  (void)std::fprintf(out,
                     "\n"
                     "Options:\n"
                     "  -h, --help      show this help\n"
                     "  -V, --version   show the version\n"
                     "\n"
                     "Run 'sonde-agent COMMAND --help' for a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    if (std::getenv("KUBERNETES_SERVICE_HOST")) return sonde::agent::cluster_main(argc, argv);
    usage(stderr);
    return 2;
  }
  std::string_view cmd = argv[1];
  if (cmd == "--cluster") return sonde::agent::cluster_main(argc - 1, argv + 1);
  if (cmd == "--standalone") return sonde::agent::standalone_main(argc - 1, argv + 1);
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    usage(stdout);
    return 0;
  }
  if (cmd == "-V" || cmd == "--version") {
    (void)std::printf("sonde-agent %s\n", sonde::kVersion);
    return 0;
  }
  for (const auto& c : kCommands) {
    if (cmd == c.name) return c.main(argc - 1, argv + 1);
  }
  (void)std::fprintf(stderr, "sonde-agent: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
