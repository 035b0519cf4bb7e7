#include <string>

#include "agent/gotls/gotls_module.h"
#include "agent/gotls/tls_probes.h"

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

}  // namespace

std::vector<Check> GoTlsModule::node_checks() const {
  return {register_writes_check(), http2_framing_check()};
}

}  // namespace sonde::agent
