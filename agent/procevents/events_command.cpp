// `sonde-agent events`: prints process exec/exit events as the kernel reports them, the raw
// input of the agent's process discovery (like execsnoop, without tracefs).
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/commands.h"
#include "agent/procevents/process_events.h"
#include "common/cli.h"
#include "common/signals.h"

namespace sonde::agent {
namespace {

void print(const ProcessEvent& e, bool json) {
  bool exec = e.kind == ProcessEvent::Kind::kExec;
  if (json) {
    nlohmann::json j{{"event", exec ? "exec" : "exit"},
                     {"pid", e.pid},
                     {"ppid", e.ppid},
                     {"comm", e.comm},
                     {"cgroup_id", e.cgroup_id},
                     {"timestamp_ns", e.timestamp_ns}};
    if (exec) j["filename"] = e.filename;
    if (!exec) j["exit_code"] = e.exit_code;
    (void)std::printf("%s\n", j.dump().c_str());
  } else if (exec) {
    (void)std::printf("exec pid=%u ppid=%u comm=%s filename=%s\n", e.pid, e.ppid, e.comm.c_str(),
                      e.filename.c_str());
  } else {
    (void)std::printf("exit pid=%u ppid=%u comm=%s status=%u\n", e.pid, e.ppid, e.comm.c_str(),
                      e.exit_code);
  }
  (void)std::fflush(stdout);
}

}  // namespace

int events_main(int argc, char** argv) {
  bool json = false;
  double duration = 0;
  CLI::App app{
      "Prints every process exec and exit on this host until interrupted (or for "
      "--duration seconds).",
      "sonde-agent events"};
  app.add_flag("--json", json, "one JSON object per line");
  app.add_option("--duration", duration, "stop after this many seconds")->check(cli::positive());
  if (auto exit_code = cli::parse(app, argc, argv)) return *exit_code;
  auto source = ProcessEventSource::start([json](const ProcessEvent& e) { print(e, json); });
  if (!source.ok()) {
    (void)std::fprintf(stderr, "sonde-agent events: %s\n", source.error().message().c_str());
    return 1;
  }
  StopSignals stop;
  auto deadline = duration > 0 ? StopSignals::Clock::now() +
                                     std::chrono::duration_cast<StopSignals::Clock::duration>(
                                         std::chrono::duration<double>(duration))
                               : StopSignals::Clock::time_point::max();
  while (!stop.requested() && StopSignals::Clock::now() < deadline) {
    auto n = (*source)->poll(100);
    if (!n.ok()) {
      (void)std::fprintf(stderr, "sonde-agent events: %s\n", n.error().message().c_str());
      return 1;
    }
  }
  if (auto dropped = (*source)->dropped(); dropped > 0) {
    (void)std::fprintf(stderr, "sonde-agent events: %llu events dropped (ring buffer full)\n",
                       static_cast<unsigned long long>(dropped));
  }
  return 0;
}

}  // namespace sonde::agent
