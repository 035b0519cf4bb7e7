// Where, in a C library's epoll function, the wait probes go: a cheaper site than the entry
// when the function's first instructions allow it.
//
// A uprobe hit is a breakpoint trap plus, for most instructions, an out-of-line single step (a
// second, debug trap). x86-64 kernels emulate relative jumps, conditional jumps and calls
// instead of stepping them, so a probe on one costs the first trap only. glibc's epoll_wait
// and epoll_pwait begin `cmpb $0,__libc_single_threaded(%rip); mov %ecx,%r10d; je ...`: the
// `je` is such a site.
//
// Both wait programs may move there only if, at the site, they see what they would at the
// entry: the first argument (rdi: the epoll fd) and the stack pointer (the return address at
// [rsp], which the return probe swaps) unchanged, and the site reached on every path. So the
// instructions before it must be straight-line (no branch, return or system call), write
// neither rdi nor rsp (nor their sub-registers), and write no memory. Checked by decoding; any
// doubt (undecodable bytes, another instruction) keeps the entry. At most kMaxPrefix
// instructions are looked at.
//
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <span>

namespace sonde::agent {

inline constexpr int kMaxWaitSitePrefix = 4;

// The offset from the function's start (code: its first bytes) of the site, 0 for the entry.
uint32_t x86_64_wait_probe_offset(std::span<const uint8_t> code);

}  // namespace sonde::agent
