// Uprobe links: how the agent's uprobe programs attach to the sites of one file, chosen once per
// kernel.
//
// Each link is a file descriptor the agent holds while the probe lives (DESIGN: count them
// against RLIMIT_NOFILE). Since Linux 6.6 one uprobe_multi link (BPF_TRACE_UPROBE_MULTI) carries
// every site of one program in one file, each site with its own bpf_get_attach_cookie() value: a
// single descriptor, and a single RCU grace period at detach. Older kernels get one perf-event
// uprobe per site: a perf event and, where the kernel has BPF perf links, a link descriptor each.
// The choice is made by probing the kernel once (uprobe_link_support()); a program that will be
// attached through uprobe_multi must be loaded for it (prepare_uprobe_program(), before load).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "agent/kernel/bpf_helpers.h"
#include "common/result.h"

struct bpf_program;

namespace sonde::agent {

enum class UprobeLinkKind {
  kMulti,   // one uprobe_multi link per (program, file)
  kSingle,  // one perf-event uprobe link per site
};

struct UprobeLinkSupport {
  UprobeLinkKind kind = UprobeLinkKind::kSingle;
  std::string why;  // for logs and doctor: what the probe saw
};
// Probed once per agent process (a trial link creation that cannot attach anything) and cached;
// thread-safe.
const UprobeLinkSupport& uprobe_link_support();

// "uprobe_multi" or "single".
const char* uprobe_link_kind_name(UprobeLinkKind kind);

// Before the program is loaded: makes it attachable with links of `kind` (a uprobe_multi program
// is loaded with the BPF_TRACE_UPROBE_MULTI attach type, and cannot then be a perf-event uprobe).
void prepare_uprobe_program(bpf_program* program, UprobeLinkKind kind);

struct UprobeSite {
  uint64_t file_offset = 0;
  uint64_t cookie = 0;  // what bpf_get_attach_cookie() returns at this site
};

// Where a probe fires: at the site itself, or (a uretprobe) when the function entered at the site
// returns, through a return address the kernel swaps in at the entry. Return probes are for C
// code only: Go moves its stacks, and a swapped return address then crashes the program.
enum class UprobeFires { kAtSite, kOnReturn };

// Attaches `program` at every site of the file at `path`: one attachment holding one link
// (kMulti) or one per site (kSingle). All sites or none: on failure the links made so far are
// closed before returning (each close may wait for a grace period). The error names program,
// file and the site that failed.
// `pid` < 0: every process that maps the file (callers filter per process in the kernel); the
// kernel writes the breakpoint into each of them. `pid` > 0: that process only (a uprobe_multi
// link's pid, or a perf event bound to that task); the uprobe's filter keeps the breakpoint out
// of every other address space mapping the file (checked: loop_probes_bpf_test).
Result<std::unique_ptr<Attachment>> attach_uprobes(bpf_program* program, UprobeLinkKind kind,
                                                   const std::string& path,
                                                   std::span<const UprobeSite> sites,
                                                   UprobeFires fires = UprobeFires::kAtSite,
                                                   pid_t pid = -1);

// The most descriptors attach_uprobes() of `sites` sites holds while attached.
size_t uprobe_link_fds(UprobeLinkKind kind, size_t sites);

}  // namespace sonde::agent
