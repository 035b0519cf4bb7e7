// What a uprobe hit adds to the probed call on this node, by the kind of site: an instruction
// the kernel emulates (a jump: the Go TLS entry probes on the stack check's `jbe`) or one it
// single-steps out of line (the RETs of (*Conn).Read, a function's first instruction). The
// figures depend on the CPU, the kernel and its mitigations, so the agent measures them once at
// start instead of shipping a table: the per-hit costs behind "what sonde costs a workload".
//
// How: a uprobe on each of two functions of the agent's own binary (x86-64 assembly: `jmp` to the
// next instruction; `cmp`), for the agent's process only, each called `calls` times with and
// without the probe; the difference over `calls` is the cost of one hit. The BPF program counts
// its hits, and a count other than 3 × `calls` (three runs each) is an error, never a figure.
// Cost at the default: 15,000 probed calls of each kind (~1 µs emulated, ~13 µs single-stepped
// here) and two uprobe attaches and detaches (a kernel grace period each): ~0.3 s of start-up.
#pragma once

#include "common/result.h"

namespace sonde::agent {

struct UprobeHitCosts {
  double emulated_ns = 0;     // added per hit at an emulated instruction
  double single_step_ns = 0;  // added per hit at a single-stepped one
};

inline constexpr int kUprobeCostCalls = 5000;

// An error where uprobes cannot be created (privileges, kernel) or on other architectures
// (the probe targets are x86-64 assembly).
Result<UprobeHitCosts> measure_uprobe_hit_costs(int calls = kUprobeCostCalls);

}  // namespace sonde::agent
