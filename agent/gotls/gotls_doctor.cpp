#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/gotls/go_tls_plan.h"
#include "agent/gotls/gotls_module.h"
#include "agent/gotls/tls_probes.h"
#include "agent/symbols/symbol_resolver.h"

namespace sonde::agent {
namespace {

// Whether --go-tls-perform-ret could take effect here. Informational either way: the feature is
// opt-in, and single-stepped RET probes work on every kernel.
Check register_writes_check() {
  Check c{.name = "uprobe register writes"};
  Status allowed = kernel_allows_uprobe_register_writes();
  c.detail = allowed.ok()
                 ? "allowed: --go-tls-perform-ret (chart: agent.goTls.performRet) would let Go TLS "
                   "RET probes perform the ret; off by default, never tested on a kernel that "
                   "allows it"
                 : "refused (" + allowed.error().message() +
                       "): Go TLS RET probes are single-stepped, --go-tls-perform-ret has no "
                       "effect";
  return c;
}

// Whether Go TLS follows HTTP/2 framing here (its walk needs bpf_loop, Linux 5.17+). A warning
// otherwise: HTTP/1.x and HTTP/2 connection counts work, HTTP/2 streams are not counted.
Check http2_framing_check() {
  Check c{.name = "Go TLS HTTP/2 streams"};
  if (TlsProbes::kernel_has_bpf_loop()) {
    c.detail = "counted: the kernel offers bpf_loop to uprobe programs";
  } else {
    c.verdict = Check::Verdict::kWarn;
    c.detail =
        "not counted: no bpf_loop for uprobe programs (Linux 5.17+); HTTP/1.x requests "
        "and HTTP/2 connections are";
    c.fix = "a kernel 5.17 or later counts HTTP/2 and gRPC requests";
  }
  return c;
}

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

std::string plan_text(const GoTlsPlan& p) {
  const GoTlsVerdict& v = p.verdict;
  std::string out = "binary        " + v.path + "\n";
  const char* verdict = !v.reported        ? "not a Go TLS user"
                        : v.instrumentable ? "instrumentable"
                                           : "not instrumentable";
  out += std::string("go tls        ") + verdict + ": " + v.reason + "\n";
  if (p.write_address != 0 || p.read_address != 0) {
    out += "found in      " + p.found_in + "\n";
    out +=
        "(*Conn).Write " + hex(p.write_address) + " (" + std::to_string(p.write_size) + " bytes)\n";
    out +=
        "(*Conn).Read  " + hex(p.read_address) + " (" + std::to_string(p.read_size) + " bytes)\n";
  }
  if (v.instrumentable) {
    out += "probes        entry " + v.entry_probe + ", return " + v.return_probe + "\n";
    for (const auto& program : p.programs) {
      std::string name = program.name;
      if (name.size() < 17) name.resize(17, ' ');
      out += "  " + name + " file offsets";
      for (const auto& site : program.sites) out += " " + hex(site.file_offset);
      out += "\n";
    }
  }
  return out;
}

}  // namespace

std::vector<Check> GoTlsModule::node_checks() const {
  return {register_writes_check(), http2_framing_check()};
}

Status GoTlsModule::explain_binary(const std::string& path, std::string& text,
                                   nlohmann::json& json) const {
  ASSIGN_OR_RETURN(const GoTlsPlan plan, plan_file(path));
  text = plan_text(plan);
  json = plan_json(plan);
  return ok_status();
}

}  // namespace sonde::agent
