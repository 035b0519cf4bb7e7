// `sonde-agent doctor`: prints the node checks and exits non-zero when the agent cannot run.
// `sonde-agent doctor --binary PATH`: what Go TLS would do with that file, and why.
#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/assembly/agent_parts.h"
#include "agent/commands.h"
#include "agent/doctor/doctor.h"
#include "agent/gotls/go_tls_plan.h"
#include "agent/symbols/symbol_resolver.h"
#include "common/cli.h"

namespace sonde::agent {
namespace {

std::string hex(uint64_t v) {
  char buf[24];
  (void)std::snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
  return buf;
}

// The Go TLS plan of one file, from the file alone (no process, no kernel: whether the kernel
// lets a program perform a `ret` is not asked, so return probes read "single-step").
Result<GoTlsPlan> plan_file(const std::string& path) {
  ASSIGN_OR_RETURN(auto binary, symbols::OpenBinary::open(path));
  auto elf = symbols::ElfFile::parse(binary.bytes());
  if (!elf.ok()) return Error(path + ": " + elf.error().message());
  ASSIGN_OR_RETURN(auto targets, symbols::resolve(*elf, go_tls_symbol_names()));
  return plan_go_tls(binary, path, targets, /*can_perform_ret=*/false);
}

nlohmann::json plan_json(const GoTlsPlan& p) {
  nlohmann::json sites = nlohmann::json::object();
  for (const auto& program : p.programs) {
    auto& offsets = sites[program.name] = nlohmann::json::array();
    for (const auto& site : program.sites) offsets.push_back(site.file_offset);
  }
  const GoTlsVerdict& v = p.verdict;
  return {{"path", v.path},
          {"go_tls_user", v.reported},
          {"instrumentable", v.instrumentable},
          {"reason", v.reason},
          {"stripped", v.stripped},
          {"found_in", p.found_in},
          {"write", {{"address", p.write_address}, {"size", p.write_size}}},
          {"read", {{"address", p.read_address}, {"size", p.read_size}}},
          {"entry_probe", v.entry_probe},
          {"return_probe", v.return_probe},
          {"sites", sites}};
}

void print_plan(const GoTlsPlan& p) {
  const GoTlsVerdict& v = p.verdict;
  (void)std::printf("binary        %s\n", v.path.c_str());
  const char* verdict = !v.reported        ? "not a Go TLS user"
                        : v.instrumentable ? "instrumentable"
                                           : "not instrumentable";
  (void)std::printf("go tls        %s: %s\n", verdict, v.reason.c_str());
  if (p.write_address != 0 || p.read_address != 0) {
    (void)std::printf("found in      %s\n", p.found_in.c_str());
    (void)std::printf("(*Conn).Write %s (%" PRIu64 " bytes)\n", hex(p.write_address).c_str(),
                      p.write_size);
    (void)std::printf("(*Conn).Read  %s (%" PRIu64 " bytes)\n", hex(p.read_address).c_str(),
                      p.read_size);
  }
  if (v.instrumentable) {
    (void)std::printf("probes        entry %s, return %s\n", v.entry_probe.c_str(),
                      v.return_probe.c_str());
    for (const auto& program : p.programs) {
      std::string offsets;
      for (const auto& site : program.sites) offsets += " " + hex(site.file_offset);
      (void)std::printf("  %-17s file offsets%s\n", program.name, offsets.c_str());
    }
  }
}

// Exit status 0 when every file's verdict was given, 1 when one could not be read.
int binaries_main(const std::vector<std::string>& paths, bool json) {
  int rc = 0;
  nlohmann::json all = nlohmann::json::array();
  for (size_t i = 0; i < paths.size(); ++i) {
    auto plan = plan_file(paths[i]);
    if (!plan.ok()) {
      (void)std::fprintf(stderr, "sonde-agent doctor: %s\n", plan.error().message().c_str());
      rc = 1;
      continue;
    }
    if (json) {
      all.push_back(plan_json(*plan));
    } else {
      if (i > 0) (void)std::printf("\n");
      print_plan(*plan);
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
  std::vector<std::string> binaries;
  app.add_option("--binary", binaries,
                 "instead of the node checks: what Go TLS would do with this executable (its Go "
                 "version, where crypto/tls is, the probe sites or why none); repeatable");
  if (auto exit_code = cli::parse(app, argc, argv)) return *exit_code;
  if (!binaries.empty()) return binaries_main(binaries, json);
  options.probe_kernel = !no_kernel_probes;
  const AgentFeatures features;  // outlives run_doctor(), which runs their checks
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
