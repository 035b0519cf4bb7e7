// What Go TLS would attach to one executable file, or why it will not: the verdict and the
// probe sites, decided from the file alone (no process, no kernel), so that the agent
// (TlsMonitor, once per binary identity) and `sonde-agent doctor --binary` say the same thing.
//
// A binary is a candidate when it has crypto/tls.(*Conn).Write or .Read, found in its symbol
// table or, when stripped (`-ldflags=-s -w`), in its Go function table read by
// symbolize::GoBinary (the one reader of Go binaries: text start, layout, version). It is
// instrumentable when both are present, Read has return sites, and its Go version uses the
// register ABI on this architecture. The code is read with pread from the identified file (see
// plan_go_tls()), never through a mapping, and decoded by probe_sites.h.
//
// Cost: one ELF parse, and for a stripped binary one function-table parse without index plus
// two linear name scans; two functions decoded. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/gotls/tls_probes.h"
#include "agent/kernel/uprobe_links.h"
#include "agent/symbols/binary_identity.h"
#include "agent/symbols/probe_target_cache.h"

namespace sonde::agent {

struct GoTlsVerdict {
  std::string path;
  std::string build_id;  // BinaryIdentity digest (hex): tells two binaries at one path apart
  bool instrumentable = false;
  bool reported = true;   // false for files that simply do not use crypto/tls
  std::string reason;     // why not, or the Go version when instrumentable
  bool stripped = false;  // found through .gopclntab (no .symtab)
  // Probe kinds when instrumentable: "emulated-jump" (the stack check's jbe) or
  // "single-step" (first instruction); "bpf-ret" (the program performs the ret) or
  // "single-step".
  std::string entry_probe, return_probe;
  // Instrumentable, but its last process considered was left out by the node's budget (why);
  // empty once a process of it is instrumented (TlsMonitor sets it).
  std::string limit_exceeded;
};

// One program's sites in one binary: one SharedUprobes attachment.
struct GoTlsProgramSites {
  TlsCounters::Program program;
  const char* name;
  std::vector<UprobeSite> sites;
};

struct GoTlsPlan {
  GoTlsVerdict verdict;
  std::vector<GoTlsProgramSites> programs;  // empty unless instrumentable
  // Where (*Conn).Write and .Read are (virtual address, size), 0 when not found; and where the
  // addresses came from: "symbol table" or "function table (text start from <source>)".
  uint64_t write_address = 0, write_size = 0, read_address = 0, read_size = 0;
  std::string found_in;
  size_t sites() const;  // uprobes
};

// crypto/tls.(*Conn).Write and .Read, in this order: what the symbol lookups are for.
const std::vector<std::string>& go_tls_symbol_names();

// Whether `binary` may use Go TLS: one of the symbols was found, or it looks like a Go binary
// whose function table may hold them (a cheap look at section names).
bool may_use_go_tls(const symbols::OpenBinary& binary,
                    const std::vector<symbols::ProbeTarget>& targets);

// `targets`: go_tls_symbol_names() resolved in binary's symbol table (ProbeTargetCache).
// `can_perform_ret`: the kernel lets a uprobe program perform a `ret` (TlsCounters).
GoTlsPlan plan_go_tls(const symbols::OpenBinary& binary, const std::string& exe,
                      const std::vector<symbols::ProbeTarget>& targets, bool can_perform_ret);

}  // namespace sonde::agent
